// Muon (--optimizer muon, muon.h): which parameters it takes, one momentum in memory, the
// Newton-Schulz matmuls at the step's end, and where it is refused.
#include <doctest/doctest.h>

#include <string>

#include "planner/accounting/memory.h"
#include "planner/base/error.h"
#include "planner/cost/cluster.h"
#include "planner/cost/cost.h"
#include "planner/cost/gemm_efficiency.h"
#include "planner/cost/units.h"
#include "planner/model/muon.h"
#include "tests/test_models.h"
#include "tests/tiny_plan.h"

using doctest::Approx;

namespace {

// The tiny model (hidden 64, 4 heads of 16, 2 KV heads, 2 MoE layers of 8 experts of F 32, vocab
// 1000) under --convention megatron on 8 GPUs, EP 4: dp 8, edp 2, zero1.
dockyard::Plan Zero1Plan(dockyard::Optimizer o) {
  dockyard::TrainingConfig t;
  t.optimizer = o;
  t.seq_len = 1024;
  dockyard::ParallelDimsOptions d;
  d.world_size = 8;
  d.ep = 4;
  d.convention = dockyard::Convention::kMegatron;
  return dockyard::BuildPlan(dockyard::testing::TinyMixtral(), d, t);
}

}  // namespace

TEST_CASE("Muon's matrices and their Newton-Schulz FLOPs, by hand") {
  const auto matrices = dockyard::MuonMatrices(dockyard::testing::TinyMixtral(), 0);
  double elems = 0, flops = 0;
  for (const auto& x : matrices) {
    elems += x.count * x.rows * x.cols;
    flops += x.count * dockyard::NewtonSchulzFlops(x, dockyard::kMuonNewtonSchulzSteps);
  }
  // Per layer: q and o 64 x 64, k and v 32 x 64, router 8 x 64, 8 experts' fc1 64 x 64 and fc2 64 x
  // 32: 4,096 x 2 + 2,048 x 2 + 512 + 8 x (4,096 + 2,048) = 61,952; two layers 123,904 (the model
  // less its embedding, lm_head and norms).
  CHECK(elems == 123904);
  // Newton-Schulz, 5 steps of 4 m^2 n + 2 m^3: 64 x 64 -> 5 x 6 x 64^3 = 7,864,320; 32 x 64 ->
  // 5 x (4 x 32^2 x 64 + 2 x 32^3) = 1,638,400; 8 x 64 -> 5 x (4 x 64 x 64 + 2 x 512) = 87,040. Per
  // layer 2 x 7,864,320 + 2 x 1,638,400 + 87,040 + 8 x (7,864,320 + 1,638,400) = 95,114,240.
  CHECK(dockyard::NewtonSchulzFlops({64, 64, 1}, 5) == 7864320);
  CHECK(dockyard::NewtonSchulzFlops({32, 64, 1}, 5) == 1638400);
  CHECK(dockyard::NewtonSchulzFlops({8, 64, 1}, 5) == 87040);
  CHECK(flops == 2 * 95114240.0);
  // The gemm model prices them at dense_efficiency: 190,228,480 FLOP / (989 x 10^6 FLOP/us x 0.70).
  const dockyard::ComputeKnobs h100;
  CHECK(dockyard::MuonNewtonSchulzFullUs(dockyard::testing::TinyMixtral(), 0, 989, h100, false) ==
        Approx(190228480.0 / (989e6 * 0.70)));
}

