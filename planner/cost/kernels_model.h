// The memory-bound kernels of a transformer layer and the launch gaps between kernels: what a
// step spends outside its GEMMs (docs/cost-model.md, "Memory-bound kernels"). Used by the cost
// model with `--compute-model kernels` (compute_model.h ComputeModel::kKernels); nothing here is read otherwise.
//
// Every kernel is bytes over HBM: time = max(bytes / (hbm_gbps x hbm_efficiency), floor), the floor
// being the calibration's memory_floor_us (a kernel that moves almost nothing still costs a launch
// and a tail). Bytes count each tensor read and each tensor written once, activations at the
// activation dtype, router scores and the loss in fp32, as the kernels of Megatron-Core /
// TransformerEngine do them:
//  - RMSNorm (TE rmsnorm fwd/bwd): forward reads x and writes y (2 D per token); backward reads x and
//    dy and writes dx (3 D). The weight gradient's partial sums are small and ignored.
//  - residual add: forward reads two inputs and writes one (3 D); backward passes the gradient
//    through and adds it to the branch's (3 D).
//  - q/k norms (Qwen3: per head; OLMoE: full width) and MLA's q_a / kv_a layernorms: RMSNorm over
//    the normed width.
//  - rotary (TE fused_rope): reads and writes the rotated part of q and k, forward and backward.
//    Unfused (KernelShape::rotary_unfused; Megatron-Core rope_utils.py _apply_rotary_pos_emb_bshd,
//    per tensor t of N elements, q and k apart): the forward builds cos and sin from the [s, d]
//    frequencies (cos, x mscale, cast; sin, x mscale, cast: six small kernels) and runs t x cos
//    (read and write N), -x2 (N / 2 each) and the rotate-half cat (N each), x sin (N each), the add
//    (2 N read, N written) and the cat with the empty pass-through part (N each): 12 N; the backward
//    runs x sin (2 N), the negation (N), the chunk's cat (2 N), x cos (2 N), the two branches'
//    gradients added (3 N) and the slice's backward (zeros, then a copy: 3 N): 13 N.
//  - SwiGLU (Megatron bias_swiglu / TE swiglu): forward reads gate and up (2 F) and writes F;
//    backward reads gate, up and dy (3 F) and writes dgate and dup (2 F).
//  - router: softmax / sigmoid over E scores in fp32 (read E, write E) and top-k (read E, write k
//    values and indices); backward: the score-function backward (read 2 E, write E).
//  - cross-entropy over the vocabulary shard (Megatron vocab_parallel_cross_entropy): unfused, the
//    forward reads the logits, writes and re-reads fp32 exponentials and the backward reads them
//    and writes the bf16 gradient; fused (Megatron --cross-entropy-loss-fusion), the forward reads
//    the logits once and the backward writes the gradient once.
// Per-token widths are after tensor parallelism (heads / tp, F / tp); the norms and residual adds
// run on the sequence-parallel shard of the tokens.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "planner/cost/knobs.h"
#include "planner/model/expert_eager.h"
#include "planner/model/run_settings.h"
#include "planner/model/training.h"
#include "planner/model/model_spec.h"

