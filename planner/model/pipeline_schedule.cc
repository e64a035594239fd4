// Schedule rules of a run's framework settings (see pipeline_schedule.h).
#include "planner/model/pipeline_schedule.h"

#include <algorithm>
#include <string_view>

#include <fmt/format.h>

#include "planner/base/error.h"
#include "planner/model/recompute.h"
#include "planner/model/training.h"

namespace dockyard {

bool ReshardAfterForward(ReshardPolicy p, int64_t pp) {
  if (p == ReshardPolicy::kAlways) return true;
  if (p == ReshardPolicy::kNever) return false;
  return pp <= 1;  // torchtitan: reshard_after_forward = not pp_enabled
}

FsdpCalls FsdpCallsPerStep(ReshardPolicy policy, int64_t pp, int64_t M) {
  if (pp < 1 || M < 1) throw Error(fmt::format("FSDP calls need pp >= 1 and num_microbatches >= 1, got pp {} and {}", pp, M));
  const bool reshard = ReshardAfterForward(policy, pp);
  FsdpCalls c;
  if (pp == 1) {
    c.forward_all_gathers = M;
    c.backward_all_gathers = reshard ? M : 0;
    c.reduce_scatters = M;
    return c;
  }
  c.reduce_scatters = 1;
  if (!reshard) {
    c.forward_all_gathers = 1;
    return c;
  }
  const int64_t warmup = std::min(pp - 1, M);
  c.forward_all_gathers = std::min(M, warmup + 1);
  c.backward_all_gathers = std::max<int64_t>(1, M - warmup);
  return c;
}

double FsdpLayerMeanUs(double c, double ag, double rs, int64_t n_ag, int64_t n_rs, int64_t M, double x) {
  M = std::max<int64_t>(M, 1);
  n_ag = std::clamp<int64_t>(n_ag, 0, M);
  n_rs = std::clamp<int64_t>(n_rs, 0, M);
  const int64_t b = std::min(n_ag, n_rs);
  auto mb = [&](double comm) { return std::max(c, comm + x); };
  const double sum = static_cast<double>(b) * mb(ag + rs) + static_cast<double>(n_ag - b) * mb(ag) +
                     static_cast<double>(n_rs - b) * mb(rs) + static_cast<double>(M - std::max(n_ag, n_rs)) * c;
  return sum / static_cast<double>(M);
}

bool KeepsUnshardedParams(ReshardPolicy policy, int64_t pp) {
  return pp > 1 || !ReshardAfterForward(policy, pp);
}
bool AccumulatesUnshardedGrads(int64_t pp) {
  return pp > 1;
}

void ValidateVpp(int64_t vpp) {
  if (vpp < 1 || vpp > 1024) throw Error(fmt::format("--vpp: must be in [1, 1024], got {}", vpp));
}

void ValidateRunSettings(const RunSettings& s, int dp_sharding, int64_t pp) {
  if (s.grad_accumulation_steps < 1 || s.grad_accumulation_steps > (int64_t{1} << 24)) {
    throw Error(fmt::format("--grad-accumulation-steps: must be in [1, 2^24], got {}", s.grad_accumulation_steps));
  }
  if (s.reshard_after_forward != ReshardPolicy::kDefault && dp_sharding != 0) {
    throw Error(fmt::format("--fsdp-reshard-after-forward {}: needs --dp-sharding fsdp (torchtitan's FSDP policy)",
                            ReshardPolicyName(s.reshard_after_forward)));
  }
  if (s.overlap_grad_reduce && dp_sharding == 0) {
    throw Error(
        "--overlap-grad-reduce: needs --dp-sharding zero1 or ddp (Megatron-Core DDP); FSDP overlaps its own "
        "reduce-scatters");
  }
  if (s.overlap_param_gather && dp_sharding != 1) {
    throw Error(
        "--overlap-param-gather: only supported with the distributed optimizer (--dp-sharding zero1; "
        "megatron/training/arguments.py)");
  }
  if (s.overlap_param_gather && !s.overlap_grad_reduce) {
    throw Error(
        "--overlap-param-gather: --overlap-grad-reduce should be turned on when using --overlap-param-gather "
        "(megatron/training/arguments.py)");
  }
  ValidateVpp(s.vpp);
  if (s.overlap_param_gather_with_optimizer_step && !s.overlap_param_gather) {
    throw Error(
        "--overlap-param-gather-with-optimizer-step: Must use --overlap-param-gather-with-optimizer-step with "
        "--overlap-param-gather (megatron/training/arguments.py)");
  }
  if (s.overlap_param_gather_with_optimizer_step && s.vpp < 2) {
    throw Error(fmt::format(
        "--overlap-param-gather-with-optimizer-step: only supported with interleaved pipeline parallelism (--vpp > 1, got "
        "--vpp {}; megatron/training/arguments.py)",
        s.vpp));
  }
  if (s.ddp_bucket_size < 0 || s.ddp_bucket_size > (int64_t{1} << 40)) {
    throw Error(fmt::format("--ddp-bucket-size: must be a number of parameters in [1, 2^40] (Megatron --ddp-bucket-size), got {}",
                            s.ddp_bucket_size));
  }
  // Megatron-Core DDP's buckets and gather dispatch; FSDP (torchtitan's, Megatron-FSDP) gathers and
  // reduces per FSDP unit.
  if ((s.ddp_bucket_size > 0 || !s.align_param_gather) && dp_sharding == 0) {
    throw Error(fmt::format("{}: Megatron-Core DDP's buckets (--dp-sharding zero1 or ddp); --dp-sharding fsdp gathers and reduces per "
                            "FSDP unit: drop the flag, or use zero1",
                            s.ddp_bucket_size > 0 ? "--ddp-bucket-size" : "--no-align-param-gather"));
  }
  if (s.vpp > 1 && pp < 2) {
    throw Error(fmt::format("--vpp {}: the interleaved schedule needs pp > 1 (got pp {})", s.vpp, pp));
  }
  if (s.cp_comm != "p2p" && s.cp_comm != "a2a") {
    throw Error(fmt::format("--cp-comm-type: must be \"p2p\" or \"a2a\", got \"{}\"", s.cp_comm));
  }
  ValidateSmsAndQueues(s);
}

void ValidateSmsAndQueues(const RunSettings& s) {
  if (s.moe_flex_dispatcher_num_sms < 0 || s.moe_flex_dispatcher_num_sms > kMaxFlexDispatcherNumSms) {
    throw Error(fmt::format("--moe-flex-dispatcher-num-sms: must be a number of SMs in [1, {}] (Megatron --moe-flex-dispatcher-num-sms), "
                            "got {}",
                            kMaxFlexDispatcherNumSms, s.moe_flex_dispatcher_num_sms));
  }
  if (s.cuda_device_max_connections < 1 || s.cuda_device_max_connections > kMaxCudaDeviceMaxConnections) {
    throw Error(fmt::format("--cuda-device-max-connections: CUDA_DEVICE_MAX_CONNECTIONS is in [1, {}] (CUDA's environment variable; "
                            "default {}), got {}",
                            kMaxCudaDeviceMaxConnections, kCudaDefaultMaxConnections, s.cuda_device_max_connections));
  }
}

void ValidateFlexDispatcherNumSms(const TrainingConfig& t, bool megatron) {
  const int64_t n = t.run.moe_flex_dispatcher_num_sms;
  if (n == 0) return;
  if (!megatron) {
    throw Error(fmt::format("--moe-flex-dispatcher-num-sms {}: Megatron-Core's flex dispatcher setting; torchtitan's DeepEP path sets no SM "
                            "count: use --convention megatron, or drop the flag",
                            n));
  }
  if (t.dispatcher != Dispatcher::kDeepEp) {
    throw Error(fmt::format("--moe-flex-dispatcher-num-sms {}: the SMs of Megatron's flex dispatcher (--dispatcher deepep, any "
                            "--moe-flex-dispatcher-backend); --dispatcher {} has no such setting: use --dispatcher deepep, or drop the flag",
                            n, DispatcherName(t.dispatcher)));
  }
}

int64_t MaxVpp(int64_t pp, int64_t num_layers) { return pp < 2 ? 1 : std::max<int64_t>(1, (num_layers + 2) / pp); }

void ValidateVppChunks(int64_t pp, int64_t vpp, int64_t num_layers) {
  if (vpp <= 1) return;
  const int64_t chunks = pp * vpp;
  if (vpp > MaxVpp(pp, num_layers)) {  // pp x vpp > num_layers + 2
    throw Error(
        fmt::format("--vpp {}: pp x vpp = {} model chunks, more than num_hidden_layers ({}) + 2 (the embedding and "
                    "the loss, each of which may fill a chunk of its own: Megatron's --account-for-embedding/loss-in-pipeline-split, torchtitan's "
                    "first / last stage less layers); every other chunk needs a layer",
                    vpp, chunks, num_layers));
  }
}

void ValidateEpOverlap(const TrainingConfig& t, int64_t pp, int64_t ep) {
  if (t.run.delay_wgrad_compute && !t.run.overlap_moe_ep_comm && IsDualPipe(t.run)) {
    throw Error(
        "--delay-wgrad-compute: the switch of Megatron's combined 1F1B EP overlap; DualPipe (--pipeline-schedule dualpipe) runs its "
        "weight-gradient step apart already (priced so): drop --delay-wgrad-compute");
  }
  if (t.run.delay_wgrad_compute && !t.run.overlap_moe_ep_comm) {
    throw Error(
        "--delay-wgrad-compute: needs --overlap-moe-expert-parallel-comm (Megatron-Core: \"overlap_moe_expert_parallel_comm must be "
        "enabled when enabling delay_wgrad_compute\", transformer_config.py): add it, or drop --delay-wgrad-compute");
  }
  if (!t.run.overlap_moe_ep_comm) return;
  const char* flag = "--overlap-moe-expert-parallel-comm";
  if (ep < 2) throw Error(fmt::format("{}: only supported with expert model parallelism (ep > 1), got ep {}", flag, ep));
  if (t.dispatcher != Dispatcher::kAllToAll && t.dispatcher != Dispatcher::kDeepEp) {
    throw Error(
        fmt::format("{}: supported with the alltoall/flex token dispatcher (--dispatcher all_to_all or deepep), got --dispatcher {}", flag,
                    DispatcherName(t.dispatcher)));
  }
  if (t.recompute == Recompute::kFull || LayerSacEvery(t) > 0) {
    throw Error(fmt::format("{}: disable full recomputation (--recompute full{})", flag,
                            LayerSacEvery(t) > 0 ? fmt::format(", or --selective-ac-option {}", t.selective_ac_option) : ""));
  }
  if (t.recompute == Recompute::kSelective &&
      std::find(t.recompute_modules.begin(), t.recompute_modules.end(), "moe") != t.recompute_modules.end()) {
    throw Error(fmt::format("{}: disable moe in --recompute-modules (the MoE recompute re-runs the dispatch)", flag));
  }
  if (t.param_dtype != "bfloat16" && t.param_dtype != "float16") {
    throw Error(fmt::format("{}: only supported with a bf16 or fp16 model, got --param-dtype {}", flag, t.param_dtype));
  }
  if (t.mtp_layers > 1) throw Error(fmt::format("{}: MTP supports at most one layer, got --mtp-layers {}", flag, t.mtp_layers));
  if (pp > 1 && t.run.vpp < 2) {
    throw Error(fmt::format("{}: with pp > 1 (pp {}) a virtual pipeline must be specified (--vpp > 1)", flag, pp));
  }
}

namespace {
bool FlexBackendIs(const TrainingConfig& t, FlexBackend b) {
  return t.dispatcher == Dispatcher::kDeepEp && t.moe_flex_dispatcher_backend.value_or(FlexBackend::kDeepEp) == b;
}
// The dispatcher as the rules name it: "all_to_all", "deepep (backend hybridep)", ...
std::string DispatcherText(const TrainingConfig& t) {
  if (t.dispatcher != Dispatcher::kDeepEp) return DispatcherName(t.dispatcher);
  const FlexBackend b = t.moe_flex_dispatcher_backend.value_or(FlexBackend::kDeepEp);
  return fmt::format("deepep (backend {})", b == FlexBackend::kHybridEp ? "hybridep" : b == FlexBackend::kNcclEp ? "ncclep" : "deepep");
}
// Megatron-Core's padded expert inputs give static splits under the all_to_all dispatcher and the
// flex HybridEP backend (MoeLayerSynchronizes).
bool StaticSplits(const TrainingConfig& t) {
  return t.run.moe_pad_expert_input_to_capacity && (t.dispatcher == Dispatcher::kAllToAll || FlexBackendIs(t, FlexBackend::kHybridEp));
}
}  // namespace

bool MoeLayerSynchronizes(const TrainingConfig& t, bool megatron, int64_t ep) {
  if (t.run.full_iteration_cuda_graph) return false;
  if (!megatron) return ep > 1;
  return !StaticSplits(t);
}

void ValidateGraphsAndPadding(const TrainingConfig& t, bool megatron) {
  const RunSettings& r = t.run;
  const char* full = "--full-iteration-cuda-graph";
  if (!megatron) {
    if (r.full_iteration_cuda_graph) {
      throw Error(fmt::format(
          "{}: Megatron-LM's --cuda-graph-impl full_iteration; torchtitan has no whole-iteration graph (its MoE waits on the host for "
          "the all-to-all's splits): use --convention megatron, or drop the flag",
          full));
    }
    return;
  }
  const bool hybridep = FlexBackendIs(t, FlexBackend::kHybridEp);
  if (r.moe_pad_expert_input_to_capacity && FlexBackendIs(t, FlexBackend::kNcclEp)) {
    throw Error(
        "--moe-pad-expert-input-to-capacity: Megatron-Core's NCCL EP backend refuses it (\"drop and pad is not supported yet with "
        "the 'ncclep' backend\", token_dispatcher.py): use --moe-flex-dispatcher-backend hybridep or --dispatcher all_to_all, or "
        "drop the flag");
  }
  if (r.moe_pad_expert_input_to_capacity && FlexBackendIs(t, FlexBackend::kDeepEp)) {
    throw Error(
        "--moe-pad-expert-input-to-capacity: Megatron-Core refuses it with the flex dispatcher's DeepEP backend (\"Flex token "
        "dispatcher with deepep backend does not support moe_pad_expert_input_to_capacity\", transformer_config.py): use "
        "--moe-flex-dispatcher-backend hybridep or --dispatcher all_to_all, or drop the flag");
  }
  if (r.cuda_graphs && !r.full_iteration_cuda_graph && t.recompute == Recompute::kFull) {
    throw Error(
        "--cuda-graphs with --recompute full: Megatron-Core captures full recomputation only in a whole-iteration graph (\"full "
        "recompute is only supported with full iteration CUDA graph\", transformer_config.py): use --full-iteration-cuda-graph, "
        "--recompute selective, or drop --cuda-graphs");
  }
  if (!r.full_iteration_cuda_graph) return;
  if (r.check_for_nan_in_grad) {
    throw Error(fmt::format(
        "{}: Megatron-LM asserts \"--no-check-for-nan-in-loss-and-grad should be set with --cuda-graph-impl=full_iteration for "
        "training\" (arguments.py): add --no-check-for-nan-in-loss-and-grad",
        full));
  }
  // Sync-free without the graph (padding under all_to_all or HybridEP), or HybridEP's fixed buffers
  // (Megatron's --moe-expert-rank-capacity-factor, which Megatron-Bridge's full-iteration recipes
  // set; dockyard does not price the factor).
  if (!StaticSplits(t) && !hybridep) {
    throw Error(fmt::format(
        "{}: a whole-iteration graph cannot capture the dispatcher's host synchronization (the token counts a dropless MoE layer "
        "waits for, token_dispatcher.py _maybe_dtoh_and_synchronize), and --dispatcher {}{} has it: use --dispatcher all_to_all "
        "with --moe-pad-expert-input-to-capacity (static splits), or --dispatcher deepep --moe-flex-dispatcher-backend hybridep "
        "with Megatron's --moe-expert-rank-capacity-factor (fixed buffers, as Megatron-Bridge's full-iteration recipes run it; "
        "dockyard does not price the factor)",
        full, DispatcherText(t), r.moe_pad_expert_input_to_capacity ? " (padding or not)" : ""));
  }
}

void ValidateSharedExpertOverlap(const TrainingConfig& t, bool megatron, bool has_shared_experts) {
  if (!megatron || !t.run.overlap_shared_experts.value_or(false)) return;
  const char* flag = "--moe-shared-expert-overlap";
  if (t.run.overlap_moe_ep_comm) {
    throw Error(fmt::format(
        "{}: cannot be combined with --overlap-moe-expert-parallel-comm (Megatron-Core: \"disable moe_shared_expert_overlap when "
        "enabling overlap_moe_expert_parallel_comm\", transformer_config.py); drop one of them",
        flag));
  }
  if (!has_shared_experts) return;
  if (t.dispatcher != Dispatcher::kAllToAll && t.dispatcher != Dispatcher::kDeepEp) {
    throw Error(fmt::format(
        "{}: needs --dispatcher all_to_all or deepep, got --dispatcher {} (Megatron-Core: \"moe_shared_expert_overlap only works with "
        "alltoall or flex token dispatcher.\", transformer_config.py)",
        flag, DispatcherName(t.dispatcher)));
  }
  if (t.recompute == Recompute::kSelective &&
      std::find(t.recompute_modules.begin(), t.recompute_modules.end(), "shared_experts") != t.recompute_modules.end()) {
    throw Error(
        fmt::format("{}: cannot be combined with shared_experts in --recompute-modules (Megatron-Core: \"shared_experts recompute cannot "
                    "work with --moe-shared-expert-overlap.\", transformer_config.py)",
                    flag));
  }
}

double PipelineSlots(int64_t M, int64_t pp, int64_t vpp) {
  if (vpp < 1) throw Error(fmt::format("pipeline slots need num_microbatches, pp and vpp >= 1, got {}, {}, {}", M, pp, vpp));
  return PipelineSlots(M, pp, vpp, 1.0 / static_cast<double>(vpp));
}

double ChunkSlotShare(const std::vector<int64_t>& layer_stage, const std::vector<int64_t>& layer_chunk, int64_t pp, int64_t vpp) {
  if (vpp <= 1) return 1.0;
  if (!layer_chunk.empty() && layer_chunk.size() != layer_stage.size()) {
    throw Error(fmt::format("internal: {} layer chunks for {} layers", layer_chunk.size(), layer_stage.size()));
  }
  const size_t ranks = static_cast<size_t>(std::max<int64_t>(1, pp));
  std::vector<int64_t> per_rank(ranks, 0);
  std::vector<std::vector<int64_t>> per_chunk(ranks, std::vector<int64_t>(static_cast<size_t>(vpp), 0));
  for (size_t l = 0; l < layer_stage.size(); ++l) {
    const int64_t s = layer_stage[l];
    if (s < 0 || s >= pp) throw Error(fmt::format("internal: a layer on pipeline rank {} of {}", s, pp));
    ++per_rank[static_cast<size_t>(s)];
    if (layer_chunk.empty()) continue;
    const int64_t c = layer_chunk[l];
    if (c < 0 || c >= vpp) throw Error(fmt::format("internal: layer {} in model chunk {} of {}", l, c, vpp));
    ++per_chunk[static_cast<size_t>(s)][static_cast<size_t>(c)];
  }
  const int64_t most = *std::max_element(per_rank.begin(), per_rank.end());
  if (most < 1) return 1.0 / static_cast<double>(vpp);
  if (layer_chunk.empty()) return 1.0 / static_cast<double>(std::min(vpp, most));
  double share = 0;
  for (size_t p = 0; p < ranks; ++p) {
    if (per_rank[p] != most) continue;
    const int64_t largest = *std::max_element(per_chunk[p].begin(), per_chunk[p].end());
    share = std::max(share, static_cast<double>(largest) / static_cast<double>(most));
  }
  return share;
}

double PipelineSlots(int64_t M, int64_t pp, int64_t vpp, double chunk_share) {
  if (M < 1 || pp < 1 || vpp < 1) {
    throw Error(fmt::format("pipeline slots need num_microbatches, pp and vpp >= 1, got {}, {}, {}", M, pp, vpp));
  }
  if (!(chunk_share > 0 && chunk_share <= 1)) throw Error(fmt::format("internal: a chunk's share of its stage must be in (0, 1], got {}", chunk_share));
  // In chunk slots (1 / vpp of a stage slot): the M micro-batches pass through the pp ranks vpp
  // times. A pass takes M + pp - 1 chunk slots, and the next pass's first micro-batch reaches rank 0
  // again pp chunk slots after it left, so with fewer micro-batches than stages each of the first
  // vpp - 1 passes leaves rank 0 idle pp - M chunk slots: busy M x vpp, idle (vpp - 1) x
  // max(0, pp - M) + pp - 1. M >= pp gives Narayanan et al.'s (pp - 1) / vpp; M = 1 gives pp - 1,
  // as without interleaving (one micro-batch cannot fill the pipeline however it is chunked).
  const int64_t idle_chunks = (vpp - 1) * std::max<int64_t>(0, pp - M) + (pp - 1);
  return static_cast<double>(M) + static_cast<double>(idle_chunks) * chunk_share;
}

int64_t InFlightChunks(int64_t pp, int64_t vpp, int64_t M, int64_t stage) {
  if (vpp <= 1) return std::min<int64_t>(pp - stage, M);
  // Megatron's get_pp_rank_microbatches: warm-up 2 (pp - rank - 1) + (vpp - 1) x group (group =
  // microbatch_group_size_per_vp_stage, default pp); the first 1F1B step's forward adds one before
  // the first backward frees one.
  const int64_t warmup = 2 * (pp - stage - 1) + (vpp - 1) * pp;
  return std::min<int64_t>(M * vpp, warmup + 1);
}

int64_t ChunkInFlight(int64_t pp, int64_t vpp, int64_t chunks, int64_t chunk) {
  if (chunk < 0 || chunk >= std::max<int64_t>(1, vpp)) {
    throw Error(fmt::format("internal: model chunk {} of a rank with {} chunks", chunk, vpp));
  }
  if (vpp <= 1) return chunks;
  // Forward k runs chunk (k / pp) mod vpp: each cycle of pp x vpp forwards runs pp of each chunk in turn.
  return chunks / (pp * vpp) * pp + std::clamp<int64_t>(chunks % (pp * vpp) - chunk * pp, 0, pp);
}

int64_t FirstChunkInFlight(int64_t pp, int64_t vpp, int64_t chunks) {
  return ChunkInFlight(pp, vpp, chunks, 0);
}

int64_t InFlightStageMicrobatches(int64_t pp, int64_t vpp, int64_t M, int64_t stage) {
  const int64_t v = std::max<int64_t>(1, vpp);
  return (InFlightChunks(pp, v, M, stage) + v - 1) / v;
}

bool IsDualPipe(const RunSettings& s) {
  return std::string_view(s.schedule) == "dualpipe";  // the length first: called per stage and layout in a search
}

bool EpCommOverlapped(const RunSettings& s) {
  return s.overlap_moe_ep_comm || IsDualPipe(s);
}

bool WgradDelayed(const RunSettings& s) {
  return (s.overlap_moe_ep_comm && s.delay_wgrad_compute) || IsDualPipe(s);
}

int64_t DualPipeMirrorStage(int64_t pp, int64_t stage) {
  return pp - 1 - stage;
}

void ValidateSchedule(const RunSettings& s, int64_t pp, int64_t M) {
  if (s.schedule != "1f1b" && s.schedule != "dualpipe") {
    throw Error(fmt::format("--pipeline-schedule: must be \"1f1b\" or \"dualpipe\", got \"{}\"", s.schedule));
  }
  if (!IsDualPipe(s)) return;
  const char* flag = "--pipeline-schedule dualpipe";
  if (pp < 2 || pp % 2 != 0) {
    throw Error(fmt::format(
        "{}: needs an even pp >= 2 (ranks pair stage s with stage pp - 1 - s; DualPipe.step: num_ranks % 2 == 0), got pp {}", flag, pp));
  }
  if (M % 2 != 0 || M < 2 * pp) {
    throw Error(
        fmt::format("{}: needs an even number of micro-batches >= 2 x pp = {} (half run in each direction; DualPipe.step: "
                    "num_chunks % 2 == 0 and num_chunks >= num_ranks * 2), got --num-microbatches {}",
                    flag, 2 * pp, M));
  }
  if (s.vpp != 1) {
    throw Error(
        fmt::format("{}: each rank already runs two model chunks (stage s and stage pp - 1 - s); --vpp must be 1, got {}", flag, s.vpp));
  }
}

void ValidateSingleStageMicrobatches(const RunSettings& s, int64_t pp, int64_t M, bool megatron) {
  if (megatron || pp < 2 || s.vpp > 1 || IsDualPipe(s) || M >= pp) return;
  throw Error(fmt::format(
      "--num-microbatches {} (micro-batches per pipeline schedule; from the global batch when not given) with pp {}: torchtitan's 1F1B "
      "schedule needs at least as many micro-batches as stages; PyTorch raises \"Number of microbatches ({}) must be greater than or "
      "equal to the number of stages ({}).\" (torch/distributed/pipelining/schedules.py, PipelineScheduleSingle.__init__, which "
      "Schedule1F1B inherits; torchtitan only warns before building it). Use >= {} micro-batches, or --convention megatron, whose "
      "non-interleaved 1F1B takes fewer",
      M, pp, M, pp, pp));
}

void ValidateInterleavedMicrobatches(const RunSettings& s, int64_t pp, int64_t M, bool megatron) {
  if (pp < 2 || s.vpp < 2 || IsDualPipe(s)) return;
  const std::string what =
      fmt::format("--num-microbatches {} (micro-batches per pipeline schedule; from the global batch when not given) with pp {}, --vpp {}",
                  M, pp, s.vpp);
  if (megatron) {
    if (M >= pp && M % pp == 0) return;
    throw Error(fmt::format(
        "{}: Megatron-Core's interleaved schedule needs a multiple of pp ({} % {} = {}): its micro-batch group per virtual stage "
        "(microbatch_group_size_per_vp_stage, default pp) must lie in [pp, M] and divide M or leave a remainder >= pp "
        "(megatron/core/pipeline_parallel/schedules.py forward_backward_pipelining_with_interleaving)",
        what, M, pp, M % pp));
  }
  const int64_t rounds = std::max<int64_t>(1, M / pp);
  if (M % rounds == 0) return;
  throw Error(
      fmt::format("{}: torch.distributed.pipelining's interleaved 1F1B needs a multiple of its rounds max(1, M / pp) = {} ({} % {} = {}) "
                  "(torch/distributed/pipelining/schedules.py ScheduleInterleaved1F1B)",
                  what, rounds, M, rounds, M % rounds));
}

double DualPipeBubbleUs(int64_t pp, double fb_us, double b_us, double w_us) {
  if (pp < 2 || pp % 2 != 0 || fb_us < 0 || b_us < 0 || w_us < 0) {
    throw Error(fmt::format("DualPipe bubble needs an even pp >= 2 and times >= 0, got pp {}, F&B {}, B {}, W {}", pp, fb_us, b_us, w_us));
  }
  return static_cast<double>(pp / 2 - 1) * (fb_us + b_us - 3.0 * w_us);
}

int64_t ScheduleInFlightChunks(const RunSettings& s, int64_t pp, int64_t M, int64_t stage) {
  if (IsDualPipe(s)) return pp + 1;
  return InFlightChunks(pp, s.vpp, M, stage);
}

int64_t ScheduleExtraLayers(const RunSettings& s, int64_t pp, int64_t M, int64_t stage) {
  if (!s.overlap_moe_ep_comm || IsDualPipe(s)) return 0;
  const int64_t vpp = std::max<int64_t>(1, s.vpp);
  return M * vpp > InFlightChunks(pp, vpp, M, stage) ? 1 : 0;
}

int64_t ScheduleInFlightMicrobatches(const RunSettings& s, int64_t pp, int64_t M, int64_t stage) {
  if (IsDualPipe(s)) return pp + 1;
  return InFlightStageMicrobatches(pp, s.vpp, M, stage);
}

}  // namespace dockyard
