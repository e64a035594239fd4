// tp_overlap.h: one sequence-parallel block's exposed TP time, each framework's way.
#include "planner/cost/tp_overlap.h"

#include <doctest/doctest.h>

#include "planner/base/error.h"

using dockyard::Convention;
using dockyard::TpBlockExposedUs;
using dockyard::TpBlockGemmsUs;

TEST_CASE("torchtitan exposes every sequence-parallel collective: 2c forward, 2c backward") {
  const auto e = TpBlockExposedUs(100, {300, 100}, 4, Convention::kTorchtitan, /*tp_comm_overlap=*/false, 0.2);
  CHECK(e.forward == doctest::Approx(200));
  CHECK(e.backward == doctest::Approx(200));
}

TEST_CASE("megatron without --tp-comm-overlap: the backward's re-gather and dgrad reduce-scatter run beside the column GEMMs") {
  // c 100 us. Forward: the all-gather and the reduce-scatter, 2 x 100 = 200.
  // Backward: the row dgrad's output-gradient all-gather (100) + the column linear's input
  // re-gather beside its dgrad (300 us) and its dgrad reduce-scatter beside its wgrad (300 us):
  // 100 + 2 x max(0, 100 - 300) = 100.
  auto e = TpBlockExposedUs(100, {300, 100}, 4, Convention::kMegatron, false, 0.2);
  CHECK(e.forward == doctest::Approx(200));
  CHECK(e.backward == doctest::Approx(100));
  // A column GEMM of 60 us hides 60 of each: 100 + 2 x 40 = 180.
  e = TpBlockExposedUs(100, {60, 100}, 4, Convention::kMegatron, false, 0.2);
  CHECK(e.backward == doctest::Approx(180));
}

TEST_CASE("megatron with --tp-comm-overlap: ring exchange, pipelined and bulk userbuffers overlaps (TransformerEngine initialize_ub)") {
  // c 100 us, tp 4, SM share 0.2; column GEMM 300 us, row GEMM 100 us.
  // Forward: ring(300) = 3 x max(0, 100/3 - 300/4) = 0 (each 33.3 us shard copy under a 75 us chunk);
  //   pipe(100): the row GEMM on 0.8 of the SMs, g' = 125: 100/4 + 3 x max(0, 25 - 31.25) + (125 - 100) = 50.
  // Backward: ring(100) = 3 x max(0, 33.33 - 25) = 25; bulk(300), g' = 375: max(0, 100 - 375) + 75 = 75, twice:
  //   25 + 150 = 175.
  auto e = TpBlockExposedUs(100, {300, 100}, 4, Convention::kMegatron, true, 0.2);
  CHECK(e.forward == doctest::Approx(50));
  CHECK(e.backward == doctest::Approx(175));
  // GEMMs far shorter than the traffic leave it all but the copy overlap: column 10, row 10, SM share 0:
  // ring(10) = 3 x (33.33 - 2.5) = 92.5; pipe(10) = 25 + 3 x (25 - 2.5) = 92.5; forward 185.
  // Backward: ring(10) = 92.5; bulk(10) = 90, twice: 272.5.
  e = TpBlockExposedUs(100, {10, 10}, 4, Convention::kMegatron, true, 0.0);
  CHECK(e.forward == doctest::Approx(185));
  CHECK(e.backward == doctest::Approx(272.5));
  // The flag means nothing under torchtitan (it has no userbuffers overlap).
  e = TpBlockExposedUs(100, {300, 100}, 4, Convention::kTorchtitan, true, 0.2);
  CHECK(e.forward == doctest::Approx(200));
}

TEST_CASE("TpBlockExposedUs refuses what is not a block") {
  CHECK_THROWS_AS(TpBlockExposedUs(100, {1, 1}, 1, Convention::kMegatron, false, 0.2), dockyard::Error);
  CHECK_THROWS_AS(TpBlockExposedUs(-1, {1, 1}, 2, Convention::kMegatron, false, 0.2), dockyard::Error);
  CHECK_THROWS_AS(TpBlockExposedUs(100, {1, 1}, 2, Convention::kMegatron, true, 1.0), dockyard::Error);
}
