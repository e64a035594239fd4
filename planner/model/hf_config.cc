// HuggingFace config.json -> ModelSpec, one reader per family. Key names and defaults follow
// each family's transformers configuration class (configuration_<family>.py).
#include "planner/model/hf_config.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "planner/base/error.h"
#include "planner/model/hf_config_variants.h"

namespace dockyard {
namespace {

std::string Dtype(const JsonView& c) {
  // torch_dtype (transformers <= 4.55) or dtype (newer); the training default is bf16.
  std::string dtype = CanonicalDtype(c.StringOr("torch_dtype", c.StringOr("dtype", "bfloat16")));
  DtypeBytes(dtype, c.Where(c.Has("torch_dtype") ? "torch_dtype" : "dtype"));
  return dtype;
}

// 1 <= top_k <= num_experts, reported against the family's own HF key.
void CheckTopK(const JsonView& c, const std::string& key, const ModelSpec& m) {
  if (m.moe.top_k > m.moe.num_experts) {
    c.Fail(key, fmt::format("top_k ({}) must satisfy 1 <= top_k <= num_experts ({})", m.moe.top_k, m.moe.num_experts));
  }
}

void ReadGqa(const JsonView& c, ModelSpec& m) {
  m.attention.kind = AttentionKind::kGqa;
  m.attention.num_attention_heads = c.Int("num_attention_heads");
  m.attention.num_key_value_heads = c.IntOr("num_key_value_heads", m.attention.num_attention_heads);
  if (m.attention.num_attention_heads % m.attention.num_key_value_heads != 0) {
    c.Fail("num_key_value_heads", fmt::format("num_key_value_heads ({}) must divide num_attention_heads ({}) (grouped-query attention)",
                                              m.attention.num_key_value_heads, m.attention.num_attention_heads));
  }
  if (c.Has("head_dim")) {
    m.attention.head_dim = c.Int("head_dim");
  } else {
    if (m.hidden_size % m.attention.num_attention_heads != 0) {
      c.Fail("num_attention_heads", fmt::format("head_dim is absent, so hidden_size ({}) must be divisible by num_attention_heads ({})",
                                                m.hidden_size, m.attention.num_attention_heads));
    }
    m.attention.head_dim = m.hidden_size / m.attention.num_attention_heads;
  }
}

// Layer lists, inventories and reports are materialized per layer: bound the count before anything
// is allocated. Published MoE models have at most 128 layers (Kimi-K2 61, DeepSeek-V3 61,
// Llama-4-Maverick 48, MiniMax-M2 62); 1024 leaves room, and keeps a plan under a few seconds.
constexpr int64_t kMaxLayers = 1024;

// YaRN's attention factor from a config's rope_scaling (AttentionSpec::rope_attention_factor; 1
// for any other rope type or none), as transformers' _compute_yarn_parameters computes it: the
// given attention_factor, else get_mscale(factor, mscale) / get_mscale(factor, mscale_all_dim) when
// both are given and non-zero, else get_mscale(factor); get_mscale(s, m) = 0.1 m ln(s) + 1 (1 for
// s <= 1). Each mscale in [0, 10] keeps the factor within (0, 16].
double RopeAttentionFactor(const JsonView& c) {
  // transformers v5 names the block rope_parameters; either is read, an object or null.
  const char* key = c.Has("rope_scaling") ? "rope_scaling" : c.Has("rope_parameters") ? "rope_parameters" : nullptr;
  if (key == nullptr) return 1.0;
  if (!c.value()[key].is_object()) {
    c.Fail(key, fmt::format("must be an object (rope_type / type, factor, ...) or null, got {}", JsonValueText(c.value()[key])));
  }
  const JsonView r = c.Object(key);
  const std::string type = r.Has("rope_type") ? r.String("rope_type") : r.StringOr("type", "");
  if (type != "yarn") return 1.0;
  if (r.Has("attention_factor")) {
    const double f = r.Number("attention_factor");
    if (!(f > 0 && f <= 16)) r.Fail("attention_factor", fmt::format("must be in (0, 16] (the scale on cos and sin), got {}", f));
    return f;
  }
  if (!r.Has("factor")) r.Fail("factor", "missing: YaRN needs its context-extension factor (transformers refuses a yarn block without one)");
  const double factor = r.Number("factor");
  if (!(factor > 0 && factor <= 1e6)) r.Fail("factor", fmt::format("must be in (0, 1e6] (YaRN's context extension), got {}", factor));
  const auto get_mscale = [factor](double m) { return factor <= 1 ? 1.0 : 0.1 * m * std::log(factor) + 1.0; };
  double ms[2] = {0, 0};
  const char* names[2] = {"mscale", "mscale_all_dim"};
  for (int i = 0; i < 2; ++i) {
    ms[i] = r.NumberOr(names[i], 0);
    if (!(ms[i] >= 0 && ms[i] <= 10)) r.Fail(names[i], fmt::format("must be in [0, 10] (a YaRN mscale; 0 = not given), got {}", ms[i]));
  }
  return ms[0] != 0 && ms[1] != 0 ? get_mscale(ms[0]) / get_mscale(ms[1]) : get_mscale(1.0);
}

void ReadCommon(const JsonView& c, ModelSpec& m) {
  m.vocab_size = c.Int("vocab_size");
  m.hidden_size = c.Int("hidden_size");
  m.num_hidden_layers = c.Int("num_hidden_layers");
  if (m.num_hidden_layers > kMaxLayers) c.Fail("num_hidden_layers", fmt::format("{} exceeds {}", m.num_hidden_layers, kMaxLayers));
  m.tie_word_embeddings = c.BoolOr("tie_word_embeddings", false);
  m.dtype = Dtype(c);
  m.max_position_embeddings = c.IntOr("max_position_embeddings", 0, 0);
  m.rope_scaling = c.Has("rope_scaling");  // present and not null
  m.attention.rope_attention_factor = RopeAttentionFactor(c);
}

// Qwen2-MoE / Qwen3-MoE layer rule (modeling_qwen{2,3}_moe.py): layer i is sparse when
// i not in mlp_only_layers and num_experts > 0 and (i + 1) % decoder_sparse_step == 0.
void QwenMoeLayers(const JsonView& c, ModelSpec& m) {
  int64_t step = c.IntOr("decoder_sparse_step", 1);
  std::vector<int64_t> mlp_only = c.Has("mlp_only_layers") ? c.IntList("mlp_only_layers") : std::vector<int64_t>{};
  for (int64_t l : mlp_only) {
    if (l >= m.num_hidden_layers) {
      c.Fail("mlp_only_layers", fmt::format("layer {} is out of range [0, num_hidden_layers ({}))", l, m.num_hidden_layers));
    }
  }
  m.moe_layers.assign(m.num_hidden_layers, false);
  for (int64_t i = 0; i < m.num_hidden_layers; ++i) {
    bool only_mlp = std::find(mlp_only.begin(), mlp_only.end(), i) != mlp_only.end();
    m.moe_layers[i] = !only_mlp && (i + 1) % step == 0;
  }
}

// DeepSeek-V2/V3 and GLM-4.5 layer rule: MoE when i >= first_k_dense_replace and
// i % moe_layer_freq == 0.
void DeepseekMoeLayers(const JsonView& c, ModelSpec& m) {
  int64_t first_dense = c.IntOr("first_k_dense_replace", 0, 0);
  if (first_dense >= m.num_hidden_layers) {
    c.Fail("first_k_dense_replace", fmt::format("{} leaves no MoE layer: the first {} layers are dense and num_hidden_layers is {}",
                                                first_dense, first_dense, m.num_hidden_layers));
  }
  int64_t freq = c.IntOr("moe_layer_freq", 1);
  m.moe_layers.assign(m.num_hidden_layers, false);
  for (int64_t i = 0; i < m.num_hidden_layers; ++i) m.moe_layers[i] = i >= first_dense && i % freq == 0;
  m.num_nextn_predict_layers = c.IntOr("num_nextn_predict_layers", 0, 0);
}

ModelSpec ReadMixtral(const JsonView& c) {
  ModelSpec m;
  ReadCommon(c, m);
  ReadGqa(c, m);
  m.intermediate_size = 0;
  m.moe.num_experts = c.Int("num_local_experts");
  m.moe.top_k = c.Int("num_experts_per_tok");
  CheckTopK(c, "num_experts_per_tok", m);
  m.moe.moe_intermediate_size = c.Int("intermediate_size");
  m.moe.norm_topk_prob = true;  // Mixtral renormalizes the top-k softmax weights.
  m.moe_layers.assign(m.num_hidden_layers, true);
  return m;
}

ModelSpec ReadPhimoe(const JsonView& c) {
  ModelSpec m = ReadMixtral(c);
  m.attention.qkv_bias = m.attention.o_bias = c.BoolOr("attention_bias", false);
  m.norm = NormKind::kLayerNorm;
  m.norm_bias = true;
  m.lm_head_bias = c.BoolOr("lm_head_bias", false);
  m.moe.norm_topk_prob = false;  // sparsemixer weights
  return m;
}

ModelSpec ReadQwen2Moe(const JsonView& c) {
  ModelSpec m;
  ReadCommon(c, m);
  ReadGqa(c, m);
  m.attention.qkv_bias = true;  // Qwen2 attention: q/k/v projections carry a bias.
  m.intermediate_size = c.Int("intermediate_size");
  m.moe.num_experts = c.Int("num_experts");
  m.moe.top_k = c.Int("num_experts_per_tok");
  CheckTopK(c, "num_experts_per_tok", m);
  m.moe.moe_intermediate_size = c.Int("moe_intermediate_size");
  m.moe.norm_topk_prob = c.BoolOr("norm_topk_prob", false);
  m.moe.shared_expert_intermediate_size = c.Int("shared_expert_intermediate_size", 0);
  m.moe.num_shared_experts = m.moe.shared_expert_intermediate_size > 0 ? 1 : 0;
  m.moe.shared_expert_gate = m.moe.num_shared_experts > 0;
  QwenMoeLayers(c, m);
  return m;
}

ModelSpec ReadQwen3Moe(const JsonView& c) {
  ModelSpec m;
  ReadCommon(c, m);
  ReadGqa(c, m);
  m.attention.qkv_bias = m.attention.o_bias = c.BoolOr("attention_bias", false);
  m.attention.qk_norm = QkNorm::kPerHead;
  m.intermediate_size = c.Int("intermediate_size");
  m.moe.num_experts = c.Int("num_experts");
  m.moe.top_k = c.Int("num_experts_per_tok");
  CheckTopK(c, "num_experts_per_tok", m);
  m.moe.moe_intermediate_size = c.Int("moe_intermediate_size");
  m.moe.norm_topk_prob = c.BoolOr("norm_topk_prob", false);
  QwenMoeLayers(c, m);
  return m;
}

ModelSpec ReadDeepseek(const JsonView& c, bool v3) {
  ModelSpec m;
  ReadCommon(c, m);
  auto& a = m.attention;
  a.kind = AttentionKind::kMla;
  a.num_attention_heads = c.Int("num_attention_heads");
  a.q_lora_rank = c.IntOr("q_lora_rank", 0, 0);  // null in DeepSeek-V2-Lite: no q compression
  a.kv_lora_rank = c.Int("kv_lora_rank");
  a.qk_nope_head_dim = c.Int("qk_nope_head_dim");
  a.qk_rope_head_dim = c.Int("qk_rope_head_dim");
  a.v_head_dim = c.Int("v_head_dim");
  a.qkv_bias = a.o_bias = c.BoolOr("attention_bias", false);
  m.intermediate_size = c.Int("intermediate_size");
  m.moe.num_experts = c.Int("n_routed_experts");
  m.moe.top_k = c.Int("num_experts_per_tok");
  CheckTopK(c, "num_experts_per_tok", m);
  m.moe.moe_intermediate_size = c.Int("moe_intermediate_size");
  ReadSharedExpertsInExpertUnits(c, "n_shared_experts", m);
  m.moe.norm_topk_prob = c.BoolOr("norm_topk_prob", false);
  m.moe.routed_scaling_factor = c.NumberOr("routed_scaling_factor", 1.0);
  m.moe.score_func = c.StringOr("scoring_func", v3 ? "sigmoid" : "softmax");
  if (m.moe.score_func != "softmax" && m.moe.score_func != "sigmoid") {
    c.Fail("scoring_func", fmt::format("must be \"softmax\" or \"sigmoid\", got \"{}\"", m.moe.score_func));
  }
  // MoEGate's three top-k methods (modeling_deepseek.py): greedy, group_limited_greedy, noaux_tc.
  const std::string topk_method = c.StringOr("topk_method", v3 ? "noaux_tc" : "greedy");
  if (topk_method != "greedy" && topk_method != "group_limited_greedy" && topk_method != "noaux_tc") {
    c.Fail("topk_method",
           fmt::format("must be \"greedy\", \"group_limited_greedy\" or \"noaux_tc\" (modeling_deepseek.py MoEGate), got \"{}\"",
                       topk_method));
  }
  // noaux_tc routing keeps a per-expert bias added to the scores for top-k selection.
  m.moe.score_correction_bias = v3 && topk_method == "noaux_tc";
  // Group-limited routing: noaux_tc (V3) and group_limited_greedy (V2) keep topk_group of the
  // n_group expert groups per token (modeling_deepseek.py MoEGate); greedy (V2-Lite) does not.
  if (topk_method == "noaux_tc" || topk_method == "group_limited_greedy") {
    m.moe.n_group = c.IntOr("n_group", 1, 1);
    m.moe.topk_group = c.IntOr("topk_group", m.moe.n_group, 1);
  }
  DeepseekMoeLayers(c, m);
  return m;
}

ModelSpec ReadGlm4Moe(const JsonView& c) {
  ModelSpec m;
  ReadCommon(c, m);
  ReadGqa(c, m);
  m.attention.qkv_bias = c.BoolOr("attention_bias", false);  // o_proj has no bias in Glm4Moe
  m.attention.qk_norm = c.BoolOr("use_qk_norm", false) ? QkNorm::kPerHead : QkNorm::kNone;
  m.intermediate_size = c.Int("intermediate_size");
  m.moe.num_experts = c.Int("n_routed_experts");
  m.moe.top_k = c.Int("num_experts_per_tok");
  CheckTopK(c, "num_experts_per_tok", m);
  m.moe.moe_intermediate_size = c.Int("moe_intermediate_size");
  ReadSharedExpertsInExpertUnits(c, "n_shared_experts", m);
  m.moe.norm_topk_prob = c.BoolOr("norm_topk_prob", true);
  m.moe.routed_scaling_factor = c.NumberOr("routed_scaling_factor", 1.0);
  m.moe.score_func = "sigmoid";
  m.moe.score_correction_bias = true;
  DeepseekMoeLayers(c, m);
  return m;
}

ModelSpec ReadOlmoe(const JsonView& c) {
  ModelSpec m;
  ReadCommon(c, m);
  ReadGqa(c, m);
  m.attention.qkv_bias = m.attention.o_bias = c.BoolOr("attention_bias", false);
  m.attention.qk_norm = QkNorm::kFullWidth;
  m.moe.num_experts = c.Int("num_experts");
  m.moe.top_k = c.Int("num_experts_per_tok");
  CheckTopK(c, "num_experts_per_tok", m);
  m.moe.moe_intermediate_size = c.Int("intermediate_size");
  m.moe.norm_topk_prob = c.BoolOr("norm_topk_prob", false);
  m.moe_layers.assign(m.num_hidden_layers, true);
  return m;
}

// gpt-oss's sliding-window layers (transformers configuration_gpt_oss.py): `sliding_window` keys
// on the layers `layer_types` marks "sliding_attention", every other layer from layer 0 when the
// config has no layer_types (its default); Megatron-Bridge's gpt-oss provider runs the same
// (window_size (sliding_window - 1, 0), window_attn_skip_freq 2).
// transformers' GptOssConfig default window (sliding_window=128) when the key is absent; null is refused.
// Also its default rope block (YaRN, factor 32) when the config has none.
void ReadGptOssSlidingWindow(const JsonView& c, ModelSpec& m) {
  // transformers' GptOssConfig fills in YaRN (factor 32, beta_fast 32, beta_slow 1, original 4,096)
  // when the config gives no rope block: 0.1 ln 32 + 1, as a config that states it.
  if (!c.Has("rope_scaling") && !c.Has("rope_parameters")) m.attention.rope_attention_factor = 0.1 * std::log(32.0) + 1.0;
  c.RefuseNull("sliding_window", "gpt-oss's sliding-window layers need a window (transformers' GptOssConfig default is 128)");
  m.attention.sliding_window = c.Has("sliding_window") ? c.Int("sliding_window") : 128;
  const size_t layers = static_cast<size_t>(m.num_hidden_layers);
  m.sliding_attention_layers.assign(layers, false);
  if (!c.Has("layer_types")) {
    for (size_t i = 0; i < layers; ++i) m.sliding_attention_layers[i] = (i + 1) % 2 != 0;
    return;
  }
  const Json& types = c.value()["layer_types"];
  if (!types.is_array() || types.size() != layers) {
    c.Fail("layer_types", fmt::format("has {}, must be an array with one entry per layer (num_hidden_layers = {})",
                                      types.is_array() ? fmt::format("{} entries", types.size()) : JsonValueText(types), layers));
  }
  for (size_t i = 0; i < layers; ++i) {
    const Json& t = types[i];
    if (!t.is_string() || (t != "sliding_attention" && t != "full_attention")) {
      c.Fail("layer_types", fmt::format("entry {}: must be \"sliding_attention\" or \"full_attention\", got {}", i, JsonValueText(t)));
    }
    m.sliding_attention_layers[i] = t == "sliding_attention";
  }
}

ModelSpec ReadGptOss(const JsonView& c) {
  ModelSpec m;
  ReadCommon(c, m);
  ReadGqa(c, m);
  m.attention.qkv_bias = m.attention.o_bias = c.BoolOr("attention_bias", true);
  m.attention.sinks = true;
  ReadGptOssSlidingWindow(c, m);
  m.moe.num_experts = c.Int("num_local_experts");
  m.moe.top_k = c.Has("num_experts_per_tok") ? c.Int("num_experts_per_tok") : c.Int("experts_per_token");
  CheckTopK(c, c.Has("num_experts_per_tok") ? "num_experts_per_tok" : "experts_per_token", m);
  m.moe.moe_intermediate_size = c.Int("intermediate_size");
  m.moe.expert_bias = true;
  // The experts' activation clamp (GptOssExperts: gate clamped to <= swiglu_limit, up to
  // [-swiglu_limit, swiglu_limit]); transformers' GptOssConfig default 7.0 where the key is absent.
  c.RefuseNull("swiglu_limit", "gpt-oss's experts clamp at a limit (transformers' default 7.0 when the key is absent)");
  m.moe.swiglu_limit = c.NumberOr("swiglu_limit", 7.0);
  if (!(m.moe.swiglu_limit > 0) || !std::isfinite(m.moe.swiglu_limit)) {
    c.Fail("swiglu_limit", fmt::format("must be a finite number > 0 (the experts' activation clamp), got {}", m.moe.swiglu_limit));
  }
  m.moe.router_bias = true;
  m.moe.norm_topk_prob = true;  // softmax over the top-k logits
  m.moe_layers.assign(m.num_hidden_layers, true);
  return m;
}

ModelSpec ReadLlama4Text(const JsonView& c) {
  ModelSpec m;
  ReadCommon(c, m);
  ReadGqa(c, m);
  m.attention.qkv_bias = m.attention.o_bias = c.BoolOr("attention_bias", false);
  // use_qk_norm is a weightless L2 norm in Llama 4: no parameters.
  m.intermediate_size = c.Int("intermediate_size_mlp");
  m.moe.num_experts = c.Int("num_local_experts");
  m.moe.top_k = c.IntOr("num_experts_per_tok", 1);
  CheckTopK(c, "num_experts_per_tok", m);
  m.moe.moe_intermediate_size = c.Int("intermediate_size");
  m.moe.num_shared_experts = 1;
  m.moe.shared_expert_intermediate_size = m.moe.moe_intermediate_size;
  m.moe.score_func = "sigmoid";
  m.moe_layers.assign(m.num_hidden_layers, false);
  // configuration_llama4.py: moe_layers, else every interleave_moe_layer_step-th layer
  // counting from layer step-1.
  if (c.Has("moe_layers")) {
    for (int64_t l : c.IntList("moe_layers")) {
      if (l >= m.num_hidden_layers) {
        c.Fail("moe_layers", fmt::format("layer {} is out of range [0, num_hidden_layers ({}))", l, m.num_hidden_layers));
      }
      m.moe_layers[l] = true;
    }
  } else {
    int64_t step = c.IntOr("interleave_moe_layer_step", 1);
    for (int64_t i = step - 1; i < m.num_hidden_layers; i += step) m.moe_layers[i] = true;
  }
  return m;
}

ModelSpec ReadDbrx(const JsonView& c) {
  ModelSpec m;
  m.vocab_size = c.Int("vocab_size");
  m.hidden_size = c.Int("d_model");
  m.num_hidden_layers = c.Int("n_layers");
  if (m.num_hidden_layers > kMaxLayers) c.Fail("n_layers", fmt::format("{} exceeds {}", m.num_hidden_layers, kMaxLayers));
  m.tie_word_embeddings = c.BoolOr("tie_word_embeddings", false);
  m.dtype = Dtype(c);
  m.norm = NormKind::kLayerNorm;  // DBRX LayerNorm has no bias
  auto& a = m.attention;
  a.num_attention_heads = c.Int("n_heads");
  if (m.hidden_size % a.num_attention_heads != 0) {
    c.Fail("n_heads", fmt::format("d_model ({}) must be divisible by n_heads ({})", m.hidden_size, a.num_attention_heads));
  }
  a.head_dim = m.hidden_size / a.num_attention_heads;
  a.fused_qkv = true;
  JsonView attn = c.Object("attn_config");
  a.num_key_value_heads = attn.IntOr("kv_n_heads", 1);
  JsonView ffn = c.Object("ffn_config");
  m.moe.num_experts = ffn.Int("moe_num_experts");
  m.moe.top_k = ffn.Int("moe_top_k");
  CheckTopK(ffn, "moe_top_k", m);
  m.moe.moe_intermediate_size = ffn.Int("ffn_hidden_size");
  // DbrxFFNConfig defaults moe_normalize_expert_weights to 1.0 (a p-norm exponent); only an
  // explicit null turns normalization off.
  m.moe.norm_topk_prob = !ffn.value().contains("moe_normalize_expert_weights") || ffn.Has("moe_normalize_expert_weights");
  m.moe_layers.assign(m.num_hidden_layers, true);
  return m;
}

struct Reader {
  const char* family;
  ModelSpec (*read)(const JsonView&);
};

}  // namespace

namespace {

// The reader of every family in SupportedFamilies, by family name.
const std::vector<Reader>& FamilyReaders() {
  static const std::vector<Reader> readers = {
      {"mixtral", ReadMixtral},
      {"qwen2_moe", ReadQwen2Moe},
      {"qwen3_moe", ReadQwen3Moe},
      {"deepseek_v2", [](const JsonView& c) { return ReadDeepseek(c, false); }},
      {"deepseek_v3", [](const JsonView& c) { return ReadDeepseek(c, true); }},
      {"olmoe", ReadOlmoe},
      {"gpt_oss", ReadGptOss},
      {"llama4_text", ReadLlama4Text},
      {"dbrx", ReadDbrx},
      {"glm4_moe", ReadGlm4Moe},
      {"phimoe", ReadPhimoe},
      {"deepseek_v32",
       [](const JsonView& c) {
         ModelSpec m = ReadDeepseek(c, true);
         ReadDsaIndexer(c, m);
         return m;
       }},
      {"qwen3_next",
       [](const JsonView& c) {
         ModelSpec m = ReadQwen3Moe(c);
         ReadQwen3NextExtras(c, m);
         return m;
       }},
      {"minimax_m2",
       [](const JsonView& c) {
         ModelSpec m = ReadMixtral(c);  // num_local_experts, per-expert intermediate_size, renormalized top-k
         ReadMinimaxM2Extras(c, m);
         return m;
       }},
      {"ernie4_5_moe",
       [](const JsonView& c) {
         ModelSpec m;
         ReadCommon(c, m);
         ReadGqa(c, m);  // Ernie4_5_MoeAttention: LlamaAttention, biases only with use_bias
         ReadErnie45MoeExtras(c, m);
         return m;
       }},
      {"bailing_moe_v2",
       [](const JsonView& c) {
         ModelSpec m;
         ReadCommon(c, m);
         ReadGqa(c, m);
         DeepseekMoeLayers(c, m);  // first_k_dense_replace dense layers, num_nextn_predict_layers
         ReadBailingMoeV2Extras(c, m);
         CheckTopK(c, "num_experts_per_tok", m);
         return m;
       }},
  };
  return readers;
}

// config.architectures[0] ("" when absent), checked to be a string.
std::string ReadArchitecture(const JsonView& root, const Json& config) {
  if (!root.Has("architectures")) return "";
  const Json& arch = config["architectures"];
  if (!arch.is_array() || arch.empty() || !arch[0].is_string()) {
    root.Fail("architectures", fmt::format("must be a non-empty array of strings, got {}", JsonValueText(arch)));
  }
  return arch[0].get<std::string>();
}

// The family of the architecture (else of the model_type); nullptr when neither is supported.
const FamilyInfo* FindFamily(const std::string& architecture, const std::string& model_type) {
  const FamilyInfo* found = nullptr;
  for (const auto& f : SupportedFamilies()) {
    if (!architecture.empty() ? architecture == f.architecture : model_type == f.model_type) found = &f;
  }
  // An unknown architecture with a known model_type (e.g. a renamed CausalLM class) is read by
  // its model_type's family.
  if (!found && !architecture.empty()) {
    for (const auto& f : SupportedFamilies()) {
      if (model_type == f.model_type) found = &f;
    }
  }
  return found;
}

// True when no key of the config (or of its text_config) names experts: every MoE config HF
// publishes counts them under a key with "expert" in its name (num_local_experts, num_experts,
// n_routed_experts, moe_num_experts, num_experts_per_tok), or under DBRX's ffn_config; a dense
// model (LlamaForCausalLM, Qwen2ForCausalLM, ...) has none.
bool HasNoExpertKeys(const Json& config) {
  if (!config.is_object() || config.contains("ffn_config")) return false;
  for (auto it = config.begin(); it != config.end(); ++it) {
    if (it.key().find("expert") != std::string::npos) return false;
  }
  if (config.contains("text_config")) return HasNoExpertKeys(config.at("text_config"));
  return true;
}

// An unsupported family: a dense model said as such, else the supported list and a suggestion or
// how to write a spec instead.
[[noreturn]] void FailUnknownFamily(const JsonView& root, const std::string& architecture, const std::string& model_type) {
  std::string key = architecture.empty() ? "model_type" : "architectures";
  std::string value = architecture.empty() ? model_type : architecture;
  if (HasNoExpertKeys(root.value())) {
    root.Fail(key, fmt::format("'{}' (model_type '{}') is a dense model: the config has no experts (no key such as "
                               "num_experts, num_local_experts or n_routed_experts), and dockyard plans Mixture-of-Experts "
                               "models; supported MoE families: {}",
                               value, model_type, SupportedFamiliesText()));
  }
  std::string message =
      fmt::format("unknown model family '{}' (model_type '{}'); supported: {}", value, model_type, SupportedFamiliesText());
  // A suggestion only for a likely typo: the architecture is close to a supported one AND the
  // config's model_type does not name another model (a dense Llama config, architecture
  // LlamaForCausalLM with model_type llama, is not a misspelt Llama4ForCausalLM).
  std::vector<std::string> names;
  for (const auto& f : SupportedFamilies()) {
    const bool type_agrees = architecture.empty() || model_type.empty() || DidYouMean(model_type, {f.model_type});
    if (type_agrees) names.push_back(architecture.empty() ? f.model_type : f.architecture);
  }
  if (auto s = DidYouMean(value, names)) {
    message += fmt::format("; did you mean '{}'?", *s);
  } else {
    message +=
        "; to plan another architecture, write a dockyard model spec (docs/model-spec.md, "
        "\"dockyard_model_spec\": 1, with its attention and moe sections) and pass it with --model";
  }
  root.Fail(key == "architectures" ? "architectures" : "model_type", message);
}

// A read spec named after its file, with its family, validated as an HF config.
ModelSpec FinishHfSpec(ModelSpec m, const std::string& family, const std::string& file) {
  m.family = family;
  m.name = file;
  m.source = file;
  ValidateModelSpec(m, file, true);
  return m;
}

}  // namespace

ModelSpec ModelSpecFromHfConfig(const Json& config, const std::string& file) {
  JsonView root(&config, file, "");
  const std::string architecture = ReadArchitecture(root, config);
  std::string model_type = root.StringOr("model_type", "");
  if (architecture.empty() && model_type.empty()) {
    root.Fail("architectures",
              "required key is missing (and so is /model_type); cannot tell the model family. Supported: " + SupportedFamiliesText());
  }

  // Llama 4 multimodal checkpoints nest the language model under text_config.
  if (architecture == "Llama4ForConditionalGeneration" || (architecture.empty() && model_type == "llama4")) {
    JsonView text = root.Object("text_config");
    text.set_missing_context("(family llama4_text)");
    return FinishHfSpec(ReadLlama4Text(text), "llama4_text", file);
  }

  const FamilyInfo* found = FindFamily(architecture, model_type);
  if (!found) FailUnknownFamily(root, architecture, model_type);
  for (const auto& r : FamilyReaders()) {
    if (std::string(r.family) != found->family) continue;
    JsonView view = root;
    view.set_missing_context(fmt::format("(family {})", found->family));
    return FinishHfSpec(r.read(view), found->family, file);
  }
  throw Error("internal: no reader for family " + std::string(found->family));
}

}  // namespace dockyard
