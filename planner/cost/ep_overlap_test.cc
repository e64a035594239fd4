// EP overlap as two streams per layer pair (ep_overlap.h): exposures checked by hand.
#include "planner/cost/ep_overlap.h"

#include <doctest/doctest.h>

#include "planner/base/error.h"

using dockyard::EpOverlapLayer;
using dockyard::PairedLayerUs;

namespace {

EpOverlapLayer Layer(double pre_f, double pre_b, double mlp_f, double mlp_b, double disp_f, double disp_b, double comb_f, double comb_b) {
  EpOverlapLayer l;
  l.pre[0] = pre_f;
  l.pre[1] = pre_b;
  l.mlp[0] = mlp_f;
  l.mlp[1] = mlp_b;
  l.dispatch[0] = disp_f;
  l.dispatch[1] = disp_b;
  l.combine[0] = comb_f;
  l.combine[1] = comb_b;
  return l;
}

}  // namespace

TEST_CASE("EP overlap, one layer pair: short all-to-alls hide entirely under the other micro-batch's compute") {
  // pre 100 / 200, mlp 150 / 300 (backward: input gradient 150, weight gradient 150), dispatch
  // 80 / 80, combine 60 / 60 us; no SMs taken.
  //   comm: combine_bwd 0-60 | dispatch_fwd 100-180 (after pre_fwd) | dispatch_bwd 250-330 (after
  //         the input gradient) | combine_fwd 550-610 (after mlp_fwd)
  //   comp: pre_fwd 0-100 | mlp_bwd 100-250 | mlp_bwd_dw 250-400 | mlp_fwd 400-550 | pre_bwd 550-750
  // The compute never waits: 750 us, the compute alone (plain: 750 + 280 = 1,030).
  CHECK(PairedLayerUs(Layer(100, 200, 150, 300, 80, 80, 60, 60), 1, {}, true) == doctest::Approx(750));
}

TEST_CASE("EP overlap, one layer pair: all-to-alls longer than the compute leave their excess exposed") {
  // The same compute, dispatch 400 / 400, combine 300 / 300: the comm stream runs back to back,
  // combine_bwd 0-300, dispatch_fwd 300-700, dispatch_bwd 700-1100, combine_fwd 1100-1400, and the
  // compute (750) hides under it: 1,400 us, 650 exposed (plain: 2,150).
  CHECK(PairedLayerUs(Layer(100, 200, 150, 300, 400, 400, 300, 300), 1, {}, true) == doctest::Approx(1400));
  // Two layers of a chunk chain (the next pair's combine_bwd after this pair's pre_bwd, its
  // pre_fwd after this pair's combine_fwd): still communication-bound, 1,400 per pair.
  CHECK(PairedLayerUs(Layer(100, 200, 150, 300, 400, 400, 300, 300), 2, {}, true) == doctest::Approx(1400));
}

TEST_CASE("EP overlap, one layer pair: the streams' order exposes what a total-compute bound calls hidden") {
  // pre 100 / 100, mlp 100 / 100, dispatch 150 / 0, combine 0 / 150. Each direction's all-to-alls
  // (150) are shorter than the other direction's compute (200), so max(0, a2a - compute) would
  // hide them all (400 us). But the forward dispatch queues behind the backward combine on the
  // comm stream, and the forward MLP waits for it:
  //   comm: combine_bwd 0-150 | dispatch_fwd 150-300 | dispatch_bwd 300 | combine_fwd 400
  //   comp: pre_fwd 0-100 | (waits for combine_bwd) mlp_bwd 150-200 | dw 200-250 | (waits for
  //         dispatch_fwd) mlp_fwd 300-400 | pre_bwd 400-500
  // 500 us: 100 exposed.
  CHECK(PairedLayerUs(Layer(100, 100, 100, 100, 150, 0, 0, 150), 1, {}, true) == doctest::Approx(500));
}

TEST_CASE("EP overlap: the communication kernels' SMs slow the compute beside them") {
  // The first case with 20 % of the SMs taken while a communication kernel runs:
  //   pre_fwd: 0-60 beside combine_bwd at 0.8 (48 of 100 done), the rest 60-112;
  //   mlp_bwd: 112-192 beside dispatch_fwd (64 done), the rest alone 192-278;
  //   dispatch_bwd 278-358, beside the weight gradient: 64 done, the rest 358-444;
  //   mlp_fwd 444-594 alone; combine_fwd 594-654 beside pre_bwd (48 done), the rest 654-806.
  // 806 us: the 280 us of overlapped communication cost the compute 0.2 x 280 = 56 us.
  CHECK(PairedLayerUs(Layer(100, 200, 150, 300, 80, 80, 60, 60), 1, {0.2, 1.0}, true) == doctest::Approx(806));
}