namespace dockyard {

// One memory-bound kernel of one pass: its name and the bytes it moves over HBM.
struct KernelBytes {
  std::string name;  // "input_rmsnorm", "residual_add", "rotary", "swiglu", "router_topk", ...
  double bytes = 0;
};

// What the memory-bound kernels of one layer depend on.
struct KernelShape {
  double tokens = 0;         // T: tokens of one micro-batch on a rank (Workload::tokens)
  double sp_tokens = 0;      // tokens the norms and residual adds see: ceil(T / tp) with sequence parallelism
  double router_tokens = 0;  // tokens a rank routes (Workload::dispatch_tokens)
  double tp = 1;             // tensor-parallel degree (heads and F are divided by it)
  double act_bytes = 2;      // bytes per activation element
  // Steps of the context-parallel ring (cp under --cp-comm-type p2p, else 1): each launches its
  // flash kernel, and each after the first its output / LSE correction (forward) or its gradient
  // accumulation (backward) (TransformerEngine AttnFuncWithCPAndKVP2P).
  double ring_steps = 1;
  // Whether the rotary embedding runs as PyTorch's eager ops rather than TE's fused kernel
  // (RotaryRunsUnfused): AttentionBlockKernels' "rotary_*" kernels.
  bool rotary_unfused = false;
};

// Whether Megatron-Core applies the rotary embedding of `model`'s GQA attention unfused: its
// apply_rotary_pos_emb takes TE's fused RoPE only where the YaRN attention factor (mscale) is 1
// ("mscale=... is not supported by TE's fused RoPE. Using unfused implementation.",
// megatron/core/models/common/embeddings/rope_utils.py, since NVIDIA/Megatron-LM #2038, 2025-11;
// attention.py passes _yarn_get_concentration_factor_from_config). gpt-oss (YaRN factor 32, no mscale
// in Megatron-Bridge's provider: 1.3466) runs it unfused; DeepSeek-V3 and Kimi-K2 (MLA, factor 1)
// and models without YaRN do not. torchtitan's rotary is priced as one fused kernel.
bool RotaryRunsUnfused(const ModelSpec& model, bool megatron);
// The reports' figure of it: the model's YaRN attention factor where the rotary runs unfused, else 0
// (compute_model.h ComputeModelToJson's rope_attention_factor).
double UnfusedRotaryFactor(const ModelSpec& model, bool megatron);

// The memory-bound kernels of the attention block of one layer (input norm, q/k or MLA latent
// norms, rotary, the post-attention norm and both residual adds), forward (`backward` false) or
// backward.
std::vector<KernelBytes> AttentionBlockKernels(const ModelSpec& model, const KernelShape& shape, bool backward);
// The router's score function and top-k over `router_tokens` tokens.
std::vector<KernelBytes> RouterKernels(const ModelSpec& model, const KernelShape& shape, bool backward);
// The SwiGLU activation of `rows` rows of intermediate width `f` (already divided by any TP).
KernelBytes SwigluKernel(double rows, double f, double act_bytes, bool backward);

// The eager PyTorch ops Megatron-Core's TEGroupedMLP runs around the routed experts' grouped GEMMs
// when TransformerEngine's op fuser is off (RunSettings::use_transformer_engine_op_fuser, Megatron-LM's
// default), as Megatron-Core 0.15-0.19 run them (megatron/core/transformer/moe/experts.py; the
// release of Megatron-Bridge 26.04 is 0.17), over one micro-batch's `rows` rows on a rank:
//  - "expert_act_clamp" (ModelSpec moe.swiglu_limit > 0; Megatron activation_func_clamp_value):
//    fused_bias_geglu.py weighted_bias_quick_geglu_impl clamps the gate half (<= limit) and the up
//    half ([-limit, limit]) of the first linear's [rows, 2F] output and torch.cat's them before
//    the fused activation: forward two clamps (read and write F each) and the cat (read and write
//    2F): 8 F elements; backward torch's clamp_backward, where(x <= max, grad, 0) on the gate half
//    (a comparison reading F and writing an F-byte mask, the where reading mask and grad and
//    writing F) and where((x >= min) & (x <= max), grad, 0) on the up half (two comparisons, the
//    in-place and reading two masks and writing one, the where), then the chunk's backward, a cat
//    of the two halves' gradients (read and write 2F): (11 act_bytes + 8) F bytes per row.
//  - "expert_fc2_bias" (ModelSpec moe.expert_bias; the second linear's bias is returned unadded,
//    skip_bias_add, and scaled by each row's router probability): TEGroupedMLP._apply_bias's
//    torch.cat([t + b * p for each local expert]).to(act dtype), in the dtype q = max(act_bytes,
//    probs_bytes) that the probability promotes it to: b * p writes q D, the add reads act_bytes
//    D + q D and writes q D, the cat reads and writes q D, and the cast (only when q differs)
//    reads q D and writes act_bytes D: forward (2 act_bytes + 6 q) D bytes per row with a cast,
//    (act_bytes + 5 q) D without; backward the cast's (act_bytes + q) D, the add's gradient cast
//    back to the activation's dtype (q + act_bytes) D (both only with a cast), the split's
//    backward, a cat of the experts' gradients (2 act_bytes D), and the product's two gradients,
//    of b and of p, each a multiply (read and write q D) and a reduction (read q D): 6 q D.
//    At act_bytes 2 and fp32 probabilities: 28 D forward, 40 D backward.
// The first linear's bias is added inside TransformerEngine's GroupedLinear (skip_bias_add off),
// and the activation itself is SwigluKernel's (the fused weighted quick-GeGLU). Not counted:
// the same clamp in the shared experts' and dense MLPs (no model with a limit has them).
// `rows`: rows the rank's local experts receive; `f`: the routed width on the rank (F / etp);
// `probs_bytes`: the router probabilities' dtype, fp32 (4) after the flex dispatcher (DeepEP /
// HybridEP: token_dispatcher.py casts token_probs to float32), else the router's output dtype,
// the activation's under Megatron's default moe_router_dtype.
struct ExpertEagerShape {
  double rows = 0, f = 0, hidden = 0;
  double act_bytes = 2, probs_bytes = 2;
  bool clamp = false, fc2_bias = false;
};
// The shape for a run, rows left at 0 for the caller: the ops planner/model/expert_eager.h
// ExpertEagerOpsOf says run.
ExpertEagerShape ExpertEagerShapeOf(const ModelSpec& model, const TrainingConfig& training, bool megatron, double f, double act_bytes);
std::vector<KernelBytes> ExpertEagerKernels(const ExpertEagerShape& shape, bool backward);

// The final norm and the cross-entropy over the vocabulary shard V / tp of the last stage.
std::vector<KernelBytes> LossKernels(const ModelSpec& model, const KernelShape& shape, bool fused_cross_entropy, bool backward);

// The embedding's backward on the first stage, per micro-batch: torch's embedding_dense_backward
// writes a zeroed V / tp x D gradient in the parameter dtype and scatter-adds the T x D output
// gradient into it; under Megatron (`megatron_main_grad`) the DDP hook then adds that gradient to
// the fp32 main_grad (megatron/core/distributed/distributed_data_parallel.py
// _make_backward_post_hook: param.main_grad.add_(param.grad)), reading both and writing main_grad.
// SimuMax measures 1.7 ms on B200 for DeepSeek-V3's 129,280 x 7,168 table
// (../shared/fidelity/blackwell-and-corrections.md section 1). `grad_bytes` is the main_grad dtype's size.
std::vector<KernelBytes> EmbeddingBackwardKernels(const ModelSpec& model, const KernelShape& shape, bool megatron_main_grad,
                                                  double grad_bytes);

// What the optimizer step and the passes around it read and write on one rank, per step.
struct StepEndShape {
  double grad_buffer_bytes = 0;  // the rank's gradient bytes (MemoryBreakdown::grads_bytes)
  double optimizer_elems = 0;    // the elements it steps (MemoryBreakdown::optimizer_elems)
  double grad_bytes = 4;         // per element: grad_dtype
  double param_bytes = 2;        // param_dtype (the model copy Megatron writes back)
  double master_bytes = 4;       // fp32 master copy, 0 when params are fp32
  double moment_bytes = 8;       // AdamW's two moments, 0 for SGD
  bool megatron = false;         // Megatron's DDP buffers and (distributed) optimizer, else torch's (torchtitan)
  bool data_parallel = false;    // dp x cp > 1: Megatron scales the gradients by 1 / (dp x cp) before reducing
  bool clip = true;              // the gradient norm and the clipping run (RunSettings::clip_grad > 0)
  bool nan_check = true;         // Megatron's NaN check of the buffer runs (RunSettings::check_for_nan_in_grad)
};
// The memory-bound passes of the step's end, each tensor read or written once (bytes per element
// in brackets; G the gradient buffer, S the optimizer's elements):
//  - Megatron (megatron/core/distributed/param_and_grad_buffer.py, optimizer/distrib_optimizer.py,
//    optimizer/clip_grads.py, Megatron-LM defaults): zero_grad_buffer writes G; the NaN check
//    (--check-for-nan-in-loss-and-grad, on by default) reads G for its norm; with dp x cp > 1 the
//    1 / (dp x cp) scaling before the reduce (average_in_collective off) reads and writes G;
//    bf16 gradients are copied into fp32 main gradients (S x (grad + 4)); the gradient norm reads
//    the fp32 main gradients (S x 4); clipping by it (--clip-grad 1.0; multi_tensor_scale with the
//    coefficient clamped to 1, so always run) reads and writes them; Adam reads weights, moments and
//    gradient and writes weights and moments (S x (2 (4 + moments) + 4)); the fp32 weights are
//    copied into the model's params (S x (4 + param)) unless they are the params.
//  - torch (torchtitan): zero_grad(set_to_none) writes nothing; clip_grad_norm_ reads the
//    gradients for the norm and reads and writes them to scale; Adam as above with the gradient at
//    grad_dtype.
// SimuMax's breakdown of the same passes on B200 (zero-grad 5.2, two norms 8.4, scaling 10.3,
// clipping 6.5, Adam 32.3, param copy 4.9 ms; blackwell-and-corrections.md section 1) is the check.
std::vector<KernelBytes> StepEndKernels(const StepEndShape& shape);

// Sum over kernels of max(bytes / (hbm_gbps x hbm_efficiency), floor_us), in microseconds.
double MemoryBoundUs(const std::vector<KernelBytes>& kernels, double hbm_gbps, double hbm_efficiency, double floor_us);
// The same for one kernel (no list to build): max(bytes / bandwidth, floor_us).
double MemoryBoundUs(const KernelBytes& kernel, double hbm_gbps, double hbm_efficiency, double floor_us);

// The grouped weight-gradient GEMM's main-gradient traffic, per micro-batch, in microseconds:
// wgrad_accumulate_share x elements x bytes_per_element / (hbm_gbps x hbm_efficiency). Megatron
// (TransformerEngine's fused wgrad accumulation, Megatron-LM's gradient accumulation fusion, on by
// default) reads and writes each local expert's main_grad in the GEMM's epilogue: bytes_per_element
// = 2 x main_grad bytes (grad_dtype; fp32 by default); without the fusion
// (--no-gradient-accumulation-fusion) the GEMM writes its gradient in the param dtype and an add
// reads it into main_grad: 2 x param bytes + 2 x main_grad bytes. torchtitan's torch._grouped_mm
// writes its weight gradient once, in the param dtype. `local_expert_elems`: the rank's routed-expert weight
// elements (local experts x gate, up and down). A dense linear's weight gradient is not given this
// term: its many rows make the traffic small beside the GEMM, and the measured dense wgrad
// efficiencies hold it. With few rows per expert it is a large part of the grouped wgrad: on B200
// the grouped wgrad pass is 0.21-0.33 of peak against 0.37-0.51 forward (SimuMax's sweep).
double MainGradBytesPerElement(bool megatron, bool accumulation_fused, double grad_bytes, double param_bytes);
double GroupedWgradAccumulateUs(double local_expert_elems, double bytes_per_element, double hbm_gbps, const MemoryBoundKnobs& knobs);

// The GPU's idle time (us) that one MoE layer's host synchronization leaves in one forward
// (knobs.h HostKnobs::moe_sync_idle_us, measured) where the dispatcher waits on the host for its
// token counts (pipeline_schedule.h MoeLayerSynchronizes: Megatron-Core's dropless dispatchers --
// the all-to-all's splits and the grouped GEMM's m_splits -- torchtitan's with expert parallelism;
// none under a whole-iteration CUDA graph or with static splits); 0 otherwise. EP overlap hides it
// in the paired micro-batches (layer_phases.cc OverlapEpComm).
double MoeSyncIdleUs(const TrainingConfig& training, bool megatron, int64_t ep, const HostKnobs& host);

// The exposed host gap of launching `kernels` kernels: kernels x (graph_launch_us under CUDA graphs,
// else kernel_launch_us), in microseconds.
double LaunchGapUs(double kernels, bool cuda_graphs, double kernel_launch_us, double graph_launch_us);

// What the kernel-level compute model adds to the phases of one layer (and to lm_head), per
// micro-batch, [0] forward and [1] backward (with full recomputation the backward also re-runs
// the forward's kernels): the memory-bound kernels above and the launch gaps of every kernel of
// the phase, GEMMs and flash attention included (GQA: qkv and o projections; MLA: q_a, q_b (or q),
// kv_a, kv_b, o; each GEMM twice in the backward, dgrad and wgrad). The routed experts' SwiGLU is
// routing-dependent and is added by SimulateMoePhases; grouped_gemm here is its launch gaps only.
struct KernelExtrasUs {
  double attention[2] = {0, 0}, router[2] = {0, 0}, grouped_gemm[2] = {0, 0}, shared_experts[2] = {0, 0}, dense_mlp[2] = {0, 0},
         lm_head[2] = {0, 0};
};
// `hbm_gbps` is the GPU's HBM bandwidth (ClusterSpec::hbm_gbps); the knobs (hbm_efficiency,
// floor_us, kernel_launch_us, graph_launch_us) are the GPU's, the run decides CUDA graphs and the
// fused cross-entropy (RunSettings::cuda_graphs, fused_cross_entropy).
KernelExtrasUs KernelExtras(const ModelSpec& model, const KernelShape& shape, const MemoryBoundKnobs& knobs, const RunSettings& run,
                            double hbm_gbps, bool full_recompute);

}  // namespace dockyard
