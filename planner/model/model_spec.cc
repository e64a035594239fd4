// ModelSpec validation and dockyard's own JSON model spec (docs/model-spec.md).
#include "planner/model/model_spec.h"

#include <cmath>

#include <fmt/format.h>

#include "planner/base/error.h"
#include "planner/model/group_limit.h"
#include "planner/model/hf_config.h"

namespace dockyard {

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

// The message for a family dockyard does not know ("" when it knows it); `suggest` adds the
// nearest supported name.
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

}  // namespace

void ValidateModelSpec(const ModelSpec& m, const std::string& file, bool from_hf) {
  const Origin origin{file, from_hf};
  // Field names are the JSON pointers of dockyard's model spec (docs/model-spec.md).
  Positive(origin, "/vocab_size", m.vocab_size);
  Positive(origin, "/hidden_size", m.hidden_size);
  Positive(origin, "/num_hidden_layers", m.num_hidden_layers);
  ValidateAttention(origin, m.attention);
  ValidateLinearAttention(origin, m);
  ValidateMlpAndMoe(origin, m);
  CheckSizeBounds(origin, m);
  if (m.num_hidden_layers > 100000) {
    Invalid(origin, "/num_hidden_layers", fmt::format("{} exceeds 100000", m.num_hidden_layers));
  }
  DtypeBytes(m.dtype, file + ": /dtype");
  const std::string group_problem = GroupLimitProblem(m.moe.num_experts, m.moe.top_k, m.moe.n_group, m.moe.topk_group);
  if (!group_problem.empty()) Invalid(origin, "/moe/n_group", group_problem);
  if (!std::isfinite(m.moe.routed_scaling_factor) || m.moe.routed_scaling_factor <= 0) {
    Invalid(origin, "/moe/routed_scaling_factor", fmt::format("must be a finite number > 0, got {}", m.moe.routed_scaling_factor));
  }
  const std::string family_problem = UnknownFamilyRule(m.family, false);
  if (!family_problem.empty()) Invalid(origin, "/family", family_problem);
}

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
  if (!m.linear_attention_layers.empty()) {
    Json attention_types = Json::array();
    for (bool b : m.linear_attention_layers) attention_types.push_back(b ? "linear_attention" : "full_attention");
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
  if (m.num_hidden_layers > 100000) root.Fail("num_hidden_layers", fmt::format("{} exceeds 100000", m.num_hidden_layers));
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
                        "linear_attention"});
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
  a.qk_norm = ReadQkNorm(at);
  a.output_gate = at.BoolOr("output_gate", false);
  ReadAttentionExtensions(at, a);
}

// /moe: experts, router settings, shared experts and the group limit.
void ReadMoe(const JsonView& root, MoeSpec& e) {
  JsonView mo = root.Object("moe");
  mo.RejectUnknownKeys({"num_experts", "top_k", "moe_intermediate_size", "expert_bias", "router_bias", "score_correction_bias",
                        "score_func", "norm_topk_prob", "routed_scaling_factor", "num_shared_experts", "shared_expert_intermediate_size",
                        "shared_expert_gate", "n_group", "topk_group"});
  e.num_experts = mo.Int("num_experts");
  e.top_k = mo.Int("top_k");
  e.moe_intermediate_size = mo.Int("moe_intermediate_size");
  e.expert_bias = mo.BoolOr("expert_bias", false);
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
std::vector<bool> ReadAttentionLayerTypes(const Json& json, const JsonView& root, const std::string& file) {
  std::vector<bool> linear_layers;
  if (!json.contains("attention_layer_types")) return linear_layers;
  const Json& kinds = json["attention_layer_types"];
  if (!kinds.is_array()) {
    root.Fail("attention_layer_types", "must be an array with one \"full_attention\" or \"linear_attention\" per layer");
  }
  for (size_t i = 0; i < kinds.size(); ++i) {
    if (!kinds[i].is_string() || (kinds[i] != "full_attention" && kinds[i] != "linear_attention")) {
      throw Error(fmt::format("{}: /attention_layer_types/{}: must be \"full_attention\" or \"linear_attention\", got {}", file, i,
                              JsonValueText(kinds[i])));
    }
    linear_layers.push_back(kinds[i] == "linear_attention");
  }
  return linear_layers;
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
  m.linear_attention_layers = ReadAttentionLayerTypes(json, root, file);
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
