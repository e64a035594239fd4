// The distributed optimizer's step-end data-parallel traffic as Megatron-Core's DDP runs it
// (docs/cost-model.md §5, "Megatron's overlapped data-parallel traffic"): the gradient reduce and
// the parameter all-gather, each over the rank's DDP buffers (dense, expert) split into buckets.
//  - buckets: only the first model chunk of the first pipeline rank is split into buckets of
//    `bucket_elems` parameters (Megatron-LM: --ddp-bucket-size, default max(40M, 1M x dp x cp),
//    megatron/training/training.py resolve_ddp_bucket_size; Megatron-Bridge's CommOverlapConfig
//    128 Mi with dp > 1, src/megatron/bridge/training/comm_overlap.py). Every other chunk, and
//    every chunk of pipeline ranks > 0, is one bucket per buffer (distributed_data_parallel.py:
//    "Turn off bucketing if we are on a pipeline stage that is not the first"; training.py
//    per_chunk_disable_bucketing for chunks after the first). A bucket never splits a parameter
//    (param_and_grad_buffer.py fills buckets parameter by parameter, in reverse order), so the
//    bucket that holds the first-registered parameters holds at least the embedding: the edge bucket
//    is taken as max(bucket, the embedding's elements on the rank), at most the chunk.
//  - the gradient reduce (--overlap-grad-reduce): each bucket's reduce starts when the last
//    micro-batch's backward has produced all its gradients; the edge bucket (the embedding's, the
//    last gradients of the backward) is exposed, and the rest of the first chunk runs under that
//    last backward of a chunk; a later stage's chunk (one bucket) starts a chunk's backward before
//    the first stage ends. Without the overlap: all of it at the step's end.
//  - the parameter all-gather (--overlap-param-gather): the edge bucket is exposed (nothing
//    dispatches it before the first forward: param_and_grad_buffer.py finish_param_sync, "first AG
//    bucket in first model chunk"), the rest of the first chunk runs under its forward of the first
//    micro-batch;
//    aligned (align_param_gather, Megatron-LM's default; arguments.py turns it off without an
//    interleaved schedule; Megatron-Bridge turns it on with pp > 1 and vpp > 1): every stage
//    dispatches its first two chunks' gathers at the start of the step (pipeline_parallel/
//    schedules.py param_sync_func) and each later chunk's one chunk ahead, so a later stage's chunk
//    is ready when the first micro-batch reaches it unless it outlasts the edge bucket and one
//    chunk's forward; not aligned (no interleaving, or --no-align-param-gather): every other chunk's
//    gather starts only when the first micro-batch reaches it (its forward pre-hook), on that
//    micro-batch's path through the pipeline.
//    overlap_param_gather_with_optimizer_step (interleaved only): every stage's first chunk is one
//    bucket, dispatched right after its own optimizer step (optimizer.py ChainedOptimizer._step),
//    under the rest of the optimizer (the other chunks' parameters and the experts', by element
//    share); the later chunks as above (aligned: ahead of need; not aligned: on the path).
// Every stage's buffers are taken as rank 0's (stage 0's).
#pragma once

#include <cstdint>

#include "planner/model/run_settings.h"

namespace dockyard {

// One direction's traffic on rank 0: its whole dense / expert buffer (every chunk), us, and the
// elements each holds (the rank's model-parallel parameters on that mesh).
struct DdpBufferTraffic {
  double dense_us = 0, sparse_us = 0;
  double dense_elems = 0, sparse_elems = 0;
};

struct DdpOverlapInputs {
  DdpBufferTraffic grads, params;  // the gradient reduce, the parameter all-gather
  double bucket_elems = 0;         // DDP bucket size, parameters (> 0)
  double embedding_elems = 0;      // the embedding's elements on rank 0 (0 when its stage has none): the edge bucket's least
  int64_t pp = 1;                  // pipeline degree (the model chunks per rank are run.vpp)
  double chunk_forward_us = 0;     // one model chunk's forward of one micro-batch on the slowest stage, us
  double chunk_backward_us = 0;    // one model chunk's backward of one micro-batch on the slowest stage, us
  double optimizer_us = 0;         // the step-end optimizer passes, us
};

// The edge bucket of one direction's first chunk, us: sum over buffers of buffer_us / vpp x
// min(1, edge / (buffer_elems / vpp)), edge = max(bucket_elems, embedding_elems) for the dense
// buffer, bucket_elems for the expert one.
double EdgeBucketUs(const DdpBufferTraffic& t, const DdpOverlapInputs& in, int64_t vpp);

// The exposed part of the step's gradient reduce, us (`run`'s overlap_grad_reduce and vpp), with
// c = (dense_us + sparse_us) / vpp and b the edge bucket (EdgeBucketUs of `grads`):
//   not overlapped:  dense_us + sparse_us
//   overlapped:      b + max(0, c - b - chunk_backward_us)
double GradReduceExposedUs(const DdpOverlapInputs& in, const RunSettings& run);

// The exposed part of the step's parameter all-gather, us (`run`'s overlap_param_gather,
// align_param_gather, overlap_param_gather_with_optimizer_step and vpp), with c and b of `params`:
//   not overlapped:  dense_us + sparse_us
//   aligned:         b + max(0, c - b - chunk_forward_us)
//   not aligned:     the same + (pp x vpp - 1) c
//   with the optimizer step: max(0, c - optimizer_us x (1 - dense_elems / vpp / (dense_elems + sparse_elems))),
//                    not aligned + pp x (vpp - 1) c (the later chunks on the path)
double ParamGatherExposedUs(const DdpOverlapInputs& in, const RunSettings& run);

}  // namespace dockyard
