// Schedule rules of the run settings (pipeline_schedule.h) and their effect on the FSDP traffic,
// time and memory of a plan, by hand.
#include "planner/model/pipeline_schedule.h"

#include <algorithm>
#include <vector>

#include <doctest/doctest.h>

#include "planner/accounting/comm.h"
#include "planner/cost/cost.h"
#include "planner/cost/ep_overlap.h"
#include "planner/base/error.h"
#include "planner/accounting/memory.h"
#include "planner/routing/plan_routing.h"
#include "tests/test_models.h"
#include "tests/tiny_plan.h"

using dockyard::BuildPlan;
using dockyard::Dispatcher;
using dockyard::DpSharding;
using dockyard::FsdpCalls;
using dockyard::FsdpCallsPerStep;
using dockyard::Recompute;
using dockyard::ReshardPolicy;
using dockyard::TrainingConfig;
using doctest::Approx;

TEST_CASE("torchtitan's reshard-after-forward policy: default = not pp") {
  CHECK(dockyard::ReshardAfterForward(ReshardPolicy::kDefault, 1));
  CHECK_FALSE(dockyard::ReshardAfterForward(ReshardPolicy::kDefault, 2));
  CHECK(dockyard::ReshardAfterForward(ReshardPolicy::kAlways, 8));
  CHECK_FALSE(dockyard::ReshardAfterForward(ReshardPolicy::kNever, 1));
  CHECK(dockyard::ParseReshardPolicy("never", "--x") == ReshardPolicy::kNever);
  CHECK_THROWS_WITH_AS(dockyard::ParseReshardPolicy("sometimes", "--fsdp-reshard-after-forward"),
                       doctest::Contains("--fsdp-reshard-after-forward: unknown reshard-after-forward policy \"sometimes\""),
                       dockyard::Error);
}

TEST_CASE("FSDP all-gathers and reduce-scatters per step under each policy, with and without PP") {
  auto calls = [](ReshardPolicy p, int64_t pp, int64_t M) {
    const FsdpCalls c = FsdpCallsPerStep(p, pp, M);
    return std::vector<int64_t>{c.forward_all_gathers, c.backward_all_gathers, c.reduce_scatters};
  };
  // pp 1, M 4 (accumulation): always (the default) gathers in forward and again in backward and
  // reduce-scatters every micro-batch; never gathers once per micro-batch.
  CHECK(calls(ReshardPolicy::kDefault, 1, 4) == std::vector<int64_t>{4, 4, 4});
  CHECK(calls(ReshardPolicy::kAlways, 1, 4) == std::vector<int64_t>{4, 4, 4});
  CHECK(calls(ReshardPolicy::kNever, 1, 4) == std::vector<int64_t>{4, 0, 4});
  // pp 4, M 8: never (the default) gathers once and reduce-scatters once per step.
  CHECK(calls(ReshardPolicy::kDefault, 4, 8) == std::vector<int64_t>{1, 0, 1});
  CHECK(calls(ReshardPolicy::kNever, 4, 8) == std::vector<int64_t>{1, 0, 1});
  // always: W = min(3, 8) = 3 warm-up forwards + the first steady one gather (4), the 8 - 3 = 5
  // steady backwards re-gather after their forward's reshard: 9 = M + 1; one reduce-scatter.
  CHECK(calls(ReshardPolicy::kAlways, 4, 8) == std::vector<int64_t>{4, 5, 1});
  // M 2 <= W 3: both forwards gather, the first backward too: 3 = M + 1.
  CHECK(calls(ReshardPolicy::kAlways, 4, 2) == std::vector<int64_t>{2, 1, 1});
  CHECK_THROWS_AS(FsdpCallsPerStep(ReshardPolicy::kDefault, 0, 1), dockyard::Error);
}

TEST_CASE("A layer's mean time when only some micro-batches carry the FSDP traffic") {
  // compute 100 us, all-gather 150 us in 1 of 4 micro-batches: (150 + 3 x 100) / 4 = 112.5 us.
  CHECK(dockyard::FsdpLayerMeanUs(100, 150, 0, 1, 0, 4, 0) == Approx(112.5));
  // Backward with the all-gather (60) and the reduce-scatter (70) in the same micro-batch:
  // max(100, 130) = 130 once, 100 three times: 107.5 us.
  CHECK(dockyard::FsdpLayerMeanUs(100, 60, 70, 1, 1, 4, 0) == Approx(107.5));
  // Every micro-batch (pp 1, always): max(100, 60 + 70) = 130.
  CHECK(dockyard::FsdpLayerMeanUs(100, 60, 70, 4, 4, 4, 0) == Approx(130.0));
  // The EP all-to-all shares the NICs (50 us): max(100, 60 + 50) = 110 in the one micro-batch.
  CHECK(dockyard::FsdpLayerMeanUs(100, 60, 0, 1, 0, 4, 50) == Approx((110.0 + 300.0) / 4));
}

TEST_CASE("Run settings follow Megatron's and torchtitan's validity rules") {
  dockyard::RunSettings s;
  CHECK_NOTHROW(dockyard::ValidateRunSettings(s, 0, 4));
  s.overlap_param_gather = true;
  CHECK_THROWS_WITH_AS(dockyard::ValidateRunSettings(s, 1, 1), doctest::Contains("--overlap-grad-reduce should be turned on"),
                       dockyard::Error);
  s.overlap_grad_reduce = true;
  CHECK_NOTHROW(dockyard::ValidateRunSettings(s, 1, 1));
  CHECK_THROWS_WITH_AS(dockyard::ValidateRunSettings(s, 2, 1), doctest::Contains("distributed optimizer"), dockyard::Error);
  // --overlap-param-gather-with-optimizer-step: interleaved only, and with --overlap-param-gather
  // (megatron/training/arguments.py's assertions).
  s.overlap_param_gather_with_optimizer_step = true;
  CHECK_THROWS_WITH_AS(dockyard::ValidateRunSettings(s, 1, 4), doctest::Contains("only supported with interleaved pipeline parallelism"),
                       dockyard::Error);
  s.vpp = 2;
  CHECK_NOTHROW(dockyard::ValidateRunSettings(s, 1, 4));
  s.overlap_param_gather = false;
  CHECK_THROWS_WITH_AS(dockyard::ValidateRunSettings(s, 1, 4), doctest::Contains("Must use --overlap-param-gather-with-optimizer-step with"),
                       dockyard::Error);
  dockyard::RunSettings b;
  b.ddp_bucket_size = -1;
  CHECK_THROWS_WITH_AS(dockyard::ValidateRunSettings(b, 1, 1), doctest::Contains("--ddp-bucket-size"), dockyard::Error);
  // DDP's buckets and gather dispatch mean nothing under FSDP.
  b.ddp_bucket_size = 50000000;
  CHECK_NOTHROW(dockyard::ValidateRunSettings(b, 1, 1));
  CHECK_THROWS_WITH_AS(dockyard::ValidateRunSettings(b, 0, 1), doctest::Contains("--ddp-bucket-size: Megatron-Core DDP's buckets"),
                       dockyard::Error);
  b.ddp_bucket_size = 0;
  b.align_param_gather = false;
  CHECK_THROWS_WITH_AS(dockyard::ValidateRunSettings(b, 0, 1), doctest::Contains("--no-align-param-gather: Megatron-Core DDP's buckets"),
                       dockyard::Error);
  dockyard::RunSettings r;
  r.reshard_after_forward = ReshardPolicy::kNever;
  CHECK_THROWS_WITH_AS(dockyard::ValidateRunSettings(r, 1, 1), doctest::Contains("needs --dp-sharding fsdp"), dockyard::Error);
  dockyard::RunSettings a;
  a.grad_accumulation_steps = 0;
  CHECK_THROWS_AS(dockyard::ValidateRunSettings(a, 0, 1), dockyard::Error);
}

