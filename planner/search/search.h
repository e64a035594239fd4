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
// token count), the deepep per-token node counts once per (ep, routed tokens, EP members per
// NVLink domain) and the routing-dependent MoE phases once per (ep, routed tokens, oep, etp,
// F / expert TP, dispatcher), in a cache every thread of the search shares (eval_cache.h). Results are bit-identical to BuildPlan +
// ComputeMemory + ComputeWorkload + SimulateStep for every candidate (layout_eval_test.cc and layout_eval_models_test.cc compare every
// candidate of searches on five models); BuildPlan stays the path of `plan` and `simulate`.
//
// Throughput: bazel run -c opt //planner/search:bench_search; the measured figures and where the
// time goes are in docs/search.md, "Speed".
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "planner/cost/cluster.h"
#include "planner/cost/cost.h"
#include "planner/cost/prediction_error.h"
#include "planner/model/model_spec.h"
#include "planner/layout/parallel_dims.h"
#include "planner/model/dispatcher.h"
#include "planner/routing/plan_routing.h"
#include "planner/routing/routing.h"
#include "planner/model/training.h"
#include "planner/search/search_options.h"

namespace dockyard {

struct RankedLayout {
  LayoutCandidate layout;
  int64_t efsdp = 1;
  double step_time_us = 0;
  double tokens_per_s_per_gpu = 0;
  double mfu = 0;
  int64_t peak_bytes = 0;
  std::string dominant_phase;
  // The candidate's training resolved (micro-batch size, micro-batches per schedule, accumulation
  // steps, recompute, vpp, dp sharding, EP overlap) and what a step processes.
  int64_t micro_batch_size = 1, num_microbatches = 1, grad_accumulation_steps = 1, vpp = 1;
  std::string recompute, dp_sharding;
  bool overlap_moe_ep_comm = false;
  // The deepep dispatcher's backend (Megatron moe_flex_dispatcher_backend, dispatcher.h FlexBackend);
  // empty for another dispatcher.
  std::string flex_backend;
  int64_t sequences_per_step = 0;  // dp x mbs x M x A
  double headroom_gib = 0;         // budget - peak
  // Against the ranking's best (prediction_error.h VersusBestOf): step / best step, its 80 %
  // interval, and whether that interval reaches the best (tied: the model cannot tell the two
  // apart). Set by SearchLayouts for every row it returns.
  VersusBest vs_best;
  // Filled by DescribeRows: each contributor's share of the step (CostBreakdown::critical_path and
  // critical_path_us, us, largest first) and the pipeline bubble (us; inside the layer shares).
  std::vector<std::pair<std::string, double>> phase_us;
  double pipeline_bubble_us = 0;
};

struct SearchResult {
  int64_t enumerated = 0;     // candidates generated
  int64_t invalid = 0;        // rejected by BuildPlan (a rule broken)
  int64_t over_budget = 0;    // valid but over the memory budget (pruned ones included)
  int64_t not_divisible = 0;  // the global batch does not divide dp x micro_batch_size
  int64_t ranked = 0;         // valid and within budget
  int64_t pruned = 0;         // over budget by a bound, not fully evaluated (counted in over_budget)
  // Why candidates were rejected: layouts per message of the rule broken (LayoutEvaluation::reason,
  // as BuildPlan words it) and per global-batch mismatch (GlobalBatchMismatch's text). Their
  // counts sum to `invalid` and `not_divisible`.
  std::map<std::string, int64_t> invalid_reasons, not_divisible_reasons;
  int64_t global_batch_size = 0;  // sequences; 0 = none
  int64_t seq_len = 0;
  std::optional<int64_t> num_microbatches;  // --num-microbatches pinned (training.num_microbatches); nullopt = per layout
  bool megatron = false;                    // the convention: how a pinned num_microbatches meets the global batch
  std::vector<std::string> memory_rules;    // the framework rules the peaks counted (memory.h MemoryRulesLines)
  double budget_gib = 0;
  double reserve_gib = 0;         // held back from budget_gib (memory_reserve_gib): a layout fits at peak <= budget - reserve
  double seconds = 0;             // wall time of SearchLayouts, one thread
  int64_t routing_samples = 0;    // distinct (ep, routed tokens, oep) routing samples drawn
  double routing_seconds = 0;     // part of `seconds` spent drawing them and their MoE phases (once per key)
  std::vector<RankedLayout> top;  // best first, at most options.top
  std::vector<RankedLayout> all;  // every ranked layout, best first (options.keep_all)
  // The Pareto front of throughput vs peak memory (pareto.h ParetoFront over every ranked layout),
  // one row per point (the best-ranked of equal peak and throughput), by peak ascending.
  std::vector<RankedLayout> pareto;
};

// Every candidate of the search space (validated later), in the search's order: degrees (pp,
// dp_replicate, cp, tp, ep, etp), dispatcher, dp sharding, then micro-batch size, recompute, vpp,
// EP overlap. ForEachLayout calls `fn` on each without storing them.
std::vector<LayoutCandidate> EnumerateLayouts(const ModelSpec& model, const SearchOptions& options);
void ForEachLayout(const ModelSpec& model, const SearchOptions& options, const std::function<void(const LayoutCandidate&)>& fn);


// Runs the search. Throws dockyard::Error for bad options (world_size < 1, ...).
SearchResult SearchLayouts(const ModelSpec& model, const SearchOptions& options);

// Fills phase_us and pipeline_bubble_us of `rows` through the plan path (BuildPlan +
// SimulateStep, as simulate runs it). Throws dockyard::Error for a row the plan path rejects.
void DescribeRows(const ModelSpec& model, const SearchOptions& options, std::vector<RankedLayout>* rows);

// ParetoFront (pareto.h) over the rows' peak_bytes and tokens_per_s_per_gpu: front[i] for rows[i].
std::vector<bool> ParetoFrontOf(const std::vector<RankedLayout>& rows);

Json RankedLayoutToJson(const RankedLayout& row);
Json SearchResultToJson(const SearchResult& result);
// The first line of the text: the counts per outcome.
std::string SearchCountsText(const SearchResult& result);
// A row's "vs best" cell: "best", or the step's difference from the best in per cent with " ="
// when tied with it (prediction_error.h).
std::string VersusBestText(const VersusBest& v);
// The table of `rows` (numbered: a rank column 1, 2, ...).
std::string RankedLayoutsTable(const std::vector<RankedLayout>& rows, bool numbered);
std::string SearchResultToText(const SearchResult& result);

}  // namespace dockyard
