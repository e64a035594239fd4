// Layout search: enumerate every valid layout (pp, dp_replicate, dp_shard, cp, tp, ep, etp,
// dispatcher) of a model on a world, drop those over the memory budget, rank the rest by
// predicted tokens/s per GPU (cost.h; ties by peak memory), and say which phase dominates each.
//
// Search space (docs/cost-model.md, "Search"): pp | world with pp <= min(num_hidden_layers,
// max_pp); dp_replicate, cp, tp any divisors of what is left, tp <= gpus_per_node (TP stays inside
// a node); dp_shard inferred; ep any divisor of num_experts dividing dp_shard*cp*tp; etp in {1, tp};
// the deredundency dispatcher only when an EP group spans nodes. The search returns only layouts
// that BuildPlan accepts.
//
// Evaluation (layout_eval.h). A candidate is not turned into a Plan: LayoutEvaluator groups the
// parameter inventory once into classes (global shape, tp_dim, routed, role group) per layer kind
// and per embedding / root unit, and evaluates a candidate with O(classes + pp x layer kinds)
// integer work on the first rank of each stage (validation through TryBuildParallelDims /
// CheckDimsForModel without messages; memory as ComputeMemory's worst peak; the cost model
// through SimulateStepFromInputs, the same formulas as SimulateStep). The routing sample is drawn
// once per (ep, routed tokens, oep) through a RoutingSampler (each source rank drawn once per
// token count) and the routing-dependent MoE phases once per (ep, routed tokens, oep, etp,
// F / expert TP, dispatcher). Results are bit-identical to BuildPlan + ComputeMemory +
// ComputeWorkload + SimulateStep for every candidate (search_test.cc compares every candidate of
// searches on five models); BuildPlan stays the path of `plan` and `simulate`.
//
// Throughput (bazel run -c opt //planner/search:bench_search -- --repeat 5 256 2048 16384; DeepSeek-V3,
// h100-sxm, seq_len 4096, full recompute, one thread, best of 5 on a shared 2-core machine):
// 256 GPUs 5,445 layouts ~155,000/s; 2048 GPUs 16,015 layouts ~259,000/s; 16384 GPUs 32,005
// layouts ~331,000/s (was 1,749 / 1,064 / 446 with a plan per candidate). Most of what is left
// is once-per-key work (routing draws, ep x ep dispatch matrices); the per-candidate evaluation
// alone runs at ~600,000 layouts/s (docs/cost-model.md, "Search").
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "planner/sim/cluster.h"
#include "planner/sim/cost.h"
#include "planner/model/model_spec.h"
#include "planner/layout/parallel_dims.h"
#include "planner/sim/routing.h"
#include "planner/model/training.h"

namespace dockyard {

struct SearchOptions {
  int64_t world_size = 0;
  ClusterSpec cluster = ClusterPreset("h100-sxm");
  CostOptions cost;         // the cost model's knobs (a calibration file sets them)
  TrainingConfig training;  // dp_sharding, dtypes, batch, recompute ... as for a single plan
  Convention convention = Convention::kTorchtitan;
  RoutingSpec routing;  // sampled once per (ep, routed tokens)
  int64_t routing_layers = 2;
  int64_t max_pp = 16;
  int64_t top = 10;
  bool include_deredundency = true;
  // Opt-in dispatchers (--search-dispatchers): deepep (Megatron flex) for every ep > 1, with FP8
  // dispatch when training.fp8_dispatch; allgather for every ep > 1. Priced by the plan path
  // (BuildPlan + SimulateStep), not the fast class sums.
  bool include_deepep = false;
  bool include_allgather = false;
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
  double seconds = 0;             // wall time of SearchLayouts, one thread
  int64_t routing_samples = 0;    // distinct (ep, routed tokens, oep) routing samples drawn
  double routing_seconds = 0;     // part of `seconds` spent drawing them and their MoE phases (once per key)
  std::vector<RankedLayout> top;  // best first, at most options.top
};

// Every candidate of the search space (validated later).
std::vector<LayoutCandidate> EnumerateLayouts(const ModelSpec& model, const SearchOptions& options);

// Runs the search. Throws dockyard::Error for bad options (world_size < 1, ...).
SearchResult SearchLayouts(const ModelSpec& model, const SearchOptions& options);

Json SearchResultToJson(const SearchResult& result);
std::string SearchResultToText(const SearchResult& result);

}  // namespace dockyard
