// GEMM and flash-attention efficiency by shape: monotone in each dim, equal to the component
// measurements of testdata/fidelity/runs.json at their shapes.
#include "planner/cost/gemm_efficiency.h"

#include <doctest/doctest.h>

#include "planner/cost/cluster.h"
#include "planner/calibration/fidelity.h"
#include "planner/cost/kernels_model.h"
#include "planner/cost/moe_phases.h"
#include "planner/model/model_file.h"
#include "tests/test_models.h"
#include "tests/tiny_plan.h"

using dockyard::Direction;
using dockyard::Phase;
using dockyard::ComputeKnobs;
using dockyard::GemmShapeEfficiency;
using doctest::Approx;

namespace {

const dockyard::FidelityComponent& Component(const dockyard::FidelitySet& set, const std::string& id) {
  for (const auto& c : set.components)
    if (c.id == id) return c;
  FAIL("no component " << id);
  return set.components.front();
}

}  // namespace

TEST_CASE("GEMM efficiency by shape is monotone in M, N and K and bounded by the ceiling") {
  const ComputeKnobs o;
  const double dims[] = {1, 8, 64, 128, 512, 768, 2048, 7168, 131072};
  for (double a : dims) {
    for (double b : dims) {
      for (size_t i = 1; i < sizeof(dims) / sizeof(dims[0]); ++i) {
        const double lo = dims[i - 1], hi = dims[i];
        CHECK(GemmShapeEfficiency(hi, a, b, o) > GemmShapeEfficiency(lo, a, b, o));
        CHECK(GemmShapeEfficiency(a, hi, b, o) > GemmShapeEfficiency(a, lo, b, o));
        CHECK(GemmShapeEfficiency(a, b, hi, o) > GemmShapeEfficiency(a, b, lo, o));
      }
      CHECK(GemmShapeEfficiency(a, b, 1e9, o) < o.gemm.shape_efficiency);
    }
  }
  CHECK(GemmShapeEfficiency(0, 128, 128, o) == 0);
  // Hand value: M = 128 (half of gemm_half_rows' fill), N = K = 34 (half fill each): 0.72 / 8.
  CHECK(GemmShapeEfficiency(128, 34, 34, o) == Approx(0.09));
}

TEST_CASE("GEMM efficiency equals the grouped-GEMM component measurements at their shapes") {
  const dockyard::FidelitySet set = dockyard::LoadFidelitySet("testdata/fidelity/runs.json");
  const ComputeKnobs o;
  const double h100 = dockyard::ClusterPreset("h100-sxm").dense_bf16_tflops;  // 989
  const double h200 = dockyard::ClusterPreset("h200-sxm").dense_bf16_tflops;
  for (const char* id : {"C18", "C19", "C20"}) {
    const auto& c = Component(set, id);
    const double m = c.params.at("m").get<double>(), n = c.params.at("n").get<double>(), k = c.params.at("k").get<double>();
    const double peak = c.hardware == "H200" ? h200 : h100;
    INFO(id);
    // Within 1 % of the measured TFLOP/s (C18 650.6: 650.4; C19 636.9: 631.4; C20 705: 704.7).
    CHECK(GemmShapeEfficiency(m, n, k, o) * peak == Approx(c.values[0]).epsilon(0.01));
  }
  // The rule of thumb (C21): >= 2K rows per expert reach ~61-68 % of dense peak (at a DeepSeek-V3
  // expert, N = 2 x 2048, K = 7168: 0.661); ~128 rows ~29 % (this curve: 0.35, its least exact point).
  CHECK(GemmShapeEfficiency(2048, 4096, 7168, o) >= 0.61);
  CHECK(GemmShapeEfficiency(2048, 4096, 7168, o) <= 0.68);
  CHECK(GemmShapeEfficiency(128, 4096, 7168, o) == Approx(0.352).epsilon(0.01));
}

