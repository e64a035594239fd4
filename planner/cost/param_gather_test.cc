// The distributed optimizer's parameter all-gather as Megatron-Core's DDP dispatches it
// (param_gather.h): exposures checked by hand.
#include "planner/cost/param_gather.h"

#include <doctest/doctest.h>

using dockyard::MegatronDdpBucketElems;
using dockyard::ParamGatherExposedUs;
using dockyard::ParamGatherInputs;
using dockyard::RunSettings;

namespace {

// A rank with 200M dense and 600M expert elements gathering them in 20 ms and 60 ms (us), 40M
// buckets, its chunk's forward 30 ms, the optimizer 50 ms.
ParamGatherInputs Rank(int64_t pp) {
  ParamGatherInputs in;
  in.dense_us = 20000;
  in.sparse_us = 60000;
  in.dense_elems = 2e8;
  in.sparse_elems = 6e8;
  in.bucket_elems = 4e7;
  in.pp = pp;
  in.chunk_forward_us = 30000;
  in.optimizer_us = 50000;
  return in;
}

RunSettings Overlapped(int64_t vpp) {
  RunSettings run;
  run.overlap_grad_reduce = run.overlap_param_gather = true;
  run.vpp = vpp;
  return run;
}

}  // namespace

TEST_CASE("parameter all-gather: synchronous without --overlap-param-gather, all of it") {
  RunSettings run;
  run.vpp = 4;
  // 20,000 + 60,000 us, whatever the pipeline (every stage gathers inside the optimizer step).
  CHECK(ParamGatherExposedUs(Rank(8), run) == doctest::Approx(80000));
}

TEST_CASE("parameter all-gather, pp 1: the first bucket of each buffer, the rest under the forward") {
  // One chunk: the first bucket is 40M of 200M dense elements (1/5 of 20,000 = 4,000 us) and 40M of
  // 600M expert elements (1/15 of 60,000 = 4,000 us): 8,000 us exposed before the forward starts.
  // The other 72,000 us run under the 30,000 us forward: 42,000 us more. 50,000 us in all.
  CHECK(ParamGatherExposedUs(Rank(1), Overlapped(1)) == doctest::Approx(50000));
  // A forward of 100 ms hides the rest: the two first buckets only.
  ParamGatherInputs long_forward = Rank(1);
  long_forward.chunk_forward_us = 100000;
  CHECK(ParamGatherExposedUs(long_forward, Overlapped(1)) == doctest::Approx(8000));
}

TEST_CASE("parameter all-gather, pp 4 without interleaving: every later stage gathers on the first micro-batch's path") {
  // Stage 0 as above (50,000 us); stages 1-3 are one bucket per buffer, dispatched when the first
  // micro-batch reaches them: 3 x 80,000 us more. 290,000 us.
  CHECK(ParamGatherExposedUs(Rank(4), Overlapped(1)) == doctest::Approx(290000));
  // align_param_gather means nothing without interleaving (Megatron-LM turns it off): the same.
  RunSettings aligned = Overlapped(1);
  aligned.align_param_gather = true;
  CHECK(ParamGatherExposedUs(Rank(4), aligned) == doctest::Approx(290000));
}

TEST_CASE("parameter all-gather, pp 4 vpp 2: aligned, the first bucket and what outlasts one chunk's forward") {
  // A chunk holds half: 40,000 us; the first bucket 40M of the chunk's 100M dense elements (2/5 of
  // 10,000 = 4,000 us) and 40M of its 300M expert elements (2/15 of 30,000 = 4,000 us): 8,000 us.
  // The second stage's chunk (one bucket, dispatched at the step's start) is ready at 40,000 us;
  // the first micro-batch reaches it at 8,000 + 30,000: 2,000 us more. 10,000 us.
  CHECK(ParamGatherExposedUs(Rank(4), Overlapped(2)) == doctest::Approx(10000));
  // --no-align-param-gather: the pp x vpp - 1 = 7 other chunks' gathers on the path: + 7 x 40,000.
  RunSettings unaligned = Overlapped(2);
  unaligned.align_param_gather = false;
  CHECK(ParamGatherExposedUs(Rank(4), unaligned) == doctest::Approx(290000));
}

TEST_CASE("parameter all-gather with the optimizer step: the first chunk under the rest of the optimizer") {
  // vpp 2: the first chunk's 40,000 us gather starts after its own optimizer step, the chunk's
  // dense elements 100M of the rank's 800M: 1/8 of the 50,000 us optimizer done, 43,750 us left,
  // which hides it entirely.
  RunSettings run = Overlapped(2);
  run.overlap_param_gather_with_optimizer_step = true;
  CHECK(ParamGatherExposedUs(Rank(4), run) == doctest::Approx(0));
  // A 20 ms optimizer leaves 17,500 us to hide under: 22,500 us exposed.
  ParamGatherInputs short_optimizer = Rank(4);
  short_optimizer.optimizer_us = 20000;
  CHECK(ParamGatherExposedUs(short_optimizer, run) == doctest::Approx(22500));
}

TEST_CASE("Megatron-LM's DDP bucket: max(40M, 1M x dp x cp) unless --ddp-bucket-size") {
  CHECK(MegatronDdpBucketElems(0, 8) == doctest::Approx(4e7));     // 8M < 40M
  CHECK(MegatronDdpBucketElems(0, 128) == doctest::Approx(1.28e8));  // 1M x 128
  CHECK(MegatronDdpBucketElems(134217728, 128) == doctest::Approx(134217728));  // Bridge's 128 Mi
}
