// Received rows of a routing sample: the statistics, the imbalance that sizes memory and the
// capacity drops, by hand on a routing where every token's experts are known.
#include "planner/routing/received_rows.h"

#include <cmath>

#include <doctest/doctest.h>

#include "planner/base/error.h"

using dockyard::AnalyzeReceivedRows;
using dockyard::Error;
using dockyard::ExpertCapacity;
using dockyard::ParseRoutingSpec;
using dockyard::PrepareRouting;
using dockyard::ReceivedRowsReport;
using dockyard::RoutingModel;
using dockyard::RoutingResult;
using dockyard::SampleImbalance;
using dockyard::SampleRouting;

namespace {

// 4 experts, top_k 2, hot:2:1: experts 0 and 1 take every assignment (share 1/2 each, the cap
// 1/top_k), so every token picks exactly experts 0 and 1. EP 2: rank 0 owns experts 0-1, rank 1
// owns 2-3; 8 tokens per rank.
RoutingModel HotModel(int64_t layers) {
  return PrepareRouting(ParseRoutingSpec("hot:2:1"), 4, 2, layers);
}

}  // namespace

TEST_CASE("Received rows of a routing whose every token picks experts 0 and 1, by hand") {
  const RoutingModel model = HotModel(2);
  const RoutingResult sample = SampleRouting(model, 2, 8);
  const ReceivedRowsReport r = AnalyzeReceivedRows(model, sample, std::nullopt);
  REQUIRE(r.layers.size() == 2);
  for (const auto& x : r.layers) {
    // rank 0 receives 2 source ranks x 8 tokens x 2 experts = 32 rows, rank 1 none; mean 8 x 2 = 16.
    CHECK(x.max_received == 32);
    CHECK(x.mean_received == 16.0);
    CHECK(x.p99_received == 32);  // nearest rank: sorted [0, 32][ceil(0.99 x 2) - 1 = 1]
    CHECK(x.max_over_mean == 2.0);
  }
  CHECK(r.max_received_rows == 32);
  CHECK(r.imbalance == 2.0);              // 32 / 16
  CHECK(r.assignments == 8 * 2 * 2 * 2);  // T x top_k x ep x layers
  CHECK(r.dropped == 0);                  // no capacity factor: nothing is dropped
  CHECK_FALSE(r.capacity_factor.has_value());
}

TEST_CASE("A capacity factor drops the assignments over ceil(T x top_k / E x C) per expert and source rank") {
  const RoutingModel model = HotModel(1);
  const RoutingResult sample = SampleRouting(model, 2, 8);
  // C = 1: capacity ceil(8 x 2 / 4 x 1) = 4; each source rank sends 8 to expert 0 and 8 to
  // expert 1: 4 + 4 dropped per rank, 16 of the layer's 8 x 2 x 2 = 32 assignments: 50 %.
  ReceivedRowsReport one = AnalyzeReceivedRows(model, sample, 1.0);
  CHECK(one.capacity == 4);
  CHECK(one.dropped == 16);
  CHECK(one.layers[0].dropped == 16);
  CHECK(one.drop_fraction == 0.5);
  // C = 1.5: capacity ceil(4 x 1.5) = 6: 2 + 2 per rank, 8 of 32 = 25 %.
  ReceivedRowsReport mid = AnalyzeReceivedRows(model, sample, 1.5);
  CHECK(mid.capacity == 6);
  CHECK(mid.dropped == 8);
  CHECK(mid.drop_fraction == 0.25);
  // C = 2: capacity 8 = every expert's count: nothing dropped.
  CHECK(AnalyzeReceivedRows(model, sample, 2.0).dropped == 0);
}

TEST_CASE("Capacity drops count the sample's own tokens: uniform routing at C = 1 drops what exceeds the mean") {
  // Uniform, 8 experts, top_k 2, ep 4, 64 tokens per rank: each rank's expert counts sum to 128;
  // the capacity is ceil(64 x 2 / 8) = 16, and drops = sum over (rank, expert) of max(0, count - 16).
  const RoutingModel model = PrepareRouting(ParseRoutingSpec("uniform"), 8, 2, 1);
  const RoutingResult sample = SampleRouting(model, 4, 64);
  const ReceivedRowsReport r = AnalyzeReceivedRows(model, sample, 1.0);
  CHECK(r.capacity == 16);
  CHECK(r.assignments == 64 * 2 * 4);
  // Random counts around 16: some expert of some rank is over (a uniform draw of 128 over 8
  // experts leaves all 8 at exactly 16 with negligible probability), and at most half is dropped.
  CHECK(r.dropped > 0);
  CHECK(r.dropped < r.assignments / 2);
  // Megatron's rule is per source rank: the per-expert totals over ranks bound the drops below.
  int64_t excess_of_totals = 0;
  for (int64_t c : sample.layers[0].tokens_per_expert) excess_of_totals += std::max<int64_t>(0, c - 4 * 16);
  CHECK(r.dropped >= excess_of_totals);
}

TEST_CASE("SampleImbalance gives back the sample's max rows through ceil(mean x imbalance)") {
  // 25 / 11 = 2.272727272727273, and 11 x that = 25.000000000000004 in double: ceil gives 26.
  // The rule steps the factor down until ceil(11 x f) = 25.
  RoutingResult s;
  s.layers.resize(2);
  s.layers[0].mean_received = 11;
  s.layers[0].max_received = 20;
  s.layers[1].mean_received = 11;
  s.layers[1].max_received = 25;
  const double f = SampleImbalance(s);
  CHECK(std::ceil(11 * f) == 25.0);
  CHECK(f == doctest::Approx(25.0 / 11));
  RoutingResult empty;
  CHECK(SampleImbalance(empty) == 1.0);
}

TEST_CASE("ExpertCapacity is Megatron's get_capacity and refuses a factor that is not positive") {
  CHECK(ExpertCapacity(4096, 8, 256, 1.0) == 128);   // ceil(4096 x 8 / 256 x 1.0)
  CHECK(ExpertCapacity(4096, 8, 256, 1.25) == 160);  // ceil(128 x 1.25)
  CHECK(ExpertCapacity(10, 1, 3, 1.0) == 4);         // ceil(3.33)
  CHECK_THROWS_WITH_AS(ExpertCapacity(10, 1, 3, 0.0), doctest::Contains("--capacity-factor must be a finite number in (0, 1e6], got 0"),
                       Error);
}
