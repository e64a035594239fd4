// Framework run settings that decide how a step is scheduled (flags, not calibration knobs) and
// the schedule rules the cost and memory models read: FSDP's reshard-after-forward policy and its
// collectives per step under pipeline parallelism and gradient accumulation, Megatron's
// overlapped gradient reduce / parameter gather (docs/cost-model.md §5).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "planner/model/run_settings.h"

namespace dockyard {

struct TrainingConfig;  // planner/model/training.h

// The reshard-after-forward value `policy` gives at pipeline degree `pp`.
bool ReshardAfterForward(ReshardPolicy policy, int64_t pp);

// FSDP collectives of one FSDP unit per accumulation step of `num_microbatches` (M) micro-batches,
// on the first pipeline stage (the one with the most warm-up forwards):
//  - pp = 1 (torchtitan's accumulation loop; every micro-batch reduce-scatters its gradients):
//      reshard after forward: 2M all-gathers (forward, backward), M reduce-scatters;
//      not:                   M all-gathers (the unit is resharded after each backward), M reduce-scatters.
//  - pp > 1 (torch.distributed.pipelining stage.py backward_maybe_with_nosync: for every
//    micro-batch but the last, set_requires_gradient_sync(False) and
//    set_reshard_after_backward(False), so gradients accumulate unsharded and parameters stay
//    gathered after a backward):
//      not resharded after forward: 1 all-gather, 1 reduce-scatter;
//      resharded after forward: stage 0 of 1F1B runs W = min(pp - 1, M) warm-up forwards, each
//      after a reshard: min(M, W + 1) forward all-gathers; a backward re-gathers when it follows a
//      forward: max(1, M - W) backward all-gathers; M + 1 in all, 1 reduce-scatter.
// Throws dockyard::Error for pp < 1 or num_microbatches < 1.
struct FsdpCalls {
  int64_t forward_all_gathers = 0, backward_all_gathers = 0, reduce_scatters = 0;
};
FsdpCalls FsdpCallsPerStep(ReshardPolicy policy, int64_t pp, int64_t num_microbatches);

// One layer direction's time per micro-batch, the mean over the M micro-batches: `n_ag` of them
// carry an all-gather of `ag_us` and `n_rs` a reduce-scatter of `rs_us` (both in the same
// micro-batches first), each overlapped with the layer's `compute_us` (a micro-batch takes
// max(compute, its collectives + `shared_nic_us`), the traffic of another group on the same NICs,
// network.h SharedNicUs; 0 when none), the others compute only:
//   (b max(c, ag + rs + x) + (n_ag - b) max(c, ag + x) + (n_rs - b) max(c, rs + x)
//    + (M - max(n_ag, n_rs)) c) / M,   b = min(n_ag, n_rs).
// n_ag and n_rs are clamped to [0, M].
double FsdpLayerMeanUs(double compute_us, double ag_us, double rs_us, int64_t n_ag, int64_t n_rs, int64_t num_microbatches,
                       double shared_nic_us);

// FSDP under pp > 1 and not resharded after backward keeps every unit of the stage unsharded
// across micro-batches: the stage's model-parallel elements in param_dtype, and with gradient sync
// off their unsharded gradients accumulated in the reduce dtype (grad_dtype). True when that
// happens: dp_sharding fsdp, pp > 1 (any policy: reshard_after_backward is off) or pp = 1 with
// reshard after forward off (parameters only, between forward and backward of one micro-batch).
bool KeepsUnshardedParams(ReshardPolicy policy, int64_t pp);
bool AccumulatesUnshardedGrads(int64_t pp);

// Checks the settings against the resolved data-parallel strategy (0 fsdp, 1 zero1, 2 ddp, as
// DpSharding) and the degrees. Rules and their sources:
//  - grad_accumulation_steps in [1, 2^24]; vpp in [1, 1024], vpp > 1 needs pp > 1
//    (Megatron: the interleaved schedule is a pipeline schedule); cp_comm "p2p" or "a2a";
//  - a non-default reshard policy needs dp_sharding fsdp (torchtitan's FSDP option);
//  - overlap_grad_reduce needs zero1 or ddp (Megatron-Core DDP); overlap_param_gather needs zero1
//    (the distributed optimizer) and overlap_grad_reduce (megatron/training/arguments.py:
//    "--overlap-param-gather only supported with distributed optimizer", "--overlap-grad-reduce
//    should be turned on when using --overlap-param-gather");
//  - overlap_param_gather_with_optimizer_step needs overlap_param_gather and vpp > 1 (arguments.py:
//    "Must use --overlap-param-gather-with-optimizer-step with --overlap-param-gather",
//    "only supported with interleaved pipeline parallelism"); ddp_bucket_size in [0, 2^40];
//  - moe_flex_dispatcher_num_sms in [0, kMaxFlexDispatcherNumSms] (0 = the backend's default);
//    cuda_device_max_connections in [1, 32] (CUDA's range for CUDA_DEVICE_MAX_CONNECTIONS).
// Throws dockyard::Error naming the flag and the rule.
void ValidateRunSettings(const RunSettings& settings, int dp_sharding, int64_t pp);

// The flex dispatcher's SMs in [0, kMaxFlexDispatcherNumSms] and CUDA_DEVICE_MAX_CONNECTIONS in
// [1, kMaxCudaDeviceMaxConnections] (run_settings.h): ValidateRunSettings's, and checked where the
// flags are read (ApplyTrainingOverrides), so that a search refuses them before it enumerates.
void ValidateSmsAndQueues(const RunSettings& settings);

// RunSettings::moe_flex_dispatcher_num_sms (when set) is Megatron-Core's flex dispatcher's: refused
// under torchtitan (`megatron` false) and with a --dispatcher other than deepep (Megatron's flex).
// Whether it fits the GPU is checked where the cluster is known (ep_overlap.h FlexDispatcherSmShare).
// Throws dockyard::Error naming the flag, its value and the rule.
void ValidateFlexDispatcherNumSms(const TrainingConfig& training, bool megatron);

// --vpp in [1, 1024]; ValidateRunSettings's, and checked where the flag is read, before the layer
// split uses it. Throws dockyard::Error naming --vpp and the value.
void ValidateVpp(int64_t vpp);

// Interleaved 1F1B runs pp x vpp model chunks of at least one layer each; Megatron-Core can count
// the embedding and the loss as pipeline layers (--account-for-embedding-in-pipeline-split,
// --account-for-loss-in-pipeline-split), so at most num_layers + 2 chunks. Throws dockyard::Error
// naming --vpp when pp x vpp exceeds that.
void ValidateVppChunks(int64_t pp, int64_t vpp, int64_t num_layers);

// The largest vpp ValidateVppChunks takes for `pp`: floor((num_layers + 2) / pp), 1 when pp < 2
// (interleaving needs a pipeline). The search enumerates vpp 1..MaxVpp (search_options.h
// SearchOptions::every_vpp), e.g. DeepSeek-V3's 61 layers at pp 8: 63 / 8 = 7.
int64_t MaxVpp(int64_t pp, int64_t num_layers);

// Pipeline slots of one schedule of M micro-batches over pp stages with vpp model chunks per
// rank, in units of one stage's forward + backward of one micro-batch: M + (pp - 1) / vpp when
// M >= pp. The bubble is then (pp - 1) / vpp slots, a fraction (pp - 1) / (vpp x M) of the M busy
// slots (Narayanan et al. 2021, "Efficient Large-Scale Language Model Training on GPU Clusters Using
// Megatron-LM", section 2.2.2). With fewer micro-batches than stages (PyTorch's
// ScheduleInterleaved1F1B runs them in one round) each pass through the pipeline but the last waits
// for its first micro-batch to come back: the bubble is ((vpp - 1) (pp - M) + pp - 1) / vpp slots,
// pp - 1 at M = 1 whatever vpp. vpp 1: M + pp - 1. Throws dockyard::Error for M, pp or vpp < 1.
double PipelineSlots(int64_t num_microbatches, int64_t pp, int64_t vpp);
// The same with a chunk slot of `chunk_share` of a stage slot instead of 1 / vpp (ChunkSlotShare).
// Throws as above, and for a share outside (0, 1].
double PipelineSlots(int64_t num_microbatches, int64_t pp, int64_t vpp, double chunk_share);

// A chunk slot of the fill and the flush as a share of a stage slot: on the rank with the most
// decoder layers (the one setting the stage's time; of several, the largest share), its largest
// model chunk's layers over its layers (layer_stage, layer_chunk: [num_layers], each layer's rank
// in [0, pp) and chunk in [0, vpp)). Equal chunks: 1 / vpp. A chunk without layers runs in no time,
// so chunks beyond a rank's layers shorten no hop (pp 2, 24 layers a rank: vpp 25 as vpp 24; QA:
// the search ranked vpp 25 first on a bubble it cannot have), and a split that puts every layer in
// one chunk fills as plain 1F1B. Under Megatron's rule the first chunk is the largest, and the
// fill runs each rank's first chunk: Mixtral's 8 layers a rank at vpp 7 (2, 1, 1, 1, 1, 1, 1) hop
// by 2 / 8. `layer_chunk` empty: 1 / min(vpp, the most layers). 1 at vpp 1.
double ChunkSlotShare(const std::vector<int64_t>& layer_stage, const std::vector<int64_t>& layer_chunk, int64_t pp, int64_t vpp);

// Chunk forwards (one model chunk, 1/vpp of the stage's layers, for one micro-batch) whose
// activations a rank of `stage` holds at once. 1F1B (vpp 1): min(pp - stage, M), a chunk being the
// whole stage. Interleaved (vpp > 1; NVIDIA/Megatron-LM megatron/core/pipeline_parallel/schedules.py
// get_pp_rank_microbatches, used by forward_backward_pipelining_with_interleaving): the warm-up runs
// 2 (pp - stage - 1) + (vpp - 1) pp chunk forwards (microbatch_group_size_per_vp_stage at its
// default pp), and the first 1F1B step's forward one more before the first backward frees one:
// min(M vpp, warm-up + 1). Counted by chunk, not rounded up to whole stages: pp 8, vpp 4, M 16,
// stage 0 holds 39 chunks = 9.75 stages' activations, not 10. (EP overlap: ScheduleExtraLayers.)
int64_t InFlightChunks(int64_t pp, int64_t vpp, int64_t num_microbatches, int64_t stage);

// Of `chunks` chunk forwards in flight (InFlightChunks), those of model chunk `chunk` (0 <= chunk <
// vpp): Megatron's interleaved order runs forward k on chunk (k / pp) mod vpp
// (microbatch_group_size_per_vp_stage = pp), so the first 39 forwards at pp 8, vpp 4 hold 8 + 7 =
// 15 micro-batches of chunk 0 and 8 of each other chunk. vpp 1: all of them.
// Throws dockyard::Error ("internal: ...") unless 0 <= chunk < max(1, vpp).
int64_t ChunkInFlight(int64_t pp, int64_t vpp, int64_t chunks, int64_t chunk);
// ChunkInFlight of chunk 0, the one holding the embedding on the first stage.
int64_t FirstChunkInFlight(int64_t pp, int64_t vpp, int64_t chunks);

// InFlightChunks without EP overlap in whole-stage units, rounded up: ceil(chunks / vpp) (the
// report's in_flight_microbatches).
int64_t InFlightStageMicrobatches(int64_t pp, int64_t vpp, int64_t num_microbatches, int64_t stage);

// Megatron's validity rules for --overlap-moe-expert-parallel-comm, as Megatron-Core asserts them
// (NVIDIA/Megatron-LM megatron/core/transformer/transformer_config.py, TransformerConfig
// __post_init__, "if self.overlap_moe_expert_parallel_comm:"), for the settings dockyard models:
//  - expert parallelism: ep > 1;
//  - moe_token_dispatcher_type "alltoall" or "flex": dockyard's "all_to_all" and "deepep" (Megatron's
//    flex dispatcher with DeepEP / HybridEP); not "allgather" nor dockyard's "deredundency";
//  - recompute_granularity != "full": no --recompute full (nor torchtitan's per-layer selective_ac_option,
//    which checkpoints whole blocks);
//  - "moe" not in recompute_modules (with --recompute selective);
//  - a bf16 or fp16 model: param_dtype bfloat16 or float16;
//  - mtp_num_layers None, 0 or 1: --mtp-layers <= 1;
//  - with pipeline_model_parallel_size > 1 a virtual pipeline (virtual_pipeline_model_parallel_size
//    not None; megatron/training/arguments.py turns a size of 1 into None): --vpp > 1.
// Megatron's other asserts there concern settings dockyard does not model (torch >= 2.6,
// recompute_method / recompute_num_layers, which only full recomputation uses, ncclep offloading,
// Transformer Engine CUDA-graph scopes); its rule against moe_shared_expert_overlap is
// ValidateSharedExpertOverlap's (Megatron's flag, not torchtitan's always-on overlap). And
// delay_wgrad_compute needs the overlap ("overlap_moe_expert_parallel_comm must be enabled when
// enabling delay_wgrad_compute"): --delay-wgrad-compute without it is refused.
// Otherwise a no-op when training.run.overlap_moe_ep_comm is off. Throws dockyard::Error naming the flag,
// the value and the rule.
void ValidateEpOverlap(const TrainingConfig& training, int64_t pp, int64_t ep);

// CUDA graphs and padding to capacity (run_settings.h full_iteration_cuda_graph,
// moe_pad_expert_input_to_capacity) as Megatron-Core allows them; throws dockyard::Error naming
// the flag and the rule:
//  - --full-iteration-cuda-graph is Megatron's (--cuda-graph-impl full_iteration): refused under
//    torchtitan; it needs --no-check-for-nan-in-loss-and-grad (arguments.py asserts it); the
//    dispatcher's host synchronization cannot be captured, so it needs the expert inputs padded to
//    capacity or the flex dispatcher's HybridEP backend (Megatron-Bridge's full-iteration recipes);
//  - per-layer graphs (--cuda-graphs) with --recompute full: "full recompute is only supported with
//    full iteration CUDA graph" (transformer_config.py);
//  - --moe-pad-expert-input-to-capacity with the flex dispatcher's DeepEP backend: "Flex token
//    dispatcher with deepep backend does not support moe_pad_expert_input_to_capacity".
void ValidateGraphsAndPadding(const TrainingConfig& training, bool megatron);

// Whether a MoE layer's dispatcher waits on the host for its token counts (the one home of the
// rule: kernels_model.h MoeSyncIdleUs prices it, ValidateGraphsAndPadding's full-iteration rule
// builds on it). No under a whole-iteration graph (no host in the step; validated capturable).
// Megatron-Core: yes, except with the expert inputs padded to capacity under the all_to_all
// dispatcher or the flex HybridEP backend (static splits: token_dispatcher.py returns before the
// counts); its allgather dispatcher syncs whatever the padding (local_map.sum().cpu()), and so does
// deredundency (priced as the all-to-all's). torchtitan: with expert parallelism only (its
// all-to-all's splits .tolist(); its grouped GEMM reads device offsets).
bool MoeLayerSynchronizes(const TrainingConfig& training, bool megatron, int64_t ep);

// EP communication overlap (combined 1F1B, DualPipe): priced by planner/cost/ep_overlap.h
// (PairedLayerUs, two streams per layer pair), where EpCommOverlapped says it runs.

// DualPipe (github deepseek-ai/DualPipe, README and dualpipe/dualpipe.py DualPipe.step). Rules:
// --pipeline-schedule is "1f1b" or "dualpipe"; DualPipe needs an even pp >= 2 ("assert
// num_ranks % 2 == 0"), an even number of micro-batches of at least 2 pp ("num_chunks % 2 == 0
// and num_chunks >= num_ranks * 2", half of them run in each direction) and no --vpp (each rank
// already runs two model chunks: stage s and stage pp - 1 - s). Throws dockyard::Error naming the
// flag, the value and the rule. A no-op for "1f1b" (besides the name check).
void ValidateSchedule(const RunSettings& settings, int64_t pp, int64_t num_microbatches);
bool IsDualPipe(const RunSettings& settings);

// Megatron's rules for --moe-shared-expert-overlap (training.run.overlap_shared_experts true under
// `megatron`), as Megatron-Core raises them where the model has shared experts
// (TransformerConfig.__post_init__ in megatron/core/transformer/transformer_config.py, under "if
// self.moe_shared_expert_intermediate_size is not None"):
//  - the alltoall or flex dispatcher: --dispatcher all_to_all or deepep ("moe_shared_expert_overlap
//    only works with alltoall or flex token dispatcher.");
//  - not "shared_experts" in --recompute-modules ("shared_experts recompute cannot work with
//    --moe-shared-expert-overlap.").
//  - not with --overlap-moe-expert-parallel-comm ("disable moe_shared_expert_overlap when enabling
//    overlap_moe_expert_parallel_comm", raised whether or not the model has shared experts).
// A no-op under torchtitan, whose shared experts always run beside the combine (convention.h
// DefaultSharedExpertOverlap), and with the overlap off or unset; the first two rules only for a
// model with shared experts (the flag is "Only effective when moe-shared-expert-intermediate-size
// is set"). Throws
// dockyard::Error naming the flag, the value and Megatron's message.
void ValidateSharedExpertOverlap(const TrainingConfig& training, bool megatron, bool has_shared_experts);

// The plain (single-stage) 1F1B schedule's rule on M, the micro-batches of one pipeline schedule,
// under torchtitan: M >= pp. torchtitan's default pipeline_parallel_schedule is "1F1B"; it only
// logs a warning when M is below the stages (torchtitan/distributed/pipeline_parallel.py
// build_pipeline_schedule), then PyTorch's schedule raises ValueError "Number of microbatches (M)
// must be greater than or equal to the number of stages (pp)." (pytorch/pytorch
// torch/distributed/pipelining/schedules.py, PipelineScheduleSingle.__init__, which Schedule1F1B
// inherits). Megatron's non-interleaved 1F1B (forward_backward_pipelining_without_interleaving)
// runs min(pp - rank - 1, M) warm-up micro-batches and takes any M >= 1: no rule there (`megatron`
// true). A no-op for pp = 1 (no schedule), vpp > 1 (ValidateInterleavedMicrobatches) and DualPipe
// (ValidateSchedule). Throws dockyard::Error naming --num-microbatches, its value, pp, PyTorch's
// message and its source.
void ValidateSingleStageMicrobatches(const RunSettings& settings, int64_t pp, int64_t num_microbatches, bool megatron);

// Interleaved 1F1B's rule on M, the micro-batches of one pipeline schedule (--num-microbatches, or
// from the global batch; under torchtitan's gradient accumulation M is one accumulation step's
// schedule, not the step's A x M). A no-op unless pp > 1, vpp > 1 and the "1f1b" schedule. Rules:
//  - megatron: M a multiple of pp. Megatron-Core (NVIDIA/Megatron-LM
//    megatron/core/pipeline_parallel/schedules.py, forward_backward_pipelining_with_interleaving)
//    raises unless the micro-batch group per virtual stage G lies in [pp, M] ("The number of
//    contiguous micro-batches in a virtual pipeline stage should range in [PP, M]") and M % G is 0
//    or >= pp; G = microbatch_group_size_per_vp_stage defaults to pp
//    (megatron/core/model_parallel_config.py, ModelParallelConfig.__post_init__), so M >= pp and
//    M % pp = 0 (older releases asserted M % pp == 0 directly).
//  - torchtitan: M a multiple of rounds = max(1, M / pp) (integer division). pytorch/pytorch
//    torch/distributed/pipelining/schedules.py, ScheduleInterleaved1F1B.__init__: "Interleaved 1F1B
//    requires the number of microbatches to be a multiple of the number of rounds".
//    E.g. M 97, pp 8: rounds 12, 97 % 12 = 1, refused; M 96: rounds 12, ok; M 6, pp 8: rounds 1, ok.
// Throws dockyard::Error naming --num-microbatches, its value, pp, vpp, the rule and its source.
void ValidateInterleavedMicrobatches(const RunSettings& settings, int64_t pp, int64_t num_microbatches, bool megatron);
// Whether the EP all-to-alls of one micro-batch run under another's compute: Megatron's
// --overlap-moe-expert-parallel-comm, or DualPipe (its overlapped forward-backward chunk pairs,
// DeepSeek-V3 technical report section 3.2.1).
bool EpCommOverlapped(const RunSettings& settings);
// Whether an overlapped layer pair's experts' weight gradients run after its backward dispatch is
// issued (ep_overlap.h PairedLayerUs): RunSettings::delay_wgrad_compute under
// --overlap-moe-expert-parallel-comm, and always under DualPipe (its own weight-gradient step, W).
bool WgradDelayed(const RunSettings& settings);
// The pipeline rank whose stage DualPipe also places on `stage`: pp - 1 - stage.
int64_t DualPipeMirrorStage(int64_t pp, int64_t stage);
// DualPipe's bubble (README table): (pp / 2 - 1)(F&B + B - 3W), with F&B the time of an overlapped
// forward + backward chunk pair, B a full backward chunk and W its weight-gradient part, all in
// us. Throws dockyard::Error for an odd pp or negative times.
double DualPipeBubbleUs(int64_t pp, double fb_us, double b_us, double w_us);
// Chunk forwards whose activations a rank holds at once under `settings`' schedule: DualPipe
// holds pp + 1 micro-batches of its stage (README table, "Activation Per Device"), otherwise
// InFlightChunks with settings.vpp and settings.overlap_moe_ep_comm.
int64_t ScheduleInFlightChunks(const RunSettings& settings, int64_t pp, int64_t num_microbatches, int64_t stage);
// Layers of activations a rank holds beyond its in-flight chunks: 1 under
// --overlap-moe-expert-parallel-comm once a combined 1F1B step runs (M x vpp > the chunks in
// flight), else 0. The combined step runs one chunk's forward layer by layer beside another's
// backward, the backward from its last layer down, each backward layer's state released after it
// (megatron/core/models/common/model_chunk_schedule_plan.py run: forward layer i with
// b_schedule_plan.pop_layer(); combined_1f1b.py for pp 1), so the new chunk's layers arrive as
// the old one's leave: one layer more than the chunks. Megatron's extra warm-up forward with the
// overlap ("we schedule one extra micro-batch forward step before the 1f1b stages") is that
// chunk's forward, which then runs beside the first backward. DualPipe: 0 (its own count).
int64_t ScheduleExtraLayers(const RunSettings& settings, int64_t pp, int64_t num_microbatches, int64_t stage);
// The same in whole-stage units, rounded up: ceil(ScheduleInFlightChunks / vpp).
int64_t ScheduleInFlightMicrobatches(const RunSettings& settings, int64_t pp, int64_t num_microbatches, int64_t stage);

}  // namespace dockyard
