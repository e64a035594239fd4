// dockyard-run's allgather dispatcher on the CPU backend: 0 wrong against the reference, and the
// rows each rank's all-gather delivers equal the planner's allgather buffer (ComputeComm's
// allgather_dispatch_all_gather entry, accounting/comm.h AllGatherDispatchBytes) exactly.
#include <doctest/doctest.h>

#include "planner/accounting/comm.h"
#include "planner/base/error.h"
#include "runtime/cpu/cpu_backend.h"
#include "runtime/run.h"
#include "runtime/test_layouts.h"

using namespace dockyard;
using namespace dockyard::runtime;
using namespace dockyard::runtime::testing;

namespace {

Plan AllGatherPlan(const ModelSpec& m, int64_t world, int64_t ep, int64_t tokens) {
  ParallelDimsOptions d;
  d.world_size = world;
  d.ep = ep;
  TrainingConfig t;
  dockyard::Machine machine;
  machine.gpus_per_node = 4;
  t.dispatcher = Dispatcher::kAllGather;
  t.seq_len = tokens;  // the plan's tokens per rank = the run's
  return BuildPlan(m, d, t, machine);
}

RunReport RunAllGather(const Plan& plan, const std::string& routing, int64_t tokens) {
  RunOptions o;
  o.tokens_per_rank = tokens;
  o.iters = 1;
  o.warmup = 0;
  if (!routing.empty()) o.routing = ParseRoutingSpec(routing);
  cpu::CpuBackend backend;
  return RunMoeLayer(plan, o, backend);
}

}  // namespace

TEST_CASE("allgather on 2 nodes x 4 ranks: 0 wrong, and every rank gathers the planner's buffer") {
  // 8 ranks x 48 tokens: each all-gather delivers 8 x 48 = 384 rows of hidden 64; the planner's
  // buffer is AllGatherDispatchBytes(8, 48, 64, 2) = 8 x 48 x 64 x 2 B = 49152 B = 384 rows x 128 B.
  const Plan plan = AllGatherPlan(TinyMoe(16, 4), 8, 8, 48);
  const RunReport r = RunAllGather(plan, "uniform", 48);
  CHECK(r.passed());
  CHECK(r.checked > 0);
  CHECK(r.max_abs_error < 1e-4);
  const CommReport comm = ComputeComm(plan, 0);
  int64_t planned = -1;
  for (const CommEntry& e : comm.entries) {
    if (e.purpose == "allgather_dispatch_all_gather") planned = e.bytes_per_call;
  }
  CHECK(planned == 49152);
  const int64_t row_bytes = 64 * 2;
  int64_t computed = 0;
  for (const RankReport& rank : r.ranks) {
    CHECK(rank.gathered_rows == 384);
    CHECK(rank.gathered_rows * row_bytes == planned);
    computed += rank.received_rows;
  }
  CHECK(computed == 8 * 48 * 4);  // every (token, slot) pair computed once: ep x T x top_k
}

TEST_CASE("allgather with the model's own group-limited router and a shared expert: 0 wrong") {
  ModelSpec m = TinyDeepSeek();  // 16 experts, top-4, sigmoid + bias, shared expert
  m.moe.n_group = 4;
  m.moe.topk_group = 2;
  const RunReport r = RunAllGather(AllGatherPlan(m, 8, 8, 40), "", 40);
  CHECK(r.passed());
  CHECK(r.checked > 0);
}

TEST_CASE("allgather refuses unequal token blocks by name") {
  RunOptions o;
  o.tokens_per_source = {8, 8, 8, 6};
  CHECK_THROWS_WITH_AS(MakeRunConfig(AllGatherPlan(TinyMoe(8, 2), 4, 4, 8), o),
                       doctest::Contains("the allgather dispatcher all-gathers equal token blocks"), Error);
}
