// The time of an MTP module: its eh_proj GEMM besides the decoder layer and the logits.
#include <doctest/doctest.h>

#include "planner/cost/cost.h"
#include "planner/cost/gemm_efficiency.h"
#include "tests/test_models.h"
#include "tests/tiny_plan.h"

using doctest::Approx;

TEST_CASE("MTP eh_proj: 2 x T x 2D x D / tp FLOPs forward, 2x in backward (--compute-model gemm)") {
  const auto routing = dockyard::testing::TinyEp4Routing();
  const dockyard::ClusterSpec c = dockyard::ClusterPreset("h100-sxm");
  const dockyard::ComputeModel gemm = dockyard::ComputeModel::kGemm;
  const auto t0 = dockyard::SimulateStep(dockyard::testing::TinyMtpPlan(0), c, routing, gemm);
  const auto t1 = dockyard::SimulateStep(dockyard::testing::TinyMtpPlan(1), c, routing, gemm);
  // pp 1: the stage runs 2 MoE layers and lm_head; one MTP module adds one MoE layer, one lm_head
  // and eh_proj. eh_proj: T 1,024 tokens x [2 x 64 -> 64] (tp 1): 2 x 1,024 x 128 x 64 =
  // 16,777,216 FLOP forward, x 3 with the backward = 50,331,648 FLOP at dense_efficiency of the
  // H100's 989 TFLOP/s.
  const double lm_head = t0.stage_microbatch_us - 2 * t0.moe_layer_us;
  const double eh_proj = 3.0 * 2.0 * 1024 * 128 * 64 / (989e6 * c.knobs.compute.gemm.dense_efficiency);
  CHECK(eh_proj > 0);
  CHECK(t1.stage_microbatch_us - t0.stage_microbatch_us == Approx(t0.moe_layer_us + lm_head + eh_proj));
  // Two modules: twice.
  dockyard::TrainingConfig t;
  t.mtp_layers = 2;
  const auto t2 = dockyard::SimulateStep(dockyard::testing::TinyEp4Plan(t, dockyard::Convention::kMegatron), c, routing, gemm);
  CHECK(t2.stage_microbatch_us - t0.stage_microbatch_us == Approx(2 * (t0.moe_layer_us + lm_head + eh_proj)));
}

TEST_CASE("MTP eh_proj by shape (--compute-model kernels): the forward GEMM (T, D / tp, 2D) and its dgrad + wgrad") {
  const auto routing = dockyard::testing::TinyEp4Routing();
  const dockyard::ClusterSpec c = dockyard::ClusterPreset("h100-sxm");
  const dockyard::ComputeModel kernels = dockyard::ComputeModel::kKernels;  // the default compute model
  const auto t0 = dockyard::SimulateStep(dockyard::testing::TinyMtpPlan(0), c, routing, kernels);
  const auto t1 = dockyard::SimulateStep(dockyard::testing::TinyMtpPlan(1), c, routing, kernels);
  // One stage: two MoE layers, lm_head and the embedding's backward.
  const double lm_head = t0.stage_microbatch_us - 2 * t0.moe_layer_us - t0.embedding_bwd_us;
  CHECK(t1.embedding_bwd_us == Approx(t0.embedding_bwd_us));
  const double eh_proj = dockyard::LinearUs(1024, 64, 128, false, 989, c.knobs.compute) + dockyard::LinearUs(1024, 64, 128, true, 989, c.knobs.compute);
  const auto sc = dockyard::ShapedCompute(dockyard::testing::TinyMtpPlan(1).model, 1024, 256, 1, 1024, 1, 989, c.knobs.compute, {});
  CHECK(sc.eh_proj[0] + sc.eh_proj[1] == Approx(eh_proj));
  CHECK(t1.stage_microbatch_us - t0.stage_microbatch_us == Approx(t0.moe_layer_us + lm_head + eh_proj));
}
