// Framework run settings that decide how a step is scheduled: flags of the frameworks, not
// calibration knobs (the rules they drive are in pipeline_schedule.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace dockyard {

// torchtitan's fsdp_reshard_after_forward policy (torchtitan/models/llama3/infra/parallelize.py,
// apply_fsdp): "always" reshards each FSDP unit after its forward, "never" keeps it unsharded
// until its backward, "default" = not pp_enabled.
enum class ReshardPolicy { kDefault, kAlways, kNever };
const char* ReshardPolicyName(ReshardPolicy policy);  // "default", "always", "never"
// Throws dockyard::Error naming `field`, the value and the allowed values.
ReshardPolicy ParseReshardPolicy(const std::string& text, const std::string& field);

struct RunSettings;

// Whether the shared experts overlap the combine all-to-all: RunSettings::overlap_shared_experts
// once resolved. Throws dockyard::Error ("internal: ...") when it is still unset.
bool SharedExpertsOverlapped(const RunSettings& settings);

// CUDA's default for CUDA_DEVICE_MAX_CONNECTIONS when the variable is unset (RunSettings::
// cuda_device_max_connections).
constexpr int64_t kCudaDefaultMaxConnections = 8;
// Upper bounds of the SM and queue settings: a GPU has at most 1,024 SMs here (ClusterSpec::
// sm_count's range); CUDA takes CUDA_DEVICE_MAX_CONNECTIONS up to 32.
constexpr int64_t kMaxFlexDispatcherNumSms = 1024;
constexpr int64_t kMaxCudaDeviceMaxConnections = 32;

