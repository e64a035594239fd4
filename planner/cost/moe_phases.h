// The routing-dependent phases of one MoE layer (permute / unpermute, dispatch, grouped GEMM,
// combine) over a routing sample's layers, per EP rank (docs/cost-model.md sections 3.4 to 3.6 and 4).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "planner/cost/cluster.h"
#include "planner/cost/compute_model.h"
#include "planner/cost/moe_shape.h"
#include "planner/routing/routing.h"

namespace dockyard {

// Those phases over the sampled layers (docs/cost-model.md sections 3.4 to 3.6 and 4), in us per
// layer and micro-batch, forward, unscaled by recomputation.
struct MoePhaseTimes {
  std::vector<double> permute, dispatch, gemm, combine;  // [ep]: each EP rank's mean over the sampled layers
  // The mean over the sampled layers of each layer's slowest rank.
  double permute_max = 0, dispatch_max = 0, gemm_max = 0, combine_max = 0;
  // The backward pass's dispatch: the same rows in BF16 (act_bytes). Equal to `dispatch` unless
  // the forward dispatch is FP8 (shape.dispatch_act_bytes / flex_fp8): only the forward dispatch
  // sends FP8 rows; the backward moves BF16 gradients (Megatron moe/fused_a2a.py: the backward of
  // the dispatch and of the combine run buffer.combine / buffer.dispatch on the gradient).
  std::vector<double> dispatch_bwd;
  double dispatch_bwd_max = 0;
  double imbalance = 1.0;      // max / mean received rows, the largest over the sampled layers
  bool spans_domains = false;  // the EP group spans NVLink domains (its all-to-alls use the NICs)
};
struct FlexLinks;  // flex_counts.h
// `ep_group`: the global ranks of rank 0's EP group in EP order (size ep). `flex_layers`
// (optional, one per sampled layer): the deepep dispatcher's rows per link in place of those of
// routing.layers[l].flex (FlexLinksOf), so that a caller holding one sample for several EP groups
// (the layout search's cache, eval_cache.h) need not copy the sample, nor keep its n x n counts,
// per group.
MoePhaseTimes SimulateMoePhases(const RoutingResult& routing, const std::vector<int64_t>& ep_group, const MoePhaseShape& shape,
                                const ClusterSpec& cluster, ComputeModel model = ComputeModel::kKernels,
                                const std::vector<std::shared_ptr<const FlexLinks>>* flex_layers = nullptr);

}  // namespace dockyard
