// GEMM and flash-attention efficiency by shape (see gemm_efficiency.h).
#include "planner/cost/gemm_efficiency.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "planner/cost/kernels_model.h"
#include "planner/model/muon.h"
#include "planner/model/precision.h"
#include "planner/cost/units.h"

namespace dockyard {
namespace {

double Fill(double x, double half) {
  return x / (x + half);
}

double GemmUs(double m, double n, double k, double peak_tflops, const ComputeKnobs& kn, GemmPrecision p) {
  if (m <= 0 || n <= 0 || k <= 0) return 0.0;
  // FP8: twice the BF16 peak at fp8_efficiency_ratio (MXFP8: mxfp8_efficiency_ratio) of the shape's BF16 efficiency (precision.h).
  return 2.0 * m * n * k / (peak_tflops * kFlopsPerUsPerTflops * GemmShapeEfficiency(m, n, k, kn) * Fp8GemmSpeedup(kn, p));
}

// The FP8 input-quantize kernel of `elements` BF16 elements (0 without FP8 or without hbm_gbps).
double QuantizeUs(double elements, const ComputeKnobs& k, GemmPrecision p, double hbm_gbps) {
  if (!p.fp8 || hbm_gbps <= 0 || elements <= 0) return 0.0;
  return MemoryBoundUs(KernelBytes{"fp8_quantize", elements * Fp8QuantizeBytesPerElement(p.scaling, 2.0)}, hbm_gbps,
                       k.memory_bound.hbm_efficiency, k.memory_bound.floor_us);
}

}  // namespace

double GemmShapeEfficiency(double m, double n, double k, const ComputeKnobs& kn) {
  if (m <= 0 || n <= 0 || k <= 0) return 0.0;
  return kn.gemm.shape_efficiency * Fill(m, kn.gemm.grouped_half_rows) * Fill(n, kn.gemm.half_nk) * Fill(k, kn.gemm.half_nk);
}

double LinearUs(double m, double n, double k, bool backward, double peak_tflops, const ComputeKnobs& kn, GemmPrecision p) {
  if (!backward) return GemmUs(m, n, k, peak_tflops, kn, p);
  return GemmUs(m, k, n, peak_tflops, kn, p) + GemmUs(n, k, m, peak_tflops, kn, p);  // dgrad + wgrad
}

double ExpertMlpForwardUs(double rows, double hidden, double f, double peak_tflops, const ComputeKnobs& k, GemmPrecision p,
                          double hbm_gbps) {
  if (rows <= 0) return 0.0;
  const double tile = k.gemm.tile_rows;
  const double padded = tile > 0 ? std::ceil(rows / tile) * tile : rows;
  return GemmUs(padded, 2.0 * f, hidden, peak_tflops, k, p) + GemmUs(padded, hidden, f, peak_tflops, k, p) +
         QuantizeUs(rows * hidden, k, p, hbm_gbps) + QuantizeUs(rows * f, k, p, hbm_gbps);
}

double Fp8GemmSpeedup(const ComputeKnobs& k, GemmPrecision p) {
  if (!p.fp8) return 1.0;
  return kFp8PeakOverBf16 * (p.scaling == Fp8Scaling::kMxfp8 ? k.gemm.mxfp8_efficiency_ratio : k.gemm.fp8_efficiency_ratio);
}

bool FlashSmallHead(double head_dim) {
  return head_dim < 128;
}

double FlashCoreSpeedup(const ComputeKnobs& k, GemmPrecision p, const ModelSpec& m, double seq_len) {
  if (!p.fp8_attention) return 1.0;
  GemmPrecision bf16 = p;
  bf16.fp8_attention = false;
  // One query row's core (tokens = seq_len, one head) at a unit peak: the ratio needs no more.
  double bf16_us = 0, fp8_us = 0;
  for (bool backward : {false, true}) {
    bf16_us += FlashCoreUs(m, seq_len, seq_len, 1.0, 1.0, backward, 1.0, k, bf16);
    fp8_us += FlashCoreUs(m, seq_len, seq_len, 1.0, 1.0, backward, 1.0, k, p);
  }
  return fp8_us > 0 ? bf16_us / fp8_us : 1.0;
}

double FlashCoreSpeedup(const ClusterSpec& cluster, const TrainingConfig& training, const ModelSpec& model) {
  return FlashCoreSpeedup(cluster.knobs.compute, GemmPrecisionOf(training, cluster), model, static_cast<double>(training.seq_len));
}

GemmPrecision GemmPrecisionOf(const TrainingConfig& training) {
  return GemmPrecision{Fp8Gemms(training), Fp8ScalingOf(training), training.fp8_dot_product_attention, false};
}

GemmPrecision GemmPrecisionOf(const TrainingConfig& training, const ClusterSpec& cluster) {
  GemmPrecision p = GemmPrecisionOf(training);
  p.fp8_small_head_bwd_full_causal = cluster.fp8_small_head_bwd_full_causal;
  return p;
}

double FlashEfficiencyAtKeys(double head_dim, double attended, bool backward, const ComputeKnobs& k) {
  const double eff = k.flash.max_efficiency * Fill(head_dim, k.flash.half_head_dim) * Fill(attended, k.flash.half_seq);
  const double small = FlashSmallHead(head_dim) ? (backward ? k.flash.small_head_bwd_efficiency : k.flash.small_head_efficiency) : 1.0;
  return (backward ? eff * k.flash.bwd_ratio : eff) * small;
}

double CausalAttendedKeys(double seq_len, double window) {
  if (window <= 0 || window >= seq_len) return seq_len / 2.0;
  return window - window * (window - 1.0) / (2.0 * seq_len);
}

double FlashAttentionEfficiency(double head_dim, double seq_len, bool causal, bool backward, const ComputeKnobs& k, double window) {
  return FlashEfficiencyAtKeys(head_dim, causal ? CausalAttendedKeys(seq_len, window) : seq_len, backward, k);
}

double RingCoreEfficiency(double head_dim, double seq_len, double ring_steps, bool backward, const ComputeKnobs& k) {
  return FlashAttentionEfficiency(head_dim, seq_len / std::max(1.0, ring_steps), true, backward, k);
}

namespace {

// The model's attention layers as {share of the layers, keys per query}: the full causal layers
// and, where the model has them, the sliding-window layers.
struct CoreKind {
  double share;
  double window;  // 0 = full causal
};

std::vector<CoreKind> CoreKinds(const ModelSpec& m) {
  const double sliding = static_cast<double>(m.NumSlidingAttentionLayers());
  const double layers = static_cast<double>(std::max<int64_t>(1, m.num_hidden_layers));
  if (sliding <= 0 || m.attention.sliding_window <= 0) return {{1.0, 0.0}};
  return {{1.0 - sliding / layers, 0.0}, {sliding / layers, static_cast<double>(m.attention.sliding_window)}};
}

}  // namespace

double AttentionCoreFlops(const ModelSpec& m, double tokens, double seq_len, double heads_local) {
  const double d = static_cast<double>(m.attention.QkHeadDim() + m.attention.VHeadDim());
  double flops = 0;
  for (const CoreKind& kind : CoreKinds(m)) flops += kind.share * 2.0 * tokens * CausalAttendedKeys(seq_len, kind.window) * heads_local * d;
  return flops;
}

double FlashCoreUs(const ModelSpec& m, double tokens, double seq_len, double heads_local, double ring_steps, bool backward,
                   double peak_tflops, const ComputeKnobs& kn, GemmPrecision p) {
  const double d_qk = static_cast<double>(m.attention.QkHeadDim()), d_v = static_cast<double>(m.attention.VHeadDim());
  const double step_keys = CausalAttendedKeys(seq_len / std::max(1.0, ring_steps), 0.0);  // one ring step's causal core
  // FP8 attention (knobs.h FlashKnobs): one ratio for both passes at head dims of 128 and more; below,
  // the forward's ratio, and the backward at its own fraction of the curve, over the full causal
  // core where cuDNN's FP8 backward skips no block outside the window.
  const bool small = FlashSmallHead(d_qk);
  double speedup = 1.0;
  bool full_causal = false;
  if (p.fp8_attention) {
    if (!small) {
      speedup = kn.flash.fp8_speedup;
    } else if (!backward) {
      speedup = kn.flash.fp8_small_head_fwd_speedup;
    } else {
      speedup = kn.flash.fp8_small_head_bwd_efficiency;
      full_causal = p.fp8_small_head_bwd_full_causal;
    }
  }
  double us = 0;
  for (const CoreKind& kind : CoreKinds(m)) {
    const double keys = CausalAttendedKeys(seq_len, full_causal ? 0.0 : kind.window);
    const double flops = 2.0 * tokens * keys * heads_local * (d_qk + d_v) * (backward ? 2.5 : 1.0);
    const double eff = FlashEfficiencyAtKeys(d_qk, std::min(keys, step_keys), backward, kn);
    us += kind.share * flops / (peak_tflops * kFlopsPerUsPerTflops * eff);
  }
  return us / speedup;
}

LinearShapes AttentionLinearShapes(const ModelSpec& m, double tp) {
  const auto& a = m.attention;
  const double D = static_cast<double>(m.hidden_size), H = static_cast<double>(a.num_attention_heads);
  LinearShapes out;
  auto add = [&](double n, double k, LinearShape::Split split) { out.items[out.size++] = LinearShape{n, k, split}; };
  if (a.kind == AttentionKind::kMla) {
    const double dn = static_cast<double>(a.qk_nope_head_dim), dr = static_cast<double>(a.qk_rope_head_dim);
    const double dv = static_cast<double>(a.v_head_dim), ql = static_cast<double>(a.q_lora_rank);
    const double kvl = static_cast<double>(a.kv_lora_rank);
    if (a.q_lora_rank > 0) {
      add(ql, D, LinearShape::kReplicated);
      add(H * (dn + dr) / tp, ql, LinearShape::kColumn);
    } else {
      add(H * (dn + dr) / tp, D, LinearShape::kColumn);
    }
    add(kvl + dr, D, LinearShape::kReplicated);
    add(H * (dn + dv) / tp, kvl, LinearShape::kColumn);
    add(D, H * dv / tp, LinearShape::kRow);
  } else {
    const double hd = static_cast<double>(a.head_dim), kv = static_cast<double>(a.num_key_value_heads);
    add((H + 2.0 * kv) * hd / tp, D, LinearShape::kColumn);
    add(D, H * hd / tp, LinearShape::kRow);
  }
  return out;
}

LinearShapes MlpLinearShapes(double hidden, double f, double tp) {
  LinearShapes out;
  out.items[out.size++] = LinearShape{2.0 * f / tp, hidden, LinearShape::kColumn};
  out.items[out.size++] = LinearShape{hidden, f / tp, LinearShape::kRow};
  return out;
}

ShapedComputeUs ShapedCompute(const ModelSpec& m, double T, double router_tokens, double tp, double seq_len, double ring_steps, double peak_tflops,
                              const ComputeKnobs& kn, GemmPrecision p, double hbm_gbps) {
  const auto& a = m.attention;
  const double D = static_cast<double>(m.hidden_size), H = static_cast<double>(a.num_attention_heads);
  ShapedComputeUs s;
  for (int pass = 0; pass < 2; ++pass) {
    const bool bwd = pass == 1;
    // Each linear with the FP8 quantize of its input (forward: X [M, K]; backward: dY [M, N]).
    auto lin = [&](double mm, double n, double k) {
      return LinearUs(mm, n, k, bwd, peak_tflops, kn, p) + QuantizeUs(mm * (bwd ? n : k), kn, p, hbm_gbps);
    };
    auto sum = [&](const LinearShapes& shapes) {
      double us = 0;
      for (int i = 0; i < shapes.size; ++i) us += lin(T, shapes.items[i].n, shapes.items[i].k);
      return us;
    };
    const double proj = sum(AttentionLinearShapes(m, tp));
    // Causal core (full and sliding-window layers averaged); the backward does 2.5x the forward's FLOPs.
    s.attention[pass] = proj + FlashCoreUs(m, T, seq_len, H / tp, ring_steps, bwd, peak_tflops, kn, p);
    // The router and lm_head stay BF16 (TransformerEngine runs neither in FP8).
    const GemmPrecision bf16{};
    if (m.moe.num_experts > 0) s.router[pass] = LinearUs(router_tokens, static_cast<double>(m.moe.num_experts), D, bwd, peak_tflops, kn, bf16);
    if (m.moe.num_shared_experts > 0) s.shared_experts[pass] = sum(MlpLinearShapes(D, static_cast<double>(m.moe.shared_expert_intermediate_size), tp));
    if (m.intermediate_size > 0) s.dense_mlp[pass] = sum(MlpLinearShapes(D, static_cast<double>(m.intermediate_size), tp));
    s.lm_head[pass] = LinearUs(T, static_cast<double>(m.vocab_size) / tp, D, bwd, peak_tflops, kn, bf16);
    s.eh_proj[pass] = lin(T, D / tp, 2.0 * D);
  }
  return s;
}

double MuonNewtonSchulzFullUs(const ModelSpec& model, int64_t mtp_layers, double peak_tflops, const ComputeKnobs& kn, bool by_shape,
                              double* elems) {
  double us = 0, n_elems = 0;
  for (const MuonMatrix& x : MuonMatrices(model, mtp_layers)) {
    const double m = std::min(x.rows, x.cols), n = std::max(x.rows, x.cols);
    const double one_step = by_shape ? GemmUs(m, m, n, peak_tflops, kn, {}) + GemmUs(m, m, m, peak_tflops, kn, {}) + GemmUs(m, n, m, peak_tflops, kn, {})
                                     : NewtonSchulzFlops(x, 1) / (peak_tflops * kFlopsPerUsPerTflops * kn.gemm.dense_efficiency);
    us += x.count * kMuonNewtonSchulzSteps * one_step;
    n_elems += x.count * x.rows * x.cols;
  }
  if (elems) *elems = n_elems;
  return us;
}

double GroupedGemmEfficiency(double rows, const ComputeKnobs& k) {
  if (rows <= 0) return k.gemm.grouped_max_efficiency;
  return k.gemm.grouped_max_efficiency * rows / (rows + k.gemm.grouped_half_rows);
}

}  // namespace dockyard
