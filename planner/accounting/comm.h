// Communication volumes of one training step (num_microbatches micro-batches) for one rank, per
// collective, per mesh axis (docs/memory-model.md, "Communication").
//
// Per entry: `calls` in the step, `bytes_per_call` = the collective's buffer size per rank
// (nccl-tests "size": the all-gather output, the reduce-scatter input, the all-reduce buffer, the
// all-to-all send buffer), `wire_bytes` = bytes this rank sends over all calls (ring all-gather /
// reduce-scatter: size*(n-1)/n; ring all-reduce: 2*size*(n-1)/n; all-to-all: the share addressed
// to other ranks under uniform routing, size*(n-1)/n; send/recv: size), and `cross_node_bytes` =
// the part of wire_bytes that leaves the node (ranks fill nodes of gpus_per_node in order; ring
// collectives: wire_bytes * crossing ring edges / n; all-to-all: wire_bytes * peers on other
// nodes / (n - 1)).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "planner/layout/mesh.h"
#include "planner/layout/plan.h"
#include "planner/accounting/workload.h"

namespace dockyard {

struct CommEntry {
  std::string purpose;     // e.g. "fsdp_all_gather_forward", "ep_dispatch", "tp_sequence_parallel"
  std::string collective;  // "all_gather", "reduce_scatter", "all_reduce", "all_to_all", "send_recv"
  std::string mesh;        // "dense", "sparse", or "deredundency" (the oep x iep mesh)
  std::string axis;        // mesh axis (flattened axes joined by "*", e.g. "dp_shard*cp")
  std::string phase;       // "forward", "backward", "step"
  int64_t group_size = 1;
  int64_t calls = 0;
  int64_t bytes_per_call = 0;
  int64_t wire_bytes = 0;
  int64_t cross_node_bytes = 0;
  int64_t stride = 0;  // "step" entries: rank 0's group is {0, stride, ...} (StepCollective::stride); else 0
};

// The deepep dispatcher's per-call link volumes over the EP group of the reported rank (the
// dispatch direction; the combine is its transpose, BF16): bytes per member, mean over the
// sampled MoE layers. Filled by planner/cost/dispatch_traffic.h.
struct DispatchLinks {
  std::vector<int64_t> ep_group;  // global ranks, member order
  int64_t layers_sampled = 0;
  double dispatch_bytes_per_token = 0, combine_bytes_per_token = 0;
  std::vector<double> network_send, network_recv, nvlink_send, nvlink_recv;  // [n] bytes per call
};

struct CommReport {
  int64_t rank = 0;
  int64_t gpus_per_node = 8;
  Dispatcher dispatcher = Dispatcher::kAllToAll;  // planner/model/dispatcher.h
  FlexBackend flex_backend = FlexBackend::kDeepEp;  // deepep's backend (Megatron moe_flex_dispatcher_backend), reported with deepep only
  int64_t oep = 1, iep = 1;
  std::vector<CommEntry> entries;
  int64_t total_wire_bytes = 0;
  int64_t total_cross_node_bytes = 0;
  int64_t moe_calls = 0;               // MoE layers of rank's stage x micro-batches per step: calls of each EP collective
  // The rank's model-parallel parameter elements on the dense and the sparse mesh (its stage): what
  // its data-parallel step collectives reduce and gather.
  int64_t dense_elems = 0, sparse_elems = 0;
  std::optional<DispatchLinks> links;  // deepep only
};

// Volumes for `rank`. Throws dockyard::Error for a deredundency oep that does not divide ep.
// Dispatchers: all_to_all (ep_dispatch / ep_combine all-to-alls), deredundency (oep all-gather,
// iep all-to-all), allgather (all-gather / reduce-scatter of AllGatherDispatchBytes over ep);
// deepep lists no dispatch or combine here: its link-level volumes depend on the routing sample
// and come from planner/cost/dispatch_traffic.h AddDispatcherTraffic (which fills `links`).
CommReport ComputeComm(const Plan& plan, int64_t rank);

// Bytes of the allgather dispatcher's buffer (Megatron MoEAllGatherTokenDispatcher): the EP
// group's tokens, ep x tokens (per rank) x hidden x act_bytes -- the all-gather output and the
// combine's reduce-scatter input. The one rule the traffic table and the time model
// (cost/deepep.h AllGatherDispatchUs) read.
double AllGatherDispatchBytes(int64_t ep, double tokens, double hidden, double act_bytes);

// The data-parallel collectives at the end of a step (CommEntry phase "step", one call each), in
// the order ComputeComm lists them; the one rule both ComputeComm and the layout search read.
//  - fsdp (torchtitan HSDP): sharded gradients all-reduced over dp_replicate;
//  - zero1 (Megatron distributed optimizer): reduce-scatter of the gradients and all-gather of
//    the updated parameters over the dense (dp_shard*cp; Megatron dp*cp) and the sparse
//    (efsdp; edp) data-parallel groups, then the replicas' all-reduce of their shard;
//  - ddp: gradients all-reduced over every data-parallel rank (dp_replicate included).
// `dense_elems` / `sparse_elems`: the rank's model-parallel elements on each mesh (its stage).
// Megatron-Core's embedding group (parallel_state default_embedding_ranks: the first and the last
// pipeline stage) when EmbeddingGroupAllReduces: the first stage's word embedding and the last
// stage's copy of it (the tied lm_head, or the MTP modules' embedding) all-reduce their gradients
// every step (finalize_model_grads, _allreduce_word_embedding_grads) over a group of 2 ranks
// {r, r + (pp - 1) * stage_size}: "embedding_all_reduce_grads", `shared_embedding_elems` (the
// rank's model-parallel word-embedding elements; 0 on other stages and when the group does not
// all-reduce) x grad bytes (the main-gradient dtype, TrainingConfig::grad_dtype).
// The router expert bias (DeepSeek-V3's aux-loss-free balancing): the stage's MoE layers' token
// counts per expert (fp32), stacked and all-reduced once per step, "router_expert_bias_all_reduce",
// `expert_bias_elems` (RouterExpertBiasElems) x 4 B. Megatron (--moe-router-enable-expert-bias,
// finalize_model_grads.py _update_router_expert_bias, moe_utils.py get_updated_expert_bias): over
// the TP x DP x CP group. torchtitan (components/optimizer optimizer.py _update_expert_bias, an
// optimizer pre-step hook): over the loss mesh (dp_replicate x dp_shard x cp), and first over tp
// when EP is on with tp > 1.
struct StepCollective {
  const char* purpose = "";
  const char* collective = "";  // as CommEntry::collective
  bool sparse = false;          // on the sparse mesh, else the dense one
  MeshAxis axes[3] = {};        // flattened, outer first (axes of size 1 included)
  int num_axes = 0;
  int64_t group_size = 1;        // product of the axes' sizes
  int64_t stride = 1;            // rank 0's group is {0, stride, ..., (group_size - 1) * stride}
  int64_t bytes = 0;             // per call
  bool embedding_group = false;  // the first and last pp stage only (axes: pp; group_size 2)
};
struct StepCollectiveList {
  StepCollective items[7];
  int size = 0;
};
// --fp8-param-gather under zero1 (precision.h; Megatron's uint8 parameter buffer): the part of
// `dense_elems` / `sparse_elems` that is FP8 GEMM weights (precision.h Fp8GemmGroup), which
// zero1_all_gather_params sends at `bytes_per_element` (precision.h Fp8WeightBytesPerElement)
// instead of param bytes. All zero: every element in param bytes.
struct Fp8ParamGather {
  int64_t dense_elems = 0, sparse_elems = 0;
  double bytes_per_element = 0;
};
StepCollectiveList StepCollectives(const ParallelDims& dims, DpSharding dp_sharding, const TrainingBytes& bytes, int64_t dense_elems,
                                   int64_t sparse_elems, int64_t shared_embedding_elems = 0, const Fp8ParamGather& fp8 = {},
                                   int64_t expert_bias_elems = 0);

// The token counts the expert-bias update all-reduces on a stage of `moe_layers_on_stage` MoE
// layers: moe_layers_on_stage x num_experts for a router with a score-correction bias (ModelSpec
// moe.score_correction_bias: DeepSeek-V3's e_score_correction_bias; Megatron
// --moe-router-enable-expert-bias, torchtitan's load_balance_coeff), else 0. The one rule
// ComputeComm and the layout search read.
int64_t RouterExpertBiasElems(const ModelSpec& model, int64_t moe_layers_on_stage);

// Whether Megatron's embedding group all-reduces the word-embedding gradient every step: the
// megatron convention, pp > 1 (a group of the first and the last stage) and a second copy of the
// embedding on another stage -- tied embeddings (the last stage's lm_head) or MTP modules
// (mtp_layers > 0: the MTP stage builds its own embedding, gpt_model.py `pre_process or
// mtp_process`). Megatron-Core finalize_model_grads.py _get_shared_word_embedding_weight:
// "if model_module.share_embeddings_and_output_weights or getattr(config, 'mtp_num_layers', 0)".
// The one rule ComputeComm (plan, check, simulate) and the layout search's fast path read.
bool EmbeddingGroupAllReduces(const ParallelDims& dims, bool tie_word_embeddings, int64_t mtp_layers);

// Bytes of one parameter all-gather (FSDP's per unit, zero1's per step) of `elems` elements of
// which `fp8_elems` travel in FP8: (elems - fp8_elems) x `param_bytes` + ceil(fp8_elems x
// `fp8_bytes_per_element`) (precision.h Fp8ParamGatherBytesPerElement; the FP8 parameter all-gather).
// Throws dockyard::Error naming `what` when the product overflows int64.
int64_t ParamAllGatherBytes(int64_t elems, int64_t fp8_elems, int64_t param_bytes, double fp8_bytes_per_element, std::string_view what);

// Sequence-parallel TP blocks of one layer (tp > 1): each an all-gather of the T x hidden
// activations before a column-parallel linear and a reduce-scatter after the row-parallel linear
// that closes it. The attention block always; then by layer kind and convention:
//  - a dense layer's MLP: 1;
//  - a MoE layer under torchtitan: 1 (the moe module's PrepareModuleInputOutput: Shard(1) ->
//    Replicate in, Partial -> Shard(1) out; torchtitan/models/moe parallelize);
//  - a MoE layer under megatron: 1 with shared experts (SharedExpertMLP gathers and scatters over
//    the dense tp group), else 0: the router and the token dispatcher take the sequence-sharded
//    tokens, whose tp group is the expert-TP group (Megatron-Core token_dispatcher.py,
//    `tp_group = pg_collection.expt_tp`); with etp > 1 the dispatcher's all-gather of the routed
//    rows is its own entry (etp_dispatch_all_gather).
// Returns 1 + that (0 at tp 1).
int64_t SequenceParallelBlocks(const ModelSpec& model, const ParallelDims& dims, bool moe_layer);

// The sequence-parallel collectives of one such block in the backward pass, by convention:
//  - torchtitan: the forward's mirror, one all-gather (the output's gradient) and one
//    reduce-scatter (the input's gradient); autograd keeps the gathered input.
//  - megatron: the row-parallel linear's dgrad all-gathers the output's gradient; the column-
//    parallel linear all-gathers its input again for the weight gradient (TransformerEngine and
//    Megatron-Core keep the sequence-sharded input, LayerNormLinear's ln_out / the
//    LinearWithGradAccumulationAndAsyncCommunication input) and reduce-scatters the dgrad:
//    two all-gathers and one reduce-scatter.
struct SpBackwardCollectives {
  int64_t all_gathers = 1, reduce_scatters = 1;
};
SpBackwardCollectives SequenceParallelBackward(Convention convention);

// Bytes of one pipeline send (activations forward, their gradients backward): the sequence-
// parallel shard of the micro-batch's hidden states, ceil(tokens / tp) x hidden x act bytes.
int64_t PpSendBytes(const Workload& w, int64_t tp, int64_t hidden_size);

// Elements per token of one layer's K and V on a rank (the ring-attention block width): GQA
// 2 x num_key_value_heads x head_dim / tp; MLA num_attention_heads / tp x (qk_nope + qk_rope + v)
// head dims (the decompressed keys and values).
int64_t CpKvWidth(const ModelSpec& model, int64_t tp);

// Fraction helpers, exposed for tests. `group` lists ranks in ring order.
double RingCrossNodeFraction(const std::vector<int64_t>& group, int64_t gpus_per_node);
double AllToAllCrossNodeFraction(const std::vector<int64_t>& group, int64_t rank, int64_t gpus_per_node);
// RingCrossNodeFraction of the group {0, s, 2s, ..., (n-1)s} (n members, stride s >= 1), in
// O(1): every data-parallel group of rank 0 has this form (mesh.h: row-major strides).
double RingCrossNodeFractionStrided(int64_t n, int64_t stride, int64_t gpus_per_node);

// wire_bytes of an entry before its conversion to int64 (see CommEntry): `calls` calls of
// `bytes_per_call` over n >= 2 ranks; `collective` as in CommEntry.
double CollectiveWireBytes(std::string_view collective, int64_t n, int64_t calls, int64_t bytes_per_call);

}  // namespace dockyard
