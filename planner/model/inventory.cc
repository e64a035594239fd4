// Parameter inventory per family (see inventory.h). Shapes follow each family's transformers
// modeling code: nn.Linear weights are [out_features, in_features].
#include "planner/model/inventory.h"

#include <fmt/format.h>

#include "planner/base/checked_math.h"
#include "planner/base/error.h"

namespace dockyard {

const char* RoleName(Role role) {
  switch (role) {
    case Role::kEmbedding:
      return "embedding";
    case Role::kAttnQ:
      return "attention.q";
    case Role::kAttnK:
      return "attention.k";
    case Role::kAttnV:
      return "attention.v";
    case Role::kAttnQkv:
      return "attention.qkv";
    case Role::kAttnO:
      return "attention.o";
    case Role::kAttnQA:
      return "attention.q_a";
    case Role::kAttnQB:
      return "attention.q_b";
    case Role::kAttnKvA:
      return "attention.kv_a";
    case Role::kAttnKvB:
      return "attention.kv_b";
    case Role::kAttnNorm:
      return "attention.norm";
    case Role::kAttnSinks:
      return "attention.sinks";
    case Role::kAttnBias:
      return "attention.bias";
    case Role::kAttnOBias:
      return "attention.o_bias";
    case Role::kAttnIndexer:
      return "attention.indexer";
    case Role::kAttnLinear:
      return "attention.linear";
    case Role::kNorm:
      return "norm";
    case Role::kDenseMlpGate:
      return "dense_mlp.gate";
    case Role::kDenseMlpUp:
      return "dense_mlp.up";
    case Role::kDenseMlpDown:
      return "dense_mlp.down";
    case Role::kRouterGate:
      return "router.gate";
    case Role::kRouterBias:
      return "router.bias";
    case Role::kScoreCorrectionBias:
      return "router.score_correction_bias";
    case Role::kExpertGateUp:
      return "experts.gate_up";
    case Role::kExpertGate:
      return "experts.gate";
    case Role::kExpertUp:
      return "experts.up";
    case Role::kExpertDown:
      return "experts.down";
    case Role::kExpertGateUpBias:
      return "experts.gate_up_bias";
    case Role::kExpertDownBias:
      return "experts.down_bias";
    case Role::kSharedExpertGate:
      return "shared_experts.gate";
    case Role::kSharedExpertUp:
      return "shared_experts.up";
    case Role::kSharedExpertDown:
      return "shared_experts.down";
    case Role::kSharedExpertGateWeight:
      return "shared_experts.sigmoid_gate";
    case Role::kFinalNorm:
      return "final_norm";
    case Role::kLmHead:
      return "lm_head";
    case Role::kLmHeadBias:
      return "lm_head.bias";
  }
  return "unknown";
}

const char* RoleGroup(Role role) {
  switch (role) {
    case Role::kEmbedding:
      return "embedding";
    case Role::kNorm:
    case Role::kFinalNorm:
      return "norm";
    case Role::kDenseMlpGate:
    case Role::kDenseMlpUp:
    case Role::kDenseMlpDown:
      return "dense_mlp";
    case Role::kRouterGate:
    case Role::kRouterBias:
    case Role::kScoreCorrectionBias:
      return "router";
    case Role::kExpertGateUp:
    case Role::kExpertGate:
    case Role::kExpertUp:
    case Role::kExpertDown:
    case Role::kExpertGateUpBias:
    case Role::kExpertDownBias:
      return "routed_experts";
    case Role::kSharedExpertGate:
    case Role::kSharedExpertUp:
    case Role::kSharedExpertDown:
    case Role::kSharedExpertGateWeight:
      return "shared_experts";
    case Role::kLmHead:
    case Role::kLmHeadBias:
      return "lm_head";
    default:
      return "attention";
  }
}

int64_t ParamInfo::Numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n = CheckedMul(n, d, "element count of " + fqn);
  return n;
}

