// The global batch: a fixed number of sequences per optimizer step (Megatron --global-batch-size,
// torchtitan training.global_batch_size) turned into the micro-batches each data-parallel rank runs
// and how its framework schedules them.
//
//   micro-batches per step N = global_batch_size / (dp x micro_batch_size),  dp = dp_replicate x dp_shard
// (context parallelism splits a sequence, it does not add data-parallel replicas).
//
// Scheduling, as each framework runs it:
//  - megatron: the N micro-batches fill one pipeline schedule (megatron/core/pipeline_parallel/
//    schedules.py get_num_microbatches = global_batch_size / (micro_batch_size x dp)): M = N, A = 1.
//  - torchtitan: gradient accumulation is an outer loop of A pipeline schedules of M micro-batches
//    each (torchtitan/train.py: gradient_accumulation_steps = global_batch_size / (local_batch_size x
//    dp); the pipeline's n_microbatches = local_batch_size / pipeline_parallel_microbatch_size), so
//    each accumulation step pays its own bubble. With pp = 1 every micro-batch is one accumulation
//    step of the plain loop, which the cost model counts as M = N, A = 1. With pp > 1, M is
//    `schedule_microbatches` when given (--num-microbatches), else N: local_batch_size =
//    global_batch_size / dp, one schedule, no accumulation loop (torchtitan's default
//    global_batch_size is local_batch_size x dp); with 1F1B the activations in flight are bounded
//    by pp, so the longer schedule costs no memory. A = N / M.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace dockyard {

struct GlobalBatchSchedule {
  int64_t microbatches_per_step = 0;    // N
  int64_t num_microbatches = 0;         // M, micro-batches per pipeline schedule
  int64_t grad_accumulation_steps = 1;  // A, schedules per step (N = A x M)
};

// The most tokens per step dockyard takes: 2^36 (about 6.9e10), about a thousand times the largest
// published global batch (DeepSeek-V3: 15,360 sequences of 4,096 tokens, 6.3e7; arXiv 2412.19437
// §4.2); larger steps overflow its 64-bit byte counts.
constexpr int64_t kMaxGlobalBatchTokens = int64_t{1} << 36;
// Throws dockyard::Error naming `flag`, the values and the rule when `sequences` x `seq_len`
// exceeds kMaxGlobalBatchTokens (both >= 1).
void CheckGlobalBatchTokens(int64_t sequences, int64_t seq_len, const std::string& flag);

// The global batch in sequences from a token count: `tokens` / `seq_len`. Throws dockyard::Error
// naming --global-batch-tokens when it is < 1 or not a multiple of seq_len.
int64_t GlobalBatchSequencesFromTokens(int64_t tokens, int64_t seq_len);

// Why `global_batch_size` sequences cannot be split over dp ranks at micro_batch_size (or the
// pinned schedule does not divide N); nullopt when it can. The text names the values and the rule.
std::optional<std::string> GlobalBatchMismatch(int64_t global_batch_size, int64_t dp, int64_t micro_batch_size, int64_t pp, bool megatron,
                                               std::optional<int64_t> schedule_microbatches);

// The schedule of `global_batch_size` sequences (see above). Throws dockyard::Error with
// GlobalBatchMismatch's text when it does not divide, or for values < 1.
GlobalBatchSchedule ResolveGlobalBatch(int64_t global_batch_size, int64_t dp, int64_t micro_batch_size, int64_t pp, bool megatron,
                                       std::optional<int64_t> schedule_microbatches);

// How reports show the micro-batches per step of a data-parallel rank: "AxM" (A schedules of M,
// torchtitan's accumulation loop around the pipeline schedule, each paying its bubble) when pp > 1
// and A > 1; otherwise the count A x M alone -- one schedule, or pp = 1, where there is no pipeline
// schedule and the A x M micro-batches simply run one after another (--num-microbatches only groups
// them; the step time is the same).
std::string MicroBatchesText(int64_t pp, int64_t grad_accumulation_steps, int64_t num_microbatches);

}  // namespace dockyard
