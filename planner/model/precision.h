// Training precision: FP8 GEMMs (TransformerEngine recipes as Megatron-LM's --fp8-format /
// --fp8-recipe select them), FP8 dispatch and BF16 optimizer states (docs/cost-model.md §3.14,
// docs/memory-model.md "FP8"). All opt-in: with the defaults (bf16, fp32 moments) nothing moves.
//
//  - FP8 GEMMs (--precision fp8) run at the FP8 tensor-core peak, 2x the dense BF16 peak on every
//    supported GPU (H100 / H200 / H800 / B200 / GB200 datasheets), at fp8_efficiency_ratio of the
//    BF16 efficiency of the same shape (DeepGEMM FP8 grouped GEMM on H800: 1,099-1,297 TFLOP/s at
//    4-8K rows per group, runs.json C22), plus the kernels that quantize each GEMM's input (forward:
//    X, backward: dY): tensorwise current scaling reads the BF16 tensor twice (amax, then cast) and
//    writes FP8; blockwise (1x128 activation tiles, 128x128 weight blocks, DeepSeek-V3 style) reads
//    once and writes FP8 plus one fp32 scale per 128 elements. The peak and efficiency apply in
//    both compute models (gemm_efficiency.h Fp8GemmSpeedup); the quantize kernels are costed
//    under --compute-model kernels, the only model with memory-bound kernels.
//  - MXFP8 (--fp8-recipe mxfp8, or --precision mxfp8; Megatron --fp8-recipe mxfp8, TransformerEngine
//    MXFP8BlockScaling; Blackwell tensor cores only, SM100+): E4M3 in both passes, one E8M0 (1 B)
//    scale per 32 consecutive elements, and separate row-wise and column-wise quantized copies (a
//    32-element block runs along a row for one, along a column for the other: not a transpose of each
//    other). Its GEMMs run at the FP8 peak times mxfp8_efficiency_ratio (knobs.h; measured on B200);
//    each FP8 linear's input quantize (forward X, backward dY) reads the BF16 tensor once and writes
//    both copies with their scales (TransformerEngine quantizes row- and column-wise in one kernel).
//    Dimensions are padded to 32: every model dockyard reads has hidden and expert widths that are
//    multiples of 32, and the expert rows Megatron pads to 32 for quantization
//    (--moe-router-padding-for-quantization) lie inside the grouped GEMM's 128-row tile padding the
//    kernel-level model already prices (gemm_efficiency.h ExpertMlpForwardUs).
//  - FP8 weight copies (memory): TransformerEngine keeps a row-wise and a column-wise (transposed)
//    FP8 copy of every weight it runs in FP8: 2 B per element, plus one fp32 scale per 128x128 block
//    of each copy with blockwise scaling.
//  - FP8 parameter all-gather (--fp8-param-gather; Megatron --fp8-param-gather, torchtitan
//    float8 enable_fsdp_float8_all_gather): the weights of FP8 GEMMs are all-gathered as FP8,
//    1 B per element (plus blockwise 128x128 block scales) instead of param_dtype; the others
//    (norms, router, embedding, lm_head) stay in param_dtype. Needs --precision fp8, and FSDP
//    (the per-layer all-gathers) or, under --convention megatron, the distributed optimizer
//    (dp_sharding zero1: the all-gather of the updated parameters after the optimizer step).
//    Under the distributed optimizer Megatron builds those weights as FP8 tensors
//    With MXFP8, Megatron all-gathers the BF16 of the updated master shard into the gradient buffer
//    (megatron/core/distributed/param_and_grad_buffer.py: "For MXFP8 param: Create a shared buffer for
//    param AG and grad RS") and re-quantizes it there, so the all-gather moves param_dtype bytes
//    (Fp8ParamGatherBytesPerElement) and no separate parameter buffer is kept; FSDP has no MXFP8
//    all-gather dockyard models (torchao's MX converters have none; Megatron-FSDP's MXFP8
//    transpose buffers are not modelled), so that pair is refused.
//    (megatron/training/training.py get_model: TransformerEngine fp8_model_init when
//    args.fp8_param_gather), keeps them in a uint8 parameter buffer
//    (megatron/core/distributed/param_and_grad_buffer.py group_params_for_buffers: "torch.uint8
//    for FP8/NVFP4 parameters") which the step's all-gather sends, and casts the fp32 master
//    shard to FP8 after the step (megatron/core/optimizer/distrib_optimizer.py
//    _copy_main_params_to_model_params, quantize_param_shard): no param_dtype copy of those
//    weights is kept (workload.h Fp8ModelParamBytes).
//  - FP8 dispatch (--fp8-dispatch, Megatron --moe-router-... DeepEP FP8 dispatch): the dispatch
//    all-to-all sends 1 B per element plus one fp32 scale per 128 elements; combine stays BF16.
//  - BF16 optimizer states (--optimizer-states-dtype bf16, Megatron --exp-avg-dtype /
//    --exp-avg-sq-dtype bf16 as Megatron-Bridge recipes set them): AdamW moments 2 x 2 B.
#pragma once

#include <string>
#include <string_view>

#include "planner/model/training.h"

