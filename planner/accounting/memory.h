// Per-rank memory of a plan, by kind and by role (docs/memory-model.md derives every formula).
//
// Kinds: parameters, gradients, optimizer state, activations, communication buffers; peak is
// their sum (an upper bound: it assumes the last micro-batch's activations and the full gradients
// coexist, as they do at the start of the last backward).
//
// Data-parallel strategies (TrainingConfig::dp_sharding):
//  - fsdp (torchtitan FSDP2, MixedPrecisionPolicy(param_dtype, reduce_dtype)): the sharded
//    parameter is kept in float32 (FSDP2 keeps the original fp32 parameter and casts on all-gather),
//    sharded grads in grad_dtype, AdamW moments 2 x fp32 sharded like the parameter; all-gather
//    buffers of two FSDP units (current + prefetched layer) in param_dtype and one reduce-scatter
//    buffer in grad_dtype.
//  - zero1 (Megatron distributed optimizer): params in param_dtype and grads in grad_dtype
//    replicated over data parallelism; fp32 master weights (when param_dtype is not fp32) and
//    moments sharded over dp_shard*cp (dense) and efsdp (experts).
//  - ddp: like zero1 with nothing sharded.
// Model-parallel sharding (tp, ep, etp, pp) applies in every strategy, through the plan's
// placements.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "planner/layout/plan.h"
#include "planner/model/muon.h"
#include "planner/model/precision.h"
#include "planner/model/recompute.h"
#include "planner/accounting/workload.h"

