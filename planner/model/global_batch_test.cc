// Tests of the global batch and its schedule.
#include "planner/model/global_batch.h"

#include <doctest/doctest.h>

#include "planner/base/error.h"

namespace dockyard {

TEST_CASE("Megatron runs every micro-batch of the global batch in one schedule") {
  // 1024 sequences over dp 32 at micro-batch 2: 1024 / (32 x 2) = 16 micro-batches, one schedule.
  const GlobalBatchSchedule s = ResolveGlobalBatch(1024, 32, 2, 8, /*megatron=*/true, std::nullopt);
  CHECK(s.microbatches_per_step == 16);
  CHECK(s.num_microbatches == 16);
  CHECK(s.grad_accumulation_steps == 1);
}

TEST_CASE("torchtitan with pp > 1 runs one schedule of every micro-batch unless --num-microbatches sets the schedule") {
  // 1024 / (16 x 1) = 64 micro-batches, pp 8: local_batch_size 1024 / 16 = 64, one schedule of 64.
  GlobalBatchSchedule s = ResolveGlobalBatch(1024, 16, 1, 8, false, std::nullopt);
  CHECK(s.num_microbatches == 64);
  CHECK(s.grad_accumulation_steps == 1);
  // 96 / (8 x 1) = 12 micro-batches, pp 8: one schedule of 12.
  s = ResolveGlobalBatch(96, 8, 1, 8, false, std::nullopt);
  CHECK(s.num_microbatches == 12);
  CHECK(s.grad_accumulation_steps == 1);
  // A pinned schedule of 8: 64 / 8 = 8 accumulation steps, each paying its own bubble.
  s = ResolveGlobalBatch(1024, 16, 1, 8, false, int64_t{8});
  CHECK(s.num_microbatches == 8);
  CHECK(s.grad_accumulation_steps == 8);
  // 16 / (4 x 1) = 4 micro-batches < pp 8: one schedule of 4.
  s = ResolveGlobalBatch(16, 4, 1, 8, false, std::nullopt);
  CHECK(s.num_microbatches == 4);
  CHECK(s.grad_accumulation_steps == 1);
  // A pinned schedule of 16 micro-batches: 64 / 16 = 4 accumulation steps.
  s = ResolveGlobalBatch(1024, 16, 1, 8, false, int64_t{16});
  CHECK(s.num_microbatches == 16);
  CHECK(s.grad_accumulation_steps == 4);
}

TEST_CASE("torchtitan with pp 1 counts every micro-batch in one accumulation loop") {
  // 256 / (64 x 1) = 4 micro-batches.
  const GlobalBatchSchedule s = ResolveGlobalBatch(256, 64, 1, 1, false, std::nullopt);
  CHECK(s.num_microbatches == 4);
  CHECK(s.grad_accumulation_steps == 1);
}

TEST_CASE("a global batch that dp x micro_batch_size does not divide is refused with the values") {
  // 100 sequences over dp 8: 100 / 8 is not whole.
  CHECK_THROWS_WITH_AS(ResolveGlobalBatch(100, 8, 1, 1, false, std::nullopt),
                       doctest::Contains("global batch size 100 is not a multiple of dp (8) x micro_batch_size (1)"), Error);
  // 64 over dp 8 at micro-batch 16: 8 sequences per rank cannot make a micro-batch of 16.
  CHECK(GlobalBatchMismatch(64, 8, 16, 1, false, std::nullopt).has_value());
  // Megatron cannot run a schedule of 4 when the global batch makes 8 micro-batches.
  CHECK_THROWS_WITH_AS(ResolveGlobalBatch(64, 8, 1, 2, true, int64_t{4}), doctest::Contains("num_microbatches 4 != global batch size 64"),
                       Error);
}

TEST_CASE("global batch tokens must be whole sequences") {
  CHECK(GlobalBatchSequencesFromTokens(4194304, 4096) == 1024);  // 4M tokens = 1024 x 4096
  CHECK_THROWS_WITH_AS(GlobalBatchSequencesFromTokens(4096 * 3 + 1, 4096), doctest::Contains("--global-batch-tokens 12289"), Error);
}

}  // namespace dockyard

TEST_CASE("MicroBatchesText: AxM only for accumulation steps of a pipeline schedule; else the count") {
  CHECK(dockyard::MicroBatchesText(1, 64, 16) == "1024");  // pp 1: 64 x 16 micro-batches one after another
  CHECK(dockyard::MicroBatchesText(2, 4, 16) == "4x16");   // 4 schedules of 16, each with its bubble
  CHECK(dockyard::MicroBatchesText(8, 1, 16) == "16");     // one schedule
}

TEST_CASE("The global batch is at most 2^36 tokens per step") {
  // 2^24 sequences of 4096 = 2^36 tokens: the largest taken; one more sequence is refused.
  CHECK_NOTHROW(dockyard::CheckGlobalBatchTokens(int64_t{1} << 24, 4096, "--global-batch-size"));
  CHECK_THROWS_WITH_AS(dockyard::CheckGlobalBatchTokens((int64_t{1} << 24) + 1, 4096, "--global-batch-size"),
                       doctest::Contains("--global-batch-size: 16777217 sequences x seq_len 4096 is more than the 68719476736 (2^36)"),
                       dockyard::Error);
  // 2^32 sequences (QA's try) at seq 4096: refused up front, naming the flag.
  CHECK_THROWS_WITH_AS(dockyard::CheckGlobalBatchTokens(int64_t{1} << 32, 4096, "--global-batch-tokens"),
                       doctest::Contains("--global-batch-tokens: 4294967296 sequences"), dockyard::Error);
}
