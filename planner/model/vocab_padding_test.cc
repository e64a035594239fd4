// Megatron-LM's vocabulary padding: _vocab_size_with_padding's arithmetic and the divisor's rules.
#include "planner/model/vocab_padding.h"

#include <doctest/doctest.h>

#include "planner/base/error.h"

using dockyard::PaddedVocabSize;
using dockyard::TrainingConfig;
using dockyard::VocabDivisor;

TEST_CASE("PaddedVocabSize rounds the vocabulary up to a multiple of the divisor x tp") {
  // Qwen3-30B-A3B, 151,936 = 1,187 x 128: tp 1 keeps it; tp 2: multiple 256, ceil(593.5) = 594
  // -> 152,064 (76,032 rows per rank).
  CHECK(PaddedVocabSize(151936, 128, 1) == 151936);
  CHECK(PaddedVocabSize(151936, 128, 2) == 152064);
  // DeepSeek-V3, 129,280 = 505 x 256: tp 2 keeps it; tp 4: multiple 512, ceil(252.5) = 253 -> 129,536.
  CHECK(PaddedVocabSize(129280, 128, 2) == 129280);
  CHECK(PaddedVocabSize(129280, 128, 4) == 129536);
  // Divisor 1 and tp 1: no padding (Megatron-Bridge recipes without should_pad_vocab).
  CHECK(PaddedVocabSize(50257, 1, 1) == 50257);
  // GPT-2's 50,257 with Megatron-LM's default 128: 393 x 128 = 50,304 (Megatron-LM's log line
  // "padded vocab (size: 50257) with 47 dummy tokens (new size: 50304)").
  CHECK(PaddedVocabSize(50257, 128, 1) == 50304);
}

TEST_CASE("VocabDivisor: 128 under megatron by default, 1 under torchtitan, the flag where given") {
  TrainingConfig t;
  CHECK(VocabDivisor(t, true) == 128);
  CHECK(VocabDivisor(t, false) == 1);
  t.make_vocab_size_divisible_by = 1;
  CHECK(VocabDivisor(t, true) == 1);
  CHECK(VocabDivisor(t, false) == 1);
  t.make_vocab_size_divisible_by = 64;
  CHECK(VocabDivisor(t, true) == 64);
}

TEST_CASE("VocabDivisor rejects a divisor below 1") {
  TrainingConfig t;
  t.make_vocab_size_divisible_by = 0;  // Megatron's ceil(v / 0) divides by zero
  CHECK_THROWS_WITH_AS(VocabDivisor(t, true), doctest::Contains("--make-vocab-size-divisible-by (0) must be in [1, 1048576]"),
                       dockyard::Error);
}

TEST_CASE("VocabDivisor rejects padding under torchtitan") {
  TrainingConfig t;
  t.make_vocab_size_divisible_by = 128;  // torchtitan builds nn.Embedding(vocab_size, dim) unpadded
  CHECK_THROWS_WITH_AS(VocabDivisor(t, false), doctest::Contains("--make-vocab-size-divisible-by (128) is Megatron-LM's vocabulary padding"),
                       dockyard::Error);
}