struct RunSettings {
  ReshardPolicy reshard_after_forward = ReshardPolicy::kDefault;  // --fsdp-reshard-after-forward
  // torchtitan with pp > 1 runs gradient accumulation as an outer loop around the pipeline
  // schedule (each accumulation step runs num_microbatches micro-batches and pays its own bubble
  // and reduce-scatter): --grad-accumulation-steps. 1 = none.
  int64_t grad_accumulation_steps = 1;
  // Megatron-Core DDP (--overlap-grad-reduce / --overlap-param-gather): the step-end gradient
  // reduce (reduce-scatter or all-reduce) runs under the last micro-batch's backward of the stage,
  // the distributed optimizer's parameter all-gather under the next step's first forward.
  bool overlap_grad_reduce = false;
  bool overlap_param_gather = false;
  // How the overlapped parameter all-gather is dispatched (planner/cost/param_gather.h):
  //  - align_param_gather: every pipeline stage dispatches its first chunks' gathers at the start
  //    of the step (Megatron-LM's default, --no-align-param-gather turns it off; arguments.py
  //    turns it off without an interleaved schedule; Megatron-Bridge's CommOverlapConfig turns it
  //    on with pp > 1 and vpp > 1). Read through ParamGatherAligned.
  //  - overlap_param_gather_with_optimizer_step: the first model chunk's gather runs under the
  //    rest of the optimizer step (--overlap-param-gather-with-optimizer-step; off by default;
  //    needs --overlap-param-gather, the distributed optimizer and an interleaved schedule,
  //    arguments.py; Megatron-Bridge's performance scripts turn it on with dp > 1, pp > 1, vpp > 1
  //    outside MXFP8 / NVFP4 and Muon, scripts/performance/utils/overrides.py).
  //  - ddp_bucket_size: the DDP bucket, parameters (--ddp-bucket-size; 0 = Megatron-LM's default
  //    max(40M, 1M x dp x cp); Megatron-Bridge's CommOverlapConfig sets 128 Mi with dp > 1).
  bool align_param_gather = true;
  bool overlap_param_gather_with_optimizer_step = false;
  int64_t ddp_bucket_size = 0;
  // Interleaved 1F1B (Megatron --num-layers-per-virtual-pipeline-stage / torchtitan
  // Interleaved1F1B): model chunks per pipeline rank, --vpp. 1 = plain 1F1B.
  int64_t vpp = 1;
  // Context-parallel K/V exchange (Megatron --cp-comm-type): "p2p" (ring attention: K/V blocks
  // passed around the cp ring, each transfer under one block's attention) or "a2a" (all-to-all of
  // Q, K, V and the output over the cp group, not overlapped). --cp-comm-type.
  std::string cp_comm = "p2p";
  // Megatron --overlap-moe-expert-parallel-comm: the EP dispatch / combine all-to-alls of one
  // micro-batch run under another micro-batch's compute (combined 1F1B: a forward paired with a
  // backward).
  bool overlap_moe_ep_comm = false;
  // Megatron pipeline layouts (pipeline_layout.h): --pipeline-model-parallel-layout (empty =
  // none), --account-for-embedding-in-pipeline-split, --account-for-loss-in-pipeline-split.
  std::string pipeline_layout;
  bool account_for_embedding = false, account_for_loss = false;
  // Pipeline schedule (--pipeline-schedule): "1f1b" (1F1B, interleaved with --vpp) or "dualpipe"
  // (DeepSeek-V3's bidirectional DualPipe, github deepseek-ai/DualPipe).
  std::string schedule = "1f1b";
  // The shared experts' forward runs beside the combine all-to-all (Megatron
  // --moe-shared-expert-overlap turns it on; `simulate --no-overlap` turns it off). Unset: the
  // convention's default, which BuildPlan and the layout search set before anything reads it
  // (planner/layout/convention.h DefaultSharedExpertOverlap: torchtitan on, megatron off); read it
  // through SharedExpertsOverlapped.
  std::optional<bool> overlap_shared_experts;
  // Kernels launched from CUDA graphs (Megatron --enable-cuda-graph / --cuda-graph-impl; --cuda-graphs).
  bool cuda_graphs = false;
  // The whole training iteration captured in one CUDA graph (Megatron --cuda-graph-impl
  // full_iteration; --full-iteration-cuda-graph, which implies cuda_graphs): no host work inside the
  // step, so no MoE layer waits on a host synchronization (knobs.h HostKnobs::moe_sync_idle_us).
  bool full_iteration_cuda_graph = false;
  // Megatron --moe-pad-expert-input-to-capacity (with --moe-expert-capacity-factor): every expert's
  // input padded to its capacity, so the dispatcher's splits are static and it does not synchronize
  // with the host (token_dispatcher.py preprocess returns before the token counts). dockyard prices
  // the rows as dropless routing (exact at balanced routing and capacity factor 1); this setting
  // only removes the synchronization's idle (knobs.h HostKnobs::moe_sync_idle_us).
  bool moe_pad_expert_input_to_capacity = false;
  // The fused cross-entropy kernel (Megatron --cross-entropy-loss-fusion; --cross-entropy fused).
  bool fused_cross_entropy = false;
  // Which fused cross-entropy (Megatron --cross-entropy-fusion-impl, model_parallel_config.py
  // cross_entropy_fusion_impl): "native" (Megatron-Core's fused_vocab_parallel_cross_entropy, the
  // default) or "te" (TransformerEngine's parallel_cross_entropy). Read only with
  // fused_cross_entropy; checked by ValidateCrossEntropyFusionImpl.
  std::string cross_entropy_fusion_impl = "native";
  // The Megatron-Core release the run used, "MAJOR.MINOR" or "MAJOR.MINOR.PATCH"
  // (--megatron-core-version; empty = the current release). It decides which tensors the MoE layer
  // saves for backward (MegatronProbsInActivation, planner/accounting/memory.h LayerActivations).
  std::string megatron_core_version;
  // The step's end (kernels_model.h StepEndKernels). Megatron --clip-grad (default 1.0;
  // megatron/core/optimizer/optimizer.py: clip_grad > 0 computes the gradient norm and clips by
  // it, 0 skips both), torchtitan training.max_norm (default 1.0, always clipped:
  // torchtitan/trainer.py, so 0 is refused there). --clip-grad.
  double clip_grad = 1.0;
  // Megatron --check-for-nan-in-loss-and-grad (on by default; --no-check-for-nan-in-loss-and-grad):
  // the norm of the gradient buffer before its reduce (param_and_grad_buffer.py check_grads).
  // torchtitan has none (read only under Megatron's step end).
  bool check_for_nan_in_grad = true;
  // Megatron --overlap-p2p-communication (on by default; --no-overlap-p2p-communication turns it
  // off; megatron/training/arguments.py forces it off without an interleaved schedule): in the
  // interleaved schedule's steady 1F1B phase a chunk's pipeline send / receive runs beside the next
  // chunk's compute, leaving each chunk boundary its link latency; the warm-up and the flush stay
  // unoverlapped (overlap_p2p_comm_warmup_flush off by default). Read through P2pOverlapped.
  bool overlap_p2p_comm = true;
  // Megatron --tp-comm-overlap (off by default; Megatron-Bridge CommOverlapConfig.tp_comm_overlap):
  // TransformerEngine's userbuffers overlap of the sequence-parallel all-gathers and
  // reduce-scatters with the linears beside them (transformer_engine/pytorch/module/base.py
  // initialize_ub, its default methods: ring_exchange for qkv_fprop, fc1_fprop, proj_dgrad and
  // fc2_dgrad; pipeline for proj_fprop and fc2_fprop; bulk for qkv_dgrad / qkv_wgrad and fc1_dgrad
  // / fc1_wgrad). Only where tp > 1 (Megatron asserts sequence parallelism, which it turns off at
  // tp 1; Bridge's CommOverlapConfig turns the overlap off there): read through TpCommOverlapped.
  bool tp_comm_overlap = false;
  // Megatron-Core delay_wgrad_compute (--delay-wgrad-compute; off by default; needs
  // --overlap-moe-expert-parallel-comm, transformer_config.py): under EP overlap the experts'
  // weight gradients leave their backward (TransformerEngine's split wgrad, the layer's
  // backward_dw), so the backward dispatch waits only for the input gradient and the weight
  // gradient runs beside it; off, the MLP backward computes both before the dispatch starts
  // (model_chunk_schedule_plan.py; backward_dw is a no-op then). Megatron-Bridge's performance
  // scripts turn it on with moe_a2a_overlap (scripts/performance/utils/overrides.py
  // _set_moe_a2a_overlap_overrides). Read through WgradDelayed.
  bool delay_wgrad_compute = false;
  // Megatron-LM's gradient accumulation fusion (on by default; --no-gradient-accumulation-fusion
  // turns it off): TransformerEngine's weight-gradient GEMMs accumulate into the fp32 main_grad in
  // their epilogue; off, each writes its gradient in the param dtype and a separate add reads it
  // into main_grad (planner/cost/kernels_model.h MainGradBytesPerElement). Megatron only.
  bool gradient_accumulation_fusion = true;
  // Megatron-Core's use_transformer_engine_op_fuser (--use-transformer-engine-op-fuser; off by
  // default, transformer_config.py; Megatron-Core 0.18 and later): TEGroupedMLP runs the routed
  // experts as one TransformerEngine fused op (grouped linears, the gated activation with its
  // clamp and the router-probability scaling of the second linear's bias inside the kernels).
  // Off, the activation clamp and the second linear's bias run as eager PyTorch ops
  // (planner/cost/kernels_model.h ExpertEagerKernels). Megatron-Bridge's gpt-oss performance
  // recipes of 26.08 set it (perf_recipes/gpt_oss/common.py). Megatron only.
  bool use_transformer_engine_op_fuser = false;
  // Megatron-Core moe_flex_dispatcher_num_sms (--moe-flex-dispatcher-num-sms; its deprecated
  // spellings --moe-deepep-num-sms and --moe-hybridep-num-sms, routed to it in
  // transformer_config.py __post_init__): the SMs the flex dispatcher's dispatch and combine kernels
  // hold (every backend: deepep, hybridep, ncclep). 0 = the backend's default, priced at the
  // cluster's knob (knobs.h EpOverlapKnobs: DeepEP 20, HybridEP 32 as Megatron-Bridge's performance
  // recipes set it, NCCL's channels). Under EP overlap the compute beside those kernels runs on the
  // SMs they leave (planner/cost/ep_overlap.h FlexDispatcherSmShare); below the SMs the flex
  // bandwidth figure was measured at full rate their NVLink copies slow in proportion (deepep.h
  // FlexSmBandwidthScale). Megatron only; with
  // --dispatcher deepep (Megatron's flex). In [0, 1024]; above the GPU's SMs is refused where the
  // cluster is known.
  int64_t moe_flex_dispatcher_num_sms = 0;
  // The CUDA_DEVICE_MAX_CONNECTIONS environment variable of the job: how many hardware work queues
  // the GPU's streams are spread over (CUDA's default 8 when unset; 1 to 32). At 1 every stream
  // feeds one queue in issue order, so a kernel waits behind every kernel issued before it on any
  // stream (what Megatron's TP and DP overlaps rely on: tensor_parallel/layers.py "we rely on
  // CUDA_DEVICE_MAX_CONNECTIONS=1"; Megatron-LM's example scripts export 1). EP overlap's paired
  // streams then overlap only where a communication kernel is issued before the compute beside it
  // (planner/cost/ep_overlap.h PairedLayerUs). Megatron-Bridge's performance scripts set 32 with the
  // flex dispatcher or on Blackwell, else 8, and 1 only with tp or cp > 1 without EP overlap
  // (scripts/performance/utils/overrides.py).
  int64_t cuda_device_max_connections = kCudaDefaultMaxConnections;
};

