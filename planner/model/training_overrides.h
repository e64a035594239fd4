// Training settings given on a command line (dockyard-plan's and dockyard-run's training flags,
// cli/flags.h TrainingFlags) over a model spec's `training` block: each set field replaces the
// block's value, each unset one keeps it (else TrainingConfig's default, training.h). --gpus-per-node
// and --gpu-memory-gib set the machine (machine.h), not the training: ApplyMachineOverrides.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "planner/model/pipeline_schedule.h"
#include "planner/model/training.h"

namespace dockyard {

struct TrainingOverrides {
  std::optional<DpSharding> dp_sharding;                      // --dp-sharding
  std::optional<std::string> param_dtype, grad_dtype;         // --param-dtype, --grad-dtype (any CanonicalDtype spelling)
  std::optional<Optimizer> optimizer;                         // --optimizer
  std::optional<int64_t> seq_len, micro_batch_size;           // --seq-len, --micro-batch-size
  std::optional<int64_t> num_microbatches;                    // --num-microbatches
  std::optional<Recompute> recompute;                         // --recompute
  std::optional<std::vector<std::string>> recompute_modules;  // --recompute-modules a,b,c
  std::optional<std::string> selective_ac_option;             // --selective-ac-option
  std::optional<int64_t> mtp_layers;                          // --mtp-layers
  std::optional<int64_t> make_vocab_size_divisible_by;        // --make-vocab-size-divisible-by (vocab_padding.h)
  std::optional<std::string> precision, fp8_recipe;           // --precision, --fp8-recipe
  bool fp8_dispatch = false, fp8_param_gather = false;        // flags: true turns the setting on
  bool fp8_dot_product_attention = false;
  std::optional<std::string> optimizer_states_dtype;          // --optimizer-states-dtype
  std::optional<double> gpu_memory_gib, memory_reserve_gib;   // --gpu-memory-gib, --memory-reserve-gib
  std::optional<double> imbalance;                            // --imbalance
  std::optional<int64_t> gpus_per_node;                       // --gpus-per-node
  std::optional<Dispatcher> dispatcher;                       // --dispatcher
  std::optional<int64_t> oep;                                 // --oep
  std::optional<FlexBackend> moe_flex_dispatcher_backend;     // --moe-flex-dispatcher-backend (dispatcher.h)
  std::optional<std::string> refit_dtype;                     // --refit-dtype
  // Schedule settings (pipeline_schedule.h RunSettings).
  std::optional<ReshardPolicy> reshard_after_forward;   // --fsdp-reshard-after-forward
  std::optional<int64_t> grad_accumulation_steps, vpp;  // --grad-accumulation-steps, --vpp
  std::optional<std::string> cp_comm;                   // --cp-comm-type
  bool overlap_grad_reduce = false, overlap_moe_ep_comm = false, overlap_param_gather = false;
  bool overlap_param_gather_with_optimizer_step = false;  // --overlap-param-gather-with-optimizer-step (run_settings.h)
  bool no_align_param_gather = false;                     // --no-align-param-gather (run_settings.h)
  std::optional<int64_t> ddp_bucket_size;                 // --ddp-bucket-size (run_settings.h)
  bool moe_shared_expert_overlap = false;  // --moe-shared-expert-overlap: run.overlap_shared_experts on
  std::optional<std::string> pipeline_layout;  // --pipeline-model-parallel-layout
  bool account_for_embedding = false, account_for_loss = false;
  std::optional<std::string> pipeline_schedule;  // --pipeline-schedule
  std::optional<std::string> megatron_core_version;  // --megatron-core-version (run_settings.h)
  std::optional<std::string> cross_entropy;              // --cross-entropy unfused | fused (run.fused_cross_entropy)
  std::optional<std::string> cross_entropy_fusion_impl;  // --cross-entropy-fusion-impl native | te (run_settings.h)
  std::optional<double> clip_grad;                       // --clip-grad (run_settings.h)
  bool no_check_for_nan_in_grad = false;                 // --no-check-for-nan-in-loss-and-grad (run_settings.h)
  bool no_overlap_p2p_comm = false;                      // --no-overlap-p2p-communication (run_settings.h)
  bool delay_wgrad_compute = false;                      // --delay-wgrad-compute (run_settings.h)
  bool moe_pad_expert_input_to_capacity = false;         // --moe-pad-expert-input-to-capacity (run_settings.h)
  bool no_gradient_accumulation_fusion = false;          // --no-gradient-accumulation-fusion (run_settings.h)
  bool use_transformer_engine_op_fuser = false;          // --use-transformer-engine-op-fuser (run_settings.h)
  std::optional<int64_t> moe_flex_dispatcher_num_sms;    // --moe-flex-dispatcher-num-sms (run_settings.h)
  std::optional<int64_t> cuda_device_max_connections;    // --cuda-device-max-connections (run_settings.h)
  std::optional<bool> tp_comm_overlap;                   // --tp-comm-overlap[=false] (run_settings.h); unset: the spec's
  std::optional<std::string> pp_layer_split;     // --pp-layer-split "7,6" or "7+6" (ParseLayerSplit)
};

// `base` with `o` applied, the dtypes canonicalized (CanonicalDtype), then checked with
// ValidateTraining(t, "--") (so errors name the flag), then --pp-layer-split parsed for `pp`
// stages of `num_layers` layers (ParseLayerSplit, "--pp-layer-split"). Throws dockyard::Error.
TrainingConfig ApplyTrainingOverrides(const TrainingConfig& base, const TrainingOverrides& o, int64_t pp, int64_t num_layers);

// Flags of Megatron-Core features torchtitan does not have, refused when `torchtitan` (the
// --convention) is true rather than modelled as if torchtitan ran them:
//  - --dp-sharding zero1: Megatron's distributed optimizer (--use-distributed-optimizer). torchtitan's
//    data parallelism is FSDP2 (data_parallel_shard_degree), HSDP, or DDP (data_parallel_replicate_degree
//    alone): torchtitan/config/parallelism.py ParallelismConfig has no ZeRO-1.
//  - --overlap-moe-expert-parallel-comm (on): Megatron's EP all-to-all overlap (megatron/training/arguments.py);
//    torchtitan's ParallelismConfig (expert_parallel_degree) has no such overlap; nor its
//    --delay-wgrad-compute.
//  - --moe-shared-expert-overlap: Megatron-LM's switch for an overlap torchtitan always runs (its
//    MoE.forward computes the shared experts before it uses the combined output); nothing to turn on.
//  - --megatron-core-version and --cross-entropy-fusion-impl (any value): a Megatron-Core release
//    and Megatron's choice of fused loss; torchtitan's loss is its own (compiled).
//  - --tp-comm-overlap: TransformerEngine's userbuffers overlap, a Megatron-LM switch; torchtitan's
//    TP is DTensor's (its async TP, experimental.enable_async_tensor_parallel, is not modelled).
//  - --overlap-grad-reduce, --overlap-param-gather, --no-align-param-gather and --ddp-bucket-size:
//    Megatron-Core DDP's bucketed overlaps, dispatch and buckets; torchtitan's data parallelism is
//    FSDP2 (per module) or torch DDP; --no-gradient-accumulation-fusion: TransformerEngine's.
//  - --no-overlap-p2p-communication (Megatron's interleaved-schedule switch) and
//    --fp8-dot-product-attention (TransformerEngine's FP8 attention; torchtitan's converters
//    quantize linear layers only).
// Throws dockyard::Error naming the flag, the convention and the alternative.
// `base` (a spec's or plan file's Machine) with --gpus-per-node and --gpu-memory-gib applied,
// checked with ValidateMachine(m, "--") (errors name the flag). Throws dockyard::Error.
Machine ApplyMachineOverrides(const Machine& base, const TrainingOverrides& o);

void RejectMegatronOnlyOverrides(const TrainingOverrides& o, bool torchtitan);

// The same rule for the resolved training (a model spec's training block with the flags over it):
// tp_comm_overlap true under torchtitan. Throws dockyard::Error naming training.tp_comm_overlap.
void RejectMegatronOnlyRunSettings(const TrainingConfig& training, bool torchtitan);

}  // namespace dockyard
