// What a layout search is asked (SearchOptions: the world, the cluster, the training every candidate
// starts from, the pins and the searched settings) and what one candidate is (LayoutCandidate: its
// degrees and settings), with the training a candidate runs (CandidateTraining) and the budget and
// machine it is costed on: the vocabulary the enumeration (search.h), the evaluation
// (layout_eval.h) and the pins (search_pins.h) share.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "planner/cost/cluster.h"
#include "planner/cost/compute_model.h"
#include "planner/layout/parallel_dims.h"
#include "planner/model/dispatcher.h"
#include "planner/model/machine.h"
#include "planner/model/model_spec.h"
#include "planner/model/training.h"
#include "planner/routing/plan_routing.h"
#include "planner/routing/routing.h"

namespace dockyard {

// Degrees the user fixed (search --tp 2 ...): 0 = searched. dp_shard is derived from the others
// unless pinned.
struct DegreePins {
  int64_t dp_replicate = 0, dp_shard = 0, cp = 0, tp = 0, ep = 0, etp = 0, pp = 0;
};

struct SearchOptions {
  int64_t world_size = 0;
  ClusterSpec cluster = ClusterPreset("h100-sxm");
  ComputeModel compute_model = ComputeModel::kKernels;  // the cluster carries the knobs (a calibration file sets them)
  TrainingConfig training;  // dp_sharding, dtypes, batch, recompute ... as for a single plan
  // Memory budget per GPU in GiB (--gpu-memory-gib, or the spec's training.gpu_memory_gib); 0 = the
  // cluster's memory_gib (SearchBudgetGib). The node size is the cluster's (network.h MachineOf):
  // a search has no other.
  double gpu_memory_gib = 0;
  Convention convention = Convention::kTorchtitan;
  RoutingSpec routing;  // sampled once per (ep, routed tokens)
  // --routing given: each layout's memory is sized by its own routing sample (received rows at
  // SampleImbalance, received_rows.h), as check and simulate size it, in place of
  // training.imbalance; false: training.imbalance (--imbalance, default 1.0).
  bool routing_sizes_memory = false;
  int64_t routing_layers = kDefaultRoutingLayers;  // cost.h: simulate's default too
  int64_t max_pp = 16;
  int64_t top = 10;
  bool include_deredundency = true;
  // Opt-in dispatchers (--search-dispatchers): deepep (Megatron flex) for every ep > 1, with FP8
  // dispatch when training.fp8_dispatch; allgather for every ep > 1. Priced by the fast path like
  // the others (layout_eval.h), equal to BuildPlan + SampleRoutingForPlan + SimulateStep.
  bool include_deepep = false;
  bool include_allgather = false;
  std::function<void(int64_t done, int64_t total)> progress;  // called now and then; may be empty

  // The fixed global batch in sequences (Megatron --global-batch-size, torchtitan
  // global_batch_size; planner/model/global_batch.h). 0 = none: every candidate runs
  // training.num_microbatches (default pp) micro-batches, and layouts differ in tokens per step.
  // With it, each candidate runs global_batch_size / (dp x micro_batch_size) micro-batches, scheduled
  // as its convention does; candidates it does not divide are counted in SearchResult::not_divisible.
  int64_t global_batch_size = 0;
  DegreePins pins;
  // Settings searched beside the degrees; an empty list = training's value only (pinned). Values a
  // layout cannot take are not enumerated (vpp > 1 with pp = 1, EP overlap with ep = 1); the other
  // framework rules (ValidateRunSettings, ValidateEpOverlap, the vpp chunk rule) count as invalid.
  std::vector<int64_t> micro_batch_sizes;
  std::vector<Recompute> recomputes;  // selective = training.recompute_modules (empty: Megatron's default set)
  std::vector<int64_t> vpps;          // pp > 1 only
  // vpp searched over every value the chunk rule allows each layout: 1..MaxVpp(pp, num_hidden_layers)
  // (pipeline_schedule.h; `search` without --vpp). `vpps` is then ignored. The schedule rule
  // (ValidateInterleavedMicrobatches) still counts as invalid.
  bool every_vpp = false;
  std::vector<DpSharding> dp_shardings;
  std::vector<bool> ep_overlaps;  // --overlap-moe-expert-parallel-comm off / on (ep > 1 only)
  // The dispatchers, pinned (--dispatcher): empty = all_to_all, deredundency where an EP group
  // spans nodes (include_deredundency) and the opt-in ones above.
  std::vector<Dispatcher> dispatchers;
  int threads = 1;        // worker threads; results do not depend on it
  bool prune = true;      // skip what a bound proves cannot fit (exact; SearchResult::pruned)
  bool keep_all = false;  // SearchResult::all: every ranked layout (explain); without it only the top and the Pareto front are kept
};

// A candidate's training settings beside the degrees: 0 / unset = SearchOptions::training's.
struct CandidateSettings {
  int64_t micro_batch_size = 0;
  int64_t num_microbatches = 0;         // per pipeline schedule (the global batch resolves it)
  int64_t grad_accumulation_steps = 0;  // torchtitan's outer loop
  int64_t vpp = 0;
  std::optional<Recompute> recompute;
  std::optional<DpSharding> dp_sharding;
  std::optional<bool> overlap_moe_ep_comm;
};

struct LayoutCandidate {
  ParallelDimsOptions dims;
  Dispatcher dispatcher = Dispatcher::kAllToAll;
  CandidateSettings settings;
  bool batch_divides = true;  // false: the global batch does not divide it (not evaluated)
  std::string batch_reason;   // why not (GlobalBatchMismatch)
  // Its position among the settings of its group (degrees, dispatcher, dp sharding) in the
  // search's enumeration order (ForEachLayout): within one search, the same index in the same
  // group is the same settings, which lets LayoutEvaluator reuse their validation without a
  // lookup (a candidate with other settings at an index is validated afresh). -1 (a candidate
  // formed elsewhere): none.
  int64_t setting_index = -1;
};

// A candidate's settings over `base` (unset = base's): the one rule CandidateTraining and the
// search's rows share.
struct ResolvedSettings {
  int64_t micro_batch_size = 1;
  std::optional<int64_t> num_microbatches;  // unset: pp (BuildPlan)
  int64_t grad_accumulation_steps = 1, vpp = 1;
  Recompute recompute = Recompute::kNone;
  std::optional<DpSharding> dp_sharding;  // unset: the convention's
  bool overlap_moe_ep_comm = false;
};
ResolvedSettings ResolveSettings(const TrainingConfig& base, const CandidateSettings& settings);

// `base` with the candidate's dispatcher and settings applied: the one place a candidate's
// training is formed (search fast path, its reference path, explain, the redundant-experts re-rank).
TrainingConfig CandidateTraining(const TrainingConfig& base, const LayoutCandidate& candidate);

// Whether the search varies vpp: a list (vpps) or every value the chunk rule allows (every_vpp).
bool VppSearched(const SearchOptions& options);

// The budget layouts are held to, in GiB: options.gpu_memory_gib when > 0, else the cluster's
// memory_gib (the hardware's HBM per GPU).
double SearchBudgetGib(const SearchOptions& options);

// The machine of the plans a search builds (its reference path, explain, the redundant-experts
// re-rank): the cluster's locality unit as the node size (network.h MachineOf, as the time model
// counts nodes) and options.gpu_memory_gib as given (0 = none; layouts are held to SearchBudgetGib).
Machine SearchPlanMachine(const SearchOptions& options);

}  // namespace dockyard