TEST_CASE("Linear layers: forward GEMM, backward dgrad + wgrad; grouped GEMM pads rows to whole tiles") {
  const ComputeKnobs o;
  const double peak = 989;  // TFLOP/s = 989e6 FLOP/us
  const double eff = GemmShapeEfficiency(1024, 2048, 512, o);
  CHECK(dockyard::LinearUs(1024, 2048, 512, false, peak, o) == Approx(2.0 * 1024 * 2048 * 512 / (989e6 * eff)));
  // Backward: dgrad (M, K, N) and wgrad (N, K, M), the same FLOPs each.
  const double bwd = 2.0 * 1024 * 2048 * 512 / (989e6 * GemmShapeEfficiency(1024, 512, 2048, o)) +
                     2.0 * 1024 * 2048 * 512 / (989e6 * GemmShapeEfficiency(2048, 512, 1024, o));
  CHECK(dockyard::LinearUs(1024, 2048, 512, true, peak, o) == Approx(bwd));
  // One expert, 129 rows: padded to 256 (two 128-row tiles); gate_up (256, 2 x 32, 64) + down (256, 64, 32).
  const double e = 2.0 * 256 * 64 * 64 / (989e6 * GemmShapeEfficiency(256, 64, 64, o)) +
                   2.0 * 256 * 64 * 32 / (989e6 * GemmShapeEfficiency(256, 64, 32, o));
  CHECK(dockyard::ExpertMlpForwardUs(129, 64, 32, peak, o, {}) == Approx(e));
  CHECK(dockyard::ExpertMlpForwardUs(256, 64, 32, peak, o, {}) == Approx(e));
  CHECK(dockyard::ExpertMlpForwardUs(128, 64, 32, peak, o, {}) < e);
  CHECK(dockyard::ExpertMlpForwardUs(0, 64, 32, peak, o, {}) == 0);
}

TEST_CASE("Flash attention by head dim, length, causal masking, forward and backward") {
  const ComputeKnobs o;
  // FlashAttention-3 BF16 forward on H100 (989 TFLOP/s peak), non-causal: head dim 128 at 512
  // tokens 430 TFLOP/s and at 16K 621 (pytorch/benchmark PR #2391); head dim 256 at 16K 642
  // (arXiv 2407.08608). Within 2 %.
  CHECK(dockyard::FlashAttentionEfficiency(128, 512, false, false, o) * 989 == Approx(430).epsilon(0.02));
  CHECK(dockyard::FlashAttentionEfficiency(128, 16384, false, false, o) * 989 == Approx(621).epsilon(0.02));
  CHECK(dockyard::FlashAttentionEfficiency(256, 16384, false, false, o) * 989 == Approx(642).epsilon(0.02));
  // Monotone in head dim and length; causal at S attends like non-causal at S / 2.
  CHECK(dockyard::FlashAttentionEfficiency(64, 4096, true, false, o) < dockyard::FlashAttentionEfficiency(128, 4096, true, false, o));
  CHECK(dockyard::FlashAttentionEfficiency(128, 2048, true, false, o) < dockyard::FlashAttentionEfficiency(128, 4096, true, false, o));
  CHECK(dockyard::FlashAttentionEfficiency(128, 4096, true, false, o) == dockyard::FlashAttentionEfficiency(128, 2048, false, false, o));
  CHECK(dockyard::FlashAttentionEfficiency(128, 4096, true, true, o) ==
        Approx(0.70 * dockyard::FlashAttentionEfficiency(128, 4096, true, false, o)));
}

TEST_CASE("ShapedCompute on the tiny model: projections by shape and the causal flash core") {
  const ComputeKnobs o;
  const auto m = dockyard::testing::TinyMixtral();  // D 64, 4 heads of 16, 2 KV heads, vocab 1000, 8 experts
  const auto s = dockyard::ShapedCompute(m, 1024, 1024, 1, 1024, 1, 989, o, {});
  // qkv (1024, (4 + 4) x 16, 64) and o (1024, 64, 64); core 2 x 1024 x 512 x 4 x 32 FLOP at the
  // causal flash efficiency of head dim 16 and 1024 tokens.
  const double proj = dockyard::LinearUs(1024, 128, 64, false, 989, o) + dockyard::LinearUs(1024, 64, 64, false, 989, o);
  const double core = 2.0 * 1024 * 512 * 4 * 32 / (989e6 * dockyard::FlashAttentionEfficiency(16, 1024, true, false, o));
  CHECK(s.attention[0] == Approx(proj + core));
  const double proj_b = dockyard::LinearUs(1024, 128, 64, true, 989, o) + dockyard::LinearUs(1024, 64, 64, true, 989, o);
  CHECK(s.attention[1] == Approx(proj_b + 2.5 * core / 0.70));
  CHECK(s.router[0] == Approx(dockyard::LinearUs(1024, 8, 64, false, 989, o)));
  CHECK(s.lm_head[0] == Approx(dockyard::LinearUs(1024, 1000, 64, false, 989, o)));
  CHECK(s.shared_experts[0] == 0);
  // Tensor parallelism 2 shrinks N of qkv and K of o: lower efficiency, more than half the time.
  const auto s2 = dockyard::ShapedCompute(m, 1024, 1024, 2, 1024, 1, 989, o, {});
  CHECK(s2.attention[0] > 0.5 * s.attention[0]);
}

