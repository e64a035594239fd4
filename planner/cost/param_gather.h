// The distributed optimizer's parameter all-gather as Megatron-Core's DDP runs it
// (docs/cost-model.md §5, "Parameter all-gather"). Without --overlap-param-gather it runs
// synchronously inside the optimizer step on every pipeline stage at once: all of it exposed. With
// it, each DDP buffer (dense, expert) of each model chunk is all-gathered bucket by bucket and the
// forward waits for a bucket only when its first module runs:
//  - buckets: only the first model chunk of the first pipeline rank is split into buckets of
//    `bucket_elems` parameters (Megatron-LM: --ddp-bucket-size, default max(40M, 1M x dp x cp),
//    megatron/training/training.py resolve_ddp_bucket_size; Megatron-Bridge's CommOverlapConfig
//    128 Mi with dp > 1, src/megatron/bridge/training/comm_overlap.py). Every other chunk, and
//    every chunk of pipeline ranks > 0, is one bucket per buffer (distributed_data_parallel.py:
//    "Turn off bucketing if we are on a pipeline stage that is not the first"; training.py
//    per_chunk_disable_bucketing for chunks after the first).
//  - the first bucket of each buffer is exposed: nothing dispatches it before the first forward
//    (param_and_grad_buffer.py finish_param_sync: "first AG bucket in first model chunk");
//    this takes the bucket at its full size (the first bucket in forward order holds what is left
//    of the reverse-order bucketing, at most one bucket).
//  - the rest of the first chunk's gather runs under its forward of the first micro-batch.
//  - align_param_gather (Megatron-LM's default; arguments.py turns it off without an interleaved
//    schedule; Megatron-Bridge turns it on with pp > 1 and vpp > 1): every stage dispatches its
//    first two chunks' gathers at the start of the step (pipeline_parallel/schedules.py
//    param_sync_func) and each later chunk's one chunk ahead, so a later stage's chunk is ready
//    when the first micro-batch reaches it unless its gather outlasts the first stage's first
//    bucket and one chunk's forward.
//  - not aligned (no interleaving, or --no-align-param-gather): every other chunk's gather starts
//    only when the first micro-batch reaches it (its forward pre-hook), on that micro-batch's path
//    through the pipeline: pp x vpp - 1 whole chunk gathers in a row.
//  - overlap_param_gather_with_optimizer_step (interleaved only): the first chunk is one bucket,
//    dispatched right after its own optimizer step (optimizer.py ChainedOptimizer._step), under the
//    rest of the optimizer (the other chunks' parameters and the experts', by element share).
#pragma once

#include <cstdint>

#include "planner/model/run_settings.h"

namespace dockyard {

struct ParamGatherInputs {
  // Rank 0's all-gather of its whole dense / expert parameter buffer (every chunk), us, and the
  // elements each holds (the rank's model-parallel parameters on that mesh).
  double dense_us = 0, sparse_us = 0;
  double dense_elems = 0, sparse_elems = 0;
  double bucket_elems = 0;      // DDP bucket size, parameters (> 0)
  int64_t pp = 1, vpp = 1;      // pipeline degree, model chunks per pipeline rank
  double chunk_forward_us = 0;  // one model chunk's forward of one micro-batch on the slowest stage, us
  double optimizer_us = 0;      // the step-end optimizer passes, us
};

// The exposed part of the step's parameter all-gather, us (the rules above; `run`'s
// overlap_param_gather, align_param_gather, overlap_param_gather_with_optimizer_step and vpp):
//   not overlapped:  dense_us + sparse_us
//   chunk c = (dense_us + sparse_us) / vpp;  first bucket b = sum over buffers of
//     buffer_us / vpp x min(1, bucket_elems / (buffer_elems / vpp))
//   aligned:         b + max(0, c - b - chunk_forward_us)
//   not aligned:     the same + (pp x vpp - 1) c
//   with the optimizer step: max(0, c - optimizer_us x (1 - dense_elems / vpp / (dense_elems + sparse_elems)))
double ParamGatherExposedUs(const ParamGatherInputs& in, const RunSettings& run);

// Megatron-LM's DDP bucket size in parameters: `ddp_bucket_size` when set (> 0), else
// max(40,000,000, 1,000,000 x dp_cp) (megatron/training/training.py resolve_ddp_bucket_size).
double MegatronDdpBucketElems(int64_t ddp_bucket_size, int64_t dp_cp);

}  // namespace dockyard
