// The training flags shared by plan, check, simulate and search (TrainingFlags, see flags.h).
#include "cli/flags.h"

#include <map>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "planner/base/error.h"
#include "planner/model/dispatcher.h"

namespace dockyard::cli {

namespace {

// --dispatcher's check: ParseDispatcher's words (Megatron's spellings named, a near name suggested).
CLI::Validator DispatcherCheck() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        try {
          ParseDispatcher(value, "--dispatcher");
          return "";
        } catch (const Error& e) {
          const std::string what = e.what(), prefix = "--dispatcher: ";  // CLI11 names the option itself
          return what.rfind(prefix, 0) == 0 ? what.substr(prefix.size()) : what;
        }
      },
      "DISPATCHER");
}

}  // namespace

void TrainingFlags::AddTo(CLI::App* app) {
  app->add_option("--dp-sharding", dp_sharding, "fsdp | zero1 | ddp (default fsdp; zero1 with --convention megatron)")
      ->check(CLI::IsMember(DpShardingNames()));
  app->add_option("--pp-layer-split", pp_layer_split, "layers per stage: '7,6,6,6' or '7+6' (first 7, then 6 per stage); with --vpp, pp x vpp entries list the virtual stages (v x pp + p: rank p's chunk v)");
  app->add_option("--param-dtype", param_dtype, "compute / all-gather dtype (default bfloat16)");
  app->add_option("--grad-dtype", grad_dtype, "gradient and reduction dtype (default float32)");
  app->add_option("--optimizer", optimizer, "adamw | sgd | muon (Megatron --optimizer muon: Newton-Schulz on the 2-D weights, one momentum; Adam for the rest; --convention megatron, not with FSDP) (default adamw)")->check(CLI::IsMember(OptimizerNames()));
  app->add_option("--seq-len", seq_len, "tokens per sequence (default 4096)");
  app->add_option("--micro-batch-size", micro_batch_size, "sequences per micro-batch (default 1)");
  app->add_option("--num-microbatches", num_microbatches, "micro-batches per step (default pp)");
  app->add_option("--recompute", recompute, "none | selective | full (default none)")->check(CLI::IsMember(RecomputeNames()));
  app->add_option("--recompute-modules", recompute_modules,
                  "with --recompute selective: comma-separated Megatron modules (core_attn, layernorm, moe_act, moe, "
                  "mla_up_proj, shared_experts, mlp; default: the convention's, megatron core_attn, torchtitan per-op)");
  app->add_option("--selective-ac-option", selective_ac_option,
                  "with --recompute selective and --convention torchtitan: torchtitan's per-layer selective_ac_option N, "
                  "every N-th block of a stage fully checkpointed, the others keep all activations (0 = every block); or \"op\": "
                  "torchtitan's per-op policy (matmul, attention and all-to-all outputs saved except every second matmul)");
  app->add_option("--precision", precision,
                  "bf16 | fp8 | mxfp8: GEMMs in FP8 at the FP8 peak (megatron: TransformerEngine's FP8 weight copies and FP8-saved "
                  "inputs; torchtitan: torchao keeps neither; mxfp8 = fp8 with --fp8-recipe mxfp8; default bf16)")
      ->check(CLI::IsMember({"bf16", "fp8", "mxfp8"}));
  app->add_option("--fp8-recipe", fp8_recipe, "with --precision fp8: tensorwise | blockwise | mxfp8 (TransformerEngine MXFP8BlockScaling, "
                  "Blackwell only) scaling (default tensorwise)")
      ->check(CLI::IsMember({"tensorwise", "blockwise", "mxfp8"}));
  app->add_flag("--fp8-dispatch", fp8_dispatch, "the EP dispatch all-to-all in FP8 (1 B + a scale per 128 elements), combine in BF16");
  app->add_flag("--fp8-param-gather", fp8_param_gather,
                "with --precision fp8 and FSDP or (megatron) zero1: all-gather the FP8 GEMM weights in FP8 (Megatron --fp8-param-gather)");
  app->add_flag("--fp8-dot-product-attention", fp8_dot_product_attention,
                "with --precision fp8: the attention core in FP8 (TransformerEngine's FP8 DPA, Megatron-Core fp8_dot_product_attention), "
                "priced at the cluster's compute.flash.fp8_speedup, below head dim 128 per pass (fp8_small_head_fwd_speedup, "
                "fp8_small_head_bwd_efficiency; the Compute line says at what)");
  app->add_option("--optimizer-states-dtype", optimizer_states_dtype, "AdamW moments: float32 | bfloat16 (default float32)");
  app->add_option("--mtp-layers", mtp_layers,
                  "MTP modules trained (Megatron --mtp-num-layers; DeepSeek-V3: 1) on the last stage, for any model: "
                  "each a copy of its last layer (default 0)");
  app->add_option("--make-vocab-size-divisible-by", make_vocab_size_divisible_by,
                  "megatron: pad the vocabulary to a multiple of N x tp (Megatron-LM vocab_size_with_padding; default 128); "
                  "1 = no padding, as Megatron-Bridge recipes (should_pad_vocab false); torchtitan does not pad");
  app->add_option("--gpu-memory-gib", gpu_memory_gib, "memory budget per GPU in GiB: prints headroom (default none)");
  AddMemoryReserveFlag(app, memory_reserve_gib);
  app->add_option("--imbalance", imbalance, "max / mean tokens received per rank, sizes all-to-all buffers (default 1.0)");
  app->add_option("--gpus-per-node", gpus_per_node,
                  "GPUs per node, for cross-node traffic (default 8; simulate: the cluster's NVLink domain)");
  app->add_option("--dispatcher", dispatcher,
                  "all_to_all | deredundency | deepep (Megatron flex: DeepEP / HybridEP) | allgather (default all_to_all)")
      ->check(DispatcherCheck());
  app->add_option("--moe-flex-dispatcher-backend", moe_flex_dispatcher_backend,
                  "with --dispatcher deepep: Megatron's flex dispatcher backend, deepep (DeepEP: at most 160 ranks, nodes of 8 "
                  "NVLink peers) | hybridep (spans a multi-node NVLink domain) | ncclep (default deepep)")
      ->check(CLI::IsMember(FlexBackendNames()));
  app->add_option("--oep", oep, "deredundency outer EP size (default: nodes spanned by an EP group)");
  app->add_option("--refit-dtype", refit_dtype, "dtype of the streamed per-expert tensors (default: param dtype)");
  app->add_option("--fsdp-reshard-after-forward", fsdp_reshard,
                  "default | always | never: torchtitan's FSDP reshard-after-forward policy (default = not pp)")
      ->check(CLI::IsMember({"default", "always", "never"}));
  app->add_option("--grad-accumulation-steps", grad_accumulation_steps,
                  "torchtitan's outer gradient-accumulation loop: pipeline schedules per step (default 1)");
  app->add_option("--vpp", vpp, "model chunks per pipeline rank: interleaved 1F1B (default 1 = plain 1F1B)");
  app->add_option("--cp-comm-type", cp_comm, "p2p | a2a: context-parallel K/V exchange, ring or all-to-all (default p2p)")
      ->check(CLI::IsMember({"p2p", "a2a"}));
  app->add_flag("--overlap-moe-expert-parallel-comm,!--no-overlap-moe-expert-parallel-comm", overlap_moe_ep_comm,
                "Megatron: EP all-to-alls of one micro-batch under another's compute (ep > 1, --dispatcher all_to_all "
                "or deepep, no full recompute, --vpp with pp > 1); --no-overlap-moe-expert-parallel-comm (or =false): off, the "
                "default");
  app->add_option("--pipeline-model-parallel-layout", pipeline_layout,
                  "Megatron layout of pp x vpp stages: E embedding, t layer, m MTP layer, L loss, | stage end, (..)*N "
                  "repeat, e.g. 'Et|(tt|)*30mL' (sets vpp)");
  app->add_option("--pipeline-schedule", pipeline_schedule,
                  "1f1b (interleaved with --vpp) | dualpipe (DeepSeek-V3: even pp, micro-batches even and >= 2 pp; default 1f1b)")
      ->check(CLI::IsMember({"1f1b", "dualpipe"}));
  app->add_option("--megatron-core-version", megatron_core_version,
                  "Megatron: the Megatron-Core release the run uses, e.g. 0.12 (default: current); before 0.13 the MoE layer "
                  "applies the router probabilities at the unpermute and keeps the combined rows (docs/memory-model.md)");
  app->add_option("--cross-entropy", cross_entropy,
                  "unfused | fused: the fused cross-entropy kernel (Megatron --cross-entropy-loss-fusion; default unfused; "
                  "simulate and search: not with --compute-model gemm)")
      ->check(CLI::IsMember({"unfused", "fused"}));
  app->add_option("--cross-entropy-fusion-impl", cross_entropy_fusion_impl,
                  "Megatron, with --cross-entropy fused: native | te (TransformerEngine's loss keeps the logits in their own "
                  "dtype, no fp32 copy; Megatron-Core 0.12 to 0.18, give --megatron-core-version; default native)")
      ->check(CLI::IsMember({"native", "te"}));
  app->add_option("--clip-grad", clip_grad,
                  "the gradient norm's clipping threshold (Megatron --clip-grad, torchtitan training.max_norm; default 1.0): the "
                  "norm and the clipping are step-end passes over the gradients; megatron: 0 = neither");
  app->add_flag("--no-check-for-nan-in-loss-and-grad", no_check_for_nan_in_grad,
                "Megatron: skip the NaN check, a norm of the whole gradient buffer before its reduce (on by default in Megatron-LM)");
  app->add_flag("--tp-comm-overlap", tp_comm_overlap,
                "Megatron: TransformerEngine's userbuffers overlap of the sequence-parallel all-gathers and reduce-scatters with the "
                "linears beside them (Megatron --tp-comm-overlap, off by default; a no-op at tp 1)");
  app->add_flag("--delay-wgrad-compute", delay_wgrad_compute,
                "Megatron: under --overlap-moe-expert-parallel-comm the experts' weight gradients run after the backward dispatch "
                "is issued, beside it (Megatron --delay-wgrad-compute, off by default; Megatron-Bridge's performance scripts set "
                "it with the EP overlap)");
  app->add_flag("--moe-pad-expert-input-to-capacity", moe_pad_expert_input_to_capacity,
                "Megatron: every expert's input padded to its capacity (Megatron --moe-pad-expert-input-to-capacity with "
                "--moe-expert-capacity-factor): static splits, so no MoE layer waits on a host synchronization (docs/cost-model.md "
                "§3.11); the rows are priced as dropless routing (exact at balanced routing and capacity factor 1)");
  app->add_flag("--no-gradient-accumulation-fusion", no_gradient_accumulation_fusion,
                "Megatron: the weight-gradient GEMMs write their gradients and a separate add accumulates them into the fp32 "
                "main_grad (Megatron-LM fuses the accumulation by default; docs/cost-model.md §3.12)");
  app->add_flag("--use-transformer-engine-op-fuser", use_transformer_engine_op_fuser,
                "Megatron: the routed experts run as TransformerEngine's fused op (Megatron --use-transformer-engine-op-fuser, off "
                "by default): no eager activation clamp or second-linear bias around the grouped GEMMs (docs/cost-model.md §3.15)");
  app->add_flag("--no-overlap-p2p-communication", no_overlap_p2p_comm,
                "the interleaved schedule's pipeline sends / receives not under the next chunk's compute (Megatron "
                "--no-overlap-p2p-communication; by default, with --vpp > 1, each chunk boundary leaves only its link latency)");
  app->add_flag("--account-for-embedding-in-pipeline-split", account_for_embedding,
                "Megatron: the embedding counts as one layer when splitting layers over stages");
  app->add_flag("--account-for-loss-in-pipeline-split", account_for_loss,
                "Megatron: the loss (final norm, lm_head) counts as one layer when splitting layers over stages");
  app->add_flag("--overlap-grad-reduce", overlap_grad_reduce,
                "Megatron: the step-end gradient reduce runs under the last backward (zero1 / ddp)");
  app->add_flag("--moe-shared-expert-overlap", moe_shared_expert_overlap,
                "Megatron: the shared experts run beside the dispatch / combine all-to-alls (off by default, as in Megatron-LM; "
                "not with --overlap-moe-expert-parallel-comm; torchtitan always overlaps them)");
  app->add_flag("--overlap-param-gather", overlap_param_gather,
                "Megatron: the distributed optimizer's parameter all-gather runs bucket by bucket under the first forward (zero1): "
                "the first bucket is exposed, and without --vpp each later pipeline stage's whole gather on the first "
                "micro-batch's path");
  app->add_flag("--overlap-param-gather-with-optimizer-step", overlap_param_gather_with_optimizer_step,
                "Megatron: with --overlap-param-gather and --vpp > 1, the first model chunk's parameter all-gather runs under the "
                "rest of the optimizer step (off by default; Megatron-Bridge's performance scripts set it with dp, pp, vpp > 1 "
                "outside MXFP8)");
  app->add_flag("--no-align-param-gather", no_align_param_gather,
                "Megatron: with --vpp > 1, each pipeline stage starts its parameter all-gathers when the first micro-batch "
                "reaches it instead of all at the step's start (Megatron-LM aligns them by default)");
  app->add_option("--ddp-bucket-size", ddp_bucket_size,
                  "Megatron: the DDP bucket in parameters (default max(40M, 1M x dp x cp), Megatron-LM's; Megatron-Bridge "
                  "134217728): with --overlap-param-gather the first bucket's all-gather is exposed");
  app->add_option("--moe-flex-dispatcher-num-sms", moe_flex_dispatcher_num_sms,
                  "Megatron, --dispatcher deepep: the SMs the flex dispatcher's kernels hold (Megatron --moe-flex-dispatcher-num-sms; "
                  "default the backend's: DeepEP 20, HybridEP 32 as Megatron-Bridge's performance recipes set it); under EP overlap "
                  "the compute beside them runs on the rest (docs/cost-model.md, EP communication overlap)");
  app->add_option("--cuda-device-max-connections", cuda_device_max_connections,
                  "the job's CUDA_DEVICE_MAX_CONNECTIONS, 1 to 32 (default 8, CUDA's when unset; Megatron-LM's example scripts export "
                  "1): at 1 both streams of EP overlap feed one hardware queue and a communication kernel overlaps only the compute "
                  "issued after it (docs/cost-model.md, EP communication overlap)");
}

