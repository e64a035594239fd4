// The global batch and its schedule (see global_batch.h).
#include "planner/model/global_batch.h"

#include <fmt/format.h>

#include "planner/base/error.h"

namespace dockyard {

void CheckGlobalBatchTokens(int64_t sequences, int64_t seq_len, const std::string& flag) {
  if (sequences < 1 || seq_len < 1) return;  // refused elsewhere (>= 1)
  if (sequences > kMaxGlobalBatchTokens / seq_len) {
    throw Error(
        fmt::format("{}: {} sequences x seq_len {} is more than the {} (2^36) tokens per step dockyard takes (about a thousand "
                    "times the largest published global batch; more would overflow its 64-bit byte counts)",
                    flag, sequences, seq_len, kMaxGlobalBatchTokens));
  }
}

int64_t GlobalBatchSequencesFromTokens(int64_t tokens, int64_t seq_len) {
  if (tokens < 1) throw Error(fmt::format("--global-batch-tokens: must be >= 1, got {}", tokens));
  if (seq_len < 1) throw Error(fmt::format("--seq-len: must be >= 1, got {}", seq_len));
  if (tokens % seq_len != 0) {
    throw Error(fmt::format("--global-batch-tokens {}: not a whole number of sequences of --seq-len {} ({} x {} = {})", tokens, seq_len,
                            tokens / seq_len, seq_len, tokens / seq_len * seq_len));
  }
  return tokens / seq_len;
}

std::optional<std::string> GlobalBatchMismatch(int64_t gbs, int64_t dp, int64_t mbs, int64_t pp, bool megatron,
                                               std::optional<int64_t> schedule) {
  if (gbs < 1) return fmt::format("global batch size must be >= 1, got {}", gbs);
  if (dp < 1 || mbs < 1 || pp < 1) return fmt::format("dp ({}), micro_batch_size ({}) and pp ({}) must be >= 1", dp, mbs, pp);
  // dp x mbs can exceed int64 only for absurd inputs; compare by division first.
  if (gbs / dp < mbs || gbs % dp != 0 || (gbs / dp) % mbs != 0) {
    return fmt::format("global batch size {} is not a multiple of dp ({}) x micro_batch_size ({})", gbs, dp, mbs);
  }
  const int64_t n = gbs / dp / mbs;
  if (schedule) {
    if (*schedule < 1) return fmt::format("num_microbatches must be >= 1, got {}", *schedule);
    if (megatron && *schedule != n) {
      return fmt::format(
          "num_microbatches {} != global batch size {} / (dp {} x micro_batch_size {}) = {} (Megatron runs them all in one schedule)",
          *schedule, gbs, dp, mbs, n);
    }
    if (n % *schedule != 0) {
      return fmt::format(
          "{} micro-batches per step (global batch size {} / (dp {} x micro_batch_size {})) is not a multiple of num_microbatches {}", n,
          gbs, dp, mbs, *schedule);
    }
  }
  return std::nullopt;
}

GlobalBatchSchedule ResolveGlobalBatch(int64_t gbs, int64_t dp, int64_t mbs, int64_t pp, bool megatron, std::optional<int64_t> schedule) {
  if (auto why = GlobalBatchMismatch(gbs, dp, mbs, pp, megatron, schedule)) throw Error("--global-batch-size: " + *why);
  GlobalBatchSchedule s;
  s.microbatches_per_step = gbs / dp / mbs;
  const int64_t n = s.microbatches_per_step;
  // Megatron: every micro-batch in one schedule (a different pinned schedule is refused above).
  // torchtitan: the pinned schedule, else local_batch_size = global_batch_size / dp (torchtitan's
  // default global_batch_size = local x dp): one schedule of every micro-batch, no accumulation
  // loop. With 1F1B the activations in flight are bounded by pp, so a longer schedule costs no
  // memory and only shrinks the bubble's share.
  s.num_microbatches = schedule.value_or(n);
  s.grad_accumulation_steps = n / s.num_microbatches;
  return s;
}

std::string MicroBatchesText(int64_t pp, int64_t grad_accumulation_steps, int64_t num_microbatches) {
  if (pp > 1 && grad_accumulation_steps > 1) return fmt::format("{}x{}", grad_accumulation_steps, num_microbatches);
  return std::to_string(grad_accumulation_steps * num_microbatches);
}

}  // namespace dockyard
