// Tests of routing over replicated experts (replica_routing.h).
#include "planner/routing/replica_routing.h"

#include <cstdlib>

#include <doctest/doctest.h>

#include "planner/base/error.h"

namespace dockyard {
namespace {

TEST_CASE("the local rule keeps a source on its node's replicas and splits them evenly") {
  // 2 experts, ep 4 on 2 nodes (ranks 0-1 node 0, ranks 2-3 node 1), 1 slot per rank: expert 0 at
  // slots 0 (node 0), 2 and 3 (node 1); expert 1 at slot 1.
  const ExpertPlacement p = PlacementFromMap({0, 1, 0, 0}, 2, 4, 2);
  const std::vector<int32_t> experts = {0, 0, 0, 1, 0};
  // Source 0 (node 0): expert 0's only node-0 replica is slot 0; expert 1 is slot 1.
  CHECK(ChooseReplicas(p, ReplicaChoice::kLocal, 0, 0, 0, experts) == std::vector<int32_t>{0, 0, 0, 1, 0});
  // Source 3 (node 1): candidates {2, 3}; the k-th assignment goes to candidate (3 + k) mod 2:
  // k = 0 -> 1 (slot 3), 1 -> slot 2, 2 -> slot 3, (expert 1: slot 1, off node), 3 -> slot 2.
  CHECK(ChooseReplicas(p, ReplicaChoice::kLocal, 0, 0, 3, experts) == std::vector<int32_t>{3, 2, 3, 1, 2});
}

TEST_CASE("the random rule picks a replica of the right expert, reproducibly under the seed") {
  const ExpertPlacement p = PlacementFromMap({0, 1, 0, 0}, 2, 4, 2);
  std::vector<int32_t> experts(3000, 0);
  const auto a = ChooseReplicas(p, ReplicaChoice::kRandom, 7, 1, 0, experts);
  CHECK(a == ChooseReplicas(p, ReplicaChoice::kRandom, 7, 1, 0, experts));
  CHECK(a != ChooseReplicas(p, ReplicaChoice::kRandom, 8, 1, 0, experts));
  int64_t count[4] = {0, 0, 0, 0};
  for (int32_t s : a) ++count[s];
  CHECK(count[1] == 0);  // slot 1 holds expert 1
  // Three replicas, 3000 draws: 1000 each expected, standard deviation sqrt(3000 * 1/3 * 2/3) ~ 26.
  for (int s : {0, 2, 3}) CHECK(std::abs(count[s] - 1000) < 130);
}

TEST_CASE("an assignment to an expert outside the model is rejected") {
  const ExpertPlacement p = PlacementFromMap({0, 1, 0, 0}, 2, 4, 2);
  CHECK_THROWS_WITH_AS(ChooseReplicas(p, ReplicaChoice::kLocal, 0, 0, 0, {0, 2}), doctest::Contains("picks expert 2"), Error);
}

TEST_CASE("with no redundant experts the replicated routing equals the plain routing matrices") {
  const RoutingModel model = PrepareRouting(ParseRoutingSpec("zipf:1.2"), 16, 4, 3);
  std::vector<ExpertPlacement> placements;
  for (int l = 0; l < 3; ++l) {
    EplbOptions o;
    o.policy = EplbPolicy::kContiguous;
    o.ep = 4;
    placements.push_back(PlaceExperts(ExpectedShare(model, l), o));
  }
  const RoutingResult plain = SampleRouting(model, 4, 50);
  for (ReplicaChoice choice : {ReplicaChoice::kLocal, ReplicaChoice::kRandom}) {
    const RoutingResult rep = SampleReplicatedRouting(model, placements, 50, choice);
    CHECK(rep.num_slots == 16);
    for (size_t l = 0; l < 3; ++l) {
      CHECK(rep.layers[l].dispatch == plain.layers[l].dispatch);
      CHECK(rep.layers[l].received == plain.layers[l].received);
      CHECK(rep.layers[l].rows_per_local_expert == plain.layers[l].rows_per_local_expert);
      CHECK(rep.layers[l].tokens_per_expert == plain.layers[l].tokens_per_expert);
      CHECK(rep.layers[l].p99_received == plain.layers[l].p99_received);
      CHECK(rep.layers[l].imbalance == plain.layers[l].imbalance);
    }
    CHECK(rep.max_imbalance == plain.max_imbalance);
  }
}

TEST_CASE("replicas of a hot expert split its rows and lower the imbalance") {
  // 4 experts, top_k 1, ep 2, every token to expert 0 (hot:1:1.0), 6 tokens per rank.
  const RoutingModel model = PrepareRouting(ParseRoutingSpec("hot:1:1.0"), 4, 1, 1);
  const RoutingResult plain = SampleRouting(model, 2, 6);
  // Without replicas rank 0 receives all 12 rows: imbalance 12 / 6 = 2.
  CHECK(plain.layers[0].received == std::vector<int64_t>{12, 0});
  CHECK(plain.max_imbalance == 2.0);
  // R = 2 (6 slots, 3 per rank), global policy on share [1, 0, 0, 0]: expert 0 gets both extra
  // replicas (1/1 > 0, 1/2 > 0). Packing the replicas 0, 4, 5 (1/3 each) then 1, 2, 3 (0):
  // slot 0 -> rank 0, slot 4 -> rank 1, slot 5 -> rank 0 (tie), 1 -> rank 1, 2 -> rank 1 (1/3 <
  // 2/3), 3 -> rank 0: physical->logical [0, 0, 3 | 0, 1, 2].
  EplbOptions o;
  o.redundant_experts = 2;
  o.ep = 2;
  const ExpertPlacement p = PlaceExperts(ExpectedShare(model, 0), o);
  CHECK(p.physical_to_logical == std::vector<int64_t>{0, 0, 3, 0, 1, 2});
  const RoutingResult rep = SampleReplicatedRouting(model, {p}, 6, ReplicaChoice::kLocal);
  // One node: candidates slots {0, 1, 3}; source s's k-th token goes to (s + k) mod 3, so 6
  // tokens give 2 rows to each replica from each source: rows per slot 4, 4, 0 | 4, 0, 0.
  CHECK(rep.layers[0].rows_per_local_expert == std::vector<int64_t>{4, 4, 0, 4, 0, 0});
  CHECK(rep.layers[0].dispatch == std::vector<int64_t>{4, 2, 4, 2});
  CHECK(rep.layers[0].received == std::vector<int64_t>{8, 4});
  CHECK(rep.layers[0].imbalance == doctest::Approx(8.0 / 6.0));  // mean = 6 tokens x top_k 1
  CHECK(rep.layers[0].p99_received == 8);
  CHECK(rep.layers[0].tokens_per_expert == std::vector<int64_t>{12, 0, 0, 0});
}

TEST_CASE("placements of the wrong shape are rejected") {
  const RoutingModel model = PrepareRouting(ParseRoutingSpec("uniform"), 4, 1, 2);
  const ExpertPlacement p = PlacementFromMap({0, 1, 2, 3}, 4, 2, 1);
  // Two MoE layers, one placement.
  CHECK_THROWS_WITH_AS(SampleReplicatedRouting(model, {p}, 4, ReplicaChoice::kLocal), doctest::Contains("1 placements for 2 MoE layers"),
                       Error);
}

}  // namespace
}  // namespace dockyard
