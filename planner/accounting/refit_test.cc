// The per-expert refit map (refit.h): names, shapes, slices, transposes, dtypes and EP owners of
// every routed expert of real models, with the expected values worked out by hand.
#include "planner/accounting/refit.h"

#include <map>
#include <set>
#include <string>
#include <utility>

#include <doctest/doctest.h>

#include "planner/base/error.h"
#include "planner/model/model_file.h"
#include "tests/test_models.h"

using dockyard::BuildRefitMap;
using dockyard::CheckExpertCoverage;
using dockyard::Json;
using dockyard::Plan;
using dockyard::RefitEntry;
using dockyard::RefitMap;

namespace {

Plan PlanFor(const std::string& file, int64_t ep, const dockyard::TrainingConfig& training = {}) {
  dockyard::ParallelDimsOptions o;
  o.world_size = ep;  // dp_shard = world = ep, efsdp = 1
  o.ep = ep;
  return dockyard::BuildPlan(dockyard::LoadModel("testdata/hf/" + file), o, training);
}

const RefitEntry& Find(const RefitMap& map, const std::string& name) {
  for (const auto& e : map.entries) {
    if (e.name == name) return e;
  }
  FAIL("no refit entry named " << name);
  return map.entries.front();  // not reached
}

bool Has(const RefitMap& map, const std::string& name) {
  for (const auto& e : map.entries) {
    if (e.name == name) return true;
  }
  return false;
}

// Experts held by each (layer, ep_rank), counted on the entries.
std::map<std::pair<int64_t, int64_t>, std::set<int64_t>> ExpertsPerLayerAndRank(const RefitMap& map) {
  std::map<std::pair<int64_t, int64_t>, std::set<int64_t>> held;
  for (const auto& e : map.entries) held[{e.layer, e.ep_rank}].insert(e.expert_idx);
  return held;
}

void CheckEachRankHoldsItsShare(const RefitMap& map, int64_t moe_layers) {
  auto held = ExpertsPerLayerAndRank(map);
  CHECK(static_cast<int64_t>(held.size()) == moe_layers * map.ep);
  for (const auto& [key, experts] : held) {
    CHECK(static_cast<int64_t>(experts.size()) == map.num_experts / map.ep);
    // Contiguous block [rank * n, (rank + 1) * n).
    CHECK(*experts.begin() == key.second * (map.num_experts / map.ep));
  }
}

}  // namespace