void TrainingFlags::AddSearchPinsTo(CLI::App* search, const CLI::App& plan) {
  // Training flags shared with the plan: bound to the same fields, with the plan's descriptions.
  const std::pair<const char*, std::string*> shared[] = {{"--dp-sharding", &dp_sharding},
                                                         {"--param-dtype", &param_dtype},
                                                         {"--grad-dtype", &grad_dtype},
                                                         {"--optimizer", &optimizer},
                                                         {"--seq-len", &seq_len},
                                                         {"--micro-batch-size", &micro_batch_size},
                                                         {"--num-microbatches", &num_microbatches},
                                                         {"--recompute", &recompute},
                                                         {"--recompute-modules", &recompute_modules},
                                                         {"--selective-ac-option", &selective_ac_option},
                                                         {"--gpu-memory-gib", &gpu_memory_gib},
                                                         {"--imbalance", &imbalance},
                                                         {"--moe-flex-dispatcher-backend", &moe_flex_dispatcher_backend},
                                                         {"--precision", &precision},
                                                         {"--fp8-recipe", &fp8_recipe},
                                                         {"--make-vocab-size-divisible-by", &make_vocab_size_divisible_by},
                                                         {"--megatron-core-version", &megatron_core_version},
                                                         {"--cross-entropy", &cross_entropy},
                                                         {"--cross-entropy-fusion-impl", &cross_entropy_fusion_impl},
                                                         {"--clip-grad", &clip_grad},
                                                         {"--ddp-bucket-size", &ddp_bucket_size},
                                                         {"--moe-flex-dispatcher-num-sms", &moe_flex_dispatcher_num_sms},
                                                         {"--cuda-device-max-connections", &cuda_device_max_connections}};
  AddMemoryReserveFlag(search, memory_reserve_gib);
  // The same value checks as the plan's options.
  const std::map<std::string, std::vector<std::string>> allowed = {{"--dp-sharding", DpShardingNames()},
                                                                   {"--optimizer", OptimizerNames()},
                                                                   {"--recompute", RecomputeNames()},
                                                                   {"--precision", {"bf16", "fp8", "mxfp8"}},
                                                                   {"--moe-flex-dispatcher-backend", FlexBackendNames()},
                                                                   {"--fp8-recipe", {"tensorwise", "blockwise", "mxfp8"}},
                                                                   {"--cross-entropy", {"unfused", "fused"}},
                                                                   {"--cross-entropy-fusion-impl", {"native", "te"}}};
  for (const auto& [flag, target] : shared) {
    // Flags that pin a searched dimension say so.
    const std::map<std::string, std::string> search_help = {
        {"--gpu-memory-gib", "memory budget per GPU in GiB: layouts over it are dropped (default: the cluster's memory_gib)"},
        {"--micro-batch-size", "pins the sequences per micro-batch (default: searched, 1, 2, 4)"},
        {"--recompute", "pins the recomputation: none | selective | full (default: searched, all three)"},
        {"--dp-sharding",
         "pins the data-parallel sharding: fsdp | zero1 | ddp (default: searched, fsdp and ddp with torchtitan, zero1 "
         "and ddp with megatron)"},
        {"--num-microbatches",
         "micro-batches per pipeline schedule (torchtitan: the rest of the global batch is accumulation "
         "steps; default: every micro-batch of the step in one schedule)"}};
    const auto help = search_help.find(flag);
    const std::string description = help != search_help.end() ? help->second : plan.get_option(flag)->get_description();
    CLI::Option* opt = search->add_option(flag, *target, description);
    const auto it = allowed.find(flag);
    if (it != allowed.end()) opt->check(CLI::IsMember(it->second));
  }
  // FP8 settings hold for every candidate (--fp8-dispatch only for the dispatchers that have it).
  for (const auto& [flag, target] :
       {std::pair<const char*, bool*>{"--fp8-dispatch", &fp8_dispatch}, {"--fp8-param-gather", &fp8_param_gather},
        {"--fp8-dot-product-attention", &fp8_dot_product_attention}}) {
    search->add_flag(flag, *target, plan.get_option(flag)->get_description());
  }
  // Megatron's uneven splits (pipeline_layout.h): the embedding / the loss count as a layer when the
  // layers are split over each candidate's stages.
  // Megatron-Core DDP's overlaps (RunSettings) hold for every candidate, as in the plan; a candidate
  // whose DP sharding cannot run them is rejected by the plan's rule (ValidateRunSettings).
  for (const auto& [flag, target] : {std::pair<const char*, bool*>{"--account-for-embedding-in-pipeline-split", &account_for_embedding},
                                     {"--account-for-loss-in-pipeline-split", &account_for_loss},
                                     {"--overlap-grad-reduce", &overlap_grad_reduce},
                                     {"--overlap-param-gather", &overlap_param_gather},
                                     {"--no-align-param-gather", &no_align_param_gather},
                                     {"--overlap-param-gather-with-optimizer-step", &overlap_param_gather_with_optimizer_step},
                                     {"--moe-shared-expert-overlap", &moe_shared_expert_overlap},
                                     {"--no-check-for-nan-in-loss-and-grad", &no_check_for_nan_in_grad},
                                     {"--no-overlap-p2p-communication", &no_overlap_p2p_comm},
                                     {"--tp-comm-overlap", &tp_comm_overlap},
                                     {"--delay-wgrad-compute", &delay_wgrad_compute},
                                     {"--moe-pad-expert-input-to-capacity", &moe_pad_expert_input_to_capacity},
                                     {"--no-gradient-accumulation-fusion", &no_gradient_accumulation_fusion},
                                     {"--use-transformer-engine-op-fuser", &use_transformer_engine_op_fuser}}) {
    search->add_flag(flag, *target, plan.get_option(flag)->get_description());
  }
  search->add_option("--vpp", vpp, "pins the model chunks per pipeline rank (default: searched, every vpp with pp x vpp <= layers + 2 where pp > 1)");
  search->add_option("--dispatcher", dispatcher, "pins the dispatcher: all_to_all | deredundency | deepep | allgather (default: searched)")
      ->check(DispatcherCheck());
  search->add_flag("--overlap-moe-expert-parallel-comm,!--no-overlap-moe-expert-parallel-comm", overlap_moe_ep_comm,
                   "pins Megatron's EP overlap on (--overlap-moe-expert-parallel-comm, or =true) or off "
                   "(--no-overlap-moe-expert-parallel-comm, or =false) (default: searched off and on with --convention megatron, "
                   "off with torchtitan)");
}

