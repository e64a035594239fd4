// The JSON report carries the contract fields of docs/report.md with real values.
#include "planner/report/report.h"

#include <doctest/doctest.h>

#include "tests/test_models.h"

using dockyard::Json;

static Json TinyReport() {
  dockyard::ParallelDimsOptions o;
  o.world_size = 8;
  o.tp = 2;
  o.ep = 2;  // dp_shard 4, efsdp = 4*2/2 = 4
  auto plan = dockyard::BuildPlan(dockyard::testing::TinyMixtral(), o);
  return dockyard::PlanToJson(plan, "tiny.json");
}

TEST_CASE("Report has a schema version and the model totals") {
  Json r = TinyReport();
  CHECK(r["schema_version"] == 2);
  CHECK(r["model"]["total_params"] == 252224);  // see plan_test: 2*64000 + 64 + 2*62080
  // Active: routed experts 2 layers x (32768 + 16384) = 98304, of which top_k/E = 2/8 is active:
  // 252224 - 98304 + 24576 = 178496; without the input embedding: 178496 - 64000 = 114496.
  CHECK(r["model"]["active_params"] == 178496);
  CHECK(r["model"]["active_params_excluding_embedding"] == 114496);
}

TEST_CASE("Report lists degrees, meshes with groups and coordinates") {
  Json r = TinyReport();
  CHECK(r["parallel"]["efsdp"] == 4);
  CHECK(r["parallel"]["dp_shard"] == 4);
  CHECK(r["meshes"]["dense"]["axes"] == Json::array({"pp", "dp_replicate", "dp_shard", "cp", "tp"}));
  CHECK(r["meshes"]["sparse"]["placement_axes"] == Json::array({"dp_replicate", "efsdp", "ep"}));
  CHECK(r["meshes"]["dense"]["groups"]["tp"][1] == Json::array({2, 3}));
  CHECK(r["meshes"]["sparse"]["groups"]["ep"][0] == Json::array({0, 1}));
  // rank 5 on the sparse mesh (1, 1, 4, 2): efsdp 5/2 = 2, ep 5%2 = 1.
  CHECK(r["meshes"]["sparse"]["coords"][5] == Json::array({0, 0, 2, 1}));
}

TEST_CASE("Report parameters carry placements as DTensor strings and local shapes") {
  Json r = TinyReport();
  bool found = false;
  for (const auto& p : r["parameters"]) {
    if (p["fqn"] != "model.layers.0.mlp.experts.gate_up_proj") continue;
    found = true;
    CHECK(p["mesh"] == "sparse");
    CHECK(p["role"] == "experts.gate_up");
    CHECK(p["placements"] == Json::array({"Replicate()", "Shard(0)", "Shard(0)"}));
    CHECK(p["local_shapes"][0]["shape"] == Json::array({1, 64, 64}));  // 8 experts / ep 2 / efsdp 4
    CHECK(p["local_shapes"][0]["num_ranks"] == 8);
    CHECK(p["max_local_bytes"] == 1 * 64 * 64 * 2);
    CHECK(p["stored_layout"] == "[E, 2F, D] (gate | up halves)");
  }
  CHECK(found);
}

TEST_CASE("Report expert ownership covers every expert once") {
  Json r = TinyReport();
  CHECK(r["experts"]["num_local_experts"] == 4);
  CHECK(r["experts"]["ownership"][1]["experts"] == Json::array({4, 5, 6, 7}));
}

TEST_CASE("FormatBytes and FormatCount use binary and decimal units") {
  CHECK(dockyard::FormatBytes(3 * 1024 * 1024) == "3.00 MiB");
  CHECK(dockyard::FormatBytes(512) == "512 B");
  CHECK(dockyard::FormatCount(671026419200) == "671.03B");
}