TEST_CASE("Qwen3-30B-A3B refits 48 layers x 128 experts x gate, up and down at every EP degree") {
  for (int64_t ep : {1, 8, 32}) {
    CAPTURE(ep);
    RefitMap map = BuildRefitMap(PlanFor("qwen3-30b-a3b.json", ep), "");
    CHECK(map.dtype == "bfloat16");  // default: the training param dtype
    CHECK(map.num_experts == 128);
    CHECK(map.ep == ep);
    // Every one of the 48 layers is MoE (decoder_sparse_step 1): 48 * 128 * 3 = 18432.
    REQUIRE(map.entries.size() == 18432);

    // F = 768, D = 2048: gate_up [128, 1536, 2048], per expert [1536, 2048].
    const auto& gate = map.entries[0];
    CHECK(gate.name == "model.layers.0.mlp.experts.0.gate_proj.weight");
    CHECK(gate.shape == std::vector<int64_t>{768, 2048});
    CHECK(gate.source_fqn == "model.layers.0.mlp.experts.gate_up_proj");
    CHECK(gate.slice_dim == 0);
    CHECK(gate.slice_begin == 0);
    CHECK(gate.slice_end == 768);
    CHECK_FALSE(gate.transpose);

    const auto& up = map.entries[1];
    CHECK(up.name == "model.layers.0.mlp.experts.0.up_proj.weight");
    CHECK(up.shape == std::vector<int64_t>{768, 2048});
    CHECK(up.slice_dim == 0);
    CHECK(up.slice_begin == 768);  // rows [F, 2F) = [768, 1536)
    CHECK(up.slice_end == 1536);

    const auto& down = map.entries[2];
    CHECK(down.name == "model.layers.0.mlp.experts.0.down_proj.weight");
    CHECK(down.shape == std::vector<int64_t>{2048, 768});
    CHECK(down.source_fqn == "model.layers.0.mlp.experts.down_proj");
    CHECK(down.slice_dim == -1);  // whole [D, F] slice
    CHECK_FALSE(down.transpose);

    // Last entry: layer 47, expert 127, down = index (47 * 128 + 127) * 3 + 2 = 18431.
    CHECK(map.entries.back().name == "model.layers.47.mlp.experts.127.down_proj.weight");
    CHECK(map.entries.back().layer == 47);
    CHECK(map.entries.back().expert_idx == 127);
    // Expert 13 of layer 5, gate: index (5 * 128 + 13) * 3 = 1959.
    const auto& e13 = map.entries[1959];
    CHECK(e13.name == "model.layers.5.mlp.experts.13.gate_proj.weight");
    for (const auto& e : map.entries) {
      if (e.dtype != "bfloat16") FAIL("entry " << e.name << " has dtype " << e.dtype);
    }
    CheckEachRankHoldsItsShare(map, 48);

    if (ep == 1) {
      CHECK(e13.ep_rank == 0);
      CHECK(map.entries.back().ep_rank == 0);
    }
    if (ep == 8) {
      // 128 / 8 = 16 per rank: expert 13 -> 13 / 16 = rank 0, expert 127 -> 127 / 16 = rank 7.
      CHECK(e13.ep_rank == 0);
      CHECK(map.entries.back().ep_rank == 7);
      CHECK(Find(map, "model.layers.0.mlp.experts.16.up_proj.weight").ep_rank == 1);
    }
    if (ep == 32) {
      // 128 / 32 = 4 per rank: expert 13 -> 13 / 4 = rank 3, expert 127 -> rank 31, 4 -> 1, 3 -> 0.
      CHECK(e13.ep_rank == 3);
      CHECK(map.entries.back().ep_rank == 31);
      CHECK(Find(map, "model.layers.0.mlp.experts.4.gate_proj.weight").ep_rank == 1);
      CHECK(Find(map, "model.layers.0.mlp.experts.3.down_proj.weight").ep_rank == 0);
    }
  }
}

TEST_CASE("DeepSeek-V3 refits its 58 MoE layers x 256 experts, skipping the 3 dense layers") {
  for (int64_t ep : {1, 8, 32}) {
    CAPTURE(ep);
    RefitMap map = BuildRefitMap(PlanFor("deepseek-v3.json", ep), "");
    CHECK(map.num_experts == 256);
    // 61 layers, first_k_dense_replace 3: layers 3..60 are MoE, 58 of them: 58 * 256 * 3 = 44544.
    REQUIRE(map.entries.size() == 44544);
    CHECK_FALSE(Has(map, "model.layers.2.mlp.experts.0.gate_proj.weight"));

    // F = 2048, D = 7168.
    const auto& gate = map.entries[0];
    CHECK(gate.name == "model.layers.3.mlp.experts.0.gate_proj.weight");
    CHECK(gate.layer == 3);
    CHECK(gate.shape == std::vector<int64_t>{2048, 7168});
    const auto& up = map.entries[1];
    CHECK(up.name == "model.layers.3.mlp.experts.0.up_proj.weight");
    CHECK(up.slice_begin == 2048);  // rows [2048, 4096) of the [4096, 7168] slice
    CHECK(up.slice_end == 4096);
    CHECK(map.entries[2].shape == std::vector<int64_t>{7168, 2048});
    CHECK(map.entries.back().name == "model.layers.60.mlp.experts.255.down_proj.weight");
    CheckEachRankHoldsItsShare(map, 58);

    // Expert 100 of layer 3, gate: index 100 * 3 = 300.
    const auto& e100 = map.entries[300];
    CHECK(e100.name == "model.layers.3.mlp.experts.100.gate_proj.weight");
    // EP 1: rank 0. EP 8: 32 per rank, 100 / 32 = 3. EP 32: 8 per rank, 100 / 8 = 12.
    CHECK(e100.ep_rank == (ep == 1 ? 0 : ep == 8 ? 3 : 12));
    // Expert 255: rank ep - 1 in every case.
    CHECK(map.entries.back().ep_rank == ep - 1);
  }
}