namespace {
dockyard::ParallelDimsOptions Dims(int64_t world, int64_t pp) {
  dockyard::ParallelDimsOptions o;
  o.world_size = world;
  o.pp = pp;
  return o;
}
int64_t Calls(const dockyard::CommReport& r, const std::string& purpose) {
  int64_t n = 0;
  for (const auto& e : r.entries) n += e.purpose == purpose ? e.calls : 0;
  return n;
}
}  // namespace

TEST_CASE("ComputeComm: FSDP calls per step with PP follow the policy and the accumulation steps") {
  TrainingConfig t;
  t.dp_sharding = DpSharding::kFsdp;
  t.seq_len = 16;
  t.num_microbatches = 4;
  // TinyMixtral on 4 GPUs, pp 2 (dp_shard 2): stage 0 holds the embedding and layer 0 (2 units).
  auto plan = BuildPlan(dockyard::testing::TinyMixtral(), Dims(4, 2), t);
  auto r = dockyard::ComputeComm(plan, 0);
  // Default under pp: 1 forward all-gather and 1 reduce-scatter per unit: 2 each.
  CHECK(Calls(r, "fsdp_all_gather_forward") == 2);
  CHECK(Calls(r, "fsdp_all_gather_backward") == 0);
  CHECK(Calls(r, "fsdp_reduce_scatter_grads") == 2);
  // always, M 4 on 2 stages: W = 1: forward min(4, 2) = 2, backward max(1, 3) = 3 per unit.
  t.run.reshard_after_forward = ReshardPolicy::kAlways;
  r = dockyard::ComputeComm(BuildPlan(dockyard::testing::TinyMixtral(), Dims(4, 2), t), 0);
  CHECK(Calls(r, "fsdp_all_gather_forward") == 4);
  CHECK(Calls(r, "fsdp_all_gather_backward") == 6);
  CHECK(Calls(r, "fsdp_reduce_scatter_grads") == 2);
  // torchtitan's outer accumulation loop, 3 steps of the default: 3 x (1 + 1) per unit.
  t.run.reshard_after_forward = ReshardPolicy::kDefault;
  t.run.grad_accumulation_steps = 3;
  r = dockyard::ComputeComm(BuildPlan(dockyard::testing::TinyMixtral(), Dims(4, 2), t), 0);
  CHECK(Calls(r, "fsdp_all_gather_forward") == 6);
  CHECK(Calls(r, "fsdp_reduce_scatter_grads") == 6);
  // and every per-micro-batch entry runs 3 x 4 = 12 times (the activations sent to stage 1).
  CHECK(Calls(r, "pp_send_activations") == 12);
}

TEST_CASE("ComputeComm: interleaved 1F1B's sends wrap around the pp ring (the last stage feeds stage 0's next chunk)") {
  TrainingConfig t;
  t.dp_sharding = DpSharding::kZero1;
  t.seq_len = 256;
  t.num_microbatches = 4;
  auto calls = [&](int64_t vpp, int64_t rank, const std::string& purpose) {
    t.run.vpp = vpp;
    return Calls(dockyard::ComputeComm(BuildPlan(dockyard::testing::TinyMixtral(), Dims(4, 2), t), rank), purpose);
  };
  // pp 2 on 4 GPUs: ranks 0-1 stage 0, ranks 2-3 stage 1 (pp outermost). Plain 1F1B, M 4: stage 0
  // sends 4 activations forward and no gradients; stage 1 the reverse.
  CHECK(calls(1, 0, "pp_send_activations") == 4);
  CHECK(calls(1, 0, "pp_send_grads") == 0);
  CHECK(calls(1, 2, "pp_send_activations") == 0);
  CHECK(calls(1, 2, "pp_send_grads") == 4);
  // vpp 2: virtual stages 0, 1, 2, 3 on stages 0, 1, 0, 1. Stage 0 sends 0 -> 1 and 2 -> 3
  // (M x vpp = 8) and the gradient of virtual stage 2 back to 1 (M x (vpp - 1) = 4, to the last
  // stage); stage 1 sends 1 -> 2 (4, to stage 0) and the gradients of 1 and 3 (8).
  CHECK(calls(2, 0, "pp_send_activations") == 8);
  CHECK(calls(2, 0, "pp_send_grads") == 4);
  CHECK(calls(2, 2, "pp_send_activations") == 4);
  CHECK(calls(2, 2, "pp_send_grads") == 8);
}

TEST_CASE("FSDP under PP keeps the stage's units unsharded and accumulates unsharded gradients") {
  TrainingConfig t;
  t.dp_sharding = DpSharding::kFsdp;
  t.seq_len = 16;
  auto mem = [&](int64_t pp) { return dockyard::ComputeMemory(BuildPlan(dockyard::testing::TinyMixtral(), Dims(4, pp), t)); };
  // pp 1 (reshard after forward): no unsharded units kept.
  const auto one = mem(1);
  CHECK(one.stages[0].worst.comm_buffers_by_use.count("fsdp_unsharded_params") == 0);
  // pp 2, stage 0: units embedding 64000 and layer 0 62080 elements (comm_test's figures);
  // the two largest are the all-gather buffers already, so no other unit: 0 bytes of params;
  // unsharded fp32 gradients of the whole stage: (64000 + 62080) x 4 = 504320 bytes.
  const auto two = mem(2);
  const auto& b = two.stages[0].worst.comm_buffers_by_use;
  REQUIRE(b.count("fsdp_unsharded_params") == 1);
  CHECK(b.at("fsdp_unsharded_params") == 0);
  CHECK(b.at("fsdp_unsharded_grads") == (64000 + 62080) * 4);
}

namespace {
double Phase(const dockyard::CostBreakdown& c, const std::string& name, const std::string& direction) {
  for (const auto& p : c.phases) {
    if (PhaseName(p.phase) == std::string(name) && DirectionName(p.direction) == std::string(direction) && p.layer_kind == dockyard::LayerKind::kMoe) return p.time_us;
  }
  return -1;
}
}  // namespace

