// A dropless MoE layer's host synchronization (kernels_model.h MoeSyncIdleUs; knobs.h
// HostKnobs::moe_sync_idle_us): the GPU idle it leaves per forward, where it sits in the phases, and
// what hides or removes it. Hand arithmetic in each case.
#include <string>

#include <doctest/doctest.h>

#include "planner/cost/cluster.h"
#include "planner/cost/cost.h"
#include "planner/cost/ep_overlap.h"
#include "planner/cost/kernels_model.h"
#include "planner/routing/plan_routing.h"
#include "tests/tiny_plan.h"
#include "tests/moe_phase.h"

namespace dockyard {
namespace {

using testing::MoePhaseUs;

// The router phase of `training` on the tiny model (EP 4, megatron), with the preset's idle and
// with none: their difference per direction.
struct RouterDelta {
  double forward = 0, backward = 0, step = 0;
};
RouterDelta IdleDelta(TrainingConfig training) {
  const Plan plan = testing::TinyEp4Plan(training, Convention::kMegatron);
  const ClusterSpec with = ClusterPreset("h100-sxm");
  ClusterSpec without = with;
  without.knobs.host.moe_sync_idle_us = 0;
  const RoutingResult routing = SampleRoutingForPlan(plan, RoutingSpec{}, 2);  // uniform, 2 layers (the deepep dispatcher's counts too)
  const CostBreakdown a = SimulateStep(plan, with, routing), b = SimulateStep(plan, without, routing);
  return {MoePhaseUs(a, "router", "forward") - MoePhaseUs(b, "router", "forward"),
          MoePhaseUs(a, "router", "backward") - MoePhaseUs(b, "router", "backward"), a.step_time_us - b.step_time_us};
}

}  // namespace

TEST_CASE("MoeSyncIdleUs: Megatron's dropless dispatchers always wait on the host, torchtitan's with EP; a full-iteration graph or padding "
          "to capacity removes it") {
  const HostKnobs host;
  // The prior: Megatron-Bridge's Nsight comparison on 16 H100 (Qwen3-30B-A3B, EP 16, HybridEP, no EP
  // overlap): the GPU active 22.821 s of a 24.714 s step, 48 MoE layers x 64 micro-batches:
  // 1.893 s / 3,072 = 616 us.
  CHECK(host.moe_sync_idle_us == doctest::Approx((24.7138 - 22.821) / (48.0 * 64.0) * 1e6).epsilon(0.001));
  TrainingConfig t;  // dropless, the all_to_all dispatcher
  CHECK(MoeSyncIdleUs(t, true, 1, host) == 616.0);   // Megatron: the grouped GEMM's m_splits on the host even without EP
  CHECK(MoeSyncIdleUs(t, false, 1, host) == 0.0);    // torchtitan without EP: offsets on the device
  CHECK(MoeSyncIdleUs(t, false, 4, host) == 616.0);  // torchtitan with EP: the all-to-all's splits .tolist()
  TrainingConfig graph = t;
  graph.run.full_iteration_cuda_graph = true;
  CHECK(MoeSyncIdleUs(graph, true, 4, host) == 0.0);
  // Padding gives static splits under the all_to_all dispatcher and the flex HybridEP backend; the
  // allgather dispatcher syncs whatever the padding (token_dispatcher.py local_map.sum().cpu()).
  TrainingConfig pad = t;
  pad.run.moe_pad_expert_input_to_capacity = true;
  CHECK(MoeSyncIdleUs(pad, true, 4, host) == 0.0);
  pad.dispatcher = Dispatcher::kDeepEp;
  pad.moe_flex_dispatcher_backend = FlexBackend::kHybridEp;
  CHECK(MoeSyncIdleUs(pad, true, 4, host) == 0.0);
  pad.dispatcher = Dispatcher::kAllGather;
  CHECK(MoeSyncIdleUs(pad, true, 4, host) == 616.0);
}

TEST_CASE("the router's forward carries the idle; a recomputed forward carries it again; EP overlap hides the paired micro-batches'") {
  TrainingConfig t;
  t.num_microbatches = 4;
  // One forward per MoE layer and micro-batch: 616 us on the router's forward, none on its backward;
  // the step: 2 MoE layers x 4 micro-batches x 616 = 4,928 us.
  RouterDelta d = IdleDelta(t);
  CHECK(d.forward == doctest::Approx(616.0));
  CHECK(d.backward == doctest::Approx(0.0).epsilon(1e-9));
  CHECK(d.step == doctest::Approx(2 * 4 * 616.0));
  // Full recomputation re-runs the forward, its synchronization included.
  TrainingConfig full = t;
  full.recompute = Recompute::kFull;
  d = IdleDelta(full);
  CHECK(d.forward == doctest::Approx(616.0));
  CHECK(d.backward == doctest::Approx(616.0));
  // Megatron's selective "moe" likewise re-runs the whole MoE block.
  TrainingConfig moe = t;
  moe.recompute = Recompute::kSelective;
  moe.recompute_modules = {"moe"};
  CHECK(IdleDelta(moe).backward == doctest::Approx(616.0));
  // EP overlap at pp 1: the combined 1F1B pairs 3 of the 4 micro-batches' forwards (the first runs
  // alone; ep_overlap.h PairedChunkShare), whose idle the other micro-batch's queued work covers:
  // (1 - 3/4) x 616 = 154 us exposed per forward.
  CHECK(PairedChunkShare(4, 1, 1) == doctest::Approx(0.75));
  TrainingConfig overlap = t;
  overlap.run.overlap_moe_ep_comm = true;
  d = IdleDelta(overlap);
  CHECK(d.forward == doctest::Approx(154.0));
  CHECK(d.step == doctest::Approx(2 * 4 * 154.0));
  // A whole-iteration CUDA graph: no host in the step.
  TrainingConfig graph = t;
  graph.run.cuda_graphs = graph.run.full_iteration_cuda_graph = true;
  graph.run.check_for_nan_in_grad = false;                      // Megatron-LM asserts it off with full_iteration
  graph.dispatcher = Dispatcher::kDeepEp;                       // a dispatcher a whole-iteration graph captures:
  graph.moe_flex_dispatcher_backend = FlexBackend::kHybridEp;  // HybridEP (ValidateGraphsAndPadding)
  CHECK(IdleDelta(graph).step == doctest::Approx(0.0).epsilon(1e-9));
}

TEST_CASE("CostBreakdown::moe_sync_idle_us is the idle inside the router rows, and the text says so without EP overlap") {
  TrainingConfig t;
  t.num_microbatches = 4;
  const Plan plan = testing::TinyEp4Plan(t, Convention::kMegatron);
  const ClusterSpec c = ClusterPreset("h100-sxm");
  const RoutingResult routing = SampleRoutingForPlan(plan, RoutingSpec{}, 2);
  const CostBreakdown cost = SimulateStep(plan, c, routing);
  // One forward, no recompute: 616 us (the router rows' difference above), forward + backward.
  CHECK(cost.moe_sync_idle_us == doctest::Approx(616.0));
  CHECK(CostToJson(cost).at("moe_sync_idle_us").get<double>() == doctest::Approx(616.0));
  CHECK(CostToText(cost).find("router rows: 616.0 us of them per MoE layer and micro-batch is GPU idle while the dispatcher waits on "
                              "the host") != std::string::npos);
  // Full recomputation waits again in the recomputed forward: 2 x 616.
  TrainingConfig full = t;
  full.recompute = Recompute::kFull;
  const Plan full_plan = testing::TinyEp4Plan(full, Convention::kMegatron);
  CHECK(SimulateStep(full_plan, c, SampleRoutingForPlan(full_plan, RoutingSpec{}, 2)).moe_sync_idle_us == doctest::Approx(1232.0));
  // No host synchronization: no line.
  ClusterSpec none = c;
  none.knobs.host.moe_sync_idle_us = 0;
  const CostBreakdown quiet = SimulateStep(plan, none, routing);
  CHECK(quiet.moe_sync_idle_us == 0.0);
  CHECK(CostToText(quiet).find("router rows:") == std::string::npos);
}

TEST_CASE("CostBreakdown::ep_overlap says what the overlap did: the all-to-alls alone and added, the idle alone and left, the net") {
  TrainingConfig t;
  t.num_microbatches = 4;
  const Plan plain_plan = testing::TinyEp4Plan(t, Convention::kMegatron);
  TrainingConfig o = t;
  o.run.overlap_moe_ep_comm = true;
  const Plan overlap_plan = testing::TinyEp4Plan(o, Convention::kMegatron);
  const ClusterSpec c = ClusterPreset("h100-sxm");
  const RoutingResult routing = SampleRoutingForPlan(plain_plan, RoutingSpec{}, 2);
  const CostBreakdown plain = SimulateStep(plain_plan, c, routing), overlap = SimulateStep(overlap_plan, c, routing);
  CHECK_FALSE(plain.ep_overlap.on);
  CHECK(plain.ep_overlap.a2a_alone_us == 0.0);
  const EpOverlapDetail& e = overlap.ep_overlap;
  REQUIRE(e.on);
  CHECK(e.paired_share == doctest::Approx(0.75));  // 3 of 4 forwards paired at pp 1 (PairedChunkShare)
  // Alone: the dispatch and combine rows of the run without the overlap, both passes.
  auto a2a = [](const CostBreakdown& b) {
    return MoePhaseUs(b, "dispatch", "forward") + MoePhaseUs(b, "dispatch", "backward") + MoePhaseUs(b, "combine", "forward") +
           MoePhaseUs(b, "combine", "backward");
  };
  CHECK(e.a2a_alone_us == doctest::Approx(a2a(plain)));
  // Added with the overlap: what the rows show, less than alone here.
  CHECK(e.a2a_added_us == doctest::Approx(a2a(overlap)));
  CHECK(e.a2a_added_us < e.a2a_alone_us);
  // Saved: alone (a2a + 616) less with it (added + 154).
  CHECK(e.SavedUs() == doctest::Approx(e.a2a_alone_us + 616.0 - e.a2a_added_us - 154.0));
  // The idle: 616 us per forward alone; (1 - 0.75) x 616 = 154 us exposed.
  CHECK(e.sync_idle_alone_us == doctest::Approx(616.0));
  CHECK(e.sync_idle_exposed_us == doctest::Approx(154.0));
  const std::string text = CostToText(overlap);
  CHECK(text.find("EP overlap (combined 1F1B; 75 % of the forwards run beside another micro-batch's backward, the rest alone)") !=
        std::string::npos);
  CHECK(text.find("the dispatcher's host synchronization 616.0 us alone, 154.0 us left (in router forward); net ") != std::string::npos);
  CHECK(text.find(" us saved") != std::string::npos);
  CHECK(CostToJson(overlap).at("ep_overlap").at("sync_idle_exposed_us").get<double>() == doctest::Approx(154.0));
  CHECK_FALSE(CostToJson(plain).contains("ep_overlap"));
  // The JSON gives the detail back (the HTML report's sentence): the same line as the text's.
  const EpOverlapDetail back = EpOverlapFromJson(CostToJson(overlap).at("ep_overlap"));
  CHECK(back.a2a_added_us == doctest::Approx(e.a2a_added_us));
  CHECK(back.SavedUs() == doctest::Approx(e.SavedUs()));
  CHECK(text.find(EpOverlapText(back)) != std::string::npos);
}

TEST_CASE("the EP overlap line: net saved, or LOST where the slowed compute costs more than the overlap hides") {
  CostBreakdown b;
  b.ep_overlap = {true, 0.75, 100.0, 300.0, 616.0, 154.0};
  // (100 + 616) - (300 + 154) = 262 us saved.
  CHECK(b.ep_overlap.SavedUs() == doctest::Approx(262.0));
  CHECK(CostToText(b).find("net 262.0 us saved") != std::string::npos);
  b.ep_overlap.a2a_added_us = 900.0;  // (100 + 616) - (900 + 154) = -338
  CHECK(CostToText(b).find("net 338.0 us LOST: the overlap costs this layer more than it hides") != std::string::npos);
  CHECK(CostToJson(b).at("ep_overlap").at("saved_us").get<double>() == doctest::Approx(-338.0));
  // Nothing paired (one micro-batch per pipeline rank): said.
  b.ep_overlap = {true, 0.0, 100.0, 100.0, 616.0, 616.0};
  CHECK(CostToText(b).find("0 % of the forwards run beside another micro-batch's backward, the rest alone: one micro-batch per pipeline "
                           "rank leaves nothing to pair") != std::string::npos);
}

TEST_CASE("the EP overlap line says what the delayed weight gradients save, or that they save nothing and why") {
  CostBreakdown b;
  b.ep_overlap = {true, 0.75, 100.0, 300.0, 616.0, 154.0};
  // Not delayed: no clause, no key.
  CHECK(CostToText(b).find("delayed weight gradients") == std::string::npos);
  CHECK_FALSE(CostToJson(b).at("ep_overlap").contains("delay_wgrad_saved_us"));
  // Delayed, saving 200 us x the paired share 0.75 = 150 us (ep_overlap_test: a 300 us backward
  // dispatch behind a 400 us MLP backward, 900 -> 700 us per pair).
  b.ep_overlap.delay_wgrad = true;
  b.ep_overlap.delay_wgrad_saved_us = 0.75 * (900.0 - 700.0);
  CHECK(CostToText(b).find("; the delayed weight gradients 150.0 us of it") != std::string::npos);
  CHECK(CostToJson(b).at("ep_overlap").at("delay_wgrad_saved_us").get<double>() == doctest::Approx(150.0));
  CHECK(EpOverlapFromJson(CostToJson(b).at("ep_overlap")).delay_wgrad_saved_us == doctest::Approx(150.0));
  // Delayed, saving nothing: said, with why.
  b.ep_overlap.delay_wgrad_saved_us = 0;
  CHECK(CostToText(b).find("the delayed weight gradients save nothing here: the backward dispatch's wait for the weight gradient is "
                           "on no pair's critical path") != std::string::npos);
}

TEST_CASE("simulate's delayed weight gradients: the saving is the paired share of the pairing without them less with them") {
  // Tiny EP 4 plan under Megatron with EP overlap: the figure is what PairedLayerUs gives with and
  // without the delay (both >= 0), and the step time moves by no more than it per layer.
  Plan plan = testing::TinyEp4Plan({}, Convention::kMegatron);
  plan.training.run.overlap_moe_ep_comm = true;
  const ClusterSpec c = ClusterPreset("h100-sxm");
  const RoutingResult routing = testing::TinyEp4Routing();
  const CostBreakdown plain = SimulateStep(plan, c, routing, ComputeModel::kKernels);
  CHECK_FALSE(plain.ep_overlap.delay_wgrad);
  plan.training.run.delay_wgrad_compute = true;
  const CostBreakdown delayed = SimulateStep(plan, c, routing, ComputeModel::kKernels);
  CHECK(delayed.ep_overlap.delay_wgrad);
  CHECK(delayed.ep_overlap.delay_wgrad_saved_us >= 0);
  // The layer's added all-to-all time falls by what the delay saves.
  CHECK(plain.ep_overlap.a2a_added_us - delayed.ep_overlap.a2a_added_us ==
        doctest::Approx(delayed.ep_overlap.delay_wgrad_saved_us).epsilon(1e-6));
}

TEST_CASE("the gemm compute model has no host gaps: no idle") {
  const Plan plan = testing::TinyEp4Plan({}, Convention::kMegatron);
  const ClusterSpec with = ClusterPreset("h100-sxm");
  ClusterSpec without = with;
  without.knobs.host.moe_sync_idle_us = 0;
  const RoutingResult routing = testing::TinyEp4Routing();
  CHECK(SimulateStep(plan, with, routing, ComputeModel::kGemm).step_time_us ==
        SimulateStep(plan, without, routing, ComputeModel::kGemm).step_time_us);
}

}  // namespace dockyard
