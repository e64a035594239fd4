// Readers for the indexer and linear-attention keys of DeepSeek-V3.2 and Qwen3-Next configs
// (see hf_config_variants.h).
#include "planner/model/hf_config_variants.h"

#include <fmt/format.h>

#include "planner/base/error.h"

namespace dockyard {

void ReadSharedExpertsInExpertUnits(const JsonView& c, const std::string& count_key, ModelSpec& m) {
  m.moe.num_shared_experts = c.IntOr(count_key, 0, 0);
  if (m.moe.num_shared_experts > (int64_t{1} << 20)) {
    c.Fail(count_key, fmt::format("{} exceeds the largest supported count 2^20", m.moe.num_shared_experts));
  }
  // Bounded before the product, which then stays below 2^60.
  if (m.moe.moe_intermediate_size > (int64_t{1} << 40)) {
    c.Fail("moe_intermediate_size", fmt::format("{} exceeds the largest supported size 2^40", m.moe.moe_intermediate_size));
  }
  m.moe.shared_expert_intermediate_size = m.moe.num_shared_experts * m.moe.moe_intermediate_size;
}

void ReadDsaIndexer(const JsonView& c, ModelSpec& m) {
  // DeepseekV32Config defaults: index_n_heads 64, index_head_dim 128, index_topk 2048.
  auto& ix = m.attention.indexer;
  ix.index_n_heads = c.IntOr("index_n_heads", 64);
  ix.index_head_dim = c.IntOr("index_head_dim", 128);
  ix.index_topk = c.IntOr("index_topk", 2048);
  if (m.attention.q_lora_rank < 1) {
    c.Fail("q_lora_rank", "the lightning indexer's wq_b reads the query latent, so q_lora_rank must be >= 1, got null or 0");
  }
}

void ReadMinimaxM2Extras(const JsonView& c, ModelSpec& m) {
  m.attention.qkv_bias = m.attention.o_bias = c.BoolOr("attention_bias", false);
  if (c.BoolOr("use_qk_norm", false)) {
    // modeling_minimax_m2.py: "per_layer" normalizes q [heads·head_dim] and k [kv_heads·head_dim].
    const std::string type = c.StringOr("qk_norm_type", "per_layer");
    if (type != "per_layer" && type != "per_head") {
      c.Fail("qk_norm_type", fmt::format("must be \"per_layer\" or \"per_head\", got \"{}\"", type));
    }
    m.attention.qk_norm = type == "per_layer" ? QkNorm::kFullWidth : QkNorm::kPerHead;
  }
  m.moe.score_func = c.StringOr("scoring_func", "sigmoid");
  if (m.moe.score_func != "softmax" && m.moe.score_func != "sigmoid") {
    c.Fail("scoring_func", fmt::format("must be \"softmax\" or \"sigmoid\", got \"{}\"", m.moe.score_func));
  }
  m.moe.score_correction_bias = c.BoolOr("use_routing_bias", true);
  const int64_t shared = c.IntOr("shared_intermediate_size", 0, 0);
  if (shared > 0) {
    c.Fail("shared_intermediate_size",
           fmt::format("{}: a MiniMax shared MLP is not modelled (MiniMax-M2 has none, shared_intermediate_size 0)", shared));
  }
  if (c.Has("sliding_window")) {
    c.Fail("sliding_window", fmt::format("{}: sliding-window attention is not modelled (MiniMax-M2 attends over the full "
                                         "context, sliding_window null)",
                                         JsonValueText(c.value()["sliding_window"])));
  }
  if (c.Has("attn_type_list")) {
    const std::vector<int64_t> types = c.IntList("attn_type_list");
    if (static_cast<int64_t>(types.size()) != m.num_hidden_layers) {
      c.Fail("attn_type_list",
             fmt::format("one entry per layer: num_hidden_layers is {}, got {} elements", m.num_hidden_layers, types.size()));
    }
    for (size_t i = 0; i < types.size(); ++i) {
      if (types[i] != 1) {
        throw Error(
            fmt::format("{}/{}: {}: only full softmax attention (1) is modelled; 0 is MiniMax-01's lightning "
                        "(linear) attention, which is not",
                        c.Where("attn_type_list"), i, types[i]));
      }
    }
  }
}

void ReadErnie45MoeExtras(const JsonView& c, ModelSpec& m) {
  if (c.BoolOr("use_bias", false)) {
    c.Fail("use_bias",
           "true: ERNIE biases on every linear layer (attention, MLPs, lm_head) are not modelled; the "
           "released ERNIE-4.5 configs have use_bias false");
  }
  m.intermediate_size = c.Int("intermediate_size");
  m.moe.num_experts = c.Int("moe_num_experts");
  m.moe.top_k = c.Int("moe_k");
  if (m.moe.top_k > m.moe.num_experts) {
    c.Fail("moe_k", fmt::format("moe_k ({}) must satisfy 1 <= moe_k <= moe_num_experts ({})", m.moe.top_k, m.moe.num_experts));
  }
  m.moe.moe_intermediate_size = c.Int("moe_intermediate_size");
  ReadSharedExpertsInExpertUnits(c, "moe_num_shared_experts", m);
  // Ernie4_5_MoeSparseMoeBlock: softmax over the fp32 gate, top-k on scores + moe_statics bias,
  // weights renormalized.
  m.moe.score_func = "softmax";
  m.moe.score_correction_bias = true;
  m.moe.norm_topk_prob = true;
  const int64_t layers = m.num_hidden_layers;
  const int64_t start = c.Int("moe_layer_start_index", 0);
  const int64_t end_key = c.IntOr("moe_layer_end_index", -1, -1);
  const int64_t end = end_key == -1 ? layers - 1 : end_key;
  if (start >= layers) {
    c.Fail("moe_layer_start_index", fmt::format("{} leaves no MoE layer: num_hidden_layers is {}", start, layers));
  }
  if (end < start) {
    c.Fail("moe_layer_end_index", fmt::format("{} is below moe_layer_start_index ({}): no layer is MoE", end, start));
  }
  const int64_t interval = c.IntOr("moe_layer_interval", 1);
  m.moe_layers.assign(layers, false);
  for (int64_t i = 0; i < layers; ++i) m.moe_layers[i] = (i + 1) % interval == 0 && i >= start && i <= end;
}

void ReadBailingMoeV2Extras(const JsonView& c, ModelSpec& m) {
  if (c.Has("architectures")) {
    const std::string arch = c.value()["architectures"][0].get<std::string>();
    if (arch != "BailingMoeV2ForCausalLM") {
      throw Error(
          fmt::format("{}/0: \"{}\": model_type bailing_moe is read as Ling 2.0 (BailingMoeV2ForCausalLM) only; "
                      "Ling 1.x (BailingMoeForCausalLM: softmax routing, no q/k norms) is not modelled",
                      c.Where("architectures"), arch));
    }
  }
  if (c.BoolOr("use_bias", false)) {
    c.Fail("use_bias", "true: the bias on attention.dense is not modelled; the released Ling 2.0 configs have use_bias false");
  }
  if (c.BoolOr("use_sliding_window", false)) {
    c.Fail("use_sliding_window",
           "true: sliding-window attention is not modelled (Ling 2.0 attends over the full context, use_sliding_window false)");
  }
  // BailingMoeV2Attention: one query_key_value projection [(H + 2·KV)·hd, D], bias with
  // use_qkv_bias; query_layernorm / key_layernorm RMSNorm over head_dim with use_qk_norm.
  m.attention.fused_qkv = true;
  m.attention.qkv_bias = c.BoolOr("use_qkv_bias", false);
  m.attention.qk_norm = c.BoolOr("use_qk_norm", true) ? QkNorm::kPerHead : QkNorm::kNone;
  m.intermediate_size = c.Int("intermediate_size");
  m.moe.num_experts = c.Int("num_experts");
  m.moe.top_k = c.Int("num_experts_per_tok");  // bounded by num_experts in hf_config.cc (CheckTopK)
  m.moe.moe_intermediate_size = c.Int("moe_intermediate_size");
  // BailingMoeV2SparseMoeBlock: one shared MLP of moe_shared_expert_intermediate_size (else
  // moe_intermediate_size) · num_shared_experts.
  const int64_t shared_width = c.IntOr("moe_shared_expert_intermediate_size", m.moe.moe_intermediate_size);
  m.moe.num_shared_experts = c.IntOr("num_shared_experts", 1, 0);
  if (m.moe.num_shared_experts > (int64_t{1} << 20)) {
    c.Fail("num_shared_experts", fmt::format("{} exceeds the largest supported count 2^20", m.moe.num_shared_experts));
  }
  if (shared_width > (int64_t{1} << 40)) {
    c.Fail("moe_shared_expert_intermediate_size", fmt::format("{} exceeds the largest supported size 2^40", shared_width));
  }
  m.moe.shared_expert_intermediate_size = m.moe.num_shared_experts * shared_width;
  // BailingMoeV2Gate: sigmoid (or softmax) scores, top-k on scores + expert_bias within the
  // topk_group best of n_group groups, weights renormalized and scaled.
  m.moe.score_func = c.StringOr("score_function", "sigmoid");
  if (m.moe.score_func != "softmax" && m.moe.score_func != "sigmoid") {
    c.Fail("score_function", fmt::format("must be \"softmax\" or \"sigmoid\", got \"{}\"", m.moe.score_func));
  }
  m.moe.score_correction_bias = c.BoolOr("moe_router_enable_expert_bias", true);
  m.moe.norm_topk_prob = c.BoolOr("norm_topk_prob", true);
  m.moe.routed_scaling_factor = c.NumberOr("routed_scaling_factor", 1.0);
  m.moe.n_group = c.IntOr("n_group", 8);
  m.moe.topk_group = c.IntOr("topk_group", 4);
}

void ReadQwen3NextExtras(const JsonView& c, ModelSpec& m) {
  // Qwen3NextSparseMoeBlock: one shared expert of shared_expert_intermediate_size with a
  // sigmoid gate [1, hidden], as in Qwen2-MoE.
  m.moe.shared_expert_intermediate_size = c.IntOr("shared_expert_intermediate_size", 0, 0);
  m.moe.num_shared_experts = m.moe.shared_expert_intermediate_size > 0 ? 1 : 0;
  m.moe.shared_expert_gate = m.moe.num_shared_experts > 0;
  // Qwen3NextAttention: q_proj emits the query and a per-head sigmoid gate on the output.
  m.attention.output_gate = true;
  if (c.BoolOr("use_sliding_window", false)) {
    c.Fail("use_sliding_window",
           "true: sliding-window attention is not modelled (Qwen3-Next attends over the full "
           "context, use_sliding_window false)");
  }
  // Qwen3NextGatedDeltaNet (defaults of Qwen3NextConfig).
  auto& la = m.attention.linear;
  la.num_key_heads = c.IntOr("linear_num_key_heads", 16);
  la.num_value_heads = c.IntOr("linear_num_value_heads", 32);
  la.key_head_dim = c.IntOr("linear_key_head_dim", 128);
  la.value_head_dim = c.IntOr("linear_value_head_dim", 128);
  la.conv_kernel_dim = c.IntOr("linear_conv_kernel_dim", 4);
  if (la.num_value_heads % la.num_key_heads != 0) {
    c.Fail("linear_num_key_heads", fmt::format("linear_num_key_heads ({}) must divide linear_num_value_heads ({}) "
                                               "(each key head serves a group of value heads)",
                                               la.num_key_heads, la.num_value_heads));
  }
  const int64_t layers = m.num_hidden_layers;
  m.linear_attention_layers.assign(layers, false);
  if (c.Has("layer_types")) {
    const Json& types = c.value()["layer_types"];
    if (!types.is_array() || static_cast<int64_t>(types.size()) != layers) {
      c.Fail("layer_types",
             fmt::format("must be an array with one entry per layer (num_hidden_layers = {}), got {}", layers, JsonValueText(types)));
    }
    for (int64_t i = 0; i < layers; ++i) {
      const Json& t = types[i];
      if (!t.is_string() || (t != "linear_attention" && t != "full_attention")) {
        throw Error(
            fmt::format("{}/{}: must be \"linear_attention\" or \"full_attention\", got {}", c.Where("layer_types"), i, JsonValueText(t)));
      }
      m.linear_attention_layers[i] = t == "linear_attention";
    }
  } else {
    // Qwen3NextConfig: layer i is linear_attention unless (i + 1) % full_attention_interval == 0.
    const int64_t interval = c.IntOr("full_attention_interval", 4);
    for (int64_t i = 0; i < layers; ++i) m.linear_attention_layers[i] = (i + 1) % interval != 0;
  }
}

}  // namespace dockyard
