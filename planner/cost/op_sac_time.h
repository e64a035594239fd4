// The backward re-run of torchtitan's per-op selective activation checkpointing
// (planner/model/recompute.h OpSac; docs/cost-model.md §3.13): the pieces of RecomputeForwardUs
// that only the per-op policy re-runs.
#pragma once

#include "planner/model/model_spec.h"
#include "planner/model/recompute.h"
#include "planner/cost/cluster.h"
#include "planner/cost/compute_model.h"
#include "planner/cost/gemm_efficiency.h"

namespace dockyard {

// The forward time of one layer's re-run (even-numbered) linears (OpSacLinears), per part, in
// microseconds, on `tokens` rows of a rank with tensor parallelism `tp`, GEMMs in `precision`, the
// cluster's compute knobs: under ComputeModel::kKernels each at LinearUs (colwise N = out / tp, rowwise K = in / tp, replicated
// unsharded), else 2 x tokens x in x out / tp FLOP at the dense efficiency (layer_terms.cc's projection
// and MLP rule at its `peak` FLOP per microsecond, Fp8GemmSpeedup included). Fills rf.attention_linears, rf.shared_linears,
// rf.dense_linears, rf.attention_kernels (`attention_kernels_us`: the attention block's forward
// memory-bound kernels, 0 without --compute-model kernels) and rf.tp_all_gathers (two
// `tp_collective_us` with tp > 1: the sequence-parallel all-gathers before attention and the MLP,
// whose outputs the policy does not save).
void OpSacForwardUs(const ModelSpec& model, double tokens, double tp, double attention_kernels_us, double tp_collective_us,
                    const ClusterSpec& cluster, double peak, ComputeModel compute_model, GemmPrecision precision, RecomputeForwardUs& rf);

}  // namespace dockyard
