// Communication volumes per training step (see comm.h and docs/memory-model.md).
#include "planner/accounting/comm.h"

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <map>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "planner/base/checked_math.h"
#include "planner/base/error.h"
#include "planner/accounting/workload.h"
#include "planner/model/flex_backend_limits.h"
#include "planner/model/precision.h"
#include "planner/model/pipeline_schedule.h"

namespace dockyard {

double RingCrossNodeFraction(const std::vector<int64_t>& group, int64_t gpus_per_node) {
  const size_t n = group.size();
  if (n < 2) return 0.0;
  size_t crossing = 0;
  for (size_t i = 0; i < n; ++i) crossing += group[i] / gpus_per_node != group[(i + 1) % n] / gpus_per_node;
  return static_cast<double>(crossing) / static_cast<double>(n);
}

double AllToAllCrossNodeFraction(const std::vector<int64_t>& group, int64_t rank, int64_t gpus_per_node) {
  if (group.size() < 2) return 0.0;
  size_t remote = 0;
  for (int64_t r : group) remote += r / gpus_per_node != rank / gpus_per_node;
  return static_cast<double>(remote) / static_cast<double>(group.size() - 1);
}

double RingCrossNodeFractionStrided(int64_t n, int64_t stride, int64_t gpus_per_node) {
  if (n < 2) return 0.0;
  // Edges i -> i+1 for i < n-1 cross when floor(i*s/g) changes: every edge when s >= g, else
  // (steps of s < g move at most one node) as often as the last member's node index; the closing
  // edge (n-1)*s -> 0 crosses when the last member is on another node than rank 0.
  const int64_t last_node = (n - 1) * stride / gpus_per_node;
  const int64_t inner = stride >= gpus_per_node ? n - 1 : last_node;
  const int64_t crossing = inner + (last_node > 0 ? 1 : 0);
  return static_cast<double>(crossing) / static_cast<double>(n);
}

double AllGatherDispatchBytes(int64_t ep, double tokens, double hidden, double act_bytes) {
  return static_cast<double>(ep) * tokens * hidden * act_bytes;
}

double CollectiveWireBytes(std::string_view collective, int64_t n, int64_t calls, int64_t bytes_per_call) {
  const double share = static_cast<double>(n - 1) / static_cast<double>(n);
  const double total = static_cast<double>(bytes_per_call) * static_cast<double>(calls);
  if (collective == "all_reduce") return 2.0 * total * share;
  if (collective == "send_recv") return total;
  return total * share;  // all_gather, reduce_scatter, all_to_all
}

int64_t PpSendBytes(const Workload& w, int64_t tp, int64_t h) {
  return CheckedMul(CheckedMul((w.tokens + tp - 1) / tp, h, "pipeline send bytes"), w.act_bytes, "pipeline send bytes");
}

int64_t CpKvWidth(const ModelSpec& m, int64_t tp) {
  const auto& a = m.attention;
  return a.kind == AttentionKind::kGqa ? 2 * a.num_key_value_heads * a.head_dim / tp
                                       : a.num_attention_heads / tp * (a.qk_nope_head_dim + a.qk_rope_head_dim + a.v_head_dim);
}

namespace {

// The inputs that scale a step's volumes, for overflow messages: what to lower, by field and flag.
std::string VolumeInputs(const Plan& plan) {
  const auto& t = plan.training;
  return fmt::format(
      "training.seq_len ({}) x micro_batch_size ({}) tokens per micro-batch, num_microbatches ({}); "
      "lower --seq-len, --micro-batch-size or --num-microbatches",
      t.seq_len, t.micro_batch_size, t.num_microbatches.value_or(plan.dims.pp));
}

class Builder {
 public:
  Builder(const Plan& plan, int64_t rank, CommReport& out) : plan_(plan), rank_(rank), out_(out) {}

