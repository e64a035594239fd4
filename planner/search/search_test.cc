// Layout search: only valid layouts, never over budget, and on a small world the same set and
// the same winner as a brute force over every combination of degrees.
#include "planner/search/search.h"

#include <algorithm>
#include <set>
#include <string>
#include <tuple>

#include <doctest/doctest.h>

#include "planner/base/error.h"
#include "planner/search/layout_eval.h"
#include "planner/accounting/memory.h"
#include "planner/layout/plan.h"
#include "planner/sim/network.h"
#include "planner/accounting/workload.h"
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

// ---------------------------------------------------------------------------------------------
// The fast path (LayoutEvaluator::Evaluate, per parameter class) against the reference path
// (BuildPlan + ComputeMemory + ComputeWorkload + SimulateStep) for EVERY candidate of a search:
// the same validity, degrees, worst peak bytes and, for every valid candidate (over budget or
// not), bit-identical step time, tokens/s per GPU and MFU and the same dominant phase.

namespace {

struct Coverage {
  int64_t candidates = 0, invalid = 0, over_budget = 0, ranked = 0, pp_gt_1 = 0, deredundency = 0, etp_gt_1 = 0, cp_gt_1 = 0;
  int64_t deepep = 0, allgather = 0, spanning_deepep = 0;  // valid candidates; deepep with an EP group over 2+ NVLink domains
  int64_t handed_to_reference = 0;                         // LayoutEvaluator::handed_to_reference
  int64_t flex_from_blocks = 0;                            // deepep groups counted from block counts (flex_blocks.h)
  int64_t routing_from_blocks = 0;                         // routing samples assembled from the same block counts
  std::set<std::string> dominant;
};

Coverage CompareEveryCandidate(const dockyard::ModelSpec& model, const SearchOptions& o) {
  using Status = dockyard::LayoutEvaluation::Status;
  dockyard::LayoutEvaluator evaluator(model, o);
  const std::vector<dockyard::LayoutCandidate> candidates = dockyard::EnumerateLayouts(model, o);
  evaluator.ExpectCandidates(candidates);  // as the search does: deepep groups read per-source block counts
  Coverage cov;
  for (const auto& c : candidates) {
    const auto& d = c.dims;
    CAPTURE(d.pp);
    CAPTURE(d.dp_replicate);
    CAPTURE(d.cp);
    CAPTURE(d.tp);
    CAPTURE(d.ep);
    CAPTURE(d.etp);
    CAPTURE(c.dispatcher);
    dockyard::CostBreakdown fast_detail, ref_detail;  // the search's row breakdown (Breakdown) is the fast path's
    const auto fast = evaluator.Evaluate(c, /*simulate_over_budget=*/true, &fast_detail);
    const auto ref = evaluator.EvaluateReference(c, /*simulate_over_budget=*/true, &ref_detail);
    ++cov.candidates;
    REQUIRE(fast.status == ref.status);
    if (ref.status == Status::kInvalid) {
      ++cov.invalid;
      continue;
    }
    (ref.status == Status::kOverBudget ? cov.over_budget : cov.ranked)++;
    cov.pp_gt_1 += d.pp > 1;
    cov.deredundency += c.dispatcher == "deredundency";
    cov.deepep += c.dispatcher == "deepep";
    cov.allgather += c.dispatcher == "allgather";
    cov.spanning_deepep += c.dispatcher == "deepep" && d.ep * d.etp > dockyard::NvlinkDomainGpus(o.cluster);
    cov.etp_gt_1 += d.etp > 1;
    cov.cp_gt_1 += d.cp > 1;
    CHECK(fast.dims.dp_shard == ref.dims.dp_shard);
    CHECK(fast.dims.efsdp == ref.dims.efsdp);
    CHECK(fast.peak_bytes == ref.peak_bytes);
    CHECK(ref.peak_bytes > 0);
    REQUIRE(fast.simulated);
    REQUIRE(ref.simulated);
    // Exact equality of doubles on purpose: the fast path must not change a single bit.
    CHECK(fast.step_time_us == ref.step_time_us);
    CHECK(fast.tokens_per_s_per_gpu == ref.tokens_per_s_per_gpu);
    CHECK(fast.mfu == ref.mfu);
    CHECK(fast.dominant_phase == ref.dominant_phase);
    CHECK(fast_detail.critical_path == ref_detail.critical_path);
    CHECK(fast_detail.critical_path_us == ref_detail.critical_path_us);
    CHECK(fast_detail.pipeline_bubble_us == ref_detail.pipeline_bubble_us);
    CHECK(fast_detail.optimizer_us == ref_detail.optimizer_us);
    REQUIRE(fast_detail.phases.size() == ref_detail.phases.size());
    for (size_t i = 0; i < ref_detail.phases.size(); ++i) {
      CHECK(fast_detail.phases[i].name == ref_detail.phases[i].name);
      CHECK(fast_detail.phases[i].time_us == ref_detail.phases[i].time_us);
      CHECK(fast_detail.phases[i].per_ep_rank_us == ref_detail.phases[i].per_ep_rank_us);
    }
    CHECK(ref.step_time_us > 0);
    CHECK(ref.tokens_per_s_per_gpu > 0);
    CHECK(!ref.dominant_phase.empty());
    cov.dominant.insert(ref.dominant_phase);
  }
  CHECK(evaluator.fallbacks() == 0);  // realistic models never get near the overflow guards
  cov.handed_to_reference = evaluator.handed_to_reference();
  cov.flex_from_blocks = evaluator.flex_from_blocks();
  cov.routing_from_blocks = evaluator.routing_from_blocks();
  return cov;
}

SearchOptions FullSearch(int64_t world) {
  SearchOptions o;
  o.world_size = world;
  o.routing_layers = 2;
  o.training.recompute = dockyard::Recompute::kFull;
  return o;
}

}  // namespace

