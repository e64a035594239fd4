// Cost model formulas on hand-computed cases.
#include "planner/cost/cost.h"

#include <doctest/doctest.h>

#include "planner/base/error.h"
#include "planner/cost/network.h"
#include "planner/cost/gemm_efficiency.h"
#include "planner/model/model_file.h"
#include "tests/test_models.h"

using dockyard::Direction;
using dockyard::Phase;
using dockyard::ClusterSpec;
using doctest::Approx;

namespace {

// --compute-model gemm: the older model whose fixed efficiencies (dense 0.70, attention 0.50, the
// grouped-GEMM curve) the hand figures below use.
dockyard::ComputeModel GemmModel() {
  return dockyard::ComputeModel::kGemm;
}

// TinyMixtral on 4 GPUs, ep 4, seq_len 1024, with a uniform routing sample of 2 layers.
struct TinyEp4 {
  dockyard::Plan plan;
  dockyard::RoutingResult routing;
};
TinyEp4 TinyEp4Step() {
  dockyard::ParallelDimsOptions d;
  d.world_size = 4;
  d.ep = 4;
  dockyard::TrainingConfig t;
  t.seq_len = 1024;
  return {dockyard::BuildPlan(dockyard::testing::TinyMixtral(), d, t), dockyard::SampleRouting({}, 8, 2, 4, 1024, 2)};
}

}  // namespace

TEST_CASE("Grouped-GEMM efficiency halves at half_rows rows") {
  const dockyard::ComputeKnobs o;  // max 0.80, half at 128 rows
  CHECK(dockyard::GroupedGemmEfficiency(128, o) == Approx(0.40));
  CHECK(dockyard::GroupedGemmEfficiency(1152, o) == Approx(0.72));  // 0.8 * 1152 / 1280
}

TEST_CASE("Ring all-gather inside a node: (n-1) steps of alpha + B/n over NVLink") {
  ClusterSpec c = dockyard::ClusterPreset("h100-sxm");  // 370 GB/s, 3 us
  std::vector<int64_t> g = {0, 1, 2, 3, 4, 5, 6, 7};
  // 8 MB over 8 ranks: 7 x (3 us + 1e6 B / 370e3 B/us) = 7 x 5.7027 = 39.919 us.
  CHECK(dockyard::RingCollectiveUs(8e6, g, c) == Approx(39.919).epsilon(1e-4));
  // The same group spread over two nodes of 4 runs one ring per rail: 4 x 48 = 192 GB/s, 8 us.
  c.gpus_per_node = 4;
  CHECK(dockyard::RingCollectiveUs(8e6, g, c) == Approx(7 * (8.0 + 1e6 / 192e3)).epsilon(1e-6));
}

TEST_CASE("All-to-all: the busiest link of each rank decides, plus one latency") {
  ClusterSpec c = dockyard::ClusterPreset("h100-sxm");
  c.gpus_per_node = 2;
  std::vector<int64_t> g = {0, 1, 2, 3};  // nodes {0,1} and {2,3}
  // Rank 0 sends 370 kB to rank 1 (NVLink: 1 us) and 96 kB to rank 2 (NIC: 2 us).
  std::vector<double> bytes(16, 0.0);
  bytes[0 * 4 + 1] = 370e3;
  bytes[0 * 4 + 2] = 96e3;
  auto t = dockyard::AllToAllTimesUs(bytes, g, c);
  CHECK(t[0] == Approx(8.0 + 2.0));  // network latency (a remote peer exists) + max(1, 2)
  CHECK(t[1] == Approx(8.0 + 1.0));  // receives 370 kB over NVLink
  CHECK(t[2] == Approx(8.0 + 2.0));  // receives 96 kB over the NIC
  CHECK(t[3] == Approx(8.0));
}

TEST_CASE("Unknown cluster presets are rejected with the list and a suggestion") {
  CHECK_THROWS_WITH_AS(dockyard::ClusterPreset("h200-sx"), doctest::Contains("did you mean 'h200-sxm'?"), dockyard::Error);
}

