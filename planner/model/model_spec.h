// ModelSpec: the normalized description of an MoE transformer that every other part of the
// planner reads. It comes from a HuggingFace config.json (hf_config.h) or from dockyard's own
// JSON model spec (docs/model-spec.md), which can express every supported family.
//
// Sizes are element counts (not bytes). `family` selects the HF-style parameter names and the
// stored layout of the routed-expert tensors (inventory.h); the structural fields below decide
// every shape.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "planner/model/group_limit.h"
#include "planner/base/json_util.h"
#include "planner/model/training.h"

namespace dockyard {

enum class AttentionKind { kGqa, kMla };
// q/k normalization: none; per head ([head_dim], Qwen3, GLM-4.5); over the full projection
// width ([heads * head_dim], OLMoE).
enum class QkNorm { kNone, kPerHead, kFullWidth };
enum class NormKind { kRmsNorm, kLayerNorm };

// DeepSeek Sparse Attention's lightning indexer (DeepSeek-V3.2-Exp, HF keys index_n_heads,
// index_head_dim, index_topk; DeepSeek-V3.2-Exp inference/model.py `Indexer`): per MLA layer,
// wq_b [index_n_heads * index_head_dim, q_lora_rank], wk [index_head_dim, hidden],
// k_norm (LayerNorm, weight and bias [index_head_dim]) and weights_proj [index_n_heads, hidden].
// Each query attends to the index_topk keys the indexer scores highest. index_n_heads == 0: none.
struct IndexerSpec {
  int64_t index_n_heads = 0;
  int64_t index_head_dim = 0;
  int64_t index_topk = 0;
  bool present() const { return index_n_heads > 0; }
};

// Gated DeltaNet linear attention (Qwen3-Next, transformers modeling_qwen3_next.py
// Qwen3NextGatedDeltaNet; HF keys linear_num_key_heads, linear_num_value_heads,
// linear_key_head_dim, linear_value_head_dim, linear_conv_kernel_dim), used by the layers
// that ModelSpec::linear_attention_layers marks. num_value_heads == 0: none.
struct LinearAttentionSpec {
  int64_t num_key_heads = 0;
  int64_t num_value_heads = 0;
  int64_t key_head_dim = 0;
  int64_t value_head_dim = 0;
  int64_t conv_kernel_dim = 0;
  bool present() const { return num_value_heads > 0; }
};

struct AttentionSpec {
  AttentionKind kind = AttentionKind::kGqa;
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;  // GQA only; MLA has one latent per token.
  int64_t head_dim = 0;             // GQA only.
  bool qkv_bias = false;
  bool o_bias = false;
  bool fused_qkv = false;  // DBRX's Wqkv.
  bool sinks = false;      // gpt-oss attention sinks, one scalar per head.
  // The sliding window of the layers ModelSpec::sliding_attention_layers marks, in keys (HF
  // sliding_window: a query attends to itself and the window - 1 keys before it, as transformers'
  // sliding-window mask and Megatron-Core's window_size (sliding_window - 1, 0) for gpt-oss); 0 = none.
  int64_t sliding_window = 0;
  // The rotary embedding's attention factor (YaRN's concentration factor, "mscale": cos and sin are
  // scaled by it): HF rope_scaling (rope_type "yarn") attention_factor, else get_mscale(factor,
  // mscale) / get_mscale(factor, mscale_all_dim) where both are given, else get_mscale(factor), with
  // get_mscale(s, m) = 0.1 m ln(s) + 1 for s > 1 (transformers modeling_rope_utils.py
  // _compute_yarn_parameters; Megatron-Core yarn_rotary_pos_embedding.py
  // _yarn_get_concentration_factor, which Megatron-Bridge's gpt-oss provider reaches with
  // yarn_mscale None). gpt-oss: factor 32, 1.3466; DeepSeek-V3 and Kimi-K2: mscale = mscale_all_dim,
  // 1. 1 without YaRN. Megatron-Core runs the rotary unfused where it is not 1
  // (kernels_model.h RotaryRunsUnfused).
  double rope_attention_factor = 1.0;
  QkNorm qk_norm = QkNorm::kNone;
  // MLA (DeepSeek-V2/V3); q_lora_rank == 0 means no q compression (DeepSeek-V2-Lite).
  int64_t q_lora_rank = 0;
  int64_t kv_lora_rank = 0;
  int64_t qk_nope_head_dim = 0;
  int64_t qk_rope_head_dim = 0;
  int64_t v_head_dim = 0;
  // Qwen3-Next gated attention: q_proj also produces a sigmoid output gate per head
  // (q_proj [2 * heads * head_dim, hidden]).
  bool output_gate = false;
  IndexerSpec indexer;         // MLA only
  LinearAttentionSpec linear;  // the linear-attention layers' block
  // The query-key and value head dims of the attention core: MLA qk_nope + qk_rope and v_head_dim,
  // GQA head_dim for both.
  int64_t QkHeadDim() const { return kind == AttentionKind::kMla ? qk_nope_head_dim + qk_rope_head_dim : head_dim; }
  int64_t VHeadDim() const { return kind == AttentionKind::kMla ? v_head_dim : head_dim; }
};

struct MoeSpec {
  int64_t num_experts = 0;             // routed experts per MoE layer (HF: num_experts,
                                       // num_local_experts, n_routed_experts, moe_num_experts)
  int64_t top_k = 0;                   // routed experts per token (num_experts_per_tok)
  int64_t moe_intermediate_size = 0;   // logical F of one routed expert (never the fused 2F)
  bool expert_bias = false;            // gpt-oss: gate_up_proj_bias / down_proj_bias
  // The routed experts' gated activation clamps its inputs at this limit (0 = none): gpt-oss's
  // swiglu_limit 7.0 (transformers modeling_gpt_oss.py GptOssExperts: gate clamped to <= limit,
  // up to [-limit, limit]); Megatron-Core's activation_func_clamp_value, which Megatron-Bridge's
  // gpt-oss bridge sets to 7.0. Priced by planner/cost/kernels_model.h ExpertEagerKernels.
  double swiglu_limit = 0.0;
  bool router_bias = false;            // gpt-oss: router.bias
  bool score_correction_bias = false;  // DeepSeek-V3 / GLM-4.5: gate.e_score_correction_bias
  std::string score_func = "softmax";  // "softmax" or "sigmoid"
  bool norm_topk_prob = false;
  double routed_scaling_factor = 1.0;
  // Group-limited routing (HF n_group, topk_group; group_limit.h): the experts form n_group
  // contiguous groups and a token keeps topk_group of them. n_group = 1: no limit.
  int64_t n_group = 1;
  int64_t topk_group = 1;
  int64_t num_shared_experts = 0;
  int64_t shared_expert_intermediate_size = 0;  // total F of the shared expert MLP
  bool shared_expert_gate = false;              // Qwen2-MoE: sigmoid gate [1, hidden]
};

// The model's group-limited routing rule (group_limit.h): n_group, topk_group, and the group
// score of its router (top-2 sum with the score-correction bias, noaux_tc; else the max).
GroupLimit GroupLimitOf(const MoeSpec& moe);

struct ModelSpec {
  std::string name;    // free text, e.g. the file it came from
  std::string source;  // the file it was read from (empty when built in code)
  std::string family;  // one of SupportedFamilies()
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t num_hidden_layers = 0;
  int64_t intermediate_size = 0;  // dense MLP layers (0 when the model has none)
  std::string dtype = "bfloat16";
  NormKind norm = NormKind::kRmsNorm;
  bool norm_bias = false;     // LayerNorm with bias (Phi-3.5-MoE)
  bool lm_head_bias = false;  // Phi-3.5-MoE
  bool tie_word_embeddings = false;
  AttentionSpec attention;
  MoeSpec moe;
  std::vector<bool> moe_layers;  // [num_hidden_layers]: true where the layer's MLP is MoE
  // [num_hidden_layers] where attention.linear is present: true where the layer's token mixer is
  // linear attention instead of `attention`; empty otherwise.
  std::vector<bool> linear_attention_layers;
  // [num_hidden_layers] where attention.sliding_window > 0: true where the layer attends over the
  // sliding window (HF layer_types "sliding_attention"), false where over the whole causal context;
  // empty otherwise.
  std::vector<bool> sliding_attention_layers;
  int64_t num_nextn_predict_layers = 0;  // MTP modules of the checkpoint (HF; trained only with --mtp-layers)
  // HF max_position_embeddings (0 = not given: a dockyard model spec, or a config without it) and
  // whether the config has a rope_scaling block: the positions the checkpoint covers (seq_len.h).
  int64_t max_position_embeddings = 0;
  bool rope_scaling = false;
  // The spec's optional `training` block (memory and traffic settings); CLI flags override it.
  std::optional<TrainingConfig> training;
  // The block's `gpus_per_node` and `gpu_memory_gib` (machine.h MachineFromTrainingJson); the
  // defaults without a block. Written back into the block with it.
  Machine machine;

