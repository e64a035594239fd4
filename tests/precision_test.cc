// Precision: FP8 GEMM time and weight copies, quantize kernels, FP8 dispatch, BF16 optimizer states.
#include "planner/model/precision.h"

#include <doctest/doctest.h>

#include "planner/cost/cost.h"
#include "planner/base/error.h"
#include "planner/cost/gemm_efficiency.h"
#include "planner/accounting/comm.h"
#include "planner/accounting/memory.h"
#include "planner/accounting/workload.h"
#include "planner/cost/network.h"
#include "planner/cost/moe_phases.h"
#include "planner/model/training_json.h"
#include "tests/test_models.h"
#include "tests/tiny_plan.h"

using doctest::Approx;

namespace {

dockyard::Plan TinyPlan(const dockyard::TrainingConfig& t) {
  return dockyard::testing::TinyEp4Plan(t, dockyard::Convention::kMegatron);
}

}  // namespace

TEST_CASE("FP8 weight copies: 2 B per GEMM weight element on the rank, nothing without FP8") {
  dockyard::TrainingConfig t;
  const auto bf16 = dockyard::StaticMemoryOnRank(TinyPlan(t), 0);
  CHECK(bf16.params_by_role.count("fp8_weights") == 0);
  t.precision = "fp8";
  const auto fp8 = dockyard::StaticMemoryOnRank(TinyPlan(t), 0);
  // Attention 2 layers x (64x64 + 2 x 64x32 + 64x64) = 24,576 elements; routed experts 2 layers x
  // 2 local experts x 3 x 64x32 = 24,576: (24,576 + 24,576) x 2 B = 98,304 B (row-wise + column-wise).
  CHECK(fp8.params_by_role.at("fp8_weights") == 98304);
  CHECK(fp8.params_bytes == bf16.params_bytes + 98304);
  CHECK(fp8.grads_bytes == bf16.grads_bytes);
  // Blockwise adds one fp32 scale per 128x128 block of each copy: 2 x (1 + 4 / 16,384) B per element.
  t.fp8_recipe = "blockwise";
  CHECK(dockyard::Fp8WeightCopyBytesPerElement(t) == Approx(2.0 + 8.0 / 16384));
}

TEST_CASE("FP8 activations: the inputs of FP8 linear layers are saved in 1 B (TransformerEngine), the rest unchanged") {
  dockyard::TrainingConfig t;
  const auto plan = TinyPlan(t);
  const auto w = dockyard::ComputeWorkload(plan);
  CHECK_FALSE(w.fp8_saved_inputs);
  t.precision = "fp8";
  const auto w8 = dockyard::ComputeWorkload(TinyPlan(t));
  REQUIRE(w8.fp8_saved_inputs);
  auto m = plan.model;
  const dockyard::RecomputeSet none;
  const auto bf16 = dockyard::LayerActivations(m, none, w, true);
  const auto fp8 = dockyard::LayerActivations(m, none, w8, true);
  // MoE layer, tp 1, T = 1024, hidden 64. Attention BF16: norm in + norm out (64 each) + qkv
  // (64 + 2 x 32) + core out (64) = 320 x 1024 elements x 2 B + lse 1024 x 4 heads x 4 B = 671,744 B.
  CHECK(bf16.attention == 671744);
  // FP8: the norm output (qkv's input) and the core output (o's input), 2 x 65,536 elements, in
  // 1 B instead of 2: 131,072 B less.
  CHECK(fp8.attention == 671744 - 131072);
  // The post-attention norm output feeds the BF16 router in an MoE layer: unchanged.
  CHECK(fp8.norm == bf16.norm);
  CHECK(fp8.router == bf16.router);
  // Routed experts (R_max = 2048 rows, f_local 32): the grouped GEMM's input rows 2048 x 64 and the
  // down projection's input 2048 x 32 in 1 B: 131,072 + 65,536 B less.
  CHECK(fp8.routed_experts == bf16.routed_experts - 196608);
  // A dense layer (F = 128): the norm output (1024 x 64) and the down input (1024 x 128) in FP8.
  m.intermediate_size = 128;
  const auto dense16 = dockyard::LayerActivations(m, none, w, false);
  const auto dense8 = dockyard::LayerActivations(m, none, w8, false);
  CHECK(dense8.norm == dense16.norm - 65536);
  // Megatron's fused SwiGLU keeps fc1's output (gate and up, 2F) and fc2's input (F): 3F
  // (workload.h SavedTensorRules).
  CHECK(dense16.dense_mlp == 1024 * 128 * 3 * 2);
  CHECK(dense8.dense_mlp == 1024 * 128 * (2 * 2 + 1));
  // Blockwise: each saved FP8 tensor keeps a fp32 scale per 1x128 tile: 131,072 elements + 1,024 x 4 B.
  t.fp8_recipe = "blockwise";
  const auto blockwise = dockyard::LayerActivations(m, none, dockyard::ComputeWorkload(TinyPlan(t)), true);
  CHECK(blockwise.attention == 671744 - 262144 + 131072 + 4096);
  // The stage's peak falls with FP8 by at least the activations saved.
  CHECK(dockyard::ComputeMemory(TinyPlan(t)).stages[0].worst.activations_bytes <
        dockyard::ComputeMemory(plan).stages[0].worst.activations_bytes);
}

