// GEMM and flash-attention efficiency by shape, for the kernel-level compute model
// (`--compute-model kernels`, the default; docs/cost-model.md "GEMM efficiency by shape"). Nothing here is read
// with `--compute-model gemm` (the older model), except the FP8 GEMM rule (Fp8GemmSpeedup).
//
// (Knobs: ComputeKnobs::gemm and ::flash, knobs.h.)
// A GEMM C[M, N] = A[M, K] B[K, N] (2 M N K FLOP) runs at
//   eff(M, N, K) = shape_efficiency · M / (M + grouped_half_rows) · N / (N + half_nk) · K / (K + half_nk)
// of the dense BF16 peak: increasing in each dim, the ceiling reached only when every dim fills the
// GPU (tensor parallelism shrinks N or K; few rows per expert shrink M). The calibrated priors
// reproduce the grouped-GEMM component measurements of testdata/fidelity/runs.json (TE CUTLASS
// grouped GEMM on H100, TransformerEngine PR #2045; torch._grouped_mm on H200, pytorch PR #156203).
// A grouped GEMM runs each expert's rows padded to whole tiles of tile_rows rows (the M tile
// of the CUTLASS / DeepGEMM grouped kernels), so an expert with 129 rows costs two tiles.
//
// Flash attention (forward) runs at
//   eff = max_efficiency · d / (d + half_head_dim) · L / (L + half_seq)
// with d the query/key head dim and L the keys a query attends on average (the sequence length,
// half of it under causal masking); the backward at bwd_ratio of the forward's efficiency
// and 2.5x its FLOPs (5 matmuls against 2); below head dim 128 at small_head_efficiency /
// small_head_bwd_efficiency of that (knobs.h FlashKnobs). Priors: FlashAttention-3 on H100 BF16, head dim 128,
// 430 TFLOP/s at 512 tokens to 621 at 16K (pytorch/benchmark PR #2391) and head dim 256, 642 at
// 16K (Shah et al., arXiv 2407.08608, Fig. "Attention forward speed, head dim 256").
#pragma once

#include "planner/model/precision.h"
#include "planner/model/training.h"
#include "planner/cost/cluster.h"
#include "planner/cost/knobs.h"
#include "planner/model/model_spec.h"

