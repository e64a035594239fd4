// B200's operator table (cluster.cc B200ComputeKnobs) against the figures it was fitted to:
// SimuMax's sweeps on the machine of its B200 rows (MooreThreads/SimuMax@4dcaae513ba7679d56c116a17cd4a691ec41e252
// configs/system/b200_bf16_ceperm.json; ../shared/fidelity/blackwell-and-corrections.md §1), as
// fractions of the 2,250 TFLOP/s peak, DeepSeek-V3's shapes (hidden 7168, 128 heads, expert F 2048).
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "planner/cost/cluster.h"
#include "planner/cost/gemm_efficiency.h"
#include "planner/cost/kernels_model.h"
#include "planner/cost/network.h"

namespace {

const dockyard::ComputeKnobs& B200() {
  static const dockyard::ComputeKnobs k = dockyard::ClusterPreset("b200").knobs.compute;
  return k;
}

// A GEMM (M, N, K) of the forward, its data gradient (M, K, N) and weight gradient (N, K, M).
double Eff(double m, double n, double k) {
  return dockyard::GemmShapeEfficiency(m, n, k, B200());
}

}  // namespace

TEST_CASE("B200 table: GEMMs by shape, each quoted figure within the fit's reach") {
  // o_proj, M 4096 tokens, N 7168, K 128 x 128: 0.456 / 0.493 / 0.472.
  CHECK(Eff(4096, 7168, 16384) == doctest::Approx(0.456).epsilon(0.10));
  CHECK(Eff(4096, 16384, 7168) == doctest::Approx(0.493).epsilon(0.10));
  CHECK(Eff(7168, 16384, 4096) == doctest::Approx(0.472).epsilon(0.10));
  // lm_head, N 129,280: 0.489 forward.
  CHECK(Eff(4096, 129280, 7168) == doctest::Approx(0.489).epsilon(0.10));
  // Grouped gate-up, EP 8: 32 experts x 1,024 rows, N 4096, K 7168: 0.457 / 0.435 forward and data
  // gradient; the weight gradient (K = 1,024 rows) 0.289 is the slowest, and the table keeps it
  // the slowest of the three.
  CHECK(Eff(1024, 4096, 7168) == doctest::Approx(0.457).epsilon(0.10));
  CHECK(Eff(1024, 7168, 4096) == doctest::Approx(0.435).epsilon(0.10));
  CHECK(Eff(4096, 7168, 1024) < Eff(1024, 7168, 4096));
  // EP 4, 512 rows: forward 0.367 (fewer rows, lower).
  CHECK(Eff(512, 4096, 7168) == doctest::Approx(0.367).epsilon(0.10));
  CHECK(Eff(512, 4096, 7168) < Eff(1024, 4096, 7168));
}

TEST_CASE("B200 table: the 30 measured shape-passes within the fit's 19 % RMS (log time)") {
  struct Shape {
    double m, n, k, fwd, dgrad, wgrad;
  };
  const Shape shapes[] = {{4096, 7168, 16384, 0.456, 0.493, 0.472}, {4096, 36864, 7168, 0.46, 0.46, 0.46},
                          {4096, 7168, 18432, 0.46, 0.46, 0.46},    {4096, 129280, 7168, 0.489, 0.426, 0.461},
                          {1024, 4096, 7168, 0.457, 0.435, 0.289},  {1024, 7168, 2048, 0.384, 0.430, 0.274},
                          {512, 4096, 7168, 0.367, 0.405, 0.219},   {512, 7168, 2048, 0.427, 0.294, 0.215},
                          {4096, 24576, 1536, 0.63, 0.63, 0.63},    {4096, 32768, 512, 0.40, 0.40, 0.40}};
  double sum = 0;
  int n = 0;
  for (const Shape& s : shapes) {
    const double model[3] = {Eff(s.m, s.n, s.k), Eff(s.m, s.k, s.n), Eff(s.n, s.k, s.m)};
    const double measured[3] = {s.fwd, s.dgrad, s.wgrad};
    for (int p = 0; p < 3; ++p, ++n) sum += std::pow(std::log(model[p] / measured[p]), 2);
  }
  CHECK(n == 30);
  CHECK(std::sqrt(sum / n) < 0.20);
}

