// Command-line training settings over a spec's training block (see training_overrides.h).
#include "planner/model/training_overrides.h"

#include <fmt/format.h>

#include "planner/base/error.h"
#include "planner/model/model_spec.h"
#include "planner/model/pipeline_schedule.h"
#include "planner/model/precision.h"
#include "planner/model/training_json.h"

namespace dockyard {

TrainingConfig ApplyTrainingOverrides(const TrainingConfig& base, const TrainingOverrides& o, int64_t pp, int64_t num_layers) {
  TrainingConfig t = base;
  if (o.dp_sharding) t.dp_sharding = *o.dp_sharding;
  if (o.param_dtype) t.param_dtype = CanonicalDtype(*o.param_dtype);
  if (o.grad_dtype) t.grad_dtype = CanonicalDtype(*o.grad_dtype);
  if (o.optimizer) t.optimizer = *o.optimizer;
  if (o.seq_len) t.seq_len = *o.seq_len;
  if (o.micro_batch_size) t.micro_batch_size = *o.micro_batch_size;
  if (o.num_microbatches) t.num_microbatches = *o.num_microbatches;
  if (o.recompute) t.recompute = *o.recompute;
  if (o.mtp_layers) t.mtp_layers = *o.mtp_layers;
  if (o.make_vocab_size_divisible_by) t.make_vocab_size_divisible_by = *o.make_vocab_size_divisible_by;
  if (o.precision) t.precision = *o.precision;
  if (o.fp8_recipe) t.fp8_recipe = *o.fp8_recipe;
  if (o.fp8_dispatch) t.fp8_dispatch = true;
  if (o.fp8_param_gather) t.fp8_param_gather = true;
  if (o.fp8_dot_product_attention) t.fp8_dot_product_attention = true;
  if (o.optimizer_states_dtype) t.optimizer_states_dtype = CanonicalDtype(*o.optimizer_states_dtype);
  if (o.recompute_modules) t.recompute_modules = *o.recompute_modules;
  if (o.selective_ac_option) t.selective_ac_option = *o.selective_ac_option;
  if (o.memory_reserve_gib) t.memory_reserve_gib = *o.memory_reserve_gib;
  if (o.imbalance) t.imbalance = *o.imbalance;
  if (o.dispatcher) t.dispatcher = *o.dispatcher;
  if (o.oep) t.oep = *o.oep;
  if (o.moe_flex_dispatcher_backend) t.moe_flex_dispatcher_backend = *o.moe_flex_dispatcher_backend;
  if (o.refit_dtype) t.refit_dtype = CanonicalDtype(*o.refit_dtype);
  if (o.reshard_after_forward) t.run.reshard_after_forward = *o.reshard_after_forward;
  if (o.grad_accumulation_steps) t.run.grad_accumulation_steps = *o.grad_accumulation_steps;
  if (o.vpp) {
    ValidateVpp(*o.vpp);  // before the layer split reads it (pipeline_schedule.h)
    t.run.vpp = *o.vpp;
  }
  if (o.cp_comm) t.run.cp_comm = *o.cp_comm;
  if (o.overlap_grad_reduce) t.run.overlap_grad_reduce = true;
  if (o.overlap_moe_ep_comm) t.run.overlap_moe_ep_comm = true;
  if (o.delay_wgrad_compute) t.run.delay_wgrad_compute = true;
  if (o.moe_pad_expert_input_to_capacity) t.run.moe_pad_expert_input_to_capacity = true;
  if (o.no_gradient_accumulation_fusion) t.run.gradient_accumulation_fusion = false;
  if (o.use_transformer_engine_op_fuser) t.run.use_transformer_engine_op_fuser = true;
  if (o.moe_flex_dispatcher_num_sms) {
    // 0 is the spec's "backend default", not a count a flag may give (the range: ValidateRunSettings).
    if (*o.moe_flex_dispatcher_num_sms < 1) {
      throw Error(fmt::format("--moe-flex-dispatcher-num-sms: must be a number of SMs in [1, {}] (Megatron --moe-flex-dispatcher-num-sms), "
                              "got {}",
                              kMaxFlexDispatcherNumSms, *o.moe_flex_dispatcher_num_sms));
    }
    t.run.moe_flex_dispatcher_num_sms = *o.moe_flex_dispatcher_num_sms;
  }
  if (o.cuda_device_max_connections) t.run.cuda_device_max_connections = *o.cuda_device_max_connections;
  ValidateSmsAndQueues(t.run);
  if (o.overlap_param_gather) t.run.overlap_param_gather = true;
  if (o.overlap_param_gather_with_optimizer_step) t.run.overlap_param_gather_with_optimizer_step = true;
  if (o.no_align_param_gather) t.run.align_param_gather = false;
  if (o.ddp_bucket_size) {
    if (*o.ddp_bucket_size < 1) {
      throw Error(fmt::format("--ddp-bucket-size: must be a number of parameters in [1, 2^40] (Megatron --ddp-bucket-size), got {}",
                              *o.ddp_bucket_size));
    }
    t.run.ddp_bucket_size = *o.ddp_bucket_size;  // the upper bound: ValidateRunSettings, the same words
  }
  if (o.moe_shared_expert_overlap) t.run.overlap_shared_experts = true;
  if (o.pipeline_layout) t.run.pipeline_layout = *o.pipeline_layout;
  if (o.account_for_embedding) t.run.account_for_embedding = true;
  if (o.account_for_loss) t.run.account_for_loss = true;
  if (o.pipeline_schedule) t.run.schedule = *o.pipeline_schedule;
  if (o.megatron_core_version) {
    ValidateMegatronCoreVersion(*o.megatron_core_version, "--megatron-core-version");
    t.run.megatron_core_version = *o.megatron_core_version;
  }
  if (o.cross_entropy) {
    if (*o.cross_entropy != "unfused" && *o.cross_entropy != "fused") {
      throw Error(fmt::format("--cross-entropy: must be unfused or fused (Megatron --cross-entropy-loss-fusion), got \"{}\"",
                              *o.cross_entropy));
    }
    t.run.fused_cross_entropy = *o.cross_entropy == "fused";
  }
  if (o.cross_entropy_fusion_impl) t.run.cross_entropy_fusion_impl = *o.cross_entropy_fusion_impl;
  if (o.clip_grad) {
    ValidateClipGrad(*o.clip_grad, "--clip-grad");
    t.run.clip_grad = *o.clip_grad;
  }
  if (o.no_check_for_nan_in_grad) t.run.check_for_nan_in_grad = false;
  if (o.no_overlap_p2p_comm) t.run.overlap_p2p_comm = false;
  if (o.tp_comm_overlap) t.run.tp_comm_overlap = *o.tp_comm_overlap;
  ValidateCrossEntropyFusionImpl(t.run, "--cross-entropy-fusion-impl", "--cross-entropy", "--megatron-core-version");
  ValidateTeOpFuser(t.run, "--use-transformer-engine-op-fuser", "--megatron-core-version");
  NormalizeMxfp8Precision(&t, "--", o.fp8_recipe.has_value());
  ValidateTraining(t, "--");
  if (o.pp_layer_split) t.pp_layer_split = ParseLayerSplit(*o.pp_layer_split, pp, num_layers, "--pp-layer-split", t.run.vpp);
  return t;
}

Machine ApplyMachineOverrides(const Machine& base, const TrainingOverrides& o) {
  Machine m = base;
  if (o.gpu_memory_gib) m.gpu_memory_gib = *o.gpu_memory_gib;
  if (o.gpus_per_node) m.gpus_per_node = *o.gpus_per_node;
  ValidateMachine(m, "--");
  return m;
}

void RejectMegatronOnlyRunSettings(const TrainingConfig& t, bool torchtitan) {
  if (torchtitan && t.run.tp_comm_overlap) {
    throw Error(
        "training.tp_comm_overlap: true is TransformerEngine's userbuffers overlap, a Megatron-LM setting (--tp-comm-overlap); "
        "torchtitan's tensor parallelism is DTensor's, priced exposed: set it false or drop it, or use --convention megatron");
  }
}

void RejectMegatronOnlyOverrides(const TrainingOverrides& o, bool torchtitan) {
  if (!torchtitan) return;
  if (o.dp_sharding == DpSharding::kZero1) {
    throw Error(
        "--dp-sharding zero1: Megatron's distributed optimizer; torchtitan has FSDP2 (fsdp, the default; HSDP with --dp-replicate) but no "
        "ZeRO-1 (its models' parallelize.py apply fully_shard): use --convention megatron, or --dp-sharding fsdp (ddp plans DDP's memory "
        "and traffic, which torchtitan's MoE models no longer run)");
  }
  if (o.megatron_core_version) {
    throw Error(fmt::format(
        "--megatron-core-version {}: names the Megatron-Core release whose saved-tensor rules apply; torchtitan has its own "
        "(docs/memory-model.md): use --convention megatron, or drop the flag",
        *o.megatron_core_version));
  }
  if (o.cross_entropy_fusion_impl) {
    throw Error(fmt::format(
        "--cross-entropy-fusion-impl {}: Megatron's choice between its own fused cross-entropy and TransformerEngine's "
        "(language_module.py); torchtitan's loss is its own (torchtitan/components/loss.py, compiled): use --convention "
        "megatron, or drop the flag",
        *o.cross_entropy_fusion_impl));
  }
  if (o.clip_grad && *o.clip_grad == 0) {
    throw Error(
        "--clip-grad 0: torchtitan clips by training.max_norm at every step (torchtitan/trainer.py clip_grad_norm_), so a "
        "threshold of 0 would zero every gradient; give its max_norm (> 0, default 1.0), or use --convention megatron, where 0 "
        "turns the norm and the clipping off");
  }
  if (o.no_check_for_nan_in_grad) {
    throw Error(
        "--no-check-for-nan-in-loss-and-grad: Megatron-LM's switch for its gradient-buffer NaN check; torchtitan runs no such "
        "check: drop the flag, or use --convention megatron");
  }
  if (o.overlap_grad_reduce || o.overlap_param_gather || o.overlap_param_gather_with_optimizer_step) {
    throw Error(fmt::format(
        "{}: Megatron-Core DDP's bucketed overlap; torchtitan's data parallelism is FSDP2 (fsdp: its reduce-scatters and "
        "all-gathers per module, priced per layer) or torch DDP (ddp: its all-reduce priced at the step's end): drop the flag, or "
        "use --convention megatron",
        o.overlap_grad_reduce    ? "--overlap-grad-reduce"
        : o.overlap_param_gather ? "--overlap-param-gather"
                                 : "--overlap-param-gather-with-optimizer-step"));
  }
  if (o.no_gradient_accumulation_fusion) {
    throw Error(
        "--no-gradient-accumulation-fusion: Megatron-LM's switch for TransformerEngine's fused main-grad accumulation; torchtitan's "
        "weight gradients are autograd's: drop the flag, or use --convention megatron");
  }
  if (o.use_transformer_engine_op_fuser) {
    throw Error(
        "--use-transformer-engine-op-fuser: Megatron-Core's switch for TransformerEngine's fused expert MLP; torchtitan's experts "
        "are its own (torchtitan/models/moe): drop the flag, or use --convention megatron");
  }
  if (o.no_align_param_gather || o.ddp_bucket_size) {
    throw Error(fmt::format(
        "{}: Megatron-Core DDP's parameter all-gather setting; torchtitan's data parallelism is FSDP2 or torch DDP, neither of "
        "which buckets it this way (torchtitan/distributed/parallel_dims.py): drop the flag, or use --convention megatron",
        o.no_align_param_gather ? "--no-align-param-gather" : "--ddp-bucket-size"));
  }
  if (o.overlap_moe_ep_comm) {
    throw Error(
        "--overlap-moe-expert-parallel-comm: a Megatron-Core feature (EP all-to-all overlapped with another micro-batch's "
        "compute); torchtitan has no such overlap (torchtitan/config/parallelism.py): use --convention megatron, or drop the flag");
  }
  if (o.moe_pad_expert_input_to_capacity) {
    throw Error(
        "--moe-pad-expert-input-to-capacity: a Megatron-Core dispatcher option (expert inputs padded to a capacity); torchtitan's "
        "dropless MoE has none: use --convention megatron, or drop the flag");
  }
  if (o.delay_wgrad_compute) {
    throw Error(
        "--delay-wgrad-compute: a Megatron-Core switch of its EP overlap (the experts' weight gradients after the backward "
        "dispatch); torchtitan has no EP overlap to delay them in: use --convention megatron, or drop the flag");
  }
  if (o.moe_shared_expert_overlap) {
    throw Error(
        "--moe-shared-expert-overlap: Megatron-LM's switch (off by default there); torchtitan always runs the shared experts beside "
        "the combine all-to-all (torchtitan/models/common/moe.py MoE.forward), so there is nothing to turn on: drop the flag, or use "
        "--convention megatron");
  }
  if (o.tp_comm_overlap.value_or(false)) {
    throw Error(
        "--tp-comm-overlap: TransformerEngine's userbuffers overlap, a Megatron-LM switch; torchtitan's tensor parallelism is "
        "DTensor's, priced exposed (its experimental async TP is not modelled): drop the flag, or use --convention megatron");
  }
  if (o.no_overlap_p2p_comm) {
    throw Error(
        "--no-overlap-p2p-communication: Megatron-LM's switch for its interleaved schedule's P2P overlap; torchtitan's pipeline "
        "schedules have none to turn off: drop the flag, or use --convention megatron");
  }
  if (o.fp8_dot_product_attention) {
    throw Error(
        "--fp8-dot-product-attention: TransformerEngine's FP8 attention, a Megatron-Core setting; torchtitan's float8 / MX converters "
        "quantize linear layers only (its attention stays BF16): drop the flag, or use --convention megatron");
  }
}

}  // namespace dockyard
