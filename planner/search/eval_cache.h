// Once-per-key work of a layout search, shared by every thread of it: the routing samples, the
// deepep dispatcher's per-token node counts, and the routing-dependent MoE phases.
//
// Each value is a pure function of its key (a RoutingSampler draw equals SampleRouting field for
// field, whatever was drawn before; so do the per-source block counts, flex_blocks.h, that serve
// the deepep counts and, when deepep is searched, the routing samples; AddFlexCounts and
// SimulateMoePhases read only their inputs),
// so which thread fills an entry, and when, changes no bit of any result: a search gives the same
// rows with 1 or N threads while each key is computed once. An entry is filled once (the first
// thread to ask computes it, the others wait for it); the routing sampler, which keeps state
// between draws, runs under its own lock; the MoE phases of different keys run in parallel.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <vector>

#include "planner/model/dispatcher.h"
#include "planner/cost/cost.h"
#include "planner/routing/flex_blocks.h"
#include "planner/routing/routing.h"
#include "planner/cost/moe_phases.h"

namespace dockyard {

// A map whose entries are computed once, safely from many threads. References stay valid for the
// map's life (std::map nodes do not move). A `make` that throws leaves the entry to be retried.
template <typename Key, typename Value>
class OnceMap {
 public:
  template <typename Make>
  const Value& Get(const Key& key, Make&& make, bool* filled = nullptr) {
    Slot* slot;
    {
      std::lock_guard<std::mutex> lock(mu_);
      std::unique_ptr<Slot>& p = map_[key];
      if (!p) p = std::make_unique<Slot>();
      slot = p.get();
    }
    std::call_once(slot->once, [&] {
      slot->value = make();
      if (filled) *filled = true;
    });
    return slot->value;
  }
  int64_t size() const {
    std::lock_guard<std::mutex> lock(mu_);
    return static_cast<int64_t>(map_.size());
  }

 private:
  struct Slot {
    std::once_flag once;
    Value value;
  };
  mutable std::mutex mu_;
  std::map<Key, std::unique_ptr<Slot>> map_;
};

// A routing sample and one EP group's deepep links (rows per link, from the per-token counts) of
// each of its layers (SimulateMoePhases' flex_layers): the sample is shared by every group of its
// (ep, routed tokens), not copied per group, and no n x n counts are kept.
struct FlexRoutingResult {
  const RoutingResult* routing = nullptr;                // SearchEvalCache::Routing(ep, routed tokens, 1)
  std::vector<std::shared_ptr<const FlexLinks>> layers;  // [routing->layers.size()] (deepep.h FlexLinksOf)
};

class SearchEvalCache {
 public:
  // The routing model of `routing` for `num_layers` MoE layers (PrepareRouting with the model's
  // group limit). Throws dockyard::Error where PrepareRouting does.
  explicit SearchEvalCache(RoutingModel model) : sampler_(std::move(model)) {}

  const RoutingModel& model() const { return sampler_.model(); }

  // RoutingSampler::ExpectTokenCounts (changes no result), under the sampler's lock.
  void ExpectTokenCounts(const std::vector<int64_t>& tokens_per_rank);

  // The deepep groups the search will meet: FlexRouting then reads their counts from per-source
  // block counts (flex_blocks.h: each source drawn once per layer for every group and token count)
  // where a group qualifies, which changes no count. Call before any FlexRouting (not thread-safe
  // with it). Throws dockyard::Error where MakeFlexBlockLayout does.
  void ExpectFlexGroups(const std::vector<int64_t>& tokens_per_rank, const std::vector<FlexBlockNeed>& block_needs);

  // SampleRouting(model(), ep, routed_tokens, oep), drawn once per key.
  const RoutingResult& Routing(int64_t ep, int64_t routed_tokens, int64_t oep, bool* filled = nullptr);

