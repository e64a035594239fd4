// The distributed optimizer's step-end traffic as Megatron-Core's DDP runs it over its buckets
// (param_gather.h): exposures checked by hand.
#include "planner/cost/param_gather.h"

#include <doctest/doctest.h>

using dockyard::DdpOverlapInputs;
using dockyard::EdgeBucketUs;
using dockyard::GradReduceExposedUs;
using dockyard::ParamGatherExposedUs;
using dockyard::RunSettings;

namespace {

// A rank with 200M dense and 600M expert elements gathering them in 20 ms and 60 ms and reducing
// their gradients in 40 ms and 120 ms (us), 40M buckets, no embedding on its stage, a chunk's
// forward 30 ms and backward 60 ms, the optimizer 50 ms.
DdpOverlapInputs Rank(int64_t pp) {
  DdpOverlapInputs in;
  in.params = {20000, 60000, 2e8, 6e8};
  in.grads = {40000, 120000, 2e8, 6e8};
  in.bucket_elems = 4e7;
  in.pp = pp;
  in.chunk_forward_us = 30000;
  in.chunk_backward_us = 60000;
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

TEST_CASE("DDP traffic: synchronous without the overlaps, all of it") {
  RunSettings run;
  run.vpp = 4;
  // 20,000 + 60,000 and 40,000 + 120,000 us, whatever the pipeline (inside the optimizer step /
  // at the step's end on every stage at once).
  CHECK(ParamGatherExposedUs(Rank(8), run) == doctest::Approx(80000));
  CHECK(GradReduceExposedUs(Rank(8), run) == doctest::Approx(160000));
}

TEST_CASE("the edge bucket: a bucket, or the embedding where it is larger (a bucket never splits a parameter)") {
  // One chunk: 40M of 200M dense elements (1/5 of 20,000 = 4,000 us) and 40M of 600M expert
  // elements (1/15 of 60,000 = 4,000 us).
  DdpOverlapInputs in = Rank(1);
  CHECK(EdgeBucketUs(in.params, in, 1) == doctest::Approx(8000));
  // A 100M-element embedding on the stage (e.g. a vocabulary of 151,936 x 4,096 over tp 6):
  // the dense edge bucket holds it, 1/2 of 20,000 = 10,000 us; the expert one stays a bucket.
  in.embedding_elems = 1e8;
  CHECK(EdgeBucketUs(in.params, in, 1) == doctest::Approx(14000));
  // Never more than the chunk: a 300M embedding caps at the dense buffer, 20,000 us.
  in.embedding_elems = 3e8;
  CHECK(EdgeBucketUs(in.params, in, 1) == doctest::Approx(24000));
}

TEST_CASE("gradient reduce: the edge bucket exposed, the rest under a chunk's last backward") {
  // pp 1: edge 40M / 200M of 40,000 = 8,000 and 40M / 600M of 120,000 = 8,000 us; the other
  // 144,000 us run under the 60,000 us backward: 84,000 more. 100,000 us.
  CHECK(GradReduceExposedUs(Rank(1), Overlapped(1)) == doctest::Approx(100000));
  // vpp 4: a chunk reduces 40,000 us; its edge 40M of its 50M dense elements (4/5 of 10,000) and 40M
  // of its 150M expert elements (4/15 of 30,000) = 8,000 + 8,000 us; the rest, 24,000 us, under the
  // chunk's 60,000 us backward: 16,000 us.
  CHECK(GradReduceExposedUs(Rank(4), Overlapped(4)) == doctest::Approx(16000));
}

TEST_CASE("parameter all-gather, pp 1: the edge bucket, the rest under the forward") {
  // 8,000 us exposed before the forward starts; the other 72,000 us under the 30,000 us forward:
  // 42,000 us more. 50,000 us in all.
  CHECK(ParamGatherExposedUs(Rank(1), Overlapped(1)) == doctest::Approx(50000));
  // A forward of 100 ms hides the rest: the two edge buckets only.
  DdpOverlapInputs long_forward = Rank(1);
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

TEST_CASE("parameter all-gather, pp 4 vpp 2: aligned, the edge bucket and what outlasts one chunk's forward") {
  // A chunk holds half: 40,000 us; the edge 40M of the chunk's 100M dense elements (2/5 of 10,000 =
  // 4,000 us) and 40M of its 300M expert elements (2/15 of 30,000 = 4,000 us): 8,000 us. The second
  // stage's chunk (one bucket, dispatched at the step's start) is ready at 40,000 us; the first
  // micro-batch reaches it at 8,000 + 30,000: 2,000 us more. 10,000 us.
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
  DdpOverlapInputs short_optimizer = Rank(4);
  short_optimizer.optimizer_us = 20000;
  CHECK(ParamGatherExposedUs(short_optimizer, run) == doctest::Approx(22500));
  // Not aligned: every stage's later chunks (pp x (vpp - 1) = 4) wait for the first micro-batch:
  // 4 x 40,000 us on top.
  run.align_param_gather = false;
  CHECK(ParamGatherExposedUs(Rank(4), run) == doctest::Approx(160000));
}

TEST_CASE("Megatron-LM's DDP bucket: max(40M, 1M x dp x cp) unless --ddp-bucket-size") {
  RunSettings run;
  CHECK(dockyard::DdpBucketElems(run, 8) == 40000000);     // 8M < 40M
  CHECK(dockyard::DdpBucketElems(run, 128) == 128000000);  // 1M x 128
  run.ddp_bucket_size = 134217728;                         // Megatron-Bridge's 128 Mi
  CHECK(dockyard::DdpBucketElems(run, 128) == 134217728);
}
