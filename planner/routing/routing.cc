// Routing model of the simulator (see routing.h).
#include "planner/routing/routing.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <map>
#include <numeric>
#include <sstream>
#include <sys/stat.h>

#include <fmt/format.h>

#include "planner/base/checked_math.h"
#include "planner/base/error.h"
#include "planner/routing/group_routing.h"
#include "planner/routing/layer_sampler.h"
#include "planner/base/json_util.h"

namespace dockyard {

namespace {

// The rank index of the per-layer Zipf shuffle stream (no EP rank reaches it).
constexpr uint64_t kShuffleStream = ~uint64_t{0};

// Sanity bound on the size of the dispatch matrices of one SampleRouting call.
constexpr int64_t kMaxMatrixEntries = int64_t{1} << 28;

}  // namespace
using routing_detail::CountSink;
using routing_detail::DrawMode;
using routing_detail::BuildSampler;
using routing_detail::DrawTokens;
using routing_detail::ExpertHitSink;
using routing_detail::HitSink;
using routing_detail::LayerSampler;
using routing_detail::Permuted;
using routing_detail::RecordSink;
using routing_detail::Scratch;

namespace {

void Require(bool ok, const std::string& message) {
  if (!ok) throw Error(message);
}

}  // namespace

RoutingModel PrepareRouting(const RoutingSpec& spec, int64_t num_experts, int64_t top_k, int64_t num_layers) {
  Require(num_experts >= 1, fmt::format("num_experts must be >= 1, got {}", num_experts));
  Require(num_experts <= INT32_MAX, fmt::format("num_experts must be < 2^31 for routing, got {}", num_experts));
  Require(top_k >= 1 && top_k <= num_experts, fmt::format("top_k ({}) must be in [1, num_experts ({})]", top_k, num_experts));
  Require(num_layers >= 0, fmt::format("num_layers (MoE layers) must be >= 0, got {}", num_layers));
  RoutingModel model;
  model.spec = spec;
  model.num_experts = num_experts;
  model.top_k = top_k;
  model.num_layers = num_layers;
  const size_t E = static_cast<size_t>(num_experts);
  auto all_layers = [&](std::shared_ptr<const LayerSampler> s) { model.layers.assign(static_cast<size_t>(num_layers), s); };
  switch (spec.kind) {
    case RoutingKind::kUniform:
      all_layers(std::make_shared<const LayerSampler>(BuildSampler(std::vector<double>(E, 1.0), top_k)));
      break;
    case RoutingKind::kZipf: {
      Require(std::isfinite(spec.zipf_s) && spec.zipf_s >= 0,
              fmt::format("Zipf exponent (zipf_s) must be a finite number >= 0, got {}", spec.zipf_s));
      std::vector<double> w(E);
      for (size_t e = 0; e < E; ++e) w[e] = std::pow(static_cast<double>(e + 1), -spec.zipf_s);
      const auto base = std::make_shared<const LayerSampler>(BuildSampler(w, top_k));
      if (!spec.zipf_shuffle) {
        all_layers(base);
        break;
      }
      for (int64_t l = 0; l < num_layers; ++l) {
        Xoshiro256ss rng = Xoshiro256ss::ForStream(spec.seed, static_cast<uint64_t>(l), kShuffleStream);
        std::vector<int32_t> perm(E);
        std::iota(perm.begin(), perm.end(), 0);
        for (size_t i = E; i-- > 1;) std::swap(perm[i], perm[rng.Below(i + 1)]);
        model.layers.push_back(std::make_shared<const LayerSampler>(Permuted(*base, perm)));
      }
      break;
    }
    case RoutingKind::kHot: {
      const int64_t H = spec.hot_experts;
      const double F = spec.hot_fraction;
      Require(H >= 0 && H <= num_experts, fmt::format("hot expert count ({}) must be in [0, num_experts ({})]", H, num_experts));
      Require(std::isfinite(F) && F >= 0 && F <= 1, fmt::format("hot fraction must be in [0, 1], got {}", F));
      Require(H > 0 || F == 0, fmt::format("hot fraction {} needs at least one hot expert, got 0 hot experts", F));
      Require(H < num_experts || F == 1,
              fmt::format("with all {} experts hot the hot fraction must be 1, got {} (no cold expert takes the rest)", num_experts,
                          F));
      std::vector<double> w(E);
      for (size_t e = 0; e < E; ++e) {
        w[e] = static_cast<int64_t>(e) < H ? F / static_cast<double>(H) : (1.0 - F) / static_cast<double>(num_experts - H);
      }
      if (H == 0) std::fill(w.begin(), w.end(), 1.0);
      all_layers(std::make_shared<const LayerSampler>(BuildSampler(w, top_k)));
      break;
    }
    case RoutingKind::kTrace: {
      Require(!spec.trace_path.empty(), "routing trace path (trace_path) is empty");
      const RoutingTrace trace = LoadRoutingTrace(spec.trace_path);
      Require(trace.num_experts == num_experts,
              fmt::format("{}: the trace has {} experts, the model has {} (num_experts)", trace.path, trace.num_experts, num_experts));
      const int64_t L = static_cast<int64_t>(trace.layers.size());
      Require(L == num_layers || L == 1,
              fmt::format("{}: the trace has {} layers; expected {} (one per MoE layer) or 1 (broadcast to all layers)", trace.path, L,
                          num_layers));
      std::map<std::vector<int64_t>, std::shared_ptr<const LayerSampler>> built;  // identical layers built once
      for (int64_t l = 0; l < num_layers; ++l) {
        const std::vector<int64_t>& counts = trace.layers[L == 1 ? 0 : static_cast<size_t>(l)];
        auto it = built.find(counts);
        if (it == built.end()) {
          std::vector<double> w(counts.begin(), counts.end());
          it = built.emplace(counts, std::make_shared<const LayerSampler>(BuildSampler(w, top_k))).first;
        }
        model.layers.push_back(it->second);
      }
      break;
    }
  }
  return model;
}

namespace {

// Per-expert assignment counts ([E], global expert ids) of the tokens of source `rank` in
// `layer`: forced experts in bulk plus the free draws of the rank's own stream. Draws are
// sequential per token (the stream and the scratch carry over), so Start, Advance(a),
// Advance(b) draws exactly the first a + b tokens of Start, Advance(a + b).
struct RankCounter {
  Scratch scratch;
  std::vector<int64_t> free_counts;
  Xoshiro256ss rng{0};
  const LayerSampler* sampler = nullptr;