// Whether TransformerEngine's TP-communication overlap runs: tp_comm_overlap with tp > 1.
bool TpCommOverlapped(const RunSettings& settings, int64_t tp);

// Whether every pipeline stage dispatches its parameter all-gathers at the start of the step:
// align_param_gather with an interleaved schedule (vpp > 1), Megatron-LM's rule (arguments.py sets
// args.align_param_gather = False "since non-interleaved schedule does not support ... aligned
// param AG").
bool ParamGatherAligned(const RunSettings& settings);

// The DDP bucket in parameters: ddp_bucket_size when set (> 0), else Megatron-LM's default
// max(40,000,000, 1,000,000 x dp_cp) over the data-parallel x context-parallel group
// (megatron/training/training.py resolve_ddp_bucket_size).
int64_t DdpBucketElems(const RunSettings& settings, int64_t dp_cp);

// Whether the pipeline's steady-state send / receive run beside compute: overlap_p2p_comm with an
// interleaved schedule (vpp > 1), Megatron's rule (arguments.py: "Overlap P2P communication is
// disabled if not using the interleaved schedule").
bool P2pOverlapped(const RunSettings& settings);

// Throws dockyard::Error naming `field` and the value unless `clip_grad` is finite and >= 0.
void ValidateClipGrad(double clip_grad, const std::string& field);

