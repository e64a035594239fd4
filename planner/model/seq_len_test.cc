// --seq-len: dockyard's hard bound, and the warning beyond the model's max_position_embeddings.
#include "planner/model/seq_len.h"

#include <doctest/doctest.h>

#include "planner/base/error.h"
#include "planner/model/model_spec.h"
#include "planner/model/model_file.h"

namespace dockyard {
namespace {

TEST_CASE("The hard bound holds for every model, also one that states no positions") {
  ModelSpec spec;                                                        // a dockyard spec: no max_position_embeddings
  CHECK_NOTHROW(ValidateSeqLenForModel(kMaxSeqLen, spec, "--seq-len"));  // 2^20 = 1048576
  CHECK_THROWS_WITH_AS(ValidateSeqLenForModel(10000000, spec, "--seq-len"),
                       "--seq-len 10000000: above dockyard's bound of 1048576 tokens per sequence (2^20; the published runs it is "
                       "checked against train at most 65536)",
                       Error);
  const ModelSpec olmoe = LoadModel("testdata/hf/olmoe-1b-7b-0125-instruct.json");  // max_position_embeddings 4096
  CHECK_THROWS_WITH_AS(ValidateSeqLenForModel(kMaxSeqLen + 1, olmoe, "--seq-len"), doctest::Contains("--seq-len 1048577"), Error);
}

TEST_CASE("Beyond max_position_embeddings is a warning, naming the limit and the rope_scaling") {
  // OLMoE-1B-7B-0125-Instruct: max_position_embeddings 4096, no rope_scaling (testdata/hf).
  const ModelSpec olmoe = LoadModel("testdata/hf/olmoe-1b-7b-0125-instruct.json");
  CHECK(olmoe.max_position_embeddings == 4096);
  CHECK_FALSE(olmoe.rope_scaling);
  CHECK(SeqLenWarning(4096, olmoe, "--seq-len").empty());
  CHECK(SeqLenWarning(8192, olmoe, "--seq-len") ==
        "warning: --seq-len 8192 is above the model's max_position_embeddings (4096) and its config has no rope_scaling: the positions "
        "beyond it were not pretrained (a long-context run extends RoPE itself)\n");
  CHECK_NOTHROW(ValidateSeqLenForModel(8192, olmoe, "--seq-len"));   // planned, as runs.json H03 trains 65536 over 40960
  CHECK(SeqLenWarning(kMaxSeqLen + 1, olmoe, "--seq-len").empty());  // refused instead: no warning before the error
  // DeepSeek-V3: max_position_embeddings 163840 with YaRN rope_scaling (factor 40 over 4096).
  const ModelSpec v3 = LoadModel("testdata/hf/deepseek-v3.json");
  CHECK(v3.max_position_embeddings == 163840);
  CHECK(v3.rope_scaling);
  CHECK(SeqLenWarning(262144, v3, "--seq-len") ==
        "warning: --seq-len 262144 is above the model's max_position_embeddings (163840); the config's rope_scaling must cover it\n");
  ModelSpec spec;  // no positions stated: no warning
  CHECK(SeqLenWarning(65536, spec, "--seq-len").empty());
}

TEST_CASE("Context parallelism needs seq_len divisible by 2 x cp") {
  // Megatron get_batch_on_this_cp_rank: 2 x cp chunks per sequence. 4096 = 512 x 8: cp 4 splits it.
  CHECK(SeqLenSplits(4096, 4, 1, false, nullptr));
  CHECK_NOTHROW(ValidateSeqLenSplits(4096, 4, 1, false));
  // 4100 = 8 x 512 + 4: not a multiple of 2 x cp = 8.
  std::string error;
  CHECK_FALSE(SeqLenSplits(4100, 4, 1, false, &error));
  CHECK(error.find("--seq-len 4100 must be divisible by 2 x cp = 8 (cp 4)") == 0);
  CHECK_THROWS_WITH_AS(ValidateSeqLenSplits(4100, 4, 1, false), doctest::Contains("2 x cp = 8"), Error);
  // cp 3: 6 splits into 6 chunks of 1 token; 9 divides by cp (3) but not by 2 x cp (6).
  CHECK(SeqLenSplits(6, 3, 1, false, nullptr));
  CHECK_FALSE(SeqLenSplits(9, 3, 1, false, nullptr));
  // cp 1: no split, any length.
  CHECK(SeqLenSplits(4097, 1, 1, false, nullptr));
}

TEST_CASE("Megatron's sequence parallelism needs each cp rank's tokens divisible by tp; torchtitan's DTensor takes uneven splits") {
  std::string error;
  // QA: --seq-length 4095 at TP 2 passed; Megatron's scatter along the sequence asserts.
  CHECK_FALSE(SeqLenSplits(4095, 1, 2, true, &error));
  CHECK(error.find("--seq-len 4095 must be divisible by tp 2: Megatron's sequence parallelism") == 0);
  CHECK(SeqLenSplits(4095, 1, 2, false, nullptr));  // torchtitan
  CHECK(SeqLenSplits(4096, 1, 8, true, nullptr));
  // cp 2 first splits 4100 = 2 x 2 x 1025 (divisible by 2 x cp = 4) into 2050 per cp rank: tp 4
  // does not divide 2050 (= 4 x 512 + 2), tp 2 does.
  CHECK_FALSE(SeqLenSplits(4100, 2, 4, true, &error));
  CHECK(error.find("--seq-len 4100 / cp 2 = 2050 tokens per cp rank must be divisible by tp 4") == 0);
  CHECK(SeqLenSplits(4100, 2, 2, true, nullptr));
  CHECK_THROWS_WITH_AS(ValidateSeqLenSplits(4095, 1, 2, true), doctest::Contains("First dimension of the tensor"), Error);
}

}  // namespace
}  // namespace dockyard
