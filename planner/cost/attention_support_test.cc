// Tests for the cost model's attention coverage check (attention_support.h): the variants it does
// not price are refused with the file, the field, its value and the rule; plain attention passes.
#include "planner/cost/attention_support.h"

#include <doctest/doctest.h>

#include "planner/base/error.h"
#include "planner/model/model_spec.h"
#include "planner/model/model_file.h"

namespace dockyard {
namespace {

TEST_CASE("Softmax attention (GQA and MLA) is priced: no refusal") {
  CHECK_NOTHROW(CheckCostModelCoversAttention(LoadModel("testdata/hf/qwen3-30b-a3b.json")));
  CHECK_NOTHROW(CheckCostModelCoversAttention(LoadModel("testdata/hf/deepseek-v3.json")));
}

TEST_CASE("DeepSeek Sparse Attention is refused with index_topk, its value and the rule") {
  CHECK_THROWS_WITH_AS(CheckCostModelCoversAttention(LoadModel("testdata/hf/deepseek-v3.2-exp.json")),
                       doctest::Contains("testdata/hf/deepseek-v3.2-exp.json: /attention/indexer/index_topk (HF index_topk) = 2048: "
                                         "DeepSeek Sparse Attention is not in the cost model"),
                       Error);
}

TEST_CASE("Gated DeltaNet layers are refused with the first linear layer and the count") {
  CHECK_THROWS_WITH_AS(CheckCostModelCoversAttention(LoadModel("testdata/hf/qwen3-next-80b-a3b-instruct.json")),
                       doctest::Contains("testdata/hf/qwen3-next-80b-a3b-instruct.json: /attention_layer_types/0 (HF layer_types / "
                                         "full_attention_interval) = \"linear_attention\": Gated DeltaNet linear attention (36 of 48 "
                                         "layers) is not in the cost model"),
                       Error);
}

TEST_CASE("A hybrid model whose linear layers are all switched to full attention is priced") {
  ModelSpec m = LoadModel("testdata/hf/qwen3-next-80b-a3b-instruct.json");
  m.linear_attention_layers.assign(m.num_hidden_layers, false);  // every layer gated softmax attention
  CHECK_NOTHROW(CheckCostModelCoversAttention(m));
}

}  // namespace
}  // namespace dockyard
