// The router's expert choice with group-limited routing (router.h), by hand, and whole layers of
// a group-limited model run on the CPU backend against the reference.
#include "runtime/router.h"

#include <set>

#include <doctest/doctest.h>

#include "runtime/cpu/cpu_backend.h"
#include "runtime/cpu/cpu_ops.h"
#include "runtime/run.h"
#include "runtime/test_layouts.h"

using namespace dockyard;
using namespace dockyard::runtime;
using namespace dockyard::runtime::testing;

TEST_CASE("router group selection by hand: the bias and the groups pick, the unbiased scores weigh") {
  // 8 experts in 4 groups of 2, top-2, keep 2 groups (DeepSeek-V3's rule at a small size).
  RunConfig c;
  c.num_experts = 8;
  c.top_k = 2;
  c.score_correction_bias = true;
  c.norm_topk_prob = true;
  c.routed_scaling_factor = 2.5;
  c.group_limit = GroupLimit{4, 2, true};
  const std::vector<float> scores = {0.9f, 0.1f, 0.5f, 0.6f, 0.3f, 0.2f, 0.8f, 0.25f};
  const std::vector<float> bias = {0, 0, 0, 0, 0, 0.5f, 0, 0};
  // select = scores + bias = 0.9 0.1 | 0.5 0.6 | 0.3 0.7 | 0.8 0.25
  // top-2 sums per group: 1.0, 1.1, 1.0, 1.05 -> keep groups 1 and 3
  // top-2 of {0.5, 0.6, 0.8, 0.25} -> experts 6 (0.8), 3 (0.6); expert 0 (0.9, the best single
  // score) is outside the kept groups, and expert 5 (0.7 only through its bias) too.
  cpu::CpuOps ops;
  std::vector<float> select(8);
  std::vector<int64_t> topk(2);
  SelectExperts(ops, c, scores.data(), bias.data(), 1, select.data(), topk.data());
  CHECK(topk == std::vector<int64_t>{6, 3});
  // Weights from the unbiased scores: 0.8 / 1.4 * 2.5 = 1.4285714, 0.6 / 1.4 * 2.5 = 1.0714286.
  std::vector<float> w(2);
  ops.RouterWeights(scores.data(), topk.data(), 1, 8, 2, c.norm_topk_prob, 2.5f, w.data());
  CHECK(w[0] == doctest::Approx(1.4285714).epsilon(1e-6));
  CHECK(w[1] == doctest::Approx(1.0714286).epsilon(1e-6));
  // Without the group limit: experts 0 (0.9) and 6 (0.8).
  c.group_limit = GroupLimit{};
  SelectExperts(ops, c, scores.data(), bias.data(), 1, select.data(), topk.data());
  CHECK(topk == std::vector<int64_t>{0, 6});
  // No bias, group_limited_greedy (DeepSeek-V2: group score = max): 0.9, 0.6, 0.3, 0.8 -> keep
  // groups 0 and 3 -> experts 0 (0.9), 6 (0.8).
  c.score_correction_bias = false;
  c.group_limit = GroupLimit{4, 1, false};  // keep 1 group: group 0 -> experts 0, 1
  SelectExperts(ops, c, scores.data(), nullptr, 1, select.data(), topk.data());
  CHECK(topk == std::vector<int64_t>{0, 1});
}

namespace {

ModelSpec TinyGroupedDeepSeek() {
  ModelSpec m = TinyDeepSeek();  // 16 experts, top-4, sigmoid, bias, renormalized x 2.5
  m.moe.n_group = 4;             // groups of 4 experts, each on 2 EP ranks at ep 8
  m.moe.topk_group = 2;
  return m;
}

RunReport RunCpu(const Plan& plan, RunOptions o) {
  o.iters = 1;
  o.warmup = 0;
  cpu::CpuBackend backend;
  return RunMoeLayer(plan, o, backend);
}

}  // namespace

TEST_CASE("a group-limited model runs with 0 wrong, its own router and the sampler's routing") {
  const Plan plan = MakePlan(TinyGroupedDeepSeek(), 8, 8);
  RunOptions o;
  o.tokens_per_rank = 64;
  const RunReport own = RunCpu(plan, o);
  CHECK(own.config.group_limit.active());
  CHECK(own.passed());
  CHECK(own.checked > 0);
  o.routing = ParseRoutingSpec("zipf:1.2");
  const RunReport sampled = RunCpu(plan, o);
  CHECK(sampled.passed());
  CHECK(sampled.checked > 0);
  // The routing really is group-limited: the same model without the limit routes differently.
  const RunReport free = RunCpu(MakePlan(TinyDeepSeek(), 8, 8), RunOptions{o});
  CHECK(free.passed());
  CHECK(free.tokens_per_expert != sampled.tokens_per_expert);
}
