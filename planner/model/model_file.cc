// Model files: dockyard's own JSON model spec (docs/model-spec.md) and LoadModel (see model_file.h).
#include "planner/model/model_file.h"

#include <algorithm>

#include <fmt/format.h>

#include "planner/base/error.h"
#include "planner/model/hf_config.h"
#include "planner/model/machine.h"
#include "planner/model/training_json.h"

namespace dockyard {

namespace {

const char* QkNormName(QkNorm q) {
  switch (q) {
    case QkNorm::kNone:
      return "none";
    case QkNorm::kPerHead:
      return "per_head";
    case QkNorm::kFullWidth:
      return "full_width";
  }
  return "none";
}

}  // namespace

Json ModelSpecToJson(const ModelSpec& m) {
  const auto& a = m.attention;
  Json attention = {{"kind", a.kind == AttentionKind::kMla ? "mla" : "gqa"}, {"num_attention_heads", a.num_attention_heads}};
  if (a.kind == AttentionKind::kGqa) {
    attention["num_key_value_heads"] = a.num_key_value_heads;
    attention["head_dim"] = a.head_dim;
    attention["fused_qkv"] = a.fused_qkv;
    attention["sinks"] = a.sinks;
    attention["qk_norm"] = QkNormName(a.qk_norm);
  } else {
    attention["q_lora_rank"] = a.q_lora_rank;
    attention["kv_lora_rank"] = a.kv_lora_rank;
    attention["qk_nope_head_dim"] = a.qk_nope_head_dim;
    attention["qk_rope_head_dim"] = a.qk_rope_head_dim;
    attention["v_head_dim"] = a.v_head_dim;
  }
  attention["qkv_bias"] = a.qkv_bias;
  attention["o_bias"] = a.o_bias;
  if (a.sliding_window > 0) attention["sliding_window"] = a.sliding_window;
  if (a.rope_attention_factor != 1.0) attention["rope_attention_factor"] = a.rope_attention_factor;
  // The newer-family blocks are written only when present, so older specs stay byte-identical.
  if (a.output_gate) attention["output_gate"] = true;
  if (a.indexer.present()) {
    attention["indexer"] = {
        {"index_n_heads", a.indexer.index_n_heads}, {"index_head_dim", a.indexer.index_head_dim}, {"index_topk", a.indexer.index_topk}};
  }
  if (a.linear.present()) {
    attention["linear_attention"] = {{"num_key_heads", a.linear.num_key_heads},
                                     {"num_value_heads", a.linear.num_value_heads},
                                     {"key_head_dim", a.linear.key_head_dim},
                                     {"value_head_dim", a.linear.value_head_dim},
                                     {"conv_kernel_dim", a.linear.conv_kernel_dim}};
  }
  const auto& e = m.moe;
  Json moe = {{"num_experts", e.num_experts},
              {"top_k", e.top_k},
              {"moe_intermediate_size", e.moe_intermediate_size},
              {"expert_bias", e.expert_bias},
              {"router_bias", e.router_bias},
              {"score_correction_bias", e.score_correction_bias},
              {"score_func", e.score_func},
              {"norm_topk_prob", e.norm_topk_prob},
              {"routed_scaling_factor", e.routed_scaling_factor},
              {"num_shared_experts", e.num_shared_experts},
              {"shared_expert_intermediate_size", e.shared_expert_intermediate_size},
              {"shared_expert_gate", e.shared_expert_gate}};
  if (e.swiglu_limit > 0) moe["swiglu_limit"] = e.swiglu_limit;  // written only when set, as n_group below
  if (e.n_group > 1) {  // written only when set, so specs without a group limit read as before
    moe["n_group"] = e.n_group;
    moe["topk_group"] = e.topk_group;
  }
  Json layer_types = Json::array();
  for (bool b : m.moe_layers) layer_types.push_back(b ? "moe" : "dense");
  Json out{{"dockyard_model_spec", kModelSpecVersion},
           {"name", m.name},
           {"family", m.family},
           {"vocab_size", m.vocab_size},
           {"hidden_size", m.hidden_size},
           {"num_hidden_layers", m.num_hidden_layers},
           {"intermediate_size", m.intermediate_size},
           {"dtype", m.dtype},
           {"norm", m.norm == NormKind::kLayerNorm ? "layernorm" : "rmsnorm"},
           {"norm_bias", m.norm_bias},
           {"lm_head_bias", m.lm_head_bias},
           {"tie_word_embeddings", m.tie_word_embeddings},
           {"attention", attention},
           {"moe", moe},
           {"mlp_layer_types", layer_types}};
  if (!m.linear_attention_layers.empty() || !m.sliding_attention_layers.empty()) {
    Json attention_types = Json::array();
    for (int64_t l = 0; l < m.num_hidden_layers; ++l) {
      const bool sliding = !m.sliding_attention_layers.empty() && m.sliding_attention_layers[static_cast<size_t>(l)];
      attention_types.push_back(m.IsLinearAttentionLayer(l) ? "linear_attention" : sliding ? "sliding_attention" : "full_attention");
    }
    out["attention_layer_types"] = attention_types;
  }
  if (m.training) out["training"] = TrainingToJson(*m.training, m.machine);
  return out;
}

bool IsDockyardModelSpec(const Json& json) {
  return json.is_object() && json.contains("dockyard_model_spec");
}

namespace {

// The spec's format version must be the one this dockyard reads.
void CheckSpecVersion(const JsonView& root) {
  int64_t version = root.Int("dockyard_model_spec", INT64_MIN);
  if (version != kModelSpecVersion) {
    root.Fail("dockyard_model_spec",
              fmt::format("unsupported spec version {}; this dockyard reads version {}", version, kModelSpecVersion));
  }
}

// The top-level fields: name, family, sizes, dtype and norm.
void ReadTopLevel(const JsonView& root, const std::string& file, ModelSpec& m) {
  m.name = root.StringOr("name", file);
  m.source = file;
  m.family = root.String("family");
  const std::string family_problem = UnknownFamilyRule(m.family, true);
  if (!family_problem.empty()) root.Fail("family", family_problem);
  m.vocab_size = root.Int("vocab_size");
  m.hidden_size = root.Int("hidden_size");
  m.num_hidden_layers = root.Int("num_hidden_layers");
  if (m.num_hidden_layers > kMaxHiddenLayers) root.Fail("num_hidden_layers", fmt::format("{} exceeds {}", m.num_hidden_layers, kMaxHiddenLayers));
  m.intermediate_size = root.IntOr("intermediate_size", 0, 0);
  m.dtype = CanonicalDtype(root.StringOr("dtype", "bfloat16"));
  DtypeBytes(m.dtype, root.Where("dtype"));
  std::string norm = root.StringOr("norm", "rmsnorm");
  if (norm != "rmsnorm" && norm != "layernorm") root.Fail("norm", fmt::format("must be \"rmsnorm\" or \"layernorm\", got \"{}\"", norm));
  m.norm = norm == "layernorm" ? NormKind::kLayerNorm : NormKind::kRmsNorm;
  m.norm_bias = root.BoolOr("norm_bias", false);
  m.lm_head_bias = root.BoolOr("lm_head_bias", false);
  m.tie_word_embeddings = root.BoolOr("tie_word_embeddings", false);
}

// /attention/qk_norm: "none", "per_head" or "full_width".
QkNorm ReadQkNorm(const JsonView& at) {
  std::string qk = at.StringOr("qk_norm", "none");
  if (qk == "none") return QkNorm::kNone;
  if (qk == "per_head") return QkNorm::kPerHead;
  if (qk == "full_width") return QkNorm::kFullWidth;
  at.Fail("qk_norm", fmt::format("must be \"none\", \"per_head\" or \"full_width\", got \"{}\"", qk));
}

// The optional DSA indexer and Gated DeltaNet blocks of /attention.
void ReadAttentionExtensions(const JsonView& at, AttentionSpec& a) {
  if (at.Has("indexer")) {
    JsonView ix = at.Object("indexer");
    ix.RejectUnknownKeys({"index_n_heads", "index_head_dim", "index_topk"});
    a.indexer.index_n_heads = ix.Int("index_n_heads");
    a.indexer.index_head_dim = ix.Int("index_head_dim");
    a.indexer.index_topk = ix.Int("index_topk");
  }
  if (at.Has("linear_attention")) {
    JsonView li = at.Object("linear_attention");
    li.RejectUnknownKeys({"num_key_heads", "num_value_heads", "key_head_dim", "value_head_dim", "conv_kernel_dim"});
    a.linear.num_key_heads = li.Int("num_key_heads");
    a.linear.num_value_heads = li.Int("num_value_heads");
    a.linear.key_head_dim = li.Int("key_head_dim");
    a.linear.value_head_dim = li.Int("value_head_dim");
    a.linear.conv_kernel_dim = li.Int("conv_kernel_dim");
  }
}

// /attention: the kind and its sizes (keys of the other kind rejected), biases and options.
void ReadAttention(const JsonView& root, AttentionSpec& a) {
  JsonView at = root.Object("attention");
  at.RejectUnknownKeys({"kind", "num_attention_heads", "num_key_value_heads", "head_dim", "q_lora_rank", "kv_lora_rank", "qk_nope_head_dim",
                        "qk_rope_head_dim", "v_head_dim", "qkv_bias", "o_bias", "fused_qkv", "sinks", "qk_norm", "output_gate", "indexer",
                        "linear_attention", "sliding_window", "rope_attention_factor"});
  std::string kind = at.String("kind");
  if (kind != "gqa" && kind != "mla") at.Fail("kind", fmt::format("must be \"gqa\" or \"mla\", got \"{}\"", kind));
  a.kind = kind == "mla" ? AttentionKind::kMla : AttentionKind::kGqa;
  a.num_attention_heads = at.Int("num_attention_heads");
  // Keys of the other attention kind are an error, not silently ignored.
  for (const char* key : a.kind == AttentionKind::kGqa
                             ? std::vector<const char*>{"q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"}
                             : std::vector<const char*>{"num_key_value_heads", "head_dim", "fused_qkv", "sinks", "qk_norm"}) {
    if (at.value().contains(key))
      at.Fail(key, fmt::format("only applies to attention kind \"{}\", this spec has kind \"{}\"", kind == "gqa" ? "mla" : "gqa", kind));
  }
  if (a.kind == AttentionKind::kGqa) {
    a.num_key_value_heads = at.Int("num_key_value_heads");
    a.head_dim = at.Int("head_dim");
  } else {
    a.q_lora_rank = at.IntOr("q_lora_rank", 0, 0);
    a.kv_lora_rank = at.Int("kv_lora_rank");
    a.qk_nope_head_dim = at.Int("qk_nope_head_dim");
    a.qk_rope_head_dim = at.Int("qk_rope_head_dim");
    a.v_head_dim = at.Int("v_head_dim");
  }
  a.qkv_bias = at.BoolOr("qkv_bias", false);
  a.o_bias = at.BoolOr("o_bias", false);
  a.fused_qkv = at.BoolOr("fused_qkv", false);
  a.sinks = at.BoolOr("sinks", false);
  a.sliding_window = at.IntOr("sliding_window", 0, 1);
  if (at.Has("rope_attention_factor")) {
    a.rope_attention_factor = at.Number("rope_attention_factor");
    // YaRN's factor is 0.1 m ln(s) + 1 >= 1 for s >= 1; a few times that covers any published config.
    if (!(a.rope_attention_factor > 0 && a.rope_attention_factor <= 16)) {
      at.Fail("rope_attention_factor", fmt::format("must be in (0, 16] (YaRN's concentration factor on cos and sin, 1 = none), got {}",
                                                   a.rope_attention_factor));
    }
  }
  a.qk_norm = ReadQkNorm(at);
  a.output_gate = at.BoolOr("output_gate", false);
  ReadAttentionExtensions(at, a);
}

// /moe: experts, router settings, shared experts and the group limit.
void ReadMoe(const JsonView& root, MoeSpec& e) {
  JsonView mo = root.Object("moe");
  mo.RejectUnknownKeys({"num_experts", "top_k", "moe_intermediate_size", "expert_bias", "router_bias", "score_correction_bias",
                        "score_func", "norm_topk_prob", "routed_scaling_factor", "num_shared_experts", "shared_expert_intermediate_size",
                        "shared_expert_gate", "n_group", "topk_group", "swiglu_limit"});
  e.num_experts = mo.Int("num_experts");
  e.top_k = mo.Int("top_k");
  e.moe_intermediate_size = mo.Int("moe_intermediate_size");
  e.expert_bias = mo.BoolOr("expert_bias", false);
  mo.RefuseNull("swiglu_limit", "give the clamp limit (a number > 0), or leave the key out for none");
  e.swiglu_limit = mo.NumberOr("swiglu_limit", 0.0);  // checked by ValidateModelSpec
  e.router_bias = mo.BoolOr("router_bias", false);
  e.score_correction_bias = mo.BoolOr("score_correction_bias", false);
  e.score_func = mo.StringOr("score_func", "softmax");
  if (e.score_func != "softmax" && e.score_func != "sigmoid") {
    mo.Fail("score_func", fmt::format("must be \"softmax\" or \"sigmoid\", got \"{}\"", e.score_func));
  }
  e.norm_topk_prob = mo.BoolOr("norm_topk_prob", false);
  e.routed_scaling_factor = mo.NumberOr("routed_scaling_factor", 1.0);
  e.num_shared_experts = mo.IntOr("num_shared_experts", 0, 0);
  e.shared_expert_intermediate_size = mo.IntOr("shared_expert_intermediate_size", 0, 0);
  e.shared_expert_gate = mo.BoolOr("shared_expert_gate", false);
  if (e.top_k > e.num_experts) {
    mo.Fail("top_k", fmt::format("top_k ({}) must satisfy 1 <= top_k <= num_experts ({})", e.top_k, e.num_experts));
  }
  e.n_group = mo.IntOr("n_group", 1, 1);
  e.topk_group = mo.IntOr("topk_group", e.n_group, 1);
}

// /mlp_layer_types: one "dense" or "moe" per layer (true = MoE).
std::vector<bool> ReadMlpLayerTypes(const Json& json, const JsonView& root, const std::string& file, int64_t num_hidden_layers) {
  std::vector<bool> moe_layers;
  const Json& types = json.contains("mlp_layer_types") ? json["mlp_layer_types"] : Json();
  if (!types.is_array()) root.Fail("mlp_layer_types", "required: an array with one \"dense\" or \"moe\" per layer");
  for (size_t i = 0; i < types.size(); ++i) {
    if (!types[i].is_string() || (types[i] != "dense" && types[i] != "moe")) {
      throw Error(fmt::format("{}: /mlp_layer_types/{}: must be \"dense\" or \"moe\", got {}", file, i, JsonValueText(types[i])));
    }
    moe_layers.push_back(types[i] == "moe");
  }
  if (static_cast<int64_t>(moe_layers.size()) != num_hidden_layers) {
    root.Fail("mlp_layer_types",
              fmt::format("has {} entries, must have one per layer (num_hidden_layers = {})", moe_layers.size(), num_hidden_layers));
  }
  return moe_layers;
}

// /attention_layer_types (optional): one "full_attention" or "linear_attention" per layer (true = linear).
// /attention_layer_types: one "full_attention", "linear_attention" or "sliding_attention" per layer
// (HF layer_types); fills the linear and sliding layer masks (each empty when no layer has that kind).
void ReadAttentionLayerTypes(const Json& json, const JsonView& root, const std::string& file, ModelSpec& m) {
  if (!json.contains("attention_layer_types")) return;
  const Json& kinds = json["attention_layer_types"];
  if (!kinds.is_array()) {
    root.Fail("attention_layer_types",
              "must be an array with one \"full_attention\", \"linear_attention\" or \"sliding_attention\" per layer");
  }
  std::vector<bool> linear_layers, sliding_layers;
  for (size_t i = 0; i < kinds.size(); ++i) {
    if (!kinds[i].is_string() || (kinds[i] != "full_attention" && kinds[i] != "linear_attention" && kinds[i] != "sliding_attention")) {
      throw Error(fmt::format("{}: /attention_layer_types/{}: must be \"full_attention\", \"linear_attention\" or \"sliding_attention\", got {}",
                              file, i, JsonValueText(kinds[i])));
    }
    linear_layers.push_back(kinds[i] == "linear_attention");
    sliding_layers.push_back(kinds[i] == "sliding_attention");
  }
  auto any = [](const std::vector<bool>& v) { return std::find(v.begin(), v.end(), true) != v.end(); };
  // Each mask where its block is present or an entry names its kind (so ValidateModelSpec names the
  // missing block); all-full entries without either block read as no mask at all.
  if (m.attention.linear.present() || any(linear_layers)) m.linear_attention_layers = linear_layers;
  if (m.attention.sliding_window > 0 || any(sliding_layers)) m.sliding_attention_layers = sliding_layers;
}

}  // namespace

ModelSpec ModelSpecFromJson(const Json& json, const std::string& file) {
  JsonView root(&json, file, "");
  root.RejectUnknownKeys({"dockyard_model_spec", "name", "family", "vocab_size", "hidden_size", "num_hidden_layers", "intermediate_size",
                          "dtype", "norm", "norm_bias", "lm_head_bias", "tie_word_embeddings", "attention", "moe", "mlp_layer_types",
                          "attention_layer_types", "training"});
  CheckSpecVersion(root);
  ModelSpec m;
  ReadTopLevel(root, file, m);
  ReadAttention(root, m.attention);
  ReadMoe(root, m.moe);
  m.moe_layers = ReadMlpLayerTypes(json, root, file, m.num_hidden_layers);
  ReadAttentionLayerTypes(json, root, file, m);
  if (root.Has("training")) {
    m.training = TrainingFromJson(root.Object("training"));
    m.machine = MachineFromTrainingJson(root.Object("training"));
  }
  ValidateModelSpec(m, file);
  return m;
}

ModelSpec LoadModel(const std::string& path) {
  Json json = ReadJsonFile(path);
  if (IsDockyardModelSpec(json)) return ModelSpecFromJson(json, path);
  return ModelSpecFromHfConfig(json, path);
}

}  // namespace dockyard