  // Adds an entry for `group` (ring order) with `calls` calls of `bytes` each.
  void Add(const std::string& purpose, const std::string& collective, const std::string& mesh, const std::string& axis,
           const std::string& phase, const std::vector<int64_t>& group, int64_t calls, int64_t bytes) {
    const int64_t n = static_cast<int64_t>(group.size());
    if (n < 2 || calls == 0 || bytes == 0) return;
    CommEntry e{purpose, collective, mesh, axis, phase, n, calls, bytes, 0, 0};
    const double wire = CollectiveWireBytes(collective, n, calls, bytes);
    const double frac = collective == "all_to_all" ? AllToAllCrossNodeFraction(group, rank_, out_.gpus_per_node)
                                                   : RingCrossNodeFraction(group, out_.gpus_per_node);
    if (!(wire < 9.0e18)) {
      throw Error(
          fmt::format("{} ({}): communication volume of {} calls x {} bytes per call exceeds 9e18 bytes per step "
                      "({})",
                      purpose, phase, calls, bytes, VolumeInputs(plan_)));
    }
    e.wire_bytes = static_cast<int64_t>(wire);
    e.cross_node_bytes = static_cast<int64_t>(wire * frac);
    out_.total_wire_bytes = CheckedAdd(out_.total_wire_bytes, e.wire_bytes, "total wire bytes");
    out_.total_cross_node_bytes = CheckedAdd(out_.total_cross_node_bytes, e.cross_node_bytes, "total cross-node bytes");
    out_.entries.push_back(std::move(e));
  }

  // The group of rank_ over the flattened `axes` of `mesh` (outer axis first), in ring order.
  std::vector<int64_t> Group(const Mesh& mesh, const std::vector<std::string>& axes) const {
    std::vector<int64_t> group = {rank_};
    for (const auto& name : axes) {
      const int a = mesh.AxisIndex(name);
      if (a < 0 || mesh.axis_size(a) == 1) continue;
      std::vector<int64_t> next;
      for (int64_t r : group) {
        for (int64_t member : mesh.GroupOf(r, a)) next.push_back(member);
      }
      group = std::move(next);
    }
    std::sort(group.begin(), group.end());
    group.erase(std::unique(group.begin(), group.end()), group.end());
    return group;
  }