namespace {

// Module path names of one family (HF transformers, fused-expert v5 names).
struct Naming {
  std::string embed = "model.embed_tokens.weight";
  std::string layer = "model.layers.{}.";
  std::string attn = "self_attn.";
  std::string input_norm = "input_layernorm";
  std::string post_norm = "post_attention_layernorm";
  std::string final_norm = "model.norm";
  std::string mlp = "mlp.";     // MoE block and dense MLP prefix
  std::string router = "gate";  // router module inside the MoE block
  std::string shared = "shared_experts.";
  std::string q = "q_proj", k = "k_proj", v = "v_proj", o = "o_proj";
  std::string qkv = "Wqkv";                            // fused q | k | v
  std::string q_norm = "q_norm", k_norm = "k_norm";    // per-head or full-width q/k norms
  std::string score_bias = "e_score_correction_bias";  // router's fp32 selection bias
};

Naming NamingFor(const std::string& family) {
  Naming n;
  if (family == "qwen2_moe" || family == "qwen3_next") n.shared = "shared_expert.";
  if (family == "gpt_oss") n.router = "router";
  if (family == "llama4_text") {
    n.mlp = "feed_forward.";
    n.router = "router";
    n.shared = "shared_expert.";
  }
  if (family == "dbrx") {
    n.embed = "transformer.wte.weight";
    n.layer = "transformer.blocks.{}.";
    n.attn = "norm_attn_norm.attn.";
    n.input_norm = "norm_attn_norm.norm_1";
    n.post_norm = "norm_attn_norm.norm_2";
    n.final_norm = "transformer.norm_f";
    n.mlp = "ffn.";
    n.router = "router.layer";
    n.o = "out_proj";
  }
  if (family == "bailing_moe_v2") {  // Ling 2.0 checkpoints (modeling_bailing_moe_v2.py)
    n.embed = "model.word_embeddings.weight";
    n.attn = "attention.";
    n.qkv = "query_key_value";
    n.o = "dense";
    n.q_norm = "query_layernorm";
    n.k_norm = "key_layernorm";
    n.score_bias = "expert_bias";
  }
  return n;
}

class Builder {
 public:
  explicit Builder(const ModelSpec& m) : m_(m), n_(NamingFor(m.family)) {}

  ParamInventory Build() {
    Add(n_.embed, {m_.vocab_size, m_.hidden_size}, Role::kEmbedding, 0);  // vocab-parallel
    for (int64_t l = 0; l < m_.num_hidden_layers; ++l) {
      layer_ = l;
      prefix_ = fmt::format(n_.layer, l);
      Norm(n_.input_norm);
      if (m_.IsLinearAttentionLayer(l))
        LinearAttention();
      else
        Attention();
      Norm(n_.post_norm);
      if (m_.moe_layers[l])
        Moe();
      else
        DenseMlp(n_.mlp, m_.intermediate_size, Role::kDenseMlpGate);
    }
    layer_ = -1;
    prefix_.clear();
    Add(n_.final_norm + ".weight", {m_.hidden_size}, Role::kFinalNorm, -1);
    if (m_.norm_bias) Add(n_.final_norm + ".bias", {m_.hidden_size}, Role::kFinalNorm, -1);
    if (!m_.tie_word_embeddings) Add("lm_head.weight", {m_.vocab_size, m_.hidden_size}, Role::kLmHead, 0);
    if (m_.lm_head_bias) Add("lm_head.bias", {m_.vocab_size}, Role::kLmHeadBias, 0);
    Totals();
    return std::move(inv_);
  }

 private:
  ParamInfo& Add(const std::string& name, std::vector<int64_t> shape, Role role, int tp_dim) {
    ParamInfo p;
    p.fqn = prefix_ + name;
    p.shape = std::move(shape);
    p.dtype = m_.dtype;
    p.role = role;
    p.layer = layer_;
    p.moe_layer = layer_ >= 0 && m_.moe_layers[layer_];
    p.tp_dim = tp_dim;
    inv_.params.push_back(std::move(p));
    return inv_.params.back();
  }

  void Norm(const std::string& name) {
    Add(name + ".weight", {m_.hidden_size}, Role::kNorm, -1);
    if (m_.norm_bias) Add(name + ".bias", {m_.hidden_size}, Role::kNorm, -1);
  }

  // Column-parallel linear: weight [out, in] sharded on dim 0, its bias on dim 0.
  void Colwise(const std::string& name, int64_t out, int64_t in, Role role, bool bias) {
    Add(name + ".weight", {out, in}, role, 0);
    if (bias) Add(name + ".bias", {out}, Role::kAttnBias, 0);
  }

