// MXFP8 (--fp8-recipe mxfp8 / --precision mxfp8; TransformerEngine MXFP8BlockScaling): the GEMM
// speed from torchao's B200 kernel breakdown, the E8M0 scales per 32 elements in memory and in the
// quantize kernels, and the refusals (Hopper, FSDP gather, another recipe beside --precision mxfp8).
// The BF16 parameter all-gather of Megatron's MXFP8 parameters is in fp8_param_gather_test.
#include <doctest/doctest.h>

#include <string>

#include "planner/accounting/comm.h"
#include "planner/accounting/memory.h"
#include "planner/accounting/workload.h"
#include "planner/base/error.h"
#include "planner/cost/cluster.h"
#include "planner/cost/cost.h"
#include "planner/cost/gemm_efficiency.h"
#include "planner/model/precision.h"
#include "planner/model/training_json.h"
#include "tests/test_models.h"
#include "tests/tiny_plan.h"

using doctest::Approx;

namespace {

dockyard::TrainingConfig Mxfp8() {
  dockyard::TrainingConfig t;
  t.precision = "fp8";
  t.fp8_recipe = "mxfp8";
  return t;
}

dockyard::Plan TinyPlan(const dockyard::TrainingConfig& t) {
  return dockyard::testing::TinyEp4Plan(t, dockyard::Convention::kMegatron);
}

}  // namespace

TEST_CASE("MXFP8 GEMMs reproduce torchao's B200 MXFP8 grouped GEMMs at DeepSeek-V3's expert shape") {
  // pytorch/ao@0b1bb117 torchao/prototype/moe_training/README.md, "MXFP8 Kernel Breakdown by Pass"
  // (B200; 131,072 rows over 8 groups, dim 7168, hidden 2048): torch._scaled_grouped_mm 1,838.1 us
  // forward, 1,838.1 us data gradient, 2,412.4 us weight gradient: 6,088.6 us.
  const dockyard::ClusterSpec b200 = dockyard::ClusterPreset("b200");
  const dockyard::ComputeKnobs& k = b200.knobs.compute;
  CHECK(k.gemm.mxfp8_efficiency_ratio == 0.92);
  const dockyard::GemmPrecision mx{true, dockyard::Fp8Scaling::kMxfp8};
  const dockyard::GemmPrecision bf16{};
  // Per group: 16,384 rows, N 2048, K 7168; the three passes of one group, times 8.
  const double bf16_us = 8 * (dockyard::LinearUs(16384, 2048, 7168, false, 2250, k, bf16) +
                              dockyard::LinearUs(16384, 2048, 7168, true, 2250, k, bf16));
  const double mx_us = 8 * (dockyard::LinearUs(16384, 2048, 7168, false, 2250, k, mx) + dockyard::LinearUs(16384, 2048, 7168, true, 2250, k, mx));
  // BF16 by the b200 table: eff 0.4487 (forward, dgrad), 0.4797 (wgrad): 3,812.1 + 3,812.1 + 3,565.4 us.
  CHECK(bf16_us == Approx(11189.6).epsilon(0.001));
  // MXFP8: 11,189.6 / (2 x 0.92) = 6,081.3 us against torchao's 6,088.6 (0.1 % apart).
  CHECK(mx_us == Approx(11189.6 / 1.84).epsilon(0.001));
  CHECK(mx_us == Approx(6088.6).epsilon(0.01));
  // Tensorwise FP8 keeps its own ratio (0.87).
  CHECK(dockyard::Fp8GemmSpeedup(k, {true, dockyard::Fp8Scaling::kTensorwise}) == Approx(1.74));
  CHECK(dockyard::Fp8GemmSpeedup(k, mx) == Approx(1.84));
}