TEST_CASE("B200 table: the grouped weight gradient's main-grad traffic, from the sweep's fp32 / bf16 main_grad pairs") {
  // SimuMax's B200 sweep runs the same grouped weight-gradient GEMMs with fp32 and with bf16
  // main_grad (configs/system/b200_bf16_ceperm.json). DeepSeek-V3 gate-up, 32 experts x 1,024 rows,
  // N 4,096, K 7,168: 2 x 1,024 x 4,096 x 7,168 x 32 = 1.9241e12 FLOP at 0.289 and 0.347 of 2,250
  // TFLOP/s: 2,959.0 and 2,464.5 us, 494.5 us apart. The traffic differs by 32 x 4,096 x 7,168
  // elements x (8 - 4) B (read and write of a 4 B or a 2 B main_grad) = 3.758 GB, 705.4 us at 0.666
  // of 8,000 GB/s: the exposed share 494.5 / 705.4 = 0.70; the knob's 0.67 gives 472.6 us.
  const dockyard::MemoryBoundKnobs& mb = B200().memory_bound;
  CHECK(mb.wgrad_accumulate_share == 0.67);
  const double elems = 32.0 * 4096 * 7168;
  const double fp32 = dockyard::GroupedWgradAccumulateUs(elems, dockyard::MainGradBytesPerElement(true, true, 4, 2), 8000, mb);
  const double bf16 = dockyard::GroupedWgradAccumulateUs(elems, dockyard::MainGradBytesPerElement(true, true, 2, 2), 8000, mb);
  CHECK(fp32 - bf16 == doctest::Approx(472.6).epsilon(0.002));
  const double measured = 1.9241e12 / (2250e12 * 0.289) * 1e6 - 1.9241e12 / (2250e12 * 0.347) * 1e6;
  CHECK(measured == doctest::Approx(494.5).epsilon(0.002));
  CHECK(fp32 - bf16 == doctest::Approx(measured).epsilon(0.06));
  // The whole term for DeepSeek-V3's 32 local experts at EP 8 (gate, up, down: 3 x 7,168 x 2,048
  // each) with fp32 main_grad: 1.4093e9 elements x 8 B = 11.27 GB, 2,115.8 us at 5,328 GB/s, x 0.67 =
  // 1,417.6 us per layer and micro-batch. torchtitan writes the bf16 gradient once: 2 B, a quarter.
  const double v3 = 32.0 * 3 * 7168 * 2048;
  CHECK(dockyard::GroupedWgradAccumulateUs(v3, dockyard::MainGradBytesPerElement(true, true, 4, 2), 8000, mb) == doctest::Approx(1417.6).epsilon(0.001));
  CHECK(dockyard::GroupedWgradAccumulateUs(v3, dockyard::MainGradBytesPerElement(false, true, 4, 2), 8000, mb) ==
        doctest::Approx(1417.6 / 4).epsilon(0.001));
  // Without Megatron's gradient accumulation fusion the GEMM writes a bf16 gradient and an add reads
  // it into main_grad: 2 + 2 + 8 = 12 B, 1.5 x the fused 8.
  CHECK(dockyard::MainGradBytesPerElement(true, false, 4, 2) == 12.0);
}

TEST_CASE("NVLink5's all-to-all: SimuMax's all-to-all busbw against its all-gather's on the B200 machine") {
  // configs/system/b200_bf16_ceperm.json: all-to-all 0.597, all-gather 0.674 of 900 GB/s. The
  // preset's intra_node_gbps is the all-gather's 606.6; an NCCL all-to-all inside the node runs at
  // 606.6 x 0.597 / 0.674 = 537.3 GB/s (= 0.597 x 900). GB200, B300 and GB300 borrow it; on H100
  // NCCL's 370 GB/s holds for every non-all-reduce collective (nccl-tests issue #212): the share 1.
  CHECK(dockyard::IntraNodeAllToAllGbps(dockyard::ClusterPreset("b200")) == doctest::Approx(0.597 * 900).epsilon(0.001));
  CHECK(dockyard::IntraNodeAllToAllGbps(dockyard::ClusterPreset("gb200-nvl72")) == doctest::Approx(537.3).epsilon(0.001));
  CHECK(dockyard::IntraNodeAllToAllGbps(dockyard::ClusterPreset("h100-sxm")) == doctest::Approx(370.0));
}

TEST_CASE("B200 table: MLA flash attention, memory-bound kernels, the older gemm model") {
  // MLA (qk 192), seq 4096, causal: 0.416 forward, 0.32 backward (0.831 / 0.643 with non-causal FLOPs).
  CHECK(dockyard::FlashAttentionEfficiency(192, 4096, true, false, B200()) == doctest::Approx(0.416).epsilon(0.01));
  CHECK(dockyard::FlashAttentionEfficiency(192, 4096, true, true, B200()) == doctest::Approx(0.32).epsilon(0.01));
  // Memory-bound kernels at 0.666 of HBM; gemm model: dense 0.488 (the sweep's default).
  CHECK(B200().memory_bound.hbm_efficiency == 0.666);
  CHECK(B200().gemm.dense_efficiency == 0.488);
  // Which GPU's figures a preset prices with, as reports print it.
  CHECK(dockyard::ClusterPreset("b200").compute_source.find("SimuMax's B200 sweep") != std::string::npos);
  CHECK(dockyard::ClusterPreset("gb200-nvl72").compute_source.find("GEMMs and memory-bound kernels borrowed from the B200") !=
        std::string::npos);
  CHECK(dockyard::ClusterPreset("b300").compute_source.find("borrowed: B200 operator table") == 0);
}