namespace dockyard {

struct MemoryBreakdown {
  int64_t params_bytes = 0;
  int64_t grads_bytes = 0;
  int64_t optimizer_bytes = 0;
  // The elements the optimizer steps on this rank (StaticBytes::shard_elems): all of its local
  // elements under fsdp and ddp, the distributed optimizer's shard under zero1. Not memory: the
  // step-end passes of the cost model (kernels_model.h StepEndKernels) read it.
  int64_t optimizer_elems = 0;
  int64_t activations_bytes = 0;
  int64_t comm_buffers_bytes = 0;
  int64_t peak_bytes = 0;
  // The part of the peak torch's caching allocator does not hold, so that peak - this compares
  // with torch.cuda.max_memory_allocated and the peak with the device's capacity: DeepEP's /
  // HybridEP's buffers (the "deepep" buffer use; DeepEP's Buffer allocates its NVLink and RDMA
  // buffers with cudaMalloc / NVSHMEM, outside the allocator). The CUDA context, NCCL's buffers
  // and fragmentation stay in the reserve (kDefaultMemoryReserveGib).
  int64_t outside_allocator_bytes = 0;
  // By role group (RoleGroup names, plus "logits" for activations): bytes per kind.
  std::map<std::string, int64_t> params_by_role, grads_by_role, optimizer_by_role, activations_by_role;
  std::map<std::string, int64_t> comm_buffers_by_use;  // "fsdp_all_gather", "fsdp_reduce_scatter", "all_to_all", ...
};

struct StageMemory {
  int64_t stage = 0;
  int64_t worst_rank = 0;  // the rank of the stage with the highest peak
  int64_t in_flight_microbatches = 1;
  MemoryBreakdown worst;  // that rank's breakdown
};

struct MemoryReport {
  Workload workload;
  std::vector<StageMemory> stages;
  int64_t worst_rank = 0;  // highest peak over all ranks
  int64_t worst_peak_bytes = 0;
  // The highest peak less its outside_allocator_bytes over all ranks: what
  // torch.cuda.max_memory_allocated would report.
  int64_t worst_allocator_peak_bytes = 0;
  double budget_gib = 0;   // 0 = no budget
  double reserve_gib = 0;  // held back from the budget (TrainingConfig::memory_reserve_gib)
  // The worst rank of each stage whose peak exceeds the budget (empty when none or no budget).
  std::vector<int64_t> over_budget_ranks;
};

// Parameter, gradient and optimizer bytes of one rank (activations and buffers left 0).
// Under DualPipe (pipeline_schedule.h) a rank also holds the stage pp - 1 - s at its coordinates
// (README: 2x parameters per device): with `with_mirror` the two stages' static bytes are summed.
MemoryBreakdown StaticMemoryOnRank(const Plan& plan, int64_t rank, bool with_mirror = true);

// The per-rank memory rules, each in one place, over plain values: ComputeMemory applies them to
// a plan's tensors, the layout search (layout_eval.h) to parameter classes. Sums are 128-bit so
// that no int64 inputs overflow; callers narrow (ComputeMemory throws, the search falls back).
using WideInt = __int128;

// Static bytes of one role group on one rank from its local elements on the dense and on the
// sparse mesh, under the data-parallel strategy `dp_sharding`:
//  - fsdp: fp32 shard + grad_dtype grads + 8 B AdamW moments per element;
//  - zero1: param_dtype params + grad_dtype grads per element, fp32 master (unless params are
//    fp32) + moments sharded over dp_shard * cp (dense) and efsdp (sparse), ceil per group;
//  - ddp: params + grads + master + moments per element.
// `shard_elems` is the number of elements whose optimizer state the rank holds and steps: every
// local element under fsdp and ddp, the ceil-sharded ones under zero1.
struct StaticBytes {
  WideInt params = 0, grads = 0, optimizer = 0;
  WideInt shard_elems = 0;
};

// The FP8 weight copies a rank keeps beside its parameters (precision.h), per element of an FP8
// GEMM group: Fp8WeightCopyBytesPerElement under a framework that keeps them (workload.h
// Fp8KeepsQuantizedTensors: Megatron / TransformerEngine), else 0.
double Fp8WeightCopyPerElement(const TrainingConfig& training, Convention convention);

// Bytes of those copies for `elems` local elements (dense + sparse) of role group `group`: 0 unless
// precision.h Fp8GemmGroup(group); rounded to the byte per group. ComputeMemory adds them as the
// "fp8_weights" params role, the search's fast path to each stage's static bytes.
WideInt Fp8WeightCopyBytes(std::string_view group, WideInt elems, double per_element);
inline StaticBytes StaticBytesOf(WideInt dense_elems, WideInt sparse_elems, const ParallelDims& d, DpSharding strategy,
                                 const TrainingBytes& tb) {
  const WideInt both = dense_elems + sparse_elems;
  StaticBytes out;
  if (strategy == DpSharding::kFsdp) {
    out.params = both * 4;  // FSDP2 keeps the shard in fp32
    out.grads = both * tb.grad;
    out.optimizer = both * tb.moments;
    out.shard_elems = both;
    return out;
  }
  out.params = both * tb.param;
  out.grads = both * tb.grad;
  if (strategy == DpSharding::kDdp) {
    out.optimizer = both * (tb.master + tb.moments);
    out.shard_elems = both;
  } else {
    // ZeRO-1: Megatron's distributed optimizer shards over the data-parallel group with cp for
    // dense parameters and over the expert-data-parallel group for experts (replicas over
    // dp_replicate).
    const WideInt dense_dp = d.dp_shard * d.cp, sparse_dp = d.efsdp;
    out.shard_elems = (dense_elems + dense_dp - 1) / dense_dp + (sparse_elems + sparse_dp - 1) / sparse_dp;
    out.optimizer = out.shard_elems * (tb.master + tb.moments);
  }
  return out;
}

// Static bytes of role group `group` (inventory.h RoleGroup names) on one rank from its local
// elements on the dense and the sparse mesh: StaticBytesOf at `tb`, except for the weights of an
// FP8 GEMM group (precision.h Fp8GemmGroup) when `fp8_params` (workload.h Fp8ModelParams:
// --fp8-param-gather under the distributed optimizer), at Fp8ModelParamBytes(tb) (no param_dtype
// copy; their FP8 data is counted with the FP8 weight copies), and under Muon with the momentum
// of a Muon group (muon.h MuonManagedGroup) for its moments. ComputeMemory applies it to each
// group of a rank, the search's fast path (layout_eval.h) to each group of a stage's first rank.
// Inline: the search's fast path calls it per group and stage of each group of candidates.
inline StaticBytes GroupStaticBytesOf(std::string_view group, WideInt dense_elems, WideInt sparse_elems, const ParallelDims& d,
                                      DpSharding strategy, const TrainingBytes& tb, bool fp8_params) {
  TrainingBytes g = fp8_params && Fp8GemmGroup(group) ? Fp8ModelParamBytes(tb) : tb;
  if (tb.muon_momentum >= 0 && MuonManagedGroup(group)) g.moments = tb.muon_momentum;  // Muon's one momentum (muon.h)
  return StaticBytesOf(dense_elems, sparse_elems, d, strategy, g);
}

// Activation bytes of one micro-batch of one decoder layer by role group (no in-flight
// multiplier; `rc` == kSelective keeps fewer tensors, kFull is applied per stage by the caller),
// from the workload `w` of the plan's degrees. Groups a layer does not have are 0 (dense layers:
// router, routed and shared experts; MoE layers: dense_mlp). Throws dockyard::Error when a group
// overflows int64.
struct LayerActivationBytes {
  int64_t attention = 0, norm = 0, dense_mlp = 0, router = 0, routed_experts = 0, shared_experts = 0;
  bool moe_layer = false;
  bool shared_experts_present = false;  // MoE layer of a model with shared experts
};
LayerActivationBytes LayerActivations(const ModelSpec& model, Recompute rc, const Workload& w, bool moe_layer);
// The same with recomputation by module (planner/model/recompute.h): `rc` selective is DefaultSelectiveSet().
LayerActivationBytes LayerActivations(const ModelSpec& model, const RecomputeSet& recompute, const Workload& w, bool moe_layer);

// torchtitan's per-op selective checkpointing (recompute.h OpSac): the bytes one micro-batch of a
// decoder layer keeps between its forward and its backward besides its input, by role group, from
// the workload `w`: the outputs of its saved (odd-numbered) linears (recompute.h OpSacLinears;
// colwise T x out / tp, replicated T x out, rowwise the T x hidden partial sum), attention's
// output and fp32 logsumexp (LayerActivations' core output and logsumexp), with tp > 1 each
// block's output reduce-scatter (ceil(T / tp) x hidden), in an MoE layer the top-k weights (fp32)
// and indices (int64) of the router and, with `dispatches` (ep > 1), the dispatch all-to-all's
// R_max received rows and the combine's T_r x top_k returned rows. Norms, rotary, SwiGLU, router
// scores and the routed experts' grouped GEMMs are not kept (re-run in backward). Throws
// dockyard::Error when a group overflows int64.
LayerActivationBytes OpSacSavedActivations(const ModelSpec& model, const Workload& w, bool moe_layer, bool dispatches);

// Activation bytes of one micro-batch for the layers of `stage` (no in-flight multiplier), by
// role group. Throws dockyard::Error on overflow.
std::map<std::string, int64_t> ActivationBytesPerMicrobatch(const Plan& plan, const Workload& w, int64_t stage);

MemoryReport ComputeMemory(const Plan& plan);

// The memory budget rule, the one place a peak is compared with a budget (check, simulate, the
// layout search's evaluator, redundant experts): a rank fits when
//   peak_bytes <= (budget_gib - reserve_gib) * 2^30,
// and headroom = budget - reserve - peak. budget_gib 0 means no budget (nothing is over it); a
// reserve at or above the budget leaves nothing usable, so every rank is over.
//
// The reserve stands for memory the model does not count. Its default, kDefaultMemoryReserveGib =
// 2 GiB per GPU, is the sum of three stated allowances (docs/memory-model.md, "Memory reserve"):
//  - CUDA context, 0.5 GiB: about 300-400 MB per process with CUDA >= 11.7 lazy module loading
//    (PyTorch maintainers in pytorch/pytorch issues 107667 and 109888; > 1000 MB before 11.7),
//    plus cuBLAS / cuBLASLt workspaces;
//  - NCCL buffers, 0.5 GiB: NCCL_BUFFSIZE (default 4 MiB, NCCL user guide "Environment
//    Variables") per channel and peer: 4 MiB x 16 channels x 2 ring peers = 128 MiB per
//    communicator, for four communicators (data-parallel, tp, ep, pp groups);
//  - allocator fragmentation, 1 GiB: the PyTorch caching allocator's reserved-but-unallocated
//    blocks (torch.cuda.memory_reserved - memory_allocated; "CUDA memory management" in the
//    PyTorch CUDA semantics notes), an allowance, not a measurement.
constexpr double kDefaultMemoryReserveGib = 2.0;
// Bytes a rank may use: (budget_gib - reserve_gib) * 2^30 (negative when the reserve exceeds it).
double UsableBudgetBytes(double budget_gib, double reserve_gib);
// Whether `peak_bytes` breaks the rule above (false when budget_gib <= 0).
bool OverBudget(double peak_bytes, double budget_gib, double reserve_gib);
// budget - reserve - peak, in bytes (only meaningful with a budget).
int64_t HeadroomBytes(int64_t peak_bytes, double budget_gib, double reserve_gib);
// The reserve must leave memory to use: with a budget (budget_gib > 0), 0 <= reserve_gib <
// budget_gib. A reserve at or above the budget would put every rank over it whatever the layout,
// so it is invalid input, not a layout that does not fit. `budget_name` and `reserve_name` say
// where each value came from in the message (a flag such as "--gpu-memory-gib", a field, "the
// cluster's memory_gib"). Throws dockyard::Error naming both values and the rule; also for a
// negative or non-finite reserve. No budget (budget_gib <= 0): only the reserve's own range.
void ValidateMemoryReserve(double budget_gib, double reserve_gib, const std::string& budget_name, const std::string& reserve_name);
// A reserve asked for (`reserve_flag`, e.g. "--memory-reserve-gib") is held back from a budget; a
// plan or simulate run with none (budget_gib <= 0: no --gpu-memory-gib, no training.gpu_memory_gib)
// would ignore it silently, so that is invalid input. (search holds layouts to the cluster's
// memory_gib when no budget is given, and check requires one.) Throws dockyard::Error naming the
// flag, its value and the rule.
void RequireBudgetForReserve(double budget_gib, double reserve_gib, const std::string& reserve_flag, const std::string& command);

// For each stage whose worst rank exceeds the report's budget (memory.budget_gib > 0): every rank
// of the stage over it. Activations and buffers are the same on every rank of a stage; the static
// part is counted per rank (StaticMemoryOnRank). O(stage ranks x parameters) per stage over.
struct StageOverBudget {
  int64_t stage = 0;
  int64_t stage_size = 0;  // ranks in the stage
  int64_t worst_rank = 0;
  double peak_gib = 0;              // the worst rank's peak
  std::vector<int64_t> ranks_over;  // increasing
};
std::vector<StageOverBudget> RanksOverBudget(const Plan& plan, const MemoryReport& memory);

// Activation kinds of a stage, in the order of their report keys.
enum class ActivationKind {
  kAttention,
  kNorm,
  kDenseMlp,
  kRouter,
  kRoutedExperts,
  kSharedExperts,
  kCheckpoints,
  kEmbedding,
  kLogits,
  kCount
};
const char* ActivationKindName(ActivationKind kind);  // "attention", ..., "logits"

// Bytes per logit (T x ceil(vocab / tp) of them) live at the loss, when the last stage's
// micro-batch holds all its activations (workload.h SavedTensorRules):
//  - torchtitan: 4, the fp32 log-softmax output F.cross_entropy keeps for backward
//    (torchtitan/components/loss.py casts the logits .float() first);
//  - Megatron-Core: 4 + act_bytes: the fp32 copy that becomes the saved softmax (exp and
//    normalisation in place) while the act_bytes logits it was cast from still live
//    (megatron/core/tensor_parallel/cross_entropy.py calculate_logits_max:
//    vocab_parallel_logits.float(); the same in the native fused loss, fused_cross_entropy.py),
//    and in backward the gradient in place then cast back to act_bytes;
//  - Megatron-Core with TransformerEngine's fused loss (--cross-entropy fused
//    --cross-entropy-fusion-impl te, Workload::te_cross_entropy): act_bytes, the logits themselves,
//    into which the forward writes the gradient in place and which it keeps for backward
//    (transformer_engine/pytorch/cross_entropy.py CrossEntropyFunction.forward,
//    ctx.save_for_backward(_input, target, m_d_X_y); the per-token m_d_X_y is not counted).
int64_t LossBytesPerLogit(const Workload& w);
// The lines a report prints under its memory table to name the framework rules it counted (none
// for torchtitan): the Megatron-Core release's saved tensors (SavedTensorRulesOf) and
// TransformerEngine's loss when the run uses it. Plan, check, simulate and search print them.
std::vector<std::string> MemoryRulesLines(const TrainingConfig& training, Convention convention);
// The logits' bytes at the loss on the last stage: T x ceil(vocab / tp) x LossBytesPerLogit, once
// more per MTP module (each its own loss).
WideInt LossLogitsBytes(const ModelSpec& model, const Workload& w, int64_t tp, int64_t mtp_layers);

// Activation bytes on a rank of one stage, every micro-batch in flight included, by kind
// (`present`: the kind has a report key). Inputs: one MoE layer's and one dense layer's
// activations (ActivationTable), the stage's MoE and dense layer counts, whether its first layer is an MoE
// layer (full recomputation keeps the first of equally large layers), micro-batches in flight,
// the layer-input bytes ceil(T / tp) * hidden * act_bytes (checkpoint and embedding output), and
// for the last stage the logits at the loss (LossLogitsBytes).
//  - none / selective: every layer's tensors x in-flight micro-batches;
//  - full: each layer's input x in-flight micro-batches, plus the largest layer once (the one
//    rebuilt in backward).
// The embedding output is kept on stage 0 for every micro-batch in flight; logits once.
struct StageActivationBytes {
  WideInt bytes[static_cast<int>(ActivationKind::kCount)] = {};
  bool present[static_cast<int>(ActivationKind::kCount)] = {};
  WideInt total = 0;
};
struct LayerActivationTable;
struct StageLayers {
  int64_t moe_layers = 0, dense_layers = 0;
  bool moe_first = false;
  // torchtitan's per-layer selective checkpointing (recompute.h LayerSacEvery): the stage's
  // checkpointed MoE and dense layers, and whether the first of them is an MoE layer. Those layers
  // count as under full recomputation (input kept, the largest rebuilt once), the others as under
  // none. Ignored with `recompute` full (every layer checkpointed).
  int64_t checkpointed_moe = 0, checkpointed_dense = 0;
  bool checkpointed_moe_first = false;
  // torchtitan's per-op selective checkpointing (recompute.h OpSac): each layer's kept bytes
  // (OpSacSavedActivations, as a table); every layer is then checkpointed as under full and keeps
  // these besides its input. Null: off.
  const LayerActivationTable* op_saved = nullptr;
  bool first_stage = false, last_stage = false;
  // Chunk forwards in flight (workload.h InFlightChunks) and the chunks a micro-batch has on the
  // stage (vpp) of an interleaved schedule over `pp` ranks: the layers' activations count
  // in_flight / chunks_per_microbatch times, the embedding output (chunk 0 only)
  // FirstChunkInFlight(pp, chunks_per_microbatch, in_flight) times (pipeline_schedule.h; all of
  // in_flight without interleaving).
  int64_t in_flight = 1;
  int64_t chunks_per_microbatch = 1;
  int64_t pp = 1;
  // Layers held beyond the chunks (workload.h ExtraLayersInFlight): each the stage's largest layer.
  int64_t extra_layers = 0;
  // MoE [0] and dense [1] layer copies in flight when a layout gives each chunk its own layers:
  // sum over the stage's chunks j of ChunkInFlight(pp, vpp, in_flight, j) x that kind's layers in
  // chunk j (a rank of Qwen3-235B's "...|t*3|...|t*2|..." layout at pp 8, vpp 4 with 25 chunks in
  // flight: 8 x 3 + 8 x 3 + 8 x 3 + 1 x 2 = 74 layers, not 25 x 11 / 4 = 68.75). -1: the stage's
  // mean, layers x in_flight / chunks_per_microbatch (the plain and account-for splits). Used for
  // the layers that keep their tensors and, under full recomputation, for the checkpointed inputs.
  int64_t chunk_copies[2] = {-1, -1};
};
// StageLayers::chunk_copies of a stage whose model chunks hold their own layers: `moe[j]` and
// `dense[j]` are chunk j's layers of each kind (j < vpp = st.chunks_per_microbatch; an MTP module in
// the rank's last chunk), each counted ChunkInFlight(st.pp, vpp, st.in_flight, j) times. The one
// rule plan memory (a layout's layer_chunk) and the layout search's fast path share.
void SetChunkCopies(const std::vector<int64_t>& moe, const std::vector<int64_t>& dense, StageLayers& st);
// One MoE [0] and one dense [1] layer's LayerActivations by kind, formed once per set of degrees.
struct LayerActivationTable {
  WideInt bytes[2][static_cast<int>(ActivationKind::kCount)] = {};
  bool present[2][static_cast<int>(ActivationKind::kCount)] = {};
  WideInt sum[2] = {};
};
LayerActivationTable ActivationTable(const LayerActivationBytes& moe_layer, const LayerActivationBytes& dense_layer);
// `by_kind` false: only `total` is filled (the same total).
StageActivationBytes StageActivations(const LayerActivationTable& layers, const StageLayers& stage, Recompute recompute,
                                      WideInt layer_input_bytes, WideInt logits_bytes, bool by_kind = true);
// StageActivations(...).total without forming the breakdown (the layout search's hot path).
WideInt StageActivationsTotal(const LayerActivationTable& layers, const StageLayers& stage, Recompute recompute, WideInt layer_input_bytes,
                              WideInt logits_bytes);

// Communication buffers on a rank of one stage (transient, one layer at a time), by use, in the
// order of their report keys:
//  - FSDP: all-gather buffers of two units (current + prefetched) in param_dtype and one
//    reduce-scatter buffer in grad_dtype, each the largest unit's model-parallel elements;
//  - EP (ep > 1, the stage has MoE layers): the deredundency all-gather output and whiteboard
//    (oep x T_r * top_k rows, 2 x act bytes), and the dispatch send (T_r * top_k) and receive
//    (R_max) rows;
//  - TP: the sequence-parallel all-gather of T rows; PP: send and receive of ceil(T / tp) rows;
//  - FSDP units kept unsharded across micro-batches (pipeline_schedule.h KeepsUnshardedParams:
//    pp > 1, or reshard after forward off): the stage's other units, (stage - 2 x largest unit)
//    elements in param_dtype; with pp > 1 gradient sync is off until the last micro-batch and
//    the stage's unsharded gradients accumulate in the reduce dtype (grad_dtype): stage elements
//    x grad bytes (torch.distributed.pipelining stage.py backward_maybe_with_nosync; FSDP2's
//    unsharded_accumulated_grad);
//  - deepep dispatcher (planner/cost/deepep.h), in place of the all-to-all buffers: the RDMA receive
//    rows (one per token per other node the EP group spans: (nodes - 1) x T_d, in the dispatch's
//    bytes per row, FP8 with fp8_dispatch: deepep.h FlexTokenBytes) and the NVLink receive rows (R_max, act bytes).
//  - allgather dispatcher (Megatron MoEAllGatherTokenDispatcher), in place of the all-to-all
//    buffers: the gathered tokens of the EP group and the combine's reduce-scatter input of the
//    same size, 2 x comm.h AllGatherDispatchBytes(ep, T_d, h, act bytes).
enum class BufferUse {
  kFsdpAllGather,
  kFsdpReduceScatter,
  kDeredundency,
  kAllToAll,
  kTpAllGather,
  kPpSendRecv,
  kFsdpUnshardedParams,
  kFsdpUnshardedGrads,
  kDeepEp,
  kAllGatherDispatch,
  kCount
};
const char* BufferUseName(BufferUse use);  // "fsdp_all_gather", ...
struct StageBufferBytes {
  WideInt bytes[static_cast<int>(BufferUse::kCount)] = {};
  bool present[static_cast<int>(BufferUse::kCount)] = {};
  WideInt total = 0;
};
// `largest_fsdp_unit`: the model-parallel elements of the stage's largest FSDP unit (FsdpUnitOf);
// `oep`: the deredundency dispatcher's outer EP size (1 otherwise); `stage_fsdp_elems`: the
// model-parallel elements of all the stage's FSDP units on its first rank; `machine`: the node size
// the deepep buffers count other nodes by.
StageBufferBytes StageBuffers(WideInt largest_fsdp_unit, bool has_moe_layers, const Workload& w, const ParallelDims& dims,
                              const TrainingConfig& training, const Machine& machine, const TrainingBytes& bytes, int64_t oep,
                              int64_t hidden_size, WideInt stage_fsdp_elems);
// StageBuffers(...).total without forming the breakdown (the layout search's hot path).
WideInt StageBuffersTotal(WideInt largest_fsdp_unit, bool has_moe_layers, const Workload& w, const ParallelDims& dims,
                          const TrainingConfig& training, const Machine& machine, const TrainingBytes& bytes, int64_t oep,
                          int64_t hidden_size, WideInt stage_fsdp_elems);

// The FSDP unit a parameter belongs to, as torchtitan wraps them: each decoder layer's dense
// part, each layer's routed experts when they live on the sparse mesh, the embedding, and the
// root (final norm + lm_head). Key: (layer, experts on the sparse mesh); embedding (-1, false),
// root (-2, false).
std::pair<int64_t, bool> FsdpUnitOf(const ParamInfo& param, bool sparse_mesh);

}  // namespace dockyard