TEST_CASE("LayoutEvaluator groups DeepSeek-V3's 1,250 tensors into two layer kinds and a few classes") {
  const auto model = dockyard::LoadModel("testdata/hf/deepseek-v3.json");
  const dockyard::LayoutEvaluator evaluator(model, FullSearch(256));
  // 3 dense layers and 58 MoE layers, each with the same tensors as the others of its kind.
  CHECK(evaluator.num_layer_kinds() == 2);
  // Dense layer: 2 norms (one class), q_a, q_a_layernorm, q_b, kv_a, kv_a_layernorm, kv_b, o,
  // gate and up (one class: same shape and tp_dim), down = 10 classes. MoE layer: the same 7
  // attention classes and the norm class, router gate, score-correction bias, experts gate_up and
  // down, shared-expert gate/up (one class) and down = 14. Embedding 1, root (final norm, lm_head) 2.
  CHECK(evaluator.num_classes() == 10 + 14 + 1 + 2);
}

TEST_CASE("Fast evaluation equals the plan path for every candidate: DeepSeek-V3 (dense + MoE layer kinds, MLA)") {
  const auto model = dockyard::LoadModel("testdata/hf/deepseek-v3.json");
  SUBCASE("128 GPUs, torchtitan, fsdp, full recompute, h200 budget") {
    SearchOptions o = FullSearch(128);
    o.cluster = dockyard::ClusterPreset("h200-sxm");
    const Coverage cov = CompareEveryCandidate(model, o);
    CHECK(cov.candidates == 3315);
    CHECK(cov.invalid > 0);
    CHECK(cov.over_budget > 0);  // 671B parameters: FSDP with 16 bytes each needs ~84 GB per GPU before activations
    CHECK(cov.ranked > 0);
    CHECK(cov.pp_gt_1 > 0);
    CHECK(cov.deredundency > 0);
    CHECK(cov.etp_gt_1 > 0);
    CHECK(cov.cp_gt_1 > 0);
    CHECK(cov.dominant.size() >= 3);  // several phases dominate some layout: the argmax is exercised
  }
  SUBCASE("256 GPUs, megatron convention (zero1), selective recompute, zipf routing") {
    SearchOptions o = FullSearch(256);
    o.convention = dockyard::Convention::kMegatron;
    o.training.recompute = dockyard::Recompute::kSelective;
    o.routing = dockyard::ParseRoutingSpec("zipf:1.2");
    const Coverage cov = CompareEveryCandidate(model, o);
    CHECK(cov.candidates == 2130);
    CHECK(cov.over_budget > 0);
    CHECK(cov.ranked > 0);
    CHECK(cov.deredundency > 0);
    CHECK(cov.pp_gt_1 > 0);
  }
}