TEST_CASE("SimulateStep: FSDP traffic per micro-batch under PP, and the accumulation loop") {
  TrainingConfig t;
  t.dp_sharding = DpSharding::kFsdp;
  t.seq_len = 256;
  t.num_microbatches = 4;
  const dockyard::ClusterSpec c = dockyard::ClusterPreset("h100-sxm");
  auto simulate = [&](const TrainingConfig& tc) {
    auto plan = BuildPlan(dockyard::testing::TinyMixtral(), Dims(4, 2), tc);
    return dockyard::SimulateStep(plan, c, dockyard::SampleRoutingForPlan(plan, {}, 2));
  };
  const auto by_default = simulate(t);                   // pp 2: not resharded: 1 forward all-gather of 4 micro-batches
  t.run.reshard_after_forward = ReshardPolicy::kAlways;  // 2 forward all-gathers of 4 (W = 1)
  const auto always = simulate(t);
  const double one_gather = Phase(by_default, "fsdp_comm", "forward") * 4;
  CHECK(one_gather > 0);
  CHECK(Phase(always, "fsdp_comm", "forward") == Approx(one_gather * 2 / 4));
  // backward: default 1 reduce-scatter of 4; always 3 all-gathers + 1 reduce-scatter of 4.
  CHECK(Phase(always, "fsdp_comm", "backward") == Approx(Phase(by_default, "fsdp_comm", "backward") + one_gather * 3 / 4));
  // Two accumulation steps: twice the pipeline (each with its bubble), the same step-end terms.
  t.run.reshard_after_forward = ReshardPolicy::kDefault;
  t.run.grad_accumulation_steps = 2;
  const auto twice = simulate(t);
  const double pipe1 = by_default.step_time_us - by_default.dp_step_comm_us - by_default.optimizer_us - by_default.host_overhead_us;
  const double pipe2 = twice.step_time_us - twice.dp_step_comm_us - twice.optimizer_us - twice.host_overhead_us;
  CHECK(pipe1 == Approx((4 + 2 - 1) * by_default.stage_microbatch_us));
  CHECK(pipe2 == Approx(2 * pipe1));
  CHECK(twice.pipeline_bubble_us == Approx(2 * by_default.pipeline_bubble_us));
}

TEST_CASE("Interleaved 1F1B: the bubble for pp 8, vpp 4 and the micro-batches in flight") {
  // pp 8, M 8: 1F1B idles pp - 1 = 7 slots; vpp 4 divides it: 7 / 4 = 1.75 slots, a bubble
  // fraction (pp - 1) / (vpp M) = 7 / 32 = 0.21875 of the 8 busy slots.
  CHECK(dockyard::PipelineSlots(8, 8, 1) == Approx(15.0));
  CHECK(dockyard::PipelineSlots(8, 8, 4) == Approx(9.75));
  CHECK((dockyard::PipelineSlots(8, 8, 4) - 8) / 8 == Approx(0.21875));
  CHECK_THROWS_AS(dockyard::PipelineSlots(8, 8, 0), dockyard::Error);
  // Fewer micro-batches than stages: one micro-batch cannot fill the pipeline however it is chunked.
  // pp 2, vpp 14, M 1: idle chunks (14 - 1) x (2 - 1) + (2 - 1) = 14, / 14 = 1 slot = pp - 1.
  CHECK(dockyard::PipelineSlots(1, 2, 14) == Approx(2.0));
  CHECK(dockyard::PipelineSlots(1, 2, 14) == Approx(dockyard::PipelineSlots(1, 2, 1)));
  // pp 8, vpp 2, M 4: idle chunks (2 - 1) x (8 - 4) + 7 = 11, / 2 = 5.5; slots 4 + 5.5 = 9.5.
  CHECK(dockyard::PipelineSlots(4, 8, 2) == Approx(9.5));
  // M = pp is the boundary: pp 4, vpp 3, M 4: 3 / 3 = 1 slot of bubble, as (pp - 1) / vpp.
  CHECK(dockyard::PipelineSlots(4, 4, 3) == Approx(5.0));
  // In flight on stage 0, M 16: 1F1B min(8, 16) = 8; interleaved 2 x 7 + 3 x 8 + 1 = 39 chunks of
  // a quarter stage: ceil(39 / 4) = 10 stage-micro-batches. Last stage: 3 x 8 + 1 = 25 -> 7.
  CHECK(dockyard::InFlightStageMicrobatches(8, 1, 16, 0) == 8);
  CHECK(dockyard::InFlightStageMicrobatches(8, 4, 16, 0) == 10);
  CHECK(dockyard::InFlightStageMicrobatches(8, 4, 16, 7) == 7);
  // Few micro-batches: min(M vpp = 8, 39) chunks -> 2.
  CHECK(dockyard::InFlightStageMicrobatches(8, 4, 2, 0) == 2);
  // By chunk (schedules.py get_pp_rank_microbatches): warm-up 2 (8 - 0 - 1) + (4 - 1) x 8 = 38
  // chunk forwards, + 1 = 39 in flight on stage 0; stage 7: 0 + 24 + 1 = 25; M = 2 caps them at
  // M x vpp = 8.
  CHECK(dockyard::InFlightChunks(8, 4, 16, 0) == 39);
  CHECK(dockyard::InFlightChunks(8, 4, 16, 7) == 25);
  CHECK(dockyard::InFlightChunks(8, 4, 2, 0) == 8);
  CHECK(dockyard::InFlightChunks(8, 1, 16, 3) == 5);  // 1F1B: min(pp - stage, M)
  // EP overlap: one layer more once a combined step runs (M x vpp > the chunks in flight): pp 8,
  // vpp 4, M 16: 64 > 39; M 2: 8 = 8, all forwards in the warm-up, no combined step; pp 1: M 16
  // > 1, M 1 not.
  dockyard::RunSettings ov;
  ov.overlap_moe_ep_comm = true;
  ov.vpp = 4;
  CHECK(dockyard::ScheduleExtraLayers(ov, 8, 16, 0) == 1);
  CHECK(dockyard::ScheduleExtraLayers(ov, 8, 2, 0) == 0);
  ov.vpp = 1;
  CHECK(dockyard::ScheduleExtraLayers(ov, 1, 16, 0) == 1);
  CHECK(dockyard::ScheduleExtraLayers(ov, 1, 1, 0) == 0);
  ov.overlap_moe_ep_comm = false;
  CHECK(dockyard::ScheduleExtraLayers(ov, 1, 16, 0) == 0);
  // Chunk 0's share of the 39: forwards 0-7 and 32-38 run chunk 0 (k / pp mod vpp = 0): 15; 25 on
  // the last stage: forwards 0-7 and 32.. none: 8; vpp 1: all.
  CHECK(dockyard::FirstChunkInFlight(8, 4, 39) == 15);
  CHECK(dockyard::FirstChunkInFlight(8, 4, 25) == 8);
  CHECK(dockyard::FirstChunkInFlight(8, 4, 64) == 16);
  CHECK(dockyard::FirstChunkInFlight(8, 1, 5) == 5);
  dockyard::RunSettings s;
  s.vpp = 2;
  CHECK_THROWS_WITH_AS(dockyard::ValidateRunSettings(s, 1, 1), doctest::Contains("needs pp > 1"), dockyard::Error);
  CHECK_NOTHROW(dockyard::ValidateRunSettings(s, 1, 2));
}