TEST_CASE("A cluster JSON overrides its base preset and rejects bad values") {
  auto j = dockyard::Json::parse(R"({"base": "h200-sxm", "network_gbps": 24})");
  auto c = dockyard::ClusterFromJson(j, "c.json");
  CHECK(c.hbm_gbps == 4800.0);
  CHECK(c.knobs.links.network_gbps == 24.0);
  auto bad = dockyard::Json::parse(R"({"network_gbps": 0})");
  CHECK_THROWS_WITH_AS(dockyard::ClusterFromJson(bad, "c.json"),
                       doctest::Contains("c.json: /network_gbps: must be a number in [0.001, 1000000] (a rate; below 0.001 every time "
                                         "overflows), got 0"),
                       dockyard::Error);
  // A rate at the bottom of the old range, (0, 1e6], made every time inf (QA: 1e-300 TFLOP/s ranked
  // first with a 0 us stage); 0.001 is the floor, and the CPU test cluster's 0.01 / 1 pass.
  CHECK_THROWS_WITH_AS(dockyard::ClusterFromJson(dockyard::Json::parse(R"({"dense_bf16_tflops": 1e-300})"), "c.json"),
                       doctest::Contains("/dense_bf16_tflops: must be a number in [0.001, 1000000]"), dockyard::Error);
  CHECK(dockyard::ClusterFromJson(dockyard::Json::parse(R"({"dense_bf16_tflops": 0.001, "hbm_gbps": 0.001})"), "c.json").hbm_gbps ==
        0.001);
  // An empty name would leave messages naming nothing ("above 's 79.6 GiB").
  CHECK_THROWS_WITH_AS(dockyard::ClusterFromJson(dockyard::Json::parse(R"({"name": ""})"), "c.json"),
                       doctest::Contains("c.json: /name: must be a non-empty string"), dockyard::Error);
  // Memory and latencies keep (0, 1e6]: a tiny latency adds nothing and overflows nothing.
  CHECK_THROWS_WITH_AS(dockyard::ClusterFromJson(dockyard::Json::parse(R"({"network_latency_us": 0})"), "c.json"),
                       doctest::Contains("/network_latency_us: must be a number in (0, 1000000], got 0"), dockyard::Error);
}

TEST_CASE("A step whose time overflows is refused, naming the cluster, instead of printed as inf") {
  const TinyEp4 tiny = TinyEp4Step();
  ClusterSpec c = dockyard::ClusterPreset("h100-sxm");
  c.name = "slow";
  c.dense_bf16_tflops = 1e-310;  // below the file's floor: only code can build it
  CHECK_THROWS_WITH_AS(dockyard::SimulateStep(tiny.plan, c, tiny.routing),
                       doctest::Contains("us): cluster slow (dense_bf16_tflops 1e-310, hbm_gbps 3350) is too slow for a finite time"),
                       dockyard::Error);
}

TEST_CASE("Each preset's SM count and the SM shares it gives the overlap knobs; a cluster JSON may set its own") {
  // Kernel widths over the GPU's SMs (cluster.cc SetSmShares): NCCL 16, DeepEP 20, HybridEP 32 and
  // TransformerEngine's userbuffers 16.
  CHECK(dockyard::ClusterPreset("h100-sxm").sm_count == 132);
  CHECK(dockyard::ClusterPreset("h100-pcie-400g").sm_count == 114);
  CHECK(dockyard::ClusterPreset("h100-pcie-400g").knobs.dispatchers.ep_overlap.deepep_sm_share == doctest::Approx(20.0 / 114.0));
  CHECK(dockyard::ClusterPreset("gb200-nvl72").sm_count == 148);
  CHECK(dockyard::ClusterPreset("gb200-nvl72").knobs.dispatchers.ep_overlap.hybridep_sm_share == doctest::Approx(32.0 / 148.0));
  const dockyard::ClusterSpec b300 = dockyard::ClusterPreset("b300");  // Blackwell Ultra: 160 SMs
  CHECK(b300.sm_count == 160);
  CHECK(b300.knobs.dispatchers.ep_overlap.all_to_all_sm_share == doctest::Approx(0.1));
  CHECK(b300.knobs.dispatchers.ep_overlap.hybridep_sm_share == doctest::Approx(0.2));
  CHECK(b300.knobs.compute.tp_overlap.sm_share == doctest::Approx(0.1));
  CHECK(b300.knobs.dispatchers.ep_overlap.hybridep_comm_rate == 1.0);
  auto j = dockyard::Json::parse(R"({"base": "gb200-nvl72", "sm_count": 160})");
  const dockyard::ClusterSpec c = dockyard::ClusterFromJson(j, "c.json");
  CHECK(c.sm_count == 160);
  CHECK(c.knobs.dispatchers.ep_overlap.deepep_sm_share == doctest::Approx(0.125));
  CHECK(dockyard::ClusterToJson(c)["sm_count"] == 160);
  // HybridEP's default 32 SMs must be at most 0.9 of the GPU (the SM-share knobs' range): at least
  // ceil(32 / 0.9) = 36 SMs.
  for (const char* bad_text : {R"({"sm_count": 0})", R"({"sm_count": -1})", R"({"sm_count": 35})", R"({"sm_count": 1025})"}) {
    auto bad = dockyard::Json::parse(bad_text);
    CHECK_THROWS_WITH_AS(dockyard::ClusterFromJson(bad, "c.json"),
                         doctest::Contains("c.json: /sm_count: must be the GPU's streaming multiprocessors, in [36, 1024] (HybridEP's "
                                           "default 32 SMs at most 0.9 of them, the SM-share knobs' range)"),
                         dockyard::Error);
  }
  CHECK(dockyard::ClusterFromJson(dockyard::Json::parse(R"({"sm_count": 36})"), "c.json").knobs.dispatchers.ep_overlap.hybridep_sm_share ==
        doctest::Approx(32.0 / 36.0));
}