TEST_CASE("Fast evaluation equals the plan path for every candidate: Qwen3-30B-A3B, Mixtral, gpt-oss-120b, OLMoE") {
  SUBCASE("Qwen3-30B-A3B on 8 GPUs, everything fits") {
    SearchOptions o = FullSearch(8);
    o.training.gpu_memory_gib = 1000;
    const Coverage cov = CompareEveryCandidate(dockyard::LoadModel("testdata/hf/qwen3-30b-a3b.json"), o);
    CHECK(cov.candidates == 158);
    CHECK(cov.over_budget == 0);
    CHECK(cov.ranked > 0);
  }
  SUBCASE("Qwen3-30B-A3B on 64 GPUs, ddp, 2 sequences of 1000 tokens per micro-batch") {
    SearchOptions o = FullSearch(64);
    o.training.dp_sharding = dockyard::DpSharding::kDdp;
    o.training.micro_batch_size = 2;
    o.training.seq_len = 1000;
    const Coverage cov = CompareEveryCandidate(dockyard::LoadModel("testdata/hf/qwen3-30b-a3b.json"), o);
    CHECK(cov.over_budget > 0);
    CHECK(cov.ranked > 0);
    CHECK(cov.pp_gt_1 > 0);
  }
  SUBCASE("Mixtral 8x7B on 64 GPUs, zero1, no recompute, 60 GiB budget") {
    SearchOptions o = FullSearch(64);
    o.training.dp_sharding = dockyard::DpSharding::kZero1;
    o.training.recompute = dockyard::Recompute::kNone;
    o.training.gpu_memory_gib = 60;
    const Coverage cov = CompareEveryCandidate(dockyard::LoadModel("testdata/hf/mixtral-8x7b.json"), o);
    CHECK(cov.over_budget > 0);
    CHECK(cov.ranked > 0);
  }
  SUBCASE("gpt-oss-120b on 128 GPUs (biases, sinks, interleaved gate/up), h200, 8 micro-batches, imbalance 1.3") {
    SearchOptions o = FullSearch(128);
    o.cluster = dockyard::ClusterPreset("h200-sxm");
    o.training.num_microbatches = 8;
    o.training.imbalance = 1.3;
    const Coverage cov = CompareEveryCandidate(dockyard::LoadModel("testdata/hf/gpt-oss-120b.json"), o);
    CHECK(cov.ranked > 0);
    CHECK(cov.deredundency > 0);
    CHECK(cov.pp_gt_1 > 0);
  }
  SUBCASE("OLMoE on 64 GPUs (full-width q/k norms), float32 params, bfloat16 grads, hot routing") {
    SearchOptions o = FullSearch(64);
    o.training.param_dtype = "float32";
    o.training.grad_dtype = "bfloat16";
    o.routing = dockyard::ParseRoutingSpec("hot:4:0.5");
    const Coverage cov = CompareEveryCandidate(dockyard::LoadModel("testdata/hf/olmoe-1b-7b-0125-instruct.json"), o);
    CHECK(cov.ranked > 0);
  }
  SUBCASE(
      "Qwen3-30B-A3B with tied embeddings (lm_head copy on the last stage and the embedding group's all-reduce "
      "when pp > 1), megatron, SGD, 16 GPUs") {
    auto model = dockyard::LoadModel("testdata/hf/qwen3-30b-a3b.json");
    model.tie_word_embeddings = true;
    SearchOptions o = FullSearch(16);
    o.convention = dockyard::Convention::kMegatron;
    o.training.optimizer = dockyard::Optimizer::kSgd;
    const Coverage cov = CompareEveryCandidate(model, o);
    CHECK(cov.pp_gt_1 > 0);
    CHECK(cov.ranked > 0);
  }
}