TEST_CASE("EP overlap: the communication kernel beside compute runs slower (NCCL's contention)") {
  // The communication-bound case (dispatch 400 / 400, combine 300 / 300) with the communication at
  // half its speed while compute runs beside it (comm_rate 0.5, no SMs taken):
  //   0-100    combine_bwd beside pre_fwd: 50 of 300 done; 100-350 alone, the rest;
  //   350-500  dispatch_fwd beside mlp_bwd (150): 75 of 400; 500-650 beside the weight gradient:
  //            75 more; 650-900 alone, the last 250;
  //   900-1050 dispatch_bwd beside mlp_fwd (150): 75 of 400; 1050-1375 alone, the rest 325;
  //   1375-1575 combine_fwd beside pre_bwd (200): 100 of 300; 1575-1775 alone, the last 200.
  // 1,775 us: all 750 us of compute ran beside communication and cost it 0.5 x 750 = 375 us
  // (1,400 without the slowdown; plain 2,150).
  CHECK(PairedLayerUs(Layer(100, 200, 150, 300, 400, 400, 300, 300), 1, {0.0, 0.5}, true) == doctest::Approx(1775));
  // Where the compute is the longer stream, the slower communication mostly still fits beside it.
  // The first case (dispatch 80 / 80, combine 60 / 60) at comm_rate 0.5:
  //   combine_bwd 0-100 beside pre_fwd (50 of 60), 100-110 alone: mlp_bwd waits for it, 110-260;
  //   dispatch_fwd 110-260 beside mlp_bwd (75 of 80), 260-270 beside the weight gradient (260-410);
  //   dispatch_bwd 270-410 beside it (70 of 80), 410-430 beside mlp_fwd (410-560);
  //   combine_fwd 560-680 beside pre_bwd (560-760).
  // 760 us: 10 us more than the compute alone (750), the combine_bwd's tail that mlp_bwd waits on.
  CHECK(PairedLayerUs(Layer(100, 200, 150, 300, 80, 80, 60, 60), 1, {0.0, 0.5}, true) == doctest::Approx(760));
}

TEST_CASE("EP overlap without delay_wgrad_compute: the backward dispatch waits for the whole MLP backward") {
  // pre 100 / 100, mlp 100 / 400 (input gradient 200, weight gradient 200), dispatch 0 / 300,
  // combine 0 / 0, no contention.
  // With delay_wgrad_compute: mlp_bwd 100-300, then its weight gradient 300-500 beside the backward
  // dispatch 300-600; mlp_fwd 500-600; pre_bwd waits for the dispatch: 600-700. 700 us, the compute
  // alone: all 300 us of dispatch hidden.
  CHECK(PairedLayerUs(Layer(100, 100, 100, 400, 0, 300, 0, 0), 1, {}, true) == doctest::Approx(700));
  // Without (Megatron-LM's default): the MLP backward (400) runs 100-500 as one node, the dispatch
  // 500-800 beside only mlp_fwd (500-600); pre_bwd 800-900. 900 us: 200 exposed.
  CHECK(PairedLayerUs(Layer(100, 100, 100, 400, 0, 300, 0, 0), 1, {}, false) == doctest::Approx(900));
  // A communication-bound pair is the comm stream end to end either way (1,400 us, above).
  CHECK(PairedLayerUs(Layer(100, 200, 150, 300, 400, 400, 300, 300), 1, {}, false) == doctest::Approx(1400));
}

TEST_CASE("EP overlap: the paired share of chunk forwards, warm-up and cool-down alone") {
  // pp 1 (combined_1f1b.py), 8 micro-batches: the first forward and the last backward run alone: 7 / 8.
  CHECK(dockyard::PairedChunkShare(8, 1, 1) == doctest::Approx(7.0 / 8.0));
  // pp 8, vpp 4, 64 micro-batches: 256 chunk forwards, warm-up averaged over ranks 7 + 3 x 8 + 1 = 32.
  CHECK(dockyard::PairedChunkShare(64, 8, 4) == doctest::Approx(224.0 / 256.0));
  // pp 4, 2 micro-batches: ranks hold min(4 - s, 2) = 2, 2, 2, 1 forwards before their first
  // backward: 1.75 of 2 alone on average.
  CHECK(dockyard::PairedChunkShare(2, 4, 1) == doctest::Approx(0.125));
  CHECK(dockyard::PairedChunkShare(1, 1, 1) == doctest::Approx(0.0));  // one micro-batch: nothing to pair
}

