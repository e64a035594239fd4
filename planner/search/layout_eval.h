// Fast evaluation of layout-search candidates, bit-identical to the reference path
// (BuildPlan(lite) + ComputeMemory + ComputeWorkload + SimulateStep) without building a plan.
//
// Why it is exact. Every figure the search needs is a sum over parameters of a function of the
// parameter's placement and local shape on the FIRST rank of a stage (memory.h: that rank is a
// worst rank; the cost model reads rank 0). On that rank every shard step takes chunk 0, so a
// parameter's local shape is its global shape with each sharded dim cut to ceil(n / k) in step
// order (placement.h) -- no mesh, no rank coordinates. Parameters that agree on (global shape,
// tp_dim, routed_expert, role group) get the same placement and local shape under any degrees,
// so the inventory is grouped once into parameter CLASSES with a multiplicity:
//  - per decoder layer, its list of classes; layers with the same list share a LAYER KIND
//    (DeepSeek-V3: 2 kinds -- 3 dense layers and 58 MoE layers -- of ~10 classes each);
//  - the embedding unit (stage 0) and the root unit (final norm, lm_head and its bias, and with
//    tied embeddings and pp > 1 the last stage's lm_head copy; stage pp - 1).
// A candidate then costs O(classes + pp x kinds) integer operations instead of O(tensors x
// ranks) with allocations, and data-parallel groups of rank 0 are arithmetic progressions
// {0, s, ..., (n-1)s} (row-major meshes), whose node span and ring crossings are O(1).
// Integer sums are formed in 128 bits; a sum of integers below 2^53 taken as doubles (the cost
// model's FSDP element counts) is exact in any order, so reordering changes no bit. Floating-
// point formulas are shared with the reference (SimulateStepFromInputs, SimulateMoePhases,
// RingCollectiveUs, StepCommUs, LayerActivations), and so is the per-layer stage sum, which
// runs over the layers in order as in SimulateStep.
//
// Where a candidate gets near int64 / 2^53 limits (quantities the reference would check or
// overflow-throw on), the evaluator falls back to the reference path for that candidate, which
// then throws exactly what the reference throws. LayoutEvaluator::fallbacks() counts those; they
// are the only candidates it hands to the reference path (handed_to_reference()).
//
// What takes the fast path: every candidate of every search, under every input the search takes --
// each dispatcher (below); FP8 (--precision fp8, its recipes, --fp8-dispatch, and
// --fp8-param-gather: each unit's FP8 GEMM weights are summed apart per class, for FSDP2's
// per-layer FP8 all-gather (StepInputs::FsdpLayer), Megatron's FP8 parameters
// (memory.h GroupStaticBytesOf) and the zero1 step's FP8 parameter all-gather (comm.h
// StepCollectives)); recompute none / selective (by module) / full, and torchtitan's selective
// checkpointing per layer (--selective-ac-option N: each layer split counts its stages'
// checkpointed layers, recompute.h LayerSacCheckpointed, as ComputeMemory does; the step's
// checkpointed runs are SimulateStepFromInputs' own) and per op ("op": the kept op outputs,
// memory.h OpSacSavedActivations); --routing-sized memory, tied embeddings, vpp, EP overlap and
// the global batch's schedules (the search's front end refuses --mtp-layers and a pipeline
// layout, which this evaluator does not model). An invalid candidate carries the message of the
// first rule BuildPlan would throw, checked in BuildPlan's order.
//
// Caches: the routing sample per (ep, routed tokens, oep) as SearchLayouts had it (drawn through a
// RoutingSampler, so each source rank is drawn once per routed-token count for all ep and oep),
// the deepep per-token node counts per (ep, routed tokens, which EP members share an NVLink
// domain), and the routing-dependent MoE phases per (ep, routed tokens, oep, etp, F / expert TP,
// dispatcher) -- they depend on nothing else -- live in a SearchEvalCache (eval_cache.h) that the
// threads of a search share; the layer split per pp and the class sums are per evaluator.
//
// Every dispatcher takes the fast path: all_to_all and deredundency, and deepep and allgather
// (their buffers by StageBuffers' rules, their dispatch and combine by SimulateMoePhases from the
// shared deepep counts, as SimulateStep prices them).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "planner/cost/cost.h"
#include "planner/model/inventory.h"
#include "planner/model/model_spec.h"
#include "planner/layout/parallel_dims.h"
#include "planner/routing/routing.h"
#include "planner/search/eval_cache.h"
#include "planner/search/search_options.h"
#include "planner/model/training.h"
#include "planner/cost/moe_phases.h"

