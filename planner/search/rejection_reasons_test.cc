// Why a search rejected its candidates: the reasons it counts are the plan path's messages, they
// sum to the counts, and an empty search names them (the most common as simulate prints it).
#include "planner/search/rejection_reasons.h"

#include <string>

#include <doctest/doctest.h>
#include <fmt/format.h>

#include "planner/base/error.h"
#include "planner/layout/plan.h"
#include "planner/search/every_candidate.h"
#include "planner/search/layout_eval.h"
#include "planner/search/search.h"
#include "planner/search/search_space.h"
#include "tests/test_models.h"

namespace dockyard {
namespace {

using testing::SmallSearch;

int64_t Sum(const std::map<std::string, int64_t>& m) {
  int64_t n = 0;
  for (const auto& [why, k] : m) n += k;
  return n;
}

TEST_CASE("A pin that contradicts the model is named in the reasons and in the empty search's error") {
  const ModelSpec model = testing::TinyMixtral();  // 2 KV heads
  SearchOptions o = SmallSearch();
  o.pins.tp = 4;  // tp 4 does not divide 2 KV heads: every layout with it breaks that rule
  const SearchResult r = SearchLayouts(model, o);
  REQUIRE(r.enumerated > 0);
  CHECK(r.ranked == 0);
  CHECK(r.over_budget == 0);
  CHECK(r.invalid == r.enumerated);
  CHECK(Sum(r.invalid_reasons) == r.invalid);
  CHECK(Sum(r.not_divisible_reasons) == r.not_divisible);
  // ParallelDims' model rule, as simulate prints it for --tp 4 on this model.
  std::string simulate_error;
  try {
    ParallelDimsOptions d;
    d.world_size = 8;
    d.tp = 4;
    BuildPlan(model, d);
  } catch (const Error& e) {
    simulate_error = e.what();
  }
  REQUIRE(simulate_error == "tp (4) must divide num_key_value_heads (2): each TP rank holds whole KV heads");
  REQUIRE(r.invalid_reasons.count(simulate_error) == 1);
  const std::string text = EmptySearchText(r);
  CHECK(text.find("  invalid: " + simulate_error + "\n") != std::string::npos);
  const std::vector<std::pair<int64_t, std::string>> reasons = RejectionReasons(r);
  CHECK(reasons.front().second == "invalid: " + simulate_error);
  CHECK(text.find(fmt::format("dockyard-plan search: error: {} ({} of {} layouts)\n", simulate_error, reasons.front().first, r.invalid)) !=
        std::string::npos);
}

TEST_CASE("The search's reason for each invalid candidate is the rule the plan path throws for it") {
  const ModelSpec model = testing::TinyMixtral();
  SearchOptions o = SmallSearch();
  o.vpps = {1, 2, 4};  // pp x vpp chunks beyond 2 layers + 2 break ValidateVppChunks
  LayoutEvaluator evaluator(model, o);
  int64_t invalid = 0;
  ForEachLayout(model, o, [&](const LayoutCandidate& c) {
    const LayoutEvaluation fast = evaluator.Evaluate(c);
    if (fast.status != LayoutEvaluation::Status::kInvalid) return;
    ++invalid;
    const LayoutEvaluation reference = evaluator.EvaluateReference(c);
    REQUIRE(reference.status == LayoutEvaluation::Status::kInvalid);
    CHECK(!fast.reason.empty());
    CHECK(fast.reason == reference.reason);
  });
  CHECK(invalid > 0);
}

TEST_CASE("seq_len not divisible by 2 x cp rejects the cp layouts in the search, with the reason") {
  const ModelSpec model = testing::TinyMixtral();
  SearchOptions o = SmallSearch();
  // 6 tokens: cp 2 needs a multiple of 4, cp 4 of 8, cp 8 of 16; only cp 1 layouts remain.
  o.training.seq_len = 6;
  const SearchResult r = SearchLayouts(model, o);
  REQUIRE(r.ranked > 0);
  for (const RankedLayout& row : r.top) CHECK(row.layout.dims.cp == 1);
  const std::string why = "--seq-len 6 must be divisible by 2 x cp = 4 (cp 2): load-balanced context parallelism";
  int64_t cp2 = 0;
  for (const auto& [reason, n] : r.invalid_reasons) {
    if (reason.rfind(why, 0) == 0) cp2 += n;
  }
  CHECK(cp2 > 0);
  // With 256 tokens (a multiple of 16) the same search ranks cp 2 layouts.
  o.training.seq_len = 256;
  const SearchResult even = SearchLayouts(model, o);
  bool has_cp2 = false;
  for (const RankedLayout& row : even.top) has_cp2 = has_cp2 || row.layout.dims.cp == 2;
  CHECK(has_cp2);
}

TEST_CASE("The reasons text lists the most common first and ends with its message") {
  SearchResult r;
  r.enumerated = 10;
  r.invalid = 7;
  r.not_divisible = 3;
  r.invalid_reasons = {{"rule a", 4}, {"rule b", 2}, {"rule c", 1}};
  r.not_divisible_reasons = {{"batch x", 3}};
  // 4 reasons, 2 shown: rule a (4), batch x (3); the rest: rule b (2) + rule c (1) = 3 layouts.
  CHECK(RejectionReasonsText(r, 2) ==
        "Rejected   7 layouts by rule, 3 by the global batch; reasons by layouts:\n"
        "          4  invalid: rule a\n"
        "          3  global batch: batch x\n"
        "             ... and 2 more reasons (3 layouts)\n"
        "dockyard-plan search: error: rule a (4 of 10 layouts)\n");
  CHECK(RejectionReasonsText(SearchResult{}).empty());
}

}  // namespace
}  // namespace dockyard