TEST_CASE("SimulateStep with --compute-model kernels uses the shaped compute") {
  const auto plan = dockyard::testing::TinyEp4Plan();
  const auto routing = dockyard::testing::TinyEp4Routing();
  dockyard::ClusterSpec c = dockyard::ClusterPreset("h100-sxm");
  const ComputeKnobs& o = c.knobs.compute;
  const auto cost = dockyard::SimulateStep(plan, c, routing, dockyard::ComputeModel::kKernels);
  const auto sc = dockyard::ShapedCompute(plan.model, 1024, 1024, 1, 1024, 1, c.dense_bf16_tflops, o, {});
  const dockyard::KernelShape ks{1024, 1024, 1024, 1, 2};
  const auto kx = dockyard::KernelExtras(plan.model, ks, o.memory_bound, plan.training.run, c.hbm_gbps, false);
  for (const auto& p : cost.phases) {
    const int pass = p.direction == Direction::kForward ? 0 : 1;
    if (p.phase == Phase::kAttention) CHECK(p.time_us == Approx(sc.attention[pass] + kx.attention[pass]));
    // The router's forward also carries the dispatcher's host synchronization (kernels_model.h
    // MoeSyncIdleUs; torchtitan with EP 4: 616 us).
    if (p.phase == Phase::kRouter) CHECK(p.time_us == Approx(sc.router[pass] + kx.router[pass] + (pass == 0 ? 616.0 : 0.0)));
  }
}

TEST_CASE("Routed experts under --compute-model kernels: each expert by its rows (tiles), plus the rank's SwiGLU") {
  const auto plan = dockyard::testing::TinyEp4Plan();
  const auto routing = dockyard::testing::TinyEp4Routing(1);
  dockyard::ClusterSpec c = dockyard::ClusterPreset("h100-sxm");
  const ComputeKnobs& o = c.knobs.compute;
  const auto shape = dockyard::MoePhaseShapeOf(plan.model, dockyard::ComputeWorkload(plan), plan.training, 4);
  const auto mp = dockyard::SimulateMoePhases(routing, {0, 1, 2, 3}, shape, c, dockyard::ComputeModel::kKernels);
  const auto& L = routing.layers[0];
  for (int r = 0; r < 4; ++r) {
    // 2 local experts of F 32 on hidden 64, then SwiGLU over the rank's received rows (under the 5 us floor).
    double expect = 0;
    for (int e = 0; e < 2; ++e) {
      expect += dockyard::ExpertMlpForwardUs(static_cast<double>(L.rows_per_local_expert[r * 2 + e]), 64, 32, 989, o, {});
    }
    expect += dockyard::MemoryBoundUs({dockyard::SwigluKernel(static_cast<double>(L.received[r]), 32, 2, false)}, c.hbm_gbps,
                                      o.memory_bound.hbm_efficiency, o.memory_bound.floor_us);
    CHECK(mp.gemm[r] == Approx(expect));
  }
}