TEST_CASE("BF16 optimizer states halve the AdamW moments") {
  dockyard::TrainingConfig t;
  CHECK(dockyard::TrainingBytesOf(t).moments == 8);
  t.optimizer_states_dtype = "bfloat16";
  CHECK(dockyard::TrainingBytesOf(t).moments == 4);
  const auto base = dockyard::StaticMemoryOnRank(TinyPlan(dockyard::TrainingConfig{}), 0);
  const auto half = dockyard::StaticMemoryOnRank(TinyPlan(t), 0);
  CHECK(half.optimizer_bytes < base.optimizer_bytes);
  CHECK(half.params_bytes == base.params_bytes);
}

TEST_CASE("FP8 GEMMs: twice the peak at fp8_efficiency_ratio of the BF16 shape efficiency") {
  const dockyard::ComputeKnobs o;
  const double bf16 = dockyard::LinearUs(4096, 4096, 7168, false, 989, o);
  const dockyard::GemmPrecision fp8{true, dockyard::Fp8Scaling::kTensorwise};
  CHECK(dockyard::LinearUs(4096, 4096, 7168, false, 989, o, fp8) == Approx(bf16 / (2.0 * 0.87)));
  // DeepGEMM FP8 grouped GEMM on H800 (runs.json C22-C24; FP8 peak 2 x 989), expert shape N 4096,
  // K 7168: 4-8K rows in 1,099-1,297 TFLOP/s, 1,024 rows in 925-1,233, 256 rows in 815-932.
  auto tflops = [&](double rows) { return dockyard::GemmShapeEfficiency(rows, 4096, 7168, o) * o.gemm.fp8_efficiency_ratio * 2 * 989; };
  CHECK(tflops(4096) >= 1099);
  CHECK(tflops(8192) <= 1297);
  CHECK(tflops(1024) >= 925);
  CHECK(tflops(1024) <= 1233);
  CHECK(tflops(256) >= 815);
  CHECK(tflops(256) <= 932);
}

TEST_CASE("FP8 GEMMs in --compute-model gemm: projections and expert GEMMs at 2 x 0.87 the speed, core and router in BF16") {
  dockyard::TrainingConfig t;
  const auto routing = dockyard::testing::TinyEp4Routing();
  const dockyard::ClusterSpec c = dockyard::ClusterPreset("h100-sxm");
  const dockyard::ComputeModel gemm = dockyard::ComputeModel::kGemm;  // the older model's fixed efficiencies, which the figures below use
  const auto bf16 = dockyard::SimulateStep(TinyPlan(t), c, routing, gemm);
  t.precision = "fp8";
  const auto fp8 = dockyard::SimulateStep(TinyPlan(t), c, routing, gemm);
  auto phase = [](const dockyard::CostBreakdown& cb, const char* name, const char* dir) {
    for (const auto& p : cb.phases)
      if (PhaseName(p.phase) == std::string(name) && DirectionName(p.direction) == std::string(dir)) return p.time_us;
    return -1.0;
  };
  const double peak = 989e6;  // FLOP per us, dense BF16 (h100-sxm)
  // Projections 2 x 1024 tokens x 12,288 params at 70 % of 2 x 989 x 0.87; the causal core
  // 2 x 1024 x 512 x 4 heads x 32 at 50 % of the BF16 peak (flash attention stays BF16).
  const double core = 2.0 * 1024 * 512 * 4 * 32 / (peak * 0.5);
  CHECK(phase(fp8, "attention", "forward") == Approx(2.0 * 1024 * 12288 / (peak * 0.7 * 2 * 0.87) + core));
  CHECK(phase(bf16, "attention", "forward") == Approx(2.0 * 1024 * 12288 / (peak * 0.7) + core));
  // Grouped GEMM: every expert's 6 M D f FLOP at 1.74x the speed, the same routing.
  CHECK(phase(fp8, "grouped_gemm", "forward") == Approx(phase(bf16, "grouped_gemm", "forward") / 1.74));
  CHECK(phase(fp8, "grouped_gemm", "backward") == Approx(phase(bf16, "grouped_gemm", "backward") / 1.74));
  CHECK(phase(fp8, "router", "forward") == Approx(phase(bf16, "router", "forward")));  // BF16
  CHECK(fp8.step_time_us < bf16.step_time_us);
}

