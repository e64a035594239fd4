// Tests of redundant experts in the layout search (redundant_search.h).
#include "planner/search/redundant_search.h"

#include <doctest/doctest.h>

#include "planner/base/error.h"
#include "tests/test_models.h"

namespace dockyard {
namespace {

TEST_CASE("R values are integers or multiples of ep") {
  const auto c = ParseRedundantCounts("0,ep,2ep,16");
  REQUIRE(c.size() == 4);
  CHECK(c[0].For(8) == 0);
  CHECK(c[1].For(8) == 8);
  CHECK(c[2].For(8) == 16);
  CHECK(c[3].For(8) == 16);
  CHECK(RedundantCountText(c[2]) == "2ep");
  CHECK_THROWS_WITH_AS(ParseRedundantCounts("0,x"), doctest::Contains("item 'x'"), Error);
  CHECK_THROWS_WITH_AS(ParseRedundantCounts("0ep"), doctest::Contains("item '0ep'"), Error);
}

TEST_CASE("the search's best layouts are re-ranked with redundant experts") {
  SearchOptions s;
  s.world_size = 4;
  s.training.seq_len = 64;
  s.routing = ParseRoutingSpec("hot:1:0.5");
  s.top = 100;  // every layout, so that those with ep > 1 are re-ranked too
  const ModelSpec model = testing::TinyMixtral();
  const SearchResult base = SearchLayouts(model, s);
  REQUIRE(!base.top.empty());
  RedundantExpertsOptions o;
  o.policy = EplbPolicy::kGlobal;
  // "3" divides no ep > 1 (8 + 3 = 11 slots); with ep 1 no replica can help (at most
  // 8 x (1 - 1) = 0 redundant slots), so both "ep" = 1 and "3" are skipped there; "ep" fits every
  // ep > 1 dividing 8.
  const RedundantSearchResult r = SearchRedundantExperts(model, s, base, ParseRedundantCounts("ep,3"), o);
  int64_t with_ep = 0;
  for (const RankedLayout& l : base.top) with_ep += l.layout.dims.ep > 1 ? 1 : 0;
  const int64_t without_ep = static_cast<int64_t>(base.top.size()) - with_ep;
  CHECK(r.skipped == with_ep + 2 * without_ep);
  CHECK(static_cast<int64_t>(r.ranked.size()) + r.skipped + r.over_budget == 2 * static_cast<int64_t>(base.top.size()));
  for (size_t i = 1; i < r.ranked.size(); ++i) CHECK(r.ranked[i - 1].tokens_per_s_per_gpu >= r.ranked[i].tokens_per_s_per_gpu);
  int64_t replicated = 0;
  for (const auto& x : r.ranked) {
    if (x.layout.layout.dims.ep > 1) {
      ++replicated;
      // Expert 0 takes half the assignments: replicas split it, so the imbalance drops.
      CHECK(x.redundant_experts == x.layout.layout.dims.ep);
      CHECK(x.imbalance_after < x.imbalance_before);
    }
  }
  CHECK(with_ep > 0);
  CHECK(replicated == with_ep);  // each layout with ep > 1 once, with R = ep
}

}  // namespace
}  // namespace dockyard
