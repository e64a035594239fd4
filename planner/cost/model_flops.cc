// Megatron's model FLOPs per token (see model_flops.h).
#include "planner/cost/model_flops.h"

#include <fmt/format.h>

#include "planner/base/error.h"

namespace dockyard {

double AttentionMatmulParams(const ModelSpec& m) {
  const auto& a = m.attention;
  const double D = static_cast<double>(m.hidden_size), H = static_cast<double>(a.num_attention_heads);
  if (a.kind == AttentionKind::kMla) {
    const double dn = static_cast<double>(a.qk_nope_head_dim), dr = static_cast<double>(a.qk_rope_head_dim);
    const double dv = static_cast<double>(a.v_head_dim), ql = static_cast<double>(a.q_lora_rank);
    const double kvl = static_cast<double>(a.kv_lora_rank);
    const double q = a.q_lora_rank > 0 ? D * ql + ql * H * (dn + dr) : D * H * (dn + dr);
    return q + D * (kvl + dr) + kvl * H * (dn + dv) + H * dv * D;
  }
  const double hd = static_cast<double>(a.head_dim), kv = static_cast<double>(a.num_key_value_heads);
  return D * (H + 2.0 * kv) * hd + H * hd * D;
}

double ModelFlopsPerToken(const ModelSpec& m, int64_t seq_len, int64_t mtp_layers) {
  if (seq_len < 1) throw Error(fmt::format("model FLOPs: seq_len must be >= 1, got {}", seq_len));
  if (mtp_layers < 0) throw Error(fmt::format("model FLOPs: MTP layers must be >= 0, got {}", mtp_layers));
  const auto& a = m.attention;
  const double D = static_cast<double>(m.hidden_size), H = static_cast<double>(a.num_attention_heads);
  const double d_qk = static_cast<double>(a.QkHeadDim());
  const double d_v = static_cast<double>(a.VHeadDim());
  const double attn = AttentionMatmulParams(m);
  // Causal core, forward 2 x (QK^T + AV) FLOPs over half the square, times 3 for the backward.
  const double core = 3.0 * static_cast<double>(seq_len) * H * (d_qk + d_v);
  const double moe_mlp =
      3.0 * D *
      (static_cast<double>(m.moe.top_k * m.moe.moe_intermediate_size) + static_cast<double>(m.moe.shared_expert_intermediate_size));
  const double dense_mlp = 3.0 * D * static_cast<double>(m.intermediate_size);
  const double logits = D * static_cast<double>(m.vocab_size);
  double flops = 0;
  for (int64_t l = 0; l < m.num_hidden_layers; ++l) flops += 6.0 * (attn + (m.moe_layers[l] ? moe_mlp : dense_mlp)) + core;
  flops += 6.0 * logits;
  const bool last_moe = m.num_hidden_layers > 0 && m.moe_layers.back();
  flops += static_cast<double>(mtp_layers) * (6.0 * (attn + (last_moe ? moe_mlp : dense_mlp) + logits) + core);
  return flops;
}

}  // namespace dockyard