TEST_CASE("The refit dtype is the one asked for, else the training refit dtype, else the param dtype") {
  Plan plan = PlanFor("qwen3-30b-a3b.json", 8);
  RefitMap fp8 = BuildRefitMap(plan, "float8_e4m3fn");
  CHECK(fp8.dtype == "float8_e4m3fn");
  for (const auto& e : fp8.entries) {
    if (e.dtype != "float8_e4m3fn") FAIL("entry " << e.name << " has dtype " << e.dtype);
  }

  dockyard::TrainingConfig t;
  t.refit_dtype = "float16";
  CHECK(BuildRefitMap(PlanFor("qwen3-30b-a3b.json", 8, t), "").dtype == "float16");
  CHECK(BuildRefitMap(PlanFor("qwen3-30b-a3b.json", 8, t), "bfloat16").dtype == "bfloat16");  // argument wins

  dockyard::TrainingConfig f32;
  f32.param_dtype = "float32";
  CHECK(BuildRefitMap(PlanFor("qwen3-30b-a3b.json", 8, f32), "").dtype == "float32");
}

TEST_CASE("An unknown refit dtype is an error naming it") {
  Plan plan = PlanFor("qwen3-30b-a3b.json", 8);
  CHECK_THROWS_WITH_AS(BuildRefitMap(plan, "float7"), doctest::Contains("\"float7\""), dockyard::Error);
}

TEST_CASE("Llama-4 Scout cuts [D, F] halves from its [E, D, 2F] gate_up and transposes every weight") {
  RefitMap map = BuildRefitMap(PlanFor("llama4-scout-17b-16e.json", 8), "");
  // 48 layers, all MoE (interleave_moe_layer_step 1), 16 experts: 48 * 16 * 3 = 2304.
  REQUIRE(map.entries.size() == 2304);
  // F = 8192, D = 5120: gate_up [16, 5120, 16384], per expert [5120, 16384].
  const auto& gate = map.entries[0];
  CHECK(gate.name == "model.layers.0.feed_forward.experts.0.gate_proj.weight");
  CHECK(gate.source_fqn == "model.layers.0.feed_forward.experts.gate_up_proj");
  CHECK(gate.slice_dim == 1);  // columns [0, 8192) of [5120, 16384] = [5120, 8192] -> [8192, 5120]
  CHECK(gate.slice_begin == 0);
  CHECK(gate.slice_end == 8192);
  CHECK(gate.transpose);
  CHECK(gate.shape == std::vector<int64_t>{8192, 5120});
  const auto& up = map.entries[1];
  CHECK(up.name == "model.layers.0.feed_forward.experts.0.up_proj.weight");
  CHECK(up.slice_dim == 1);
  CHECK(up.slice_begin == 8192);
  CHECK(up.slice_end == 16384);
  CHECK(up.transpose);
  CHECK(up.shape == std::vector<int64_t>{8192, 5120});
  // down [16, 8192, 5120]: per expert [F, D] = [8192, 5120] -> [D, F] = [5120, 8192].
  const auto& down = map.entries[2];
  CHECK(down.name == "model.layers.0.feed_forward.experts.0.down_proj.weight");
  CHECK(down.slice_dim == -1);
  CHECK(down.transpose);
  CHECK(down.shape == std::vector<int64_t>{5120, 8192});
  // 16 experts / ep 8 = 2 per rank: expert 15 -> rank 7.
  CHECK(map.entries.back().name == "model.layers.47.feed_forward.experts.15.down_proj.weight");
  CHECK(map.entries.back().ep_rank == 7);
}