namespace dockyard {

// The FP8 dense tensor-core peak over the BF16 one: 2 on every supported GPU (H100 / H200 / H800 /
// B200 / GB200 datasheets).
constexpr double kFp8PeakOverBf16 = 2.0;

bool Fp8Gemms(const TrainingConfig& training);
bool Fp8Mxfp8(const TrainingConfig& training);

// How FP8 tensors are scaled: none (BF16 GEMMs), one fp32 scale per tensor, fp32 scales per 1x128
// activation tile and 128x128 weight block, or MXFP8's E8M0 scale per 32 elements.
enum class Fp8Scaling : uint8_t { kNone, kTensorwise, kBlockwise, kMxfp8 };
Fp8Scaling Fp8ScalingOf(const TrainingConfig& training);

// MXFP8's block: one E8M0 scale (1 B) per 32 elements (OCP MX spec v1.0; TransformerEngine
// MXFP8BlockScaling).
constexpr double kMxfp8BlockElements = 32.0;

// `--precision mxfp8` is a name for `--precision fp8 --fp8-recipe mxfp8`: rewrites `training` to that
// (precision "fp8", fp8_recipe "mxfp8"). Throws dockyard::Error naming `origin` + the field when
// another recipe was asked for beside it (`recipe_given`: the recipe was set, even to the default
// tensorwise).
void NormalizeMxfp8Precision(TrainingConfig* training, const std::string& origin, bool recipe_given = false);

// Whether the parameters of role group `group` (inventory.h RoleGroup) are weights of FP8 GEMMs:
// attention, routed experts, shared experts, dense MLP (TransformerEngine runs neither the
// router, the norms, the embedding nor lm_head in FP8). The FP8 weight copies and the FP8
// parameter all-gather both follow it.
bool Fp8GemmGroup(std::string_view group);
// Bytes per element of one FP8 copy of such a weight: 1 B, plus one fp32 scale per 128x128
// block with blockwise scaling, or one 1 B scale per 32 elements with MXFP8 (0 without FP8).
double Fp8WeightBytesPerElement(const TrainingConfig& training);
// Bytes per element the FP8 parameter all-gather (--fp8-param-gather) sends for an FP8 GEMM weight:
// one FP8 copy (Fp8WeightBytesPerElement), except with MXFP8, where Megatron gathers `param_bytes`
// (BF16) and quantizes after (see above). 0 without FP8.
double Fp8ParamGatherBytesPerElement(const TrainingConfig& training, double param_bytes);
// Bytes per element of the FP8 weight copies kept beside the parameters (0 without FP8).
double Fp8WeightCopyBytesPerElement(const TrainingConfig& training);
// Bytes of an FP8 activation of `elements` elements saved for backward: 1 B each, plus with
// blockwise scaling one fp32 scale per 1x128 tile, with MXFP8 one 1 B scale per 32 elements (a
// tensorwise scale is one fp32 per tensor, left out). TransformerEngine's Linear / LayerNormLinear /
// GroupedLinear save the quantized input of an FP8 GEMM for the wgrad GEMM, keeping only its
// column-wise data ("Discard row-wise data since it is not needed in backward pass",
// transformer_engine/pytorch/module/linear.py _Linear.forward).
template <typename Int>
Int Fp8ActivationBytes(Int elements, Fp8Scaling scaling) {
  if (scaling == Fp8Scaling::kBlockwise) return elements + (elements + 127) / 128 * 4;
  if (scaling == Fp8Scaling::kMxfp8) return elements + (elements + 31) / 32;
  return elements;
}
// Bytes an input-quantize kernel moves per element of a BF16 (`act_bytes`) tensor: tensorwise
// reads it twice (amax, then cast) and writes FP8; blockwise reads once and writes FP8 plus fp32
// scales per 128; MXFP8 reads once and writes the row-wise and the column-wise copy, each 1 B plus a
// 1 B scale per 32.
double Fp8QuantizeBytesPerElement(Fp8Scaling scaling, double act_bytes);
// Bytes per element of a dispatched row of `hidden` elements: DispatchRowBytes / hidden (act_bytes
// unless --fp8-dispatch; with it 1 B per element plus a 4 B scale per started 128-element tile).
double DispatchBytesPerElement(const TrainingConfig& training, double hidden, double act_bytes);
// Bytes of one dispatched token row of `hidden` elements: hidden x act_bytes, or with FP8 dispatch
// 1 B per element plus one fp32 scale per 128-element tile (DeepEP use_fp8:
// hidden + 4 x ceil(hidden / 128)). The deepep dispatcher's rows and RDMA buffers use it.
double DispatchRowBytes(double hidden, double act_bytes, bool fp8);

// Checks precision ("bf16" | "fp8"; "mxfp8" is rewritten first by NormalizeMxfp8Precision),
// fp8_recipe ("tensorwise" | "blockwise" | "mxfp8", and not given without fp8), fp8_param_gather (only with fp8; FSDP is checked by BuildPlan once dp_sharding
// is resolved), fp8_dot_product_attention (only with fp8), optimizer_states_dtype ("float32" | "bfloat16"). Throws dockyard::Error naming
// `origin` + the field, the value and the rule.
void ValidatePrecision(const TrainingConfig& training, const std::string& origin);

// Checks fp8_param_gather against the resolved dp_sharding (BuildPlan): fsdp under either
// convention; zero1 only under --convention megatron (`megatron`), Megatron's distributed
// optimizer (torchtitan has no FP8 all-gather outside FSDP2: torchao
// enable_fsdp_float8_all_gather); with MXFP8 only zero1 (see above); never ddp (megatron/training/arguments.py: "--fp8-param-gather
// only supported with distributed optimizer, torch fsdp2, megatron fsdp, or inference mode").
// Throws dockyard::Error naming fp8_param_gather, the dp_sharding and the rule.
void ValidateFp8ParamGather(const TrainingConfig& training, bool megatron);

// Checks that a GPU named `cluster_name` runs the run's FP8 recipe: MXFP8 needs Blackwell tensor
// cores (`mxfp8_tensor_cores`, cluster.h; TransformerEngine's MXFP8BlockScaling needs SM100+).
// Throws dockyard::Error naming fp8_recipe, the cluster and the rule.
void ValidateFp8RecipeOnGpu(const TrainingConfig& training, const std::string& cluster_name, bool mxfp8_tensor_cores);

}  // namespace dockyard
