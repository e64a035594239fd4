// HF config.json readers for the attention variants of newer MoE families, applied on top of
// the family's base reader in hf_config.cc:
//   - DeepSeek-V3.2(-Exp), DeepseekV32ForCausalLM: MLA plus DeepSeek Sparse Attention's
//     lightning indexer (index_n_heads, index_head_dim, index_topk);
//   - Qwen3-Next, Qwen3NextForCausalLM: Qwen3-MoE plus a gated shared expert, gated attention
//     (q_proj doubled for the output gate) and Gated DeltaNet linear attention on every layer
//     but each full_attention_interval-th (or as `layer_types` lists them);
//   - MiniMax-M2, MiniMaxM2ForCausalLM: full attention in every layer with q/k norms over the
//     full projection width, sigmoid routing with a correction bias.
// Key names and defaults follow transformers' configuration_deepseek_v32.py /
// configuration_qwen3_next.py. Errors (dockyard::Error) name the file, the JSON pointer, the
// value and the rule.
#pragma once

#include "planner/json_util.h"
#include "planner/model_spec.h"

namespace dockyard {

// Reads the lightning indexer keys into m.attention.indexer (m must already be MLA).
void ReadDsaIndexer(const JsonView& c, ModelSpec& m);

// Reads MiniMax-M2's keys on top of the Mixtral-style base (num_local_experts, per-expert
// intermediate_size, renormalized top-k): q/k norms (use_qk_norm with qk_norm_type "per_layer":
// over the full projection width), sigmoid scores with a routing bias (scoring_func,
// use_routing_bias). Refuses what the inventory would get wrong: attn_type_list entries other
// than 1 (0 is MiniMax-01's lightning attention), a sliding_window, a shared expert
// (shared_intermediate_size > 0). MTP modules (num_mtp_modules) are not part of the main model.
void ReadMinimaxM2Extras(const JsonView& c, ModelSpec& m);

// Reads Qwen3-Next's shared expert (shared_expert_intermediate_size, with its sigmoid gate),
// the attention output gate and the Gated DeltaNet block with its per-layer placement into a
// spec already read as qwen3_moe.
void ReadQwen3NextExtras(const JsonView& c, ModelSpec& m);

}  // namespace dockyard
