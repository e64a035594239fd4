// Tests of the redundant-expert placement (eplb.h).
#include "planner/layout/eplb.h"

#include <algorithm>
#include <string>

#include <doctest/doctest.h>

#include "planner/base/error.h"

namespace dockyard {
namespace {

EplbOptions Options(EplbPolicy policy, int64_t R, int64_t ep, int64_t nodes, int64_t groups) {
  EplbOptions o;
  o.policy = policy;
  o.redundant_experts = R;
  o.ep = ep;
  o.num_nodes = nodes;
  o.num_groups = groups;
  return o;
}

std::vector<int64_t> ReplicaCountsOf(const std::vector<int64_t>& physical_to_logical, int64_t E) {
  std::vector<int64_t> c(static_cast<size_t>(E), 0);
  for (int64_t e : physical_to_logical) ++c[static_cast<size_t>(e)];
  return c;
}

TEST_CASE("hierarchical placement reproduces the published example of DeepSeek's EPLB README") {
  // github.com/deepseek-ai/EPLB README, "Interface and Example": two layers of 12 experts, 16
  // replicas, 4 groups, 2 nodes, 8 GPUs; the printed phy2log of rebalance_experts.
  const std::vector<std::vector<double>> weight = {
      {90, 132, 40, 61, 104, 165, 39, 4, 73, 56, 183, 86},
      {20, 107, 104, 64, 19, 197, 187, 157, 172, 86, 16, 27},
  };
  const std::vector<std::vector<int64_t>> published = {
      {5, 6, 5, 7, 8, 4, 3, 4, 10, 9, 10, 2, 0, 1, 11, 1},
      {7, 10, 6, 8, 6, 11, 8, 9, 2, 4, 5, 1, 5, 0, 3, 1},
  };
  for (size_t l = 0; l < 2; ++l) {
    const ExpertPlacement p = PlaceExperts(weight[l], Options(EplbPolicy::kHierarchical, 4, 8, 2, 4));
    CHECK(p.policy == EplbPolicy::kHierarchical);
    CHECK(p.physical_to_logical == published[l]);
    CHECK(p.SlotsPerRank() == 2);
  }
  // auto picks hierarchical here (2 nodes divide 4 groups), as EPLB's rebalance_experts does.
  CHECK(PlaceExperts(weight[0], Options(EplbPolicy::kAuto, 4, 8, 2, 4)).physical_to_logical == published[0]);
}

TEST_CASE("a single hot expert gets every redundant slot") {
  // 8 experts, expert 3 carries 100 tokens, the others 1 each; R = 4 on ep 4 (12 slots, 3 per
  // rank). 100 / 5 = 20 > 1, so all 4 extra replicas go to expert 3 (5 replicas).
  std::vector<double> load(8, 1.0);
  load[3] = 100;
  for (EplbPolicy policy : {EplbPolicy::kGlobal, EplbPolicy::kContiguous}) {
    const ExpertPlacement p = PlaceExperts(load, Options(policy, 4, 4, 1, 1));
    CHECK(p.replica_count == std::vector<int64_t>{1, 1, 1, 5, 1, 1, 1, 1});
    CHECK(p.logical_to_physical[3].size() == 5);
  }
  // Global packing, 3 items per rank, items by decreasing load: the five replicas of 100/5 = 20
  // go to ranks 0, 1, 2, 3 and then 0 again (all at 20, lowest index): 40, 20, 20, 20. The seven
  // experts of load 1 go to the least loaded non-full rank: ranks 1, 2, 3 (21 each), then 1, 2,
  // 3 again (22 each, now full), and the last to rank 0 (41). Rank loads: 41, 22, 22, 22.
  const ExpertPlacement g = PlaceExperts(load, Options(EplbPolicy::kGlobal, 4, 4, 1, 1));
  CHECK(RankLoads(g, load) == std::vector<double>{41, 22, 22, 22});
  // Contiguous keeps logical order: slots 0 1 2 | 3 3 3 | 3 3 4 | 5 6 7; rank loads 1+1+1 = 3,
  // 3 x 20 = 60, 20+20+1 = 41, 3.
  const ExpertPlacement c = PlaceExperts(load, Options(EplbPolicy::kContiguous, 4, 4, 1, 1));
  CHECK(c.physical_to_logical == std::vector<int64_t>{0, 1, 2, 3, 3, 3, 3, 3, 4, 5, 6, 7});
  CHECK(RankLoads(c, load) == std::vector<double>{3, 60, 41, 3});
}

TEST_CASE("ties are broken by the lowest index, deterministically") {
  // Uniform load over 4 experts, R = 4, ep 4: every extra replica compares equal loads per
  // replica; the lowest expert wins each round: 1/1 for all -> expert 0 (now 1/2), then 1, 2, 3.
  const std::vector<double> load(4, 1.0);
  const ExpertPlacement p = PlaceExperts(load, Options(EplbPolicy::kGlobal, 4, 4, 1, 1));
  CHECK(p.replica_count == std::vector<int64_t>{2, 2, 2, 2});
  // The replicas are listed [0 1 2 3 0 1 2 3], all of load 0.5, packed 2 per rank: equal loads
  // keep index order, and each goes to the least loaded non-full rank (lowest index on ties):
  // items 0..3 to ranks 0..3, items 4..7 again to ranks 0..3.
  CHECK(p.physical_to_logical == std::vector<int64_t>{0, 0, 1, 1, 2, 2, 3, 3});
  CHECK(PlaceExperts(load, Options(EplbPolicy::kGlobal, 4, 4, 1, 1)).physical_to_logical == p.physical_to_logical);
}

TEST_CASE("the physical->logical and logical->physical maps are inverse") {
  const std::vector<double> load = {5, 0, 3, 9, 1, 1, 7, 2, 8, 4, 6, 0, 2, 3, 3, 1};
  for (EplbPolicy policy : {EplbPolicy::kHierarchical, EplbPolicy::kGlobal, EplbPolicy::kContiguous}) {
    for (int64_t R : {0, 8, 16}) {
      const ExpertPlacement p = PlaceExperts(load, Options(policy, R, 8, 2, 4));
      CHECK(static_cast<int64_t>(p.physical_to_logical.size()) == 16 + R);
      CHECK(p.replica_count == ReplicaCountsOf(p.physical_to_logical, 16));
      for (int64_t e = 0; e < 16; ++e) {
        for (int64_t s : p.logical_to_physical[static_cast<size_t>(e)]) CHECK(p.physical_to_logical[static_cast<size_t>(s)] == e);
      }
      for (int64_t s = 0; s < 16 + R; ++s) {
        const auto& slots = p.logical_to_physical[static_cast<size_t>(p.physical_to_logical[static_cast<size_t>(s)])];
        CHECK(std::find(slots.begin(), slots.end(), s) != slots.end());
      }
    }
  }
}

TEST_CASE("contiguous placement with no redundant experts is the ordinary expert ownership") {
  const std::vector<double> load = {9, 1, 1, 1, 1, 1, 1, 1};
  const ExpertPlacement p = PlaceExperts(load, Options(EplbPolicy::kContiguous, 0, 4, 1, 1));
  CHECK(p.physical_to_logical == std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7});
}

TEST_CASE("hierarchical placement keeps an expert's replicas on its group's node") {
  // 8 experts in 4 groups of 2 on 2 nodes of 2 GPUs, R = 4 (12 slots, 6 per node). Group loads:
  // g0 = 10+10 = 20, g1 = 1+1 = 2, g2 = 30+1 = 31, g3 = 1+1 = 2. Packing 2 per node: g2 (31) ->
  // node 0, g0 (20) -> node 1, g1 (2) -> node 1 (22 < 31), g3 -> node 0.
  const std::vector<double> load = {10, 10, 1, 1, 30, 1, 1, 1};
  const ExpertPlacement p = PlaceExperts(load, Options(EplbPolicy::kHierarchical, 4, 4, 2, 4));
  for (int64_t s = 0; s < 12; ++s) {
    const int64_t e = p.physical_to_logical[static_cast<size_t>(s)];
    const int64_t node = p.NodeOfRank(p.RankOfSlot(s));
    CHECK(node == ((e == 4 || e == 5 || e == 6 || e == 7) ? 0 : 1));
  }
  // Node 0 holds experts 4..7 (30, 1, 1, 1) in 6 slots: expert 4 gets both extra replicas
  // (30/2 = 15 > 1, 30/3 = 10 > 1).
  CHECK(p.replica_count[4] == 3);
  CHECK(p.replica_count[0] + p.replica_count[1] == 4);
}

TEST_CASE("slot counts that ep does not divide are rejected naming --redundant-experts") {
  // 16 experts + 3 = 19 slots over ep 8: 19 % 8 != 0.
  const std::vector<double> load(16, 1.0);
  CHECK_THROWS_WITH_AS(PlaceExperts(load, Options(EplbPolicy::kGlobal, 3, 8, 1, 1)),
                       doctest::Contains("--redundant-experts (3): num_experts (16) + redundant experts = 19 physical "
                                         "slots must be divisible by ep (8)"),
                       Error);
}

TEST_CASE("negative redundant experts are rejected") {
  const std::vector<double> load(16, 1.0);
  CHECK_THROWS_WITH_AS(PlaceExperts(load, Options(EplbPolicy::kGlobal, -8, 8, 1, 1)),
                       doctest::Contains("--redundant-experts (-8) must be >= 0"), Error);
}

TEST_CASE("more redundant slots than EP ranks can use are rejected") {
  // 16 experts over ep 8: each expert can have at most 8 replicas (one per rank), so at most
  // 16 x (8 - 1) = 112 redundant slots; 120 = 112 + 8 (divisible by ep) is one rank-row too many.
  const std::vector<double> load(16, 1.0);
  CHECK(PlaceExperts(load, Options(EplbPolicy::kGlobal, 112, 8, 1, 1)).num_physical == 128);
  CHECK_THROWS_WITH_AS(PlaceExperts(load, Options(EplbPolicy::kGlobal, 120, 8, 1, 1)),
                       doctest::Contains("--redundant-experts (120) must be <= num_experts (16) x (ep (8) - 1) = 112"), Error);
}

TEST_CASE("hierarchical placement rejects groups that do not split over the nodes") {
  // 3 groups cannot be packed whole onto 2 nodes.
  const std::vector<double> load(12, 1.0);
  CHECK_THROWS_WITH_AS(PlaceExperts(load, Options(EplbPolicy::kHierarchical, 4, 8, 2, 3)), doctest::Contains("--expert-groups (3)"), Error);
  // auto falls back to global, as EPLB does.
  CHECK(PlaceExperts(load, Options(EplbPolicy::kAuto, 4, 8, 2, 3)).policy == EplbPolicy::kGlobal);
}

TEST_CASE("a negative load is rejected") {
  std::vector<double> load(4, 1.0);
  load[2] = -1;
  CHECK_THROWS_WITH_AS(PlaceExperts(load, Options(EplbPolicy::kGlobal, 0, 4, 1, 1)), doctest::Contains("expert load [2] (-1)"), Error);
}

TEST_CASE("--eplb-policy names are parsed and unknown ones rejected") {
  CHECK(ParseEplbPolicy("global") == EplbPolicy::kGlobal);
  CHECK(std::string(EplbPolicyName(ParseEplbPolicy("hierarchical"))) == "hierarchical");
  CHECK_THROWS_WITH_AS(ParseEplbPolicy("greedy"), doctest::Contains("--eplb-policy 'greedy'"), Error);
}

}  // namespace
}  // namespace dockyard