 private:
  const Plan& plan_;
  int64_t rank_;
  CommReport& out_;
};

std::string Join(const std::vector<std::string>& axes) {
  std::string out;
  for (const auto& a : axes) out += (out.empty() ? "" : "*") + a;
  return out;
}

}  // namespace

int64_t ParamAllGatherBytes(int64_t elems, int64_t fp8_elems, int64_t param_bytes, double fp8_bytes_per_element, std::string_view what) {
  return CheckedAdd(CheckedMul(elems - fp8_elems, param_bytes, what),
                    static_cast<int64_t>(std::ceil(static_cast<double>(fp8_elems) * fp8_bytes_per_element)), what);
}

StepCollectiveList StepCollectives(const ParallelDims& d, DpSharding dp_sharding, const TrainingBytes& tb, int64_t dense_elems,
                                   int64_t sparse_elems, int64_t shared_embedding_elems, const Fp8ParamGather& fp8,
                                   int64_t expert_bias_elems) {
  using A = MeshAxis;
  const bool megatron = d.convention == Convention::kMegatron;
  const int64_t param_b = tb.param, grad_b = tb.grad;
  auto mul = [](int64_t x, int64_t y) { return CheckedMul(x, y, "communication bytes"); };
  StepCollectiveList out;
  auto add = [&](const char* purpose, const char* collective, bool sparse, std::initializer_list<A> axes, int64_t stride, int64_t bytes) {
    StepCollective c;
    c.purpose = purpose;
    c.collective = collective;
    c.sparse = sparse;
    for (A a : axes) {
      c.axes[c.num_axes++] = a;
      c.group_size *= MeshAxisSize(d, a);
    }
    c.stride = stride;
    c.bytes = bytes;
    out.items[out.size++] = c;
  };
  // Groups of rank 0 on row-major meshes (mesh.h): the dense data-parallel axes sit outside tp,
  // the sparse ones outside ep (x etp), dp_replicate outside everything but pp.
  const A dense_shard_axis = megatron ? A::kDp : A::kDpShard;
  const A sparse_axis = megatron ? A::kEdp : A::kEfsdp;
  const int64_t dense_n = MeshAxisSize(d, dense_shard_axis) * d.cp, sparse_n = MeshAxisSize(d, sparse_axis);
  const int64_t dense_stride = d.tp, sparse_stride = d.ep * d.etp, replicate_stride = d.dp_shard * d.cp * d.tp;
  // The replicas' all-reduce of each rank's shard (torchtitan HSDP; Megatron folds replicas into dp).
  auto shard_bytes = [&] { return mul((dense_elems + dense_n - 1) / dense_n + (sparse_elems + sparse_n - 1) / sparse_n, grad_b); };
  switch (dp_sharding) {
    case DpSharding::kFsdp:
      if (megatron) break;
      add("hsdp_all_reduce_grads", "all_reduce", false, {A::kDpReplicate}, replicate_stride, shard_bytes());
      break;
    case DpSharding::kZero1:
      add("zero1_reduce_scatter_grads", "reduce_scatter", false, {dense_shard_axis, A::kCp}, dense_stride, mul(dense_elems, grad_b));
      add("zero1_all_gather_params", "all_gather", false, {dense_shard_axis, A::kCp}, dense_stride,
          ParamAllGatherBytes(dense_elems, fp8.dense_elems, param_b, fp8.bytes_per_element, "communication bytes"));
      add("zero1_reduce_scatter_grads", "reduce_scatter", true, {sparse_axis}, sparse_stride, mul(sparse_elems, grad_b));
      add("zero1_all_gather_params", "all_gather", true, {sparse_axis}, sparse_stride,
          ParamAllGatherBytes(sparse_elems, fp8.sparse_elems, param_b, fp8.bytes_per_element, "communication bytes"));
      if (!megatron) add("replica_all_reduce_grads", "all_reduce", false, {A::kDpReplicate}, replicate_stride, shard_bytes());
      break;
    case DpSharding::kDdp:
      if (megatron) {
        add("ddp_all_reduce_grads", "all_reduce", false, {A::kDp, A::kCp}, dense_stride, mul(dense_elems, grad_b));
        add("ddp_all_reduce_grads", "all_reduce", true, {A::kEdp}, sparse_stride, mul(sparse_elems, grad_b));
      } else {
        add("ddp_all_reduce_grads", "all_reduce", false, {A::kDpReplicate, A::kDpShard, A::kCp}, dense_stride, mul(dense_elems, grad_b));
        add("ddp_all_reduce_grads", "all_reduce", true, {A::kDpReplicate, A::kEfsdp}, sparse_stride, mul(sparse_elems, grad_b));
      }
      break;
  }
  if (megatron && d.pp > 1 && shared_embedding_elems > 0) {
    add("embedding_all_reduce_grads", "all_reduce", false, {A::kPp}, (d.pp - 1) * d.stage_size(), mul(shared_embedding_elems, grad_b));
    out.items[out.size - 1].group_size = 2;
    out.items[out.size - 1].embedding_group = true;
  }
  if (expert_bias_elems > 0 && megatron) {
    // The TP x DP x CP group of rank 0: the dense mesh's innermost axes (pp outermost).
    add("router_expert_bias_all_reduce", "all_reduce", false, {A::kDp, A::kCp, A::kTp}, 1, mul(expert_bias_elems, 4));
  } else if (expert_bias_elems > 0) {
    if (d.ep > 1 && d.tp > 1) add("router_expert_bias_all_reduce", "all_reduce", false, {A::kTp}, 1, mul(expert_bias_elems, 4));
    add("router_expert_bias_all_reduce", "all_reduce", false, {A::kDpReplicate, A::kDpShard, A::kCp}, d.tp, mul(expert_bias_elems, 4));
  }
  return out;
}

int64_t RouterExpertBiasElems(const ModelSpec& m, int64_t moe_layers_on_stage) {
  // Both conventions update the bias; StepCollectives names each one's groups.
  if (!m.moe.score_correction_bias) return 0;
  return CheckedMul(moe_layers_on_stage, m.moe.num_experts, "router expert-bias elements");
}

bool EmbeddingGroupAllReduces(const ParallelDims& d, bool tie_word_embeddings, int64_t mtp_layers) {
  return d.convention == Convention::kMegatron && d.pp > 1 && (tie_word_embeddings || mtp_layers > 0);
}

namespace {

// What every step of ComputeComm reads: the plan, the rank and its stage, the step's sizes.
struct CommStep {
  const Plan& plan;
  int64_t rank = 0;
  const Workload& w;
  int64_t stage = 0;  // the rank's pipeline stage
  bool megatron = false;
  // Micro-batches per step: num_microbatches per pipeline schedule (M), times torchtitan's outer
  // gradient-accumulation steps (A; pipeline_schedule.h RunSettings).
  int64_t A = 1;
  int64_t M = 1;
  int64_t param_b = 0, grad_b = 0;  // bytes per parameter and gradient element
  std::string volume_what;          // what an overflow names
  int64_t mul(int64_t x, int64_t y) const { return CheckedMul(x, y, volume_what); }
};

// The data-parallel axes of each mesh, as the convention names them.
struct DpAxes {
  std::vector<std::string> dense, sparse;
};

// Model-parallel elements of the rank's stage: per mesh, and per FSDP unit (layer, on the sparse
// mesh; embedding -1, root -2).
struct DpUnits {
  std::map<std::pair<int64_t, bool>, int64_t> units;
  std::map<std::pair<int64_t, bool>, int64_t> fp8_units;  // --fp8-param-gather: their FP8 GEMM weights (precision.h)
  int64_t dense_elems = 0, sparse_elems = 0;
  Fp8ParamGather fp8;  // --fp8-param-gather: the FP8 GEMM weights of each mesh
};

DpUnits CollectDpUnits(const CommStep& s) {
  const Plan& plan = s.plan;
  DpUnits out;
  for (size_t i = 0; i < plan.inventory.params.size(); ++i) {
    if (plan.placements[i].stage != s.stage) continue;
    const auto& p = plan.inventory.params[i];
    const int64_t n = ModelParallelNumel(plan, i, s.rank);
    (plan.placements[i].sparse_mesh ? out.sparse_elems : out.dense_elems) += n;
    const auto unit = p.layer >= 0 ? std::make_pair(p.layer, plan.placements[i].sparse_mesh)
                                   : std::make_pair<int64_t, bool>(p.role == Role::kEmbedding ? -1 : -2, false);
    out.units[unit] += n;
    if (plan.training.fp8_param_gather && Fp8GemmGroup(RoleGroup(p.role))) {
      out.fp8_units[unit] += n;
      (plan.placements[i].sparse_mesh ? out.fp8.sparse_elems : out.fp8.dense_elems) += n;
    }
  }
  out.fp8.bytes_per_element =
      plan.training.fp8_param_gather
          ? Fp8ParamGatherBytesPerElement(plan.training, static_cast<double>(DtypeBytes(plan.training.param_dtype, "param_dtype")))
          : 0.0;
  return out;
}

// FSDP (torchtitan): all-gathers and reduce-scatters per unit and accumulation step from the
// reshard-after-forward policy and pp (pipeline_schedule.h FsdpCallsPerStep).
void AddFsdp(const CommStep& s, const DpUnits& u, const DpAxes& axes, Builder& b) {
  const auto& t = s.plan.training;
  const auto& d = s.plan.dims;
  const auto dense_group = b.Group(s.plan.meshes.dense, axes.dense);
  const auto sparse_group = b.Group(s.plan.meshes.sparse, axes.sparse);
  if (*t.dp_sharding != DpSharding::kFsdp) return;
  const FsdpCalls calls = FsdpCallsPerStep(t.run.reshard_after_forward, d.pp, t.num_microbatches.value_or(d.pp));
  for (const auto& [unit, elems] : u.units) {
    const bool experts = unit.second;
    const auto& group = experts ? sparse_group : dense_group;
    const std::string mesh = experts ? "sparse" : "dense";
    const std::string axis = Join(experts ? axes.sparse : axes.dense);
    // --fp8-param-gather: the unit's FP8 GEMM weights in FP8 (precision.h Fp8ParamGatherBytesPerElement).
    const auto fp8 = u.fp8_units.find(unit);
    const int64_t fp8_elems = fp8 == u.fp8_units.end() ? 0 : fp8->second;
    const int64_t gathered = ParamAllGatherBytes(elems, fp8_elems, s.param_b, Fp8ParamGatherBytesPerElement(t, static_cast<double>(s.param_b)), s.volume_what);
    b.Add("fsdp_all_gather_forward", "all_gather", mesh, axis, "forward", group, s.mul(calls.forward_all_gathers, s.A), gathered);
    b.Add("fsdp_all_gather_backward", "all_gather", mesh, axis, "backward", group, s.mul(calls.backward_all_gathers, s.A), gathered);
    b.Add("fsdp_reduce_scatter_grads", "reduce_scatter", mesh, axis, "backward", group, s.mul(calls.reduce_scatters, s.A),
          s.mul(elems, s.grad_b));
  }
}

// The word embedding's gradient elements a first- or last-stage rank all-reduces in the
// embedding group (StepCollectives, EmbeddingGroupAllReduces). Both members hold the same
// vocab-parallel [vocab, hidden] tensor -- the embedding on the first stage; the tied lm_head copy
// or the MTP modules' embedding (mtp.h MtpExtraParams, placed like the embedding) on the last --
// so each rank's share is the embedding's model-parallel elements at its own tp coordinate.
int64_t SharedEmbeddingElems(const CommStep& s) {
  const Plan& plan = s.plan;
  const auto& d = plan.dims;
  if (!EmbeddingGroupAllReduces(d, plan.model.tie_word_embeddings, plan.training.mtp_layers)) return 0;
  if (s.stage != 0 && s.stage != d.pp - 1) return 0;
  int64_t elems = 0;
  for (size_t i = 0; i < plan.inventory.params.size(); ++i) {
    const auto& p = plan.inventory.params[i];
    if (p.role == Role::kEmbedding && p.tied_to.empty()) elems += ModelParallelNumel(plan, i, s.rank);
  }
  return elems;
}

// The once-per-step collectives (StepCollectives) on this rank's groups.
void AddStepCollectives(const CommStep& s, const DpUnits& u, int64_t stage_moe_layers, CommReport& out, Builder& b) {
  const auto& d = s.plan.dims;
  const auto& t = s.plan.training;
  const int64_t rank = s.rank;
  const StepCollectiveList step = StepCollectives(d, *t.dp_sharding, TrainingBytesOf(t), u.dense_elems, u.sparse_elems, SharedEmbeddingElems(s),
                                                  u.fp8, RouterExpertBiasElems(s.plan.model, stage_moe_layers));
  for (int i = 0; i < step.size; ++i) {
    const StepCollective& c = step.items[i];
    std::vector<std::string> axes;
    for (int j = 0; j < c.num_axes; ++j) axes.push_back(MeshAxisName(c.axes[j]));
    const Mesh& mesh = c.sparse ? s.plan.meshes.sparse : s.plan.meshes.dense;
    std::vector<int64_t> group;
    if (c.embedding_group) {
      const int64_t other = s.stage == 0 ? rank + c.stride : rank - c.stride;
      group = s.stage == 0 ? std::vector<int64_t>{rank, other} : std::vector<int64_t>{other, rank};
    } else {
      group = b.Group(mesh, axes);
    }
    const size_t before = out.entries.size();
    b.Add(c.purpose, c.collective, c.sparse ? "sparse" : "dense", Join(axes), "step", group, 1, c.bytes);
    if (out.entries.size() > before) out.entries.back().stride = c.stride;
  }
}

// Layers of the rank's stage, and how many of them are MoE layers.
struct StageLayers {
  int64_t layers = 0, moe_layers = 0;
};

StageLayers CountStageLayers(const CommStep& s) {
  const auto& m = s.plan.model;
  StageLayers out;
  for (int64_t l = 0; l < m.num_hidden_layers; ++l) {
    if (s.plan.layer_stage[l] != s.stage) continue;
    ++out.layers;
    out.moe_layers += m.moe_layers[l] ? 1 : 0;
  }
  return out;
}

// Tensor parallelism with sequence parallelism: per block of the stage's layers
// (SequenceParallelBlocks), an all-gather of the full sequence before it and a reduce-scatter
// after it; the backward's by convention (SequenceParallelBackward).
void AddTensorParallel(const CommStep& s, const StageLayers& layers, Builder& b) {
  const auto& m = s.plan.model;
  if (s.plan.dims.tp <= 1) return;
  const int64_t blocks = (layers.layers - layers.moe_layers) * SequenceParallelBlocks(m, s.plan.dims, false) +
                         layers.moe_layers * SequenceParallelBlocks(m, s.plan.dims, true);
  const int64_t M = s.M;
  const auto tp_group = b.Group(s.plan.meshes.dense, {"tp"});
  const int64_t tp_bytes = s.mul(s.mul(s.w.tokens, m.hidden_size), s.w.act_bytes);
  const SpBackwardCollectives bwd = SequenceParallelBackward(s.plan.dims.convention);
  b.Add("tp_sequence_parallel_all_gather", "all_gather", "dense", "tp", "forward", tp_group, s.mul(blocks, M), tp_bytes);
  b.Add("tp_sequence_parallel_reduce_scatter", "reduce_scatter", "dense", "tp", "forward", tp_group, s.mul(blocks, M), tp_bytes);
  b.Add("tp_sequence_parallel_all_gather", "all_gather", "dense", "tp", "backward", tp_group, s.mul(s.mul(blocks, bwd.all_gathers), M),
        tp_bytes);
  b.Add("tp_sequence_parallel_reduce_scatter", "reduce_scatter", "dense", "tp", "backward", tp_group,
        s.mul(s.mul(blocks, bwd.reduce_scatters), M), tp_bytes);
}

// Context parallelism (ring attention): each layer passes its K and V blocks cp - 1 times in
// forward; backward passes K, V and their gradients.
void AddContextParallel(const CommStep& s, int64_t layers, Builder& b) {
  const auto& d = s.plan.dims;
  if (d.cp <= 1) return;
  const int64_t kv_width = CpKvWidth(s.plan.model, d.tp);
  const int64_t kv_bytes = s.mul(s.mul(s.w.tokens, kv_width), s.w.act_bytes);
  const auto cp_group = b.Group(s.plan.meshes.dense, {"cp"});
  b.Add("cp_ring_attention_kv", "send_recv", "dense", "cp", "forward", cp_group, s.mul(s.mul(layers, d.cp - 1), s.M), kv_bytes);
  b.Add("cp_ring_attention_kv_and_grads", "send_recv", "dense", "cp", "backward", cp_group, s.mul(s.mul(layers, d.cp - 1), s.M),
        s.mul(kv_bytes, 2));
}

// Megatron-Core's dispatcher all-gathers the rows that reached a rank over the expert-TP group
// after the EP all-to-all (and reduce-scatters them before the combine), every MoE layer and
// micro-batch; backward mirrors it. The all-gather output is the T_r * top_k rows the experts
// compute (workload.h).
void AddExpertTpGather(const CommStep& s, int64_t moe_layers, Builder& b) {
  if (!(s.megatron && s.plan.dims.etp > 1 && moe_layers > 0)) return;
  const int64_t gathered_bytes = s.mul(s.mul(s.w.mean_received_rows, s.plan.model.hidden_size), s.w.act_bytes);
  const int64_t calls = s.mul(moe_layers, s.M);
  const auto etp_group = b.Group(s.plan.meshes.sparse, {"etp"});
  b.Add("etp_dispatch_all_gather", "all_gather", "sparse", "etp", "forward", etp_group, calls, gathered_bytes);
  b.Add("etp_combine_reduce_scatter", "reduce_scatter", "sparse", "etp", "forward", etp_group, calls, gathered_bytes);
  b.Add("etp_dispatch_grad_reduce_scatter", "reduce_scatter", "sparse", "etp", "backward", etp_group, calls, gathered_bytes);
  b.Add("etp_combine_grad_all_gather", "all_gather", "sparse", "etp", "backward", etp_group, calls, gathered_bytes);
}

// The EP group's dispatch and combine sizes: the rows this rank sends (dispatch_tokens * top_k,
// = T_r * top_k but under megatron with etp > 1), the token counts, and calls per step.
struct EpVolumes {
  std::vector<int64_t> ep_group;
  int64_t rows_bytes = 0, counts_bytes = 0, calls = 0;
};

// all_to_all dispatcher: token counts, then dispatch and combine in forward and backward.
void AddAllToAllDispatch(const CommStep& s, const EpVolumes& v, Builder& b) {
  const auto& t = s.plan.training;
  const int64_t h = s.plan.model.hidden_size;
  b.Add("ep_token_counts", "all_to_all", "sparse", "ep", "forward", v.ep_group, v.calls, v.counts_bytes);
  // --fp8-dispatch: the forward dispatch sends FP8 rows (precision.h DispatchRowBytes); the
  // combine and the backward move BF16 gradients.
  const int64_t fp8_rows_bytes =
      s.mul(s.mul(s.w.dispatch_tokens, s.plan.model.moe.top_k),
            static_cast<int64_t>(DispatchRowBytes(static_cast<double>(h), static_cast<double>(s.w.act_bytes), true)));
  for (const char* phase : {"forward", "backward"}) {
    const bool fp8 = t.fp8_dispatch && std::string(phase) == "forward";
    b.Add("ep_dispatch", "all_to_all", "sparse", "ep", phase, v.ep_group, v.calls, fp8 ? fp8_rows_bytes : v.rows_bytes);
    b.Add("ep_combine", "all_to_all", "sparse", "ep", phase, v.ep_group, v.calls, v.rows_bytes);
  }
}

// Megatron MoEAllGatherTokenDispatcher: every EP rank all-gathers the group's tokens and
// keeps its experts' rows; the combine is the reduce-scatter of the same buffer; backward
// swaps them (as cost/deepep.h AllGatherDispatchUs times them).
void AddAllGatherDispatch(const CommStep& s, const EpVolumes& v, Builder& b) {
  const double gathered = AllGatherDispatchBytes(s.plan.dims.ep, static_cast<double>(s.w.dispatch_tokens),
                                                 static_cast<double>(s.plan.model.hidden_size), static_cast<double>(s.w.act_bytes));
  if (!(gathered < 9.0e18))
    throw Error(fmt::format("allgather dispatch buffer of {} bytes exceeds 9e18 ({})", gathered, VolumeInputs(s.plan)));
  const int64_t bytes = static_cast<int64_t>(gathered);
  b.Add("allgather_dispatch_all_gather", "all_gather", "sparse", "ep", "forward", v.ep_group, v.calls, bytes);
  b.Add("allgather_combine_reduce_scatter", "reduce_scatter", "sparse", "ep", "forward", v.ep_group, v.calls, bytes);
  b.Add("allgather_dispatch_grad_reduce_scatter", "reduce_scatter", "sparse", "ep", "backward", v.ep_group, v.calls, bytes);
  b.Add("allgather_combine_grad_all_gather", "all_gather", "sparse", "ep", "backward", v.ep_group, v.calls, bytes);
}

// Deredundency (hyper_parallel DeredundencyTokenDispatcher): ep = oep x iep, iep fastest. All-gather of the routed rows over
// oep, all-to-all of the selected rows (T_r * top_k on average) over iep, reduce-scatter
// of the oep-sized whiteboard on combine.
void AddDeredundencyDispatch(const CommStep& s, const EpVolumes& v, CommReport& out, Builder& b) {
  const auto& d = s.plan.dims;
  const int64_t oep = DeredundencyOep(s.plan);
  if (d.ep % oep != 0) throw Error(fmt::format("oep ({}) must divide ep ({}) for the deredundency dispatcher", oep, d.ep));
  out.oep = oep;
  out.iep = d.ep / oep;
  // The ep group in order; iep groups are consecutive runs of iep members.
  const auto& ep_members = v.ep_group;
  int64_t my_index = 0;
  for (size_t i = 0; i < ep_members.size(); ++i) {
    if (ep_members[i] == s.rank) my_index = static_cast<int64_t>(i);
  }
  std::vector<int64_t> iep_group, oep_group;
  const int64_t outer = my_index / out.iep, inner = my_index % out.iep;
  for (int64_t j = 0; j < out.iep; ++j) iep_group.push_back(ep_members[outer * out.iep + j]);
  for (int64_t o = 0; o < oep; ++o) oep_group.push_back(ep_members[o * out.iep + inner]);
  const int64_t whiteboard = s.mul(oep, v.rows_bytes);
  for (const char* phase : {"forward", "backward"}) {
    const bool fwd = std::string(phase) == "forward";
    // Forward: all-gather on dispatch, reduce-scatter on combine; backward swaps them.
    b.Add(fwd ? "deredundency_dispatch_all_gather" : "deredundency_dispatch_grad_reduce_scatter", fwd ? "all_gather" : "reduce_scatter",
          "deredundency", "oep", phase, oep_group, v.calls, whiteboard);
    b.Add("deredundency_dispatch", "all_to_all", "deredundency", "iep", phase, iep_group, v.calls, v.rows_bytes);
    b.Add("deredundency_combine", "all_to_all", "deredundency", "iep", phase, iep_group, v.calls, v.rows_bytes);
    b.Add(fwd ? "deredundency_combine_reduce_scatter" : "deredundency_combine_grad_all_gather", fwd ? "reduce_scatter" : "all_gather",
          "deredundency", "oep", phase, oep_group, v.calls, whiteboard);
  }
  b.Add("deredundency_token_counts", "all_gather", "deredundency", "oep", "forward", oep_group, v.calls, v.counts_bytes * oep);
}

// Expert parallelism: per MoE layer and micro-batch, token dispatch and combine, in forward and
// again (as gradients) in backward, by the plan's dispatcher. Send buffers hold T_r * top_k rows.
void AddExpertParallel(const CommStep& s, int64_t moe_layers, CommReport& out, Builder& b) {
  const auto& m = s.plan.model;
  const auto& t = s.plan.training;
  if (!(s.plan.dims.ep > 1 && moe_layers > 0)) return;
  EpVolumes v;
  v.rows_bytes = s.mul(s.mul(s.mul(s.w.dispatch_tokens, m.moe.top_k), m.hidden_size), s.w.act_bytes);
  v.counts_bytes = s.mul(m.moe.num_experts, 8);
  v.calls = s.mul(moe_layers, s.M);
  v.ep_group = b.Group(s.plan.meshes.sparse, {"ep"});
  if (t.dispatcher == Dispatcher::kAllToAll) {
    AddAllToAllDispatch(s, v, b);
  } else if (t.dispatcher == Dispatcher::kAllGather) {
    AddAllGatherDispatch(s, v, b);
  } else if (t.dispatcher == Dispatcher::kDeepEp) {
    // The link-level dispatch and combine need the routing sample's per-token counts: the sim
    // layer adds them (planner/cost/dispatch_traffic.h AddDispatcherTraffic).
  } else {
    AddDeredundencyDispatch(s, v, out, b);
  }
}

// Pipeline parallelism: activations to the next stage in forward, gradients back in backward.
void AddPipeline(const CommStep& s, Builder& b) {
  const auto& d = s.plan.dims;
  if (d.pp <= 1) return;
  const auto pp_group = b.Group(s.plan.meshes.dense, {"pp"});
  const int64_t bytes = PpSendBytes(s.w, d.tp, s.plan.model.hidden_size);
  // Interleaved 1F1B (--vpp): stage s holds virtual stages s + c * pp, c < vpp, and each sends its
  // activations to the next virtual stage and its gradients to the previous one. Inside the ring a
  // micro-batch crosses each boundary once per chunk (M * vpp); the last stage's first vpp - 1
  // chunks send on to stage 0's next chunk, and stage 0's last vpp - 1 chunks send their gradients
  // back to the last stage (Megatron's interleaved schedule wraps around the pp ring).
  const int64_t vpp = s.plan.training.run.vpp;
  const int64_t sends = s.mul(s.M, vpp), wrap = s.mul(s.M, vpp - 1);
  if (s.stage + 1 < d.pp) {
    b.Add("pp_send_activations", "send_recv", "dense", "pp", "forward", {s.rank, pp_group[s.stage + 1]}, sends, bytes);
  } else if (vpp > 1) {
    b.Add("pp_send_activations", "send_recv", "dense", "pp", "forward", {s.rank, pp_group[0]}, wrap, bytes);
  }
  if (s.stage > 0) {
    b.Add("pp_send_grads", "send_recv", "dense", "pp", "backward", {s.rank, pp_group[s.stage - 1]}, sends, bytes);
  } else if (vpp > 1) {
    b.Add("pp_send_grads", "send_recv", "dense", "pp", "backward", {s.rank, pp_group[d.pp - 1]}, wrap, bytes);
  }
}

}  // namespace

int64_t SequenceParallelBlocks(const ModelSpec& model, const ParallelDims& dims, bool moe_layer) {
  if (dims.tp <= 1) return 0;
  if (!moe_layer) return 2;
  if (dims.convention != Convention::kMegatron) return 2;
  return model.moe.num_shared_experts > 0 ? 2 : 1;
}

SpBackwardCollectives SequenceParallelBackward(Convention convention) {
  SpBackwardCollectives c;
  if (convention == Convention::kMegatron) c.all_gathers = 2;
  return c;
}

CommReport ComputeComm(const Plan& plan, int64_t rank) {
  const auto& d = plan.dims;
  const auto& t = plan.training;
  const Workload w = ComputeWorkload(plan);
  CommReport out;
  out.rank = rank;
  out.gpus_per_node = plan.machine.gpus_per_node;
  out.dispatcher = t.dispatcher;
  out.flex_backend = FlexBackendOf(t);
  Builder b(plan, rank, out);
  CommStep s{plan, rank, w, plan.meshes.dense.Coord(rank, 0), d.convention == Convention::kMegatron, 1, 1, 0, 0, {}};
  s.A = t.run.grad_accumulation_steps;
  s.M = CheckedMul(t.num_microbatches.value_or(d.pp), s.A, "micro-batches per step");
  s.param_b = DtypeBytes(t.param_dtype, "param_dtype");
  s.grad_b = DtypeBytes(t.grad_dtype, "grad_dtype");
  s.volume_what = "communication bytes (" + VolumeInputs(plan) + ")";

  // Data parallelism: per FSDP unit, then the once-per-step collectives.
  const DpAxes dp_axes{s.megatron ? std::vector<std::string>{"dp", "cp"} : std::vector<std::string>{"dp_shard", "cp"},
                       {s.megatron ? "edp" : "efsdp"}};
  const DpUnits units = CollectDpUnits(s);
  out.dense_elems = units.dense_elems;
  out.sparse_elems = units.sparse_elems;
  AddFsdp(s, units, dp_axes, b);
  const StageLayers layers = CountStageLayers(s);
  AddStepCollectives(s, units, layers.moe_layers, out, b);

  // Per layer of this stage: tensor, context and expert parallelism.
  AddTensorParallel(s, layers, b);
  AddContextParallel(s, layers.layers, b);
  AddExpertTpGather(s, layers.moe_layers, b);
  out.moe_calls = s.mul(layers.moe_layers, s.M);
  AddExpertParallel(s, layers.moe_layers, out, b);
  AddPipeline(s, b);
  return out;
}

}  // namespace dockyard