TEST_CASE("SimulateStep with --vpp: bubble (pp - 1) / vpp stages, extra P2P per chunk") {
  TrainingConfig t;
  t.dp_sharding = DpSharding::kZero1;
  t.seq_len = 256;
  t.num_microbatches = 4;
  const dockyard::ClusterSpec c = dockyard::ClusterPreset("h100-sxm");
  // Tiny Mixtral with 4 layers: 2 per rank, one per chunk at vpp 2.
  dockyard::ModelSpec m = dockyard::testing::TinyMixtral();
  m.num_hidden_layers = 4;
  m.moe_layers.assign(4, true);
  auto simulate = [&](int64_t vpp) {
    t.run.vpp = vpp;
    auto plan = BuildPlan(m, Dims(4, 2), t);
    return dockyard::SimulateStep(plan, c, dockyard::SampleRoutingForPlan(plan, {}, 2));
  };
  const auto plain = simulate(1), interleaved = simulate(2);
  // One send of ceil(256 / 1) x 64 x 2 B = 32768 B inside the node: 3 + 32768 / 370e3 us, forward
  // and backward at each of the vpp chunk boundaries. Plain 1F1B exposes both whole (Megatron turns
  // the P2P overlap off without interleaving): 2 x send per micro-batch. Interleaved, the steady
  // phase's transfers run beside the next chunk (--overlap-p2p-communication, on by default): each of
  // the 2 x 2 boundaries keeps its 3 us latency; the fill and the flush cross pp - 1 = 1 boundary each
  // way with the whole transfer: 2 x (send - 3) more in the bubble.
  const double send = 3.0 + 32768.0 / 370e3;
  CHECK(interleaved.stage_microbatch_us - plain.stage_microbatch_us == Approx(2 * 2 * 3.0 - 2 * send));
  CHECK(plain.pipeline_bubble_us == Approx(1.0 * plain.stage_microbatch_us));
  const double flush = 2 * (send - 3.0);
  CHECK(interleaved.pipeline_bubble_us == Approx(0.5 * interleaved.stage_microbatch_us + flush));
  // 4 micro-batches + (pp - 1) / vpp slots, and the flush's transfers.
  CHECK(interleaved.step_time_us - interleaved.dp_step_comm_us - interleaved.optimizer_us - interleaved.host_overhead_us ==
        Approx(4.5 * interleaved.stage_microbatch_us + flush));
  // --no-overlap-p2p-communication: every transfer exposed, 2 x 2 sends per micro-batch, as before.
  t.run.overlap_p2p_comm = false;
  const auto exposed = simulate(2);
  CHECK(exposed.stage_microbatch_us - plain.stage_microbatch_us == Approx(2 * send));
  CHECK(exposed.pipeline_bubble_us == Approx(0.5 * exposed.stage_microbatch_us));
  CHECK(exposed.step_time_us > interleaved.step_time_us);
  // vpp 3 over 2 layers per rank: a chunk without layers shortens no hop (ChunkSlotShare 1 / min(3,
  // 2)): the bubble is half a stage, as at vpp 2, not a third.
  const auto empty_chunk = simulate(3);
  CHECK(empty_chunk.pipeline_bubble_us == Approx(0.5 * empty_chunk.stage_microbatch_us));
}

TEST_CASE("ChunkSlotShare: the most-loaded rank's largest chunk over its layers, by hand") {
  // 8 layers over pp 2 (4 each), no chunk list: 1 / min(vpp, 4): vpp 2 -> 1/2, 4 -> 1/4, 5 -> 1/4.
  const std::vector<int64_t> four_each{0, 0, 0, 0, 1, 1, 1, 1};
  CHECK(dockyard::ChunkSlotShare(four_each, {}, 2, 1) == 1.0);
  CHECK(dockyard::ChunkSlotShare(four_each, {}, 2, 2) == 0.5);
  CHECK(dockyard::ChunkSlotShare(four_each, {}, 2, 4) == 0.25);
  CHECK(dockyard::ChunkSlotShare(four_each, {}, 2, 5) == 0.25);
  // The same with chunks: interleaved 2 + 2 per rank -> 2 / 4; every layer in chunk 0 (a
  // virtual-stage split "4,4,0,0", QA) -> 4 / 4, plain 1F1B's fill.
  const auto [stage2, chunk2] = dockyard::InterleavedLayerSplit({4, 4}, 2);
  CHECK(dockyard::ChunkSlotShare(stage2, chunk2, 2, 2) == 0.5);
  CHECK(dockyard::ChunkSlotShare(four_each, {0, 0, 0, 0, 0, 0, 0, 0}, 2, 2) == 1.0);
  // Mixtral: 8 layers a rank at vpp 7, chunks 2, 1, 1, 1, 1, 1, 1: 2 / 8.
  const auto [stage7, chunk7] = dockyard::InterleavedLayerSplit({8, 8, 8, 8}, 7);
  CHECK(dockyard::ChunkSlotShare(stage7, chunk7, 4, 7) == 0.25);
  // 94 layers over pp 32 (30 ranks of 3, 2 of 2) at vpp 3: a rank of 3 (1, 1, 1) sets it, 1/3; the
  // ranks of 2 with an empty chunk do not.
  std::vector<int64_t> qwen;
  for (int64_t r = 0; r < 32; ++r) {
    for (int64_t i = 0; i < (r < 30 ? 3 : 2); ++i) qwen.push_back(r);
  }
  REQUIRE(qwen.size() == 94);
  std::vector<int64_t> per_rank(32, 3);
  per_rank[30] = per_rank[31] = 2;
  const auto [stage_q, chunk_q] = dockyard::InterleavedLayerSplit(per_rank, 3);
  CHECK(dockyard::ChunkSlotShare(stage_q, chunk_q, 32, 3) == doctest::Approx(1.0 / 3));
  // The slots: 4 micro-batches + (pp - 1) x the share.
  CHECK(dockyard::PipelineSlots(4, 2, 5, 0.25) == doctest::Approx(4.25));
  CHECK_THROWS_AS(dockyard::PipelineSlots(4, 2, 2, 0.0), dockyard::Error);
}

