// HF config.json readers for the attention variants of newer MoE families, applied on top of
// the family's base reader in hf_config.cc:
//   - DeepSeek-V3.2(-Exp), DeepseekV32ForCausalLM: MLA plus DeepSeek Sparse Attention's
//     lightning indexer (index_n_heads, index_head_dim, index_topk);
//   - Qwen3-Next, Qwen3NextForCausalLM: Qwen3-MoE plus a gated shared expert, gated attention
//     (q_proj doubled for the output gate) and Gated DeltaNet linear attention on every layer
//     but each full_attention_interval-th (or as `layer_types` lists them);
//   - MiniMax-M2, MiniMaxM2ForCausalLM: full attention in every layer with q/k norms over the
//     full projection width, sigmoid routing with a correction bias;
//   - ERNIE-4.5-MoE, Ernie4_5_MoeForCausalLM: GQA, dense MLP outside [moe_layer_start_index,
//     moe_layer_end_index], shared experts, softmax routing with a correction bias;
//   - Ling 2.0 (Ling-mini/flash/1T-2.0), BailingMoeV2ForCausalLM (model_type bailing_moe): GQA
//     with a fused query_key_value and per-head q/k RMSNorm, first_k_dense_replace dense layers,
//     shared experts, sigmoid routing with an expert bias and group-limited top-k.
// Key names and defaults follow transformers' configuration_deepseek_v32.py /
// configuration_qwen3_next.py. Errors (dockyard::Error) name the file, the JSON pointer, the
// value and the rule.
#pragma once

#include <string>

#include "planner/base/json_util.h"
#include "planner/model/model_spec.h"

namespace dockyard {

// Shared experts counted in units of the routed expert (DeepSeek n_shared_experts, GLM-4.5,
// ERNIE moe_num_shared_experts): reads the count under `count_key` (default 0), bounds it and
// moe_intermediate_size, and sets shared_expert_intermediate_size = count ·
// moe_intermediate_size (all shared experts are one MLP of their total width).
void ReadSharedExpertsInExpertUnits(const JsonView& c, const std::string& count_key, ModelSpec& m);

// Reads the lightning indexer keys into m.attention.indexer (m must already be MLA).
void ReadDsaIndexer(const JsonView& c, ModelSpec& m);

// Reads MiniMax-M2's keys on top of the Mixtral-style base (num_local_experts, per-expert
// intermediate_size, renormalized top-k): q/k norms (use_qk_norm with qk_norm_type "per_layer":
// over the full projection width), sigmoid scores with a routing bias (scoring_func,
// use_routing_bias). Refuses what the inventory would get wrong: attn_type_list entries other
// than 1 (0 is MiniMax-01's lightning attention), a sliding_window, a shared expert
// (shared_intermediate_size > 0). MTP modules (num_mtp_modules) are not part of the main model.
void ReadMinimaxM2Extras(const JsonView& c, ModelSpec& m);

// Reads ERNIE-4.5-MoE's MLP keys into a spec whose common and attention keys are read
// (transformers modeling_ernie4_5_moe.py): moe_num_experts, moe_k, moe_intermediate_size,
// moe_num_shared_experts shared experts of moe_intermediate_size each (one MLP of their total
// width), softmax scores with the moe_statics correction bias, renormalized top-k, and the
// MoE layer rule (i + 1) % moe_layer_interval == 0 and moe_layer_start_index <= i <=
// moe_layer_end_index (absent or -1: the last layer). use_bias true (biases on every linear
// layer) is refused: the inventory has no MLP biases.
void ReadErnie45MoeExtras(const JsonView& c, ModelSpec& m);

// Reads Ling 2.0's keys into a spec whose common, GQA and layer keys (first_k_dense_replace,
// num_nextn_predict_layers) are read. Keys and defaults follow the checkpoints'
// configuration_bailing_moe_v2.py / modeling_bailing_moe_v2.py (inclusionAI Ling-V2; mirrored
// in NVIDIA NeMo Automodel components/models/ling_v2): num_experts, num_experts_per_tok,
// moe_intermediate_size, num_shared_experts (default 1) shared experts of
// moe_shared_expert_intermediate_size (absent: moe_intermediate_size) as one MLP of count ·
// width, score_function (default "sigmoid") with moe_router_enable_expert_bias (default true, the
// gate's fp32 expert_bias [E]), n_group / topk_group (defaults 8 / 4), norm_topk_prob (default
// true), routed_scaling_factor, use_qk_norm (default true: query/key_layernorm [head_dim]),
// use_qkv_bias. Refused, naming the key, the value and the rule: an architecture other than
// BailingMoeV2ForCausalLM (Ling 1.x BailingMoeForCausalLM shares model_type bailing_moe),
// use_bias true (a bias on attention.dense, not modelled), use_sliding_window true, a
// score_function other than "sigmoid" / "softmax".
void ReadBailingMoeV2Extras(const JsonView& c, ModelSpec& m);

// Reads Qwen3-Next's shared expert (shared_expert_intermediate_size, with its sigmoid gate),
// the attention output gate and the Gated DeltaNet block with its per-layer placement into a
// spec already read as qwen3_moe.
void ReadQwen3NextExtras(const JsonView& c, ModelSpec& m);

}  // namespace dockyard