  void Attention() {
    const auto& a = m_.attention;
    const int64_t d = m_.hidden_size;
    const std::string p = n_.attn;
    if (a.kind == AttentionKind::kMla) {
      const int64_t qk_head = a.qk_nope_head_dim + a.qk_rope_head_dim;
      if (a.q_lora_rank == 0) {
        Colwise(p + "q_proj", a.num_attention_heads * qk_head, d, Role::kAttnQ, false);
      } else {
        Add(p + "q_a_proj.weight", {a.q_lora_rank, d}, Role::kAttnQA, -1);
        Add(p + "q_a_layernorm.weight", {a.q_lora_rank}, Role::kAttnNorm, -1);
        Colwise(p + "q_b_proj", a.num_attention_heads * qk_head, a.q_lora_rank, Role::kAttnQB, false);
      }
      Add(p + "kv_a_proj_with_mqa.weight", {a.kv_lora_rank + a.qk_rope_head_dim, d}, Role::kAttnKvA, -1);
      Add(p + "kv_a_layernorm.weight", {a.kv_lora_rank}, Role::kAttnNorm, -1);
      Colwise(p + "kv_b_proj", a.num_attention_heads * (a.qk_nope_head_dim + a.v_head_dim), a.kv_lora_rank, Role::kAttnKvB, false);
      Add(p + "o_proj.weight", {d, a.num_attention_heads * a.v_head_dim}, Role::kAttnO, 1);
      if (a.o_bias) Add(p + "o_proj.bias", {d}, Role::kAttnOBias, -1);
      if (a.indexer.present()) Indexer();
      return;
    }
    const int64_t q_out = a.num_attention_heads * a.head_dim;
    const int64_t kv_out = a.num_key_value_heads * a.head_dim;
    if (a.fused_qkv) {
      Colwise(p + n_.qkv, q_out + 2 * kv_out, d, Role::kAttnQkv, a.qkv_bias);
      inv_.params[inv_.params.size() - (a.qkv_bias ? 2 : 1)].fused_sections = {q_out, kv_out, kv_out};
      if (a.qkv_bias) inv_.params.back().fused_sections = {q_out, kv_out, kv_out};
    } else {
      // Gated attention (Qwen3-Next): q_proj also emits the output gate, per head [query | gate].
      Colwise(p + n_.q, a.output_gate ? 2 * q_out : q_out, d, Role::kAttnQ, a.qkv_bias);
      Colwise(p + n_.k, kv_out, d, Role::kAttnK, a.qkv_bias);
      Colwise(p + n_.v, kv_out, d, Role::kAttnV, a.qkv_bias);
    }
    Add(p + n_.o + ".weight", {d, q_out}, Role::kAttnO, 1);
    if (a.o_bias) Add(p + n_.o + ".bias", {d}, Role::kAttnOBias, -1);
    if (a.qk_norm == QkNorm::kPerHead) {
      Add(p + n_.q_norm + ".weight", {a.head_dim}, Role::kAttnNorm, -1);
      Add(p + n_.k_norm + ".weight", {a.head_dim}, Role::kAttnNorm, -1);
    } else if (a.qk_norm == QkNorm::kFullWidth) {
      // OLMoE normalizes the whole projection; under TP each rank holds its heads' slice.
      Add(p + n_.q_norm + ".weight", {q_out}, Role::kAttnNorm, 0);
      Add(p + n_.k_norm + ".weight", {kv_out}, Role::kAttnNorm, 0);
    }
    if (a.sinks) Add(p + "sinks", {a.num_attention_heads}, Role::kAttnSinks, 0);
  }

  // DeepSeek-V3.2-Exp inference/model.py `Indexer` (HF names self_attn.indexer.*): the query
  // projection from the q latent, one shared key head, its LayerNorm and the per-head weights.
  // Served replicated across TP (vLLM deepseek_v2.py Indexer: ReplicatedLinear).
  void Indexer() {
    const auto& ix = m_.attention.indexer;
    const std::string p = n_.attn + "indexer.";
    Add(p + "wq_b.weight", {ix.index_n_heads * ix.index_head_dim, m_.attention.q_lora_rank}, Role::kAttnIndexer, -1);
    Add(p + "wk.weight", {ix.index_head_dim, m_.hidden_size}, Role::kAttnIndexer, -1);
    Add(p + "k_norm.weight", {ix.index_head_dim}, Role::kAttnIndexer, -1);
    Add(p + "k_norm.bias", {ix.index_head_dim}, Role::kAttnIndexer, -1);
    Add(p + "weights_proj.weight", {ix.index_n_heads, m_.hidden_size}, Role::kAttnIndexer, -1);
  }

