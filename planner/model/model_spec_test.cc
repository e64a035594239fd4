// dockyard's own model spec: round trip from every HF config, and one invalid input per case.
#include "planner/model/model_spec.h"

#include <doctest/doctest.h>

#include "planner/base/error.h"
#include "planner/model/inventory.h"
#include "planner/model/model_file.h"
#include "tests/test_models.h"

using dockyard::Error;
using dockyard::Json;

static const char* kConfigs[] = {
    "testdata/hf/deepseek-v2-lite.json",
    "testdata/hf/deepseek-v3.json",
    "testdata/hf/gpt-oss-120b.json",
    "testdata/hf/mixtral-8x7b.json",
    "testdata/hf/olmoe-1b-7b-0125-instruct.json",
    "testdata/hf/qwen1.5-moe-a2.7b.json",
    "testdata/hf/qwen3-30b-a3b.json",
    "testdata/hf/deepseek-v3.2-exp.json",
    "testdata/hf/qwen3-next-80b-a3b-instruct.json",
    "testdata/hf/minimax-m2.7-nvfp4.json",
    "testdata/hf/ernie-4.5-21b-a3b.json",
    "testdata/hf/ling-flash-2.0.json",
};

TEST_CASE("Every HF config round-trips through the dockyard spec with the same inventory") {
  for (const char* path : kConfigs) {
    CAPTURE(path);
    auto from_hf = dockyard::LoadModel(path);
    Json spec = dockyard::ModelSpecToJson(from_hf);
    auto from_spec = dockyard::ModelSpecFromJson(spec, "spec.json");
    auto a = dockyard::BuildInventory(from_hf);
    auto b = dockyard::BuildInventory(from_spec);
    REQUIRE(a.params.size() == b.params.size());
    for (size_t i = 0; i < a.params.size(); ++i) {
      CHECK(a.params[i].fqn == b.params[i].fqn);
      CHECK(a.params[i].shape == b.params[i].shape);
    }
    CHECK(a.totals.total_params == b.totals.total_params);
    CHECK(a.totals.active_params == b.totals.active_params);
    CHECK(dockyard::ModelSpecToJson(from_spec) == spec);
  }
}

TEST_CASE("The shipped spec files load") {
  auto m = dockyard::LoadModel("testdata/specs/tiny-mixtral.json");
  CHECK(m.family == "mixtral");
  CHECK(m.moe.num_experts == 8);
}

namespace {
Json TinySpec() {
  return dockyard::ModelSpecToJson(dockyard::testing::TinyMixtral());
}
}  // namespace

TEST_CASE("Spec rejects an unknown key with a suggestion") {
  Json j = TinySpec();
  j["moe"]["num_expert"] = 8;  // typo of num_experts
  CHECK_THROWS_WITH_AS(dockyard::ModelSpecFromJson(j, "s.json"),
                       doctest::Contains("s.json: /moe/num_expert: unknown key; did you mean 'num_experts'?"), Error);
}

TEST_CASE("Spec rejects another version") {
  Json j = TinySpec();
  j["dockyard_model_spec"] = 2;
  CHECK_THROWS_WITH_AS(dockyard::ModelSpecFromJson(j, "s.json"),
                       doctest::Contains("s.json: /dockyard_model_spec: unsupported spec version 2"), Error);
}

TEST_CASE("Spec rejects an unknown family with a suggestion") {
  Json j = TinySpec();
  j["family"] = "mixtrall";
  CHECK_THROWS_WITH_AS(dockyard::ModelSpecFromJson(j, "s.json"), doctest::Contains("did you mean 'mixtral'?"), Error);
}

TEST_CASE("Spec rejects a layer-type list of the wrong length") {
  Json j = TinySpec();
  j["mlp_layer_types"].push_back("moe");  // 3 entries for 2 layers
  CHECK_THROWS_WITH_AS(dockyard::ModelSpecFromJson(j, "s.json"),
                       doctest::Contains("/mlp_layer_types: has 3 entries, must have one per layer (num_hidden_layers = 2)"), Error);
}

TEST_CASE("Spec rejects an unknown layer type") {
  Json j = TinySpec();
  j["mlp_layer_types"][1] = "sparse";
  CHECK_THROWS_WITH_AS(dockyard::ModelSpecFromJson(j, "s.json"),
                       doctest::Contains("/mlp_layer_types/1: must be \"dense\" or \"moe\", got \"sparse\""), Error);
}

TEST_CASE("Spec rejects top_k above num_experts") {
  Json j = TinySpec();
  j["moe"]["top_k"] = 9;
  CHECK_THROWS_WITH_AS(dockyard::ModelSpecFromJson(j, "s.json"), doctest::Contains("top_k (9) must satisfy 1 <= top_k <= num_experts (8)"),
                       Error);
}

TEST_CASE("Spec rejects KV heads that do not divide the attention heads") {
  Json j = TinySpec();
  j["attention"]["num_key_value_heads"] = 3;
  CHECK_THROWS_WITH_AS(dockyard::ModelSpecFromJson(j, "s.json"),
                       doctest::Contains("num_key_value_heads (3) must divide num_attention_heads (4)"), Error);
}

TEST_CASE("Spec rejects dense layers without a dense intermediate size") {
  Json j = TinySpec();
  j["mlp_layer_types"][0] = "dense";  // intermediate_size is 0 in the tiny model
  CHECK_THROWS_WITH_AS(dockyard::ModelSpecFromJson(j, "s.json"), doctest::Contains("intermediate_size"), Error);
}

TEST_CASE("Spec rejects sizes beyond 2^40") {
  Json j = TinySpec();
  j["hidden_size"] = int64_t{1} << 41;
  CHECK_THROWS_WITH_AS(dockyard::ModelSpecFromJson(j, "s.json"), doctest::Contains("exceeds the largest supported size"), Error);
}

TEST_CASE("Spec rejects an unknown dtype") {
  Json j = TinySpec();
  j["dtype"] = "int3";
  CHECK_THROWS_WITH_AS(dockyard::ModelSpecFromJson(j, "s.json"), doctest::Contains("s.json: /dtype: unknown dtype \"int3\""), Error);
}

TEST_CASE("A model whose tensor element count overflows int64 is rejected, not wrapped") {
  auto m = dockyard::testing::TinyMixtral();
  m.hidden_size = int64_t{1} << 40;
  m.moe.moe_intermediate_size = int64_t{1} << 40;  // [E, 2F, D] = 8 * 2^41 * 2^40 elements
  CHECK_THROWS_WITH_AS(dockyard::BuildInventory(m), doctest::Contains("overflows a signed 64-bit integer"), Error);
}