TEST_CASE("SimulateStep with --overlap-param-gather: the first chunk's bucket, the later chunks aligned or on the first micro-batch's path") {
  // TinyMixtral on 4 GPUs, pp 2, vpp 2, zero1 over dp 2: 4 model chunks. Rank 0's parameters are far
  // below a 40M-element bucket, so its first chunk's first bucket is the whole chunk: half of the
  // rank's parameter all-gather P (param_gather.h: b = c = P / 2; no later stage's chunk outlasts
  // it and a chunk's forward).
  TrainingConfig t;
  t.dp_sharding = DpSharding::kZero1;
  t.seq_len = 256;
  t.num_microbatches = 4;
  t.run.vpp = 2;
  t.run.overlap_grad_reduce = true;
  const dockyard::ClusterSpec c = dockyard::ClusterPreset("h100-sxm");
  auto exposed = [&](const dockyard::RunSettings& run) {
    t.run = run;
    auto plan = BuildPlan(dockyard::testing::TinyMixtral(), Dims(4, 2), t);
    return dockyard::SimulateStep(plan, c, dockyard::SampleRoutingForPlan(plan, {}, 2)).dp_step_comm_us;
  };
  dockyard::RunSettings run = t.run;
  const double synchronous = exposed(run);  // the gradient reduce's exposed part E + P
  run.overlap_param_gather = true;
  const double aligned = exposed(run);  // E + P / 2
  run.align_param_gather = false;
  const double unaligned = exposed(run);  // E + P / 2 + (pp x vpp - 1) x P / 2 = E + 2 P
  const double half = synchronous - aligned;  // P / 2
  CHECK(half > 0);
  CHECK(unaligned - synchronous == Approx(2 * half));
  // With the optimizer step: the first chunk's gather (P / 2) under the rest of the optimizer; never
  // more than the aligned exposure, never below the gradient reduce's part.
  run.align_param_gather = true;
  run.overlap_param_gather_with_optimizer_step = true;
  const double with_optimizer = exposed(run);
  CHECK(with_optimizer <= aligned);
  CHECK(with_optimizer >= synchronous - 2 * half);
}

TEST_CASE("--overlap-moe-expert-parallel-comm follows Megatron's validity rules (transformer_config.py)") {
  TrainingConfig t;
  t.run.overlap_moe_ep_comm = true;
  CHECK_NOTHROW(dockyard::ValidateEpOverlap(t, 1, 8));
  CHECK_THROWS_WITH_AS(dockyard::ValidateEpOverlap(t, 1, 1), doctest::Contains("ep > 1"), dockyard::Error);
  // Megatron allows the alltoall and the flex (DeepEP) dispatchers, not allgather.
  t.dispatcher = Dispatcher::kDeepEp;
  CHECK_NOTHROW(dockyard::ValidateEpOverlap(t, 1, 8));
  for (const char* refused : {"deredundency", "allgather"}) {
    t.dispatcher = dockyard::ParseDispatcher(refused, "refused");
    const std::string want = std::string("alltoall/flex token dispatcher (--dispatcher all_to_all or deepep), got --dispatcher ") + refused;
    CHECK_THROWS_WITH_AS(dockyard::ValidateEpOverlap(t, 1, 8), doctest::Contains(want.c_str()), dockyard::Error);
  }
  t.dispatcher = Dispatcher::kAllToAll;
  t.recompute = Recompute::kFull;
  CHECK_THROWS_WITH_AS(dockyard::ValidateEpOverlap(t, 1, 8), doctest::Contains("full recomputation"), dockyard::Error);
  t.recompute = Recompute::kSelective;
  t.recompute_modules = {"core_attn", "moe_act"};
  CHECK_NOTHROW(dockyard::ValidateEpOverlap(t, 1, 8));
  t.recompute_modules = {"core_attn", "moe"};
  CHECK_THROWS_WITH_AS(dockyard::ValidateEpOverlap(t, 1, 8), doctest::Contains("disable moe in --recompute-modules"), dockyard::Error);
  t.recompute = Recompute::kNone;
  t.recompute_modules.clear();
  t.param_dtype = "float32";
  CHECK_THROWS_WITH_AS(dockyard::ValidateEpOverlap(t, 1, 8), doctest::Contains("bf16 or fp16 model, got --param-dtype float32"),
                       dockyard::Error);
  t.param_dtype = "float16";
  CHECK_NOTHROW(dockyard::ValidateEpOverlap(t, 1, 8));
  t.mtp_layers = 1;
  CHECK_NOTHROW(dockyard::ValidateEpOverlap(t, 1, 8));
  t.mtp_layers = 2;
  CHECK_THROWS_WITH_AS(dockyard::ValidateEpOverlap(t, 1, 8), doctest::Contains("at most one layer, got --mtp-layers 2"), dockyard::Error);
  t.mtp_layers = 0;
  CHECK_THROWS_WITH_AS(dockyard::ValidateEpOverlap(t, 4, 8), doctest::Contains("--vpp > 1"), dockyard::Error);
  t.run.vpp = 2;
  CHECK_NOTHROW(dockyard::ValidateEpOverlap(t, 4, 8));
  t.run.overlap_moe_ep_comm = false;  // off: nothing to check
  t.dispatcher = Dispatcher::kAllGather;
  CHECK_NOTHROW(dockyard::ValidateEpOverlap(t, 4, 1));
}

