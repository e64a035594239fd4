// Per-rank memory of a plan, by kind and by role (docs/memory-model.md derives every formula).
//
// Kinds: parameters, gradients, optimizer state, activations, communication buffers; peak is
// their sum (an upper bound: it assumes the last micro-batch's activations and the full gradients
// coexist, as they do at the start of the last backward).
//
// Data-parallel strategies (TrainingConfig::dp_sharding):
//  - fsdp (torchtitan FSDP2, MixedPrecisionPolicy(param_dtype, reduce_dtype)): the sharded
//    parameter is kept in float32 (FSDP2 keeps the original fp32 parameter and casts on all-gather),
//    sharded grads in grad_dtype, AdamW moments 2 x fp32 sharded like the parameter; all-gather
//    buffers of two FSDP units (current + prefetched layer) in param_dtype and one reduce-scatter
//    buffer in grad_dtype.
//  - zero1 (Megatron distributed optimizer): params in param_dtype and grads in grad_dtype
//    replicated over data parallelism; fp32 master weights (when param_dtype is not fp32) and
//    moments sharded over dp_shard*cp (dense) and efsdp (experts).
//  - ddp: like zero1 with nothing sharded.
// Model-parallel sharding (tp, ep, etp, pp) applies in every strategy, through the plan's
// placements.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "planner/plan.h"
#include "planner/workload.h"

namespace dockyard {

struct MemoryBreakdown {
  int64_t params_bytes = 0;
  int64_t grads_bytes = 0;
  int64_t optimizer_bytes = 0;
  int64_t activations_bytes = 0;
  int64_t comm_buffers_bytes = 0;
  int64_t peak_bytes = 0;
  // By role group (RoleGroup names, plus "logits" for activations): bytes per kind.
  std::map<std::string, int64_t> params_by_role, grads_by_role, optimizer_by_role, activations_by_role;
  std::map<std::string, int64_t> comm_buffers_by_use;  // "fsdp_all_gather", "fsdp_reduce_scatter", "all_to_all", ...
};

struct StageMemory {
  int64_t stage = 0;
  int64_t worst_rank = 0;          // the rank of the stage with the highest peak
  int64_t in_flight_microbatches = 1;
  MemoryBreakdown worst;           // that rank's breakdown
};

struct MemoryReport {
  Workload workload;
  std::vector<StageMemory> stages;
  int64_t worst_rank = 0;          // highest peak over all ranks
  int64_t worst_peak_bytes = 0;
  double budget_gib = 0;           // 0 = no budget
  // The worst rank of each stage whose peak exceeds the budget (empty when none or no budget).
  std::vector<int64_t> over_budget_ranks;
};

// Parameter, gradient and optimizer bytes of one rank (activations and buffers left 0).
MemoryBreakdown StaticMemoryOnRank(const Plan& plan, int64_t rank);

// Activation bytes of one micro-batch of one decoder layer by role group (no in-flight
// multiplier; `rc` == kSelective keeps fewer tensors, kFull is applied per stage by the caller),
// from the workload `w` of the plan's degrees. Groups a layer does not have are 0 (dense layers:
// router, routed and shared experts; MoE layers: dense_mlp). Throws dockyard::Error when a group
// overflows int64.
struct LayerActivationBytes {
  int64_t attention = 0, norm = 0, dense_mlp = 0, router = 0, routed_experts = 0, shared_experts = 0;
  bool moe_layer = false;
  bool shared_experts_present = false;  // MoE layer of a model with shared experts
};
LayerActivationBytes LayerActivations(const ModelSpec& model, Recompute rc, const Workload& w, bool moe_layer);

// Activation bytes of one micro-batch for the layers of `stage` (no in-flight multiplier), by
// role group. Throws dockyard::Error on overflow.
std::map<std::string, int64_t> ActivationBytesPerMicrobatch(const Plan& plan, const Workload& w, int64_t stage);

MemoryReport ComputeMemory(const Plan& plan);

}  // namespace dockyard
