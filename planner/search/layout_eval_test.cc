// The search's fast path (layout_eval.h) equals the plan path for every candidate: DeepSeek-V3
// (two layer kinds, MLA), FSDP2's padded and refused cuts, tied embeddings under torchtitan.
#include <doctest/doctest.h>

#include "planner/base/checked_math.h"
#include "planner/base/error.h"
#include "planner/layout/plan.h"
#include "planner/search/every_candidate.h"
#include "planner/search/layout_eval.h"
#include "planner/model/model_file.h"
#include "tests/test_models.h"

using dockyard::SearchOptions;
using dockyard::testing::CompareEveryCandidate;
using dockyard::testing::Coverage;
using dockyard::testing::FullSearch;

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
  SUBCASE("128 GPUs, torchtitan-2026-03 (expert TP: etp = tp), fsdp, full recompute, h200 budget") {
    SearchOptions o = FullSearch(128);
    o.convention = dockyard::Convention::kTorchtitan2026_03;  // etp > 1 is torchtitan before PR #3167
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

TEST_CASE("A setting index met again with other settings is validated and evaluated for those settings") {
  // The evaluator finds a candidate's training entry by (group family, setting_index); a candidate
  // carrying the index of another search's enumeration (other settings at the same index) must
  // not read the slot the first one filled. Recompute none keeps every layer's activations,
  // full only each layer's input, so the two peaks differ; the second must equal a fresh
  // evaluation of the same candidate without an index.
  const auto model = dockyard::LoadModel("testdata/hf/deepseek-v3.json");
  const SearchOptions o = FullSearch(256);
  const std::vector<dockyard::LayoutCandidate> all = dockyard::EnumerateLayouts(model, o);
  dockyard::LayoutEvaluator fresh(model, o);
  bool found = false;
  for (const dockyard::LayoutCandidate& base : all) {
    dockyard::LayoutCandidate none = base, full = base;
    none.settings.recompute = dockyard::Recompute::kNone;
    full.settings.recompute = dockyard::Recompute::kFull;
    none.setting_index = full.setting_index = 0;
    dockyard::LayoutCandidate full_unindexed = full;
    full_unindexed.setting_index = -1;
    const dockyard::LayoutEvaluation want = fresh.Evaluate(full_unindexed);
    if (want.status == dockyard::LayoutEvaluation::Status::kInvalid) continue;
    dockyard::LayoutEvaluator evaluator(model, o);
    const dockyard::LayoutEvaluation first = evaluator.Evaluate(none);
    if (first.status == dockyard::LayoutEvaluation::Status::kInvalid) continue;
    const dockyard::LayoutEvaluation second = evaluator.Evaluate(full);
    CHECK(first.peak_bytes > second.peak_bytes);
    CHECK(second.peak_bytes == want.peak_bytes);
    CHECK(second.status == want.status);
    CHECK(second.step_time_us == want.step_time_us);
    found = true;
    break;
  }
  CHECK(found);
}

TEST_CASE("Figures beyond int64 throw OverflowError, a dockyard::Error the search's plan path turns into one invalid reason") {
  // 2^62 x 4 and INT64_MAX + 1 pass the signed 64-bit range.
  CHECK_THROWS_AS(dockyard::CheckedMul(int64_t{1} << 62, 4, "bytes"), dockyard::OverflowError);
  CHECK_THROWS_WITH_AS(dockyard::CheckedAdd(INT64_MAX, 1, "total wire bytes"),
                       "total wire bytes: 9223372036854775807 + 1 overflows a signed 64-bit integer", dockyard::Error);
  CHECK(std::string(dockyard::LayoutEvaluator::kOverflowReason).find("overflows a signed 64-bit integer at this global batch") !=
        std::string::npos);
}