// SimulateStep with and without EP overlap on a communication-heavy case: the MoE layer takes
// what planner/cost/ep_overlap.h gives for its phases -- 7 of 8 chunk forwards paired on two
// streams (PairedLayerUs, the backend's SM share), the first forward and last backward alone --
// and the dispatch and combine phases carry what that adds beyond the compute, whatever the
// dispatcher.
static void CheckEpOverlapExposed(const std::string& dispatcher) {
  dockyard::ParallelDimsOptions d;
  d.world_size = 8;
  d.ep = 8;
  TrainingConfig t;
  t.seq_len = 256;
  t.num_microbatches = 8;              // pp 1: the first forward and the last backward unpaired
  t.dp_sharding = DpSharding::kZero1;  // no per-layer FSDP traffic
  t.dispatcher = dockyard::ParseDispatcher(dispatcher, "dispatcher");
  dockyard::Machine machine;
  if (dispatcher == "deepep") machine.gpus_per_node = 2;  // the cluster's NVLink domain, as deepep requires
  // ep 8 over 2-GPU nodes: the hybridep backend (DeepEP's kernels need nodes of 8 NVLink peers:
  // planner/model/flex_backend_limits.h); the time model is the same but for its SM share.
  if (dispatcher == "deepep") t.moe_flex_dispatcher_backend = dockyard::FlexBackend::kHybridEp;
  dockyard::ClusterSpec c = dockyard::ClusterPreset("h100-sxm");
  c.gpus_per_node = 2;  // the all-to-all crosses nodes at a slow NIC: communication-heavy
  c.knobs.links.network_gbps = 1;
  auto simulate = [&](bool overlap) {
    t.run.overlap_moe_ep_comm = overlap;
    auto plan = BuildPlan(dockyard::testing::TinyMixtral(), d, t, machine);
    return dockyard::SimulateStep(plan, c, dockyard::SampleRoutingForPlan(plan, {}, 2));
  };
  const auto plain = simulate(false), overlapped = simulate(true);
  auto a2a = [](const dockyard::CostBreakdown& cb, const std::string& dir) {
    return Phase(cb, "dispatch", dir) + Phase(cb, "combine", dir);
  };
  // The layer's parts as the combined 1F1B step runs them (no shared experts, no cp in TinyMixtral).
  // The router's forward also carries the dispatcher's host synchronization (moe_sync_test), idle
  // time outside the pairing: the paired micro-batches hide it, the unpaired one does not.
  const double idle = c.knobs.host.moe_sync_idle_us;
  dockyard::EpOverlapLayer parts;
  for (int pass = 0; pass < 2; ++pass) {
    const std::string dir = pass == 0 ? "forward" : "backward";
    parts.pre[pass] = Phase(plain, "attention", dir) + Phase(plain, "tp_comm", dir) + Phase(plain, "router", dir) + Phase(plain, "permute", dir) -
                      (pass == 0 ? idle : 0.0);
    parts.mlp[pass] = Phase(plain, "grouped_gemm", dir) + Phase(plain, "unpermute", dir);
    parts.dispatch[pass] = Phase(plain, "dispatch", dir);
    parts.combine[pass] = Phase(plain, "combine", dir);
  }
  const double compute = parts.pre[0] + parts.pre[1] + parts.mlp[0] + parts.mlp[1];
  const double all = a2a(plain, "forward") + a2a(plain, "backward");
  CHECK(plain.moe_layer_us == Approx(compute + idle + all));
  CHECK(all > compute);  // communication-heavy (checked)
  // The backend's contention: hybridep's SMs (its kernels keep their speed), NCCL's SMs and its
  // half speed beside the compute (knobs.h EpOverlapKnobs).
  const auto& ko = c.knobs.dispatchers.ep_overlap;
  const dockyard::EpOverlapContention contention =
      dispatcher == "deepep" ? dockyard::EpOverlapContention{ko.hybridep_sm_share, ko.hybridep_comm_rate}
                             : dockyard::EpOverlapContention{ko.all_to_all_sm_share, ko.all_to_all_comm_rate};
  // HybridEP on H100: Megatron-Bridge's Nsight comparison, its communication kernels 8,254 ms alone,
  // 6,873 ms alone + 3,959 ms beside compute with the overlap: (8,254 - 6,873) / 3,959 = 0.349.
  CHECK(contention.comm_rate == Approx(dispatcher == "deepep" ? 0.349 : 0.5).epsilon(0.002));
  // Two MoE layers per chunk (pp 1, vpp 1); 7 of the 8 micro-batches' forwards paired.
  // Megatron-LM's default: no delay_wgrad_compute, the MLP backward whole before the backward dispatch.
  CHECK_FALSE(dockyard::WgradDelayed(t.run));
  const double paired = dockyard::PairedLayerUs(parts, 2, contention, false);
  const double expected = 7.0 / 8.0 * paired + 1.0 / 8.0 * (compute + idle + all);
  CHECK(overlapped.moe_layer_us == Approx(expected));
  CHECK(Phase(overlapped, "router", "forward") == Approx(Phase(plain, "router", "forward") - 7.0 / 8.0 * idle));
  CHECK(a2a(overlapped, "forward") + a2a(overlapped, "backward") == Approx(expected - compute - idle / 8.0));
  // Communication-bound, the pair takes at least the all-to-alls end to end, and saves at most the compute.
  CHECK(paired >= all - 1e-9);
  CHECK(overlapped.moe_layer_us < plain.moe_layer_us);
}

TEST_CASE("SimulateStep with EP overlap: the layer as two streams pair it, the exposed remainder in the all-to-all phases") {
  CheckEpOverlapExposed("all_to_all");
}

TEST_CASE("SimulateStep with EP overlap and the deepep (flex) dispatcher: the same pairing, its backend's SMs") {
  // Megatron allows the overlap with the flex dispatcher; cost/layer_phases.cc pairs whatever
  // dispatch and combine times the dispatcher has (ep_overlap.h), with its backend's SM share.
  CheckEpOverlapExposed("deepep");
}

TEST_CASE("Interleaved 1F1B's micro-batch rule: torchtitan rounds, Megatron multiples of pp") {
  using dockyard::ValidateInterleavedMicrobatches;
  dockyard::RunSettings s;
  s.vpp = 2;
  // torchtitan (ScheduleInterleaved1F1B): rounds = max(1, M / pp), M % rounds == 0.
  // M 97, pp 8: rounds 97 / 8 = 12, 97 % 12 = 1: refused.
  CHECK_THROWS_WITH_AS(
      ValidateInterleavedMicrobatches(s, 8, 97, false),
      doctest::Contains("--num-microbatches 97 (micro-batches per pipeline schedule; from the global batch when not given) "
                        "with pp 8, --vpp 2: torch.distributed.pipelining's interleaved 1F1B needs a multiple of its "
                        "rounds max(1, M / pp) = 12 (97 % 12 = 1)"),
      dockyard::Error);
  // M 96, pp 8: rounds 12, 96 % 12 = 0.
  CHECK_NOTHROW(ValidateInterleavedMicrobatches(s, 8, 96, false));
  // M 6 < pp 8: rounds max(1, 0) = 1, every M is a multiple of 1.
  CHECK_NOTHROW(ValidateInterleavedMicrobatches(s, 8, 6, false));
  // M 9, pp 4: rounds 2, 9 % 2 = 1: refused; M 10: rounds 2, ok; M 11: rounds 2, refused; M 12: rounds 3, ok.
  CHECK_THROWS_WITH_AS(ValidateInterleavedMicrobatches(s, 4, 9, false), doctest::Contains("= 2 (9 % 2 = 1)"), dockyard::Error);
  CHECK_NOTHROW(ValidateInterleavedMicrobatches(s, 4, 10, false));
  CHECK_THROWS_AS(ValidateInterleavedMicrobatches(s, 4, 11, false), dockyard::Error);
  CHECK_NOTHROW(ValidateInterleavedMicrobatches(s, 4, 12, false));
  // Megatron (forward_backward_pipelining_with_interleaving, group size pp): M >= pp and M % pp == 0.
  // pp 4, M 6: 6 % 4 = 2, refused; M 2 < pp: refused; M 8: ok; M 96, pp 8: ok; M 97, pp 8: 97 % 8 = 1.
  CHECK_THROWS_WITH_AS(ValidateInterleavedMicrobatches(s, 4, 6, true),
                       doctest::Contains("--num-microbatches 6 (micro-batches per pipeline schedule; from the global batch when not given) "
                                         "with pp 4, --vpp 2: Megatron-Core's interleaved schedule needs a multiple of pp (6 % 4 = 2)"),
                       dockyard::Error);
  CHECK_THROWS_WITH_AS(ValidateInterleavedMicrobatches(s, 4, 2, true), doctest::Contains("(2 % 4 = 2)"), dockyard::Error);
  CHECK_NOTHROW(ValidateInterleavedMicrobatches(s, 4, 8, true));
  CHECK_NOTHROW(ValidateInterleavedMicrobatches(s, 8, 96, true));
  CHECK_THROWS_AS(ValidateInterleavedMicrobatches(s, 8, 97, true), dockyard::Error);
  // No interleaving: plain 1F1B (vpp 1) and DualPipe take any count here (DualPipe has its own rule).
  s.vpp = 1;
  CHECK_NOTHROW(ValidateInterleavedMicrobatches(s, 4, 6, true));
  CHECK_NOTHROW(ValidateInterleavedMicrobatches(s, 8, 97, false));
  // BuildPlan refuses the same (simulate, plan, check): pp 2, vpp 2 under megatron, 3 micro-batches: 3 % 2 = 1.
  TrainingConfig t;
  t.dp_sharding = DpSharding::kZero1;
  t.seq_len = 256;
  t.run.vpp = 2;
  t.num_microbatches = 3;
  dockyard::ParallelDimsOptions megatron = Dims(4, 2);
  megatron.convention = dockyard::Convention::kMegatron;
  CHECK_THROWS_WITH_AS(BuildPlan(dockyard::testing::TinyMixtral(), megatron, t), doctest::Contains("a multiple of pp (3 % 2 = 1)"),
                       dockyard::Error);
  t.num_microbatches = 4;
  CHECK_NOTHROW(BuildPlan(dockyard::testing::TinyMixtral(), megatron, t));
  // torchtitan: 3 micro-batches at pp 2 are rounds max(1, 1) = 1: accepted.
  t.num_microbatches = 3;
  CHECK_NOTHROW(BuildPlan(dockyard::testing::TinyMixtral(), Dims(4, 2), t));
}

