// DualPipe (pipeline_schedule.h; github deepseek-ai/DualPipe README and dualpipe/dualpipe.py):
// its validity rules, bubble, doubled parameters, activations of pp + 1 micro-batches and its EP
// overlap, by hand.
#include <doctest/doctest.h>

#include "planner/accounting/memory.h"
#include "planner/base/error.h"
#include "planner/model/pipeline_schedule.h"
#include "planner/cost/cost.h"
#include "planner/cost/ep_overlap.h"
#include "planner/routing/plan_routing.h"
#include "tests/test_models.h"
#include "tests/tiny_plan.h"

using dockyard::BuildPlan;
using dockyard::DpSharding;
using dockyard::RunSettings;
using dockyard::TrainingConfig;
using doctest::Approx;

using dockyard::testing::PipelineDims;
using dockyard::testing::TinyMixtralLayers;
using dockyard::testing::Zero1Training;

TEST_CASE("DualPipe's validity rules (dualpipe.py DualPipe.step)") {
  RunSettings s;
  s.schedule = "dualpipe";
  CHECK_NOTHROW(dockyard::ValidateSchedule(s, 8, 16));
  CHECK_THROWS_WITH_AS(dockyard::ValidateSchedule(s, 3, 6), doctest::Contains("needs an even pp >= 2"), dockyard::Error);
  CHECK_THROWS_WITH_AS(dockyard::ValidateSchedule(s, 1, 2), doctest::Contains("got pp 1"), dockyard::Error);
  CHECK_THROWS_WITH_AS(dockyard::ValidateSchedule(s, 8, 15), doctest::Contains(">= 2 x pp = 16"), dockyard::Error);
  CHECK_THROWS_WITH_AS(dockyard::ValidateSchedule(s, 8, 17), doctest::Contains("got --num-microbatches 17"), dockyard::Error);
  s.vpp = 2;
  CHECK_THROWS_WITH_AS(dockyard::ValidateSchedule(s, 8, 16), doctest::Contains("--vpp must be 1, got 2"), dockyard::Error);
  s.vpp = 1;
  s.schedule = "zb1p";
  CHECK_THROWS_WITH_AS(dockyard::ValidateSchedule(s, 8, 16), doctest::Contains("must be \"1f1b\" or \"dualpipe\", got \"zb1p\""),
                       dockyard::Error);
  // Through a plan: pp 2 needs at least 4 micro-batches.
  TrainingConfig t = Zero1Training(2);
  t.run.schedule = "dualpipe";
  CHECK_THROWS_WITH_AS(BuildPlan(TinyMixtralLayers(4), PipelineDims(2, 2, 1), t), doctest::Contains("--pipeline-schedule dualpipe"),
                       dockyard::Error);
}

TEST_CASE("DualPipe's bubble (pp / 2 - 1)(F&B + B - 3W) and activations of pp + 1 micro-batches (README table)") {
  // pp 8, F&B 10 us, B 6 us, W 3 us: (4 - 1)(10 + 6 - 9) = 21 us; pp 2 has none.
  CHECK(dockyard::DualPipeBubbleUs(8, 10, 6, 3) == Approx(21.0));
  CHECK(dockyard::DualPipeBubbleUs(2, 10, 6, 3) == Approx(0.0));
  CHECK_THROWS_AS(dockyard::DualPipeBubbleUs(3, 10, 6, 3), dockyard::Error);
  RunSettings s;
  s.schedule = "dualpipe";
  CHECK(dockyard::ScheduleInFlightMicrobatches(s, 8, 16, 0) == 9);
  CHECK(dockyard::ScheduleInFlightMicrobatches(s, 8, 16, 7) == 9);
  s.schedule = "1f1b";
  CHECK(dockyard::ScheduleInFlightMicrobatches(s, 8, 16, 7) == 1);  // 1F1B: min(pp - stage, M)
  CHECK(dockyard::DualPipeMirrorStage(8, 1) == 6);
}