TEST_CASE("EP overlap: bad inputs are refused") {
  CHECK_THROWS_AS(PairedLayerUs(Layer(1, 1, 1, 1, 1, 1, 1, 1), 0, {}, true), dockyard::Error);
  CHECK_THROWS_AS(PairedLayerUs(Layer(1, 1, 1, 1, 1, 1, 1, 1), 1, {1.0, 1.0}, true), dockyard::Error);
  CHECK_THROWS_AS(PairedLayerUs(Layer(1, 1, 1, 1, 1, 1, 1, 1), 1, {0, 0.0}, true), dockyard::Error);
  CHECK_THROWS_AS(PairedLayerUs(Layer(1, 1, 1, 1, 1, 1, 1, 1), 1, {0, 1.1}, true), dockyard::Error);
  CHECK_THROWS_AS(PairedLayerUs(Layer(-1, 1, 1, 1, 1, 1, 1, 1), 1, {}, true), dockyard::Error);
  CHECK_THROWS_AS(dockyard::PairedChunkShare(0, 1, 1), dockyard::Error);
}

TEST_CASE("EP overlap with one hardware queue (CUDA_DEVICE_MAX_CONNECTIONS=1): communication overlaps only compute issued after it") {
  // Issue order: combine_bwd, pre_fwd, mlp_bwd, dispatch_fwd, mlp_bwd_dw, dispatch_bwd, mlp_fwd,
  // combine_fwd, pre_bwd. An operation leaves the queue when it starts (communication, one kernel)
  // or ends (compute, many kernels); the next starts only after that.
  //
  // Short all-to-alls (pre 100 / 200, mlp 150 / 300, dispatch 80 / 80, combine 60 / 60), delayed
  // weight gradient: combine_bwd 0-60 beside pre_fwd 0-100; mlp_bwd 100-250; dispatch_fwd 250-330
  // beside mlp_bwd_dw 250-400; dispatch_bwd 400-480 beside mlp_fwd 400-550; combine_fwd 550-610
  // beside pre_bwd 550-750. 750 us: each all-to-all is issued before compute that covers it.
  CHECK(PairedLayerUs(Layer(100, 200, 150, 300, 80, 80, 60, 60), 1, {}, true, true) == doctest::Approx(750));
  // Without the delayed weight gradient nothing is issued after dispatch_fwd but its own consumer:
  // combine_bwd 0-60, pre_fwd 0-100, mlp_bwd 100-400 (both gradients), dispatch_fwd 400-480 alone
  // (dispatch_bwd waits behind it on the stream and holds the queue), dispatch_bwd 480-560 beside
  // mlp_fwd 480-630, combine_fwd 630-690 beside pre_bwd 630-830: 830 us, dispatch_fwd's 80 exposed.
  // With several queues dispatch_fwd runs 100-180 beside mlp_bwd: 750.
  CHECK(PairedLayerUs(Layer(100, 200, 150, 300, 80, 80, 60, 60), 1, {}, false, true) == doctest::Approx(830));
  CHECK(PairedLayerUs(Layer(100, 200, 150, 300, 80, 80, 60, 60), 1, {}, false, false) == doctest::Approx(750));
  // Long all-to-alls (dispatch 400 / 400, combine 300 / 300), delayed weight gradient: combine_bwd
  // 0-300 beside pre_fwd 0-100; mlp_bwd 300-450 (after combine_bwd); dispatch_fwd 450-850 (issued
  // after mlp_bwd: the comm stream idles 300-450) beside mlp_bwd_dw 450-600; dispatch_bwd 850-1250
  // beside mlp_fwd 850-1000; combine_fwd 1250-1550 beside pre_bwd 1250-1450. 1,550 us against the
  // comm stream's 1,400 back to back with several queues.
  CHECK(PairedLayerUs(Layer(100, 200, 150, 300, 400, 400, 300, 300), 1, {}, true, true) == doctest::Approx(1550));
}

TEST_CASE("The flex dispatcher's SMs as a share of the GPU's (--moe-flex-dispatcher-num-sms)") {
  // HybridEP at 16 SMs on a 148-SM B200 / GB200: 16 / 148 = 0.1081; 32 on B300's 160: 0.2.
  CHECK(dockyard::FlexDispatcherSmShare(16, 148, "gb200-nvl72") == doctest::Approx(0.108108).epsilon(1e-5));
  CHECK(dockyard::FlexDispatcherSmShare(32, 160, "b300") == doctest::Approx(0.2));
  // Every SM (or none) leaves the compute nothing to run on.
  CHECK_THROWS_WITH_AS(dockyard::FlexDispatcherSmShare(148, 148, "gb200-nvl72"),
                       doctest::Contains("--moe-flex-dispatcher-num-sms 148: the dispatcher's kernels would hold all of the 148 SMs of "
                                         "gb200-nvl72's GPU"),
                       dockyard::Error);
  CHECK_THROWS_AS(dockyard::FlexDispatcherSmShare(0, 132, "h100-sxm"), dockyard::Error);
}
