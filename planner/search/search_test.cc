// Layout search: only valid layouts, never over budget, and on a small world the same set and
// the same winner as a brute force over every combination of degrees.
#include "planner/search/search.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <string>
#include <tuple>

#include <doctest/doctest.h>
#include <fmt/format.h>

#include "planner/base/error.h"
#include "planner/search/layout_eval.h"
#include "planner/accounting/memory.h"
#include "planner/layout/plan.h"
#include "planner/search/every_candidate.h"
#include "planner/cost/network.h"
#include "planner/accounting/workload.h"
#include "planner/routing/plan_routing.h"
#include "planner/model/model_file.h"
#include "tests/test_models.h"

using dockyard::SearchOptions;
using dockyard::testing::FullSearch;
using dockyard::testing::SmallSearch;
using Key = std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t>;

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
    searched.insert({d.pp, d.dp_replicate, d.dp_shard, d.cp, d.tp, d.ep, EtpOf(d)});
  }
  CHECK(result.ranked == static_cast<int64_t>(brute.size()));
  CHECK(searched == brute);
  REQUIRE_FALSE(result.top.empty());
  const auto& d = result.top.front().layout.dims;
  CHECK(Key{d.pp, d.dp_replicate, d.dp_shard, d.cp, d.tp, d.ep, EtpOf(d)} == best_key);
  CHECK(result.top.front().tokens_per_s_per_gpu == doctest::Approx(best));
}