TEST_CASE("Fast evaluation equals the plan path for every candidate under FP8 (Megatron keeps FP8 weight copies, torchtitan none)") {
  // Qwen3-30B-A3B on 16 GPUs, --precision fp8: under megatron (TransformerEngine) every rank holds
  // an FP8 copy of its attention and MLP GEMM weights and saves FP8 linear inputs; under torchtitan
  // (torchao) neither (workload.h Fp8KeepsQuantizedTensors). Both paths must price that alike.
  const auto model = dockyard::LoadModel("testdata/hf/qwen3-30b-a3b.json");
  for (const auto convention : {dockyard::Convention::kMegatron, dockyard::Convention::kTorchtitan}) {
    for (const char* recipe : {"tensorwise", "blockwise"}) {
      CAPTURE(recipe);
      SearchOptions o = FullSearch(16);
      o.convention = convention;
      o.training.precision = "fp8";
      o.training.fp8_recipe = recipe;
      const Coverage cov = CompareEveryCandidate(model, o);
      CHECK(cov.ranked > 0);
      CHECK(cov.handed_to_reference == 0);
    }
  }
}

TEST_CASE("Fast evaluation equals the plan path where FSDP2 pads or refuses a cut") {
  // Tiny Mixtral with 6 experts and moe_intermediate_size 20 on 48 GPUs: FSDP degrees that do
  // not divide 6 experts pad dim 0 (e.g. ep 1, dp_shard 4: ceil(6/4) = 2 on every rank); degrees
  // above the experts cut dim 1 (2F = 40), which FSDP2 refuses unless they divide 40 (dp_shard 8
  // does, 16 and 48 do not): the search must mark exactly those candidates invalid.
  auto m = dockyard::testing::TinyMixtral();
  m.moe.num_experts = 6;
  m.moe.moe_intermediate_size = 20;
  SearchOptions o = FullSearch(48);
  const Coverage cov = CompareEveryCandidate(m, o);
  CHECK(cov.ranked > 0);
  // ep 1, world 48 (dp_shard 48 > 6 experts): dim 1 of gate_up (40) over 48 is refused.
  dockyard::ParallelDimsOptions d;
  d.world_size = 48;
  CHECK_THROWS_WITH_AS(dockyard::BuildPlan(m, d), doctest::Contains("uneven sharding on dim 1: size 40 over dp_shard (48)"),
                       dockyard::Error);
}

TEST_CASE("Under torchtitan no layout with tied embeddings and pp > 1 is valid, in both paths") {
  auto model = dockyard::LoadModel("testdata/hf/qwen3-30b-a3b.json");
  model.tie_word_embeddings = true;
  SearchOptions o = FullSearch(16);
  o.training.optimizer = dockyard::Optimizer::kSgd;
  const Coverage cov = CompareEveryCandidate(model, o);
  CHECK(cov.pp_gt_1 == 0);  // every pp > 1 candidate invalid (torchtitan refuses tying with PP)
  CHECK(cov.ranked > 0);
}