  // Gated DeltaNet (transformers modeling_qwen3_next.py Qwen3NextGatedDeltaNet, HF names
  // linear_attn.*): in_proj_qkvz [2·Kd + 2·Vd, D] and in_proj_ba [2·Hv, D] (grouped per key
  // head, so a plain split by heads is exact), the depthwise causal conv1d over q | k | v
  // [2·Kd + Vd, 1, kernel], dt_bias and A_log [Hv], the gated RMSNorm [hv] and out_proj
  // [D, Vd]; Kd = key heads · key_head_dim, Vd = value heads · value_head_dim. TP shards heads
  // (vLLM qwen3_next.py).
  void LinearAttention() {
    const auto& la = m_.attention.linear;
    const int64_t d = m_.hidden_size;
    const int64_t kd = la.num_key_heads * la.key_head_dim, vd = la.num_value_heads * la.value_head_dim;
    const std::string p = "linear_attn.";
    Add(p + "in_proj_qkvz.weight", {2 * kd + 2 * vd, d}, Role::kAttnLinear, 0);
    Add(p + "in_proj_ba.weight", {2 * la.num_value_heads, d}, Role::kAttnLinear, 0);
    Add(p + "conv1d.weight", {2 * kd + vd, 1, la.conv_kernel_dim}, Role::kAttnLinear, 0).fused_sections = {kd, kd, vd};
    Add(p + "dt_bias", {la.num_value_heads}, Role::kAttnLinear, 0);
    Add(p + "A_log", {la.num_value_heads}, Role::kAttnLinear, 0);
    Add(p + "norm.weight", {la.value_head_dim}, Role::kAttnLinear, -1);
    Add(p + "out_proj.weight", {d, vd}, Role::kAttnLinear, 1);
  }

  // SwiGLU MLP: gate/up column-parallel, down row-parallel. `first_role` is the gate role of
  // the dense MLP or of the shared expert; up and down follow it in the Role enum.
  void DenseMlp(const std::string& prefix, int64_t f, Role gate_role) {
    const int64_t d = m_.hidden_size;
    Add(prefix + "gate_proj.weight", {f, d}, gate_role, 0);
    Add(prefix + "up_proj.weight", {f, d}, static_cast<Role>(static_cast<int>(gate_role) + 1), 0);
    Add(prefix + "down_proj.weight", {d, f}, static_cast<Role>(static_cast<int>(gate_role) + 2), 1);
  }

  ParamInfo& Expert(const std::string& name, std::vector<int64_t> shape, Role role, int tp_dim, const char* layout) {
    ParamInfo& p = Add(n_.mlp + name, std::move(shape), role, tp_dim);
    p.routed_expert = true;
    p.stored_layout = layout;
    return p;
  }

