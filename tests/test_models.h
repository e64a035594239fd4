// Small models built in code for tests (hand arithmetic in the tests that use them).
#pragma once

#include "planner/model/model_spec.h"

namespace dockyard::testing {

// A tiny Mixtral-like model: vocab 1000, hidden 64, 2 MoE layers, 4 heads of 16 (2 KV heads),
// 8 experts, top_k 2, moe_intermediate_size 32, untied embeddings.
inline ModelSpec TinyMixtral() {
  ModelSpec m;
  m.name = "tiny";
  m.family = "mixtral";
  m.vocab_size = 1000;
  m.hidden_size = 64;
  m.num_hidden_layers = 2;
  m.attention.num_attention_heads = 4;
  m.attention.num_key_value_heads = 2;
  m.attention.head_dim = 16;
  m.moe.num_experts = 8;
  m.moe.top_k = 2;
  m.moe.moe_intermediate_size = 32;
  m.moe_layers = {true, true};
  return m;
}

// `m` with MLA attention: q_lora_rank 48, kv_lora_rank 32, qk_nope_head_dim 16, qk_rope_head_dim 8,
// v_head_dim 16 (per head: q_b out 24, kv_b out 32).
inline ModelSpec WithTinyMla(ModelSpec m) {
  m.attention.kind = AttentionKind::kMla;
  m.attention.q_lora_rank = 48;
  m.attention.kv_lora_rank = 32;
  m.attention.qk_nope_head_dim = 16;
  m.attention.qk_rope_head_dim = 8;
  m.attention.v_head_dim = 16;
  return m;
}

}  // namespace dockyard::testing