TEST_CASE("Sliding-window attention: keys per query, the window's FLOPs and efficiency, against cuDNN's gpt-oss sweeps") {
  // A query attends itself and the window - 1 keys before it: min(i + 1, w) keys for query i.
  // seq 4,096, window 128: 128 - 128 x 127 / (2 x 4,096) = 126.016; window 1,024: 1,024 - 1,024 x
  // 1,023 / 8,192 = 896.125; no window, or one as long as the sequence: 2,048.
  CHECK(dockyard::CausalAttendedKeys(4096, 128) == Approx(126.015625));
  CHECK(dockyard::CausalAttendedKeys(4096, 1024) == Approx(896.125));
  CHECK(dockyard::CausalAttendedKeys(4096, 0) == 2048);
  CHECK(dockyard::CausalAttendedKeys(4096, 4096) == 2048);
  // Summed over the 8 queries of seq 8, window 3: 1 + 2 + 3 x 6 = 21 keys = 8 x (3 - 3 x 2 / 16).
  CHECK(dockyard::CausalAttendedKeys(8, 3) * 8 == Approx(21));
  // cuDNN on GB200 at head dim 64, seq 4,096 (C33 cuDNN 9.19, window 1,024: 574 TFLOP/s forward;
  // C35 cuDNN 9.22, window 128: 161): 161 / 574 = 0.280 of the speed at the narrower window. The key
  // factor alone, gb200-nvl72's half_seq 790: (126.016 / 916.016) / (896.125 / 1,686.125) = 0.1376 /
  // 0.5315 = 0.259, within 8 %.
  const dockyard::FidelitySet set = dockyard::LoadFidelitySet("testdata/fidelity/runs.json");
  const ComputeKnobs gb200 = dockyard::ClusterPreset("gb200-nvl72").knobs.compute;
  const double narrow = dockyard::FlashAttentionEfficiency(64, 4096, true, false, gb200, 128);
  const double wide = dockyard::FlashAttentionEfficiency(64, 4096, true, false, gb200, 1024);
  CHECK(narrow / wide == Approx((126.015625 / 916.015625) / (896.125 / 1686.125)));
  CHECK(narrow / wide == Approx(Component(set, "C35").values[1] / Component(set, "C33").values[1]).epsilon(0.08));
  CHECK(Component(set, "C33").params.at("sliding_window").get<int>() == 1024);
  CHECK(Component(set, "C35").params.at("sliding_window").get<int>() == 128);
}

TEST_CASE("gpt-oss's attention core: half its layers over a 128-key window, priced per layer kind and averaged") {
  const dockyard::ModelSpec m = dockyard::LoadModel("testdata/hf/gpt-oss-120b.json");  // 18 of 36 layers sliding, window 128
  const ComputeKnobs o = dockyard::ClusterPreset("gb200-nvl72").knobs.compute;
  // One micro-batch of 4 x 4,096 tokens, 64 heads of 64 (d_qk + d_v = 128): full layers 2 x 16,384 x
  // 2,048 x 64 x 128 = 549.76 GFLOP, sliding layers 2 x 16,384 x 126.016 x 64 x 128 = 33.83 GFLOP;
  // the mean of the two per layer.
  const double full = 2.0 * 16384 * 2048 * 64 * 128, sliding = 2.0 * 16384 * 126.015625 * 64 * 128;
  CHECK(dockyard::AttentionCoreFlops(m, 16384, 4096, 64) == Approx(0.5 * full + 0.5 * sliding));
  // The kernel-level core: each kind at its own keys' efficiency (gb200-nvl72, 2,500 TFLOP/s).
  const double us = 0.5 * full / (2500e6 * dockyard::FlashAttentionEfficiency(64, 4096, true, false, o)) +
                    0.5 * sliding / (2500e6 * dockyard::FlashAttentionEfficiency(64, 4096, true, false, o, 128));
  CHECK(dockyard::FlashCoreUs(m, 16384, 4096, 64, 1, false, 2500, o, {}) == Approx(us));
  // The backward: 2.5x the FLOPs at bwd_ratio (0.808) of the forward's efficiency, at head dim 64
  // with the backward's small-head fraction (0.898) in place of the forward's (0.655).
  CHECK(dockyard::FlashCoreUs(m, 16384, 4096, 64, 1, true, 2500, o, {}) ==
        Approx(2.5 * us / o.flash.bwd_ratio * (0.655 / 0.898)));
  // A context-parallel ring of 8 steps: the full layers at a step's 256 keys, the window's 126 keys
  // shorter still and kept.
  const double ring = 0.5 * full / (2500e6 * dockyard::FlashAttentionEfficiency(64, 512, true, false, o)) +
                      0.5 * sliding / (2500e6 * dockyard::FlashAttentionEfficiency(64, 4096, true, false, o, 128));
  CHECK(dockyard::FlashCoreUs(m, 16384, 4096, 64, 8, false, 2500, o, {}) == Approx(ring));
  // Without a window the core is the full causal one (the tiny model): one kind.
  const auto tiny = dockyard::testing::TinyMixtral();
  CHECK(dockyard::AttentionCoreFlops(tiny, 1024, 1024, 4) == Approx(2.0 * 1024 * 512 * 4 * 32));
}

