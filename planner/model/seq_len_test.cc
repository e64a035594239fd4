// --seq-len against the model's max_position_embeddings and dockyard's hard bound.
#include "planner/model/seq_len.h"

#include <doctest/doctest.h>

#include "planner/base/error.h"
#include "planner/model/model_spec.h"

namespace dockyard {
namespace {

TEST_CASE("A sequence beyond max_position_embeddings is refused without rope_scaling, warned with it") {
  // OLMoE-1B-7B-0125-Instruct: max_position_embeddings 4096, no rope_scaling (testdata/hf).
  const ModelSpec olmoe = LoadModel("testdata/hf/olmoe-1b-7b-0125-instruct.json");
  CHECK(olmoe.max_position_embeddings == 4096);
  CHECK_FALSE(olmoe.rope_scaling);
  CHECK_NOTHROW(ValidateSeqLenForModel(4096, olmoe, "--seq-len"));
  CHECK_THROWS_WITH_AS(ValidateSeqLenForModel(4097, olmoe, "--seq-len"),
                       "--seq-len 4097: above the model's max_position_embeddings (4096), and its config has no rope_scaling to "
                       "extend it (Megatron-LM refuses seq_length > max_position_embeddings)",
                       Error);
  // DeepSeek-V3: max_position_embeddings 163840 with YaRN rope_scaling (factor 40 over 4096).
  const ModelSpec v3 = LoadModel("testdata/hf/deepseek-v3.json");
  CHECK(v3.max_position_embeddings == 163840);
  CHECK(v3.rope_scaling);
  CHECK_NOTHROW(ValidateSeqLenForModel(262144, v3, "--seq-len"));
  CHECK(SeqLenWarning(262144, v3, "--seq-len").find("warning: --seq-len 262144 is above the model's max_position_embeddings (163840)") ==
        0);
  CHECK(SeqLenWarning(4096, v3, "--seq-len").empty());
  CHECK(SeqLenWarning(8192, olmoe, "--seq-len").empty());  // refused above, never only warned
}

TEST_CASE("The hard bound holds for every model, also one that states no positions") {
  ModelSpec spec;                                                        // a dockyard spec: no max_position_embeddings
  CHECK_NOTHROW(ValidateSeqLenForModel(kMaxSeqLen, spec, "--seq-len"));  // 2^24 = 16777216
  CHECK_THROWS_WITH_AS(ValidateSeqLenForModel(kMaxSeqLen + 1, spec, "--seq-len"),
                       doctest::Contains("--seq-len 16777217: above dockyard's bound of 16777216 tokens per sequence"), Error);
  // Llama-4-Scout's 10485760 positions (the longest published) stay under the bound.
  const ModelSpec scout = LoadModel("testdata/hf/llama4-scout-17b-16e.json");
  CHECK(scout.max_position_embeddings == 10485760);
  CHECK_NOTHROW(ValidateSeqLenForModel(10485760, scout, "--seq-len"));
}

}  // namespace
}  // namespace dockyard
