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
bool Fp8Blockwise(const TrainingConfig& training);

// Whether the parameters of role group `group` (inventory.h RoleGroup) are weights of FP8 GEMMs:
// attention, routed experts, shared experts, dense MLP (TransformerEngine runs neither the
// router, the norms, the embedding nor lm_head in FP8). The FP8 weight copies and the FP8
// parameter all-gather both follow it.
bool Fp8GemmGroup(std::string_view group);
// Bytes per element of one FP8 copy of such a weight: 1 B, plus one fp32 scale per 128x128
// block with blockwise scaling (0 without FP8). The all-gather sends one copy.
double Fp8WeightBytesPerElement(const TrainingConfig& training);
// Bytes per element of the FP8 weight copies kept beside the parameters (0 without FP8).
double Fp8WeightCopyBytesPerElement(const TrainingConfig& training);
// Bytes of an FP8 activation of `elements` elements saved for backward: 1 B each, plus with
// blockwise scaling one fp32 scale per 1x128 tile (a tensorwise scale is one fp32 per tensor, left
// out). TransformerEngine's Linear / LayerNormLinear / GroupedLinear save the quantized input of
// an FP8 GEMM for the wgrad GEMM, keeping only its column-wise data ("Discard row-wise data since
// it is not needed in backward pass", transformer_engine/pytorch/module/linear.py _Linear.forward).
template <typename Int>
Int Fp8ActivationBytes(Int elements, bool blockwise) {
  return elements + (blockwise ? (elements + 127) / 128 * 4 : 0);
}
// Bytes an input-quantize kernel moves per element of a BF16 (`act_bytes`) tensor.
double Fp8QuantizeBytesPerElement(bool blockwise, double act_bytes);
// Bytes per element of a dispatched row of `hidden` elements: DispatchRowBytes / hidden (act_bytes
// unless --fp8-dispatch; with it 1 B per element plus a 4 B scale per started 128-element tile).
double DispatchBytesPerElement(const TrainingConfig& training, double hidden, double act_bytes);
// Bytes of one dispatched token row of `hidden` elements: hidden x act_bytes, or with FP8 dispatch
// 1 B per element plus one fp32 scale per 128-element tile (DeepEP use_fp8:
// hidden + 4 x ceil(hidden / 128)). The deepep dispatcher's rows and RDMA buffers use it.
double DispatchRowBytes(double hidden, double act_bytes, bool fp8);

// Checks precision ("bf16" | "fp8"), fp8_recipe ("tensorwise" | "blockwise", and not given
// without fp8), fp8_param_gather (only with fp8; FSDP is checked by BuildPlan once dp_sharding
// is resolved), optimizer_states_dtype ("float32" | "bfloat16"). Throws dockyard::Error naming
// `origin` + the field, the value and the rule.
void ValidatePrecision(const TrainingConfig& training, const std::string& origin);

// Checks fp8_param_gather against the resolved dp_sharding (BuildPlan): fsdp under either
// convention; zero1 only under --convention megatron (`megatron`), Megatron's distributed
// optimizer (torchtitan has no FP8 all-gather outside FSDP2: torchao
// enable_fsdp_float8_all_gather); never ddp (megatron/training/arguments.py: "--fp8-param-gather
// only supported with distributed optimizer, torch fsdp2, megatron fsdp, or inference mode").
// Throws dockyard::Error naming fp8_param_gather, the dp_sharding and the rule.
void ValidateFp8ParamGather(const TrainingConfig& training, bool megatron);

}  // namespace dockyard
