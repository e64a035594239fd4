// Memory-bound kernels of a layer (see kernels_model.h).
#include "planner/cost/kernels_model.h"
#include "planner/cost/units.h"
#include "planner/model/pipeline_schedule.h"

#include <algorithm>

namespace dockyard {
namespace {

constexpr double kScoreBytes = 4.0;         // router scores and the loss's exponentials: fp32
constexpr double kIndexBytes = 8.0;         // top-k indices: int64

// RMSNorm over `width` elements of `tokens` tokens: forward reads x and writes y, backward reads
// x and dy and writes dx.
KernelBytes Norm(const char* name, double tokens, double width, double ab, bool backward) {
  return {name, (backward ? 3.0 : 2.0) * tokens * width * ab};
}

}  // namespace

bool RotaryRunsUnfused(const ModelSpec& m, bool megatron) {
  return megatron && m.attention.kind == AttentionKind::kGqa && m.attention.rope_attention_factor != 1.0;
}

double UnfusedRotaryFactor(const ModelSpec& m, bool megatron) {
  return RotaryRunsUnfused(m, megatron) ? m.attention.rope_attention_factor : 0.0;
}

std::vector<KernelBytes> AttentionBlockKernels(const ModelSpec& m, const KernelShape& s, bool backward) {
  const auto& a = m.attention;
  const double D = static_cast<double>(m.hidden_size), ab = s.act_bytes, T = s.tokens, sp = s.sp_tokens;
  const double heads = static_cast<double>(a.num_attention_heads) / s.tp;
  std::vector<KernelBytes> k;
  k.reserve(7 + static_cast<size_t>(s.ring_steps));  // two norms, two latent norms (MLA), rotary, two residual adds, ring corrections
  k.push_back(Norm("input_rmsnorm", sp, D, ab, backward));
  if (a.kind == AttentionKind::kMla) {
    // The latent norms of MLA (q_a_layernorm, kv_a_layernorm) on the replicated down-projections.
    if (a.q_lora_rank > 0) k.push_back(Norm("q_a_layernorm", T, static_cast<double>(a.q_lora_rank), ab, backward));
    k.push_back(Norm("kv_a_layernorm", T, static_cast<double>(a.kv_lora_rank), ab, backward));
    // Rotary on the rope part of every local query head and of the one shared key.
    const double dr = static_cast<double>(a.qk_rope_head_dim);
    k.push_back({"rotary", 2.0 * T * (heads + 1.0) * dr * ab});
  } else {
    const double kv_heads = static_cast<double>(a.num_key_value_heads) / s.tp;
    const double hd = static_cast<double>(a.head_dim);
    if (a.qk_norm != QkNorm::kNone) k.push_back(Norm("qk_norm", T, (heads + kv_heads) * hd, ab, backward));
    if (!s.rotary_unfused) {
      k.push_back({"rotary", 2.0 * T * (heads + kv_heads) * hd * ab});
    } else {
      // PyTorch's eager rotary on q, then on k (kernels_model.h): each op's elements read and
      // written, in units of the tensor's N elements, x ab.
      struct Op {
        const char* name;
        double n;
      };
      static const Op kForward[] = {{"rotary_mul_cos", 2}, {"rotary_neg", 1}, {"rotary_cat_half", 2},
                                    {"rotary_mul_sin", 2}, {"rotary_add", 3}, {"rotary_cat_pass", 2}};
      static const Op kBackward[] = {{"rotary_mul_sin_bwd", 2}, {"rotary_neg_bwd", 1}, {"rotary_chunk_bwd", 2},
                                     {"rotary_mul_cos_bwd", 2}, {"rotary_grad_add", 3}, {"rotary_slice_bwd", 3}};
      for (const double n : {T * heads * hd, T * kv_heads * hd}) {
        if (!backward) {
          // cos / sin of the [tokens, d] frequencies in fp32, scaled, cast (an upper bound on their rows).
          for (const char* table : {"rotary_cos", "rotary_cos_scale", "rotary_cos_cast", "rotary_sin", "rotary_sin_scale", "rotary_sin_cast"}) {
            k.push_back({table, 8.0 * T * hd});
          }
        }
        for (const Op& op : backward ? kBackward : kForward) k.push_back({op.name, op.n * n * ab});
      }
    }
  }
  k.push_back(Norm("post_attention_rmsnorm", sp, D, ab, backward));
  // The context-parallel ring's per-step corrections (TransformerEngine AttnFuncWithCPAndKVP2P):
  // forward, the fp32 output and LSE rescaled and accumulated (read + write: 8 B per element of
  // T x heads x (d_v + 1)); backward, the fp32 query gradient accumulated (T x heads x d_qk x 8 B).
  if (s.ring_steps > 1) {
    const double d_v = static_cast<double>(a.VHeadDim());
    const double d_qk = static_cast<double>(a.QkHeadDim());
    const KernelBytes step = backward ? KernelBytes{"cp_dq_accumulate", 8.0 * T * heads * d_qk}
                                      : KernelBytes{"cp_out_correction", 8.0 * T * heads * (d_v + 1.0)};
    for (int i = 1; i < static_cast<int>(s.ring_steps); ++i) k.push_back(step);
  }
  k.push_back({"residual_add", 3.0 * sp * D * ab});  // after attention
  k.push_back({"residual_add", 3.0 * sp * D * ab});  // after the MLP
  return k;
}

std::vector<KernelBytes> RouterKernels(const ModelSpec& m, const KernelShape& s, bool backward) {
  const double E = static_cast<double>(m.moe.num_experts), k = static_cast<double>(m.moe.top_k), Tr = s.router_tokens;
  if (backward) return {{"router_score_bwd", Tr * 3.0 * E * kScoreBytes}};
  return {{"router_score", Tr * 2.0 * E * kScoreBytes}, {"router_topk", Tr * (E * kScoreBytes + k * (kScoreBytes + kIndexBytes))}};
}

KernelBytes SwigluKernel(double rows, double f, double ab, bool backward) {
  return {"swiglu", (backward ? 5.0 : 3.0) * rows * f * ab};
}

ExpertEagerShape ExpertEagerShapeOf(const ModelSpec& m, const TrainingConfig& t, bool megatron, double f, double ab) {
  ExpertEagerShape s;
  s.f = f, s.hidden = static_cast<double>(m.hidden_size), s.act_bytes = ab;
  s.probs_bytes = t.dispatcher == Dispatcher::kDeepEp ? 4.0 : ab;
  const ExpertEagerOps ops = ExpertEagerOpsOf(m, t, megatron);
  s.clamp = ops.clamp;
  s.fc2_bias = ops.fc2_bias;
  return s;
}

std::vector<KernelBytes> ExpertEagerKernels(const ExpertEagerShape& s, bool backward) {
  std::vector<KernelBytes> k;
  if (s.rows <= 0) return k;
  const double a = s.act_bytes, q = std::max(s.act_bytes, s.probs_bytes), cast = q != a ? 1.0 : 0.0;
  if (s.clamp) k.push_back({"expert_act_clamp", s.rows * s.f * (backward ? 11.0 * a + 8.0 : 8.0 * a)});
  if (s.fc2_bias) {
    const double per_row = backward ? cast * 2.0 * (a + q) + 2.0 * a + 6.0 * q : a + 5.0 * q + cast * (a + q);
    k.push_back({"expert_fc2_bias", s.rows * s.hidden * per_row});
  }
  return k;
}

std::vector<KernelBytes> LossKernels(const ModelSpec& m, const KernelShape& s, bool fused, bool backward) {
  const double D = static_cast<double>(m.hidden_size), ab = s.act_bytes;
  const double logits = s.tokens * static_cast<double>(m.vocab_size) / s.tp;  // elements of the vocabulary shard
  std::vector<KernelBytes> k;
  k.reserve(2);
  k.push_back(Norm("final_rmsnorm", s.sp_tokens, D, ab, backward));
  double per_logit;
  if (fused) {
    per_logit = backward ? 2.0 * ab : ab;  // bwd re-reads the logits and writes the gradient
  } else {
    per_logit = backward ? kScoreBytes + ab : ab + 2.0 * kScoreBytes;  // fp32 exponentials written, re-read
  }
  k.push_back({fused ? "cross_entropy_fused" : "cross_entropy", logits * per_logit});
  return k;
}

std::vector<KernelBytes> EmbeddingBackwardKernels(const ModelSpec& m, const KernelShape& s, bool megatron_main_grad, double grad_bytes) {
  const double D = static_cast<double>(m.hidden_size), ab = s.act_bytes;
  const double table = static_cast<double>(m.vocab_size) / s.tp * D;  // elements of the vocabulary shard
  std::vector<KernelBytes> k;
  k.reserve(3);
  k.push_back({"embedding_grad_zero", table * ab});
  k.push_back({"embedding_grad_scatter", 2.0 * s.tokens * D * ab});  // reads dy, adds into its rows
  if (megatron_main_grad) k.push_back({"embedding_main_grad_add", table * (ab + 2.0 * grad_bytes)});
  return k;
}

std::vector<KernelBytes> StepEndKernels(const StepEndShape& s) {
  constexpr double kFp32 = 4.0;
  const double G = s.grad_buffer_bytes, S = s.optimizer_elems;
  const double weights = kFp32 + s.moment_bytes;  // the fp32 weights stepped (master or params) and the moments
  std::vector<KernelBytes> k;
  k.reserve(8);
  if (s.megatron) {
    k.push_back({"zero_grad_buffer", G});
    if (s.nan_check) k.push_back({"check_for_nan_in_grad", G});
    if (s.data_parallel) k.push_back({"grad_scaling", 2.0 * G});
    if (s.grad_bytes != kFp32) k.push_back({"main_grad_copy", S * (s.grad_bytes + kFp32)});
    if (s.clip) {
      k.push_back({"grad_norm", S * kFp32});
      k.push_back({"clip_grad", 2.0 * S * kFp32});
    }
    k.push_back({"adam", S * (2.0 * weights + kFp32)});
    if (s.master_bytes > 0) k.push_back({"param_copy", S * (kFp32 + s.param_bytes)});
    return k;
  }
  if (s.clip) {
    k.push_back({"grad_norm", G});
    k.push_back({"clip_grad", 2.0 * G});
  }
  k.push_back({"adam", S * (2.0 * weights + s.grad_bytes)});
  return k;
}

double MemoryBoundUs(const KernelBytes& kernel, double hbm_gbps, double hbm_efficiency, double floor_us) {
  const double bw = hbm_gbps * hbm_efficiency * kBytesPerUsPerGbps;
  return std::max(kernel.bytes / bw, floor_us);
}

double MemoryBoundUs(const std::vector<KernelBytes>& kernels, double hbm_gbps, double hbm_efficiency, double floor_us) {
  double us = 0;
  for (const KernelBytes& k : kernels) us += MemoryBoundUs(k, hbm_gbps, hbm_efficiency, floor_us);
  return us;
}

double MainGradBytesPerElement(bool megatron, bool accumulation_fused, double grad_bytes, double param_bytes) {
  if (!megatron) return param_bytes;
  return accumulation_fused ? 2.0 * grad_bytes : 2.0 * param_bytes + 2.0 * grad_bytes;
}

double GroupedWgradAccumulateUs(double local_expert_elems, double bytes_per_element, double hbm_gbps, const MemoryBoundKnobs& knobs) {
  const double bw = hbm_gbps * knobs.hbm_efficiency * kBytesPerUsPerGbps;
  return bw > 0 ? knobs.wgrad_accumulate_share * local_expert_elems * bytes_per_element / bw : 0.0;
}

double MoeSyncIdleUs(const TrainingConfig& t, bool megatron, int64_t ep, const HostKnobs& host) {
  return MoeLayerSynchronizes(t, megatron, ep) ? host.moe_sync_idle_us : 0.0;
}

double LaunchGapUs(double kernels, bool cuda_graphs, double kernel_launch_us, double graph_launch_us) {
  return kernels * (cuda_graphs ? graph_launch_us : kernel_launch_us);
}

KernelExtrasUs KernelExtras(const ModelSpec& m, const KernelShape& s, const MemoryBoundKnobs& o, const RunSettings& run, double hbm_gbps,
                            bool full_recompute) {
  const auto& a = m.attention;
  auto mem = [&](const std::vector<KernelBytes>& k) { return MemoryBoundUs(k, hbm_gbps, o.hbm_efficiency, o.floor_us); };
  auto gap = [&](double kernels) { return LaunchGapUs(kernels, run.cuda_graphs, o.kernel_launch_us, o.graph_launch_us); };
  const double attn_gemms = a.kind == AttentionKind::kMla ? (a.q_lora_rank > 0 ? 5.0 : 4.0) : 2.0;
  const double tp = s.tp;
  KernelExtrasUs x;
  for (int pass = 0; pass < 2; ++pass) {
    const bool bwd = pass == 1;
    const double gemm_launches = bwd ? 2.0 : 1.0;  // dgrad and wgrad in the backward
    const auto attn = AttentionBlockKernels(m, s, bwd);
    // One flash kernel per ring step (1 without context parallelism's ring).
    x.attention[pass] = mem(attn) + gap(attn_gemms * gemm_launches + s.ring_steps + static_cast<double>(attn.size()));
    if (m.moe.num_experts > 0) {
      const auto router = RouterKernels(m, s, bwd);
      x.router[pass] = mem(router) + gap(gemm_launches + static_cast<double>(router.size()));
      x.grouped_gemm[pass] = gap(2.0 * gemm_launches + 1.0);
    }
    if (m.moe.num_shared_experts > 0) {
      const double fs = static_cast<double>(m.moe.shared_expert_intermediate_size) / tp;
      x.shared_experts[pass] = mem({SwigluKernel(s.tokens, fs, s.act_bytes, bwd)}) + gap(2.0 * gemm_launches + 1.0);
    }
    if (m.intermediate_size > 0) {
      const double fd = static_cast<double>(m.intermediate_size) / tp;
      x.dense_mlp[pass] = mem({SwigluKernel(s.tokens, fd, s.act_bytes, bwd)}) + gap(2.0 * gemm_launches + 1.0);
    }
    const auto loss = LossKernels(m, s, run.fused_cross_entropy, bwd);
    x.lm_head[pass] = mem(loss) + gap(gemm_launches + static_cast<double>(loss.size()));
  }
  if (full_recompute) {
    x.attention[1] += x.attention[0];
    x.router[1] += x.router[0];
    x.grouped_gemm[1] += x.grouped_gemm[0];
    x.shared_experts[1] += x.shared_experts[0];
    x.dense_mlp[1] += x.dense_mlp[0];
  }
  return x;
}

}  // namespace dockyard
