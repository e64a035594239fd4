// ModelSpec: the supported families, dtypes and the spec's validation (docs/model-spec.md).
#include "planner/model/model_spec.h"

#include <cmath>

#include <fmt/format.h>

#include "planner/base/error.h"
#include "planner/model/group_limit.h"

namespace dockyard {

const std::vector<FamilyInfo>& SupportedFamilies() {
  static const std::vector<FamilyInfo> families = {
      {"mixtral", "MixtralForCausalLM", "mixtral"},
      {"qwen2_moe", "Qwen2MoeForCausalLM", "qwen2_moe"},
      {"qwen3_moe", "Qwen3MoeForCausalLM", "qwen3_moe"},
      {"deepseek_v2", "DeepseekV2ForCausalLM", "deepseek_v2"},
      {"deepseek_v3", "DeepseekV3ForCausalLM", "deepseek_v3"},
      {"olmoe", "OlmoeForCausalLM", "olmoe"},
      {"gpt_oss", "GptOssForCausalLM", "gpt_oss"},
      {"llama4_text", "Llama4ForCausalLM", "llama4_text"},
      {"dbrx", "DbrxForCausalLM", "dbrx"},
      {"glm4_moe", "Glm4MoeForCausalLM", "glm4_moe"},
      {"phimoe", "PhiMoEForCausalLM", "phimoe"},
      {"deepseek_v32", "DeepseekV32ForCausalLM", "deepseek_v32"},
      {"qwen3_next", "Qwen3NextForCausalLM", "qwen3_next"},
      {"minimax_m2", "MiniMaxM2ForCausalLM", "minimax_m2"},
      {"ernie4_5_moe", "Ernie4_5_MoeForCausalLM", "ernie4_5_moe"},
      {"bailing_moe_v2", "BailingMoeV2ForCausalLM", "bailing_moe"},
  };
  return families;
}

std::string SupportedFamiliesText() {
  std::string out;
  for (const auto& f : SupportedFamilies()) {
    if (!out.empty()) out += ", ";
    out += fmt::format("{} ({})", f.architecture, f.model_type);
  }
  return out + ", Llama4ForConditionalGeneration (llama4, via text_config)";
}

std::string UnknownFamilyRule(const std::string& family, bool suggest) {
  bool known = false;
  std::vector<std::string> names;
  for (const auto& f : SupportedFamilies()) {
    known = known || family == f.family;
    names.push_back(f.family);
  }
  if (known) return "";
  std::string message = fmt::format("unknown family \"{}\"; supported: {}", family, fmt::join(names, ", "));
  if (suggest) {
    if (auto s = DidYouMean(family, names)) message += fmt::format("; did you mean '{}'?", *s);
  }
  return message;
}

GroupLimit GroupLimitOf(const MoeSpec& moe) {
  return GroupLimit{moe.n_group, moe.topk_group, moe.score_correction_bias};
}

int64_t ModelSpec::NumMoeLayers() const {
  int64_t n = 0;
  for (bool b : moe_layers) n += b ? 1 : 0;
  return n;
}

int64_t ModelSpec::NumLinearAttentionLayers() const {
  int64_t n = 0;
  for (bool b : linear_attention_layers) n += b ? 1 : 0;
  return n;
}

int64_t ModelSpec::NumSlidingAttentionLayers() const {
  int64_t n = 0;
  for (bool b : sliding_attention_layers) n += b ? 1 : 0;
  return n;
}

std::string CanonicalDtype(const std::string& dtype) {
  if (dtype == "bf16") return "bfloat16";
  if (dtype == "fp16" || dtype == "half") return "float16";
  if (dtype == "fp32" || dtype == "float") return "float32";
  if (dtype == "fp8") return "float8_e4m3fn";
  return dtype;
}

int64_t DtypeBytes(std::string_view dtype, std::string_view where) {
  // string_view: the comparisons check the length first (the cost model calls this per layout).
  if (dtype == "bfloat16" || dtype == "float16" || dtype == "bf16" || dtype == "fp16") return 2;
  if (dtype == "float32" || dtype == "fp32") return 4;
  if (dtype == "float8_e4m3fn" || dtype == "float8_e5m2" || dtype == "fp8") return 1;
  if (dtype == "float64") return 8;
  throw Error(
      fmt::format("{}: unknown dtype \"{}\"; supported: bfloat16, float16, float32, float8_e4m3fn, float8_e5m2, float64", where, dtype));
}

namespace {

// Where a validated spec came from: a dockyard spec (fields named by their JSON pointer) or an
// HF config (fields named by the normalized field, since the HF key differs per family).
struct Origin {
  const std::string& file;
  bool from_hf;
};

[[noreturn]] void Invalid(const Origin& o, const std::string& field, const std::string& rule) {
  if (o.from_hf) {
    const std::string name = field.substr(field.find_last_of('/') + 1);
    throw Error(fmt::format("{}: {} (normalized from the config): {}", o.file, name, rule));
  }
  throw Error(fmt::format("{}: {}: {}", o.file, field, rule));
}

void Positive(const Origin& o, const char* field, int64_t v) {
  if (v < 1) Invalid(o, field, fmt::format("must be >= 1, got {}", v));
}

// Largest size any single dimension may take: keeps every product of two or three dims far
// from int64 overflow (2^40 * 2^20 < 2^63) while allowing any real model.
constexpr int64_t kMaxDimSize = int64_t{1} << 40;

// The attention block: GQA or MLA sizes, the output gate, the DSA indexer.
void ValidateAttention(const Origin& origin, const AttentionSpec& a) {
  Positive(origin, "/attention/num_attention_heads", a.num_attention_heads);
  if (a.kind == AttentionKind::kGqa) {
    Positive(origin, "/attention/num_key_value_heads", a.num_key_value_heads);
    Positive(origin, "/attention/head_dim", a.head_dim);
    if (a.num_attention_heads % a.num_key_value_heads != 0) {
      Invalid(origin, "/attention/num_key_value_heads",
              fmt::format("num_key_value_heads ({}) must divide num_attention_heads ({}) (grouped-query attention)", a.num_key_value_heads,
                          a.num_attention_heads));
    }
  } else {
    Positive(origin, "/attention/kv_lora_rank", a.kv_lora_rank);
    Positive(origin, "/attention/qk_nope_head_dim", a.qk_nope_head_dim);
    Positive(origin, "/attention/qk_rope_head_dim", a.qk_rope_head_dim);
    Positive(origin, "/attention/v_head_dim", a.v_head_dim);
    if (a.q_lora_rank < 0) {
      Invalid(origin, "/attention/q_lora_rank", fmt::format("must be >= 0 (0 = none), got {}", a.q_lora_rank));
    }
  }
  if (a.output_gate && a.kind != AttentionKind::kGqa) {
    Invalid(origin, "/attention/output_gate", "the gated-attention output gate applies to attention kind \"gqa\" only");
  }
  if (a.indexer.present()) {
    // The indexer's query projection wq_b reads the MLA query latent (DeepSeek-V3.2-Exp model.py).
    if (a.kind != AttentionKind::kMla || a.q_lora_rank < 1) {
      Invalid(origin, "/attention/indexer",
              "the DeepSeek Sparse Attention indexer reads the MLA query latent: it needs attention kind \"mla\" "
              "with q_lora_rank >= 1");
    }
    Positive(origin, "/attention/indexer/index_head_dim", a.indexer.index_head_dim);
    Positive(origin, "/attention/indexer/index_topk", a.indexer.index_topk);
  } else if (a.indexer.index_n_heads < 0) {
    Invalid(origin, "/attention/indexer/index_n_heads", fmt::format("must be >= 1, got {}", a.indexer.index_n_heads));
  }
}

// The Gated DeltaNet block and the per-layer attention kinds it needs.
void ValidateLinearAttention(const Origin& origin, const ModelSpec& m) {
  const auto& la = m.attention.linear;
  if (la.present()) {
    Positive(origin, "/attention/linear_attention/num_key_heads", la.num_key_heads);
    Positive(origin, "/attention/linear_attention/key_head_dim", la.key_head_dim);
    Positive(origin, "/attention/linear_attention/value_head_dim", la.value_head_dim);
    Positive(origin, "/attention/linear_attention/conv_kernel_dim", la.conv_kernel_dim);
    // Each key head serves num_value_heads / num_key_heads value heads (Qwen3NextGatedDeltaNet).
    if (la.num_value_heads % la.num_key_heads != 0) {
      Invalid(origin, "/attention/linear_attention/num_key_heads",
              fmt::format("num_key_heads ({}) must divide num_value_heads ({}) (Gated DeltaNet head groups)", la.num_key_heads,
                          la.num_value_heads));
    }
    if (static_cast<int64_t>(m.linear_attention_layers.size()) != m.num_hidden_layers) {
      Invalid(origin, "/attention_layer_types",
              fmt::format("has {} entries, must have one per layer (num_hidden_layers = {})", m.linear_attention_layers.size(),
                          m.num_hidden_layers));
    }
  } else if (la.num_value_heads < 0) {
    Invalid(origin, "/attention/linear_attention/num_value_heads", fmt::format("must be >= 1, got {}", la.num_value_heads));
  } else if (!m.linear_attention_layers.empty()) {
    Invalid(origin, "/attention_layer_types", "lists linear-attention layers, but /attention/linear_attention is absent");
  }
}

// The per-layer MLP kinds, the dense MLP size they need, and the MoE block.
void ValidateMlpAndMoe(const Origin& origin, const ModelSpec& m) {
  if (static_cast<int64_t>(m.moe_layers.size()) != m.num_hidden_layers) {
    Invalid(origin, "/mlp_layer_types",
            fmt::format("has {} entries, must have one per layer (num_hidden_layers = {})", m.moe_layers.size(), m.num_hidden_layers));
  }
  if (m.NumMoeLayers() == 0) Invalid(origin, "/mlp_layer_types", "no MoE layer: dockyard plans MoE models");
  if (m.NumMoeLayers() < m.num_hidden_layers && m.intermediate_size < 1) {
    Invalid(origin, "/intermediate_size",
            fmt::format("must be >= 1 when the model has dense MLP layers ({} of {}), got {}", m.num_hidden_layers - m.NumMoeLayers(),
                        m.num_hidden_layers, m.intermediate_size));
  }
  Positive(origin, "/moe/num_experts", m.moe.num_experts);
  Positive(origin, "/moe/moe_intermediate_size", m.moe.moe_intermediate_size);
  if (m.moe.top_k < 1 || m.moe.top_k > m.moe.num_experts) {
    Invalid(origin, "/moe/top_k", fmt::format("top_k ({}) must satisfy 1 <= top_k <= num_experts ({})", m.moe.top_k, m.moe.num_experts));
  }
  if (m.moe.num_shared_experts < 0) {
    Invalid(origin, "/moe/num_shared_experts", fmt::format("must be >= 0, got {}", m.moe.num_shared_experts));
  }
  if (m.moe.num_shared_experts > 0) Positive(origin, "/moe/shared_expert_intermediate_size", m.moe.shared_expert_intermediate_size);
  if (m.moe.score_func != "softmax" && m.moe.score_func != "sigmoid") {
    Invalid(origin, "/moe/score_func", fmt::format("must be \"softmax\" or \"sigmoid\", got \"{}\"", m.moe.score_func));
  }
  if (m.moe.expert_bias && m.family == "dbrx") {
    Invalid(origin, "/moe/expert_bias", "DBRX experts (w1 / v1 / w2) have no biases; expert_bias must be false for family dbrx");
  }
}

// Every single size and every width derived from two of them stays <= 2^40, so that products
// of a tensor's dims can be checked without any intermediate wrapping.
void CheckSizeBounds(const Origin& origin, const ModelSpec& m) {
  const auto& a = m.attention;
  const auto& la = a.linear;
  const int64_t heads = a.num_attention_heads;
  const std::pair<const char*, int64_t> dims[] = {{"/vocab_size", m.vocab_size},
                                                  {"/hidden_size", m.hidden_size},
                                                  {"/num_hidden_layers", m.num_hidden_layers},
                                                  {"/intermediate_size", m.intermediate_size},
                                                  {"/attention/num_attention_heads", heads},
                                                  {"/attention/num_key_value_heads", a.num_key_value_heads},
                                                  {"/attention/head_dim", a.head_dim},
                                                  {"/attention/q_lora_rank", a.q_lora_rank},
                                                  {"/attention/kv_lora_rank", a.kv_lora_rank},
                                                  {"/attention/qk_nope_head_dim", a.qk_nope_head_dim},
                                                  {"/attention/qk_rope_head_dim", a.qk_rope_head_dim},
                                                  {"/attention/v_head_dim", a.v_head_dim},
                                                  {"/moe/num_experts", m.moe.num_experts},
                                                  {"/moe/moe_intermediate_size", m.moe.moe_intermediate_size},
                                                  {"/moe/num_shared_experts", m.moe.num_shared_experts},
                                                  {"/moe/shared_expert_intermediate_size", m.moe.shared_expert_intermediate_size},
                                                  {"/attention/indexer/index_n_heads", a.indexer.index_n_heads},
                                                  {"/attention/indexer/index_head_dim", a.indexer.index_head_dim},
                                                  {"/attention/indexer/index_topk", a.indexer.index_topk},
                                                  {"/attention/linear_attention/num_key_heads", la.num_key_heads},
                                                  {"/attention/linear_attention/num_value_heads", la.num_value_heads},
                                                  {"/attention/linear_attention/key_head_dim", la.key_head_dim},
                                                  {"/attention/linear_attention/value_head_dim", la.value_head_dim},
                                                  {"/attention/linear_attention/conv_kernel_dim", la.conv_kernel_dim}};
  for (const auto& [name, v] : dims) {
    if (v > kMaxDimSize) Invalid(origin, name, fmt::format("{} exceeds the largest supported size 2^40 ({})", v, kMaxDimSize));
  }
  // Each factor is <= 2^40, so a product can reach 2^81: compute in 128 bits.
  const std::pair<const char*, __int128> wide[] = {
      {"num_attention_heads * head_dim", static_cast<__int128>(heads) * a.head_dim},
      {"num_key_value_heads * head_dim", static_cast<__int128>(a.num_key_value_heads) * a.head_dim},
      {"num_attention_heads * (qk_nope_head_dim + qk_rope_head_dim)",
       static_cast<__int128>(heads) * (a.qk_nope_head_dim + a.qk_rope_head_dim)},
      {"num_attention_heads * (qk_nope_head_dim + v_head_dim)", static_cast<__int128>(heads) * (a.qk_nope_head_dim + a.v_head_dim)},
      {"2 * moe_intermediate_size", static_cast<__int128>(2) * m.moe.moe_intermediate_size},
      {"index_n_heads * index_head_dim", static_cast<__int128>(a.indexer.index_n_heads) * a.indexer.index_head_dim},
      {"2 * (num_key_heads * key_head_dim + num_value_heads * value_head_dim)",
       2 * (static_cast<__int128>(la.num_key_heads) * la.key_head_dim + static_cast<__int128>(la.num_value_heads) * la.value_head_dim)}};
  for (const auto& [name, v] : wide) {
    if (v > kMaxDimSize) {
      Invalid(origin, name[0] == '2' ? "/moe/moe_intermediate_size" : "/attention",
              fmt::format("{} exceeds the largest supported width 2^40", name));
    }
  }
}

// Sliding-window attention: a positive window with one layer kind per layer, never on a
// linear-attention layer, and no per-layer kinds without a window.
void ValidateSlidingAttention(const Origin& origin, const ModelSpec& m) {
  const int64_t w = m.attention.sliding_window;
  if (w < 0) Invalid(origin, "/attention/sliding_window", fmt::format("must be >= 1 (or absent: no sliding window), got {}", w));
  if (w == 0) {
    if (!m.sliding_attention_layers.empty()) {
      Invalid(origin, "/attention_layer_types", "lists sliding_attention layers, but /attention/sliding_window is absent");
    }
    return;
  }
  if (m.attention.kind != AttentionKind::kGqa) {
    Invalid(origin, "/attention/sliding_window", fmt::format("{}: a sliding window is read for GQA attention only", w));
  }
  if (static_cast<int64_t>(m.sliding_attention_layers.size()) != m.num_hidden_layers) {
    Invalid(origin, "/attention_layer_types",
            fmt::format("has {} entries, must have one per layer (num_hidden_layers = {}) with /attention/sliding_window {}",
                        m.sliding_attention_layers.size(), m.num_hidden_layers, w));
  }
  for (int64_t l = 0; l < m.num_hidden_layers; ++l) {
    if (m.sliding_attention_layers[static_cast<size_t>(l)] && m.IsLinearAttentionLayer(l)) {
      Invalid(origin, fmt::format("/attention_layer_types/{}", l), "a layer is either sliding_attention or linear_attention, not both");
    }
  }
}

}  // namespace

void ValidateModelSpec(const ModelSpec& m, const std::string& file, bool from_hf) {
  const Origin origin{file, from_hf};
  // Field names are the JSON pointers of dockyard's model spec (docs/model-spec.md).
  Positive(origin, "/vocab_size", m.vocab_size);
  Positive(origin, "/hidden_size", m.hidden_size);
  Positive(origin, "/num_hidden_layers", m.num_hidden_layers);
  ValidateAttention(origin, m.attention);
  ValidateLinearAttention(origin, m);
  ValidateSlidingAttention(origin, m);
  ValidateMlpAndMoe(origin, m);
  CheckSizeBounds(origin, m);
  if (m.num_hidden_layers > kMaxHiddenLayers) {
    Invalid(origin, "/num_hidden_layers", fmt::format("{} exceeds {}", m.num_hidden_layers, kMaxHiddenLayers));
  }
  DtypeBytes(m.dtype, file + ": /dtype");
  const std::string group_problem = GroupLimitProblem(m.moe.num_experts, m.moe.top_k, m.moe.n_group, m.moe.topk_group);
  if (!group_problem.empty()) Invalid(origin, "/moe/n_group", group_problem);
  if (!std::isfinite(m.moe.routed_scaling_factor) || m.moe.routed_scaling_factor <= 0) {
    Invalid(origin, "/moe/routed_scaling_factor", fmt::format("must be a finite number > 0, got {}", m.moe.routed_scaling_factor));
  }
  if (!std::isfinite(m.moe.swiglu_limit) || m.moe.swiglu_limit < 0) {
    Invalid(origin, "/moe/swiglu_limit",
            fmt::format("must be a finite number > 0 (the experts' activation clamp), or 0 for none, got {}", m.moe.swiglu_limit));
  }
  const std::string family_problem = UnknownFamilyRule(m.family, false);
  if (!family_problem.empty()) Invalid(origin, "/family", family_problem);
}

}  // namespace dockyard