TEST_CASE("MXFP8 bytes: E8M0 scales per 32 elements in weight copies, saved inputs and quantize kernels") {
  const dockyard::TrainingConfig t = Mxfp8();
  CHECK(dockyard::Fp8ScalingOf(t) == dockyard::Fp8Scaling::kMxfp8);
  // One copy: 1 B + 1 B / 32 = 1.03125; row-wise and column-wise: 2.0625.
  CHECK(dockyard::Fp8WeightBytesPerElement(t) == 1.03125);
  CHECK(dockyard::Fp8WeightCopyBytesPerElement(t) == 2.0625);
  // The tiny plan's 49,152 FP8 GEMM weight elements (attention 24,576 + routed experts 24,576,
  // precision_test): 49,152 x 2.0625 = 101,376 B.
  CHECK(dockyard::StaticMemoryOnRank(TinyPlan(t), 0).params_by_role.at("fp8_weights") == 101376);
  // A saved input of 131,072 elements: 131,072 + 131,072 / 32 = 135,168 B.
  CHECK(dockyard::Fp8ActivationBytes<int64_t>(131072, dockyard::Fp8Scaling::kMxfp8) == 135168);
  // The tiny MoE layer's attention saves 671,744 B in BF16; its two FP8 linear inputs (2 x 65,536
  // elements) become 135,168 B instead of 262,144.
  const auto plan = TinyPlan(t);
  const auto acts = dockyard::LayerActivations(plan.model, dockyard::RecomputeSet{}, dockyard::ComputeWorkload(plan), true);
  CHECK(acts.attention == 671744 - 262144 + 135168);
  // The quantize kernel reads BF16 (2 B) and writes both copies: 2 + 2 x 1.03125 = 4.0625 B per element.
  CHECK(dockyard::Fp8QuantizeBytesPerElement(dockyard::Fp8Scaling::kMxfp8, 2) == 4.0625);
}

TEST_CASE("MXFP8 is refused where it does not run, and --precision mxfp8 is fp8 with the mxfp8 recipe") {
  // Hopper has no MXFP8 tensor cores.
  const auto routing = dockyard::testing::TinyEp4Routing();
  const auto plan = TinyPlan(Mxfp8());
  try {
    dockyard::SimulateStep(plan, dockyard::ClusterPreset("h100-sxm"), routing);
    FAIL("mxfp8 on h100-sxm was not refused");
  } catch (const dockyard::Error& e) {
    const std::string m = e.what();
    CHECK(m.find("fp8_recipe") != std::string::npos);
    CHECK(m.find("\"h100-sxm\"") != std::string::npos);
    CHECK(m.find("SM100") != std::string::npos);
  }
  for (const char* preset : {"b200", "gb200-nvl72", "b300", "gb300-nvl72"}) {
    CAPTURE(preset);
    CHECK(dockyard::ClusterPreset(preset).mxfp8_tensor_cores);
    CHECK_NOTHROW(dockyard::SimulateStep(plan, dockyard::ClusterPreset(preset), routing));
  }
  // The same MoE layer in tensorwise FP8 and MXFP8 on B200: MXFP8 is faster (1.84x GEMMs against
  // 1.74x; its quantize kernels move 4.06 B per element against 5). Both are slower than BF16 on the
  // tiny model (hidden 64), whose quantize kernels' floors outweigh its GEMMs.
  const auto b200 = dockyard::ClusterPreset("b200");
  dockyard::TrainingConfig tensorwise;
  tensorwise.precision = "fp8";
  const double mx = dockyard::SimulateStep(plan, b200, routing).moe_layer_us;
  const double tw = dockyard::SimulateStep(TinyPlan(tensorwise), b200, routing).moe_layer_us;
  const double bf = dockyard::SimulateStep(TinyPlan(dockyard::TrainingConfig{}), b200, routing).moe_layer_us;
  CHECK(mx < tw);
  CHECK(bf < mx);

  // --precision mxfp8 / "precision": "mxfp8".
  dockyard::TrainingConfig named;
  named.precision = "mxfp8";
  dockyard::NormalizeMxfp8Precision(&named, "--");
  CHECK(named.precision == "fp8");
  CHECK(named.fp8_recipe == "mxfp8");
  const dockyard::Json json = dockyard::Json::parse(R"({"precision": "mxfp8"})");
  const auto from_json = dockyard::TrainingFromJson(dockyard::JsonView(&json, "spec.json", "/training"));
  CHECK(from_json.precision == "fp8");
  CHECK(from_json.fp8_recipe == "mxfp8");
  dockyard::TrainingConfig clash;
  clash.precision = "mxfp8";
  clash.fp8_recipe = "blockwise";
  CHECK_THROWS_WITH_AS(dockyard::NormalizeMxfp8Precision(&clash, "--"), doctest::Contains("--fp8-recipe"), dockyard::Error);

  // The FSDP gather of MXFP8 weights is not modelled.
  auto fsdp = Mxfp8();
  fsdp.fp8_param_gather = true;
  fsdp.dp_sharding = dockyard::DpSharding::kFsdp;
  CHECK_THROWS_WITH_AS(dockyard::ValidateFp8ParamGather(fsdp, true), doctest::Contains("mxfp8"), dockyard::Error);
}