namespace dockyard {

// Whether a run's GEMMs are FP8 and with which scaling (precision.h Fp8Gemms, Fp8ScalingOf): a
// setting of the run, read from its training config. The router, lm_head and the flash core stay
// BF16 whatever it says.
struct GemmPrecision {
  bool fp8 = false;
  Fp8Scaling scaling = Fp8Scaling::kNone;
  // TransformerEngine's FP8 dot-product attention (training.fp8_dot_product_attention): the flash
  // core at the FP8 knobs (FlashCoreUs).
  bool fp8_attention = false;
  // The GPU's FP8 attention backward below head dim 128 runs the full causal core
  // (ClusterSpec::fp8_small_head_bwd_full_causal); set by the cluster overload below.
  bool fp8_small_head_bwd_full_causal = false;
};
// The run's precision; the second form with the GPU's FP8 attention kernels (the one pricing uses).
GemmPrecision GemmPrecisionOf(const TrainingConfig& training);
GemmPrecision GemmPrecisionOf(const TrainingConfig& training, const ClusterSpec& cluster);

// Grouped-GEMM efficiency of `--compute-model gemm` for an expert with `rows` rows:
// eff(M) = grouped_max_efficiency * M / (M + grouped_half_rows) (docs/cost-model.md, grouped GEMM).
double GroupedGemmEfficiency(double rows, const ComputeKnobs& knobs);

// eff(M, N, K) above; a dim <= 0 gives 0.
double GemmShapeEfficiency(double m, double n, double k, const ComputeKnobs& knobs);

// One linear layer Y[M, N] = X[M, K] W[K, N] at `peak_tflops`, in microseconds: the forward GEMM
// (M, N, K), or the backward's dgrad (M, K, N) plus wgrad (N, K, M).
double LinearUs(double m, double n, double k, bool backward, double peak_tflops, const ComputeKnobs& knobs, GemmPrecision precision = {});

// The linears of one layer's attention block or SwiGLU MLP on a rank: forward Y[T, n] = X[T, k]
// W[k, n] with the tensor-parallel split (column-parallel: n = out / tp; row-parallel: k = in / tp;
// replicated: unsplit, MLA's down-projections). The one home of those shapes: the kernel model's
// compute (ShapedCompute) and the TP exposure's GEMM partners (tp_overlap.h) read them.
//  - GQA: qkv (column, n = (heads + 2 kv_heads) x head_dim / tp, k = hidden), o (row, n = hidden,
//    k = heads x head_dim / tp);
//  - MLA: q_a (replicated, q_lora_rank x hidden) and q_b (column, heads x (qk_nope + qk_rope) / tp
//    x q_lora_rank), or q (column, k = hidden) without q compression; kv_a (replicated,
//    kv_lora_rank + qk_rope x hidden); kv_b (column, heads x (qk_nope + v) / tp x kv_lora_rank);
//    o (row, n = hidden, k = heads x v / tp);
//  - a SwiGLU MLP of width f: fc1 (column, n = 2 f / tp, k = hidden), fc2 (row, n = hidden,
//    k = f / tp).
struct LinearShape {
  enum Split { kReplicated, kColumn, kRow };
  double n = 0, k = 0;
  Split split = kReplicated;
};
struct LinearShapes {
  LinearShape items[5];
  int size = 0;
};
LinearShapes AttentionLinearShapes(const ModelSpec& model, double tp);
LinearShapes MlpLinearShapes(double hidden, double f, double tp);

// One expert's SwiGLU MLP forward (gate_up: N = 2 f, K = hidden; down: N = hidden, K = f) on
// `rows` rows padded to whole tile_rows tiles, in microseconds; 0 for no rows.
// With FP8 GEMMs (precision.fp8) and `hbm_gbps` > 0, plus the quantize kernels of both inputs.
double ExpertMlpForwardUs(double rows, double hidden, double f, double peak_tflops, const ComputeKnobs& knobs, GemmPrecision precision,
                          double hbm_gbps = 0);

// How many times faster a GEMM of a given shape runs with FP8 GEMMs (precision.fp8) than in
// BF16: the FP8 peak (precision.h kFp8PeakOverBf16) times fp8_efficiency_ratio, or with MXFP8
// times mxfp8_efficiency_ratio (knobs.h); 1 without FP8.
// The one FP8 GEMM rule of both compute models: LinearUs / ExpertMlpForwardUs here, and the
// fixed-efficiency GEMMs of the default model (layer_terms.cc: attention projections, grouped GEMM,
// shared experts, dense MLP, MLA up-projections). The router, lm_head and the flash core stay BF16.
double Fp8GemmSpeedup(const ComputeKnobs& knobs, GemmPrecision precision);

// How much faster `model`'s flash core runs at sequence `seq_len` with FP8 attention
// (precision.fp8_attention; 1 without) than in BF16: the forward + backward time ratio of
// FlashCoreUs, one number for the reports and for the fixed-efficiency model's core (layer_terms.cc).
// At query-key head dims of 128 and more it is flash.fp8_speedup (the shapes measured: GQA 128, MLA
// 192); below, it follows the sequence and the window: on GB200 (flash.fp8_small_head_*, cluster.cc)
// gpt-oss at seq 4,096 (window 128 on half the layers) prices 0.67x (0.55x at 32,768), where cuDNN 9.19 measured
// 0.654x at window 1,024 (forward + backward 0.209 + 0.487 ms BF16, 0.203 + 0.862 FP8).
double FlashCoreSpeedup(const ComputeKnobs& knobs, GemmPrecision precision, const ModelSpec& model, double seq_len);
// Whether query-key head dim `head_dim` is a small head for the flash kernels: under 128, the
// smallest head dim of the measured shapes the flash curve is fitted at (GQA 128, MLA 192). The one
// home of that line: FlashCoreUs's FP8 ratios and FlashEfficiencyAtKeys' small-head fraction.
bool FlashSmallHead(double head_dim);
// The same for `model`'s attention core under `training`'s precision and sequence on `cluster`
// (its knobs and FP8 attention kernels).
double FlashCoreSpeedup(const ClusterSpec& cluster, const TrainingConfig& training, const ModelSpec& model);

// Muon's Newton-Schulz matmuls (muon.h) for every Muon matrix of `model` (and its `mtp_layers`
// MTP modules) orthogonalized once on one GPU of `peak_tflops`, in microseconds: per matrix
// (m x n, m <= n) kMuonNewtonSchulzSteps x (X X^T: GEMM (m, m, n); A A: (m, m, m); B X: (m, n, m)),
// by shape with `by_shape` (the kernel-level model), else at dense_efficiency; BF16 matmuls
// (--muon-fp32-matmul-prec medium). `elems` (optional) receives the matrices' elements.
double MuonNewtonSchulzFullUs(const ModelSpec& model, int64_t mtp_layers, double peak_tflops, const ComputeKnobs& knobs, bool by_shape,
                              double* elems = nullptr);

// Flash-attention efficiency (fraction of peak) for head dim `head_dim` when each query attends
// `attended` keys on average: max_efficiency x head_dim / (head_dim + half_head_dim) x attended /
// (attended + half_seq), x bwd_ratio for the backward; at a small head (FlashSmallHead) x
// small_head_efficiency (forward) or small_head_bwd_efficiency (backward). Fitted per GPU to
// cuDNN's sweeps (cluster.cc; docs/cluster.md [G4], [G5]).
double FlashEfficiencyAtKeys(double head_dim, double attended, bool backward, const ComputeKnobs& knobs);
// The same at sequence `seq_len`: causal, seq_len / 2 keys per query; else seq_len; with a sliding
// window of `window` keys (0 = none) CausalAttendedKeys (causal only).
double FlashAttentionEfficiency(double head_dim, double seq_len, bool causal, bool backward, const ComputeKnobs& knobs, double window = 0);
// Keys one query attends on average in a causal core of `seq_len` tokens: seq_len / 2; with a
// sliding window of `window` keys shorter than the sequence (a query attends itself and the
// window - 1 keys before it: transformers' sliding-window mask, TransformerEngine's window_size
// (window - 1, 0)), the min(i + 1, window) keys of query i averaged: window - window (window - 1) /
// (2 seq_len). gpt-oss at seq 4,096, window 128: 128 - 128 x 127 / 8,192 = 126.0 keys, where full
// causal attention gives 2,048.
double CausalAttendedKeys(double seq_len, double window);
// The forward FLOPs of one layer's attention core over `tokens` local tokens with `heads_local`
// heads, averaged over the model's attention layers (full causal, and sliding-window where
// ModelSpec::sliding_attention_layers marks them): 2 x tokens x CausalAttendedKeys x heads_local x
// (d_qk + d_v). The backward does 2.5x.
double AttentionCoreFlops(const ModelSpec& model, double tokens, double seq_len, double heads_local);
// The flash core of one layer, forward or backward, averaged over the model's attention layers, in
// microseconds, as the kernel-level model prices it: each layer kind's FLOPs at
// FlashEfficiencyAtKeys of its keys per query, the keys of one ring step under context parallelism
// (RingCoreEfficiency; a sliding window shorter than a step's keys keeps its own). Under FP8
// attention (knobs.h FlashKnobs): x flash.fp8_speedup at head dims of 128 and more; below, the
// forward x fp8_small_head_fwd_speedup, the backward at fp8_small_head_bwd_efficiency of the curve
// and, with precision.fp8_small_head_bwd_full_causal, over every layer's full causal core (a window's keys
// replaced by seq_len / 2). `peak_tflops` dense BF16.
double FlashCoreUs(const ModelSpec& model, double tokens, double seq_len, double heads_local, double ring_steps, bool backward,
                   double peak_tflops, const ComputeKnobs& knobs, GemmPrecision precision);
// The causal flash core's efficiency when context parallelism runs it as a ring of `ring_steps`
// steps (TransformerEngine's AttnFuncWithCPAndKVP2P, --cp-comm-type p2p: ring_steps = cp; 1
// otherwise, as with the Ulysses all-to-all, whose core sees the whole sequence): each step
// attends the rank's seq / cp queries (two load-balanced chunks) to one block of keys, half a
// block after step 0, so every step attends seq / (2 cp) keys on average -- a causal core of
// seq / cp. At seq 4096, cp 8 that is 256 keys per step: FlashAttentionEfficiency's key factor
// 256 / (256 + half_seq) = 0.52 where the whole sequence gives 2048 / 2288 = 0.90.
double RingCoreEfficiency(double head_dim, double seq_len, double ring_steps, bool backward, const ComputeKnobs& knobs);

// The shaped compute of the GEMM-bound phases of one layer and of lm_head, per micro-batch,
// [0] forward, [1] backward (without recomputation), in microseconds. Attention: the projections
// by their shapes after TP (GQA: qkv (N = (H + 2 KV) hd / tp, K = D), o (N = D, K = H hd / tp);
// MLA: q_a (N = q_lora), q_b (N = H (dn + dr) / tp, K = q_lora) or q (K = D), kv_a
// (N = kv_lora + dr), kv_b (N = H (dn + dv) / tp, K = kv_lora), o (K = H dv / tp); the latent
// down-projections are not TP-sharded) and the causal flash core; router (N = E); shared experts
// and dense MLP as two linears (gate_up N = 2 F / tp, down K = F / tp); lm_head (N = V / tp);
// an MTP module's eh_proj (N = D / tp, K = 2 D: mtp.h, a column-parallel linear; FP8 with FP8 GEMMs).
struct ShapedComputeUs {
  double attention[2] = {0, 0}, router[2] = {0, 0}, shared_experts[2] = {0, 0}, dense_mlp[2] = {0, 0}, lm_head[2] = {0, 0};
  double eh_proj[2] = {0, 0};
};
// `tokens` T (M of every dense GEMM), `router_tokens` (Workload::dispatch_tokens), `tp`, `seq_len`,
// `ring_steps` (RingCoreEfficiency: cp under the p2p ring, else 1). With FP8 GEMMs and `hbm_gbps`
// > 0, each FP8 linear also pays its input's quantize kernel.
ShapedComputeUs ShapedCompute(const ModelSpec& model, double tokens, double router_tokens, double tp, double seq_len, double ring_steps,
                              double peak_tflops,
                              const ComputeKnobs& knobs, GemmPrecision precision, double hbm_gbps = 0);

}  // namespace dockyard
