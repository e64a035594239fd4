// Tests of the refit map targeting physical slots with replicas (replica_refit.h).
#include "planner/accounting/replica_refit.h"

#include <doctest/doctest.h>

#include "planner/base/error.h"
#include "planner/layout/plan.h"
#include "tests/test_models.h"

namespace dockyard {
namespace {

Plan TinyPlan() {
  ParallelDimsOptions d;
  d.world_size = 4;
  d.ep = 4;
  return BuildPlan(testing::TinyMixtral(), d);
}

TEST_CASE("every per-expert tensor goes to each replica's slot and EP rank") {
  const Plan plan = TinyPlan();
  const RefitMap map = BuildRefitMap(plan, "");
  // Layer 0: expert 0 in slots 0, 8 and 9 (12 slots, 3 per rank: ranks 0, 2, 3), expert 1 in
  // slots 1 and 10. Layer 1: the ordinary placement plus expert 7 twice more (slots 10, 11).
  const std::vector<ExpertPlacement> placements = {
      PlacementFromMap({0, 1, 2, 3, 4, 5, 6, 7, 0, 0, 1, 2}, 8, 4, 1),
      PlacementFromMap({0, 1, 2, 3, 4, 5, 6, 7, 7, 0, 7, 7}, 8, 4, 1),
  };
  const std::vector<ReplicaRefitTarget> t = ReplicaRefitTargets(map, plan.model, placements);
  REQUIRE(t.size() == map.entries.size());
  int64_t checked = 0;
  for (size_t i = 0; i < t.size(); ++i) {
    const RefitEntry& e = map.entries[i];
    if (e.layer == 0 && e.expert_idx == 0) {
      CHECK(t[i].physical_slots == std::vector<int64_t>{0, 8, 9});
      CHECK(t[i].ep_ranks == std::vector<int64_t>{0, 2, 3});
      ++checked;
    }
    if (e.layer == 1 && e.expert_idx == 7) {
      CHECK(t[i].physical_slots == std::vector<int64_t>{7, 8, 10, 11});
      CHECK(t[i].ep_ranks == std::vector<int64_t>{2, 2, 3, 3});
      ++checked;
    }
    if (e.layer == 1 && e.expert_idx == 3) CHECK(t[i].physical_slots == std::vector<int64_t>{3});
  }
  CHECK(checked == 6);  // gate, up and down of each of the two experts
  const Json j = ReplicaRefitMapToJson(map, t, placements);
  CHECK(j["num_slots"] == 12);
  CHECK(j["redundant_experts"] == 4);
  CHECK(j["entries"][0]["physical_slots"] == Json(t[0].physical_slots));
}

TEST_CASE("a placement list that does not cover every MoE layer is rejected") {
  const Plan plan = TinyPlan();
  CHECK_THROWS_WITH_AS(ReplicaRefitTargets(BuildRefitMap(plan, ""), plan.model, {PlacementFromMap({0, 1, 2, 3, 4, 5, 6, 7}, 8, 4, 1)}),
                       doctest::Contains("1 placements for 2 MoE layers"), Error);
}

}  // namespace
}  // namespace dockyard