TEST_CASE("SimulateStep on the tiny model (--compute-model gemm): phase formulas and the step composition") {
  const TinyEp4 tiny = TinyEp4Step();
  const dockyard::Plan& plan = tiny.plan;
  const dockyard::RoutingResult& routing = tiny.routing;
  ClusterSpec c = dockyard::ClusterPreset("h100-sxm");
  auto cost = dockyard::SimulateStep(plan, c, routing, GemmModel());
  const double peak = 989e6;  // FLOP per us
  for (const auto& p : cost.phases) {
    if (p.phase == Phase::kRouter && p.direction == Direction::kForward) {
      // 2 x 1024 tokens x 64 x 8 experts = 1,048,576 FLOP at 70%: 0.0015 us < the 5 us floor.
      CHECK(p.time_us == Approx(5.0));
    }
    if (p.phase == Phase::kAttention && p.direction == Direction::kForward) {
      // Projections 2 x 1024 x 12288 params at 70%, core 2 x 1024 x 512 x 4 heads x 32 at 50%.
      const double expect = 2.0 * 1024 * 12288 / (peak * 0.7) + 2.0 * 1024 * 512 * 4 * 32 / (peak * 0.5);
      CHECK(p.time_us == Approx(expect));
    }
    if (p.phase == Phase::kGroupedGemm && p.direction == Direction::kForward) {
      REQUIRE(p.per_ep_rank_us.size() == 4);
    }
  }
  // Step = (M + pp - 1) x stage + step-end DP comm + optimizer, with M = pp = 1.
  CHECK(cost.step_time_us == Approx(cost.stage_microbatch_us + cost.dp_step_comm_us + cost.optimizer_us + cost.host_overhead_us));
  CHECK(cost.stage_microbatch_us == Approx(2 * cost.moe_layer_us + 3.0 * 2.0 * 1024 * 64 * 1000 / (peak * 0.7)));
  CHECK(cost.tokens_per_s_per_gpu > 0);
  CHECK(cost.mfu > 0);
  CHECK(cost.mfu < 1);
}

TEST_CASE("Skewed routing slows the slowest rank's grouped GEMM") {
  dockyard::ParallelDimsOptions d;
  d.world_size = 8;
  d.ep = 8;
  auto model = dockyard::LoadModel("testdata/hf/qwen3-30b-a3b.json");
  auto plan = dockyard::BuildPlan(model, d);
  ClusterSpec c = dockyard::ClusterPreset("h100-sxm");
  auto uniform = dockyard::SimulateStep(plan, c, dockyard::SampleRouting({}, 128, 8, 8, 4096, 2));
  dockyard::RoutingSpec zipf = dockyard::ParseRoutingSpec("zipf:1.2");
  zipf.zipf_shuffle = false;  // hot experts 0, 1, 2 ... all on EP rank 0
  auto skewed = dockyard::SimulateStep(plan, c, dockyard::SampleRouting(zipf, 128, 8, 8, 4096, 2));
  auto gemm = [](const dockyard::CostBreakdown& cb) {
    for (const auto& p : cb.phases)
      if (p.phase == Phase::kGroupedGemm && p.direction == Direction::kForward) return p.time_us;
    return 0.0;
  };
  CHECK(skewed.routing_imbalance > 1.5);
  CHECK(gemm(skewed) > 1.5 * gemm(uniform));
  CHECK(skewed.step_time_us > uniform.step_time_us);
}

