// The compute model and its run settings as `dockyard-plan simulate / search` and bench_fidelity
// name them (docs/cost-model.md §3.11-3.12): `--compute-model kernels|gemm`, `--cuda-graphs`,
// `--cross-entropy unfused|fused`, set on CostOptions after checking they fit together.
//   kernels (the default): GEMMs and flash attention by shape after sharding (gemm_efficiency.h),
//     memory-bound kernels and the launch gap of every kernel (kernels_model.h);
//   gemm: the older model, GEMMs at fixed efficiencies (dense_efficiency, attention_efficiency,
//     the grouped-GEMM curve) and no memory-bound kernels or launch gaps.
#pragma once

#include <string>

#include "planner/base/json_util.h"
#include "planner/cost/cost_options.h"

namespace dockyard {

// The model CostOptions{} uses (CostOptions::kernel_compute) and the CLI's default.
inline constexpr const char* kDefaultComputeModel = "kernels";

// Sets kernel_compute, cuda_graphs and fused_cross_entropy on `options` (nothing else).
// `model`: "kernels" | "gemm"; `cross_entropy`: "unfused" | "fused" (Megatron
// --cross-entropy-loss-fusion); `cuda_graphs`: Megatron --enable-cuda-graph / --cuda-graph-impl.
// Throws dockyard::Error naming the flag and value for an unknown model or cross-entropy, and for
// --cuda-graphs or --cross-entropy fused with `gemm`: that model has no launch gaps for CUDA graphs
// to shorten and no cross-entropy kernels to fuse, so the setting would change nothing (refused
// rather than ignored).
void ApplyComputeModel(const std::string& model, bool cuda_graphs, const std::string& cross_entropy, CostOptions* options);

// What `options` prices with, as the reports name it: {"model": "kernels" | "gemm",
// "cuda_graphs": bool, "cross_entropy": "unfused" | "fused"} (ApplyComputeModel's inverse).
Json ComputeModelToJson(const CostOptions& options);

}  // namespace dockyard