TEST_CASE("b300 and gb300-nvl72 presets: datasheet figures, B200's measured NVLink5 and HBM bus, 800 Gb/s per GPU") {
  const auto b300 = dockyard::ClusterPreset("b300");
  // HGX B300: BF16 36 PFLOPS with sparsity per 8 GPUs -> 2,250 dense per GPU; 288 GB -> 268.2 GiB.
  CHECK(b300.dense_bf16_tflops == 2250);
  CHECK(b300.memory_gib == Approx(288e9 / 1073741824.0).epsilon(0.0005));
  CHECK(b300.hbm_gbps == 7672);
  CHECK(b300.gpus_per_node == 8);
  // ConnectX-8 800 Gb/s = 100 GB/s raw, at B200's 48 of 50 effective: 96.
  CHECK(b300.knobs.links.network_gbps == 96);
  CHECK(b300.knobs.links.intra_node_gbps == 606.6);
  CHECK(b300.knobs.compute.gemm.shape_efficiency == dockyard::ClusterPreset("b200").knobs.compute.gemm.shape_efficiency);
  CHECK(b300.compute_source.find("borrowed") == 0);
  const auto gb300 = dockyard::ClusterPreset("gb300-nvl72");
  // GB300 NVL72: 360 PFLOPS FP16/BF16 with sparsity over 72 GPUs -> 2,500 dense; 576 TB/s / 72 = 8,000 GB/s.
  CHECK(gb300.dense_bf16_tflops == 2500);
  CHECK(gb300.hbm_gbps == 8000);
  CHECK(gb300.gpus_per_node == 4);
  CHECK(gb300.nvlink_domain_gpus == 72);
  CHECK(gb300.nics_per_node == 4);
  CHECK(gb300.knobs.links.network_gbps == 96);
  CHECK(gb300.compute_source.find("GB300's own flash attention") == 0);
  CHECK(gb300.compute_source.find("borrowed from gb200-nvl72's table") != std::string::npos);
  CHECK_FALSE(dockyard::ClusterPreset("h100-sxm").mxfp8_tensor_cores);
}