// Throws dockyard::Error naming `field` unless `version` is empty or "MAJOR.MINOR[.PATCH]" of
// decimal numbers (a Megatron-Core tag core_vMAJOR.MINOR.PATCH without its prefix, e.g. "0.12" or
// "0.15.1").
void ValidateMegatronCoreVersion(const std::string& version, const std::string& field);

// Throws dockyard::Error naming `impl_field`, its value and the rule unless
// settings.cross_entropy_fusion_impl is "native", or "te" with:
//  - fused_cross_entropy on (Megatron reads cross_entropy_fusion_impl only under
//    --cross-entropy-loss-fusion, language_module.py compute_language_model_loss; `fused_field`
//    names dockyard's switch for it);
//  - a Megatron-Core release (`version_field`) from core_v0.12.0, the first with the option
//    (NVIDIA/Megatron-LM commit 0f60adbd30, ADLR/megatron-lm!2707, 2025-03-08), before core_v0.19.0,
//    from which Megatron-LM's training arguments refuse it ("disabled due to stability issues",
//    commit 168cb15d70, NVIDIA/Megatron-LM#5115, 2026-06-03; megatron/training/arguments.py). An
//    empty (current) release is refused for the same reason.
void ValidateCrossEntropyFusionImpl(const RunSettings& settings, const std::string& impl_field, const std::string& fused_field,
                                    const std::string& version_field);

// Refuses use_transformer_engine_op_fuser (`fuser_field`) with a Megatron-Core release
// (`version_field`) before core_v0.18.0, the first whose TransformerConfig has it (0.17.1 has neither
// the field nor TEGroupedMLP's fused path, megatron/core/transformer/moe/experts.py). An empty
// (current) release passes.
void ValidateTeOpFuser(const RunSettings& settings, const std::string& fuser_field, const std::string& version_field);

// Whether the loss is TransformerEngine's parallel_cross_entropy (fused, impl "te"): it writes the
// gradient into the logits in place during the forward and keeps them, in their own dtype, for
// backward (transformer_engine/pytorch/cross_entropy.py CrossEntropyFunction.forward:
// ctx.save_for_backward(_input, ...)), with no fp32 copy (planner/accounting/memory.h
// LossBytesPerLogit).
bool TeCrossEntropy(const RunSettings& settings);

// Whether the run's Megatron-Core multiplies the router probabilities inside the experts'
// activation (the weighted SwiGLU, megatron/core/fusions/fused_bias_swiglu.py
// weighted_bias_swiglu_impl, called from megatron/core/transformer/moe/experts.py) rather than at
// the unpermute after the combine: from core_v0.13.0 on (NVIDIA/Megatron-LM commit 2659630721,
// "perf(MoE): Memory efficient token permutation", ADLR/megatron-lm!2668, 2025-04-09; first tag
// core_v0.13.0rc0), and for an empty (current) version. Before it, token_dispatcher.py's
// unpermute(permuted_tokens, ..., probs=...) kept the combined rows for the probabilities' gradient.
bool MegatronProbsInActivation(const RunSettings& settings);

}  // namespace dockyard