TEST_CASE("SimulateStep and ComputeMemory under DualPipe: mirrored stages, 2x parameters, no bubble at pp 2") {
  // 4 MoE layers over pp 2 (2 + 2), ep 1 (no all-to-all to overlap), M 4. Stage times: T0 = 2 L +
  // P, T1 = 2 L + lm_head + P (P = 2 sends of 256 x 64 x 2 B = 32768 B in the node: 3 + 32768 /
  // 370e3 us each). 1F1B's slowest stage is T1; DualPipe runs T0 and T1 on both ranks, half the
  // micro-batches each: (T0 + T1) / 2 per micro-batch, and (2 / 2 - 1) = 0 bubble: step 4 x that.
  TrainingConfig t = Zero1Training(4);
  const auto plain_plan = BuildPlan(TinyMixtralLayers(4), PipelineDims(2, 2, 1), t);
  t.run.schedule = "dualpipe";
  const auto dual_plan = BuildPlan(TinyMixtralLayers(4), PipelineDims(2, 2, 1), t);
  const dockyard::ClusterSpec c = dockyard::ClusterPreset("h100-sxm");
  const auto plain = dockyard::SimulateStep(plain_plan, c, dockyard::SampleRoutingForPlan(plain_plan, {}, 4));
  const auto dual = dockyard::SimulateStep(dual_plan, c, dockyard::SampleRoutingForPlan(dual_plan, {}, 4));
  const double L = plain.moe_layer_us, P = 2 * (3.0 + 32768.0 / 370e3);
  CHECK(dual.moe_layer_us == Approx(L));
  // Stage 0 also runs the embedding's backward (E, kernels_model.h EmbeddingBackwardKernels).
  const double E = plain.embedding_bwd_us;
  CHECK(E > 0);
  CHECK(dual.stage_microbatch_us == Approx((2 * L + P + E + plain.stage_microbatch_us) / 2));
  CHECK(dual.pipeline_bubble_us == Approx(0.0));
  CHECK(dual.step_time_us - dual.dp_step_comm_us - dual.optimizer_us - dual.host_overhead_us == Approx(4 * dual.stage_microbatch_us));
  CHECK(plain.step_time_us - plain.dp_step_comm_us - plain.optimizer_us - plain.host_overhead_us == Approx(5 * plain.stage_microbatch_us));

  // Memory: rank 0 keeps stage 0 and stage 1's parameters, gradients and optimizer state.
  const auto s0 = dockyard::StaticMemoryOnRank(plain_plan, 0), s1 = dockyard::StaticMemoryOnRank(plain_plan, 1);
  const auto d0 = dockyard::StaticMemoryOnRank(dual_plan, 0);
  CHECK(d0.params_bytes == s0.params_bytes + s1.params_bytes);
  CHECK(d0.grads_bytes == s0.grads_bytes + s1.grads_bytes);
  CHECK(d0.optimizer_bytes == s0.optimizer_bytes + s1.optimizer_bytes);
  // Activations: pp + 1 = 3 micro-batches in flight on stage 0 (1F1B: 2), all kinds scale.
  const auto mp = dockyard::ComputeMemory(plain_plan), md = dockyard::ComputeMemory(dual_plan);
  CHECK(md.stages[0].in_flight_microbatches == 3);
  CHECK(mp.stages[0].in_flight_microbatches == 2);
  CHECK(2 * md.stages[0].worst.activations_bytes == 3 * mp.stages[0].worst.activations_bytes);
}

TEST_CASE("DualPipe overlaps the EP all-to-alls as Megatron's EP overlap does; pp 4 has a bubble") {
  // ep 2: DualPipe's overlapped forward-backward pairs run on two streams as
  // --overlap-moe-expert-parallel-comm's do (planner/cost/ep_overlap.h PairedLayerUs), each with
  // its own chunk (DualPipe 2 MoE layers per stage, the interleaved run 1 per chunk) and warm-up
  // (pp 2: 1.5 of 4 forwards alone on average without chunks, 4 of 8 with vpp 2): both shorter than without.
  TrainingConfig t = Zero1Training(4);
  t.run.vpp = 2;
  t.run.overlap_moe_ep_comm = true;
  const auto ov_plan = BuildPlan(TinyMixtralLayers(4), PipelineDims(4, 2, 2), t);
  t.run.vpp = 1;
  t.run.overlap_moe_ep_comm = false;
  const auto plain_plan = BuildPlan(TinyMixtralLayers(4), PipelineDims(4, 2, 2), t);
  t.run.schedule = "dualpipe";
  const auto dual_plan = BuildPlan(TinyMixtralLayers(4), PipelineDims(4, 2, 2), t);
  const dockyard::ClusterSpec c = dockyard::ClusterPreset("h100-sxm");
  const auto routing = dockyard::SampleRoutingForPlan(plain_plan, {}, 4);
  const auto ov = dockyard::SimulateStep(ov_plan, c, routing);
  const auto plain = dockyard::SimulateStep(plain_plan, c, routing);
  const auto dual = dockyard::SimulateStep(dual_plan, c, routing);
  CHECK(dockyard::PairedChunkShare(4, 2, 1) == Approx(0.625));
  CHECK(dockyard::PairedChunkShare(4, 2, 2) == Approx(0.5));
  CHECK(dual.moe_layer_us < plain.moe_layer_us);
  CHECK(ov.moe_layer_us < plain.moe_layer_us);

  // pp 4, M 8: bubble (4 / 2 - 1)(F&B + B - 3 B / 2) = F&B - B / 2, between F&B / 2 and F&B.
  TrainingConfig u = Zero1Training(8);
  u.run.schedule = "dualpipe";
  const auto p4 = BuildPlan(TinyMixtralLayers(4), PipelineDims(4, 4, 1), u);
  const auto s4 = dockyard::SimulateStep(p4, c, dockyard::SampleRoutingForPlan(p4, {}, 4));
  CHECK(s4.pipeline_bubble_us > s4.stage_microbatch_us / 2);
  CHECK(s4.pipeline_bubble_us < s4.stage_microbatch_us);
  CHECK(s4.step_time_us - s4.dp_step_comm_us - s4.optimizer_us - s4.host_overhead_us == Approx(8 * s4.stage_microbatch_us + s4.pipeline_bubble_us));
}
