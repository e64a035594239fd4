// FP8 dispatch in the step time: only the forward dispatch sends FP8 rows; the backward passes
// move BF16 gradients and the combine stays BF16 (Megatron megatron/core/transformer/moe/
// fused_a2a.py: FusedDispatch.backward is buffer.combine of the gradient, FusedCombine.backward
// buffer.dispatch of the gradient, both in the gradient's BF16).
#include <string>

#include <doctest/doctest.h>

#include "planner/cost/cost.h"
#include "planner/routing/plan_routing.h"
#include "tests/test_models.h"
#include "tests/moe_phase.h"

namespace dockyard {
namespace {

// The tiny model (hidden 64, 8 experts, top-2) on 8 ranks, EP 8, 1024-token sequences.
Plan Ep8Plan(const std::string& dispatcher, bool fp8, Recompute recompute = Recompute::kNone) {
  ParallelDimsOptions d;
  d.world_size = 8;
  d.ep = 8;
  TrainingConfig t;
  t.seq_len = 1024;
  dockyard::Machine machine;
  machine.gpus_per_node = 4;
  t.dispatcher = ParseDispatcher(dispatcher, "dispatcher");
  // deepep over two 4-GPU nodes runs the hybridep backend (DeepEP's kernels need nodes of 8 NVLink
  // peers: planner/model/flex_backend_limits.h); its time model is deepep's.
  if (t.dispatcher == Dispatcher::kDeepEp) t.moe_flex_dispatcher_backend = FlexBackend::kHybridEp;
  t.fp8_dispatch = fp8;
  t.recompute = recompute;
  return BuildPlan(testing::TinyMixtral(), d, t, machine);
}

// h100-sxm with 4 GPUs per node: the EP group spans 2 nodes (8 us network latency).
ClusterSpec TwoNodes() {
  ClusterSpec c = ClusterPreset("h100-sxm");
  c.gpus_per_node = 4;
  c.nvlink_domain_gpus = 0;
  return c;
}

using testing::MoePhaseUs;

CostBreakdown Simulate(const Plan& plan) {
  return SimulateStep(plan, TwoNodes(), SampleRoutingForPlan(plan, RoutingSpec{}, 2));
}

}  // namespace

TEST_CASE("deepep FP8 dispatch: forward rows 64 + 4 B, backward dispatch and combine in BF16 (128 B)") {
  const CostBreakdown bf16 = Simulate(Ep8Plan("deepep", false)), fp8 = Simulate(Ep8Plan("deepep", true));
  // deepep time = 8 us latency + the busiest link direction, linear in the row bytes
  // (DispatchRowBytes(64, 2, fp8) = 64 + 4 x ceil(64 / 128) = 68 B vs 64 x 2 = 128 B).
  CHECK(MoePhaseUs(fp8, "dispatch", "forward") - 8.0 == doctest::Approx((MoePhaseUs(bf16, "dispatch", "forward") - 8.0) * 68.0 / 128.0));
  CHECK(MoePhaseUs(fp8, "dispatch", "backward") == doctest::Approx(MoePhaseUs(bf16, "dispatch", "backward")));
  CHECK(MoePhaseUs(fp8, "dispatch", "backward") == doctest::Approx(MoePhaseUs(bf16, "dispatch", "forward")));
  for (const char* dir : {"forward", "backward"}) CHECK(MoePhaseUs(fp8, "combine", dir) == doctest::Approx(MoePhaseUs(bf16, "combine", dir)));
}

TEST_CASE("all_to_all FP8 dispatch: 1 + 4/128 B per element forward only") {
  const CostBreakdown bf16 = Simulate(Ep8Plan("all_to_all", false)), fp8 = Simulate(Ep8Plan("all_to_all", true));
  CHECK(MoePhaseUs(fp8, "dispatch", "forward") < MoePhaseUs(bf16, "dispatch", "forward"));
  CHECK(MoePhaseUs(fp8, "dispatch", "backward") == doctest::Approx(MoePhaseUs(bf16, "dispatch", "backward")));
  for (const char* dir : {"forward", "backward"}) CHECK(MoePhaseUs(fp8, "combine", dir) == doctest::Approx(MoePhaseUs(bf16, "combine", dir)));
}

TEST_CASE("full recomputation re-runs the FP8 forward dispatch in the backward, then the BF16 backward dispatch") {
  const CostBreakdown bf16 = Simulate(Ep8Plan("deepep", false)), fp8 = Simulate(Ep8Plan("deepep", true, Recompute::kFull));
  CHECK(MoePhaseUs(fp8, "dispatch", "backward") ==
        doctest::Approx(MoePhaseUs(fp8, "dispatch", "forward") + MoePhaseUs(bf16, "dispatch", "backward")));
}

}  // namespace dockyard
