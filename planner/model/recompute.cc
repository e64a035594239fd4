// Selective recomputation by module (see recompute.h).
#include "planner/model/recompute.h"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "planner/base/error.h"

namespace dockyard {

const std::vector<std::string>& RecomputeModuleNames() {
  static const std::vector<std::string> names = {"core_attn", "layernorm", "moe_act", "moe", "mla_up_proj", "shared_experts", "mlp"};
  return names;
}

RecomputeSet DefaultSelectiveSet() {
  RecomputeSet s;
  s.layernorm = s.moe_act = s.mlp_act = s.shared_act = true;
  return s;
}

RecomputeSet RecomputeSetOf(const TrainingConfig& t) {
  if (t.recompute != Recompute::kSelective) return {};
  if (LayerSacEvery(t) > 0 || OpSac(t)) return {};  // torchtitan per-layer / per-op: no module set
  if (t.recompute_modules.empty()) return DefaultSelectiveSet();
  RecomputeSet s;
  for (const std::string& m : t.recompute_modules) {
    if (m == "core_attn")
      s.core_attn = true;
    else if (m == "layernorm")
      s.layernorm = true;
    else if (m == "moe_act")
      s.moe_act = true;
    else if (m == "moe")
      s.moe = true;
    else if (m == "mla_up_proj")
      s.mla_up_proj = true;
    else if (m == "shared_experts")
      s.shared_experts = true;
    else if (m == "mlp")
      s.mlp = true;
    else
      throw Error(fmt::format("recompute_modules: unknown module \"{}\"", m));
  }
  return s;
}

void ValidateRecomputeModules(const TrainingConfig& t, const std::string& field) {
  const auto& names = RecomputeModuleNames();
  std::vector<std::string> seen;
  for (const std::string& m : t.recompute_modules) {
    if (std::find(names.begin(), names.end(), m) == names.end()) {
      throw Error(fmt::format("{}: unknown module \"{}\"; modules (Megatron --recompute-modules): {}", field, m, fmt::join(names, ", ")));
    }
    if (std::find(seen.begin(), seen.end(), m) != seen.end()) throw Error(fmt::format("{}: module \"{}\" given twice", field, m));
    seen.push_back(m);
  }
  if (!t.recompute_modules.empty() && t.recompute != Recompute::kSelective) {
    throw Error(
        fmt::format("{}: modules are only recomputed with recompute selective, recompute is {} (give --recompute selective, or "
                    "training.recompute \"selective\" in a spec)",
                    field, RecomputeName(t.recompute)));
  }
}

void ValidateRecomputeModulesForModel(const TrainingConfig& t, const ModelSpec& m) {
  auto given = [&](const char* module) {
    return std::find(t.recompute_modules.begin(), t.recompute_modules.end(), module) != t.recompute_modules.end();
  };
  if (given("mla_up_proj") && m.attention.kind != AttentionKind::kMla) {
    throw Error(
        fmt::format("recompute_modules (--recompute-modules): \"mla_up_proj\" recomputes multi-latent attention's up-projections, and "
                    "{} has GQA attention (no kv_lora_rank); Megatron allows mla_up_proj only with multi_latent_attention",
                    m.name));
  }
  if (given("shared_experts") && m.moe.num_shared_experts == 0) {
    throw Error(
        fmt::format("recompute_modules (--recompute-modules): \"shared_experts\" recomputes the shared-expert MLP, and {} has no "
                    "shared experts (num_shared_experts 0); drop the module",
                    m.name));
  }
}

RecomputeExtraUs SelectiveRecomputeUs(const RecomputeSet& s, const RecomputeForwardUs& f) {
  RecomputeExtraUs x;
  if (s.layernorm) x.attention += f.norms;
  if (s.core_attn) x.attention += f.attention_core;
  if (s.mla_up_proj) x.attention += f.mla_up_proj;
  if (s.moe) {
    // The whole MoE block again, its all-to-alls included (Megatron's "moe").
    x.router += f.router;
    x.permute += f.permute;
    x.dispatch += f.dispatch;
    x.grouped_gemm += f.grouped_gemm;
    x.unpermute += f.unpermute;
    x.combine += f.combine;
    x.shared_experts += f.shared_experts;
  } else {
    if (s.moe_act) x.grouped_gemm += f.routed_act;
    if (s.shared_experts)
      x.shared_experts += f.shared_experts;
    else if (s.shared_act)
      x.shared_experts += f.shared_act;
  }
  if (s.mlp)
    x.dense_mlp += f.dense_mlp;
  else if (s.mlp_act)
    x.dense_mlp += f.dense_act;
  return x;
}

int64_t LayerSacEvery(const TrainingConfig& t) {
  if (t.recompute != Recompute::kSelective || t.selective_ac_option.empty() || t.selective_ac_option == "op") return 0;
  const int64_t n = std::stoll(t.selective_ac_option);  // digits only (ValidateSelectiveAcOption)
  return n == 0 ? 1 : n;
}

std::vector<bool> LayerSacCheckpointed(const std::vector<int64_t>& layer_stage, int64_t every) {
  std::vector<bool> out(layer_stage.size(), false);
  std::vector<int64_t> count;  // blocks wrapped so far per rank
  for (size_t l = 0; l < layer_stage.size(); ++l) {
    const size_t s = static_cast<size_t>(layer_stage[l]);
    if (count.size() <= s) count.resize(s + 1, 0);
    out[l] = ++count[s] % every == 0;
  }
  return out;
}

void ValidateSelectiveAcOption(const TrainingConfig& t, const std::string& field) {
  const std::string& v = t.selective_ac_option;
  if (v.empty()) return;
  const bool digits = v.size() <= 9 && std::all_of(v.begin(), v.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
  if (!digits && v != "op") {
    throw Error(
        fmt::format("{}: \"{}\" is not a layer frequency; torchtitan's per-layer option is a non-negative integer N "
                    "(every N-th transformer block checkpointed, at most 9 digits), its per-op option is \"op\"",
                    field, v));
  }
  if (t.recompute != Recompute::kSelective) {
    throw Error(
        fmt::format("{}: {} applies with recompute selective (torchtitan activation_checkpoint.mode \"selective\"), recompute is {}", field,
                    v, RecomputeName(t.recompute)));
  }
  if (!t.recompute_modules.empty()) {
    throw Error(fmt::format("{}: {} {} (torchtitan); it cannot be combined with the Megatron module list recompute_modules ({})", field, v,
                            v == "op" ? "chooses the saved tensors op by op" : "checkpoints whole blocks",
                            fmt::join(t.recompute_modules, ",")));
  }
}

void ValidateSelectiveAcConvention(const TrainingConfig& t, bool torchtitan) {
  if (t.selective_ac_option.empty() || torchtitan) return;
  throw Error(
      fmt::format("selective_ac_option ({}): torchtitan's per-{} selective activation checkpointing needs --convention "
                  "torchtitan; with --convention megatron use --recompute-modules",
                  t.selective_ac_option, t.selective_ac_option == "op" ? "op" : "layer"));
}

bool OpSac(const TrainingConfig& t) {
  return t.recompute == Recompute::kSelective && t.selective_ac_option == "op";
}

std::vector<OpSacLinear> OpSacLinears(const ModelSpec& m, bool moe_layer) {
  const AttentionSpec& a = m.attention;
  const int64_t h = m.hidden_size;
  std::vector<OpSacLinear> out;
  auto add = [&](const char* name, OpSacPart part, int64_t in, int64_t width, LinearTp tp) { out.push_back({name, part, in, width, tp}); };
  constexpr OpSacPart kAttn = OpSacPart::kAttention;
  if (a.kind == AttentionKind::kGqa) {
    // q_proj carries Qwen3-Next's output gate as a second half.
    const int64_t q_out = a.num_attention_heads * a.head_dim * (a.output_gate ? 2 : 1), kv_out = a.num_key_value_heads * a.head_dim;
    if (a.fused_qkv) {
      add("wqkv", kAttn, h, q_out + 2 * kv_out, LinearTp::kColwise);
    } else {
      add("wq", kAttn, h, q_out, LinearTp::kColwise);
      add("wk", kAttn, h, kv_out, LinearTp::kColwise);
      add("wv", kAttn, h, kv_out, LinearTp::kColwise);
    }
    add("wo", kAttn, a.num_attention_heads * a.head_dim, h, LinearTp::kRowwise);
  } else {
    const int64_t heads = a.num_attention_heads, qk = a.qk_nope_head_dim + a.qk_rope_head_dim;
    if (a.q_lora_rank > 0) {
      add("wq_a", kAttn, h, a.q_lora_rank, LinearTp::kReplicated);
      add("wq_b", kAttn, a.q_lora_rank, heads * qk, LinearTp::kColwise);
    } else {
      add("wq", kAttn, h, heads * qk, LinearTp::kColwise);
    }
    add("wkv_a", kAttn, h, a.kv_lora_rank + a.qk_rope_head_dim, LinearTp::kReplicated);
    add("wkv_b", kAttn, a.kv_lora_rank, heads * (a.qk_nope_head_dim + a.v_head_dim), LinearTp::kColwise);
    add("wo", kAttn, heads * a.v_head_dim, h, LinearTp::kRowwise);
  }
  const bool shared = moe_layer && m.moe.num_shared_experts > 0;
  if (!moe_layer || shared) {
    const OpSacPart part = shared ? OpSacPart::kSharedExperts : OpSacPart::kDenseMlp;
    const int64_t f = shared ? m.moe.shared_expert_intermediate_size : m.intermediate_size;
    add("w1", part, h, f, LinearTp::kColwise);
    add("w3", part, h, f, LinearTp::kColwise);
    add("w2", part, f, h, LinearTp::kRowwise);
    if (shared && m.moe.shared_expert_gate) add("shared_expert_gate", part, h, 1, LinearTp::kReplicated);
  }
  // torchtitan: `meta[mm_count_key] += 1` per mm, then MUST_SAVE unless the count is even.
  for (size_t i = 0; i < out.size(); ++i) out[i].saved = (i + 1) % 2 == 1;
  return out;
}

namespace {
// How a user may have asked for per-op checkpointing without typing "op".
constexpr const char* kOpSacNamed =
    "torchtitan's per-op selective AC: --selective-ac-option op, or a bare --recompute selective under --convention torchtitan";
}  // namespace

void ValidateOpSac(const TrainingConfig& t, const ModelSpec& m) {
  if (!OpSac(t)) return;
  if (m.NumLinearAttentionLayers() > 0) {
    throw Error(
        fmt::format("selective_ac_option (op; {}): {} has {} linear-attention layers, whose ops torchtitan's per-op policy is not "
                    "modelled for; use recompute full, none or a layer frequency",
                    kOpSacNamed, m.name, m.NumLinearAttentionLayers()));
  }
  if (m.attention.indexer.present()) {
    throw Error(
        fmt::format("selective_ac_option (op; {}): {} has DeepSeek Sparse Attention's indexer (index_n_heads {}), whose ops "
                    "torchtitan's per-op policy is not modelled for; use recompute full, none or a layer frequency",
                    kOpSacNamed, m.name, m.attention.indexer.index_n_heads));
  }
  if (t.precision == "fp8") {
    throw Error(fmt::format(
        "selective_ac_option (op; {}) with precision fp8: torchao's float8 linears run as _scaled_mm, which torchtitan's per-op "
        "policy does not count as an mm (current torchtitan saves every one, the per-model lists before it none; not "
        "modelled); use precision bf16, recompute full or none, or a layer frequency (--selective-ac-option N)",
        kOpSacNamed));
  }
}

RecomputeExtraUs OpSacRecomputeUs(const RecomputeForwardUs& f) {
  RecomputeExtraUs x;
  x.attention = f.attention_kernels + f.attention_linears;
  x.tp_comm = f.tp_all_gathers;
  x.router = f.router;
  x.permute = f.permute;
  x.unpermute = f.unpermute;
  x.grouped_gemm = f.grouped_gemm;
  x.shared_experts = f.shared_linears + f.shared_act;
  x.dense_mlp = f.dense_linears + f.dense_act;
  return x;
}

}  // namespace dockyard
