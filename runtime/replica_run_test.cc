// dockyard-run with redundant experts on the CPU backend: replicas hold their logical expert's
// weights, tokens go to the replicas the planner's rule picks, every output matches the reference,
// and the measured rows per rank and slot equal the planner's matrices exactly.
#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <set>
#include <string>

#include <doctest/doctest.h>

#include "planner/base/error.h"
#include "planner/cost/redundant_experts.h"
#include "planner/routing/replica_routing.h"
#include "runtime/cpu/cpu_backend.h"
#include "runtime/run.h"
#include "runtime/test_layouts.h"

using namespace dockyard;
using namespace dockyard::runtime;
using namespace dockyard::runtime::testing;

namespace {

RedundantExpertsOptions Redundant(int64_t R, EplbPolicy policy, ReplicaChoice choice, int64_t groups = 1) {
  RedundantExpertsOptions ro;
  ro.redundant_experts = R;
  ro.policy = policy;
  ro.choice = choice;
  ro.expert_groups = groups;
  return ro;
}

RunOptions Options(const RedundantExpertsOptions& ro, const std::string& routing = "zipf:1.5") {
  RunOptions o;
  o.tokens_per_rank = 24;
  o.iters = 1;
  o.warmup = 0;
  o.routing = ParseRoutingSpec(routing);
  o.redundant = ro;
  return o;
}

RunReport Run(const Plan& plan, const RunOptions& o) {
  cpu::CpuBackend backend;
  return RunMoeLayer(plan, o, backend);
}

// TinyDeepSeek (16 experts, top_k 4, a shared expert) on 8 ranks, ep 8, 4 GPUs per node: 2 nodes.
Plan TwoNodePlan() {
  Plan plan = MakePlan(TinyDeepSeek(), 8, 8);
  plan.machine.gpus_per_node = 4;
  return plan;
}

}  // namespace

TEST_CASE("replicated placements run with 0 wrong and the planner's rows on every rank and slot") {
  const Plan plan = TwoNodePlan();
  for (EplbPolicy policy : {EplbPolicy::kHierarchical, EplbPolicy::kGlobal, EplbPolicy::kContiguous}) {
    for (ReplicaChoice choice : {ReplicaChoice::kLocal, ReplicaChoice::kRandom}) {
      // R = 8: 24 slots, 3 per rank; 4 expert groups of 4 (2 per node) for the hierarchical policy.
      const RedundantExpertsOptions ro = Redundant(8, policy, choice, 4);
      const RunReport r = Run(plan, Options(ro));
      CAPTURE(EplbPolicyName(policy));
      CAPTURE(ReplicaChoiceName(choice));
      CHECK(r.passed());
      CHECK(r.wrong == 0);
      CHECK(r.checked == 8 * 24 * 64);
      REQUIRE(r.config.placement != nullptr);
      CHECK(r.config.placement->num_physical == 24);
      CHECK(r.replica_rows_mismatches == 0);
      // The planner's matrices, computed here independently of the run's report.
      const RoutingModel model = PrepareRouting(ParseRoutingSpec("zipf:1.5"), 16, 4, plan.model.NumMoeLayers());
      const ExpertPlacement p = PlaceExperts(ExpectedShare(model, 0), EplbOptionsFor(plan, ro));
      CHECK(p.physical_to_logical == r.config.placement->physical_to_logical);
      const LayerRouting want = SampleReplicatedLayer(model, 0, p, 24, choice);
      int64_t total = 0;
      for (const RankReport& k : r.ranks) {
        const std::vector<int64_t> slots(want.rows_per_local_expert.begin() + k.ep_index * 3,
                                         want.rows_per_local_expert.begin() + (k.ep_index + 1) * 3);
        CHECK(k.rows_per_local_expert == slots);
        CHECK(k.received_rows == want.received[static_cast<size_t>(k.ep_index)]);
        total += k.received_rows;
      }
      CHECK(total == 8 * 24 * 4);  // every assignment computed exactly once
      // Replicas are really used: some expert with two replicas gets rows on two different ranks.
      bool split = false;
      for (int64_t e = 0; e < 16; ++e) {
        std::set<int64_t> ranks;
        for (int64_t s : p.logical_to_physical[static_cast<size_t>(e)]) {
          if (want.rows_per_local_expert[static_cast<size_t>(s)] > 0) ranks.insert(p.RankOfSlot(s));
        }
        split = split || ranks.size() >= 2;
      }
      CHECK(split);
    }
  }
}