TEST_CASE("Blackwell flex dispatcher: NVLink efficiency from HybridEP's GB200 table") {
  // deepseek-ai/DeepEP@41cad944 docs/README_Hybrid-EP.md, GB200, torch API, 32 SMs, BF16 dispatch
  // and combine at 8, 16, 24, 32, 36 ranks (GB/s algbw): their mean over 606.6 GB/s (NVLink5 as
  // the presets price it).
  const double dispatch[] = {545.71, 523.48, 507.32, 484.22, 479.02};
  const double combine[] = {568.94, 521.55, 483.76, 464.54, 447.89};
  double sum = 0;
  for (int i = 0; i < 5; ++i) sum += dispatch[i] + combine[i];
  const double measured = sum / 10 / 606.6;  // 502.6 / 606.6 = 0.829
  for (const char* preset : {"b200", "gb200-nvl72", "b300", "gb300-nvl72"}) {
    CAPTURE(preset);
    const auto c = dockyard::ClusterPreset(preset);
    CHECK(c.knobs.dispatchers.deepep.nvlink_efficiency == doctest::Approx(measured).epsilon(0.01));
    CHECK(c.knobs.links.intra_node_gbps == 606.6);
  }
  // On B200 at 8 ranks: HybridEP at 16 SMs (535.94 + 530.86) / 2 = 533.4 GB/s = 0.88; DeepEP at 24
  // SMs (494 + 420) / 2 = 457 = 0.75: the one figure lies between the two backends.
  CHECK(533.4 / 606.6 > 0.83);
  CHECK(457.0 / 606.6 < 0.83);
  // Hopper keeps DeepEP's H200 figure (issue #493: 133.78 GB/s over 370).
  CHECK(dockyard::ClusterPreset("h100-sxm").knobs.dispatchers.deepep.nvlink_efficiency == 0.362);
}

TEST_CASE("GB200 table: B200's, with GB200's own MXFP8 grouped GEMM and FP8 GEMM sweep beside it") {
  const dockyard::ComputeKnobs gb200 = dockyard::ClusterPreset("gb200-nvl72").knobs.compute;
  CHECK(gb200.gemm.shape_efficiency == B200().gemm.shape_efficiency);
  CHECK(gb200.memory_bound.hbm_efficiency == B200().memory_bound.hbm_efficiency);
  CHECK(dockyard::ClusterPreset("gb300-nvl72").knobs.compute.gemm.mxfp8_efficiency_ratio == gb200.gemm.mxfp8_efficiency_ratio);
  // TransformerEngine's MXFP8 grouped GEMM on GB200 at K 7168, N 2048: 2,672 TFLOP/s (NVIDIA/Megatron-LM
  // docs/discussions/deepseek-v3-gb200-optimization), 0.534 of the 5,000 TFLOP/s FP8 peak; the
  // table's BF16 efficiency of that GEMM (16,384 rows per group) is 0.449: 1.19.
  const double bf16 = Eff(16384, 2048, 7168);
  CHECK(bf16 == doctest::Approx(0.449).epsilon(0.005));
  CHECK(gb200.gemm.mxfp8_efficiency_ratio == doctest::Approx(2672.0 / 5000.0 / bf16).epsilon(0.01));
  // B200 keeps torchao's B200 figure (knobs.h, 0.92).
  CHECK(B200().gemm.mxfp8_efficiency_ratio == 0.92);
  // Azure ND GB200 v6, cuBLASLt FP8 GEMMs, TFLOP/s at 4096, 8192 and 16384 cubed: 2578.9, 2624.5,
  // 2695.0 = 0.52-0.54 of the FP8 peak; the table's BF16 efficiencies of those shapes, 0.46-0.52.
  CHECK(Eff(4096, 4096, 4096) == doctest::Approx(0.455).epsilon(0.01));
  CHECK(Eff(16384, 16384, 16384) == doctest::Approx(0.517).epsilon(0.01));
  // Per-tensor FP8 on GB200 from the same sweep: the geometric mean of FP8 efficiency (of the 5,000
  // peak) over the table's BF16 efficiency at the three shapes, 1.08 (knobs.h's 0.87 is Hopper's).
  const double ratio = std::cbrt(2578.9 / 5000 / Eff(4096, 4096, 4096) * (2624.5 / 5000 / Eff(8192, 8192, 8192)) *
                                 (2695.0 / 5000 / Eff(16384, 16384, 16384)));
  CHECK(ratio == doctest::Approx(1.078).epsilon(0.005));
  CHECK(gb200.gemm.fp8_efficiency_ratio == doctest::Approx(ratio).epsilon(0.005));
  CHECK(2578.9 / 5000 == doctest::Approx(0.516).epsilon(0.001));
  CHECK(2695.0 / 5000 == doctest::Approx(0.539).epsilon(0.001));
}

