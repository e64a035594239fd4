#include "planner/search/pareto.h"

#include <doctest/doctest.h>

#include <stdexcept>

namespace dockyard {
namespace {

TEST_CASE("ParetoFront keeps the layouts no other beats on both peak memory and throughput") {
  // Rows (peak GiB, tokens/s): a (10, 100), b (20, 150), c (20, 120), d (30, 140), e (5, 90), f (10, 100).
  // e: lowest peak -> front. a and f: peak 10, 100 > 90 (e) -> both on the front (equal rows).
  // b: 150 beats every row at <= 20 -> front. c: b has the same peak and more throughput -> off.
  // d: b has less peak and more throughput -> off.
  const std::vector<int64_t> peak = {10, 20, 20, 30, 5, 10};
  const std::vector<double> tps = {100, 150, 120, 140, 90, 100};
  const std::vector<bool> front = ParetoFront(peak, tps);
  CHECK(front == std::vector<bool>{true, true, false, false, true, true});
}

TEST_CASE("ParetoFront: a row with lower throughput at a higher peak is dominated; empty input gives an empty front") {
  CHECK(ParetoFront({1, 2}, {5.0, 4.0}) == std::vector<bool>{true, false});
  // Equal throughput at a higher peak is dominated too (the deredundency twin of an all_to_all row
  // with a few more buffer bytes): (1, 5) is as fast for less memory than (2, 5).
  CHECK(ParetoFront({1, 2}, {5.0, 5.0}) == std::vector<bool>{true, false});
  CHECK(ParetoFront({2, 1, 2}, {5.0, 5.0, 5.0}) == std::vector<bool>{false, true, false});
  CHECK(ParetoFront({}, {}).empty());
  CHECK_THROWS_AS(ParetoFront({1}, {}), std::invalid_argument);
}

}  // namespace
}  // namespace dockyard
