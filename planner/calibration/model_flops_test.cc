// Megatron's model FLOPs per token against the published per-token figures of the calibration set
// (the Megatron / NeMo "model FLOPs" the TFLOP/s columns of testdata/fidelity/runs.json use).
#include "planner/cost/model_flops.h"

#include <doctest/doctest.h>

#include "planner/cost/cost.h"
#include "planner/base/error.h"
#include "planner/calibration/fidelity.h"
#include "tests/test_models.h"
#include "tests/tiny_plan.h"

using doctest::Approx;

namespace {

const dockyard::FidelitySet& Set() {
  static const dockyard::FidelitySet set = dockyard::LoadFidelitySet("testdata/fidelity/runs.json");
  return set;
}
double Gflop(const char* model, int64_t seq, int64_t mtp = 0) {
  return dockyard::ModelFlopsPerToken(Set().models.at(model), seq, mtp) / 1e9;
}

}  // namespace

TEST_CASE("Model FLOPs per token match the published figures (GFLOP per token, within 0.1 %)") {
  // Megatron-MoE-ModelZoo / Megatron-Bridge model FLOPs (../fidelity/public-runs.md conventions).
  CHECK(Gflop("qwen3-30b-a3b", 4096) == Approx(23.01).epsilon(1e-3));
  CHECK(Gflop("qwen3-235b-a22b", 4096) == Approx(148.0).epsilon(1e-3));
  CHECK(Gflop("qwen3-235b-a22b", 16384) == Approx(204.8).epsilon(1e-3));
  CHECK(Gflop("qwen3-235b-a22b", 32768) == Approx(280.5).epsilon(1e-3));
  CHECK(Gflop("qwen3-235b-a22b", 65536) == Approx(431.9).epsilon(1e-3));
  CHECK(Gflop("qwen3-235b-a22b", 131072) == Approx(734.7).epsilon(1e-3));
  CHECK(Gflop("deepseek-v3", 4096) == Approx(249.8).epsilon(1e-3));
  CHECK(Gflop("deepseek-v3", 4096, 1) == Approx(259.4).epsilon(1e-3));  // one MTP layer
  CHECK(Gflop("mixtral-8x22b", 4096) == Approx(242.2).epsilon(1e-3));
  CHECK(Gflop("mixtral-8x7b", 4096) == Approx(79.7).epsilon(1e-3));
}

TEST_CASE("Model FLOPs on the tiny model by hand") {
  const auto m = dockyard::testing::TinyMixtral();  // D 64, 4 heads of 16, 2 KV, top-2 of F 32, vocab 1000, 2 layers
  // Attention matmuls: qkv 64 x (4 + 4) x 16 = 8,192 + o 64 x 64 = 4,096 -> 12,288.
  CHECK(dockyard::AttentionMatmulParams(m) == 12288);
  // Per layer 6 x (12,288 + 3 x 64 x 2 x 32 = 12,288) = 147,456; causal core 3 x 1024 x 4 x 32 =
  // 393,216; two layers 1,081,344; logits 6 x 64,000 = 384,000: 1,465,344 FLOP per token.
  CHECK(dockyard::ModelFlopsPerToken(m, 1024) == 1465344);
  // One MTP layer: another layer (540,672) and another logits (384,000).
  CHECK(dockyard::ModelFlopsPerToken(m, 1024, 1) == 1465344 + 540672 + 384000);
  CHECK_THROWS_AS(dockyard::ModelFlopsPerToken(m, 0), dockyard::Error);
  CHECK_THROWS_AS(dockyard::ModelFlopsPerToken(m, 1024, -1), dockyard::Error);
}

TEST_CASE("SimulateStep reports Megatron's model FLOPs and the MFU from them") {
  const auto plan = dockyard::testing::TinyEp4Plan();
  const auto cost = dockyard::SimulateStep(plan, dockyard::ClusterPreset("h100-sxm"), dockyard::testing::TinyEp4Routing());
  CHECK(cost.model_flops_per_token == 1465344);
  // 4 data-parallel ranks x 1 micro-batch x 1024 tokens = 4,096 tokens per step on 4 GPUs at 989 TFLOP/s.
  CHECK(cost.mfu == Approx(4096.0 * 1465344 / (cost.step_time_us * 1e-6 * 4 * 989e12)));
}