TEST_CASE("Muon keeps one momentum per matrix element and Adam's moments for the rest") {
  const auto adam = dockyard::StaticMemoryOnRank(Zero1Plan(dockyard::Optimizer::kAdamW), 0);
  const auto muon = dockyard::StaticMemoryOnRank(Zero1Plan(dockyard::Optimizer::kMuon), 0);
  // zero1: fp32 master (4 B) + Adam's two moments (8 B) = 12 B per shard element; Muon's matrices
  // 4 + 4 = 8 B. Attention 24,576 elements / dp 8 = 3,072: 36,864 B -> 24,576 B.
  CHECK(adam.optimizer_by_role.at("attention") == 36864);
  CHECK(muon.optimizer_by_role.at("attention") == 24576);
  // Routed experts 24,576 / edp 2 = 12,288: 147,456 -> 98,304 B; the router likewise 8 / 12.
  CHECK(muon.optimizer_by_role.at("routed_experts") == 98304);
  CHECK(muon.optimizer_by_role.at("router") * 12 == adam.optimizer_by_role.at("router") * 8);
  // The embedding and lm_head stay on Adam (--muon-scalar-optimizer adam).
  CHECK(muon.optimizer_by_role.at("embedding") == adam.optimizer_by_role.at("embedding"));
  CHECK(muon.optimizer_by_role.at("lm_head") == adam.optimizer_by_role.at("lm_head"));
  CHECK(muon.params_bytes == adam.params_bytes);
  CHECK(muon.grads_bytes == adam.grads_bytes);
}

TEST_CASE("Muon's Newton-Schulz time is the rank's share of the model's, times tp") {
  const auto c = dockyard::ClusterPreset("h100-sxm");
  dockyard::TrainingConfig t;
  t.optimizer = dockyard::Optimizer::kMuon;
  const auto m = dockyard::testing::TinyMixtral();
  const double full = dockyard::MuonNewtonSchulzFullUs(m, 0, c.dense_bf16_tflops, c.knobs.compute, true);
  // A rank stepping an eighth of the 123,904 Muon elements: an eighth of the time; with tp 2 twice that.
  CHECK(dockyard::MuonNewtonSchulzUs(m, t, c, dockyard::ComputeModel::kKernels, 123904.0 / 8, 1) == Approx(full / 8));
  CHECK(dockyard::MuonNewtonSchulzUs(m, t, c, dockyard::ComputeModel::kKernels, 123904.0 / 8, 2) == Approx(full / 4));
  t.optimizer = dockyard::Optimizer::kAdamW;
  CHECK(dockyard::MuonNewtonSchulzUs(m, t, c, dockyard::ComputeModel::kKernels, 123904.0, 1) == 0);
  // The step: Muon's optimizer time carries it.
  const auto routing = dockyard::testing::TinyEp4Routing();
  const auto adam = dockyard::SimulateStep(Zero1Plan(dockyard::Optimizer::kAdamW), c, routing);
  const auto muon = dockyard::SimulateStep(Zero1Plan(dockyard::Optimizer::kMuon), c, routing);
  CHECK(muon.optimizer_us != adam.optimizer_us);
  CHECK(muon.moe_layer_us == Approx(adam.moe_layer_us));
}

TEST_CASE("Muon is Megatron's and not under FSDP") {
  dockyard::TrainingConfig t;
  t.optimizer = dockyard::Optimizer::kMuon;
  CHECK_THROWS_WITH_AS(dockyard::ValidateMuon(t, false), doctest::Contains("torchtitan's optimizers are Adam / AdamW"), dockyard::Error);
  t.dp_sharding = dockyard::DpSharding::kFsdp;
  CHECK_THROWS_WITH_AS(dockyard::ValidateMuon(t, true), doctest::Contains("Megatron-FSDP's Muon is not modelled"), dockyard::Error);
  t.dp_sharding = dockyard::DpSharding::kZero1;
  CHECK_NOTHROW(dockyard::ValidateMuon(t, true));
  CHECK(dockyard::ParseOptimizer("muon", "--optimizer") == dockyard::Optimizer::kMuon);
  CHECK(dockyard::MuonManagedGroup("routed_experts"));
  CHECK_FALSE(dockyard::MuonManagedGroup("embedding"));
  CHECK_FALSE(dockyard::MuonManagedGroup("norm"));
}