TEST_CASE("validation catches a replica computed with the wrong expert's weights") {
  RunOptions o = Options(Redundant(8, EplbPolicy::kGlobal, ReplicaChoice::kLocal));
  o.fault = Fault::kWrongExpertOwner;
  const RunReport r = Run(TwoNodePlan(), o);
  CHECK(!r.passed());
  CHECK(r.wrong > 0);
}

TEST_CASE("redundant experts with expert tensor parallelism still match the reference") {
  // 8 ranks, tp 2 with experts TP-sharded (etp 2), ep 4: 16 + 4 = 20 slots, 5 per EP rank. The
  // planner's matrices describe ranks that are their own token sources, so they are not compared.
  const Plan plan = MakePlan(TinyDeepSeek(), 8, 4, 2, 2);
  const RunReport r = Run(plan, Options(Redundant(4, EplbPolicy::kGlobal, ReplicaChoice::kLocal)));
  CHECK(r.passed());
  CHECK(r.config.placement->SlotsPerRank() == 5);
  CHECK(r.replica_rows_mismatches == -1);
}

TEST_CASE("redundant experts need a routing model") {
  RunOptions o = Options(Redundant(8, EplbPolicy::kGlobal, ReplicaChoice::kLocal));
  o.routing.reset();  // the router's own top-k: no load to balance
  CHECK_THROWS_WITH_AS(MakeRunConfig(TwoNodePlan(), o), doctest::Contains("--redundant-experts needs --routing"), Error);
}

TEST_CASE("redundant experts are rejected with the deredundency dispatcher") {
  RunOptions o = Options(Redundant(8, EplbPolicy::kGlobal, ReplicaChoice::kLocal));
  o.dispatcher = Dispatcher::kDeredundency;
  o.oep = 2;
  CHECK_THROWS_WITH_AS(MakeRunConfig(TwoNodePlan(), o), doctest::Contains("all_to_all dispatcher"), Error);
}

TEST_CASE("a slot count the EP group does not divide is rejected before anything runs") {
  // 16 + 4 = 20 slots over ep 8.
  CHECK_THROWS_WITH_AS(MakeRunConfig(TwoNodePlan(), Options(Redundant(4, EplbPolicy::kGlobal, ReplicaChoice::kLocal))),
                       doctest::Contains("--redundant-experts (4)"), Error);
}

namespace {
std::string WriteTmp(const std::string& name, const std::string& text) {
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string path = std::string(dir ? dir : "/tmp") + "/" + name;
  std::ofstream(path) << text;
  return path;
}
}  // namespace

TEST_CASE("a placement file runs its own layout of replicas") {
  // 16 experts + 8 = 24 slots, 3 per rank: expert 0 in slots 0, 3, 6, 9, 12 and 15 (ranks 0-5),
  // expert 1 in slots 18 and 21 (ranks 6, 7), the others once.
  const std::string path = WriteTmp("placement.json", R"({"physical_to_logical": [0, 2, 3, 0, 4, 5, 0, 6, 7, 0, 8, 9,
      0, 10, 11, 0, 12, 13, 1, 14, 15, 1, 1, 1]})");
  RunOptions o = Options(Redundant(8, EplbPolicy::kGlobal, ReplicaChoice::kLocal), "hot:2:0.5");
  o.redundant.reset();  // the file alone: R = 24 - 16
  o.placement_file = path;
  const RunReport r = Run(TwoNodePlan(), o);
  CHECK(r.passed());
  CHECK(r.config.placement->replica_count[0] == 6);
  CHECK(r.config.placement->replica_count[1] == 4);
  CHECK(r.config.options.redundant->redundant_experts == 8);
  CHECK(r.replica_rows_mismatches == 0);
  // --redundant-experts must agree with the file's slot count.
  o.redundant = Redundant(16, EplbPolicy::kGlobal, ReplicaChoice::kLocal);
  CHECK_THROWS_WITH_AS(MakeRunConfig(TwoNodePlan(), o), doctest::Contains("does not match the placement file's 24 slots"), Error);
  // A map that leaves an expert without a slot.
  o.redundant.reset();
  o.placement_file = WriteTmp("bad-placement.json", R"({"physical_to_logical": [0, 0, 0, 0, 0, 0, 0, 0]})");
  CHECK_THROWS_WITH_AS(MakeRunConfig(TwoNodePlan(), o), doctest::Contains("has 0 replicas"), Error);
}