  void Start(const RoutingModel& model, int64_t layer, int64_t rank) {
    sampler = model.layers[static_cast<size_t>(layer)].get();
    rng = Xoshiro256ss::ForStream(model.spec.seed, static_cast<uint64_t>(layer), static_cast<uint64_t>(rank));
    free_counts.assign(sampler->free_ids.size(), 0);
    scratch.Reset(sampler->free_ids.size());
  }
  void Advance(int64_t tokens) {
    CountSink sink{free_counts.data()};
    if (sampler->mode != DrawMode::kNone) DrawTokens(*sampler, rng, tokens, scratch, sink);  // else all forced
  }
  // The counts of the first `tokens` tokens: all drawn so far.
  void Read(int64_t num_experts, int64_t tokens, int64_t* counts) const {
    std::fill(counts, counts + num_experts, 0);
    for (int32_t e : sampler->forced) counts[static_cast<size_t>(e)] += tokens;
    for (size_t j = 0; j < sampler->free_ids.size(); ++j) counts[static_cast<size_t>(sampler->free_ids[j])] += free_counts[j];
  }
  void Count(const RoutingModel& model, int64_t layer, int64_t rank, int64_t tokens, int64_t* counts) {
    Start(model, layer, rank);
    Advance(tokens);
    Read(model.num_experts, tokens, counts);
  }
};

// SampleRouting's checks and result, with each source rank's per-expert counts from
// `rank_counts(layer, rank)` (a pointer to E counts).
template <class RankCounts>
RoutingResult AssembleRouting(const RoutingModel& model, int64_t ep, int64_t tokens_per_rank, int64_t oep, RankCounts&& rank_counts) {
  const int64_t E = model.num_experts, k = model.top_k;
  Require(ep >= 1, fmt::format("ep must be >= 1, got {}", ep));
  Require(E % ep == 0, fmt::format("ep ({}) must divide num_experts ({})", ep, E));
  Require(oep >= 1, fmt::format("oep must be >= 1, got {}", oep));
  Require(ep % oep == 0, fmt::format("oep ({}) must divide ep ({}) for the deredundency dispatcher", oep, ep));
  Require(tokens_per_rank >= 0, fmt::format("tokens_per_rank must be >= 0, got {}", tokens_per_rank));
  Require(static_cast<int64_t>(model.layers.size()) == model.num_layers, "routing model is not prepared (use PrepareRouting)");
  const int64_t per_layer = CheckedMul(CheckedMul(tokens_per_rank, ep, "routing tokens (tokens_per_rank * ep)"), k,
                                       "routing assignments per layer (tokens_per_rank * ep * top_k)");
  const int64_t total = CheckedMul(per_layer, model.num_layers, "routing assignments (tokens_per_rank * ep * top_k * num_layers)");
  const int64_t entries = CheckedMul(CheckedMul(ep, ep, "dispatch matrix entries (ep * ep)"), std::max<int64_t>(1, model.num_layers),
                                     "dispatch matrix entries (ep * ep * num_layers)");
  Require(
      entries <= kMaxMatrixEntries,
      fmt::format("dispatch matrices would hold ep * ep * num_layers = {} entries, more than the {} allowed", entries, kMaxMatrixEntries));

  RoutingResult result;
  result.num_experts = E;
  result.top_k = k;
  result.ep = ep;
  result.tokens_per_rank = tokens_per_rank;
  result.oep = oep;
  result.assignments = total;
  result.layers.resize(static_cast<size_t>(model.num_layers));
  const int64_t local = E / ep, iep = ep / oep;
  for (int64_t l = 0; l < model.num_layers; ++l) {
    const LayerSampler& s = *model.layers[static_cast<size_t>(l)];
    LayerRouting& out = result.layers[static_cast<size_t>(l)];
    out.tokens_per_expert.assign(static_cast<size_t>(E), 0);
    out.dispatch.assign(static_cast<size_t>(ep * ep), 0);
    out.expected_share = s.share;
    for (int64_t r = 0; r < ep; ++r) {
      const auto* counts = rank_counts(l, r);  // int64 (SampleRouting) or int32 (block counts)
      int64_t* row = &out.dispatch[static_cast<size_t>(r * ep)];
      for (int64_t e = 0; e < E; ++e) out.tokens_per_expert[static_cast<size_t>(e)] += counts[e];
      // Destination rank dst owns experts [dst * local, (dst + 1) * local).
      for (int64_t dst = 0, e = 0; dst < ep; ++dst) {
        int64_t sum = 0;
        for (int64_t j = 0; j < local; ++j, ++e) sum += counts[e];
        row[dst] = sum;
      }
    }
    out.rows_per_local_expert = out.tokens_per_expert;  // contiguous ownership: same order
    // Column sums of dispatch: what rank dst receives is what its experts got (integer sums).
    out.received.assign(static_cast<size_t>(ep), 0);
    for (int64_t dst = 0, e = 0; dst < ep; ++dst) {
      for (int64_t j = 0; j < local; ++j, ++e) out.received[static_cast<size_t>(dst)] += out.tokens_per_expert[static_cast<size_t>(e)];
    }
    FillReceivedStats(out, tokens_per_rank, k);
    result.max_imbalance = l == 0 ? out.imbalance : std::max(result.max_imbalance, out.imbalance);
    if (oep == 1) continue;  // iep = ep: the sum over one outer index is dispatch itself (IepDispatchOf)
    out.iep_dispatch.assign(static_cast<size_t>(ep * iep), 0);
    for (int64_t o = 0; o < oep; ++o) {
      for (int64_t i = 0; i < iep; ++i) {
        const int64_t r = o * iep + i;
        for (int64_t j = 0; j < iep; ++j) {
          int64_t sum = 0;
          for (int64_t o2 = 0; o2 < oep; ++o2) sum += out.dispatch[static_cast<size_t>((o2 * iep + i) * ep + o * iep + j)];
          out.iep_dispatch[static_cast<size_t>(r * iep + j)] = sum;
        }
      }
    }
  }
  return result;
}

}  // namespace

void FillReceivedStats(LayerRouting& out, int64_t tokens_per_rank, int64_t top_k) {
  const int64_t ep = static_cast<int64_t>(out.received.size());
  Require(ep >= 1, "received: no ranks");
  std::vector<int64_t> sorted = out.received;
  std::sort(sorted.begin(), sorted.end());
  out.max_received = sorted.back();
  out.mean_received = static_cast<double>(tokens_per_rank) * static_cast<double>(top_k);
  out.p99_received = sorted[static_cast<size_t>((99 * ep + 99) / 100 - 1)];
  out.imbalance = out.mean_received > 0 ? static_cast<double>(out.max_received) / out.mean_received : 1.0;
}

RoutingResult SampleRouting(const RoutingModel& model, int64_t ep, int64_t tokens_per_rank, int64_t oep) {
  RankCounter counter;
  std::vector<int64_t> counts(static_cast<size_t>(std::max<int64_t>(0, model.num_experts)));
  return AssembleRouting(model, ep, tokens_per_rank, oep, [&](int64_t layer, int64_t rank) {
    counter.Count(model, layer, rank, tokens_per_rank, counts.data());
    return counts.data();
  });
}

RoutingResult AssembleRoutingFromCounts(const RoutingModel& model, int64_t ep, int64_t tokens_per_rank, int64_t oep,
                                        const std::function<const int32_t*(int64_t layer, int64_t rank)>& rank_counts) {
  return AssembleRouting(model, ep, tokens_per_rank, oep, rank_counts);
}

RoutingSampler::RoutingSampler(RoutingModel model) : model_(std::move(model)) {}

void RoutingSampler::ExpectTokenCounts(const std::vector<int64_t>& tokens_per_rank) {
  for (int64_t t : tokens_per_rank) {
    if (t >= 0) expected_.push_back(t);
  }
  std::sort(expected_.begin(), expected_.end());
  expected_.erase(std::unique(expected_.begin(), expected_.end()), expected_.end());
}

RoutingResult RoutingSampler::Sample(int64_t ep, int64_t tokens_per_rank, int64_t oep) {
  RankCounter counter;
  const size_t E = static_cast<size_t>(std::max<int64_t>(0, model_.num_experts));
  // [layer] -> counts of ranks 0..n-1 for `tokens` tokens, E each.
  auto ranks_of = [&](int64_t tokens, int64_t layer) -> std::vector<int64_t>& {
    auto& per_layer = counts_[tokens];
    if (per_layer.size() < static_cast<size_t>(model_.num_layers)) per_layer.resize(static_cast<size_t>(model_.num_layers));
    return per_layer[static_cast<size_t>(layer)];
  };
  return AssembleRouting(model_, ep, tokens_per_rank, oep, [&](int64_t layer, int64_t rank) {
    std::vector<int64_t>& ranks = ranks_of(tokens_per_rank, layer);
    while (ranks.size() < (static_cast<size_t>(rank) + 1) * E) {
      const size_t q = ranks.size() / E;
      // Draw rank q once, reading the counts of this token count and of every expected one
      // that lacks exactly rank q on the way (prefixes of the same draws).
      std::vector<int64_t> targets = {tokens_per_rank};
      for (int64_t t : expected_) {
        if (t != tokens_per_rank && ranks_of(t, layer).size() == q * E) targets.push_back(t);
      }
      std::sort(targets.begin(), targets.end());
      counter.Start(model_, layer, static_cast<int64_t>(q));
      int64_t drawn = 0;
      for (int64_t t : targets) {
        counter.Advance(t - drawn);
        drawn = t;
        std::vector<int64_t>& out = ranks_of(t, layer);
        out.resize(out.size() + E);
        counter.Read(model_.num_experts, t, out.data() + q * E);
      }
    }
    return ranks.data() + static_cast<size_t>(rank) * E;
  });
}

RoutingModel PrepareRouting(const RoutingSpec& spec, int64_t num_experts, int64_t top_k, int64_t num_layers, const GroupLimit& limit) {
  const std::string problem = GroupLimitProblem(num_experts, top_k, limit.n_group, limit.topk_group);
  Require(problem.empty(), "group-limited routing: " + problem);
  RoutingModel model = PrepareRouting(spec, num_experts, top_k, num_layers);
  if (!limit.active()) return model;
  std::map<const LayerSampler*, std::shared_ptr<const LayerSampler>> built;  // shared layers converted once
  for (auto& layer : model.layers) {
    auto it = built.find(layer.get());
    if (it == built.end()) {
      LayerSampler s;
      s.num_experts = num_experts;
      s.top_k = top_k;
      s.free_ids.resize(static_cast<size_t>(num_experts));
      std::iota(s.free_ids.begin(), s.free_ids.end(), 0);
      s.free_k = top_k;
      s.mode = DrawMode::kGrouped;
      s.share = layer->share;
      s.grouped = std::make_shared<const routing_detail::GroupSampler>(routing_detail::BuildGroupSampler(layer->share, top_k, limit));
      it = built.emplace(layer.get(), std::make_shared<const LayerSampler>(std::move(s))).first;
    }
    layer = it->second;
  }
  return model;
}

RoutingResult SampleRouting(const RoutingSpec& spec, int64_t num_experts, int64_t top_k, int64_t ep, int64_t tokens_per_rank,
                            int64_t num_layers, int64_t oep) {
  // Cheap layout checks first, so a bad ep does not wait for a trace to load or calibrate.
  Require(ep >= 1, fmt::format("ep must be >= 1, got {}", ep));
  Require(num_experts < 1 || num_experts % ep == 0, fmt::format("ep ({}) must divide num_experts ({})", ep, num_experts));
  return SampleRouting(PrepareRouting(spec, num_experts, top_k, num_layers), ep, tokens_per_rank, oep);
}

const std::vector<double>& ExpectedShare(const RoutingModel& model, int64_t layer) {
  Require(layer >= 0 && layer < static_cast<int64_t>(model.layers.size()),
          fmt::format("routing layer {} is outside the model's {} MoE layers", layer, model.layers.size()));
  return model.layers[static_cast<size_t>(layer)]->share;
}

namespace {
// The draw state of stream (seed, layer, ep_rank) before its first token: the one start of
// SampleTokenExperts and TokenHitStream. Throws dockyard::Error for a layer outside the model or
// ep_rank < 0.
struct TokenDraws {
  const LayerSampler* sampler;
  Xoshiro256ss rng;
  Scratch scratch;
};
TokenDraws StartTokenDraws(const RoutingModel& model, int64_t layer, int64_t ep_rank) {
  Require(layer >= 0 && layer < model.num_layers && static_cast<int64_t>(model.layers.size()) == model.num_layers,
          fmt::format("layer must be in [0, {}), got {}", model.num_layers, layer));
  Require(ep_rank >= 0, fmt::format("ep_rank must be >= 0, got {}", ep_rank));
  const LayerSampler& s = *model.layers[static_cast<size_t>(layer)];
  TokenDraws d{&s, Xoshiro256ss::ForStream(model.spec.seed, static_cast<uint64_t>(layer), static_cast<uint64_t>(ep_rank)), Scratch{}};
  d.scratch.Reset(s.free_ids.size());
  return d;
}
}  // namespace

std::vector<int32_t> SampleTokenExperts(const RoutingModel& model, int64_t layer, int64_t ep_rank, int64_t tokens) {
  TokenDraws d = StartTokenDraws(model, layer, ep_rank);
  Require(tokens >= 0, fmt::format("tokens must be >= 0, got {}", tokens));
  std::vector<int32_t> out(static_cast<size_t>(CheckedMul(tokens, model.top_k, "sampled experts (tokens * top_k)")));
  RecordSink sink{d.sampler, out.data()};
  DrawTokens(*d.sampler, d.rng, tokens, d.scratch, sink);
  return out;
}

struct TokenHitStream::State : TokenDraws {};

TokenHitStream::TokenHitStream(const RoutingModel& model, int64_t layer, int64_t ep_rank)
    : state_(std::make_unique<State>(State{StartTokenDraws(model, layer, ep_rank)})) {}

TokenHitStream::~TokenHitStream() = default;

void TokenHitStream::Next(int64_t tokens, uint64_t* hit) {
  if (tokens < 0 || tokens > 64) throw Error(fmt::format("a batch of token hits holds 0 to 64 tokens, got {}", tokens));
  const LayerSampler& s = *state_->sampler;
  if (s.mode == DrawMode::kGrouped) {
    ExpertHitSink sink{hit};
    s.grouped->Draw(state_->rng, tokens, sink);
    return;
  }
  HitSink sink{s.free_ids.data(), s.forced.data(), s.forced.data() + s.forced.size(), hit};
  DrawTokens(s, state_->rng, tokens, state_->scratch, sink);
}

}  // namespace dockyard
