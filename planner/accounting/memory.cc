// Per-rank memory (see memory.h and docs/memory-model.md).
#include "planner/accounting/memory.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "planner/accounting/comm.h"
#include "planner/base/checked_math.h"
#include "planner/base/error.h"
#include "planner/model/mtp.h"
#include "planner/model/precision.h"
#include "planner/model/pipeline_schedule.h"

namespace dockyard {
namespace {

bool OnSparseMesh(const Plan& plan, size_t i) {
  return plan.placements[i].sparse_mesh;
}

int64_t Ceil(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

// Narrows a 128-bit byte count for a report, naming what overflowed.
int64_t Narrow(WideInt v, const char* what) {
  if (v > static_cast<WideInt>(INT64_MAX)) throw Error(fmt::format("{} overflow a signed 64-bit integer", what));
  return static_cast<int64_t>(v);
}

// The static memory (params, grads, optimizer, per role; bytes) of two ranks together: DualPipe's
// rank and the rank holding its mirror stage.
MemoryBreakdown AddStaticMemory(MemoryBreakdown m, const MemoryBreakdown& other) {
  m.params_bytes = CheckedAdd(m.params_bytes, other.params_bytes, "params bytes");
  m.grads_bytes = CheckedAdd(m.grads_bytes, other.grads_bytes, "grads bytes");
  m.optimizer_bytes = CheckedAdd(m.optimizer_bytes, other.optimizer_bytes, "optimizer bytes");
  m.optimizer_elems = CheckedAdd(m.optimizer_elems, other.optimizer_elems, "optimizer elements");
  for (const auto& [k, v] : other.params_by_role) m.params_by_role[k] = CheckedAdd(m.params_by_role[k], v, "params bytes");
  for (const auto& [k, v] : other.grads_by_role) m.grads_by_role[k] = CheckedAdd(m.grads_by_role[k], v, "grads bytes");
  for (const auto& [k, v] : other.optimizer_by_role) m.optimizer_by_role[k] = CheckedAdd(m.optimizer_by_role[k], v, "optimizer bytes");
  return m;
}

// Local elements of `rank` per role group (keyed by the group's literal) and mesh: group -> (dense, sparse).
using GroupElems = std::map<const char*, std::pair<int64_t, int64_t>>;

// The local elements of `rank` of the parameters of `stage`, per role group and mesh, without
// building strings per parameter: this runs for every rank of the world.
GroupElems LocalElemsByGroup(const Plan& plan, int64_t rank, int64_t stage) {
  GroupElems elems;
  for (size_t i = 0; i < plan.inventory.params.size(); ++i) {
    if (plan.placements[i].stage != stage) continue;
    const auto& p = plan.inventory.params[i];
    auto& e = elems[RoleGroup(p.role)];
    int64_t& n = OnSparseMesh(plan, i) ? e.second : e.first;
    n = CheckedAdd(n, LocalNumelOnRank(p, plan.placements[i], plan.MeshOf(i), rank), "local elements");
  }
  return elems;
}

// The local elements of `rank` of all mtp_layers MTP modules (mtp.h): every tensor per mesh
// (dense, sparse), and their FP8 GEMM weights (Fp8GemmGroup of their roles) in all and per mesh.
struct MtpElems {
  std::pair<int64_t, int64_t> all = {0, 0};
  int64_t fp8 = 0;
  std::pair<int64_t, int64_t> fp8_by_mesh = {0, 0};
};

// MTP modules (opt-in, mtp.h) on the last stage: each a copy of the last decoder layer, sharded
// like it, plus eh_proj, its norms and (pp > 1) the word embedding, placed by the same policy
// (TP, and FSDP over the data-parallel axes): `rank`'s elements of all of them.
MtpElems MtpElemsOnRank(const Plan& plan, int64_t rank) {
  MtpElems out;
  ForEachMtpParam(plan, [&](const ParamInfo& p, const ParamPlacement& pl, const Mesh& mesh) {
    const int64_t local = LocalNumelOnRank(p, pl, mesh, rank);
    int64_t& n = pl.sparse_mesh ? out.all.second : out.all.first;
    n = CheckedAdd(n, local, "MTP elements");
    if (Fp8GemmGroup(RoleGroup(p.role))) {
      out.fp8 = CheckedAdd(out.fp8, local, "MTP elements");
      int64_t& f = pl.sparse_mesh ? out.fp8_by_mesh.second : out.fp8_by_mesh.first;
      f = CheckedAdd(f, local, "MTP elements");
    }
  });
  const int64_t k = plan.training.mtp_layers;
  out.all = {CheckedMul(out.all.first, k, "MTP elements"), CheckedMul(out.all.second, k, "MTP elements")};
  out.fp8 = CheckedMul(out.fp8, k, "MTP elements");
  out.fp8_by_mesh = {CheckedMul(out.fp8_by_mesh.first, k, "MTP elements"), CheckedMul(out.fp8_by_mesh.second, k, "MTP elements")};
  return out;
}

// The params, grads and optimizer bytes of role group `group` holding elements `e` (dense,
// sparse) on a rank: StaticBytesOf at `tb`; with `fp8_params` (--fp8-param-gather under the
// distributed optimizer, workload.h Fp8ModelParams) the FP8 GEMM weights at Fp8ModelParamBytes
// (their FP8 data is counted with the FP8 weight copies), of the "mtp" group its FP8 GEMM
// weights `mtp` only.
StaticBytes GroupStaticBytes(const Plan& plan, const TrainingBytes& tb, bool fp8_params, const char* group,
                             const std::pair<int64_t, int64_t>& e, const MtpElems& mtp) {
  const DpSharding sharding = *plan.training.dp_sharding;
  if (fp8_params && std::string(group) == "mtp") {  // the MTP modules' GEMM weights apart from the rest
    const StaticBytes rest = StaticBytesOf(e.first - mtp.fp8_by_mesh.first, e.second - mtp.fp8_by_mesh.second, plan.dims, sharding, tb);
    const StaticBytes fp8 = StaticBytesOf(mtp.fp8_by_mesh.first, mtp.fp8_by_mesh.second, plan.dims, sharding, Fp8ModelParamBytes(tb));
    return {rest.params + fp8.params, rest.grads + fp8.grads, rest.optimizer + fp8.optimizer, rest.shard_elems + fp8.shard_elems};
  }
  return GroupStaticBytesOf(group, e.first, e.second, plan.dims, sharding, tb, fp8_params);
}

}  // namespace

MemoryBreakdown StaticMemoryOnRank(const Plan& plan, int64_t rank, bool with_mirror) {
  const int64_t stage = plan.meshes.dense.Coord(rank, 0);
  if (with_mirror && IsDualPipe(plan.training.run)) {
    const int64_t mirror = rank + (DualPipeMirrorStage(plan.dims.pp, stage) - stage) * plan.dims.stage_size();
    MemoryBreakdown m = StaticMemoryOnRank(plan, rank, false);
    return AddStaticMemory(std::move(m), StaticMemoryOnRank(plan, mirror, false));
  }
  GroupElems elems = LocalElemsByGroup(plan, rank, stage);
  // MTP modules (opt-in, mtp.h) on the last stage, role group "mtp". The modules' FP8 GEMM weights
  // are counted apart for the FP8 weight copies below.
  MtpElems mtp;
  if (plan.training.mtp_layers > 0 && stage == plan.mtp_stage) {
    mtp = MtpElemsOnRank(plan, rank);
    elems["mtp"] = mtp.all;
  }
  MemoryBreakdown m;
  WideInt params = 0, grads = 0, opt = 0, opt_elems = 0;
  const TrainingBytes tb = TrainingBytesOf(plan.training);
  const bool fp8_params = Fp8ModelParams(plan.training);
  for (const auto& [group, e] : elems) {
    const StaticBytes b = GroupStaticBytes(plan, tb, fp8_params, group, e, mtp);
    m.params_by_role[group] = Narrow(b.params, "params bytes");
    m.grads_by_role[group] = Narrow(b.grads, "grads bytes");
    if (b.optimizer) m.optimizer_by_role[group] = Narrow(b.optimizer, "optimizer bytes");
    params += b.params;
    grads += b.grads;
    opt += b.optimizer;
    opt_elems += b.shard_elems;
  }
  // FP8 weight copies (precision.h), kept by TransformerEngine only (workload.h
  // Fp8KeepsQuantizedTensors): the GEMM weights of attention and the MLPs.
  if (const double fp8 = Fp8WeightCopyPerElement(plan.training, plan.dims.convention); fp8 > 0) {
    WideInt copies = 0;
    for (const auto& [group, e] : elems) copies += Fp8WeightCopyBytes(group, e.first + e.second, fp8);
    // The MTP modules' GEMM weights: their decoder layer's attention and MLP, and eh_proj.
    if (mtp.fp8 > 0) copies += static_cast<WideInt>(static_cast<double>(mtp.fp8) * fp8 + 0.5);
    m.params_by_role["fp8_weights"] = Narrow(copies, "FP8 weight copy bytes");
    params += copies;
  }
  m.params_bytes = Narrow(params, "params bytes");
  m.grads_bytes = Narrow(grads, "grads bytes");
  m.optimizer_bytes = Narrow(opt, "optimizer bytes");
  m.optimizer_elems = Narrow(opt_elems, "optimizer elements");
  return m;
}

double Fp8WeightCopyPerElement(const TrainingConfig& training, Convention convention) {
  return Fp8KeepsQuantizedTensors(training, convention) ? Fp8WeightCopyBytesPerElement(training) : 0.0;
}

WideInt Fp8WeightCopyBytes(std::string_view group, WideInt elems, double per_element) {
  if (per_element <= 0 || !Fp8GemmGroup(group)) return 0;
  return static_cast<WideInt>(static_cast<double>(elems) * per_element + 0.5);
}

LayerActivationBytes LayerActivations(const ModelSpec& m, Recompute rc, const Workload& w, bool moe_layer) {
  return LayerActivations(m, rc == Recompute::kSelective ? DefaultSelectiveSet() : RecomputeSet{}, w, moe_layer);
}

LayerActivationBytes LayerActivations(const ModelSpec& m, const RecomputeSet& rs, const Workload& w, bool moe_layer) {
  const auto& a = m.attention;
  const bool norms = rs.layernorm;  // norm outputs recomputed
  const int64_t ab = w.act_bytes, t = w.tp_shards, T = w.tokens, h = m.hidden_size;
  const int64_t ts = Ceil(T, t);  // sequence-parallel shard of the residual stream
  // Terms are products of at most four factors bounded by 2^53 (rows) or 2^41 (widths): they are
  // formed in 128 bits and narrowed, with a check, when stored.
  using Wide = __int128;
  auto mul = [](Wide x, Wide y) { return x * y; };
  auto narrow = [&](Wide v) {
    if (v > static_cast<Wide>(INT64_MAX)) {
      throw Error(
          fmt::format("activation bytes of one micro-batch overflow a signed 64-bit integer (tokens per rank {}, "
                      "hidden_size {})",
                      T, h));
    }
    return static_cast<int64_t>(v);
  };
  LayerActivationBytes g;
  g.moe_layer = moe_layer;
  g.shared_experts_present = moe_layer && m.moe.num_shared_experts > 0;
  // Inputs of FP8 linear layers: with --precision fp8 TransformerEngine saves them quantized
  // (precision.h Fp8ActivationBytes), else in the activation dtype like every other tensor.
  auto lin_in = [&](Wide elems) -> Wide { return w.fp8_saved_inputs ? Fp8ActivationBytes<Wide>(elems, w.fp8_scaling) : mul(elems, ab); };
  // A SwiGLU MLP's `rows_f` = rows x F intermediates (workload.h SavedTensorRules): gate and up
  // (the activation's inputs, fc1's output), and unless the activation is recomputed the down
  // projection's input (fc2's) and, in torchtitan's eager SwiGLU, silu(gate): 4F (torchtitan) or
  // 3F (Megatron-Core's fused SwiGLU, fused_bias_swiglu.py, keeps only its input).
  const bool megatron = w.saved != SavedTensorRules::kTorchtitan;
  auto swiglu = [&](Wide rows_f, bool act_recomputed) -> Wide {
    if (act_recomputed) return mul(mul(rows_f, 2), ab);
    return mul(mul(rows_f, megatron ? 2 : 3), ab) + lin_in(rows_f);
  };
  // Attention block: norm input (+ its output, the projections' input, unless recomputed),
  // projections, core output (o's input).
  Wide attn = mul(ts, h), attn_in = norms ? 0 : mul(ts, h);
  const int64_t heads_local = a.num_attention_heads / t;
  if (a.kind == AttentionKind::kGqa) {
    const int64_t q_out = a.num_attention_heads * a.head_dim, kv_out = a.num_key_value_heads * a.head_dim;
    attn += mul(T, (q_out + 2 * kv_out) / t);  // qkv (the attention's q, k, v, after rotary)
    // q/k norms (Qwen3's q_norm / k_norm, OLMoE's full-width ones) keep their inputs, the q and k
    // projections before rotary: T x (q_out + kv_out) / tp more (Megatron's `layernorm` recompute
    // module covers the block's input norms, not these).
    if (a.qk_norm != QkNorm::kNone) attn += mul(T, (q_out + kv_out) / t);
    attn_in += rs.core_attn ? 0 : mul(T, q_out / t);  // core out
  } else {
    const int64_t qk = a.qk_nope_head_dim + a.qk_rope_head_dim;
    if (a.q_lora_rank > 0) {
      attn += mul(T, a.q_lora_rank);                 // q_a out
      attn_in += norms ? 0 : mul(T, a.q_lora_rank);  // its norm (q_b's input)
    }
    if (!rs.mla_up_proj) attn += mul(T, heads_local * qk);  // q (q_b out)
    attn += mul(T, a.kv_lora_rank + a.qk_rope_head_dim);
    attn_in += norms ? 0 : mul(T, a.kv_lora_rank);                                           // normed latent (kv_b's input)
    if (!rs.mla_up_proj) attn += mul(T, heads_local * (a.qk_nope_head_dim + a.v_head_dim));  // kv_b out
    if (!rs.core_attn) attn_in += mul(T, heads_local * a.v_head_dim);                        // core out
  }
  // + flash-attention logsumexp, fp32 (recomputed with the core).
  g.attention = narrow(mul(attn, ab) + lin_in(attn_in) + (rs.core_attn ? 0 : mul(mul(T, heads_local), 4)));
  // MLP block: post-attention norm input (+ output). The output is the dense MLP's FP8 input; in
  // an MoE layer the BF16 router keeps it in the activation dtype.
  const Wide norm_out = norms ? 0 : mul(ts, h);
  g.norm = narrow(mul(mul(ts, h), ab) + (moe_layer ? mul(norm_out, ab) : lin_in(norm_out)));
  if (!moe_layer) {
    // The whole dense MLP recomputed (mlp): only its input, the norm output above, is kept.
    g.dense_mlp = rs.mlp ? 0 : narrow(swiglu(mul(T, m.intermediate_size / t), rs.mlp_act));
  } else if (rs.moe) {
    // The whole MoE block recomputed (moe): router, routed rows and shared experts are rebuilt
    // from the block's input (the norm output above).
    g.router = g.routed_experts = g.shared_experts = 0;
  } else {
    const int64_t E = m.moe.num_experts, k = m.moe.top_k;
    // Router: logits and scores in fp32, top-k weights fp32 and indices int64.
    // The router runs on the tokens the rank dispatches (Workload::dispatch_tokens).
    g.router = narrow(mul(mul(w.dispatch_tokens, E), 8) + mul(mul(w.dispatch_tokens, k), 12));
    // Routed experts (NOT divided by EP: tokens are exchanged, not removed): the R_max received
    // rows into fc1 (the grouped GEMM's input), their F / expert-TP intermediates (swiglu), and
    // what scoring keeps (workload.h SavedTensorRules):
    //  - torchtitan: the fp32 copy of the combined T_r x top_k rows scored after the combine, 4 B
    //    per element whatever the activation dtype;
    //  - Megatron-Core >= 0.13: the probabilities (fp32, one per received row), inside the
    //    weighted SwiGLU; nothing after fc2;
    //  - Megatron-Core < 0.13: the T_r x top_k combined rows the unpermute scores, and their
    //    probabilities (fp32).
    Wide rows_in = lin_in(mul(w.received_rows, h)) + swiglu(mul(w.received_rows, w.expert_f_local), rs.moe_act);
    // Megatron-Core's eager activation clamp (expert_eager.h): the clamps keep fc1's output (a
    // view of it each) and the fused activation saves their cat, 2F more per row, unless moe_act
    // recomputes the activation (its checkpoint keeps only fc1's output).
    if (w.eager_expert_clamp && !rs.moe_act) rows_in += mul(mul(mul(w.received_rows, w.expert_f_local), 2), ab);
    Wide scoring = 0;
    switch (w.saved) {
      case SavedTensorRules::kTorchtitan:
        scoring = mul(mul(w.mean_received_rows, h), 4);
        break;
      case SavedTensorRules::kMegatronCore:
        scoring = mul(w.received_rows, 4);
        break;
      case SavedTensorRules::kMegatronCoreUnpermuteProbs:
        scoring = mul(mul(w.mean_received_rows, h), ab) + mul(w.mean_received_rows, 4);
        break;
    }
    g.routed_experts = narrow(rows_in + scoring);
    if (g.shared_experts_present && !rs.shared_experts) {
      g.shared_experts = narrow(swiglu(mul(T, m.moe.shared_expert_intermediate_size / t), rs.shared_act));
    }
  }
  return g;
}

LayerActivationBytes OpSacSavedActivations(const ModelSpec& m, const Workload& w, bool moe_layer, bool dispatches) {
  const auto& a = m.attention;
  const WideInt ab = w.act_bytes, t = w.tp_shards, T = w.tokens, h = m.hidden_size;
  WideInt linears[3] = {0, 0, 0};  // by OpSacPart
  for (const OpSacLinear& l : OpSacLinears(m, moe_layer)) {
    if (l.saved) linears[static_cast<int>(l.part)] += T * (l.tp == LinearTp::kColwise ? l.out / t : l.out) * ab;
  }
  const WideInt reduce_scatter = t > 1 ? Ceil(w.tokens, w.tp_shards) * h * ab : 0;
  const WideInt heads_local = a.num_attention_heads / t;
  const WideInt v_dim = a.kind == AttentionKind::kGqa ? a.head_dim : a.v_head_dim;
  LayerActivationBytes g;
  g.moe_layer = moe_layer;
  g.shared_experts_present = moe_layer && m.moe.num_shared_experts > 0;
  g.attention = Narrow(linears[0] + T * heads_local * v_dim * ab + T * heads_local * 4 + reduce_scatter, "activation bytes");
  if (!moe_layer) {
    g.dense_mlp = Narrow(linears[1] + reduce_scatter, "activation bytes");
  } else {
    g.router = Narrow(static_cast<WideInt>(w.dispatch_tokens) * m.moe.top_k * 12, "activation bytes");
    const WideInt a2a = dispatches ? static_cast<WideInt>(w.received_rows + w.mean_received_rows) * h * ab : 0;
    g.routed_experts = Narrow(a2a + reduce_scatter, "activation bytes");
    g.shared_experts = Narrow(linears[2], "activation bytes");
  }
  return g;
}

std::vector<std::string> MemoryRulesLines(const TrainingConfig& t, Convention convention) {
  std::vector<std::string> lines;
  switch (SavedTensorRulesOf(t, convention)) {
    case SavedTensorRules::kTorchtitan:
      break;
    case SavedTensorRules::kMegatronCore:
      lines.push_back(fmt::format("saved tensors of Megatron-Core {}: the router probabilities applied inside the experts' SwiGLU "
                                  "(--megatron-core-version for an older release)",
                                  t.run.megatron_core_version.empty() ? "as it is (0.13 or later)" : t.run.megatron_core_version));
      break;
    case SavedTensorRules::kMegatronCoreUnpermuteProbs:
      lines.push_back(fmt::format("saved tensors of Megatron-Core {}: the unpermute applies the router probabilities and keeps the "
                                  "combined rows (before 0.13)",
                                  t.run.megatron_core_version));
      break;
  }
  if (TeCrossEntropyOf(t, convention)) {
    lines.push_back("logits at the loss: TransformerEngine's fused cross-entropy keeps them in their own dtype, the gradient written in "
                    "place (no fp32 copy)");
  }
  return lines;
}

int64_t LossBytesPerLogit(const Workload& w) {
  if (w.te_cross_entropy) return w.act_bytes;
  return w.saved == SavedTensorRules::kTorchtitan ? 4 : 4 + w.act_bytes;
}

WideInt LossLogitsBytes(const ModelSpec& m, const Workload& w, int64_t tp, int64_t mtp_layers) {
  return static_cast<WideInt>(w.tokens) * Ceil(m.vocab_size, tp) * LossBytesPerLogit(w) * (1 + mtp_layers);
}

const char* ActivationKindName(ActivationKind kind) {
  static constexpr const char* kNames[] = {"attention",      "norm",        "dense_mlp", "router", "routed_experts",
                                           "shared_experts", "checkpoints", "embedding", "logits"};
  return kNames[static_cast<int>(kind)];
}

LayerActivationTable ActivationTable(const LayerActivationBytes& moe, const LayerActivationBytes& dense) {
  using K = ActivationKind;
  LayerActivationTable t;
  auto set = [&](int which, K k, int64_t v) {
    t.bytes[which][static_cast<int>(k)] = v;
    t.present[which][static_cast<int>(k)] = true;
    t.sum[which] += v;
  };
  set(0, K::kAttention, moe.attention);
  set(0, K::kNorm, moe.norm);
  set(0, K::kRouter, moe.router);
  set(0, K::kRoutedExperts, moe.routed_experts);
  if (moe.shared_experts_present) set(0, K::kSharedExperts, moe.shared_experts);
  set(1, K::kAttention, dense.attention);
  set(1, K::kNorm, dense.norm);
  set(1, K::kDenseMlp, dense.dense_mlp);
  return t;
}

namespace {

// What the stage rules below add up: each kind's bytes (ByKind: the report's breakdown) or only
// their sum (TotalOnly: the layout search's hot path). Add(kind, bytes) adds one figure;
// AddTable(table, which, times) adds `times` copies of every kind of layer `which` of a table.
struct ActivationsByKind {
  StageActivationBytes out;
  void Add(ActivationKind k, WideInt v) {
    out.total += v;
    out.bytes[static_cast<int>(k)] += v;
    out.present[static_cast<int>(k)] = true;
  }
  void AddTable(const LayerActivationTable& table, int which, WideInt times) {
    for (int k = 0; k < static_cast<int>(ActivationKind::kCount); ++k) {
      if (table.present[which][k]) Add(static_cast<ActivationKind>(k), table.bytes[which][k] * times);
    }
  }
};
struct ActivationsTotal {
  WideInt total = 0;
  void Add(ActivationKind, WideInt v) { total += v; }
  void AddTable(const LayerActivationTable& table, int which, WideInt times) { total += table.sum[which] * times; }
};

// StageActivations' rule, into `acc`.
template <class Acc>
void AddStageActivations(const LayerActivationTable& layer, const StageLayers& st, Recompute recompute, WideInt layer_input_bytes,
                         WideInt logits_bytes, Acc& acc) {
  using K = ActivationKind;
  // Stage-layer copies in flight, formed as (bytes x layers x chunks) / chunks per micro-batch.
  const WideInt per = std::max<int64_t>(1, st.chunks_per_microbatch);
  struct ByChunk {
    Acc& acc;
    WideInt per;
    void Add(ActivationKind k, WideInt v) { acc.Add(k, v / per); }
    void AddTable(const LayerActivationTable& table, int which, WideInt times) {
      if (per == 1) return acc.AddTable(table, which, times);
      for (int k = 0; k < static_cast<int>(ActivationKind::kCount); ++k) {
        if (table.present[which][k]) acc.Add(static_cast<ActivationKind>(k), table.bytes[which][k] * times / per);
      }
    }
  } chunked{acc, per};
  const int64_t count[2] = {st.moe_layers, st.dense_layers};
  // Checkpointed layers: all of them with full recomputation or per-op checkpointing, else those of
  // torchtitan's per-layer selective checkpointing (none without it).
  const bool full = recompute == Recompute::kFull || st.op_saved != nullptr;
  const int64_t checkpointed[2] = {full ? count[0] : st.checkpointed_moe, full ? count[1] : st.checkpointed_dense};
  const bool checkpointed_moe_first = full ? st.moe_first : st.checkpointed_moe_first;
  const bool by_chunk = st.chunk_copies[0] >= 0 && st.chunk_copies[1] >= 0;
  if (checkpointed[0] + checkpointed[1] > 0) {
    // Each checkpointed layer's input is kept for every micro-batch in flight; one of them (the
    // largest, the first of equals in layer order) is rebuilt at a time in backward.
    if (by_chunk && full) {
      acc.Add(K::kCheckpoints, layer_input_bytes * (st.chunk_copies[0] + st.chunk_copies[1]));
    } else {
      chunked.Add(K::kCheckpoints, layer_input_bytes * (checkpointed[0] + checkpointed[1]) * st.in_flight);
    }
    // Per-op checkpointing: each layer's saved op outputs too, for every micro-batch in flight.
    for (int which = 0; which < 2 && st.op_saved != nullptr; ++which) {
      if (checkpointed[which] > 0) chunked.AddTable(*st.op_saved, which, static_cast<WideInt>(checkpointed[which]) * st.in_flight);
    }
    int largest = -1;
    const int order[2] = {checkpointed_moe_first ? 0 : 1, checkpointed_moe_first ? 1 : 0};
    for (int which : order) {
      if (checkpointed[which] > 0 && (largest < 0 || layer.sum[which] > layer.sum[largest])) largest = which;
    }
    if (largest >= 0) acc.AddTable(layer, largest, 1);
  }
  // The other layers keep every tensor for every micro-batch in flight.
  for (int which = 0; which < 2; ++which) {
    const int64_t kept = count[which] - checkpointed[which];
    if (kept > 0 && by_chunk && checkpointed[which] == 0) {
      acc.AddTable(layer, which, st.chunk_copies[which]);
    } else if (kept > 0) {
      chunked.AddTable(layer, which, static_cast<WideInt>(kept) * st.in_flight);
    }
  }
  // EP overlap's combined step: one layer more, the stage's largest.
  if (st.extra_layers > 0) {
    const int largest = count[0] > 0 && (count[1] == 0 || layer.sum[0] >= layer.sum[1]) ? 0 : 1;
    if (count[largest] > 0) acc.AddTable(layer, largest, st.extra_layers);
  }
  if (st.first_stage) acc.Add(K::kEmbedding, layer_input_bytes * FirstChunkInFlight(st.pp, per, st.in_flight));
  if (st.last_stage) acc.Add(K::kLogits, logits_bytes);
}

}  // namespace

StageActivationBytes StageActivations(const LayerActivationTable& layer, const StageLayers& st, Recompute recompute,
                                      WideInt layer_input_bytes, WideInt logits_bytes, bool by_kind) {
  if (!by_kind) {
    StageActivationBytes out;
    out.total = StageActivationsTotal(layer, st, recompute, layer_input_bytes, logits_bytes);
    return out;
  }
  ActivationsByKind acc;
  AddStageActivations(layer, st, recompute, layer_input_bytes, logits_bytes, acc);
  return acc.out;
}

WideInt StageActivationsTotal(const LayerActivationTable& layer, const StageLayers& st, Recompute recompute, WideInt layer_input_bytes,
                              WideInt logits_bytes) {
  ActivationsTotal acc;
  AddStageActivations(layer, st, recompute, layer_input_bytes, logits_bytes, acc);
  return acc.total;
}

const char* BufferUseName(BufferUse use) {
  static constexpr const char* kNames[] = {"fsdp_all_gather", "fsdp_reduce_scatter", "deredundency",          "all_to_all",
                                           "tp_all_gather",   "pp_send_recv",        "fsdp_unsharded_params", "fsdp_unsharded_grads",
                                           "deepep",          "allgather_dispatch"};
  return kNames[static_cast<int>(use)];
}

namespace {

// StageBuffers' rule: set(use, bytes) for each buffer the stage holds.
template <class Set>
void ForEachStageBuffer(WideInt largest_fsdp_unit, bool has_moe_layers, const Workload& w, const ParallelDims& d, const TrainingConfig& t,
                        const Machine& machine, const TrainingBytes& tb, int64_t oep, int64_t h, WideInt stage_fsdp_elems, Set&& set) {
  if (*t.dp_sharding == DpSharding::kFsdp) {
    set(BufferUse::kFsdpAllGather, largest_fsdp_unit * tb.param * 2);
    set(BufferUse::kFsdpReduceScatter, largest_fsdp_unit * tb.grad);
  }
  if (d.ep > 1 && has_moe_layers) {
    if (t.dispatcher == Dispatcher::kDeredundency) {
      set(BufferUse::kDeredundency, static_cast<WideInt>(oep) * w.mean_received_rows * h * (2 * w.act_bytes));
    }
    if (t.dispatcher == Dispatcher::kDeepEp) {
      const WideInt other_nodes = Ceil(d.ep, machine.gpus_per_node) - 1;
      const WideInt row = static_cast<WideInt>(DispatchRowBytes(static_cast<double>(h), static_cast<double>(w.act_bytes), t.fp8_dispatch));
      set(BufferUse::kDeepEp, other_nodes * w.dispatch_tokens * row + static_cast<WideInt>(w.received_rows) * h * w.act_bytes);
    } else if (t.dispatcher == Dispatcher::kAllGather) {
      // The all-gather output and the reduce-scatter input (comm.h AllGatherDispatchBytes).
      const double gathered =
          AllGatherDispatchBytes(d.ep, static_cast<double>(w.dispatch_tokens), static_cast<double>(h), static_cast<double>(w.act_bytes));
      set(BufferUse::kAllGatherDispatch, 2 * static_cast<WideInt>(gathered));
    } else {
      set(BufferUse::kAllToAll, static_cast<WideInt>(w.mean_received_rows + w.received_rows) * h * w.act_bytes);
    }
  }
  if (d.tp > 1) set(BufferUse::kTpAllGather, static_cast<WideInt>(w.tokens) * h * w.act_bytes);
  if (d.pp > 1) set(BufferUse::kPpSendRecv, static_cast<WideInt>(Ceil(w.tokens, d.tp)) * h * (2 * w.act_bytes));
  if (*t.dp_sharding == DpSharding::kFsdp && KeepsUnshardedParams(t.run.reshard_after_forward, d.pp)) {
    const WideInt others = stage_fsdp_elems - 2 * largest_fsdp_unit;
    set(BufferUse::kFsdpUnshardedParams, (others > 0 ? others : 0) * tb.param);
    if (AccumulatesUnshardedGrads(d.pp)) set(BufferUse::kFsdpUnshardedGrads, stage_fsdp_elems * tb.grad);
  }
}

}  // namespace

StageBufferBytes StageBuffers(WideInt largest_fsdp_unit, bool has_moe_layers, const Workload& w, const ParallelDims& d,
                              const TrainingConfig& t, const Machine& machine, const TrainingBytes& tb, int64_t oep, int64_t h,
                              WideInt stage_fsdp_elems) {
  StageBufferBytes out;
  ForEachStageBuffer(largest_fsdp_unit, has_moe_layers, w, d, t, machine, tb, oep, h, stage_fsdp_elems, [&](BufferUse use, WideInt v) {
    out.bytes[static_cast<int>(use)] = v;
    out.present[static_cast<int>(use)] = true;
    out.total += v;
  });
  return out;
}

WideInt StageBuffersTotal(WideInt largest_fsdp_unit, bool has_moe_layers, const Workload& w, const ParallelDims& d, const TrainingConfig& t,
                          const Machine& machine, const TrainingBytes& tb, int64_t oep, int64_t h, WideInt stage_fsdp_elems) {
  WideInt total = 0;
  ForEachStageBuffer(largest_fsdp_unit, has_moe_layers, w, d, t, machine, tb, oep, h, stage_fsdp_elems,
                     [&](BufferUse, WideInt v) { total += v; });
  return total;
}

std::pair<int64_t, bool> FsdpUnitOf(const ParamInfo& p, bool sparse_mesh) {
  // torchtitan wraps a layer's experts separately only when they live on the sparse mesh.
  if (p.layer >= 0) return {p.layer, sparse_mesh};
  return {p.role == Role::kEmbedding ? -1 : -2, false};
}

namespace {

// The layers of `stage`: counts by kind and the kind of the first.
StageLayers LayersOfStage(const Plan& plan, int64_t stage) {
  StageLayers st;
  bool first = true;
  for (int64_t l = 0; l < plan.model.num_hidden_layers; ++l) {
    if (plan.layer_stage[l] != stage) continue;
    const bool moe = plan.model.moe_layers[l];
    if (first) st.moe_first = moe;
    first = false;
    ++(moe ? st.moe_layers : st.dense_layers);
  }
  // torchtitan's per-layer selective checkpointing: the stage's checkpointed layers.
  if (const int64_t every = LayerSacEvery(plan.training); every > 0) {
    const std::vector<bool> ckpt = LayerSacCheckpointed(plan.layer_stage, every);
    for (int64_t l = 0; l < plan.model.num_hidden_layers; ++l) {
      if (plan.layer_stage[l] != stage || !ckpt[l]) continue;
      const bool moe = plan.model.moe_layers[l];
      if (st.checkpointed_moe + st.checkpointed_dense == 0) st.checkpointed_moe_first = moe;
      ++(moe ? st.checkpointed_moe : st.checkpointed_dense);
    }
  }
  st.first_stage = stage == plan.embedding_stage;
  st.last_stage = stage == plan.loss_stage;
  // MTP modules (opt-in) run on the last stage (or where a layout puts them): one more layer like the last each.
  if (stage == plan.mtp_stage && plan.training.mtp_layers > 0) {
    (plan.model.moe_layers.back() ? st.moe_layers : st.dense_layers) += plan.training.mtp_layers;
  }
  return st;
}

// One MTP module's FSDP units on `rank`, model-parallel elements (dense, sparse): like a decoder
// layer (FsdpUnitOf: torchtitan fully_shard per module, the experts apart when they live on the
// sparse mesh), its decoder layer -- a copy of the last -- with enorm, hnorm, eh_proj, its norm and
// (pp > 1) its embedding (mtp.h MtpExtraParams) on the dense mesh, its experts on the sparse mesh.
std::pair<int64_t, int64_t> MtpFsdpUnits(const Plan& plan, int64_t rank) {
  std::pair<int64_t, int64_t> units{0, 0};
  ForEachMtpParam(plan, [&](const ParamInfo& p, const ParamPlacement& pl, const Mesh& mesh) {
    int64_t& n = pl.sparse_mesh ? units.second : units.first;
    n = CheckedAdd(n, GatheredNumelOnRank(p, pl, mesh, rank), "FSDP unit elements");
  });
  return units;
}

// Activations of a stage of `plan` (one micro-batch in flight unless `in_flight` says otherwise).
StageActivationBytes PlanStageActivations(const Plan& plan, const Workload& w, StageLayers st, bool with_logits) {
  const auto& m = plan.model;
  const Recompute rc = plan.training.recompute;
  // Only the kinds the stage has (LayerActivations throws on overflow).
  const RecomputeSet rs = RecomputeSetOf(plan.training);
  const LayerActivationBytes moe = st.moe_layers > 0 ? LayerActivations(m, rs, w, true) : LayerActivationBytes{};
  const LayerActivationBytes dense = st.dense_layers > 0 ? LayerActivations(m, rs, w, false) : LayerActivationBytes{};
  const WideInt layer_input = static_cast<WideInt>(Ceil(w.tokens, w.tp_shards)) * m.hidden_size * w.act_bytes;
  const WideInt logits = LossLogitsBytes(m, w, plan.dims.tp, plan.training.mtp_layers);
  if (!with_logits) st.last_stage = false;
  // torchtitan's per-op checkpointing: what each layer keeps besides its input.
  LayerActivationTable op_saved;
  if (OpSac(plan.training)) {
    const bool dispatches = plan.dims.ep > 1;
    op_saved = ActivationTable(st.moe_layers > 0 ? OpSacSavedActivations(m, w, true, dispatches) : LayerActivationBytes{},
                               st.dense_layers > 0 ? OpSacSavedActivations(m, w, false, dispatches) : LayerActivationBytes{});
    st.op_saved = &op_saved;
  }
  return StageActivations(ActivationTable(moe, dense), st, rc, layer_input, logits);
}

std::map<std::string, int64_t> ActivationMap(const StageActivationBytes& a) {
  std::map<std::string, int64_t> out;
  for (int k = 0; k < static_cast<int>(ActivationKind::kCount); ++k) {
    if (a.present[k]) out[ActivationKindName(static_cast<ActivationKind>(k))] = Narrow(a.bytes[k], "activation bytes");
  }
  return out;
}

// The largest FSDP unit of stage `s` and the sum of its units, in model-parallel elements on
// `first` (the stage's first rank): FsdpUnitOf per parameter, the MTP modules (opt-in) on their
// stage each its own unit or two (MtpFsdpUnits); {0, 0} unless the data-parallel sharding is FSDP.
std::pair<WideInt, WideInt> StageFsdpUnits(const Plan& plan, int64_t s, int64_t first) {
  const auto& t = plan.training;
  WideInt largest_unit = 0, stage_units = 0;
  if (*t.dp_sharding == DpSharding::kFsdp) {
    std::map<std::pair<int64_t, bool>, int64_t> units;  // FsdpUnitOf -> model-parallel elements
    for (size_t i = 0; i < plan.inventory.params.size(); ++i) {
      if (plan.placements[i].stage != s) continue;
      auto& n = units[FsdpUnitOf(plan.inventory.params[i], plan.placements[i].sparse_mesh)];
      n = CheckedAdd(n, ModelParallelNumel(plan, i, first), "FSDP unit elements");
    }
    for (const auto& [u, n] : units) {
      largest_unit = std::max<WideInt>(largest_unit, n);
      stage_units += n;
    }
    // MTP modules (opt-in) on their stage: each its own FSDP unit or two (MtpFsdpUnits).
    if (t.mtp_layers > 0 && s == plan.mtp_stage) {
      const std::pair<int64_t, int64_t> mtp = MtpFsdpUnits(plan, first);
      largest_unit = std::max<WideInt>(largest_unit, std::max(mtp.first, mtp.second));
      stage_units += static_cast<WideInt>(mtp.first + mtp.second) * t.mtp_layers;
    }
  }
  return {largest_unit, stage_units};
}

// The communication buffers of a stage per use (BufferUseName), in bytes: the uses it has.
std::map<std::string, int64_t> BufferMap(const StageBufferBytes& buf) {
  std::map<std::string, int64_t> out;
  for (int u = 0; u < static_cast<int>(BufferUse::kCount); ++u) {
    if (buf.present[u]) out[BufferUseName(static_cast<BufferUse>(u))] = Narrow(buf.bytes[u], "buffer bytes");
  }
  return out;
}

// StageLayers::chunk_copies of stage `s` when the plan's layout gives each layer its chunk (an
// MTP module counts in the rank's last chunk, where Megatron's layout rules put it).
void ChunkCopiesOfStage(const Plan& plan, int64_t s, StageLayers& st) {
  const int64_t vpp = std::max<int64_t>(1, st.chunks_per_microbatch);
  if (plan.layer_chunk.empty() || vpp <= 1) return;
  std::vector<int64_t> moe(vpp, 0), dense(vpp, 0);
  for (int64_t l = 0; l < plan.model.num_hidden_layers; ++l) {
    if (plan.layer_stage[l] == s) ++(plan.model.moe_layers[l] ? moe : dense)[plan.layer_chunk[l]];
  }
  if (s == plan.mtp_stage && plan.training.mtp_layers > 0) (plan.model.moe_layers.back() ? moe : dense)[vpp - 1] += plan.training.mtp_layers;
  SetChunkCopies(moe, dense, st);
}

// The memory of pipeline stage `s` (bytes): the static memory of its first rank, the activations
// of every micro-batch in flight and the communication buffers.
StageMemory StageMemoryOf(const Plan& plan, const Workload& w, int64_t s) {
  const auto& t = plan.training;
  StageMemory sm;
  sm.stage = s;
  sm.in_flight_microbatches = InFlightMicrobatches(plan, s);
  // Activations of every micro-batch in flight, and the communication buffers.
  StageLayers st = LayersOfStage(plan, s);
  st.in_flight = InFlightChunks(plan.dims, t, s);
  st.chunks_per_microbatch = ChunksPerMicrobatch(t);
  st.pp = plan.dims.pp;
  st.extra_layers = ExtraLayersInFlight(plan.dims, t, s);
  ChunkCopiesOfStage(plan, s, st);
  const StageActivationBytes act = PlanStageActivations(plan, w, st, /*with_logits=*/true);
  const std::map<std::string, int64_t> acts = ActivationMap(act);
  const int64_t act_total = Narrow(act.total, "activation bytes");

  const int64_t first = s * plan.dims.stage_size();
  const auto [largest_unit, stage_units] = StageFsdpUnits(plan, s, first);
  const int64_t oep = DispatchOep(plan);
  const StageBufferBytes buf = StageBuffers(largest_unit, st.moe_layers > 0, w, plan.dims, t, plan.machine, TrainingBytesOf(t), oep,
                                            plan.model.hidden_size, stage_units);
  std::map<std::string, int64_t> buffers = BufferMap(buf);
  const int64_t buf_total = Narrow(buf.total, "buffer bytes");

  // The first rank of a stage is a worst rank: it has coordinate 0 on every axis, so it takes
  // chunk 0 in every shard step, and torch.chunk's chunk sizes never grow with the index; every
  // static kind grows with the local elements, and activations and buffers are the same on
  // every rank of the stage.
  MemoryBreakdown b = StaticMemoryOnRank(plan, first);
  b.activations_bytes = act_total;
  b.activations_by_role = acts;
  b.comm_buffers_bytes = buf_total;
  if (auto deepep = buffers.find(BufferUseName(BufferUse::kDeepEp)); deepep != buffers.end()) b.outside_allocator_bytes = deepep->second;
  b.comm_buffers_by_use = std::move(buffers);
  b.peak_bytes =
      CheckedAdd(CheckedAdd(CheckedAdd(b.params_bytes, b.grads_bytes, "peak"), CheckedAdd(b.optimizer_bytes, act_total, "peak"), "peak"),
                 buf_total, "peak");
  sm.worst = std::move(b);
  sm.worst_rank = first;
  return sm;
}

}  // namespace

std::map<std::string, int64_t> ActivationBytesPerMicrobatch(const Plan& plan, const Workload& w, int64_t stage) {
  StageLayers st = LayersOfStage(plan, stage);
  st.in_flight = 1;
  return ActivationMap(PlanStageActivations(plan, w, st, /*with_logits=*/false));
}

MemoryReport ComputeMemory(const Plan& plan) {
  MemoryReport r;
  r.workload = ComputeWorkload(plan);
  r.budget_gib = plan.machine.gpu_memory_gib;
  r.reserve_gib = plan.training.memory_reserve_gib.value_or(0);
  ValidateMemoryReserve(r.budget_gib, r.reserve_gib, "gpu_memory_gib", "memory_reserve_gib");
  r.worst_peak_bytes = -1;
  for (int64_t s = 0; s < plan.dims.pp; ++s) {
    StageMemory sm = StageMemoryOf(plan, r.workload, s);
    r.worst_allocator_peak_bytes = std::max(r.worst_allocator_peak_bytes, sm.worst.peak_bytes - sm.worst.outside_allocator_bytes);
    if (sm.worst.peak_bytes > r.worst_peak_bytes) {
      r.worst_peak_bytes = sm.worst.peak_bytes;
      r.worst_rank = sm.worst_rank;
    }
    r.stages.push_back(std::move(sm));
  }
  if (r.budget_gib > 0) {
    for (const auto& sm : r.stages) {
      if (OverBudget(static_cast<double>(sm.worst.peak_bytes), r.budget_gib, r.reserve_gib)) r.over_budget_ranks.push_back(sm.worst_rank);
    }
  }
  return r;
}

double UsableBudgetBytes(double budget_gib, double reserve_gib) {
  return (budget_gib - reserve_gib) * 1073741824.0;
}

bool OverBudget(double peak_bytes, double budget_gib, double reserve_gib) {
  return budget_gib > 0 && peak_bytes > UsableBudgetBytes(budget_gib, reserve_gib);
}

int64_t HeadroomBytes(int64_t peak_bytes, double budget_gib, double reserve_gib) {
  return static_cast<int64_t>(budget_gib * 1073741824.0) - static_cast<int64_t>(reserve_gib * 1073741824.0) - peak_bytes;
}

void ValidateMemoryReserve(double budget_gib, double reserve_gib, const std::string& budget_name, const std::string& reserve_name) {
  if (!std::isfinite(reserve_gib) || reserve_gib < 0) {
    throw Error(fmt::format("{} ({}): the memory reserve must be a finite number of GiB >= 0", reserve_name, reserve_gib));
  }
  if (budget_gib > 0 && reserve_gib >= budget_gib) {
    throw Error(
        fmt::format("{} ({} GiB) must be below the memory budget {} ({} GiB): a rank may use budget - reserve GiB, and a reserve at or "
                    "above the budget leaves none (every rank would be over it)",
                    reserve_name, reserve_gib, budget_name, budget_gib));
  }
}

void RequireBudgetForReserve(double budget_gib, double reserve_gib, const std::string& reserve_flag, const std::string& command) {
  if (budget_gib > 0) return;
  throw Error(
      fmt::format("{} {}: a reserve is held back from a memory budget, and {} has none: give --gpu-memory-gib G (a rank then fits at "
                  "peak <= G - {})",
                  reserve_flag, reserve_gib, command, reserve_gib));
}

std::vector<StageOverBudget> RanksOverBudget(const Plan& plan, const MemoryReport& memory) {
  std::vector<StageOverBudget> out;
  if (memory.budget_gib <= 0) return out;
  const int64_t stage_size = plan.dims.stage_size();
  for (const auto& s : memory.stages) {
    const double peak_gib = static_cast<double>(s.worst.peak_bytes) / 1073741824.0;
    if (!OverBudget(static_cast<double>(s.worst.peak_bytes), memory.budget_gib, memory.reserve_gib)) continue;
    StageOverBudget o;
    o.stage = s.stage;
    o.stage_size = stage_size;
    o.worst_rank = s.worst_rank;
    o.peak_gib = peak_gib;
    const int64_t dynamic = s.worst.activations_bytes + s.worst.comm_buffers_bytes;
    for (int64_t r = s.stage * stage_size; r < (s.stage + 1) * stage_size; ++r) {
      const MemoryBreakdown b = StaticMemoryOnRank(plan, r);
      if (OverBudget(static_cast<double>(b.params_bytes + b.grads_bytes + b.optimizer_bytes + dynamic), memory.budget_gib,
                     memory.reserve_gib)) {
        o.ranks_over.push_back(r);
      }
    }
    out.push_back(std::move(o));
  }
  return out;
}

void SetChunkCopies(const std::vector<int64_t>& moe, const std::vector<int64_t>& dense, StageLayers& st) {
  const int64_t vpp = std::max<int64_t>(1, st.chunks_per_microbatch);
  st.chunk_copies[0] = st.chunk_copies[1] = 0;
  for (int64_t j = 0; j < vpp; ++j) {
    const int64_t n = ChunkInFlight(st.pp, vpp, st.in_flight, j);
    st.chunk_copies[0] += n * moe[static_cast<size_t>(j)];
    st.chunk_copies[1] += n * dense[static_cast<size_t>(j)];
  }
}

}  // namespace dockyard
