// dockyard-run's deepep dispatcher on the CPU backend: 0 wrong against the reference, and the
// tokens each rank sends per link level equal the planner's FlexDispatchBytes rows exactly.
#include <doctest/doctest.h>

#include "planner/cost/deepep.h"
#include "planner/routing/flex_counts.h"
#include "runtime/cpu/cpu_backend.h"
#include "runtime/run.h"
#include "runtime/test_layouts.h"

using namespace dockyard;
using namespace dockyard::runtime;
using namespace dockyard::runtime::testing;

namespace {

RunReport RunDeepEp(const ModelSpec& m, int64_t world, int64_t ep, int64_t gpus_per_node, const std::string& routing, int64_t tokens) {
  ParallelDimsOptions d;
  d.world_size = world;
  d.ep = ep;
  TrainingConfig t;
  dockyard::Machine machine;
  machine.gpus_per_node = gpus_per_node;
  t.dispatcher = Dispatcher::kDeepEp;
  // HybridEP: the backend that runs any whole nodes (here of 2 or 4); DeepEP's own kernels need
  // nodes of 8 NVLink peers (planner/model/flex_backend_limits.h). The emulation is the same.
  t.moe_flex_dispatcher_backend = FlexBackend::kHybridEp;
  const Plan plan = BuildPlan(m, d, t, machine);
  RunOptions o;
  o.tokens_per_rank = tokens;
  o.iters = 1;
  o.warmup = 0;
  if (!routing.empty()) o.routing = ParseRoutingSpec(routing);
  cpu::CpuBackend backend;
  return RunMoeLayer(plan, o, backend);
}

// Every rank's measured rows against the planner's link matrices (in tokens: bytes_per_token 1).
void CheckRowsEqualPlanner(const RunReport& r, int64_t gpus_per_node) {
  const RunConfig& c = r.config;
  REQUIRE(c.routing_model);
  std::vector<int64_t> group = c.ranks.front().ep_group;
  const FlexCounts counts = SampleFlexCounts(*c.routing_model, c.routing_layer, group, gpus_per_node, c.options.tokens_per_rank);
  const LinkBytes planned = FlexDispatchBytes(counts, 1.0);
  const int64_t n = static_cast<int64_t>(group.size());
  int64_t network = 0, nvlink = 0;
  for (const RankReport& rank : r.ranks) {
    const int64_t s = rank.ep_index;
    REQUIRE(static_cast<int64_t>(rank.flex_network_rows.size()) == n);
    for (int64_t d = 0; d < n; ++d) {
      CHECK(static_cast<double>(rank.flex_network_rows[d]) == planned.network[s * n + d]);
      CHECK(static_cast<double>(rank.flex_nvlink_rows[d]) == planned.nvlink[s * n + d]);
      network += rank.flex_network_rows[d];
      nvlink += rank.flex_nvlink_rows[d];
    }
  }
  CHECK(network > 0);
  CHECK(nvlink > 0);
}

}  // namespace

TEST_CASE("deepep on 2 nodes x 4 ranks: 0 wrong, and the measured link rows are the planner's") {
  const RunReport r = RunDeepEp(TinyMoe(16, 4), 8, 8, 4, "uniform", 48);
  CHECK(r.passed());
  CHECK(r.checked > 0);
  CHECK(r.max_abs_error < 1e-4);
  CheckRowsEqualPlanner(r, 4);
}

TEST_CASE("deepep with group-limited routing and the model's own router: 0 wrong") {
  ModelSpec m = TinyDeepSeek();  // 16 experts, top-4, sigmoid + bias, shared expert
  m.moe.n_group = 4;
  m.moe.topk_group = 2;
  const RunReport own = RunDeepEp(m, 8, 8, 4, "", 40);
  CHECK(own.passed());
  CHECK(own.checked > 0);
  const RunReport sampled = RunDeepEp(m, 8, 8, 2, "zipf:1.2", 40);  // 4 nodes of 2
  CHECK(sampled.passed());
  CheckRowsEqualPlanner(sampled, 2);
}

TEST_CASE("deepep on one node: everything over NVLink, no network rows") {
  const RunReport r = RunDeepEp(TinyMoe(8, 2), 4, 4, 8, "uniform", 32);
  CHECK(r.passed());
  for (const RankReport& rank : r.ranks) {
    for (int64_t v : rank.flex_network_rows) CHECK(v == 0);
  }
}