namespace dockyard {

struct LayoutEvaluation {
  enum class Status { kInvalid, kOverBudget, kRanked };
  Status status = Status::kInvalid;
  ParallelDims dims;       // validated degrees (dp_shard resolved, efsdp); valid candidates only
  int64_t peak_bytes = 0;  // MemoryReport::worst_peak_bytes
  // The largest static bytes (params + grads + optimizer) of a rank: they do not depend on the
  // micro-batch size, recompute, vpp or EP overlap, so when they alone exceed the budget every
  // such setting of the layout does (the search's exact pruning bound).
  int64_t static_peak_bytes = 0;
  // From SimulateStep; filled for ranked candidates, and for over-budget ones when asked.
  bool simulated = false;
  double step_time_us = 0;
  double tokens_per_s_per_gpu = 0;
  double mfu = 0;
  std::string dominant_phase;
  // kInvalid: the message of the rule the candidate breaks, as the plan path words it (BuildPlan's
  // checks, seq_len.h SeqLenSplits); the first one met in the fast path's order.
  std::string reason;
};

class LayoutEvaluator {
 public:
  struct Impl;          // the classes and caches (layout_eval_internal.h)
  struct GroupStatics;  // what a candidate reads that depends only on its degrees, dp sharding, dtypes and precision (layout_eval_internal.h)

  // Prepares the classes of `model` for searches with `options` (world_size, cluster, training,
  // convention, routing, routing_layers; the budget as SearchLayouts takes it). Throws
  // dockyard::Error where PrepareRouting or BuildInventory do.
  // `cache`: the once-per-key work shared with other evaluators of the same model and options
  // (MakeCache); null = a cache of its own.
  LayoutEvaluator(const ModelSpec& model, const SearchOptions& options, std::shared_ptr<SearchEvalCache> cache = nullptr);
  // The cache for evaluators of `model` under `options` (its routing model, routing_layers MoE
  // layers, or every MoE layer of a trace). Throws dockyard::Error where PrepareRouting does.
  static std::shared_ptr<SearchEvalCache> MakeCache(const ModelSpec& model, const SearchOptions& options);
  ~LayoutEvaluator();

  // Tells the routing sampler the routed-token counts of `candidates` (valid or not), so that each
  // source rank is drawn once for all of them (RoutingSampler::ExpectTokenCounts). Optional; no
  // result depends on it.
  void ExpectCandidates(const std::vector<LayoutCandidate>& candidates);

  // The fast path. `simulate_over_budget`: also simulate valid candidates over the budget (the
  // search does not; tests compare them too). `detail` (optional): the full cost breakdown (phases,
  // critical path and its shares) of a simulated candidate. Throws what the reference path would throw.
  LayoutEvaluation Evaluate(const LayoutCandidate& candidate, bool simulate_over_budget = false, CostBreakdown* detail = nullptr);
  // The reference path (BuildPlan + ComputeMemory + ComputeWorkload + SimulateStep), with its own
  // routing cache filled by SampleRouting, as SearchLayouts had it; `detail` as Evaluate's. A
  // layout whose figures overflow int64 (checked_math.h OverflowError: a global batch far beyond
  // its layout's byte counts) is invalid with kOverflowReason, one reason for all such layouts.
  LayoutEvaluation EvaluateReference(const LayoutCandidate& candidate, bool simulate_over_budget = false, CostBreakdown* detail = nullptr);
  static constexpr const char* kOverflowReason =
      "a per-step figure of this layout (bytes, rows) overflows a signed 64-bit integer at this global batch (fewer sequences per step "
      "avoid it)";
  // Whether `candidate`'s degrees and settings pass the rules Evaluate checks before memory
  // (ValidateTraining, the degrees, the run-setting rules, the deredundency oep; the same check
  // Evaluate makes): the search's pruned branch counts a candidate invalid exactly when Evaluate
  // would (the group-level rules of a pruned group held for the candidate that was over budget).
  // `reason` (optional): when false, the rule's message, as LayoutEvaluation::reason.
  bool SettingsHold(const LayoutCandidate& candidate, std::string* reason = nullptr);
  // The full cost breakdown (phases, critical path and its shares) of a candidate the plan path
  // accepts, by the fast path (equal to the reference path's: search_test); throws dockyard::Error
  // otherwise.
  CostBreakdown Breakdown(const LayoutCandidate& candidate);

