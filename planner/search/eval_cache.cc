// Once-per-key work of a layout search (see eval_cache.h).
#include "planner/search/eval_cache.h"

#include <algorithm>

#include "planner/cost/deepep.h"
#include "planner/routing/received_rows.h"
#include "planner/routing/flex_counts.h"

namespace dockyard {

void SearchEvalCache::ExpectTokenCounts(const std::vector<int64_t>& tokens_per_rank) {
  std::lock_guard<std::mutex> lock(sampler_mu_);
  sampler_.ExpectTokenCounts(tokens_per_rank);
}

void SearchEvalCache::ExpectFlexGroups(const std::vector<int64_t>& tokens_per_rank, const std::vector<FlexBlockNeed>& block_needs) {
  flex_blocks_ = std::make_unique<const FlexBlockLayout>(MakeFlexBlockLayout(model().num_experts, tokens_per_rank, block_needs));
  ready_sources_ = flex_blocks_->sources.empty() ? 0 : *std::max_element(flex_blocks_->sources.begin(), flex_blocks_->sources.end());
  const int64_t entries = std::max<int64_t>(0, model().num_layers) * ready_sources_;
  source_ready_ = std::make_unique<std::atomic<const std::vector<int32_t>*>[]>(static_cast<size_t>(entries));
  for (int64_t i = 0; i < entries; ++i) source_ready_[static_cast<size_t>(i)].store(nullptr, std::memory_order_relaxed);
}

const RoutingResult& SearchEvalCache::Routing(int64_t ep, int64_t routed_tokens, int64_t oep, bool* filled) {
  return routing_.Get(
      std::make_tuple(ep, routed_tokens, oep),
      [&] {
        // Where the deepep block counts hold every rank's per-expert counts, the same draws give
        // the sample (no second draw of the streams).
        const int64_t at = flex_blocks_ ? ExpertCountsAt(*flex_blocks_, routed_tokens, ep) : -1;
        if (at >= 0) {
          ++routing_from_blocks_;
          FillSources(ep);
          return AssembleRoutingFromCounts(model(), ep, routed_tokens, oep,
                                           [&](int64_t layer, int64_t rank) { return SourceBlocks(layer, rank).data() + at; });
        }
        std::lock_guard<std::mutex> lock(sampler_mu_);
        return sampler_.Sample(ep, routed_tokens, oep);
      },
      filled);
}

double SearchEvalCache::SampleImbalance(int64_t ep, int64_t routed_tokens, int64_t oep) {
  return imbalance_.Get(std::make_tuple(ep, routed_tokens, oep),
                        [&] { return AnalyzeReceivedRows(model(), Routing(ep, routed_tokens, oep), std::nullopt).imbalance; });
}

const std::vector<int32_t>& SearchEvalCache::SourceBlocks(int64_t layer, int64_t source) {
  const bool indexed = source_ready_ && layer >= 0 && layer < model().num_layers && source >= 0 && source < ready_sources_;
  std::atomic<const std::vector<int32_t>*>* ready =
      indexed ? &source_ready_[static_cast<size_t>(layer * ready_sources_ + source)] : nullptr;
  if (ready) {
    if (const std::vector<int32_t>* blocks = ready->load(std::memory_order_acquire)) return *blocks;
  }
  const std::vector<int32_t>& blocks =
      source_blocks_.Get({layer, source}, [&] { return CountSourceBlocks(model(), *flex_blocks_, layer, source); });
  if (ready) ready->store(&blocks, std::memory_order_release);
  return blocks;
}

void SearchEvalCache::PrefillSources(int part, int parts) {
  if (!flex_blocks_ || flex_blocks_->sources.empty() || parts < 1) return;
  const int64_t sources = *std::max_element(flex_blocks_->sources.begin(), flex_blocks_->sources.end());
  const int64_t n = model().num_layers * sources;
  for (int64_t key = part; key < n; key += parts) SourceBlocks(key / sources, key % sources);
}

void SearchEvalCache::FillSources(int64_t sources) {
  const int64_t n = model().num_layers * sources;
  if (n < 1) return;
  // Successive calls start about 0.618 n apart (the golden ratio): two or three threads that
  // ask at once start far from each other.
  const uint64_t turn = fill_turn_.fetch_add(1);
  const int64_t start = static_cast<int64_t>((turn * 0x9E3779B97F4A7C15ull >> 32) % static_cast<uint64_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const int64_t key = (start + i) % n;
    SourceBlocks(key / sources, key % sources);
  }
}

const FlexRoutingResult& SearchEvalCache::FlexRouting(const std::vector<int64_t>& ep_group, int64_t domain, int64_t routed_tokens,
                                                      bool* filled) {
  const int64_t ep = static_cast<int64_t>(ep_group.size());
  const FlexCounts nodes = MakeFlexCounts(ep_group, domain);  // node_of and node_index only (no draws)
  return flex_routing_.Get(
      FlexKey{ep, routed_tokens, nodes.node_of},
      [&] {
        FlexRoutingResult out;
        out.routing = &Routing(ep, routed_tokens, 1, filled);
        const size_t num_layers = out.routing->layers.size();
        if (flex_blocks_ && FlexBlocksServe(*flex_blocks_, nodes, routed_tokens)) {
          ++flex_from_blocks_;
          FillSources(ep);
          for (size_t l = 0; l < num_layers; ++l) {
            const int64_t layer = static_cast<int64_t>(l);
            out.layers.push_back(std::make_shared<const FlexLinks>(
                FlexLinksFromBlocks(*flex_blocks_, nodes, routed_tokens,
                                    [&](int64_t source) -> const std::vector<int32_t>& { return SourceBlocks(layer, source); })));
          }
          return out;
        }
        const auto& links = flex_links_.Get(
            FlexKey{ep, routed_tokens, nodes.node_index},
            [&] {
              // AddFlexCounts over an empty result of the same layers and tokens: the draws of
              // SampleRoutingForPlan, made once for every group with this node_index.
              RoutingResult scratch;
              scratch.tokens_per_rank = out.routing->tokens_per_rank;
              scratch.layers.resize(num_layers);
              AddFlexCounts(model(), ep_group, domain, scratch);
              std::vector<std::shared_ptr<const FlexLinks>> layers;
              for (const auto& l : scratch.layers) layers.push_back(std::make_shared<const FlexLinks>(FlexLinksOf(*l.flex)));
              return layers;
            },
            filled);
        for (size_t l = 0; l < num_layers; ++l) {
          if (links[l]->node_of == nodes.node_of) {
            out.layers.push_back(links[l]);
          } else {
            auto own = std::make_shared<FlexLinks>(*links[l]);  // the same rows, this group's node numbers
            own->node_of = nodes.node_of;
            out.layers.push_back(std::move(own));
          }
        }
        return out;
      },
      filled);
}

}  // namespace dockyard
