// Layout search: enumerate every valid layout (pp, dp_replicate, dp_shard, cp, tp, ep, etp,
// dispatcher) of a model on a world, drop those over the memory budget, rank the rest by
// predicted tokens/s per GPU (cost.h; ties by peak memory), and say which phase dominates each.
//
// Search space (docs/cost-model.md, "Search"): pp | world with pp <= min(num_hidden_layers,
// max_pp); dp_replicate, cp, tp any divisors of what is left, tp <= gpus_per_node (TP stays inside
// a node); dp_shard inferred; ep any divisor of num_experts dividing dp_shard*cp*tp; etp in {1, tp};
// the deredundency dispatcher only when an EP group spans nodes. Every candidate is validated by
// BuildPlan: the search returns only layouts that BuildPlan accepts.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "planner/cluster.h"
#include "planner/cost.h"
#include "planner/model_spec.h"
#include "planner/parallel_dims.h"
#include "planner/routing.h"
#include "planner/training.h"

namespace dockyard {

struct SearchOptions {
  int64_t world_size = 0;
  ClusterSpec cluster = ClusterPreset("h100-sxm");
  TrainingConfig training;  // dp_sharding, dtypes, batch, recompute ... as for a single plan
  Convention convention = Convention::kTorchtitan;
  RoutingSpec routing;      // sampled once per (ep, routed tokens)
  int64_t routing_layers = 2;
  int64_t max_pp = 16;
  int64_t top = 10;
  bool include_deredundency = true;
  std::function<void(int64_t done, int64_t total)> progress;  // called now and then; may be empty
};

struct LayoutCandidate {
  ParallelDimsOptions dims;
  std::string dispatcher = "all_to_all";
};

struct RankedLayout {
  LayoutCandidate layout;
  int64_t efsdp = 1;
  double step_time_us = 0;
  double tokens_per_s_per_gpu = 0;
  double mfu = 0;
  int64_t peak_bytes = 0;
  std::string dominant_phase;
};

struct SearchResult {
  int64_t enumerated = 0;   // candidates generated
  int64_t invalid = 0;      // rejected by BuildPlan (a rule broken)
  int64_t over_budget = 0;  // valid but over the memory budget
  int64_t ranked = 0;       // valid and within budget
  double budget_gib = 0;
  double seconds = 0;
  std::vector<RankedLayout> top;  // best first, at most options.top
};

// Every candidate of the search space (validated later).
std::vector<LayoutCandidate> EnumerateLayouts(const ModelSpec& model, const SearchOptions& options);

// Runs the search. Throws dockyard::Error for bad options (world_size < 1, ...).
SearchResult SearchLayouts(const ModelSpec& model, const SearchOptions& options);

Json SearchResultToJson(const SearchResult& result);
std::string SearchResultToText(const SearchResult& result);

}  // namespace dockyard
