// The compute model and the run settings it prices, as `dockyard-plan simulate / search` and
// bench_fidelity name them (docs/cost-model.md §3.11-3.12): `--compute-model kernels|gemm`,
// `--cuda-graphs` (and the training's `--cross-entropy unfused|fused`, which it checks).
//   kernels (the default): GEMMs and flash attention by shape after sharding (gemm_efficiency.h),
//     memory-bound kernels and the launch gap of every kernel (kernels_model.h);
//   gemm: the older model, GEMMs at fixed efficiencies (GemmKnobs::dense_efficiency,
//     FlashKnobs::fixed_efficiency, the grouped-GEMM curve) and no memory-bound kernels or launch gaps.
// The compute model is a choice of dockyard's, neither a knob nor a setting of the run; CUDA graphs
// and the fused cross-entropy are run settings (planner/model/run_settings.h).
#pragma once

#include <string>

#include "planner/base/json_util.h"
#include "planner/model/run_settings.h"
#include "planner/model/training.h"

namespace dockyard {

enum class ComputeModel { kKernels, kGemm };

// The CLI's default, the model SimulateStep and the search use unless told otherwise.
inline constexpr const char* kDefaultComputeModel = "kernels";

// Sets `*model` from `model_name` and run->cuda_graphs / full_iteration_cuda_graph (nothing else), and checks the run's
// fused cross-entropy (run->fused_cross_entropy, the training flag --cross-entropy, Megatron
// --cross-entropy-loss-fusion) against the model. `model_name`: "kernels" | "gemm"; `cuda_graphs`:
// Megatron --enable-cuda-graph / --cuda-graph-impl. Throws dockyard::Error naming the flag and
// value for an unknown model, and for --cuda-graphs or --cross-entropy fused with `gemm`: that
// model has no launch gaps for CUDA graphs to shorten and no cross-entropy kernels to fuse, so the
// setting would change no time (refused rather than ignored).
// `full_iteration_cuda_graph` (--full-iteration-cuda-graph) sets run->full_iteration_cuda_graph and
// implies cuda_graphs; refused with the gemm model as --cuda-graphs is.
void ApplyComputeModel(const std::string& model_name, bool cuda_graphs, ComputeModel* model, RunSettings* run,
                       bool full_iteration_cuda_graph = false);

// What a step is priced with, as the reports name it: {"model": "kernels" | "gemm",
// "gemm_precision": "bf16" | "fp8 tensorwise" | "fp8 blockwise" | "fp8 mxfp8" (training.precision
// and fp8_recipe), "attention_precision": "bf16" | "fp8" (training.fp8_dot_product_attention),
// "cuda_graphs": bool, "cross_entropy": "unfused" | "fused"}, with "fused" its
// "cross_entropy_fusion_impl": "native" | "te", and with FP8 attention "attention_fp8_speedup": the
// flash core's speed-up it was priced at (gemm_efficiency.h FlashCoreSpeedup: 1 where no gain is
// measured, e.g. head dim < 128 or a Hopper preset). `rope_attention_factor`: the model's YaRN
// factor where its rotary runs unfused (kernels_model.h RotaryRunsUnfused), else 0: "rotary":
// "unfused" and "rope_attention_factor" under the kernel-level model.
Json ComputeModelToJson(ComputeModel model, const TrainingConfig& training, double attention_fp8_speedup, double rope_attention_factor);

}  // namespace dockyard