TEST_CASE("FP8 attention (--fp8-dot-product-attention): the flash core at the preset's fp8_speedup; refused without FP8") {
  // A Qwen3-30B-A3B attention layer (32 heads of 128, 4 KV heads, hidden 2048), one sequence of
  // 4,096 on gb200-nvl72: the causal forward core is 2 x 4096 x 2048 x 32 x (128 + 128) = 1.374e11
  // FLOP at 2,500 x 0.794 x 128 / 138 x 2,048 / 2,838 = 1,328.6 TFLOP/s (cluster.cc Gb200ComputeKnobs)
  // = 103.4 us; in FP8 it runs at 1.20x (cuDNN 9.19's FP8 / BF16 on GB200): 17.2 us less. The
  // projections do not change (they are FP8 GEMMs either way).
  dockyard::ModelSpec m = dockyard::testing::TinyMixtral();
  m.hidden_size = 2048;
  m.attention.num_attention_heads = 32;
  m.attention.num_key_value_heads = 4;
  m.attention.head_dim = 128;
  const auto c = dockyard::ClusterPreset("gb200-nvl72");
  dockyard::TrainingConfig t = Mxfp8();
  const auto bf16_core = dockyard::ShapedCompute(m, 4096, 4096, 1, 4096, 1, c.dense_bf16_tflops, c.knobs.compute,
                                                 dockyard::GemmPrecisionOf(t, c), c.hbm_gbps);
  t.fp8_dot_product_attention = true;
  const auto fp8_core = dockyard::ShapedCompute(m, 4096, 4096, 1, 4096, 1, c.dense_bf16_tflops, c.knobs.compute,
                                                dockyard::GemmPrecisionOf(t, c), c.hbm_gbps);
  const double core_us = 2.0 * 4096 * 2048 * 32 * 256 / (2500e6 * 0.794 * 128 / 138 * 2048 / 2838);
  CHECK(core_us == Approx(103.4).epsilon(0.001));
  CHECK(bf16_core.attention[0] - fp8_core.attention[0] == Approx(core_us * (1 - 1 / 1.20)).epsilon(1e-9));
  // The backward's core: 2.5x the FLOPs at bwd_ratio 0.808 of the forward's efficiency.
  CHECK(bf16_core.attention[1] - fp8_core.attention[1] == Approx(core_us * 2.5 / 0.808 * (1 - 1 / 1.20)).epsilon(1e-9));
  // At head dim 64 (gpt-oss) the passes differ on GB200 (cuDNN 9.19, gpt-oss's 64 heads, sliding
  // window 1,024, seq 2,048-32,768; cudnn-frontend gb200_919_only_cudnn/gpt_oss_20260226_175022.csv,
  // cluster.cc): the forward runs 1.028x BF16's speed; the backward runs the full causal core at 0.872
  // of the BF16 curve. The causal forward core at head dim 64 (no window here): 2 x 4096 x 2048 x 32
  // x 128 = 6.872e10 FLOP at 2,500 x 0.794 x 64 / 74 x 2,048 / 2,838 = 1,239.1 TFLOP/s on the curve,
  // x the small-head fraction 0.655 (forward) = 811.6 TFLOP/s: 84.7 us in BF16; its backward 2.5x
  // the FLOPs at bwd_ratio 0.808 and the fraction 0.898 in place of 0.655.
  m.attention.head_dim = 64;
  dockyard::TrainingConfig no_dpa = Mxfp8();
  CHECK(c.knobs.compute.flash.fp8_small_head_fwd_speedup == 1.028);
  CHECK(c.knobs.compute.flash.fp8_small_head_bwd_efficiency == 0.872);
  CHECK(c.fp8_small_head_bwd_full_causal);
  const auto bf16_64 = dockyard::ShapedCompute(m, 4096, 4096, 1, 4096, 1, c.dense_bf16_tflops, c.knobs.compute,
                                               dockyard::GemmPrecisionOf(no_dpa), c.hbm_gbps);
  const auto fp8_64 = dockyard::ShapedCompute(m, 4096, 4096, 1, 4096, 1, c.dense_bf16_tflops, c.knobs.compute,
                                              dockyard::GemmPrecisionOf(t, c), c.hbm_gbps);
  const double core64_us = 2.0 * 4096 * 2048 * 32 * 128 / (2500e6 * 0.794 * 64 / 74 * 2048 / 2838 * 0.655);
  CHECK(core64_us == Approx(84.7).epsilon(0.002));
  const double core64_bwd_us = core64_us * 2.5 / 0.808 * (0.655 / 0.898);  // 191.1 us
  CHECK(core64_bwd_us == Approx(191.1).epsilon(0.002));
  CHECK(fp8_64.attention[0] - bf16_64.attention[0] == Approx(core64_us * (1 / 1.028 - 1)).epsilon(1e-9));
  CHECK(fp8_64.attention[1] - bf16_64.attention[1] == Approx(core64_bwd_us * (1 / 0.872 - 1)).epsilon(1e-9));
  // With a sliding window of 128 on every layer the BF16 core attends 128 - 128 x 127 / 8,192 =
  // 126.0 keys per query; cuDNN's FP8 backward still computes the 2,048 of the full causal core:
  // (2,048 / 126.0) x (126.0 / (126.0 + 790)) / (2,048 / 2,838) / 0.872 = 3.55x BF16's backward time
  // (cuDNN 9.22 measured 1.731 / 0.465 = 3.72x at that window and seq 4,096, C41; 9.19 1.77x at
  // window 1,024, where this rule gives 1.93x). The forward keeps the window: 1 / 1.028.
  m.attention.sliding_window = 128;
  m.sliding_attention_layers.assign(static_cast<size_t>(m.num_hidden_layers), true);
  const auto bf16_swa = dockyard::ShapedCompute(m, 4096, 4096, 1, 4096, 1, c.dense_bf16_tflops, c.knobs.compute,
                                                dockyard::GemmPrecisionOf(no_dpa), c.hbm_gbps);
  const auto fp8_swa = dockyard::ShapedCompute(m, 4096, 4096, 1, 4096, 1, c.dense_bf16_tflops, c.knobs.compute,
                                               dockyard::GemmPrecisionOf(t, c), c.hbm_gbps);
  const double keys = 128.0 - 128.0 * 127.0 / 8192.0;
  const double swa_bwd_us = core64_bwd_us * (keys / 2048) * (2048.0 / 2838) / (keys / (keys + 790));  // BF16, window honoured
  CHECK(swa_bwd_us == Approx(61.7).epsilon(0.005));
  const double x = (2048 / keys) * (keys / (keys + 790)) / (2048.0 / 2838) / 0.872;
  CHECK(x == Approx(3.55).epsilon(0.002));
  const double proj_bwd = bf16_swa.attention[1] - swa_bwd_us;  // the projections, alike in both
  CHECK(fp8_swa.attention[1] - proj_bwd == Approx(swa_bwd_us * x).epsilon(1e-6));
  const double swa_fwd_us = core64_us * (keys / 2048) * (2048.0 / 2838) / (keys / (keys + 790));
  CHECK(bf16_swa.attention[0] - fp8_swa.attention[0] == Approx(swa_fwd_us * (1 - 1 / 1.028)).epsilon(1e-6));
  // The reported speed-up (FlashCoreSpeedup: BF16 over FP8, forward + backward) at that shape:
  // (27.3 + 61.7) / (27.3 / 1.028 + 61.7 x 3.55) = 0.36x; without the window (84.7 + 191.1) /
  // (84.7 / 1.028 + 191.1 / 0.872) = 0.91x.
  CHECK(dockyard::FlashCoreSpeedup(c.knobs.compute, dockyard::GemmPrecisionOf(t, c), m, 4096) ==
        Approx((swa_fwd_us + swa_bwd_us) / (swa_fwd_us / 1.028 + swa_bwd_us * x)).epsilon(1e-9));
  CHECK(dockyard::FlashCoreSpeedup(c.knobs.compute, dockyard::GemmPrecisionOf(t, c), m, 4096) == Approx(0.36).epsilon(0.01));
  m.sliding_attention_layers.clear();
  m.attention.sliding_window = 0;
  CHECK(dockyard::FlashCoreSpeedup(c.knobs.compute, dockyard::GemmPrecisionOf(t, c), m, 4096) ==
        Approx((core64_us + core64_bwd_us) / (core64_us / 1.028 + core64_bwd_us / 0.872)).epsilon(1e-9));
  // GB300 at the same shape (gb300_919_only_cudnn/gpt_oss_20260226_185932.csv): forward 1.202x, the
  // backward's full causal core at 1.025 of GB300's curve; B200 borrows GB200's (the same die).
  CHECK(dockyard::ClusterPreset("gb300-nvl72").knobs.compute.flash.fp8_small_head_fwd_speedup == 1.202);
  CHECK(dockyard::ClusterPreset("gb300-nvl72").knobs.compute.flash.fp8_small_head_bwd_efficiency == 1.025);
  CHECK(dockyard::ClusterPreset("b200").knobs.compute.flash.fp8_small_head_fwd_speedup == 1.028);
  CHECK(dockyard::ClusterPreset("b200").knobs.compute.flash.fp8_small_head_bwd_efficiency == 0.872);
  // Hopper has no FP8 attention measurement (and cuDNN none below head dim 128): priced as BF16.
  CHECK(dockyard::ClusterPreset("h100-sxm").knobs.compute.flash.fp8_speedup == 1.0);
  CHECK(dockyard::ClusterPreset("h100-sxm").knobs.compute.flash.fp8_small_head_fwd_speedup == 1.0);
  CHECK(dockyard::ClusterPreset("h100-sxm").knobs.compute.flash.fp8_small_head_bwd_efficiency == 1.0);
  CHECK_FALSE(dockyard::ClusterPreset("h100-sxm").fp8_small_head_bwd_full_causal);
  // GB300: 3.902 / 2.247 ms (cuDNN 9.26, MLA, seq 4,096) = 1.74; B200: 2.132 / 1.861 = 1.15.
  CHECK(dockyard::ClusterPreset("gb300-nvl72").knobs.compute.flash.fp8_speedup == Approx(3.902 / 2.247).epsilon(0.005));
  CHECK(dockyard::ClusterPreset("b200").knobs.compute.flash.fp8_speedup == Approx(2.132 / 1.861).epsilon(0.005));
  // Without FP8 GEMMs TransformerEngine runs no FP8 attention: refused naming the field.
  dockyard::TrainingConfig bf16;
  bf16.fp8_dot_product_attention = true;
  CHECK_THROWS_WITH_AS(dockyard::ValidatePrecision(bf16, "--"),
                       doctest::Contains("--fp8-dot-product-attention: FP8 attention needs precision fp8"), dockyard::Error);
  // The training block round-trips it.
  const dockyard::Json json = dockyard::TrainingToJson(t, dockyard::Machine{});
  CHECK(json.at("fp8_dot_product_attention") == true);
  CHECK(dockyard::TrainingFromJson(dockyard::JsonView(&json, "spec.json", "/training")).fp8_dot_product_attention);
}