  // Routing(ep, routed_tokens, 1) and every layer's deepep links for `ep_group` on NVLink domains
  // of `domain` GPUs (FlexLinksOf the AddFlexCounts that SampleRoutingForPlan gives the plan path).
  // After ExpectFlexGroups, a group whose nodes hold consecutive members sums them from the
  // per-source block counts (FlexLinksFromBlocks). Otherwise: the counts depend on the group only
  // through which members share a domain (FlexCounts::node_index) and on E / ep, so they are drawn
  // once per (ep, routed tokens, node_index) and given each group's own node numbers
  // (FlexLinks::node_of, which the cost model checks).
  const FlexRoutingResult& FlexRouting(const std::vector<int64_t>& ep_group, int64_t domain, int64_t routed_tokens, bool* filled = nullptr);

  // The routing-dependent MoE phases (SimulateMoePhases) under a caller's key of everything they
  // depend on besides the cluster and cost options (fixed per search).
  using MoeKey = std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, Dispatcher, bool>;
  template <typename Make>
  const MoePhaseTimes& MoePhases(const MoeKey& key, Make&& make, bool* filled = nullptr) {
    return moe_.Get(key, std::forward<Make>(make), filled);
  }

  // AnalyzeReceivedRows(model(), Routing(ep, routed_tokens, oep)).imbalance: the imbalance the
  // routing sample sizes memory with (check and simulate with --routing), once per key.
  double SampleImbalance(int64_t ep, int64_t routed_tokens, int64_t oep);

  // Part `part` of `parts` (0 <= part < parts) of every per-source block count ExpectFlexGroups
  // laid out (each (layer, source) with index % parts == part), for the search's threads to draw
  // them side by side up front instead of meeting on the first keys that read them. Nothing
  // without ExpectFlexGroups. Changes no value (each is a pure function of its key).
  void PrefillSources(int part, int parts);

  int64_t routing_samples() const { return routing_.size(); }
  // FlexRouting keys whose counts came from the per-source block counts.
  int64_t flex_from_blocks() const { return flex_from_blocks_.load(); }
  // Routing keys whose per-expert counts came from the block counts (block size 1).
  int64_t routing_from_blocks() const { return routing_from_blocks_.load(); }

 private:
  // CountSourceBlocks of (layer, source), computed once (ExpectFlexGroups first).
  const std::vector<int32_t>& SourceBlocks(int64_t layer, int64_t source);
  // SourceBlocks of every layer for sources 0..sources-1, visited from a start that differs per
  // call (a rotating offset), so that threads asking for the same sources at once compute
  // different ones in parallel instead of waiting on each other in the same order.
  void FillSources(int64_t sources);

  using FlexKey = std::tuple<int64_t, int64_t, std::vector<int64_t>>;  // ep, routed tokens, node_of
  std::mutex sampler_mu_;
  RoutingSampler sampler_;
  OnceMap<std::tuple<int64_t, int64_t, int64_t>, RoutingResult> routing_;
  std::atomic<int64_t> flex_from_blocks_{0}, routing_from_blocks_{0};
  std::atomic<uint64_t> fill_turn_{0};                                        // FillSources' rotating start
  std::unique_ptr<const FlexBlockLayout> flex_blocks_;                        // null: no groups expected
  OnceMap<std::pair<int64_t, int64_t>, std::vector<int32_t>> source_blocks_;  // (layer, source) -> CountSourceBlocks
  // The filled entries of source_blocks_ by layer x sources + source (ExpectFlexGroups sizes it):
  // a read of one already computed takes no lock (the map's lock and once flag on every read
  // added up over the routing keys' ep x layers reads).
  std::unique_ptr<std::atomic<const std::vector<int32_t>*>[]> source_ready_;
  int64_t ready_sources_ = 0;  // sources per layer in source_ready_
  // Per (ep, routed tokens, node_index): the links of every sampled layer (groups the block
  // counts do not serve), with the node numbers of the first group to ask.
  OnceMap<FlexKey, std::vector<std::shared_ptr<const FlexLinks>>> flex_links_;
  OnceMap<FlexKey, FlexRoutingResult> flex_routing_;  // per (ep, routed tokens, node_of)
  OnceMap<MoeKey, MoePhaseTimes> moe_;
  OnceMap<std::tuple<int64_t, int64_t, int64_t>, double> imbalance_;  // SampleImbalance per (ep, routed tokens, oep)
};

}  // namespace dockyard
