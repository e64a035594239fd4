// Tests of the redundant-experts analysis of a plan (redundant_experts.h).
#include "planner/cost/redundant_experts.h"

#include <cstdlib>
#include <fstream>
#include <utility>

#include <doctest/doctest.h>

#include "planner/cost/cluster.h"
#include "planner/base/error.h"
#include "planner/accounting/workload.h"
#include "planner/routing/received_rows.h"
#include "tests/test_models.h"

namespace dockyard {
namespace {

struct Setup {
  explicit Setup(Plan p) : plan(std::move(p)) {}
  Plan plan;
  ClusterSpec cluster = ClusterPreset("h100-sxm");
  RoutingModel model;
  RoutingResult before;
  CostBreakdown cost;
  MemoryReport memory;
};

// TinyMixtral (8 experts, top_k 2, 2 MoE layers) on 4 GPUs with ep 4, seq 64, both layers sampled.
Setup MakeSetup(const std::string& routing, const std::string& dispatcher = "all_to_all") {
  ParallelDimsOptions d;
  d.world_size = 4;
  d.ep = 4;
  TrainingConfig t;
  t.seq_len = 64;
  t.dispatcher = ParseDispatcher(dispatcher, "dispatcher");
  Setup s(BuildPlan(testing::TinyMixtral(), d, t));
  s.model = PrepareRouting(ParseRoutingSpec(routing), 8, 2, 2);
  s.before = SampleRouting(s.model, 4, ComputeWorkload(s.plan).routed_tokens);
  s.cost = SimulateStep(s.plan, s.cluster, s.before);
  s.memory = ComputeMemory(s.plan);
  return s;
}

RedundantExpertsOptions Options(int64_t R, EplbPolicy policy) {
  RedundantExpertsOptions o;
  o.redundant_experts = R;
  o.policy = policy;
  return o;
}

TEST_CASE("contiguous placement without redundant experts changes nothing") {
  Setup s = MakeSetup("zipf:1.5");
  const RedundantExpertsReport r =
      AnalyzeRedundantExperts(s.plan, s.cluster, s.model, s.before, s.cost, s.memory, Options(0, EplbPolicy::kContiguous));
  CHECK(r.num_slots == 8);
  CHECK(r.after.imbalance == r.before.imbalance);
  CHECK(r.after.max_received == r.before.max_received);
  CHECK(r.after.moe_layer_us == r.before.moe_layer_us);
  CHECK(r.after.step_time_us == r.before.step_time_us);
  CHECK(r.after.peak_bytes == r.before.peak_bytes);
  CHECK(r.extra_params_bytes == 0);
  CHECK(r.replica_grad_all_reduce.calls == 0);
}

TEST_CASE("replicas of a hot expert lower the imbalance and the MoE-layer time") {
  // hot:1:0.5: expert 0 takes half of the assignments (each token picks it once, top_k 2), so
  // without replicas rank 0 receives at least half of all rows: imbalance >= 0.5 x 4 = 2.
  Setup s = MakeSetup("hot:1:0.5");
  CHECK(s.before.max_imbalance >= 2.0);
  const RedundantExpertsReport r =
      AnalyzeRedundantExperts(s.plan, s.cluster, s.model, s.before, s.cost, s.memory, Options(4, EplbPolicy::kGlobal));
  CHECK(r.num_slots == 12);
  CHECK(r.slots_per_rank == 3);
  // Global replication on shares (0.5, 1/14 x 7): 0.5/c > 1/14 while c < 7, so all 4 extra
  // replicas go to expert 0 (5 replicas of 0.1 each).
  CHECK(r.placements[0].replica_count[0] == 5);
  CHECK(r.after.imbalance < r.before.imbalance);
  CHECK(r.after.moe_layer_us < r.before.moe_layer_us);
}

TEST_CASE("the extra slots cost routed-expert memory in proportion R / E") {
  Setup s = MakeSetup("uniform");
  const RedundantExpertsReport r =
      AnalyzeRedundantExperts(s.plan, s.cluster, s.model, s.before, s.cost, s.memory, Options(4, EplbPolicy::kGlobal));
  // One routed expert: gate_up [2 x 32, 64] + down [64, 32] = 6144 elements; each rank holds 2
  // experts x 2 layers = 24576 elements, kept in fp32 by FSDP (4 B): 98304 B. 12 slots instead
  // of 8 is 4/8 more: 49152 B of parameters, 49152 B of fp32 gradients, 2 x 49152 B of AdamW
  // moments.
  CHECK(s.memory.stages[0].worst.params_by_role.at("routed_experts") == 98304);
  CHECK(r.extra_params_bytes == 49152);
  CHECK(r.extra_grads_bytes == 49152);
  CHECK(r.extra_optimizer_bytes == 98304);
  CHECK(r.after.peak_bytes == r.before.peak_bytes + 49152 * 4);
}

TEST_CASE("with a routing sample sizing the received rows, the peak after holds the rows received over the replicas") {
  // Issue 31 new-user check: the peak after kept the activations and all-to-all buffers of the
  // rows rank 0 received before the replicas (hot:1:0.5: over half of them), so the budget check
  // after was pessimistic. As simulate --routing does, the plan's imbalance is the sample's.
  Setup s = MakeSetup("hot:1:0.5");
  s.plan.training.imbalance = SampleImbalance(s.before);
  s.memory = ComputeMemory(s.plan);
  const RedundantExpertsReport sized = AnalyzeRedundantExperts(s.plan, s.cluster, s.model, s.before, s.cost, s.memory,
                                                               Options(4, EplbPolicy::kGlobal), ComputeModel::kKernels, true);
  CHECK(sized.after.max_received < sized.before.max_received);
  // The extra slots as in "the extra slots cost routed-expert memory": 49152 B of parameters and
  // of gradients, 98304 B of AdamW moments = 4 x 49152 B; the rest is the plan's memory with the
  // imbalance of the routing over the replicas.
  Plan even = s.plan;
  even.training.imbalance = SampleImbalance(sized.routing);
  CHECK(even.training.imbalance < s.plan.training.imbalance);
  CHECK(sized.after.peak_bytes == ComputeMemory(even).stages[0].worst.peak_bytes + 4 * 49152);
  CHECK(sized.after.peak_bytes < sized.before.peak_bytes + 4 * 49152);
  // Without (the memory sized by --imbalance or balanced), the peak after is the peak before plus
  // the extra slots.
  const RedundantExpertsReport plain =
      AnalyzeRedundantExperts(s.plan, s.cluster, s.model, s.before, s.cost, s.memory, Options(4, EplbPolicy::kGlobal));
  CHECK(plain.after.peak_bytes == plain.before.peak_bytes + 4 * 49152);
}

TEST_CASE("replicated experts all-reduce their gradients once per step") {
  // hot:1:0.5, R = 4, global: expert 0 gets 5 replicas of load 0.1 (see above); packing 3 slots
  // per rank puts them on ranks 0, 1, 2, 3 and 0 again (all at 0.1: lowest index), so 4 distinct
  // ranks all-reduce it: 2 (4 - 1) / 4 = 1.5 slot gradients on the wire per rank and layer. A
  // slot's gradient: 6144 elements in fp32 = 24576 B; 2 MoE layers: 1.5 x 24576 x 2 = 73728 B.
  Setup s = MakeSetup("hot:1:0.5");
  const RedundantExpertsReport r =
      AnalyzeRedundantExperts(s.plan, s.cluster, s.model, s.before, s.cost, s.memory, Options(4, EplbPolicy::kGlobal));
  const CommEntry& c = r.replica_grad_all_reduce;
  CHECK(c.group_size == 4);
  CHECK(c.calls == 2);
  CHECK(c.bytes_per_call == 24576);
  CHECK(c.wire_bytes == 73728);
  CHECK(c.cross_node_bytes == 0);  // 4 GPUs, one node
  CHECK(r.replica_grad_all_reduce_us > 0);
}

TEST_CASE("replicas that share a rank need no all-reduce") {
  // Uniform load, R = 8 on ep 4: every expert gets 2 replicas, listed [0..7, 0..7], all of load
  // 1/16; packing 4 per rank in index order puts items i and i + 8 (the same expert) on rank i mod
  // 4: both replicas of every expert sit on one rank and are summed locally.
  Setup s = MakeSetup("uniform");
  const RedundantExpertsReport r =
      AnalyzeRedundantExperts(s.plan, s.cluster, s.model, s.before, s.cost, s.memory, Options(8, EplbPolicy::kGlobal));
  for (const auto& p : r.placements) CHECK(p.replica_count == std::vector<int64_t>(8, 2));
  CHECK(r.replica_grad_all_reduce.calls == 0);
  CHECK(r.replica_grad_all_reduce.wire_bytes == 0);
}

TEST_CASE("redundant experts with the deredundency dispatcher are rejected") {
  Setup s = MakeSetup("uniform");
  s.plan.training.dispatcher = Dispatcher::kDeredundency;
  CHECK_THROWS_WITH_AS(AnalyzeRedundantExperts(s.plan, s.cluster, s.model, s.before, s.cost, s.memory, Options(4, EplbPolicy::kGlobal)),
                       doctest::Contains("--dispatcher deredundency"), Error);
}

TEST_CASE("a slot count ep does not divide is rejected naming --redundant-experts") {
  Setup s = MakeSetup("uniform");
  // 8 + 2 = 10 slots over ep 4.
  CHECK_THROWS_WITH_AS(AnalyzeRedundantExperts(s.plan, s.cluster, s.model, s.before, s.cost, s.memory, Options(2, EplbPolicy::kGlobal)),
                       doctest::Contains("--redundant-experts (2)"), Error);
}

std::string WriteTmp(const std::string& name, const std::string& text) {
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string path = std::string(dir ? dir : "/tmp") + "/" + name;
  std::ofstream(path) << text;
  return path;
}

TEST_CASE("a placement file gives one map, or a simulate report's map of a sampled layer") {
  CHECK(ReadPlacementFile(WriteTmp("p.json", R"({"physical_to_logical": [1, 0, 1]})"), 5, 3, 2) == std::vector<int64_t>{1, 0, 1});
  const std::string report =
      WriteTmp("sim.json", R"({"redundant_experts": {"layers": [{"physical_to_logical": [0, 1]}, {"physical_to_logical": [1, 0]}]}})");
  CHECK(ReadPlacementFile(report, 1, 2, 2) == std::vector<int64_t>{1, 0});
  // The report sampled 2 layers: MoE layer 2 is not in it.
  CHECK_THROWS_WITH_AS(ReadPlacementFile(report, 2, 2, 2), doctest::Contains("/redundant_experts/layers: has no entry for MoE layer 2"),
                       Error);
  CHECK_THROWS_WITH_AS(ReadPlacementFile(WriteTmp("q.json", R"({"phys": [0]})"), 0, 1, 1), doctest::Contains("physical_to_logical"), Error);
  // A report priced for another layout is refused: made at ep 4 for 8 experts.
  const std::string other = WriteTmp("sim4.json", R"({"parallel": {"ep": 4}, "model": {"num_experts": 8},
      "redundant_experts": {"layers": [{"physical_to_logical": [0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3]}]}})");
  CHECK(ReadPlacementFile(other, 0, 4, 8).size() == 12);
  CHECK_THROWS_WITH_AS(ReadPlacementFile(other, 0, 2, 8),
                       doctest::Contains("/parallel/ep: the report's placement was made for ep 4, the run has ep 2"), Error);
  CHECK_THROWS_WITH_AS(ReadPlacementFile(other, 0, 4, 16),
                       doctest::Contains("/model/num_experts: the report's model has 8 routed experts, the run's model 16"), Error);
}

}  // namespace
}  // namespace dockyard