TEST_CASE("gpt-oss keeps its interleaved gate_up fused per expert and refits the expert biases") {
  RefitMap map = BuildRefitMap(PlanFor("gpt-oss-120b.json", 8), "");
  // 36 layers, all MoE, 128 experts, 4 tensors each: 36 * 128 * 4 = 18432.
  REQUIRE(map.entries.size() == 18432);
  // D = 2880, F = 2880: gate_up [128, 2880, 5760].
  const auto& gate_up = map.entries[0];
  CHECK(gate_up.name == "model.layers.0.mlp.experts.0.gate_up_proj");
  CHECK(gate_up.shape == std::vector<int64_t>{2880, 5760});
  CHECK(gate_up.slice_dim == -1);
  CHECK_FALSE(gate_up.transpose);
  const auto& gate_up_bias = map.entries[1];
  CHECK(gate_up_bias.name == "model.layers.0.mlp.experts.0.gate_up_proj_bias");
  CHECK(gate_up_bias.shape == std::vector<int64_t>{5760});
  CHECK(gate_up_bias.source_fqn == "model.layers.0.mlp.experts.gate_up_proj_bias");
  const auto& down = map.entries[2];
  CHECK(down.name == "model.layers.0.mlp.experts.0.down_proj");
  CHECK(down.shape == std::vector<int64_t>{2880, 2880});
  CHECK_FALSE(down.transpose);
  const auto& down_bias = map.entries[3];
  CHECK(down_bias.name == "model.layers.0.mlp.experts.0.down_proj_bias");
  CHECK(down_bias.shape == std::vector<int64_t>{2880});
  CHECK_FALSE(Has(map, "model.layers.0.mlp.experts.0.gate_proj.weight"));
  // Expert 40 of layer 2: index (2 * 128 + 40) * 4 = 1184; 128 / 8 = 16 per rank, 40 / 16 = 2.
  CHECK(map.entries[1184].name == "model.layers.2.mlp.experts.40.gate_up_proj");
  CHECK(map.entries[1184].ep_rank == 2);
}

TEST_CASE("DBRX refits w1, v1 and w2 per expert as stored") {
  RefitMap map = BuildRefitMap(PlanFor("dbrx-instruct.json", 8), "");
  // 40 blocks, 16 experts: 40 * 16 * 3 = 1920.
  REQUIRE(map.entries.size() == 1920);
  // F = 10752, D = 6144; every tensor listed [16, 10752, 6144].
  const char* names[3] = {"w1", "v1", "w2"};
  for (int k = 0; k < 3; ++k) {
    const auto& e = map.entries[static_cast<size_t>(k)];
    CHECK(e.name == std::string("transformer.blocks.0.ffn.experts.mlp.0.") + names[k]);
    CHECK(e.source_fqn == std::string("transformer.blocks.0.ffn.experts.mlp.") + names[k]);
    CHECK(e.shape == std::vector<int64_t>{10752, 6144});
    CHECK(e.slice_dim == -1);
    CHECK_FALSE(e.transpose);
  }
  // Block 39, expert 9: index (39 * 16 + 9) * 3 + 2 = 1901; 16 / 8 = 2 per rank, 9 / 2 = 4.
  CHECK(map.entries[1901].name == "transformer.blocks.39.ffn.experts.mlp.9.w2");
  CHECK(map.entries[1901].ep_rank == 4);
}