TEST_CASE("FP8 quantize kernels: bytes per element and their time in the shaped compute") {
  // Tensorwise current scaling: amax read + cast read (2 x 2 B) + FP8 write 1 B; blockwise: one
  // read, the write and a fp32 scale per 128 elements.
  CHECK(dockyard::Fp8QuantizeBytesPerElement(dockyard::Fp8Scaling::kTensorwise, 2) == 5.0);
  CHECK(dockyard::Fp8QuantizeBytesPerElement(dockyard::Fp8Scaling::kBlockwise, 2) == Approx(3.03125));
  const dockyard::ComputeKnobs o;
  const dockyard::GemmPrecision fp8{true, dockyard::Fp8Scaling::kTensorwise};
  const auto m = dockyard::testing::TinyMixtral();
  const auto without = dockyard::ShapedCompute(m, 1024, 1024, 1, 1024, 1, 989, o, fp8);
  const auto with = dockyard::ShapedCompute(m, 1024, 1024, 1, 1024, 1, 989, o, fp8, 3350);
  // Forward: the inputs of qkv (1024 x 64) and o (1024 x 64) are quantized: 2 kernels, each
  // 65,536 x 5 B at 3350 GB/s x 0.70 = 0.14 us, under the 5 us floor: 10 us.
  CHECK(with.attention[0] - without.attention[0] == Approx(10.0));
  CHECK(with.router[0] == without.router[0]);  // the router stays BF16
  // An expert's gate_up and down inputs: 2 more kernels.
  CHECK(dockyard::ExpertMlpForwardUs(128, 64, 32, 989, o, fp8, 3350) - dockyard::ExpertMlpForwardUs(128, 64, 32, 989, o, fp8) == Approx(10.0));
}

TEST_CASE("FP8 dispatch sends 1 B + 4 B / 128 per element; combine stays BF16") {
  dockyard::TrainingConfig t;
  CHECK(dockyard::DispatchBytesPerElement(t, 128, 2) == 2);
  t.fp8_dispatch = true;
  CHECK(dockyard::DispatchBytesPerElement(t, 128, 2) == Approx(1.03125));  // (128 + 4) / 128
  // hidden 64: one started tile, (64 + 4) / 64 = 1.0625 B per element, as the row rule counts it.
  CHECK(dockyard::DispatchBytesPerElement(t, 64, 2) == Approx(1.0625));
  const dockyard::ClusterSpec c = dockyard::ClusterPreset("h100-sxm");
  const auto routing = dockyard::testing::TinyEp4Routing(1);
  const auto plan = TinyPlan(dockyard::TrainingConfig{});
  auto shape = dockyard::MoePhaseShapeOf(plan.model, dockyard::ComputeWorkload(plan), plan.training, 4);
  const auto base = dockyard::SimulateMoePhases(routing, {0, 1, 2, 3}, shape, c);
  shape.dispatch_act_bytes = 1.03125;
  const auto fp8 = dockyard::SimulateMoePhases(routing, {0, 1, 2, 3}, shape, c);
  // Inside one node: 3 us latency + the busiest NVLink direction, whose bytes scale by 1.03125 / 2.
  CHECK(fp8.dispatch_max - 3.0 == Approx((base.dispatch_max - 3.0) * 1.03125 / 2.0));
  CHECK(fp8.combine_max == Approx(base.combine_max));
}

TEST_CASE("Precision settings are validated") {
  dockyard::TrainingConfig t;
  t.precision = "fp16";
  CHECK_THROWS_WITH_AS(dockyard::ValidateTraining(t, "--"), doctest::Contains("--precision: must be \"bf16\", \"fp8\" or \"mxfp8\""), dockyard::Error);
  t.precision = "bf16";
  t.fp8_recipe = "blockwise";
  CHECK_THROWS_WITH_AS(dockyard::ValidateTraining(t, "/training/"),
                       doctest::Contains("/training/fp8_recipe: \"blockwise\" needs precision fp8"), dockyard::Error);
  t.fp8_recipe = "tensorwise";
  t.optimizer_states_dtype = "float16";
  CHECK_THROWS_WITH_AS(dockyard::ValidateTraining(t, "--"), doctest::Contains("--optimizer-states-dtype"), dockyard::Error);
}