TEST_CASE("The deredundency dispatcher is costed as oep all-gather plus iep all-to-all") {
  // Qwen3-30B-A3B, 16 GPUs on 2 nodes of 8, ep 16: oep 2 (nodes spanned), iep 8.
  auto model = dockyard::LoadModel("testdata/hf/qwen3-30b-a3b.json");
  dockyard::ParallelDimsOptions d;
  d.world_size = 16;
  d.ep = 16;
  dockyard::TrainingConfig t;
  t.seq_len = 2048;
  ClusterSpec c = dockyard::ClusterPreset("h100-sxm");
  auto a2a_plan = dockyard::BuildPlan(model, d, t);
  t.dispatcher = dockyard::Dispatcher::kDeredundency;
  auto der_plan = dockyard::BuildPlan(model, d, t);
  auto a2a = dockyard::SimulateStep(a2a_plan, c, dockyard::SampleRouting({}, 128, 8, 16, 2048, 1));
  auto der = dockyard::SimulateStep(der_plan, c, dockyard::SampleRouting({}, 128, 8, 16, 2048, 1, 2));
  auto dispatch = [](const dockyard::CostBreakdown& cb) {
    for (const auto& p : cb.phases)
      if (p.phase == Phase::kDispatch && p.direction == Direction::kForward) return p.time_us;
    return 0.0;
  };
  // The all-gather over oep carries 2 x 2048 x 8 rows x 2048 x 2 bytes = 134 MB as a 2-rank ring
  // across nodes: 1 step of 67 MB / 48 GB/s = 1398 us + 8 us, plus the in-node all-to-all.
  CHECK(dispatch(der) > 1398.0);
  CHECK(dispatch(der) != doctest::Approx(dispatch(a2a)));
  // A routing sample without the deredundency matrices is refused.
  CHECK_THROWS_WITH_AS(dockyard::SimulateStep(der_plan, c, dockyard::SampleRouting({}, 128, 8, 16, 2048, 1)), doctest::Contains("oep"),
                       dockyard::Error);
}

TEST_CASE("Full recomputation adds a forward pass to the backward (--compute-model gemm)") {
  dockyard::ParallelDimsOptions d;
  d.world_size = 4;
  d.ep = 4;
  dockyard::TrainingConfig t;
  t.seq_len = 1024;
  auto routing = dockyard::SampleRouting({}, 8, 2, 4, 1024, 1);
  ClusterSpec c = dockyard::ClusterPreset("h100-sxm");
  auto none = dockyard::SimulateStep(dockyard::BuildPlan(dockyard::testing::TinyMixtral(), d, t), c, routing, GemmModel());
  t.recompute = dockyard::Recompute::kFull;
  auto full = dockyard::SimulateStep(dockyard::BuildPlan(dockyard::testing::TinyMixtral(), d, t), c, routing, GemmModel());
  auto bwd_gemm = [](const dockyard::CostBreakdown& cb) {
    for (const auto& p : cb.phases)
      if (p.phase == Phase::kGroupedGemm && p.direction == Direction::kBackward) return p.time_us;
    return 0.0;
  };
  CHECK(bwd_gemm(full) == Approx(bwd_gemm(none) * 1.5));  // 3x forward instead of 2x
  CHECK(full.step_time_us > none.step_time_us);
}