TEST_CASE("Mixtral-style names come with bias halves when the experts have biases") {
  auto model = dockyard::testing::TinyMixtral();  // F = 32, D = 64, 8 experts, 2 layers
  model.moe.expert_bias = true;
  dockyard::ParallelDimsOptions o;
  o.world_size = 2;
  o.ep = 2;
  RefitMap map = BuildRefitMap(dockyard::BuildPlan(model, o), "");
  // 2 layers * 8 experts * (3 weights + 3 biases) = 96.
  REQUIRE(map.entries.size() == 96);
  const std::string p = "model.layers.1.block_sparse_moe.experts.5.";
  CHECK(Find(map, p + "w1.weight").shape == std::vector<int64_t>{32, 64});
  CHECK(Find(map, p + "w3.weight").slice_begin == 32);
  CHECK(Find(map, p + "w2.weight").shape == std::vector<int64_t>{64, 32});
  const auto& b1 = Find(map, p + "w1.bias");
  CHECK(b1.shape == std::vector<int64_t>{32});
  CHECK(b1.source_fqn == "model.layers.1.mlp.experts.gate_up_proj_bias");
  CHECK(b1.slice_dim == 0);
  CHECK(b1.slice_end == 32);
  const auto& b3 = Find(map, p + "w3.bias");
  CHECK(b3.slice_begin == 32);  // [F, 2F) = [32, 64)
  CHECK(b3.slice_end == 64);
  CHECK(Find(map, p + "w2.bias").shape == std::vector<int64_t>{64});
  CHECK(Find(map, p + "w2.bias").slice_dim == -1);
  CHECK(b1.ep_rank == 1);  // 8 / 2 = 4 per rank, 5 / 4 = 1
}

TEST_CASE("The refit map JSON carries every entry with its slice or null") {
  dockyard::ParallelDimsOptions o;
  o.world_size = 2;
  o.ep = 2;
  Json j = dockyard::RefitMapToJson(BuildRefitMap(dockyard::BuildPlan(dockyard::testing::TinyMixtral(), o), "float8_e4m3fn"));
  CHECK(j["dtype"] == "float8_e4m3fn");
  CHECK(j["num_experts"] == 8);
  CHECK(j["ep"] == 2);
  REQUIRE(j["entries"].size() == 48);  // 2 layers * 8 experts * 3
  const Json& up = j["entries"][1];
  CHECK(up["name"] == "model.layers.0.block_sparse_moe.experts.0.w3.weight");
  CHECK(up["shape"] == Json::array({32, 64}));
  CHECK(up["dtype"] == "float8_e4m3fn");
  CHECK(up["layer"] == 0);
  CHECK(up["expert_idx"] == 0);
  CHECK(up["ep_rank"] == 0);
  CHECK(up["source_fqn"] == "model.layers.0.mlp.experts.gate_up_proj");
  CHECK(up["slice"] == Json({{"dim", 0}, {"begin", 32}, {"end", 64}}));
  CHECK(up["transpose"] == false);
  CHECK(j["entries"][2]["slice"].is_null());  // down: the whole slice
  CHECK(j["entries"][47]["ep_rank"] == 1);    // layer 1, expert 7 -> 7 / 4 = rank 1
}

TEST_CASE("Expert coverage rejects an expert held by two EP ranks") {
  CHECK_THROWS_WITH_AS(CheckExpertCoverage({{0, 1}, {1, 2}}, 3), doctest::Contains("refit: expert 1 is held by EP ranks 0 and 1"),
                       dockyard::Error);
}

TEST_CASE("Expert coverage rejects an expert held by no EP rank") {
  CHECK_THROWS_WITH_AS(CheckExpertCoverage({{0}, {2}}, 3), doctest::Contains("refit: expert 1 is held by no EP rank"), dockyard::Error);
}

TEST_CASE("Expert coverage rejects an expert id out of range") {
  CHECK_THROWS_WITH_AS(CheckExpertCoverage({{0, 1}, {2, 3}}, 3), doctest::Contains("expert 3 on EP rank 1 is out of range"),
                       dockyard::Error);
  CHECK_THROWS_WITH_AS(CheckExpertCoverage({{-1, 0}, {1, 2}}, 3), doctest::Contains("out of range"), dockyard::Error);
}

TEST_CASE("Expert coverage accepts every expert exactly once, in any order") {
  CHECK_NOTHROW(CheckExpertCoverage({{0, 1}, {2, 3}}, 4));
  CHECK_NOTHROW(CheckExpertCoverage({{3, 1}, {0, 2}}, 4));  // round-robin-like, not contiguous
  CHECK_NOTHROW(CheckExpertCoverage({{0, 1, 2, 3}}, 4));
}