TEST_CASE("Search never returns a layout over the memory budget") {
  const auto model = dockyard::LoadModel("testdata/hf/qwen3-30b-a3b.json");
  SearchOptions o;
  o.world_size = 16;
  o.training.seq_len = 4096;
  o.gpu_memory_gib = 60;
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

TEST_CASE("Search results are those of the plan path: counts and top layouts on Qwen3-30B-A3B, 64 GPUs") {
  const auto model = dockyard::LoadModel("testdata/hf/qwen3-30b-a3b.json");
  SearchOptions o = FullSearch(64);
  o.routing_layers = 1;
  o.top = 50;
  o.gpu_memory_gib = 20;  // some layouts over budget
  const auto result = dockyard::SearchLayouts(model, o);
  // The reference path over every candidate, ranked the same way.
  dockyard::LayoutEvaluator evaluator(model, o);
  int64_t invalid = 0, over = 0;
  std::vector<std::pair<double, int64_t>> ranked;  // (tokens/s per GPU, peak bytes)
  for (const auto& c : dockyard::EnumerateLayouts(model, o)) {
    const auto e = evaluator.EvaluateReference(c);
    if (e.status == dockyard::LayoutEvaluation::Status::kInvalid)
      ++invalid;
    else if (e.status == dockyard::LayoutEvaluation::Status::kOverBudget)
      ++over;
    else
      ranked.push_back({e.tokens_per_s_per_gpu, e.peak_bytes});
  }
  CHECK(result.enumerated == 1865);
  CHECK(result.over_budget > 0);
  CHECK(result.invalid == invalid);
  CHECK(result.over_budget == over);
  CHECK(result.ranked == static_cast<int64_t>(ranked.size()));
  std::sort(ranked.begin(), ranked.end(),
            [](const auto& a, const auto& b) { return std::make_tuple(-a.first, a.second) < std::make_tuple(-b.first, b.second); });
  REQUIRE(result.top.size() == 50);
  for (size_t i = 0; i < result.top.size(); ++i) {
    CHECK(result.top[i].tokens_per_s_per_gpu == ranked[i].first);
    CHECK(result.top[i].peak_bytes == ranked[i].second);
  }
}

TEST_CASE("Search rows against the best: the ratio, its 80 % interval, ties within the error of a difference") {
  const auto model = dockyard::LoadModel("testdata/hf/qwen3-30b-a3b.json");
  SearchOptions o = FullSearch(64);
  o.routing_layers = 1;
  o.top = 50;
  const auto result = dockyard::SearchLayouts(model, o);
  REQUIRE(result.top.size() == 50);
  const double best = result.top.front().step_time_us;
  // exp(1.2816 x 0.061) = 1.0813 (prediction_error.h): tied iff step / best <= 1.0813.
  const double factor = std::exp(dockyard::kZ80 * dockyard::kPairLogErrorSd);
  CHECK(factor == doctest::Approx(1.0813).epsilon(1e-3));
  int64_t tied = 0, apart = 0;
  for (const auto& x : result.top) {
    CHECK(x.vs_best.ratio == doctest::Approx(x.step_time_us / best));
    CHECK(x.vs_best.low80 == doctest::Approx(x.vs_best.ratio / factor));
    CHECK(x.vs_best.tied == (x.step_time_us / best <= factor));
    (x.vs_best.tied ? tied : apart) += 1;
  }
  CHECK(tied > 1);  // the best and at least one row within 9 % of it
  // The text marks ties with "=" and says how many; the JSON carries each row's interval.
  const std::string text = dockyard::SearchResultToText(result);
  CHECK(text.find("      best ") != std::string::npos);
  CHECK(text.find(fmt::format("{} of the rows shown", tied - 1)) != std::string::npos);
  const dockyard::Json j = dockyard::RankedLayoutToJson(result.top[1]);
  CHECK(j.at("vs_best").at("ratio").get<double>() == doctest::Approx(result.top[1].vs_best.ratio));
  CHECK(j.at("vs_best").at("interval80").size() == 2);
  CHECK(j.at("vs_best").at("tied").get<bool>() == result.top[1].vs_best.tied);
}

TEST_CASE("the deredundency dispatcher's default oep: the nodes an EP group spans, rounded up to a divisor of ep") {
  dockyard::TrainingConfig t;
  dockyard::Machine machine;
  machine.gpus_per_node = 8;
  CHECK(dockyard::DeredundencyOep(t, machine, 64) == 8);  // 64 / 8
  CHECK(dockyard::DeredundencyOep(t, machine, 16) == 2);
  CHECK(dockyard::DeredundencyOep(t, machine, 4) == 1);    // inside one node
  CHECK(dockyard::DeredundencyOep(t, machine, 12) == 2);   // ceil(12 / 8) = 2 divides 12
  CHECK(dockyard::DeredundencyOep(t, machine, 60) == 10);  // ceil(60 / 8) = 8 does not divide 60; 9 neither; 10 does
  CHECK(dockyard::DeredundencyOep(t, machine, 7) == 1);    // ceil(7 / 8) = 1: inside one node
  machine.gpus_per_node = 6;
  CHECK(dockyard::DeredundencyOep(t, machine, 32) == 8);  // ceil(32 / 6) = 6 and 7 do not divide 32; 8 does
  t.oep = 4;
  CHECK(dockyard::DeredundencyOep(t, machine, 32) == 4);  // given: used as is (validated elsewhere)
}

TEST_CASE("Search ranks the opt-in deepep and allgather dispatchers for ep > 1 only, priced as simulate prices them") {
  const auto model = dockyard::testing::TinyMixtral();
  SearchOptions o = SmallSearch();
  o.cluster.gpus_per_node = 4;  // 8 GPUs on 2 nodes: ep 8 spans both
  const auto plain = dockyard::SearchLayouts(model, o);
  o.include_deepep = true;
  o.include_allgather = true;
  // Megatron's default backend, DeepEP, cannot run ep 8 over two nodes of 4 NVLink peers (it needs
  // 8 per node: DeepEP csrc/legacy/buffer.hpp, flex_backend_limits.h): no such deepep row ranks.
  const auto deepep_backend = dockyard::SearchLayouts(model, o);
  int64_t deepep_rows = 0;
  for (const auto& x : deepep_backend.top) {
    if (x.layout.dispatcher != dockyard::Dispatcher::kDeepEp) continue;
    ++deepep_rows;
    CHECK(x.layout.dims.ep * dockyard::EtpOf(x.layout.dims) <= 4);
    CHECK(x.flex_backend == "deepep");
  }
  CHECK(deepep_rows > 0);
  // HybridEP spans the two nodes (8 = 2 x 4 ranks per NVLink domain: hybrid_ep_buffer.py).
  o.training.moe_flex_dispatcher_backend = dockyard::FlexBackend::kHybridEp;
  const auto result = dockyard::SearchLayouts(model, o);
  int64_t deepep = 0, allgather = 0, ep_gt_1 = 0;
  for (const auto& c : dockyard::EnumerateLayouts(model, o)) {
    if (c.dispatcher == dockyard::Dispatcher::kAllToAll && c.dims.ep > 1) ++ep_gt_1;
    if (c.dispatcher == dockyard::Dispatcher::kDeepEp) {
      ++deepep;
      CHECK(c.dims.ep > 1);
    }
    if (c.dispatcher == dockyard::Dispatcher::kAllGather) {
      ++allgather;
      CHECK(c.dims.ep > 1);
    }
  }
  CHECK(deepep == ep_gt_1);  // one deepep and one allgather candidate per all_to_all one with ep > 1
  CHECK(allgather == ep_gt_1);
  CHECK(result.enumerated == plain.enumerated + 2 * ep_gt_1);
  // A ranked deepep layout has the step time of BuildPlan + SampleRoutingForPlan + SimulateStep.
  bool seen = false;
  for (const auto& x : result.top) {
    if (x.layout.dispatcher != dockyard::Dispatcher::kDeepEp || x.layout.dims.ep != 8) continue;
    CHECK(x.flex_backend == "hybridep");
    dockyard::TrainingConfig t = o.training;
    t.dispatcher = dockyard::Dispatcher::kDeepEp;
    dockyard::Machine machine;
    machine.gpus_per_node = 4;
    const dockyard::Plan plan = dockyard::BuildPlan(model, x.layout.dims, t, machine);
    const auto cost = dockyard::SimulateStep(plan, o.cluster, dockyard::SampleRoutingForPlan(plan, o.routing, 1), o.compute_model);
    CHECK(x.step_time_us == cost.step_time_us);
    seen = true;
    break;
  }
  CHECK(seen);
}

TEST_CASE("A search holds layouts to --gpu-memory-gib, else the cluster's memory_gib; its plans take the cluster's node size") {
  SearchOptions o = SmallSearch();  // gpu_memory_gib 1000 on h100-sxm (80 GiB per GPU)
  CHECK(dockyard::SearchBudgetGib(o) == 1000.0);
  CHECK(dockyard::SearchPlanMachine(o).gpu_memory_gib == 1000.0);
  o.gpu_memory_gib = 0;
  CHECK(dockyard::SearchBudgetGib(o) == 79.6);                  // h100-sxm memory_gib (cluster.h: usable GPU memory)
  CHECK(dockyard::SearchPlanMachine(o).gpu_memory_gib == 0.0);  // the plans as plan would build them: no budget
  o.cluster = dockyard::ClusterPreset("gb200-nvl72");
  CHECK(dockyard::SearchPlanMachine(o).gpus_per_node == 72);  // the NVLink domain, not the 4-GPU tray
}
