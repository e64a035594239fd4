// Megatron-LM's vocabulary padding (see vocab_padding.h).
#include "planner/model/vocab_padding.h"

#include <fmt/format.h>

#include "planner/base/checked_math.h"
#include "planner/base/error.h"

namespace dockyard {

int64_t VocabDivisor(const TrainingConfig& t, bool megatron, const char* flag) {
  if (!t.make_vocab_size_divisible_by) return megatron ? kMegatronVocabDivisor : 1;
  const int64_t v = *t.make_vocab_size_divisible_by;
  if (v < 1 || v > kMaxVocabDivisor) throw Error(fmt::format("{} ({}) must be in [1, {}]", flag, v, kMaxVocabDivisor));
  if (!megatron && v > 1) {
    throw Error(fmt::format("{} ({}) is Megatron-LM's vocabulary padding (--convention megatron); torchtitan builds the embedding "
                            "with the tokenizer's vocab_size unpadded: use 1 or --convention megatron",
                            flag, v));
  }
  return v;
}

int64_t PaddedVocabSize(int64_t vocab_size, int64_t divisor, int64_t tp) {
  if (vocab_size < 1 || divisor < 1 || tp < 1) {
    throw Error(fmt::format("internal: PaddedVocabSize({}, {}, {}) needs positive arguments", vocab_size, divisor, tp));
  }
  const int64_t multiple = CheckedMul(divisor, tp, "make_vocab_size_divisible_by x tp");
  const int64_t chunks = vocab_size / multiple + (vocab_size % multiple != 0);
  return CheckedMul(chunks, multiple, "padded vocab_size");
}

}  // namespace dockyard