TEST_CASE("FP8 parameter all-gather: FSDP gathers the FP8 GEMM weights in 1 B, the rest in param_dtype") {
  dockyard::TrainingConfig t;
  t.precision = "fp8";
  const auto base = dockyard::testing::TinyEp4Plan(t);  // torchtitan: FSDP over dp_shard 4
  t.fp8_param_gather = true;
  const auto gather = dockyard::testing::TinyEp4Plan(t);
  // A layer's dense FSDP unit: attention 12,288 elements (FP8 GEMM weights) + 2 norms 128 + router
  // 512 (BF16): 12,928 x 2 B = 25,856 B without, 640 x 2 + 12,288 x 1 = 13,568 B with; the
  // embedding and root units (no FP8 GEMM weights) are unchanged; the experts' efsdp is 1 (no
  // all-gather).
  auto gathered = [](const dockyard::Plan& plan) {
    std::vector<int64_t> out;
    for (const auto& e : dockyard::ComputeComm(plan, 0).entries)
      if (e.purpose == "fsdp_all_gather_forward") out.push_back(e.bytes_per_call);
    return out;
  };
  const auto b0 = gathered(base), b1 = gathered(gather);
  REQUIRE(b0.size() == b1.size());
  int64_t total0 = 0, total1 = 0;
  for (size_t i = 0; i < b0.size(); ++i) {
    total0 += b0[i];
    total1 += b1[i];
    if (b0[i] == 25856) CHECK(b1[i] == 13568);
  }
  CHECK(total0 - total1 == 2 * 12288);
  // Time: the MoE layer's forward FSDP traffic is one all-gather of those bytes over the 4 GPUs.
  const auto routing = dockyard::testing::TinyEp4Routing();
  const dockyard::ClusterSpec c = dockyard::ClusterPreset("h100-sxm");
  auto fsdp_fwd = [&](const dockyard::Plan& plan) {
    for (const auto& p : dockyard::SimulateStep(plan, c, routing).phases)
      if (p.phase == dockyard::Phase::kFsdpComm && p.layer_kind == dockyard::LayerKind::kMoe && p.direction == dockyard::Direction::kForward) return p.time_us;
    return -1.0;
  };
  CHECK(fsdp_fwd(base) == Approx(dockyard::RingCollectiveUs(25856, 4, false, c, 4)));
  CHECK(fsdp_fwd(gather) == Approx(dockyard::RingCollectiveUs(13568, 4, false, c, 4)));
  // Memory does not move (the all-gather buffers are not split by precision).
  CHECK(dockyard::ComputeMemory(gather).worst_peak_bytes == dockyard::ComputeMemory(base).worst_peak_bytes);
}

TEST_CASE("FP8 parameter all-gather is refused without FP8 GEMMs and without FSDP or the distributed optimizer") {
  dockyard::TrainingConfig t;
  t.fp8_param_gather = true;  // invalid: precision is bf16
  CHECK_THROWS_WITH_AS(dockyard::ValidateTraining(t, "--"),
                       doctest::Contains("--fp8-param-gather: FP8 parameter all-gather needs precision fp8"), dockyard::Error);
  t.precision = "fp8";
  t.dp_sharding = dockyard::DpSharding::kDdp;  // invalid: Megatron needs the distributed optimizer (or FSDP)
  CHECK_THROWS_WITH_AS(TinyPlan(t), doctest::Contains("fp8_param_gather: the FP8 parameter all-gather is modelled for dp_sharding fsdp"),
                       dockyard::Error);
}

TEST_CASE("FP8 under torchtitan (torchao Float8Linear): no FP8 weight copies, inputs saved in param_dtype") {
  // torchao casts weight and input inside each GEMM and saves the high-precision ones
  // (float8_linear.py: ctx.save_for_backward(input_hp, weight_hp_t)); TransformerEngine (megatron)
  // keeps both quantized (the two cases above: 98,304 B of copies, FP8-saved inputs).
  dockyard::TrainingConfig t;
  const auto bf16_plan = dockyard::testing::TinyEp4Plan(t, dockyard::Convention::kTorchtitan);
  t.precision = "fp8";
  const auto fp8_plan = dockyard::testing::TinyEp4Plan(t, dockyard::Convention::kTorchtitan);
  CHECK_FALSE(dockyard::Fp8KeepsQuantizedTensors(t, dockyard::Convention::kTorchtitan));
  CHECK(dockyard::Fp8KeepsQuantizedTensors(t, dockyard::Convention::kMegatron));
  CHECK_FALSE(dockyard::ComputeWorkload(fp8_plan).fp8_saved_inputs);
  const auto bf16 = dockyard::StaticMemoryOnRank(bf16_plan, 0), fp8 = dockyard::StaticMemoryOnRank(fp8_plan, 0);
  CHECK(fp8.params_by_role.count("fp8_weights") == 0);
  CHECK(fp8.params_bytes == bf16.params_bytes);
  CHECK(dockyard::ComputeMemory(fp8_plan).worst_peak_bytes == dockyard::ComputeMemory(bf16_plan).worst_peak_bytes);
  CHECK(dockyard::StaticMemoryOnRank(TinyPlan(t), 0).params_by_role.at("fp8_weights") == 98304);  // megatron
}