  void Moe() {
    const auto& e = m_.moe;
    const int64_t d = m_.hidden_size, E = e.num_experts, f = e.moe_intermediate_size;
    Add(n_.mlp + n_.router + ".weight", {E, d}, Role::kRouterGate, -1);
    if (e.router_bias) Add(n_.mlp + n_.router + ".bias", {E}, Role::kRouterBias, -1);
    if (e.score_correction_bias) {
      // A float32 buffer in HF (modeling_deepseek_v3.py), counted as a parameter in published totals.
      Add(n_.mlp + n_.router + "." + n_.score_bias, {E}, Role::kScoreCorrectionBias, -1).dtype = "float32";
    }
    if (m_.family == "gpt_oss") {
      // gpt-oss: [E, D, 2F] with gate/up interleaved on the last dim, biases per expert.
      Expert("experts.gate_up_proj", {E, d, 2 * f}, Role::kExpertGateUp, 2, "[E, D, 2F] (gate/up interleaved)");
      if (e.expert_bias) Expert("experts.gate_up_proj_bias", {E, 2 * f}, Role::kExpertGateUpBias, 1, "[E, 2F] (interleaved)");
      Expert("experts.down_proj", {E, f, d}, Role::kExpertDown, 1, "[E, F, D]");
      if (e.expert_bias) Expert("experts.down_proj_bias", {E, d}, Role::kExpertDownBias, -1, "[E, D]");
    } else if (m_.family == "llama4_text") {
      Expert("experts.gate_up_proj", {E, d, 2 * f}, Role::kExpertGateUp, 2, "[E, D, 2F] (gate | up halves)").fused_sections = {f, f};
      if (e.expert_bias) Expert("experts.gate_up_proj_bias", {E, 2 * f}, Role::kExpertGateUpBias, 1, "[E, 2F]").fused_sections = {f, f};
      Expert("experts.down_proj", {E, f, d}, Role::kExpertDown, 1, "[E, F, D]");
      if (e.expert_bias) Expert("experts.down_proj_bias", {E, d}, Role::kExpertDownBias, -1, "[E, D]");
    } else if (m_.family == "dbrx") {
      Expert("experts.mlp.w1", {E, f, d}, Role::kExpertGate, 1, "[E*F, D] stored, viewed [E, F, D]");
      Expert("experts.mlp.v1", {E, f, d}, Role::kExpertUp, 1, "[E*F, D] stored, viewed [E, F, D]");
      Expert("experts.mlp.w2", {E, f, d}, Role::kExpertDown, 1, "[E*F, D] stored, viewed [E, F, D] (in x out)");
    } else {
      // transformers v5 fused experts: gate rows [:F], up rows [F:].
      Expert("experts.gate_up_proj", {E, 2 * f, d}, Role::kExpertGateUp, 1, "[E, 2F, D] (gate | up halves)").fused_sections = {f, f};
      if (e.expert_bias) Expert("experts.gate_up_proj_bias", {E, 2 * f}, Role::kExpertGateUpBias, 1, "[E, 2F]").fused_sections = {f, f};
      Expert("experts.down_proj", {E, d, f}, Role::kExpertDown, 2, "[E, D, F]");
      if (e.expert_bias) Expert("experts.down_proj_bias", {E, d}, Role::kExpertDownBias, -1, "[E, D]");
    }
    if (e.num_shared_experts > 0) {
      DenseMlp(n_.mlp + n_.shared, e.shared_expert_intermediate_size, Role::kSharedExpertGate);
      if (e.shared_expert_gate) Add(n_.mlp + "shared_expert_gate.weight", {1, d}, Role::kSharedExpertGateWeight, -1);
    }
  }

  void Totals() {
    ParamTotals& t = inv_.totals;
    int64_t routed_active = 0;
    for (const auto& p : inv_.params) {
      const int64_t n = p.Numel();
      try {
        t.total_params = CheckedAdd(t.total_params, n, "total parameter count");
      } catch (const OverflowError& e) {
        // Name the sizes that made it (QA: hidden_size 2^40 named no field).
        throw OverflowError(fmt::format("{}, at {}: the model's sizes are too large (/hidden_size {}, /num_hidden_layers {}, "
                                        "/vocab_size {}, /moe/num_experts {}, /moe/moe_intermediate_size {})",
                                        e.what(), p.fqn, m_.hidden_size, m_.num_hidden_layers, m_.vocab_size, m_.moe.num_experts,
                                        m_.moe.moe_intermediate_size));
      }
      if (p.routed_expert) {
        t.routed_expert_params += n;
        routed_active += CheckedMul(n / m_.moe.num_experts, m_.moe.top_k, "active expert parameters");  // exact: dim 0 is E
      }
      if (RoleGroup(p.role) == std::string("shared_experts")) t.shared_expert_params += n;
      if (p.role == Role::kEmbedding) t.embedding_params += n;
    }
    t.non_expert_params = t.total_params - t.routed_expert_params;
    t.active_params = t.non_expert_params + routed_active;
    t.active_params_excluding_embedding = m_.tie_word_embeddings ? t.active_params : t.active_params - t.embedding_params;
  }

  const ModelSpec& m_;
  Naming n_;
  ParamInventory inv_;
  int64_t layer_ = -1;
  std::string prefix_;
};

}  // namespace

ParamInventory BuildInventory(const ModelSpec& spec) {
  try {
    return Builder(spec).Build();
  } catch (const Error& e) {
    // Name the model's file (or, built in code, its name) in overflow errors.
    throw Error(fmt::format("{}: {}", spec.source.empty() ? spec.name : spec.source, e.what()));
  }
}

}  // namespace dockyard