TEST_CASE("FP8 attention below head dim 128: the forward keeps the window, the backward runs the full causal core (cuDNN's gpt-oss sweeps)") {
  const dockyard::FidelitySet set = dockyard::LoadFidelitySet("testdata/fidelity/runs.json");
  // One attention layer at the components' shape: gpt-oss's 64 heads of 64, every layer over a
  // window of 1,024 keys, batch 2 (2 x seq tokens).
  dockyard::ModelSpec layer;
  layer.num_hidden_layers = 1;
  layer.attention.head_dim = 64;
  layer.attention.num_attention_heads = 64;
  layer.attention.sliding_window = 1024;
  layer.sliding_attention_layers = {true};
  dockyard::GemmPrecision fp8;
  fp8.fp8_attention = true;
  const ComputeKnobs gb200 = dockyard::ClusterPreset("gb200-nvl72").knobs.compute;
  const ComputeKnobs gb300 = dockyard::ClusterPreset("gb300-nvl72").knobs.compute;
  fp8.fp8_small_head_bwd_full_causal = true;  // GB200's and GB300's kernels (ClusterSpec)
  CHECK(dockyard::ClusterPreset("gb200-nvl72").fp8_small_head_bwd_full_causal);
  CHECK(dockyard::ClusterPreset("gb300-nvl72").fp8_small_head_bwd_full_causal);
  const auto ms = [&](const ComputeKnobs& k, double seq, bool backward, double heads = 64) {
    return dockyard::FlashCoreUs(layer, 2 * seq, seq, heads, 1, backward, 2500, k, fp8) / 1000.0;
  };
  // The measured backward (C40, GB200, cuDNN 9.19) grows as the square of the sequence: x3.2, x3.5,
  // x3.8, x3.9 per doubling (BF16's: x2.1, x2.0, x2.0, x2.0), so a window saves it nothing.
  const auto& c40 = Component(set, "C40").values;
  for (size_t i = 1; i < c40.size(); ++i) CHECK(c40[i] / c40[i - 1] > 3.0);
  // At seq 4,096 the full causal backward is 2.5 x 4 x 2 x 64 x 4,096 x 2,048 x 64 = 6.872e11 FLOP
  // (2,048 keys per query, not the window's 896.125) at 2,500 x 0.794 x 64 / 74 x 2,048 / 2,838 x
  // 0.808 x 0.898 x 0.872 = 784.0 TFLOP/s: 0.877 ms against C40's 0.862 (+1.7 %).
  const double bwd_4096 = 6.871947673600e11 / (2500e12 * 0.794 * 64 / 74 * 2048 / 2838 * 0.808 * 0.898 * 0.872) * 1e3;
  CHECK(bwd_4096 == Approx(0.877).epsilon(0.002));
  CHECK(ms(gb200, 4096, true) == Approx(bwd_4096).epsilon(1e-9));
  CHECK(ms(gb200, 4096, true) == Approx(c40[1]).epsilon(0.02));
  // Every point within 4 % (the fraction 0.872 is their geometric mean; 2.5 % RMS in log).
  const std::vector<double> seqs = {2048, 4096, 8192, 16384, 32768};
  for (size_t i = 0; i < seqs.size(); ++i) {
    CAPTURE(seqs[i]);
    CHECK(ms(gb200, seqs[i], true) == Approx(c40[i]).epsilon(0.04));
    // The forward honours the window: BF16's time over 1.028 (C39).
    CHECK(ms(gb200, seqs[i], false) == Approx(Component(set, "C39").values[i]).epsilon(0.07));
    // GB300 (C42 backward within 4 %, C43 forward within 6 %).
    CHECK(ms(gb300, seqs[i], true) == Approx(Component(set, "C42").values[i]).epsilon(0.04));
    CHECK(ms(gb300, seqs[i], false) == Approx(Component(set, "C43").values[i]).epsilon(0.06));
  }
  // cuDNN 9.22 at gpt-oss's own window, 128 keys, 128 heads (C41): the same rule within 11 %
  // (the 9.22 kernels sit 0.82-0.91 of the curve, 9.19's 0.84-0.90).
  layer.attention.sliding_window = 128;
  for (size_t i = 0; i < seqs.size(); ++i) {
    CAPTURE(seqs[i]);
    CHECK(ms(gb200, seqs[i], true, 128) == Approx(Component(set, "C41").values[i]).epsilon(0.11));
  }
  // Hopper (no FP8 attention below head dim 128 in cuDNN there): priced as BF16, the window kept.
  const dockyard::ClusterSpec h100 = dockyard::ClusterPreset("h100-sxm");
  CHECK_FALSE(h100.fp8_small_head_bwd_full_causal);
  dockyard::TrainingConfig t;
  t.precision = "fp8";
  t.fp8_dot_product_attention = true;
  CHECK(dockyard::FlashCoreUs(layer, 8192, 4096, 64, 1, true, 2500, h100.knobs.compute, dockyard::GemmPrecisionOf(t, h100)) ==
        Approx(dockyard::FlashCoreUs(layer, 8192, 4096, 64, 1, true, 2500, h100.knobs.compute, {})));
}