TEST_CASE("Search results are those of the plan path: counts and top layouts on Qwen3-30B-A3B, 64 GPUs") {
  const auto model = dockyard::LoadModel("testdata/hf/qwen3-30b-a3b.json");
  SearchOptions o = FullSearch(64);
  o.routing_layers = 1;
  o.top = 50;
  o.training.gpu_memory_gib = 20;  // some layouts over budget
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

TEST_CASE("the deredundency dispatcher's default oep: the nodes an EP group spans, rounded up to a divisor of ep") {
  dockyard::TrainingConfig t;
  t.gpus_per_node = 8;
  CHECK(dockyard::DeredundencyOep(t, 64) == 8);  // 64 / 8
  CHECK(dockyard::DeredundencyOep(t, 16) == 2);
  CHECK(dockyard::DeredundencyOep(t, 4) == 1);    // inside one node
  CHECK(dockyard::DeredundencyOep(t, 12) == 2);   // ceil(12 / 8) = 2 divides 12
  CHECK(dockyard::DeredundencyOep(t, 60) == 10);  // ceil(60 / 8) = 8 does not divide 60; 9 neither; 10 does
  CHECK(dockyard::DeredundencyOep(t, 7) == 1);    // ceil(7 / 8) = 1: inside one node
  t.gpus_per_node = 6;
  CHECK(dockyard::DeredundencyOep(t, 32) == 8);  // ceil(32 / 6) = 6 and 7 do not divide 32; 8 does
  t.oep = 4;
  CHECK(dockyard::DeredundencyOep(t, 32) == 4);  // given: used as is (validated elsewhere)
}

TEST_CASE("Search ranks the opt-in deepep and allgather dispatchers for ep > 1 only, priced as simulate prices them") {
  const auto model = dockyard::testing::TinyMixtral();
  SearchOptions o = SmallSearch();
  o.cluster.gpus_per_node = 4;  // 8 GPUs on 2 nodes: ep 8 spans both
  const auto plain = dockyard::SearchLayouts(model, o);
  o.include_deepep = true;
  o.include_allgather = true;
  const auto result = dockyard::SearchLayouts(model, o);
  int64_t deepep = 0, allgather = 0, ep_gt_1 = 0;
  for (const auto& c : dockyard::EnumerateLayouts(model, o)) {
    if (c.dispatcher == "all_to_all" && c.dims.ep > 1) ++ep_gt_1;
    if (c.dispatcher == "deepep") {
      ++deepep;
      CHECK(c.dims.ep > 1);
    }
    if (c.dispatcher == "allgather") {
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
    if (x.layout.dispatcher != "deepep" || x.layout.dims.ep != 8) continue;
    dockyard::TrainingConfig t = o.training;
    t.dispatcher = dockyard::Dispatcher::kDeepEp;
    t.gpus_per_node = 4;
    const dockyard::Plan plan = dockyard::BuildPlan(model, x.layout.dims, t);
    const auto cost = dockyard::SimulateStep(plan, o.cluster, dockyard::SampleRoutingForPlan(plan, o.routing, 1), o.cost);
    CHECK(x.step_time_us == cost.step_time_us);
    seen = true;
    break;
  }
  CHECK(seen);
}

TEST_CASE("Fast evaluation equals the plan path for every candidate under all four dispatchers, without the plan path") {
  // Qwen3-30B-A3B (128 experts, top 8) on 32 GPUs of 4-GPU nodes: EP groups of up to 32 ranks span
  // up to 8 nodes, so deredundency's oep, deepep's per-node RDMA and NVLink forwarding and
  // allgather's ring over nodes are all exercised. Short sequences keep the reference path's
  // per-candidate deepep draws quick.
  const auto model = dockyard::LoadModel("testdata/hf/qwen3-30b-a3b.json");
  auto all_four = [](dockyard::Convention convention) {
    SearchOptions o = FullSearch(32);
    o.cluster.gpus_per_node = 4;
    o.convention = convention;
    o.training.seq_len = 256;
    o.include_deepep = true;
    o.include_allgather = true;
    return o;
  };
  SUBCASE("torchtitan, fsdp, full recompute") {
    const Coverage cov = CompareEveryCandidate(model, all_four(dockyard::Convention::kTorchtitan));
    CHECK(cov.deredundency > 0);
    CHECK(cov.deepep > 0);
    CHECK(cov.spanning_deepep > 0);
    CHECK(cov.allgather > 0);
    CHECK(cov.etp_gt_1 > 0);
    CHECK(cov.ranked > 0);
    CHECK(cov.handed_to_reference == 0);  // deepep and allgather take the fast path too
    CHECK(cov.flex_from_blocks > 0);      // and the deepep counts came from the per-source block counts,
    CHECK(cov.routing_from_blocks > 0);   // as did the routing samples' per-expert counts
  }
  SUBCASE("megatron (zero1, expert TP scaling of the sent rows), FP8 dispatch, zipf routing") {
    SearchOptions o = all_four(dockyard::Convention::kMegatron);
    o.training.fp8_dispatch = true;
    o.routing = dockyard::ParseRoutingSpec("zipf:1.2");
    const Coverage cov = CompareEveryCandidate(model, o);
    CHECK(cov.deredundency > 0);
    CHECK(cov.spanning_deepep > 0);
    CHECK(cov.allgather > 0);
    CHECK(cov.etp_gt_1 > 0);
    CHECK(cov.pp_gt_1 > 0);
    CHECK(cov.handed_to_reference == 0);
    CHECK(cov.flex_from_blocks > 0);
    CHECK(cov.routing_from_blocks > 0);
  }
}