TEST_CASE("torchtitan's 1F1B needs at least as many micro-batches as stages; Megatron's takes fewer") {
  using dockyard::ValidateSingleStageMicrobatches;
  dockyard::RunSettings s;  // vpp 1, schedule "1f1b"
  // PyTorch PipelineScheduleSingle.__init__ (Schedule1F1B): "Number of microbatches (2) must be
  // greater than or equal to the number of stages (4)." -- M 2 < pp 4.
  CHECK_THROWS_WITH_AS(ValidateSingleStageMicrobatches(s, 4, 2, false),
                       doctest::Contains("--num-microbatches 2 (micro-batches per pipeline schedule; from the global batch when not given) "
                                         "with pp 4: torchtitan's 1F1B schedule needs at least as many micro-batches as stages; "
                                         "PyTorch raises \"Number of microbatches (2) must be greater than or equal to the number "
                                         "of stages (4).\""),
                       dockyard::Error);
  CHECK_THROWS_AS(ValidateSingleStageMicrobatches(s, 4, 3, false), dockyard::Error);  // 3 < 4
  CHECK_NOTHROW(ValidateSingleStageMicrobatches(s, 4, 4, false));                     // M = pp
  CHECK_NOTHROW(ValidateSingleStageMicrobatches(s, 1, 1, false));                     // pp 1: no schedule
  // Megatron's forward_backward_pipelining_without_interleaving: min(pp - rank - 1, M) warm-up
  // micro-batches, any M >= 1.
  CHECK_NOTHROW(ValidateSingleStageMicrobatches(s, 4, 2, true));
  // Interleaved (vpp 2) and DualPipe have their own rules (ValidateInterleavedMicrobatches: M 2 <
  // pp 4 gives rounds max(1, 0) = 1, accepted there; ValidateSchedule).
  s.vpp = 2;
  CHECK_NOTHROW(ValidateSingleStageMicrobatches(s, 4, 2, false));
  s.vpp = 1;
  s.schedule = "dualpipe";
  CHECK_NOTHROW(ValidateSingleStageMicrobatches(s, 4, 2, false));
  // BuildPlan refuses the same (plan, check, simulate): world 8, pp 4, 2 micro-batches.
  TrainingConfig t;
  t.seq_len = 256;
  t.num_microbatches = 2;
  CHECK_THROWS_WITH_AS(BuildPlan(dockyard::testing::TinyMixtralLayers(4), Dims(8, 4), t),
                       doctest::Contains("must be greater than or equal to the number of stages (4)"), dockyard::Error);
  dockyard::ParallelDimsOptions megatron = Dims(8, 4);
  megatron.convention = dockyard::Convention::kMegatron;
  CHECK_NOTHROW(BuildPlan(dockyard::testing::TinyMixtralLayers(4), megatron, t));
}

TEST_CASE("--moe-shared-expert-overlap follows Megatron-Core's rules; torchtitan always overlaps") {
  using dockyard::ValidateSharedExpertOverlap;
  TrainingConfig t;
  t.run.overlap_shared_experts = true;  // --moe-shared-expert-overlap
  t.run.overlap_moe_ep_comm = true;     // --overlap-moe-expert-parallel-comm
  // transformer_config.py: "disable moe_shared_expert_overlap when enabling overlap_moe_expert_parallel_comm"
  CHECK_THROWS_WITH_AS(ValidateSharedExpertOverlap(t, true, true),
                       doctest::Contains("--moe-shared-expert-overlap: cannot be combined with --overlap-moe-expert-parallel-comm "
                                         "(Megatron-Core: \"disable moe_shared_expert_overlap when enabling "
                                         "overlap_moe_expert_parallel_comm\""),
                       dockyard::Error);
  CHECK_THROWS_AS(ValidateSharedExpertOverlap(t, true, false), dockyard::Error);  // raised with or without shared experts
  CHECK_NOTHROW(ValidateSharedExpertOverlap(t, false, true));  // torchtitan: its own overlap, no such flag
  t.run.overlap_shared_experts = false;                         // Megatron's default: off
  CHECK_NOTHROW(ValidateSharedExpertOverlap(t, true, true));
  t.run.overlap_moe_ep_comm = false;
  t.run.overlap_shared_experts = true;
  t.dispatcher = Dispatcher::kAllGather;  // "only works with alltoall or flex token dispatcher."
  CHECK_THROWS_WITH_AS(ValidateSharedExpertOverlap(t, true, true), doctest::Contains("got --dispatcher allgather"), dockyard::Error);
  CHECK_NOTHROW(ValidateSharedExpertOverlap(t, true, false));  // no shared experts: "Only effective when ... is set"
  t.dispatcher = Dispatcher::kAllToAll;
  CHECK_NOTHROW(ValidateSharedExpertOverlap(t, true, true));
}

namespace {

// The TP tests' run: zero1, seq 256, one micro-batch; megatron at tp 2 over `world` GPUs (pp 1).
TrainingConfig TpTestTraining() {
  TrainingConfig t;
  t.dp_sharding = DpSharding::kZero1;
  t.seq_len = 256;
  t.num_microbatches = 1;
  return t;
}
dockyard::ParallelDimsOptions TpTestDims(int64_t world) {
  dockyard::ParallelDimsOptions d = Dims(world, 1);
  d.tp = 2;
  d.convention = dockyard::Convention::kMegatron;
  return d;
}

}  // namespace

