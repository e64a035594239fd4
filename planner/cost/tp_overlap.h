// Tensor parallelism's sequence-parallel traffic as each framework exposes it. One block is an
// all-gather of the T x hidden activations before a column-parallel linear and a reduce-scatter
// after the row-parallel linear that closes it (the attention block: qkv ... proj; an MLP block:
// fc1 ... fc2); accounting/comm.h SequenceParallelBlocks counts a layer's blocks and
// SequenceParallelBackward its backward collectives. `c` is one ring all-gather or reduce-scatter
// of the block's activations (network.h RingCollectiveUs); `g_col` and `g_row` are the forward
// times of the block's column- and row-parallel linears, each of whose data and weight gradients
// takes the same again. All times in us per block, layer and micro-batch.
//
//  - torchtitan (DTensor's redistributes, no asynchronous TP): every collective exposed,
//    forward 2c, backward 2c.
//  - megatron without --tp-comm-overlap: forward 2c (the gathered input feeds the next GEMM, the
//    scattered output the residual add). Backward: the row-parallel dgrad waits for its output
//    gradient's all-gather (c); the column-parallel input's re-gather runs asynchronously beside
//    its dgrad GEMM and the dgrad's reduce-scatter beside its wgrad GEMM (TransformerEngine's
//    _Linear / _LayerNormLinear backward, async_op=True; Megatron-Core's
//    LinearWithGradAccumulationAndAsyncCommunication): c + 2 max(0, c - g_col).
//  - megatron with --tp-comm-overlap (TransformerEngine userbuffers, initialize_ub's defaults):
//      ring_exchange (qkv_fprop / fc1_fprop, proj_dgrad / fc2_dgrad): the GEMM in tp chunks, one
//        shard's copy (c / (tp - 1), copy engines) beside each chunk but the last:
//        ring(g) = (tp - 1) max(0, c / (tp - 1) - g / tp);
//      pipeline (proj_fprop / fc2_fprop), 4 splits: each chunk's reduce-scatter beside the next
//        chunk's GEMM, the last one exposed, the GEMM on 1 - s of the SMs (g' = g / (1 - s)):
//        pipe(g) = c / 4 + 3 max(0, c / 4 - g' / 4) + (g' - g);
//      bulk (qkv_dgrad + qkv_wgrad, fc1_dgrad + fc1_wgrad): the input's re-gather beside the
//        dgrad GEMM, the dgrad's reduce-scatter beside the wgrad GEMM, each GEMM on 1 - s:
//        bulk(g) = max(0, c - g') + (g' - g).
//    Forward ring(g_col) + pipe(g_row); backward ring(g_row) + 2 bulk(g_col).
// s is knobs.h TpOverlapKnobs::sm_share. Under full recomputation the backward also re-runs the
// forward's (the caller adds it).
#pragma once

#include <cstdint>

#include "planner/layout/convention.h"

namespace dockyard {

// The forward times of a block's linears (us): the column-parallel one after the all-gather and
// the row-parallel one before the reduce-scatter.
struct TpBlockGemmsUs {
  double column = 0;
  double row = 0;
};

// A block's exposed TP communication per pass (us).
struct TpBlockExposureUs {
  double forward = 0, backward = 0;
};

// The rule above. `tp_comm_overlap` is run_settings.h TpCommOverlapped (megatron only; ignored
// under torchtitan). Throws dockyard::Error for tp < 2, a negative or non-finite time, or
// sm_share outside [0, 1).
TpBlockExposureUs TpBlockExposedUs(double collective_us, const TpBlockGemmsUs& gemms, int64_t tp, Convention convention,
                                   bool tp_comm_overlap, double sm_share);

}  // namespace dockyard
