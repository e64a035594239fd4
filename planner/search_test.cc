// Layout search: only valid layouts, never over budget, and on a small world the same set and
// the same winner as a brute force over every combination of degrees.
#include "planner/search.h"

#include <set>
#include <tuple>

#include <doctest/doctest.h>

#include "planner/error.h"
#include "planner/memory.h"
#include "planner/plan.h"
#include "planner/workload.h"
#include "tests/test_models.h"

using dockyard::SearchOptions;
using Key = std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t>;

namespace {

SearchOptions SmallSearch() {
  SearchOptions o;
  o.world_size = 8;
  o.training.seq_len = 256;
  o.training.gpu_memory_gib = 1000;  // everything fits
  o.top = 100000;
  o.routing_layers = 1;
  return o;
}

}  // namespace

TEST_CASE("Search on 8 GPUs finds exactly the layouts a brute force over all degrees accepts") {
  const auto model = dockyard::testing::TinyMixtral();  // 8 experts, 4 heads, 2 KV heads, 2 layers
  SearchOptions o = SmallSearch();
  const auto result = dockyard::SearchLayouts(model, o);
  // Brute force: every pp, dp_replicate, cp, tp, ep, etp in 1..8 (dp_shard inferred), tp <= 8 GPUs per node.
  std::set<Key> brute;
  double best = 0;
  Key best_key;
  for (int64_t pp = 1; pp <= 8; ++pp)
    for (int64_t dpr = 1; dpr <= 8; ++dpr)
      for (int64_t cp = 1; cp <= 8; ++cp)
        for (int64_t tp = 1; tp <= 8; ++tp)
          for (int64_t ep = 1; ep <= 8; ++ep)
            for (int64_t etp = 1; etp <= 8; ++etp) {
              dockyard::ParallelDimsOptions d;
              d.world_size = 8;
              d.pp = pp;
              d.dp_replicate = dpr;
              d.cp = cp;
              d.tp = tp;
              d.ep = ep;
              d.etp = etp;
              dockyard::TrainingConfig t = o.training;
              dockyard::Plan plan;
              try {
                plan = dockyard::BuildPlan(model, d, t);
              } catch (const dockyard::Error&) {
                continue;
              }
              Key k{pp, dpr, plan.dims.dp_shard, cp, tp, ep, etp};
              brute.insert(k);
              auto w = dockyard::ComputeWorkload(plan);
              auto routing = dockyard::SampleRouting(o.routing, 8, 2, ep, w.routed_tokens, 1);
              auto cost = dockyard::SimulateStep(plan, o.cluster, routing);
              if (cost.tokens_per_s_per_gpu > best) {
                best = cost.tokens_per_s_per_gpu;
                best_key = k;
              }
            }
  std::set<Key> searched;
  for (const auto& r : result.top) {
    const auto& d = r.layout.dims;
    searched.insert({d.pp, d.dp_replicate, d.dp_shard, d.cp, d.tp, d.ep, d.etp});
  }
  CHECK(result.ranked == static_cast<int64_t>(brute.size()));
  CHECK(searched == brute);
  REQUIRE_FALSE(result.top.empty());
  const auto& d = result.top.front().layout.dims;
  CHECK(Key{d.pp, d.dp_replicate, d.dp_shard, d.cp, d.tp, d.ep, d.etp} == best_key);
  CHECK(result.top.front().tokens_per_s_per_gpu == doctest::Approx(best));
}

TEST_CASE("Search never returns a layout over the memory budget") {
  const auto model = dockyard::LoadModel("testdata/hf/qwen3-30b-a3b.json");
  SearchOptions o;
  o.world_size = 16;
  o.training.seq_len = 4096;
  o.training.gpu_memory_gib = 60;
  o.top = 1000;
  o.routing_layers = 1;
  const auto result = dockyard::SearchLayouts(model, o);
  CHECK(result.over_budget > 0);  // e.g. ep 1 keeps all 28.99B expert params sharded 16 ways plus activations
  CHECK(result.ranked > 0);
  for (const auto& r : result.top) CHECK(static_cast<double>(r.peak_bytes) <= 60.0 * 1073741824.0);
  CHECK(result.enumerated == result.invalid + result.over_budget + result.ranked);
}

TEST_CASE("Search rejects a world size out of range") {
  SearchOptions o;
  o.world_size = 0;
  CHECK_THROWS_WITH_AS(dockyard::SearchLayouts(dockyard::testing::TinyMixtral(), o), doctest::Contains("world_size must be in"),
                       dockyard::Error);
}
