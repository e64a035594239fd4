// The parameter inventory: every tensor of a model with its HF-style FQN, global shape, dtype,
// role, layer and the tensor dim that tensor parallelism shards. Routed experts appear as fused
// 3-D [num_experts, ...] tensors in the family's stored layout (transformers v5 fused experts:
// gate_up_proj [E, 2F, D], down_proj [E, D, F]; gpt-oss and Llama-4 [E, D, 2F] / [E, F, D];
// DBRX w1/v1/w2 stored [E*F, D], listed as their [E, F, D] view).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "planner/model/model_spec.h"

namespace dockyard {

enum class Role {
  kEmbedding,
  kAttnQ,
  kAttnK,
  kAttnV,
  kAttnQkv,
  kAttnO,
  kAttnQA,
  kAttnQB,
  kAttnKvA,
  kAttnKvB,   // MLA
  kAttnNorm,  // q_norm / k_norm / q_a_layernorm / kv_a_layernorm
  kAttnSinks,
  kAttnBias,     // bias of a column-parallel attention projection
  kAttnOBias,    // bias of o_proj (added after the row-parallel reduce)
  kAttnIndexer,  // DeepSeek Sparse Attention lightning indexer (replicated)
  kAttnLinear,   // Gated DeltaNet linear attention (Qwen3-Next linear_attn)
  kNorm,         // input / post-attention norms (weight or bias)
  kDenseMlpGate,
  kDenseMlpUp,
  kDenseMlpDown,
  kRouterGate,
  kRouterBias,
  kScoreCorrectionBias,
  kExpertGateUp,
  kExpertGate,
  kExpertUp,
  kExpertDown,
  kExpertGateUpBias,
  kExpertDownBias,
  kSharedExpertGate,
  kSharedExpertUp,
  kSharedExpertDown,
  kSharedExpertGateWeight,
  kFinalNorm,
  kLmHead,
  kLmHeadBias,
};

// Stable role name used in reports, e.g. "experts.gate_up", "attention.q", "router.gate".
const char* RoleName(Role role);
// Coarse group for tables: "embedding", "attention", "norm", "dense_mlp", "router",
// "routed_experts", "shared_experts", "lm_head".
const char* RoleGroup(Role role);

struct ParamInfo {
  std::string fqn;             // HF-style, e.g. "model.layers.3.mlp.experts.gate_up_proj"
  std::vector<int64_t> shape;  // global shape, elements
  std::string dtype;           // "bfloat16", ...
  Role role;
  int64_t layer = -1;          // decoder layer index, -1 for embedding / final norm / lm_head
  bool moe_layer = false;      // the layer's MLP is an MoE block
  bool routed_expert = false;  // dim 0 is num_experts
  int tp_dim = -1;             // dim sharded by TP (colwise: out dim; rowwise: in dim); -1 = replicated
  std::string stored_layout;   // routed experts: e.g. "[E, 2F, D]"; empty otherwise
  // Fused tensors whose TP dim concatenates sections (gate | up halves, DBRX's q | k | v):
  // the section sizes along tp_dim. TP shards each section separately (rank r holds rows
  // [r*s/t, (r+1)*s/t) of every section s), so every section must divide by the TP degree.
  // Empty for plain tensors and for gpt-oss's interleaved gate/up, where a plain split is exact.
  std::vector<int64_t> fused_sections;
  // A tied lm_head copy on the last pipeline stage names the embedding it mirrors; such an
  // entry is not counted in the totals.
  std::string tied_to;

  int64_t Numel() const;
};

struct ParamTotals {
  int64_t total_params = 0;
  int64_t routed_expert_params = 0;  // all routed experts of all MoE layers
  int64_t shared_expert_params = 0;
  int64_t non_expert_params = 0;  // total - routed
  int64_t embedding_params = 0;   // input embedding only
  // Active per token: everything but routed experts, plus top_k / num_experts of them.
  int64_t active_params = 0;
  // The DeepSeek / gpt-oss convention: active without the input embedding (a tied embedding is
  // also the lm_head and stays counted).
  int64_t active_params_excluding_embedding = 0;
};

struct ParamInventory {
  std::vector<ParamInfo> params;
  ParamTotals totals;
};

// Builds the inventory of a validated ModelSpec.
ParamInventory BuildInventory(const ModelSpec& spec);

}  // namespace dockyard
