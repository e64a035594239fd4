// The deepep dispatcher's traffic table (dispatch_traffic.h): a hand-made routing on 2 nodes x
// 4 ranks, by hand, and the sampled table against the time model's sample.
#include "planner/cost/dispatch_traffic.h"

#include <doctest/doctest.h>

#include "planner/base/error.h"
#include "planner/cost/cost.h"
#include "planner/routing/plan_routing.h"
#include "planner/routing/flex_counts.h"
#include "tests/test_models.h"

namespace dockyard {
namespace {

// The tiny model (hidden 64, 8 experts, top-2, 2 MoE layers) on 8 ranks, EP 8, nodes of 4 GPUs,
// 1024 tokens, bf16 activations: 64 x 2 = 128 B per dispatched row, 2 calls per step (2 MoE
// layers x 1 micro-batch).
Plan DeepEpPlan(bool fp8 = false) {
  ParallelDimsOptions d;
  d.world_size = 8;
  d.ep = 8;
  TrainingConfig t;
  t.seq_len = 1024;
  dockyard::Machine machine;
  machine.gpus_per_node = 4;
  t.dispatcher = Dispatcher::kDeepEp;
  // ep 8 over two 4-GPU nodes: HybridEP (DeepEP's kernels need nodes of 8 NVLink peers:
  // planner/model/flex_backend_limits.h); the traffic model is the same for every backend.
  t.moe_flex_dispatcher_backend = FlexBackend::kHybridEp;
  t.fp8_dispatch = fp8;
  return BuildPlan(testing::TinyMixtral(), d, t, machine);
}

// One expert per member. Member 0 sends token A -> experts {1, 5}, B -> {5, 6}, C -> {4, 2};
// member 6 sends one token -> {0, 3}.
FlexCounts HandCounts() {
  std::vector<int64_t> group = {0, 1, 2, 3, 4, 5, 6, 7};
  FlexCounts c = MakeFlexCounts(group, 4);
  const int32_t from0[6] = {1, 5, 5, 6, 4, 2};
  AddFlexTokens(c, 0, from0, 3, 2, 1);
  const int32_t from6[2] = {0, 3};
  AddFlexTokens(c, 6, from6, 1, 2, 1);
  return c;
}

const CommEntry* Find(const CommReport& r, const std::string& purpose, const std::string& phase) {
  for (const auto& e : r.entries) {
    if (e.purpose == purpose && e.phase == phase) return &e;
  }
  return nullptr;
}

}  // namespace

TEST_CASE("deepep traffic by hand, 2 nodes x 4 ranks: one RDMA send per destination node, then NVLink fan-out") {
  // Member 0 (node 0): A, B, C all reach node 1 -> 3 tokens x 128 B = 384 B by RDMA to its rail
  // peer 4; over NVLink on its own node to 1 (A) and 2 (C): 256 B. Member 4 forwards to 5 (A, B:
  // 256 B) and 6 (B: 128 B); C stays on 4. Member 6's token reaches node 0 once: 128 B by RDMA
  // to its rail peer 2, which forwards to 0 and 3 (128 B each).
  //   member  net send  net recv  nvl send  nvl recv
  //   0       384       0         256       128 (2 -> 0)
  //   2       0         128       256       128 (0 -> 2)
  //   4       0         384       384       0
  //   6       128       0         0         128 (4 -> 6)
  const Plan plan = DeepEpPlan();
  CommReport r0 = ComputeComm(plan, 0);
  const int64_t wire_before = r0.total_wire_bytes, cross_before = r0.total_cross_node_bytes;
  AddDeepEpTraffic(plan, 0, {HandCounts()}, r0);
  REQUIRE(r0.links);
  CHECK(r0.links->network_send == std::vector<double>{384, 0, 0, 0, 0, 0, 128, 0});
  CHECK(r0.links->network_recv == std::vector<double>{0, 0, 128, 0, 384, 0, 0, 0});
  CHECK(r0.links->nvlink_send == std::vector<double>{256, 0, 256, 0, 384, 0, 0, 0});
  CHECK(r0.links->nvlink_recv == std::vector<double>{128, 128, 128, 128, 0, 256, 128, 0});
  for (const char* phase : {"forward", "backward"}) {
    const CommEntry* net = Find(r0, "deepep_dispatch_network", phase);
    REQUIRE(net != nullptr);
    CHECK(net->calls == 2);
    CHECK(net->bytes_per_call == 384);
    CHECK(net->wire_bytes == 768);
    CHECK(net->cross_node_bytes == 768);
    const CommEntry* nvl = Find(r0, "deepep_dispatch_nvlink", phase);
    REQUIRE(nvl != nullptr);
    CHECK(nvl->wire_bytes == 512);
    CHECK(nvl->cross_node_bytes == 0);
    // The combine returns what rank 0 received: 0 B by RDMA (no entry), 128 B over NVLink.
    CHECK(Find(r0, "deepep_combine_network", phase) == nullptr);
    CHECK(Find(r0, "deepep_combine_nvlink", phase)->wire_bytes == 256);
  }
  // 2 phases x (768 + 512 + 256) B sent, 2 x 768 B of it cross-node.
  CHECK(r0.total_wire_bytes - wire_before == 3072);
  CHECK(r0.total_cross_node_bytes - cross_before == 1536);

  // Member 4 receives by RDMA and forwards: dispatch 384 B over NVLink; combine 384 B back by RDMA.
  CommReport r4 = ComputeComm(plan, 4);
  AddDeepEpTraffic(plan, 4, {HandCounts()}, r4);
  CHECK(Find(r4, "deepep_dispatch_network", "forward") == nullptr);
  CHECK(Find(r4, "deepep_dispatch_nvlink", "forward")->bytes_per_call == 384);
  CHECK(Find(r4, "deepep_combine_network", "forward")->bytes_per_call == 384);
  CHECK(Find(r4, "deepep_combine_network", "forward")->cross_node_bytes == 768);
  CHECK(Find(r4, "deepep_combine_nvlink", "forward") == nullptr);
}

TEST_CASE("deepep traffic with FP8 dispatch: 64 + 4 B per dispatched row, the combine in BF16") {
  // DispatchRowBytes(64, 2, fp8) = 64 x 1 + 4 x ceil(64 / 128) = 68 B; the combine 64 x 2 = 128 B.
  const Plan plan = DeepEpPlan(/*fp8=*/true);
  CHECK(DeepEpRowBytes(plan, true) == 68);
  CHECK(DeepEpRowBytes(plan, false) == 128);
  CommReport r4 = ComputeComm(plan, 4);
  AddDeepEpTraffic(plan, 4, {HandCounts()}, r4);
  CHECK(Find(r4, "deepep_dispatch_nvlink", "forward")->bytes_per_call == 3 * 68);   // A, B to 5 and B to 6
  CHECK(Find(r4, "deepep_combine_network", "forward")->bytes_per_call == 3 * 128);  // A, B, C back to 0
  // Only the forward dispatch is FP8: the backward passes move BF16 gradients (DeepEP's combine
  // and dispatch of the backward take BF16 rows), 3 x 128 B each way.
  CHECK(Find(r4, "deepep_dispatch_nvlink", "backward")->bytes_per_call == 3 * 128);
  CHECK(Find(r4, "deepep_combine_network", "backward")->bytes_per_call == 3 * 128);
}

TEST_CASE("the plan's deepep table reads the sample simulate's time model reads") {
  // ComputePlanComm samples min(4, 2 MoE layers) = 2 layers of uniform routing, seed 0, for rank
  // 0's EP group: the same counts SampleRoutingForPlan gives the time model.
  const Plan plan = DeepEpPlan();
  const CommReport r = ComputePlanComm(plan, 0);
  REQUIRE(r.links);
  CHECK(r.links->layers_sampled == 2);
  const RoutingResult sampled = SampleRoutingForPlan(plan, RoutingSpec{}, 2);
  std::vector<double> send(8, 0.0);
  for (const LayerRouting& L : sampled.layers) {
    REQUIRE(L.flex);
    const LinkBytes b = FlexDispatchBytes(*L.flex, 128);
    for (int64_t s = 0; s < 8; ++s) {
      for (int64_t d = 0; d < 8; ++d) send[static_cast<size_t>(s)] += b.network[static_cast<size_t>(s * 8 + d)] / 2;
    }
  }
  CHECK(r.links->network_send == send);
  // Every token of a member reaches the other node unless both its experts are on its own node:
  // 1024 x (1 - 4/8 x 3/7) = 804.6 tokens x 128 B = 103 KB per call, within sampling noise.
  CHECK(r.links->network_send[0] == doctest::Approx(1024 * (1 - 12.0 / 56) * 128).epsilon(0.05));
  // No all-to-all or deredundency entry is left for the dispatch.
  for (const auto& e : r.entries) {
    CAPTURE(e.purpose);
    CHECK(e.purpose.rfind("deredundency", 0) != 0);
    CHECK(e.purpose.rfind("ep_", 0) != 0);
  }
}

TEST_CASE("other dispatchers get no link table") {
  ParallelDimsOptions d;
  d.world_size = 8;
  d.ep = 8;
  TrainingConfig t;
  t.seq_len = 1024;
  const Plan plan = BuildPlan(testing::TinyMixtral(), d, t);
  CHECK_FALSE(ComputePlanComm(plan, 0).links);
  CHECK_THROWS_AS(AddDeepEpTraffic(DeepEpPlan(), 0, {}, *std::make_unique<CommReport>()), Error);
}

}  // namespace dockyard