namespace {

// cuDNN's fused attention, BF16, causal, in TFLOP/s with causal FLOPs, against the preset's
// FlashAttentionEfficiency x its 2,500 TFLOP/s peak.
struct FlashPoint {
  double head_dim, seq, fwd, bwd;
};

void CheckFlash(const char* preset, const std::vector<FlashPoint>& points, double tolerance) {
  const auto c = dockyard::ClusterPreset(preset);
  CHECK(c.dense_bf16_tflops == 2500.0);
  for (const FlashPoint& p : points) {
    CAPTURE(preset);
    CAPTURE(p.head_dim);
    CAPTURE(p.seq);
    CHECK(dockyard::FlashAttentionEfficiency(p.head_dim, p.seq, true, false, c.knobs.compute) * 2500.0 ==
          doctest::Approx(p.fwd).epsilon(tolerance));
    CHECK(dockyard::FlashAttentionEfficiency(p.head_dim, p.seq, true, true, c.knobs.compute) * 2500.0 ==
          doctest::Approx(p.bwd).epsilon(tolerance));
  }
}

}  // namespace

TEST_CASE("GB200 table: flash attention from cuDNN 9.19's GB200 sweep (GQA and MLA)") {
  // NVIDIA/cudnn-frontend benchmark/sdpa_benchmark_training/results/gb200_919_only_cudnn/
  // llama3.1_20260226_174648.csv (64 q / 8 kv heads, head dim 128) and dsv3_20260226_174854.csv
  // (128 heads, qk 192, v 128), batch 1, forward / backward TFLOP/s. The fit (cluster.cc
  // Gb200ComputeKnobs): forwards within 4 %, backwards within 13 % (MLA's 32K backward falls).
  CheckFlash("gb200-nvl72",
             {{128, 2048, 1042, 836}, {128, 4096, 1335, 1132}, {128, 8192, 1598, 1311}, {128, 16384, 1687, 1402}, {192, 2048, 1065, 880},
              {192, 4096, 1350, 1108}, {192, 8192, 1527, 1248}, {192, 16384, 1740, 1317}},
             0.07);
  CheckFlash("gb200-nvl72", {{128, 32768, 1720, 1473}, {192, 32768, 1815, 1289}}, 0.13);
  // The older gemm model's one figure: seq 4,096's forward (0.537) and backward (0.448), weighted by
  // their FLOPs (1 : 2.5): 3.5 / (1 / 0.537 + 2.5 / 0.448) = 0.470.
  CHECK(dockyard::ClusterPreset("gb200-nvl72").knobs.compute.flash.fixed_efficiency ==
        doctest::Approx(3.5 / (1 / 0.537 + 2.5 / 0.448)).epsilon(0.005));
  // The B200 table (SimuMax's machine, an older cuDNN) is left as measured: 0.416 x 2,250 = 936.
  CHECK(dockyard::FlashAttentionEfficiency(192, 4096, true, false, B200()) * 2250.0 < 1350.0 * 0.75);
}

TEST_CASE("GB300 table: flash attention from cuDNN 9.26's GB300 sweep (MLA)") {
  // NVIDIA/cudnn-frontend benchmark/sdpa_benchmark_training/results/dsv3/gb300/dsv3_20260724_041345.csv,
  // batch 2, non-deterministic backward: seq 2,048-16,384.
  CheckFlash("gb300-nvl72", {{192, 2048, 1359, 923}, {192, 4096, 1693, 1157}, {192, 8192, 1937, 1274}, {192, 16384, 2059, 1316}}, 0.05);
  // 3.5 / (1 / 0.677 + 2.5 / 0.463) = 0.509.
  CHECK(dockyard::ClusterPreset("gb300-nvl72").knobs.compute.flash.fixed_efficiency ==
        doctest::Approx(3.5 / (1 / 0.677 + 2.5 / 0.463)).epsilon(0.005));
  // GEMMs and MXFP8 stay GB200's.
  CHECK(dockyard::ClusterPreset("gb300-nvl72").knobs.compute.gemm.shape_efficiency ==
        dockyard::ClusterPreset("gb200-nvl72").knobs.compute.gemm.shape_efficiency);
}