  double budget_bytes() const { return budget_bytes_; }
  int64_t fallbacks() const;  // candidates Evaluate handed to the reference near overflow
  // Every candidate Evaluate handed to the reference path: the overflow fallbacks (fallbacks());
  // no setting takes a candidate there (the every-candidate tests check it is 0).
  int64_t handed_to_reference() const;
  // Deepep groups whose counts the shared cache read from per-source block counts (after
  // ExpectCandidates; SearchEvalCache::flex_from_blocks).
  int64_t flex_from_blocks() const;
  int64_t routing_from_blocks() const;                                   // SearchEvalCache::routing_from_blocks
  int64_t routing_samples() const { return cache_->routing_samples(); }  // distinct keys, over all sharing evaluators
  // Wall seconds this evaluator spent filling the per-key caches: routing samples, deepep counts
  // and routing-dependent MoE phases (steady clock, read only on cache misses).
  double cache_fill_seconds() const;
  int64_t num_layer_kinds() const;
  int64_t num_classes() const;  // over all layer kinds and units

 private:
  // EvaluateReference without the overflow rule (it throws OverflowError).
  LayoutEvaluation EvaluatePlanPath(const LayoutCandidate& candidate, bool simulate_over_budget, CostBreakdown* detail);
  LayoutEvaluation HandToReference(const LayoutCandidate& candidate, bool simulate_over_budget, CostBreakdown* detail);
  // The evaluator of the model with the vocabulary `candidate`'s plan builds when it differs from
  // model_'s (Megatron-LM pads it to a multiple of --make-vocab-size-divisible-by x tp:
  // model/vocab_padding.h, as BuildPlan does), made on first use and sharing cache_; null when the
  // vocabulary is model_'s own, or when the divisor breaks its rule (the rules refuse the candidate
  // with VocabDivisor's message, TrainingEntryOf).
  LayoutEvaluator* PaddedVocabEvaluator(const LayoutCandidate& candidate);
  // What SimulateStepFromInputs reads of a candidate of group `g` (its settings, dispatcher
  // included, in `w` and `t`): rank 0's groups, the FSDP units, the MoE phases, the step-end collectives.
  // False when an FSDP element count reaches 2^53 (then the reference path takes the candidate).
  bool FillStepInputs(const GroupStatics& g, const Workload& w, const ParallelDims& d, const TrainingConfig& t, StepInputs* out);
  // The routing-dependent MoE phases of a candidate, from the shared cache (filled on a miss).
  const MoePhaseTimes& MoePhasesOf(const Workload& w, const ParallelDims& d, const TrainingConfig& t);

  ModelSpec model_;  // a copy: the evaluator may outlive the caller's model
  SearchOptions options_;
  ParamInventory inventory_;
  std::shared_ptr<SearchEvalCache> cache_;                                                  // fast path: routing, deepep counts, MoE phases
  std::map<std::tuple<int64_t, int64_t, int64_t>, RoutingResult> reference_routing_cache_;  // reference path
  double budget_bytes_ = 0;
  int64_t fallbacks_ = 0;
  int64_t handed_to_reference_ = 0;
  double cache_fill_seconds_ = 0;
  std::unique_ptr<Impl> impl_;
  std::map<int64_t, std::unique_ptr<LayoutEvaluator>> padded_vocab_;  // by padded vocab_size (PaddedVocabEvaluator)
  // The kernel model's per-shape layer times (cost.h KernelTermsMemo) of this evaluator's model,
  // cluster and cost options (options_ is not changed after construction).
  KernelTermsMemoPtr kernel_memo_ = MakeKernelTermsMemo();
};

}  // namespace dockyard