TEST_CASE("Flash attention below head dim 128: GB200's and GB300's small-head fractions against cuDNN's gpt-oss sweeps") {
  const dockyard::FidelitySet set = dockyard::LoadFidelitySet("testdata/fidelity/runs.json");
  const ComputeKnobs gb200 = dockyard::ClusterPreset("gb200-nvl72").knobs.compute;
  const ComputeKnobs gb300 = dockyard::ClusterPreset("gb300-nvl72").knobs.compute;
  CHECK(gb200.flash.small_head_efficiency == 0.655);
  CHECK(gb200.flash.small_head_bwd_efficiency == 0.898);
  CHECK(gb300.flash.small_head_efficiency == 0.582);
  CHECK(gb300.flash.small_head_bwd_efficiency == 0.827);
  // B200 and B300 borrow GB200's; the Hopper presets have none (1).
  CHECK(dockyard::ClusterPreset("b200").knobs.compute.flash.small_head_efficiency == 0.655);
  CHECK(dockyard::ClusterPreset("b300").knobs.compute.flash.small_head_bwd_efficiency == 0.898);
  CHECK(dockyard::ClusterPreset("h100-sxm").knobs.compute.flash.small_head_efficiency == 1.0);
  // GB200 at seq 4,096, window 1,024 (896.125 keys per query): the curve at head dim 64, 2,500 x 0.794
  // x 64 / 74 x 896.125 / 1,686.125 = 912.4 TFLOP/s forward; x 0.655 = 597.7 against C33's 574
  // (+4.1 %); backward x 0.808 x 0.898 = 662.0 against C34's 617 (+7.3 %).
  const double fwd = 2500 * dockyard::FlashAttentionEfficiency(64, 4096, true, false, gb200, 1024);
  const double bwd = 2500 * dockyard::FlashAttentionEfficiency(64, 4096, true, true, gb200, 1024);
  CHECK(fwd == Approx(2500 * 0.794 * 64.0 / 74.0 * 896.125 / 1686.125 * 0.655));
  CHECK(bwd == Approx(2500 * 0.794 * 64.0 / 74.0 * 896.125 / 1686.125 * 0.808 * 0.898));
  CHECK(fwd == Approx(Component(set, "C33").values[1]).epsilon(0.05));
  CHECK(bwd == Approx(Component(set, "C34").values[1]).epsilon(0.08));
  // Window 128 (126.016 keys; cuDNN 9.22, C35 / C36): 161 and 182 TFLOP/s measured.
  CHECK(2500 * dockyard::FlashAttentionEfficiency(64, 4096, true, false, gb200, 128) ==
        Approx(Component(set, "C35").values[1]).epsilon(0.06));
  CHECK(2500 * dockyard::FlashAttentionEfficiency(64, 4096, true, true, gb200, 128) ==
        Approx(Component(set, "C36").values[1]).epsilon(0.07));
  // GB300 (C37 / C38, window 1,024, seq 4,096): 675 and 638 measured; the curve 2,500 x 0.941 x
  // 64 / 74 x 896.125 / 1,556.125 = 1,171.7 TFLOP/s, x 0.582 = 681.9 and x 0.665 x 0.827 = 644.4.
  CHECK(2500 * dockyard::FlashAttentionEfficiency(64, 4096, true, false, gb300, 1024) ==
        Approx(Component(set, "C37").values[1]).epsilon(0.02));
  CHECK(2500 * dockyard::FlashAttentionEfficiency(64, 4096, true, true, gb300, 1024) ==
        Approx(Component(set, "C38").values[1]).epsilon(0.02));
  // At head dim 128 the fractions do not apply (GQA's measured shapes set the curve).
  ComputeKnobs none = gb200;
  none.flash.small_head_efficiency = none.flash.small_head_bwd_efficiency = 1.0;
  CHECK(dockyard::FlashAttentionEfficiency(128, 4096, true, false, gb200) == dockyard::FlashAttentionEfficiency(128, 4096, true, false, none));
  CHECK(dockyard::FlashSmallHead(64));
  CHECK_FALSE(dockyard::FlashSmallHead(128));
}
