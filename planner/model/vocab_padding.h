// Megatron-LM's vocabulary padding (--make-vocab-size-divisible-by): the embedding and the output
// layer have a padded number of rows, a multiple of the divisor x tp, so that every tensor-parallel
// rank holds the same number of vocabulary rows and the GEMMs see aligned shapes.
#pragma once

#include <cstdint>

#include "planner/model/training.h"

namespace dockyard {

// Megatron-LM's default --make-vocab-size-divisible-by (megatron/training/arguments.py: default=128).
inline constexpr int64_t kMegatronVocabDivisor = 128;
// The largest divisor accepted: any larger value only pads (no framework uses one near it).
inline constexpr int64_t kMaxVocabDivisor = int64_t{1} << 20;

// The divisor a plan pads the vocabulary by: TrainingConfig::make_vocab_size_divisible_by where
// set, else kMegatronVocabDivisor under Megatron-LM (`megatron`) and 1 (no padding) under
// torchtitan, which builds the embedding with the tokenizer's vocab_size as it is. Megatron-Bridge
// recipes do not pad unless asked (should_pad_vocab: False in their tokenizer config), and some set
// their own divisor: --make-vocab-size-divisible-by 1 plans them.
// Throws dockyard::Error naming `flag`, its value and the rule when the value is outside
// [1, kMaxVocabDivisor], or above 1 under torchtitan (which has no vocabulary padding).
int64_t VocabDivisor(const TrainingConfig& training, bool megatron, const char* flag = "--make-vocab-size-divisible-by");

// Megatron-LM's _vocab_size_with_padding (megatron/training/tokenizer/tokenizer.py): the vocabulary
// rounded up to a multiple of `divisor` x `tp`:
//   multiple = make_vocab_size_divisible_by * tensor_model_parallel_size
//   after = int(math.ceil(orig_vocab_size / multiple) * multiple)
// Qwen3-30B-A3B (151,936), divisor 128: tp 1 -> 151,936 (1,187 x 128); tp 2 -> 152,064 (594 x 256).
// `divisor` and `tp` >= 1; throws dockyard::OverflowError where the product or the result does not
// fit int64.
int64_t PaddedVocabSize(int64_t vocab_size, int64_t divisor, int64_t tp);

}  // namespace dockyard