void TrainingFlags::AddRunTo(CLI::App* app) {
  app->add_option("--seq-len", seq_len, "replay: tokens per sequence of the plan's workload (default: the plan's)");
  app->add_option("--dispatcher", dispatcher,
                  "all_to_all | deredundency | deepep (once per node over the network, then NVLink) | allgather (Megatron's "
                  "all-gather / reduce-scatter) (default all_to_all)")
      ->check(DispatcherCheck());
  app->add_option("--oep", oep, "deredundency outer EP size (default: the nodes an EP group spans)");
  app->add_option("--moe-flex-dispatcher-backend", moe_flex_dispatcher_backend,
                  "with --dispatcher deepep: Megatron's flex backend, deepep | hybridep | ncclep (default deepep; its rank limits "
                  "hold as in the plan)")
      ->check(CLI::IsMember(FlexBackendNames()));
  app->add_option("--gpus-per-node", gpus_per_node, "ranks per node, for the default --oep (default 8)");
}

TrainingOverrides TrainingFlags::Parse() const {
  TrainingOverrides t;
  if (!dp_sharding.empty()) {
    t.dp_sharding = ParseDpSharding(dp_sharding, "--dp-sharding");
  }
  if (!param_dtype.empty()) t.param_dtype = param_dtype;
  if (!grad_dtype.empty()) t.grad_dtype = grad_dtype;
  if (!optimizer.empty()) t.optimizer = ParseOptimizer(optimizer, "--optimizer");
  t.seq_len = ParseInt("--seq-len", seq_len);
  t.micro_batch_size = ParseInt("--micro-batch-size", micro_batch_size);
  t.num_microbatches = ParseInt("--num-microbatches", num_microbatches);
  if (!recompute.empty()) {
    t.recompute = ParseRecompute(recompute, "--recompute");
  }
  t.mtp_layers = ParseInt("--mtp-layers", mtp_layers);
  t.make_vocab_size_divisible_by = ParseInt("--make-vocab-size-divisible-by", make_vocab_size_divisible_by);
  if (!precision.empty()) t.precision = precision;
  if (!fp8_recipe.empty()) t.fp8_recipe = fp8_recipe;
  t.fp8_dispatch = fp8_dispatch;
  t.fp8_param_gather = fp8_param_gather;
  t.fp8_dot_product_attention = fp8_dot_product_attention;
  if (!optimizer_states_dtype.empty()) t.optimizer_states_dtype = optimizer_states_dtype;
  if (!recompute_modules.empty()) {
    t.recompute_modules.emplace();
    std::stringstream list(recompute_modules);
    for (std::string item; std::getline(list, item, ',');) t.recompute_modules->push_back(item);
  }
  if (!selective_ac_option.empty()) t.selective_ac_option = selective_ac_option;
  t.gpu_memory_gib = ParseNumber("--gpu-memory-gib", gpu_memory_gib);
  t.memory_reserve_gib = ParseNumber("--memory-reserve-gib", memory_reserve_gib);
  t.imbalance = ParseNumber("--imbalance", imbalance);
  t.gpus_per_node = ParseInt("--gpus-per-node", gpus_per_node);
  if (!dispatcher.empty()) t.dispatcher = ParseDispatcher(dispatcher, "--dispatcher");
  t.oep = ParseInt("--oep", oep);
  if (!moe_flex_dispatcher_backend.empty()) {
    t.moe_flex_dispatcher_backend = ParseFlexBackend(moe_flex_dispatcher_backend, "--moe-flex-dispatcher-backend");
  }
  if (!refit_dtype.empty()) t.refit_dtype = refit_dtype;
  if (!fsdp_reshard.empty()) t.reshard_after_forward = ParseReshardPolicy(fsdp_reshard, "--fsdp-reshard-after-forward");
  t.grad_accumulation_steps = ParseInt("--grad-accumulation-steps", grad_accumulation_steps);
  t.vpp = ParseInt("--vpp", vpp);
  if (!cp_comm.empty()) t.cp_comm = cp_comm;
  t.overlap_grad_reduce = overlap_grad_reduce;
  t.overlap_moe_ep_comm = overlap_moe_ep_comm;
  t.overlap_param_gather = overlap_param_gather;
  t.overlap_param_gather_with_optimizer_step = overlap_param_gather_with_optimizer_step;
  t.no_align_param_gather = no_align_param_gather;
  t.ddp_bucket_size = ParseInt("--ddp-bucket-size", ddp_bucket_size);
  t.moe_flex_dispatcher_num_sms = ParseInt("--moe-flex-dispatcher-num-sms", moe_flex_dispatcher_num_sms);
  t.cuda_device_max_connections = ParseInt("--cuda-device-max-connections", cuda_device_max_connections);
  t.moe_shared_expert_overlap = moe_shared_expert_overlap;
  if (!pipeline_layout.empty()) t.pipeline_layout = pipeline_layout;
  t.account_for_embedding = account_for_embedding;
  t.account_for_loss = account_for_loss;
  if (!pipeline_schedule.empty()) t.pipeline_schedule = pipeline_schedule;
  if (!megatron_core_version.empty()) t.megatron_core_version = megatron_core_version;
  if (!cross_entropy.empty()) t.cross_entropy = cross_entropy;
  if (!cross_entropy_fusion_impl.empty()) t.cross_entropy_fusion_impl = cross_entropy_fusion_impl;
  if (!pp_layer_split.empty()) t.pp_layer_split = pp_layer_split;
  t.clip_grad = ParseNumber("--clip-grad", clip_grad);
  t.no_check_for_nan_in_grad = no_check_for_nan_in_grad;
  t.no_overlap_p2p_comm = no_overlap_p2p_comm;
  t.delay_wgrad_compute = delay_wgrad_compute;
  t.moe_pad_expert_input_to_capacity = moe_pad_expert_input_to_capacity;
  t.no_gradient_accumulation_fusion = no_gradient_accumulation_fusion;
  t.use_transformer_engine_op_fuser = use_transformer_engine_op_fuser;
  if (tp_comm_overlap_given) t.tp_comm_overlap = tp_comm_overlap;
  return t;
}

SearchSettingsPinned TrainingFlags::SearchPinned() const {
  SearchSettingsPinned pinned;
  pinned.micro_batch_size = !micro_batch_size.empty();
  pinned.recompute = !recompute.empty();
  pinned.vpp = !vpp.empty();
  pinned.dp_sharding = !dp_sharding.empty();
  pinned.ep_overlap = overlap_moe_ep_comm_pinned;
  if (!dispatcher.empty()) pinned.dispatcher = ParseDispatcher(dispatcher, "--dispatcher");
  return pinned;
}

}  // namespace dockyard::cli
