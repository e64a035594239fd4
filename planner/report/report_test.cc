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

TEST_CASE("The plan report's deepep traffic: link-level entries and every EP member's per-call bytes, text and JSON") {
  // Tiny model on 8 ranks, EP 8, nodes of 4 (dispatch_traffic_test has the bytes by hand).
  dockyard::ParallelDimsOptions o;
  o.world_size = 8;
  o.ep = 8;
  dockyard::TrainingConfig t;
  t.seq_len = 1024;
  dockyard::Machine machine;
  machine.gpus_per_node = 4;
  t.dispatcher = dockyard::Dispatcher::kDeepEp;
  // ep 8 over 4-GPU nodes: HybridEP (DeepEP's kernels need nodes of 8 NVLink peers: flex_backend_limits.h).
  t.moe_flex_dispatcher_backend = dockyard::FlexBackend::kHybridEp;
  const auto plan = dockyard::BuildPlan(dockyard::testing::TinyMixtral(), o, t, machine);
  const Json c = dockyard::PlanToJson(plan, "tiny.json")["communication"];
  REQUIRE(c.contains("dispatch_links"));
  const Json& l = c["dispatch_links"];
  CHECK(l["ep_group"] == Json({0, 1, 2, 3, 4, 5, 6, 7}));
  CHECK(l["dispatch_bytes_per_token"] == 128.0);  // 64 x 2 B
  CHECK(l["network_send"].size() == 8);
  // Rank 0's entries are its column of those per-call sums x 2 calls (2 MoE layers).
  double net = 0;
  for (const auto& e : c["entries"]) {
    if (e["purpose"] == "deepep_dispatch_network" && e["phase"] == "forward") net = e["wire_bytes"].get<double>();
    CHECK(e["purpose"].get<std::string>().rfind("deredundency", 0) != 0);
  }
  CHECK(net == static_cast<double>(2 * static_cast<int64_t>(l["network_send"][0].get<double>())));
  const std::string text = dockyard::PlanToText(plan, "tiny.json");
  CHECK(text.find("deepep_dispatch_network") != std::string::npos);
  CHECK(text.find("deepep dispatch per MoE layer and micro-batch, rank 0's EP group (128 B per token") != std::string::npos);
}