  int64_t NumMoeLayers() const;
  int64_t NumLinearAttentionLayers() const;
  int64_t NumSlidingAttentionLayers() const;
  bool IsLinearAttentionLayer(int64_t layer) const { return !linear_attention_layers.empty() && linear_attention_layers[layer]; }
};

// The families dockyard reads, as {family, HF architectures name, model_type}.
struct FamilyInfo {
  const char* family;
  const char* architecture;
  const char* model_type;
};
const std::vector<FamilyInfo>& SupportedFamilies();
std::string SupportedFamiliesText();
// The message for a family dockyard does not know ("" when it knows it); `suggest` adds the
// nearest supported name.
std::string UnknownFamilyRule(const std::string& family, bool suggest);

// Bytes per element of a dtype name ("bfloat16", "float16", "float32", "float8_e4m3fn", ...).
// Throws dockyard::Error naming `where` for an unknown dtype.
int64_t DtypeBytes(std::string_view dtype, std::string_view where);
// The canonical torch name of a dtype synonym ("bf16" -> "bfloat16", "fp32" -> "float32", ...).
std::string CanonicalDtype(const std::string& dtype);

// The most decoder layers a model may have (ValidateModelSpec, the spec and Megatron readers):
// a bound far above any model (DeepSeek-V3 61, Kimi-K2 61), checked before the per-layer vectors
// are sized, so that a typo does not allocate gigabytes first.
constexpr int64_t kMaxHiddenLayers = 100000;

// Checks every invariant of a spec (sizes >= 1, 1 <= top_k <= num_experts, heads divisible by
// KV heads, one layer type per layer, ...). `file` prefixes messages; fields are named by their
// spec JSON pointer, or, with `from_hf`, by the normalized field name.
void ValidateModelSpec(const ModelSpec& spec, const std::string& file, bool from_hf = false);

}  // namespace dockyard
