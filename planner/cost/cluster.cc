// Cluster presets and cluster JSON (see cluster.h and docs/cluster.md).
#include "planner/cost/cluster.h"

#include <cmath>
#include <limits>
#include <sys/stat.h>

#include <fmt/format.h>

#include "planner/base/error.h"

namespace dockyard {
namespace {

// B200's operator table, from the sweeps SimuMax ran on the machine of its B200 rows (TE
// general_gemm and TE attention back to back; MooreThreads/SimuMax@4dcaae513ba7679d56c116a17cd4a691ec41e252
// configs/system/b200_bf16_ceperm.json; docs/cluster.md [B4]), as fractions of the 2,250 TFLOP/s peak:
//  - GEMMs by shape: shape_efficiency 0.54, grouped_half_rows 125, half_nk 300 -- the least-squares
//    fit (in log time) of eff(M, N, K) = s M/(M+h) N/(N+n) K/(K+n) to its 30 measured shape-passes
//    of this model (dense o_proj, MLP, lm_head, q_b, kv_b; grouped gate-up and down at 1,024 and
//    512 rows; forward, data and weight gradient), 19 % RMS: a small reduction dimension (the
//    weight gradient's K = rows) is what makes grouped weight gradients slowest (0.22-0.29);
//  - MLA flash attention (128 heads, qk 192, seq 4096): 0.416 forward and 0.32 backward with causal
//    FLOPs (0.831 / 0.643 non-causal): max_efficiency 0.489 (= 0.416 / (192/202 x 2048/2288)),
//    bwd_ratio 0.77;
//  - memory-bound kernels at 0.666 of HBM bandwidth;
//  - the older gemm model: dense 0.488 (the sweep's default), grouped 0.42 (the 1,024-row passes'
//    harmonic mean 0.378 over M/(M+125)), flash 0.36 (forward and backward, harmonic);
//  - FP8 attention (not in SimuMax's sweep): cuDNN's FP8 against BF16 fused attention on B200, GQA (128
//    q / 8 kv heads, head dim 128), causal, seq 4,096: forward + backward 0.482 + 1.650 = 2.132 ms BF16,
//    0.447 + 1.414 = 1.861 ms FP8 (NVIDIA/cudnn-frontend benchmark/sdpa_benchmark_training/artifacts/
//    sdpa_fp8_benchmark_results_NVIDIA_B200.csv @ 0b1577c8; docs/cluster.md [B7]): fp8_speedup 1.15;
//    below head dim 128 borrowed from GB200's cuDNN (the same die; kBlackwellFp8SmallHeadFwdSpeedup,
//    kBlackwellFp8SmallHeadBwdEfficiency).
// NVLink5's effective bandwidth per GPU and direction, GB/s: SimuMax's all-gather busbw on B200,
// 0.674 x 900 (configs/system/b200_bf16_ceperm.json; docs/cluster.md [B4]).
constexpr double kNvlink5Gbps = 606.6;  // 0.674 x 900
// NCCL's all-to-all on the same machine: 0.597 x 900, against the all-gather's 0.674 (links.all_to_all_share).
constexpr double kNvlink5AllToAllShare = 0.597 / 0.674;

// FP8 attention at gpt-oss's head dim 64 on GB200 (knobs.h FlashKnobs fp8_small_head_*): cuDNN 9.19,
// 64 q / 8 kv heads, sliding window 1,024, batch 2, forward and backward ms BF16 / FP8 at seq 2,048 /
// 4,096 / 8,192 / 16,384 / 32,768: 0.104 + 0.230 / 0.101 + 0.271, 0.209 + 0.487 / 0.203 + 0.862,
// 0.423 + 0.998 / 0.411 + 3.011, 0.853 + 2.024 / 0.831 + 11.332, 1.711 + 4.099 / 1.667 + 43.921
// (NVIDIA/cudnn-frontend benchmark/sdpa_benchmark_training/results/gb200_919_only_cudnn/
// gpt_oss_20260226_175022.csv @ df73764a; docs/cluster.md [G4]; testdata/fidelity C39, C40).
//  - The forward honours the window: BF16 / FP8 1.026-1.030, geometric mean 1.028.
//  - The backward does not: its time grows as the square of the sequence (x3.2, x3.5, x3.8, x3.9
//    per doubling) where BF16's doubles. As the full causal core (2.5 x 4 x 2 x 64 x s x s/2 x 64
//    FLOPs) it runs at 634 / 797 / 913 / 970 / 1,001 TFLOP/s, 0.902 / 0.887 / 0.874 / 0.854 / 0.843
//    of GB200's BF16 curve at head dim 64 and s/2 keys (max_efficiency 0.794, half_seq 790,
//    bwd_ratio 0.808, small_head_bwd_efficiency 0.898): geometric mean 0.872, 2.5 % RMS in log.
//    cuDNN 9.22 at window 128 (128 heads; .../results/gpt_oss/gb200/gpt_oss_20260424_100011.csv,
//    C41) agrees: 0.536 / 1.731 / 6.176 / 23.231 / 90.348 ms, 0.912-0.819 of the curve.
// B200 borrows them (the same die, no B200 measurement at that head dim).
constexpr double kBlackwellFp8SmallHeadFwdSpeedup = 1.028;
constexpr double kBlackwellFp8SmallHeadBwdEfficiency = 0.872;

// BF16 flash attention at gpt-oss's head dim 64 on GB200 (knobs.h FlashKnobs small_head_efficiency,
// small_head_bwd_efficiency): cuDNN 9.19, 64 q / 8 kv heads, sliding window 1,024 (testdata/fidelity
// components C33 forward, C34 backward), and cuDNN 9.22, 128 heads, window 128 (C35, C36), batch 2,
// seq 2,048-32,768, TFLOP/s of the window's FLOPs, each over GB200's curve (max_efficiency 0.794,
// half_seq 790, bwd_ratio 0.808) at head dim 64 and the window's keys per query
// (CausalAttendedKeys): forward 0.587-0.657 (window 1,024) and 0.657-0.700 (128), backward
// 0.817-0.852 and 0.935-0.975. Their geometric means: forward 0.655 (9 points, 5.1 % RMS in log),
// backward 0.898 (10 points, 6.8 %). B200 and B300 borrow them (the same die; no measurement at
// that head dim).
constexpr double kBlackwellSmallHeadEfficiency = 0.655;
constexpr double kBlackwellSmallHeadBwdEfficiency = 0.898;

ComputeKnobs B200ComputeKnobs() {
  ComputeKnobs k;
  k.gemm.shape_efficiency = 0.54;
  k.gemm.grouped_half_rows = 125.0;
  k.gemm.half_nk = 300.0;
  k.gemm.dense_efficiency = 0.488;
  k.gemm.grouped_max_efficiency = 0.42;
  k.flash.max_efficiency = 0.489;
  k.flash.bwd_ratio = 0.77;
  k.flash.fixed_efficiency = 0.36;
  k.flash.fp8_speedup = 1.15;
  k.flash.fp8_small_head_fwd_speedup = kBlackwellFp8SmallHeadFwdSpeedup;
  k.flash.fp8_small_head_bwd_efficiency = kBlackwellFp8SmallHeadBwdEfficiency;
  k.flash.small_head_efficiency = kBlackwellSmallHeadEfficiency;
  k.flash.small_head_bwd_efficiency = kBlackwellSmallHeadBwdEfficiency;
  k.memory_bound.hbm_efficiency = 0.666;
  return k;
}

// The SMs of each preset's GPU (ClusterSpec::sm_count): H100 SXM (and H200, H800: the same GH100
// configuration) 132, H100 PCIe 114 (NVIDIA H100 Tensor Core GPU Architecture whitepaper, table 3),
// B200 and GB200 148, B300 and GB300 160 (NVIDIA technical blog "Inside NVIDIA Blackwell Ultra: The
// Chip Powering the AI Factory Era", 2025-08: 160 SMs against Blackwell's 148; docs/cluster.md [S1]).
constexpr int64_t kH100PcieSms = 114;
constexpr int64_t kBlackwellSms = 148;
constexpr int64_t kBlackwellUltraSms = 160;

// The EP all-to-all kernels' and TransformerEngine's userbuffers' SM shares on a GPU of `sms` SMs:
// knobs.h's default kernel widths (NCCL 16 channels' CTAs, DeepEP 20 SMs, HybridEP 32, userbuffers 16)
// over them. The communication side's slowdowns stay knobs.h's figures unless the caller sets them.
void SetSmShares(int64_t sms, ClusterSpec* c) {
  const double n = static_cast<double>(sms);
  c->sm_count = sms;
  c->knobs.dispatchers.ep_overlap.all_to_all_sm_share = static_cast<double>(kNcclAllToAllCtas) / n;
  c->knobs.dispatchers.ep_overlap.deepep_sm_share = static_cast<double>(kDeepEpNumSms) / n;
  c->knobs.dispatchers.ep_overlap.hybridep_sm_share = static_cast<double>(kHybridEpNumSms) / n;
  c->knobs.compute.tp_overlap.sm_share = static_cast<double>(kTeUserbufferNumSms) / n;
}

// Blackwell's EP overlap beside its SM shares: NCCL's and DeepEP's communication rates stay knobs.h's
// figures (measured on other GPUs; none on Blackwell), HybridEP's 1 (assumed: knobs.h's 0.349 was
// measured on H100's RDMA path, and the NVL72 presets' HybridEP runs NVLink-only kernels).
void SetBlackwellEpOverlap(int64_t sms, ClusterSpec* c) {
  SetSmShares(sms, c);
  c->knobs.dispatchers.ep_overlap.hybridep_comm_rate = 1.0;  // no Blackwell measurement (knobs.h's 0.349 is H100's RDMA path): assumed
}

// The flex dispatcher's NVLink bandwidth on Blackwell, as a fraction of intra_node_gbps (606.6):
// 0.83 = 502.6 GB/s, HybridEP on GB200 through its torch API at 32 SMs (Megatron-Bridge's recipes'
// moe_hybridep_num_sms), BF16 dispatch and combine averaged over 8, 16, 24, 32 and 36 ranks (dispatch
// 545.7 / 523.5 / 507.3 / 484.2 / 479.0, combine 568.9 / 521.6 / 483.8 / 464.5 / 447.9 GB/s algbw,
// 4,096 tokens, hidden 7,168, top-8); on B200 at 8 ranks HybridEP reaches 0.88 (535.9 / 530.9 at 16
// SMs) and DeepEP 0.75 (494 / 420 at 24 SMs) (deepseek-ai/DeepEP@41cad944 docs/README_Hybrid-EP.md;
// docs/cluster.md [B6]). knobs.h's prior, 0.362, is DeepEP on H200 (issue #493). The RDMA figure stays.
DeepEpKnobs BlackwellDeepEpKnobs() {
  DeepEpKnobs k;
  k.nvlink_efficiency = 0.83;
  return k;
}

// A flash-attention table fitted to a cuDNN sweep on the GPU (half_head_dim stays at its prior, 10);
// `small_head` and `small_head_bwd`: the forward's and backward's fractions of the curve below head
// dim 128; `fp8_small_head_fwd` and `fp8_small_head_bwd`: FP8 attention there (knobs.h), cuDNN's FP8
// backward at its fraction of the curve (the full causal core: ClusterSpec::fp8_small_head_bwd_full_causal).
FlashKnobs MeasuredFlash(double max_efficiency, double half_seq, double bwd_ratio, double fixed_efficiency, double fp8_speedup,
                         double fp8_small_head_fwd, double fp8_small_head_bwd, double small_head, double small_head_bwd) {
  FlashKnobs f;
  f.fp8_small_head_fwd_speedup = fp8_small_head_fwd;
  f.fp8_small_head_bwd_efficiency = fp8_small_head_bwd;
  f.small_head_efficiency = small_head;
  f.small_head_bwd_efficiency = small_head_bwd;
  f.max_efficiency = max_efficiency;
  f.half_seq = half_seq;
  f.bwd_ratio = bwd_ratio;
  f.fixed_efficiency = fixed_efficiency;
  f.fp8_speedup = fp8_speedup;
  return f;
}

// GB200's operator table: B200's GEMM and memory-bound figures (the same Blackwell die, at GB200's own
// 2,500 TFLOP/s peak), with GB200's own measurements where they exist:
//  - MXFP8 GEMMs: TransformerEngine's MXFP8 grouped GEMM (multi-stream cuBLAS) at DeepSeek-V3's expert
//    shape (K 7,168, N 2,048) reaches 2,672 TFLOP/s on GB200 (NVIDIA/Megatron-LM
//    docs/discussions/deepseek-v3-gb200-optimization, "Baseline", item 3), 0.534 of its 5,000 FP8 peak,
//    against 0.449 for BF16 by the table (16,384 rows per group): mxfp8_efficiency_ratio 1.19. GB200's
//    FP8 cuBLASLt GEMMs (per-tensor scaling) at 4,096 / 8,192 / 16,384 cubed, 2,578.9 / 2,624.5 / 2,695.0
//    TFLOP/s = 0.516 / 0.525 / 0.539 of the FP8 peak (Azure ND GB200 v6, docs/cluster.md [G3]), against
//    the table's BF16 0.455 / 0.495 / 0.517 at those shapes: fp8_efficiency_ratio 1.08, the geometric
//    mean of 1.134 / 1.060 / 1.043 (knobs.h's 0.87 is DeepGEMM on H800);
//  - flash attention: cuDNN 9.19's fused attention on GB200, BF16, causal, batch 1, TFLOP/s forward /
//    backward with causal FLOPs (NVIDIA/cudnn-frontend benchmark/sdpa_benchmark_training/results/
//    gb200_919_only_cudnn/{llama3.1,dsv3}_*.csv; docs/cluster.md [G4]): GQA (64 q / 8 kv heads, head
//    dim 128) at seq 2,048 / 4,096 / 8,192 / 16,384 / 32,768: 1,042 / 1,335 / 1,598 / 1,687 / 1,720
//    and 836 / 1,132 / 1,311 / 1,402 / 1,473; MLA (128 heads, qk 192, v 128): 1,065 / 1,350 / 1,527 /
//    1,740 / 1,815 and 880 / 1,108 / 1,248 / 1,317 / 1,289. FlashAttentionEfficiency's least-squares
//    fit (in log) over the ten forwards with half_head_dim at its prior 10: max_efficiency 0.794,
//    half_seq 790 keys, 1.8 % RMS; bwd_ratio 0.808, the geometric mean of the ten backward / forward
//    ratios; fixed_efficiency 0.47, the forward and backward at seq 4,096 weighted by their FLOPs
//    (3.5 / (1 / 0.537 + 2.5 / 0.448)). SimuMax's B200 machine, an older cuDNN, measured 0.416 / 0.32.
//    FP8 attention, the same files at seq 4,096, forward + backward ms BF16 / FP8: GQA 0.206 + 0.607 /
//    0.161 + 0.559 (1.129x), MLA 0.509 + 1.613 / 0.359 + 1.310 (1.271x): fp8_speedup 1.20, their
//    geometric mean; at head dim 64, forward 1.028x and the backward as the full causal core at 0.872 of
//    the BF16 curve (kBlackwellFp8SmallHeadFwdSpeedup, kBlackwellFp8SmallHeadBwdEfficiency). BF16 at head dim 64:
//    0.655 (forward) and 0.898 (backward) of the curve (kBlackwellSmallHeadEfficiency).
ComputeKnobs Gb200ComputeKnobs() {
  ComputeKnobs k = B200ComputeKnobs();
  k.gemm.mxfp8_efficiency_ratio = 1.19;
  k.gemm.fp8_efficiency_ratio = 1.08;
  k.flash = MeasuredFlash(0.794, 790.0, 0.808, 0.47, 1.20, kBlackwellFp8SmallHeadFwdSpeedup, kBlackwellFp8SmallHeadBwdEfficiency,
                          kBlackwellSmallHeadEfficiency, kBlackwellSmallHeadBwdEfficiency);
  return k;
}

// GB300's operator table: GB200's, with GB300's own flash attention: cuDNN 9.26 on GB300, BF16, causal,
// batch 2, MLA (128 heads, qk 192, v 128), TFLOP/s forward / backward with causal FLOPs at seq 2,048 /
// 4,096 / 8,192 / 16,384: 1,359 / 1,693 / 1,937 / 2,059 and 923 / 1,157 / 1,274 / 1,316
// (NVIDIA/cudnn-frontend benchmark/sdpa_benchmark_training/results/dsv3/gb300/dsv3_20260724_041345.csv;
// docs/cluster.md [G5]). Blackwell Ultra's doubled softmax-exponent rate lifts the forward. The same fit:
// max_efficiency 0.941, half_seq 660, 0.4 % RMS; bwd_ratio 0.665; fixed_efficiency 0.51 (3.5 / (1 /
// 0.677 + 2.5 / 0.463)). 32,768 is left out: its backward falls (1,304) where the forward still rises.
// FP8 attention at seq 4,096, forward + backward ms BF16 / FP8: 0.812 + 3.090 / 0.477 + 1.770: 1.74x;
// at gpt-oss's head dim 64 (cuDNN 9.19 on GB300, the shape of GB200's figures; .../gb300_919_only_cudnn/
// gpt_oss_20260226_185932.csv @ df73764a, C42): forward and backward ms BF16 / FP8 at seq 2,048-32,768
// 0.089 + 0.221 / 0.074 + 0.253, 0.178 + 0.472 / 0.148 + 0.792, 0.359 + 0.965 / 0.299 + 2.752,
// 0.722 + 1.951 / 0.600 + 10.265, 1.448 + 3.930 / 1.204 + 39.694: forward 1.202x (geometric mean);
// the backward, the full causal core again, at 0.998-1.037 of GB300's BF16 curve (small_head_bwd
// 0.827): 1.025, 1.4 % RMS in log.
// BF16 at that shape (components C37, C38: window 1,024, seq 2,048-32,768) over GB300's curve at head
// dim 64: forward 0.531-0.608, backward 0.801-0.843; geometric means 0.582 (5.0 % RMS in log) and
// 0.827 (1.9 %).
ComputeKnobs Gb300ComputeKnobs() {
  ComputeKnobs k = Gb200ComputeKnobs();
  k.flash = MeasuredFlash(0.941, 660.0, 0.665, 0.51, 1.74, 1.202, 1.025, 0.582, 0.827);
  return k;
}

}  // namespace

std::vector<std::string> ClusterPresetNames() {
  return {"h100-sxm", "h200-sxm", "h100-pcie-400g", "h800-sxm", "b200", "gb200-nvl72", "b300", "gb300-nvl72"};
}

std::string ClusterPresetNamesText() {
  std::string names;
  for (const auto& n : ClusterPresetNames()) names += (names.empty() ? "" : ", ") + n;
  return names;
}

ClusterSpec ClusterPreset(const std::string& name) {
  ClusterSpec c;
  c.name = name;
  if (name == "h100-sxm") return c;  // the defaults above
  if (name == "h200-sxm") {
    c.compute_source = "borrowed: h100-sxm priors (the same Hopper SMs)";
    c.hbm_gbps = 4800.0;
    c.memory_gib = 140.4;
    return c;
  }
  if (name == "h100-pcie-400g") {
    c.compute_source = "borrowed: h100-sxm priors (no H100 PCIe operator measurement)";
    c.dense_bf16_tflops = 756.0;
    c.hbm_gbps = 2000.0;
    c.knobs.links.intra_node_gbps = 50.0;  // PCIe Gen5 x16: 64 GB/s per direction, ~50 GB/s achieved
    c.knobs.links.intra_node_latency_us = 5.0;
    c.knobs.links.network_gbps = 6.0;  // one 400 Gb/s NIC (~48 GB/s) shared by 8 GPUs
    c.knobs.links.network_latency_us = 10.0;
    c.nics_per_node = 1;
    SetSmShares(kH100PcieSms, &c);
    return c;
  }
  // docs/cluster.md cites every value below.
  if (name == "h800-sxm") {
    c.compute_source = "borrowed: h100-sxm priors (the same Hopper SMs)";
    c.knobs.links.intra_node_gbps = 160.0;  // NVLink ~160 GB/s achievable (DeepSeek-V3 report, section 3.2.2)
    return c;                   // H100 compute, HBM and memory; 8 x 400 Gb/s InfiniBand per node
  }
  if (name == "b200") {  // DGX B200: 8 x B200, NVLink5, 8 x ConnectX-7 400 Gb/s
    c.dense_bf16_tflops = 2250.0;
    c.hbm_gbps = 7672.0;    // 7680-bit bus x 3996 MHz DDR (pytorch/ao PR #4002), not the datasheet's 8 TB/s
    c.memory_gib = 179.06;  // nvidia-smi: 183359 MiB (docs/cluster.md [M4])
    // SimuMax's collectives on the B200 machine of its rows: all-gather 0.674, reduce-scatter 0.673 of
    // NVLink5's 900 GB/s per direction (docs/cluster.md [B4]).
    c.knobs.links.intra_node_gbps = kNvlink5Gbps;
    c.knobs.links.all_to_all_share = kNvlink5AllToAllShare;
    c.knobs.compute = B200ComputeKnobs();
    SetBlackwellEpOverlap(kBlackwellSms, &c);
    c.knobs.dispatchers.deepep = BlackwellDeepEpKnobs();
    c.compute_source = "B200 operator table: SimuMax's B200 sweep (docs/cluster.md [B4])";
    c.mxfp8_tensor_cores = true;
    c.fp8_small_head_bwd_full_causal = true;  // cuDNN 9.19 / 9.22 on GB200 and GB300 (kBlackwellFp8SmallHeadBwdEfficiency)
    return c;
  }
  if (name == "b300") {  // HGX / DGX B300: 8 x B300 (Blackwell Ultra), NVLink5, 8 x ConnectX-8 800 Gb/s (docs/cluster.md [B5])
    c.dense_bf16_tflops = 2250.0;  // 36 PFLOPS BF16 with sparsity per 8 GPUs / 2 / 8, as B200
    c.hbm_gbps = 7672.0;           // borrowed: B200's measured bus (the datasheet prints 8 TB/s for both)
    c.memory_gib = 268.2;          // 288 GB HBM3e (datasheet; no nvidia-smi figure found): 288e9 / 2^30
    c.knobs.links.intra_node_gbps = kNvlink5Gbps;  // B200's measured NVLink5 figure: the same ports and switch generation
    c.knobs.links.all_to_all_share = kNvlink5AllToAllShare;
    c.knobs.links.network_gbps = 96.0;              // one 800 Gb/s ConnectX-8 per GPU: 2 x B200's 48 (400 Gb/s)
    c.knobs.compute = B200ComputeKnobs();
    SetBlackwellEpOverlap(kBlackwellUltraSms, &c);
    c.knobs.dispatchers.deepep = BlackwellDeepEpKnobs();
    c.compute_source =
        "borrowed: B200 operator table (no B300 operator measurement; the same Blackwell tensor cores and BF16 peak; B300's faster "
        "softmax exponent is not in it; docs/cluster.md [B4, B5])";
    c.mxfp8_tensor_cores = true;
    c.fp8_small_head_bwd_full_causal = true;  // cuDNN 9.19 / 9.22 on GB200 and GB300 (kBlackwellFp8SmallHeadBwdEfficiency)
    return c;
  }
  if (name == "gb200-nvl72") {  // 18 compute trays of 4 B200-class GPUs, one NVLink domain of 72
    c.gpus_per_node = 4;
    c.nvlink_domain_gpus = 72;
    c.dense_bf16_tflops = 2500.0;
    c.hbm_gbps = 8000.0;
    c.memory_gib = 185.03;  // nvidia-smi: 189471 MiB (docs/cluster.md [M5])
    c.knobs.links.intra_node_gbps = kNvlink5Gbps;  // B200's measured NVLink5 figure: the same ports and switch generation
    c.knobs.links.all_to_all_share = kNvlink5AllToAllShare;
    c.nics_per_node = 4;  // one 400 Gb/s NIC per GPU
    c.knobs.compute = Gb200ComputeKnobs();
    c.compute_source =
        "GB200's own flash attention (cuDNN 9.19 sweep) and MXFP8 grouped GEMM; GEMMs and memory-bound kernels borrowed from the B200 "
        "operator table (the same die; no GB200 GEMM sweep) (docs/cluster.md [B4, G3, G4])";
    SetBlackwellEpOverlap(kBlackwellSms, &c);
    c.knobs.dispatchers.deepep = BlackwellDeepEpKnobs();
    c.mxfp8_tensor_cores = true;
    c.fp8_small_head_bwd_full_causal = true;  // cuDNN 9.19 / 9.22 on GB200 and GB300 (kBlackwellFp8SmallHeadBwdEfficiency)
    return c;
  }
  if (name == "gb300-nvl72") {  // 18 compute trays of 4 B300-class GPUs, one NVLink domain of 72 (docs/cluster.md [G2])
    c.gpus_per_node = 4;
    c.nvlink_domain_gpus = 72;
    c.dense_bf16_tflops = 2500.0;  // 360 PFLOPS FP16/BF16 with sparsity / 2 / 72, as GB200
    c.hbm_gbps = 8000.0;           // 576 TB/s / 72 (datasheet), as gb200-nvl72
    c.memory_gib = 268.2;          // 288 GB HBM3e per GPU (datasheet; no nvidia-smi figure found): 288e9 / 2^30
    c.knobs.links.intra_node_gbps = kNvlink5Gbps;
    c.knobs.links.all_to_all_share = kNvlink5AllToAllShare;
    c.knobs.links.network_gbps = 96.0;  // one 800 Gb/s ConnectX-8 per GPU (72 per rack)
    c.nics_per_node = 4;
    c.knobs.compute = Gb300ComputeKnobs();
    c.compute_source =
        "GB300's own flash attention (cuDNN 9.26 sweep); GEMMs, MXFP8 and memory-bound kernels borrowed from gb200-nvl72's table (no GB300 "
        "GEMM measurement; docs/cluster.md [B4, G2, G3, G5])";
    SetBlackwellEpOverlap(kBlackwellUltraSms, &c);
    c.knobs.dispatchers.deepep = BlackwellDeepEpKnobs();
    c.mxfp8_tensor_cores = true;
    c.fp8_small_head_bwd_full_causal = true;  // cuDNN 9.19 / 9.22 on GB200 and GB300 (kBlackwellFp8SmallHeadBwdEfficiency)
    return c;
  }
  std::string message =
      fmt::format("unknown cluster preset \"{}\"; presets: {} (or a path to a cluster JSON file)", name, ClusterPresetNamesText());
  message += DidYouMeanText(name, ClusterPresetNames());
  throw Error(message);
}

ClusterSpec ClusterFromJson(const Json& json, const std::string& file) {
  JsonView v(&json, file, "");
  // A calibration file given where a cluster goes (QA: only "/description: unknown key" was said).
  if (json.is_object() && json.contains("format") && json.at("format") == "dockyard-calibration") {
    v.Fail("format", "\"dockyard-calibration\": this is a calibration file, not a cluster; give it as --calibration FILE and the "
                     "cluster it calibrates (its \"preset\") as --cluster");
  }
  v.RejectUnknownKeys({"name", "base", "gpus_per_node", "nodes", "dense_bf16_tflops", "hbm_gbps", "memory_gib", "sm_count", "intra_node_gbps",
                       "intra_node_latency_us", "network_gbps", "network_latency_us", "nics_per_node", "nvlink_domain_gpus"});
  ClusterSpec c;
  const std::string base = v.StringOr("base", "h100-sxm");
  try {
    c = ClusterPreset(base);
  } catch (const Error& e) {
    v.Fail("base", e.what());
  }
  c.name = v.StringOr("name", file);
  if (c.name.empty()) v.Fail("name", "must be a non-empty string (messages and reports name the cluster by it), got \"\"");
  c.gpus_per_node = v.IntOr("gpus_per_node", c.gpus_per_node);
  if (c.gpus_per_node > (int64_t{1} << 20)) v.Fail("gpus_per_node", fmt::format("{} exceeds 2^20", c.gpus_per_node));
  c.nodes = v.IntOr("nodes", c.nodes, 0);
  auto positive = [&](const char* key, double& field, double max) {
    field = v.NumberOr(key, field);
    if (!(field > 0) || field > max) v.Fail(key, fmt::format("must be a number in (0, {}], got {}", max, field));
  };
  // Rates: at least 0.001 (a GFLOP/s, a MB/s; the CPU test cluster's are 0.01 and 1), so that a
  // model's times stay finite (a rate of 1e-300 made every time inf).
  auto rate = [&](const char* key, double& field) {
    field = v.NumberOr(key, field);
    if (!(field >= kMinClusterRate) || field > 1e6) {
      v.Fail(key, fmt::format("must be a number in [{}, 1000000] (a rate; below {} every time overflows), got {}", kMinClusterRate,
                              kMinClusterRate, field));
    }
  };
  rate("dense_bf16_tflops", c.dense_bf16_tflops);
  rate("hbm_gbps", c.hbm_gbps);
  positive("memory_gib", c.memory_gib, 1e6);
  if (v.Has("sm_count")) {
    // The SM shares of the EP overlap and TP overlap knobs follow the GPU's SMs (the base's
    // communication rates stay).
    const int64_t sms = v.Int("sm_count", std::numeric_limits<int64_t>::min());  // the range, with its rule, below
    // The widest default kernel, HybridEP's 32 SMs, must stay within the SM-share knobs' range
    // (at most 0.9 of the GPU, knobs.cc): at least ceil(32 / 0.9) = 36 SMs.
    const int64_t fewest = (kHybridEpNumSms * 10 + 8) / 9;
    if (sms < fewest || sms > 1024) {
      v.Fail("sm_count", fmt::format("must be the GPU's streaming multiprocessors, in [{}, 1024] (HybridEP's default {} SMs at most 0.9 "
                                     "of them, the SM-share knobs' range), got {}",
                                     fewest, kHybridEpNumSms, sms));
    }
    SetSmShares(sms, &c);
  }
  rate("intra_node_gbps", c.knobs.links.intra_node_gbps);
  rate("network_gbps", c.knobs.links.network_gbps);
  positive("intra_node_latency_us", c.knobs.links.intra_node_latency_us, 1e6);
  positive("network_latency_us", c.knobs.links.network_latency_us, 1e6);
  c.nics_per_node = v.IntOr("nics_per_node", c.nics_per_node, 1);
  if (c.nics_per_node > 1024) v.Fail("nics_per_node", fmt::format("must be in [1, 1024], got {}", c.nics_per_node));
  c.nvlink_domain_gpus = v.IntOr("nvlink_domain_gpus", c.nvlink_domain_gpus, 0);
  if (c.nvlink_domain_gpus > (int64_t{1} << 20) || (c.nvlink_domain_gpus > 0 && c.nvlink_domain_gpus % c.gpus_per_node != 0)) {
    v.Fail("nvlink_domain_gpus", fmt::format("must be 0 (one node) or a multiple of gpus_per_node ({}) up to 2^20, got {}", c.gpus_per_node,
                                             c.nvlink_domain_gpus));
  }
  return c;
}

ClusterSpec LoadCluster(const std::string& name_or_path) {
  struct stat st {};
  const bool looks_like_path = name_or_path.find('/') != std::string::npos || name_or_path.find(".json") != std::string::npos;
  if (looks_like_path || stat(name_or_path.c_str(), &st) == 0) return ClusterFromJson(ReadJsonFile(name_or_path), name_or_path);
  return ClusterPreset(name_or_path);
}

Json ClusterToJson(const ClusterSpec& c) {
  return Json{{"name", c.name},
              {"gpus_per_node", c.gpus_per_node},
              {"nodes", c.nodes},
              {"dense_bf16_tflops", c.dense_bf16_tflops},
              {"hbm_gbps", c.hbm_gbps},
              {"memory_gib", c.memory_gib},
              {"sm_count", c.sm_count},
              {"intra_node_gbps", c.knobs.links.intra_node_gbps},
              {"intra_node_latency_us", c.knobs.links.intra_node_latency_us},
              {"network_gbps", c.knobs.links.network_gbps},
              {"network_latency_us", c.knobs.links.network_latency_us},
              {"nics_per_node", c.nics_per_node},
              {"nvlink_domain_gpus", c.nvlink_domain_gpus}};
}

}  // namespace dockyard