TEST_CASE("Selective recompute under the kernels model: the routed SwiGLU re-runs the sampled rows, no shared expert is priced") {
  // Qwen3-30B-A3B has no shared experts; its routed SwiGLU recompute (moe_act) re-runs on the rows
  // the routing sample sends the slowest rank, so the memory-sizing bound training.imbalance
  // (check / simulate set it from a --routing sample) leaves the time unchanged.
  dockyard::ParallelDimsOptions d;
  d.world_size = 8;
  d.ep = 8;
  auto model = dockyard::LoadModel("testdata/hf/qwen3-30b-a3b.json");
  dockyard::TrainingConfig t;
  t.recompute = dockyard::Recompute::kSelective;
  const ClusterSpec c = dockyard::ClusterPreset("h100-sxm");
  dockyard::RoutingSpec zipf = dockyard::ParseRoutingSpec("zipf:1.2");
  const auto routing = dockyard::SampleRouting(zipf, 128, 8, 8, 4096, 2);
  const auto at = [&](double imbalance) {
    dockyard::TrainingConfig ti = t;
    ti.imbalance = imbalance;
    return dockyard::SimulateStep(dockyard::BuildPlan(model, d, ti), c, routing);
  };
  const auto one = at(1.0), sampled = at(1.7);
  CHECK(one.step_time_us == sampled.step_time_us);
  for (const auto& p : one.phases) {
    if (p.phase == Phase::kSharedExperts) CHECK(p.time_us == 0.0);
  }
}

TEST_CASE("Stage layer runs: each stage's layers of one kind in layer order, counted per stage") {
  // Six layers, two dense then four MoE, in interleaved chunks over pp 2 (a hand split, as vpp
  // makes them): layers {0,1} -> stage 0, {2} -> 1, {3} -> 0, {4,5} -> 1.
  const std::vector<bool> moe = {false, false, true, true, true, true};
  const std::vector<int64_t> stage = {0, 0, 1, 0, 1, 1};
  const dockyard::StageLayerRuns r = dockyard::StageLayerRunsOf(moe, stage, nullptr, 2);
  // Stage 0: layers 0, 1 (dense), 3 (MoE) -> runs {dense x2}, {MoE x1}.
  // Stage 1: layers 2, 4, 5 (MoE, consecutive among stage 1's layers) -> one run {MoE x3}.
  REQUIRE(r.stage_begin == std::vector<int64_t>{0, 2, 3});
  CHECK(!r.runs[0].moe);
  CHECK(r.runs[0].count == 2);
  CHECK(r.runs[1].moe);
  CHECK(r.runs[1].count == 1);
  CHECK(r.runs[2].moe);
  CHECK(r.runs[2].count == 3);
  const auto c0 = r.CountsOf(0), c1 = r.CountsOf(1);
  CHECK(c0.moe == 1);
  CHECK(c0.dense == 2);
  CHECK(c1.moe == 3);
  CHECK(c1.dense == 0);
  CHECK(c1.moe_checkpointed == 0);

  // Layers 4 and 0 checkpointed: stage 1 splits into {MoE x1} {MoE ckpt x1} {MoE x1}; stage 0 into
  // {dense ckpt x1} {dense x1} {MoE x1}.
  const std::vector<bool> ckpt = {true, false, false, false, true, false};
  const dockyard::StageLayerRuns k = dockyard::StageLayerRunsOf(moe, stage, &ckpt, 2);
  REQUIRE(k.stage_begin == std::vector<int64_t>{0, 3, 6});
  CHECK(k.runs[0].checkpointed);
  CHECK(!k.runs[0].moe);
  CHECK(k.runs[4].checkpointed);
  CHECK(k.runs[4].moe);
  CHECK(k.CountsOf(0).dense_checkpointed == 1);
  CHECK(k.CountsOf(0).dense == 2);
  CHECK(k.CountsOf(1).moe_checkpointed == 1);
  CHECK(k.CountsOf(1).moe == 3);
  // An empty mark vector is "none"; a stage with no layers has no runs.
  const std::vector<bool> none;
  CHECK(dockyard::StageLayerRunsOf(moe, stage, &none, 3).stage_begin == std::vector<int64_t>{0, 2, 3, 3});

  CHECK_THROWS_WITH_AS(dockyard::StageLayerRunsOf(moe, {0, 0, 1}, nullptr, 2), doctest::Contains("moe_layers 6"), dockyard::Error);
  CHECK_THROWS_WITH_AS(dockyard::StageLayerRunsOf(moe, stage, nullptr, 1), doctest::Contains("layer 2 is on stage 1, outside [0, 1)"),
                       dockyard::Error);
  const std::vector<bool> short_marks = {true};
  CHECK_THROWS_WITH_AS(dockyard::StageLayerRunsOf(moe, stage, &short_marks, 2), doctest::Contains("checkpointed marks 1"), dockyard::Error);
}
