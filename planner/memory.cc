// Per-rank memory (see memory.h and docs/memory-model.md).
#include "planner/memory.h"

#include <algorithm>

#include <fmt/format.h>

#include "planner/checked_math.h"
#include "planner/error.h"

namespace dockyard {
namespace {

bool OnSparseMesh(const Plan& plan, size_t i) { return plan.placements[i].sparse_mesh; }

int64_t Ceil(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

MemoryBreakdown StaticMemoryOnRank(const Plan& plan, int64_t rank) {
  const auto& t = plan.training;
  const auto& d = plan.dims;
  const DpSharding strategy = *t.dp_sharding;
  const int64_t param_b = DtypeBytes(t.param_dtype, "param_dtype");
  const int64_t grad_b = DtypeBytes(t.grad_dtype, "grad_dtype");
  const int64_t moments_b = t.optimizer == Optimizer::kAdamW ? 8 : 0;  // exp_avg + exp_avg_sq, fp32
  const int64_t master_b = param_b == 4 ? 0 : 4;                        // fp32 master copy
  const int64_t stage = plan.meshes.dense.Coord(rank, 0);
  // Accumulate per role group (keyed by the group's literal) without building strings per
  // parameter: this runs for every rank of the world.
  struct Acc {
    int64_t params = 0, grads = 0, opt = 0, zero1_dense = 0, zero1_sparse = 0;
  };
  std::map<const char*, Acc> acc;
  for (size_t i = 0; i < plan.inventory.params.size(); ++i) {
    if (plan.placements[i].stage != stage) continue;
    const auto& p = plan.inventory.params[i];
    Acc& a = acc[RoleGroup(p.role)];
    const int64_t local = LocalNumelOnRank(p, plan.placements[i], plan.MeshOf(i), rank);
    if (strategy == DpSharding::kFsdp) {
      a.params = CheckedAdd(a.params, CheckedMul(local, 4, p.fqn), "params bytes");  // FSDP2 keeps the shard in fp32
      a.grads = CheckedAdd(a.grads, CheckedMul(local, grad_b, p.fqn), "grads bytes");
      a.opt = CheckedAdd(a.opt, CheckedMul(local, moments_b, p.fqn), "optimizer bytes");
    } else {
      a.params = CheckedAdd(a.params, CheckedMul(local, param_b, p.fqn), "params bytes");
      a.grads = CheckedAdd(a.grads, CheckedMul(local, grad_b, p.fqn), "grads bytes");
      if (strategy == DpSharding::kDdp) {
        a.opt = CheckedAdd(a.opt, CheckedMul(local, master_b + moments_b, p.fqn), "optimizer bytes");
      } else {
        int64_t& elems = OnSparseMesh(plan, i) ? a.zero1_sparse : a.zero1_dense;
        elems = CheckedAdd(elems, local, "optimizer elements");
      }
    }
  }
  MemoryBreakdown m;
  for (auto& [group, a] : acc) {
    // ZeRO-1: Megatron's distributed optimizer shards over the data-parallel group with cp for
    // dense parameters and over the expert-data-parallel group for experts (replicas over
    // dp_replicate).
    a.opt = CheckedAdd(a.opt, CheckedMul(Ceil(a.zero1_dense, d.dp_shard * d.cp), master_b + moments_b, "optimizer bytes"),
                       "optimizer bytes");
    a.opt = CheckedAdd(a.opt, CheckedMul(Ceil(a.zero1_sparse, d.efsdp), master_b + moments_b, "optimizer bytes"),
                       "optimizer bytes");
    m.params_by_role[group] = a.params;
    m.grads_by_role[group] = a.grads;
    if (a.opt) m.optimizer_by_role[group] = a.opt;
    m.params_bytes = CheckedAdd(m.params_bytes, a.params, "params bytes");
    m.grads_bytes = CheckedAdd(m.grads_bytes, a.grads, "grads bytes");
    m.optimizer_bytes = CheckedAdd(m.optimizer_bytes, a.opt, "optimizer bytes");
  }
  return m;
}

LayerActivationBytes LayerActivations(const ModelSpec& m, Recompute rc, const Workload& w, bool moe_layer) {
  const auto& a = m.attention;
  const bool selective = rc == Recompute::kSelective;
  const int64_t ab = w.act_bytes, t = w.tp_shards, T = w.tokens, h = m.hidden_size;
  const int64_t ts = Ceil(T, t);  // sequence-parallel shard of the residual stream
  // Terms are products of at most four factors bounded by 2^53 (rows) or 2^41 (widths): they are
  // formed in 128 bits and narrowed, with a check, when stored.
  using Wide = __int128;
  auto mul = [](Wide x, Wide y) { return x * y; };
  auto narrow = [&](Wide v) {
    if (v > static_cast<Wide>(INT64_MAX)) {
      throw Error(fmt::format("activation bytes of one micro-batch overflow a signed 64-bit integer (tokens per rank {}, "
                              "hidden_size {})", T, h));
    }
    return static_cast<int64_t>(v);
  };
  LayerActivationBytes g;
  g.moe_layer = moe_layer;
  g.shared_experts_present = moe_layer && m.moe.num_shared_experts > 0;
  // Attention block: norm input (+ its output unless recomputed), projections, core output.
  Wide attn = mul(ts, h) + (selective ? 0 : mul(ts, h));
  const int64_t heads_local = a.num_attention_heads / t;
  if (a.kind == AttentionKind::kGqa) {
    const int64_t q_out = a.num_attention_heads * a.head_dim, kv_out = a.num_key_value_heads * a.head_dim;
    attn += mul(T, (q_out + 2 * kv_out) / t) + mul(T, q_out / t);
  } else {
    const int64_t qk = a.qk_nope_head_dim + a.qk_rope_head_dim;
    if (a.q_lora_rank > 0) attn += mul(T, a.q_lora_rank) * (selective ? 1 : 2);  // q_a out (+ its norm)
    attn += mul(T, heads_local * qk);                                             // q
    attn += mul(T, a.kv_lora_rank + a.qk_rope_head_dim) + (selective ? 0 : mul(T, a.kv_lora_rank));
    attn += mul(T, heads_local * (a.qk_nope_head_dim + a.v_head_dim));           // kv_b out
    attn += mul(T, heads_local * a.v_head_dim);                                  // core out
  }
  g.attention = narrow(mul(attn, ab) + mul(mul(T, heads_local), 4));  // + flash-attention logsumexp, fp32
  // MLP block: post-attention norm input (+ output).
  Wide norm = mul(ts, h) + (selective ? 0 : mul(ts, h));
  g.norm = narrow(mul(norm, ab));
  const int64_t keep_f = selective ? 2 : 4;  // gate, up (+ silu(gate), product)
  if (!moe_layer) {
    g.dense_mlp = narrow(mul(mul(mul(T, m.intermediate_size / t), keep_f), ab));
  } else {
    const int64_t E = m.moe.num_experts, k = m.moe.top_k;
    // Router: logits and scores in fp32, top-k weights fp32 and indices int64.
    g.router = narrow(mul(mul(w.routed_tokens, E), 8) + mul(mul(w.routed_tokens, k), 12));
    // Routed experts (NOT divided by EP: tokens are exchanged, not removed): received rows
    // R_max in and out, 4 (or 2) intermediate tensors of F / expert-TP, and the combined
    // copies of this rank's own T_r * top_k rows.
    Wide rows = mul(w.received_rows, 2 * h) + mul(mul(w.received_rows, w.expert_f_local), keep_f) +
                   mul(w.mean_received_rows, h);
    g.routed_experts = narrow(mul(rows, ab));
    if (g.shared_experts_present) {
      g.shared_experts = narrow(mul(mul(mul(T, m.moe.shared_expert_intermediate_size / t), keep_f), ab));
    }
  }
  return g;
}

std::map<std::string, int64_t> ActivationBytesPerMicrobatch(const Plan& plan, const Workload& w, int64_t stage) {
  const auto& m = plan.model;
  const Recompute rc = plan.training.recompute;
  const int64_t ab = w.act_bytes, t = w.tp_shards, T = w.tokens, h = m.hidden_size;
  const int64_t ts = Ceil(T, t);  // sequence-parallel shard of the residual stream
  using Wide = __int128;
  auto mul = [](Wide x, Wide y) { return x * y; };
  auto narrow = [&](Wide v) {
    if (v > static_cast<Wide>(INT64_MAX)) {
      throw Error(fmt::format("activation bytes of one micro-batch overflow a signed 64-bit integer (tokens per rank {}, "
                              "hidden_size {})", T, h));
    }
    return static_cast<int64_t>(v);
  };
  // One layer's activations by group (bytes), no recomputation applied except `selective`.
  auto layer = [&](int64_t l) {
    const LayerActivationBytes b = LayerActivations(m, rc, w, m.moe_layers[l]);
    std::map<std::string, int64_t> g;
    g["attention"] = b.attention;
    g["norm"] = b.norm;
    if (!b.moe_layer) {
      g["dense_mlp"] = b.dense_mlp;
    } else {
      g["router"] = b.router;
      g["routed_experts"] = b.routed_experts;
      if (b.shared_experts_present) g["shared_experts"] = b.shared_experts;
    }
    return g;
  };
  std::map<std::string, int64_t> total;
  std::map<std::string, int64_t> largest_layer;
  int64_t largest = -1;
  for (int64_t l = 0; l < m.num_hidden_layers; ++l) {
    if (plan.layer_stage[l] != stage) continue;
    auto g = layer(l);
    if (rc == Recompute::kFull) {
      // Full recomputation keeps each layer's input; one layer is rebuilt at a time in backward.
      total["checkpoints"] = CheckedAdd(total["checkpoints"], narrow(mul(mul(ts, h), ab)), "activation bytes");
      int64_t sum = 0;
      for (const auto& [k, v] : g) sum = CheckedAdd(sum, v, "activation bytes");
      if (sum > largest) {
        largest = sum;
        largest_layer = g;
      }
    } else {
      for (const auto& [k, v] : g) total[k] = CheckedAdd(total[k], v, "activation bytes");
    }
  }
  if (rc == Recompute::kFull) {
    for (const auto& [k, v] : largest_layer) total[k] = CheckedAdd(total[k], v, "activation bytes");
  }
  if (stage == 0) total["embedding"] = CheckedAdd(total["embedding"], narrow(mul(mul(ts, h), ab)), "activation bytes");
  return total;
}

MemoryReport ComputeMemory(const Plan& plan) {
  MemoryReport r;
  r.workload = ComputeWorkload(plan);
  r.budget_gib = plan.training.gpu_memory_gib;
  const auto& w = r.workload;
  const auto& t = plan.training;
  const auto& d = plan.dims;
  const int64_t param_b = DtypeBytes(t.param_dtype, "param_dtype");
  const int64_t grad_b = DtypeBytes(t.grad_dtype, "grad_dtype");
  const int64_t h = plan.model.hidden_size;
  const int64_t stage_size = d.stage_size();
  r.worst_peak_bytes = -1;
  for (int64_t s = 0; s < d.pp; ++s) {
    StageMemory sm;
    sm.stage = s;
    sm.in_flight_microbatches = InFlightMicrobatches(plan, s);
    // Activations: per micro-batch times the micro-batches in flight (full recomputation: the
    // checkpoints are per micro-batch, the one rebuilt layer is not).
    auto per_mb = ActivationBytesPerMicrobatch(plan, w, s);
    std::map<std::string, int64_t> acts;
    if (t.recompute == Recompute::kFull) {
      // The one rebuilt layer exists once; the layer inputs and the embedding output are kept
      // for every micro-batch in flight.
      acts = per_mb;
      for (const char* kept : {"checkpoints", "embedding"}) {
        if (per_mb.count(kept)) acts[kept] = CheckedMul(per_mb[kept], sm.in_flight_microbatches, "activation bytes");
      }
    } else {
      for (const auto& [k, v] : per_mb) acts[k] = CheckedMul(v, sm.in_flight_microbatches, "activation bytes");
    }
    if (s == d.pp - 1) {
      // Logits of the current micro-batch in fp32 for the loss, vocab-parallel over tp.
      acts["logits"] = CheckedMul(CheckedMul(w.tokens, Ceil(plan.model.vocab_size, d.tp), "logits"), 4, "logits");
    }
    int64_t act_total = 0;
    for (const auto& [k, v] : acts) act_total = CheckedAdd(act_total, v, "activation bytes");

    // Communication buffers (transient, one layer at a time).
    std::map<std::string, int64_t> buffers;
    const int64_t first = s * stage_size;
    if (*t.dp_sharding == DpSharding::kFsdp) {
      // FSDP units as torchtitan wraps them: each decoder layer's dense part, each layer's routed
      // experts, the embedding, and the root (final norm + lm_head).
      // Unit key: (layer, on the sparse mesh); embedding = (-1, false), root = (-2, false).
      std::map<std::pair<int64_t, bool>, int64_t> units;
      for (size_t i = 0; i < plan.inventory.params.size(); ++i) {
        if (plan.placements[i].stage != s) continue;
        const auto& p = plan.inventory.params[i];
        // torchtitan wraps a layer's experts separately only when they live on the sparse mesh.
        const auto unit = p.layer >= 0 ? std::make_pair(p.layer, plan.placements[i].sparse_mesh)
                                       : std::make_pair<int64_t, bool>(p.role == Role::kEmbedding ? -1 : -2, false);
        units[unit] = CheckedAdd(units[unit], ModelParallelNumel(plan, i, first), "FSDP unit elements");
      }
      int64_t largest = 0;
      for (const auto& [u, n] : units) largest = std::max(largest, n);
      buffers["fsdp_all_gather"] = CheckedMul(CheckedMul(largest, param_b, "fsdp buffer"), 2, "fsdp buffer");
      buffers["fsdp_reduce_scatter"] = CheckedMul(largest, grad_b, "fsdp buffer");
    }
    bool has_moe = false;
    for (int64_t l = 0; l < plan.model.num_hidden_layers; ++l) has_moe = has_moe || (plan.layer_stage[l] == s && plan.model.moe_layers[l]);
    if (d.ep > 1 && has_moe) {
      if (t.dispatcher == "deredundency") {
        const int64_t oep = DeredundencyOep(plan);
        // All-gather output over oep and the reduce-scatter whiteboard of the same size.
        buffers["deredundency"] = CheckedMul(CheckedMul(CheckedMul(oep, w.mean_received_rows, "buffer"), h, "buffer"),
                                             2 * w.act_bytes, "buffer");
      }
      // Dispatch send (T_r * top_k rows) and receive (R_max rows) buffers.
      buffers["all_to_all"] = CheckedMul(CheckedMul(w.mean_received_rows + w.received_rows, h, "buffer"), w.act_bytes, "buffer");
    }
    if (d.tp > 1) buffers["tp_all_gather"] = CheckedMul(CheckedMul(w.tokens, h, "buffer"), w.act_bytes, "buffer");
    if (d.pp > 1) buffers["pp_send_recv"] = CheckedMul(CheckedMul(Ceil(w.tokens, d.tp), h, "buffer"), 2 * w.act_bytes, "buffer");
    int64_t buf_total = 0;
    for (const auto& [k, v] : buffers) buf_total = CheckedAdd(buf_total, v, "buffer bytes");

    sm.worst.peak_bytes = -1;
    // The first rank of a stage is a worst rank: it has coordinate 0 on every axis, so it takes
    // chunk 0 in every shard step, and torch.chunk's chunk sizes never grow with the index; every
    // static kind grows with the local elements, and activations and buffers are the same on
    // every rank of the stage.
    {
      MemoryBreakdown b = StaticMemoryOnRank(plan, first);
      b.activations_bytes = act_total;
      b.activations_by_role = acts;
      b.comm_buffers_bytes = buf_total;
      b.comm_buffers_by_use = buffers;
      b.peak_bytes = CheckedAdd(CheckedAdd(CheckedAdd(b.params_bytes, b.grads_bytes, "peak"),
                                           CheckedAdd(b.optimizer_bytes, act_total, "peak"), "peak"),
                                buf_total, "peak");
      sm.worst = std::move(b);
      sm.worst_rank = first;
    }
    if (sm.worst.peak_bytes > r.worst_peak_bytes) {
      r.worst_peak_bytes = sm.worst.peak_bytes;
      r.worst_rank = sm.worst_rank;
    }
    r.stages.push_back(std::move(sm));
  }
  if (r.budget_gib > 0) {
    for (const auto& sm : r.stages) {
      if (static_cast<double>(sm.worst.peak_bytes) > r.budget_gib * 1073741824.0) r.over_budget_ranks.push_back(sm.worst_rank);
    }
  }
  return r;
}

}  // namespace dockyard