TEST_CASE("TP exposure (issue 33 item 3): the sequence-parallel all-gathers and reduce-scatters, exposed as the framework runs them") {
  // TinyMixtral (hidden 64, 4 heads and 2 KV heads of 16), tp 2 inside an H100 node, seq 256: each
  // collective moves T x D x 2 B = 256 x 64 x 2 = 32,768 B, a ring of 2 at 370 GB/s and 3 us per
  // step: c = 1 x (3 + 32,768 / 2 / 370e3) = 3.0443 us. Under --compute-model gemm the attention's
  // column-parallel qkv linear is 2 x 256 x ((4 + 2 x 2) x 16 / 2) x 64 = 2,097,152 FLOP at 989 TFLOP/s
  // x 0.70 = 0.003029 us.
  TrainingConfig t = TpTestTraining();
  dockyard::ParallelDimsOptions d = TpTestDims(2);
  const auto h100 = dockyard::ClusterPreset("h100-sxm");
  auto simulate = [&](const dockyard::Plan& plan) {
    return dockyard::SimulateStep(plan, h100, dockyard::SampleRoutingForPlan(plan, {}, 2), dockyard::ComputeModel::kGemm);
  };
  const double c = 3.0 + 32768.0 / 2 / 370e3;
  const double qkv = 2.0 * 256 * 64 * 64 / (989.0 * 1e6 * 0.70);
  // Megatron: a MoE layer without shared experts has one block, the attention's (the router and
  // the dispatcher take the sequence-sharded tokens; token_dispatcher.py's tp group is expert TP):
  // forward its all-gather and reduce-scatter, 2c; backward the row dgrad's all-gather, c, plus the
  // column linear's re-gather and dgrad reduce-scatter beside its 0.003 us GEMMs: c + 2 (c - qkv).
  const auto megatron = simulate(BuildPlan(dockyard::testing::TinyMixtral(), d, t));
  CHECK(Phase(megatron, "tp_comm", "forward") == Approx(2 * c));
  CHECK(Phase(megatron, "tp_comm", "backward") == Approx(c + 2 * (c - qkv)));
  // torchtitan gathers before the moe module too and exposes every collective: 4c each way (ep 2:
  // torchtitan asks ep >= tp for MoE models; the tp traffic does not depend on it).
  d.convention = dockyard::Convention::kTorchtitan;
  d.ep = 2;
  TrainingConfig tt = t;
  tt.dp_sharding = DpSharding::kFsdp;
  const auto torchtitan = simulate(BuildPlan(dockyard::testing::TinyMixtral(), d, tt));
  CHECK(Phase(torchtitan, "tp_comm", "forward") == Approx(4 * c));
  CHECK(Phase(torchtitan, "tp_comm", "backward") == Approx(4 * c));
  // Without tp there is nothing to gather.
  d.tp = 1;
  d.ep = 1;
  d.convention = dockyard::Convention::kMegatron;
  const auto plain = BuildPlan(dockyard::testing::TinyMixtral(), d, t);
  CHECK(Phase(simulate(plain), "tp_comm", "forward") == 0.0);
}

TEST_CASE("--tp-comm-overlap (issue 33 item 3): TransformerEngine's userbuffers overlap for one layer and micro-batch") {
  // The previous case's layer (c = 3.0443 us, the qkv linear 0.003029 us) with the overlap on; the
  // output projection is 2 x 256 x 64 x (4 x 16 / 2) = 1,048,576 FLOP = 0.0015145 us. tp 2, SM share
  // 16/132 (TransformerEngine's num_sm 16 on H100; g' = g / (1 - 16/132)).
  // Forward: ring(qkv) = 1 x max(0, c - qkv / 2); pipe(proj) = c/4 + 3 max(0, c/4 - proj'/4) + (proj' - proj).
  // Backward: ring(proj) + 2 bulk(qkv), bulk(g) = max(0, c - g') + (g' - g). The step's tp_comm is
  // hidden only as far as the tiny GEMMs go: nearly all of it stays exposed.
  TrainingConfig t = TpTestTraining();
  t.run.tp_comm_overlap = true;
  const dockyard::ParallelDimsOptions d = TpTestDims(2);
  const auto plan = BuildPlan(dockyard::testing::TinyMixtral(), d, t);
  const auto cost = dockyard::SimulateStep(plan, dockyard::ClusterPreset("h100-sxm"), dockyard::SampleRoutingForPlan(plan, {}, 2),
                                           dockyard::ComputeModel::kGemm);
  const double c = 3.0 + 32768.0 / 2 / 370e3;
  const double qkv = 2.0 * 256 * 64 * 64 / (989.0 * 1e6 * 0.70), proj = qkv / 2;
  const double s = 16.0 / 132.0;
  auto slowed = [&](double g) { return g / (1 - s); };
  const double ring_qkv = c - qkv / 2, ring_proj = c - proj / 2;
  const double pipe_proj = c / 4 + 3 * (c / 4 - slowed(proj) / 4) + (slowed(proj) - proj);
  const double bulk_qkv = (c - slowed(qkv)) + (slowed(qkv) - qkv);
  CHECK(Phase(cost, "tp_comm", "forward") == Approx(ring_qkv + pipe_proj));
  CHECK(Phase(cost, "tp_comm", "backward") == Approx(ring_proj + 2 * bulk_qkv));
  // At tp 1 the flag is a no-op (Megatron turns sequence parallelism off; TpCommOverlapped).
  CHECK_FALSE(dockyard::TpCommOverlapped(t.run, 1));
  CHECK(dockyard::TpCommOverlapped(t.run, 2));
}

TEST_CASE("Megatron's expert-TP gather (etp > 1) rides with the dispatch and combine of one layer and micro-batch") {
  // TinyMixtral (hidden 64, top-2), megatron, world 4 = tp 2 x dp 2, expert mesh ep 2 x etp 2, seq
  // 256. The dispatcher gathers the rows that reached a rank over the expert-TP group: T_r x top_k =
  // (256 / tp x etp) x 2 = 512 rows x 64 x 2 B = 65,536 B, a ring of 2 inside an H100 node:
  // 1 x (3 + 65,536 / 2 / 370e3) = 3.0886 us, on top of the all-to-all (the per-rank figures, which
  // are the all-to-all's alone), in the dispatch and the combine, forward and backward.
  const TrainingConfig t = TpTestTraining();
  dockyard::ParallelDimsOptions d = TpTestDims(4);
  d.ep = 2;
  d.etp = 2;
  const auto plan = BuildPlan(dockyard::testing::TinyMixtral(), d, t);
  const auto cost = dockyard::SimulateStep(plan, dockyard::ClusterPreset("h100-sxm"), dockyard::SampleRoutingForPlan(plan, {}, 2));
  const double gather = 3.0 + 65536.0 / 2 / 370e3;
  for (const char* phase : {"dispatch", "combine"}) {
    for (const char* dir : {"forward", "backward"}) {
      CAPTURE(phase);
      CAPTURE(dir);
      const dockyard::PhaseCost* p = nullptr;
      for (const auto& x : cost.phases) {
        if (PhaseName(x.phase) == std::string(phase) && x.layer_kind == dockyard::LayerKind::kMoe && DirectionName(x.direction) == std::string(dir)) p = &x;
      }
      REQUIRE(p != nullptr);
      REQUIRE(!p->per_ep_rank_us.empty());
      const double a2a = *std::max_element(p->per_ep_rank_us.begin(), p->per_ep_rank_us.end());
      CHECK(p->time_us - a2a == Approx(gather));
    }
  }
}
