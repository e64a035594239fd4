// Plan files: a plan report read back, placements verified, predicted phases joined by name.
#include "planner/report/plan_file.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include <doctest/doctest.h>

#include "planner/base/error.h"
#include "planner/report/report.h"
#include "tests/temp_json.h"
#include "tests/test_models.h"

namespace {

using dockyard::Error;
using dockyard::Json;

const auto& WriteTemp = dockyard::testing::WriteTempJson;

dockyard::Plan TinyPlan() {
  dockyard::ParallelDimsOptions o;
  o.world_size = 4;
  o.tp = 2;
  o.ep = 2;
  return dockyard::BuildPlan(dockyard::testing::TinyMixtral(), o);
}

}  // namespace

TEST_CASE("A plan report reads back with its degrees, training and placements, which match the rebuilt plan") {
  const auto plan = TinyPlan();
  Json j = dockyard::PlanToJson(plan, "/nonexistent/tiny.json");
  j["model"]["source"] = "/";  // an absolute path is kept as it is (no lookup beside the file)
  const std::string path = WriteTemp(j, "plan_ok.json");
  const auto f = dockyard::ReadPlanFile(path);
  CHECK(f.dims.world_size == 4);
  CHECK(f.dims.tp == 2);
  CHECK(f.dims.ep == 2);
  CHECK(f.dims.dp_shard == 2);  // resolved in the report: 4 / tp 2
  CHECK(f.training.num_microbatches == 1);
  CHECK(f.parameters.size() == plan.inventory.params.size());
  CHECK(f.predicted.is_null());  // a plain plan report has no predictions
  CHECK_NOTHROW(dockyard::CheckPlacementsMatch(plan, f, path));
}

TEST_CASE("An edited placement, another schema version or an unknown convention is refused, naming the field") {
  const auto plan = TinyPlan();
  Json j = dockyard::PlanToJson(plan, "/");
  Json edited = j;
  // model.embed_tokens.weight on the dense mesh (dp_replicate, dp_shard, cp, tp): Shard(0) on dp_shard (FSDP).
  REQUIRE(edited["parameters"][0]["placements"][1] == "Shard(0)");
  edited["parameters"][0]["placements"][1] = "Replicate()";
  const std::string edited_path = WriteTemp(edited, "plan_edited.json");
  const auto f = dockyard::ReadPlanFile(edited_path);
  CHECK_THROWS_WITH_AS(dockyard::CheckPlacementsMatch(plan, f, edited_path),
                       doctest::Contains("/parameters/0: the file places \"model.embed_tokens.weight\""), Error);

  Json old = j;
  old["schema_version"] = 0;
  CHECK_THROWS_WITH_AS(dockyard::ReadPlanFile(WriteTemp(old, "plan_v0.json")),
                       doctest::Contains("this plan file has schema version 0; this dockyard-run reads version 2"), Error);
  Json convention = j;
  convention["parallel"]["convention"] = "deepspeed";
  CHECK_THROWS_WITH_AS(dockyard::ReadPlanFile(WriteTemp(convention, "plan_conv.json")),
                       doctest::Contains("must be one of torchtitan, megatron, torchtitan-2026-03, got \"deepspeed\""), Error);
}

TEST_CASE("PredictedMoeForwardUs joins the MoE layer's forward phase by name") {
  const Json predicted = {{"phases",
                           {{{"name", "dispatch"}, {"layer_kind", "moe"}, {"direction", "backward"}, {"time_us", 9.0}},
                            {{"name", "dispatch"}, {"layer_kind", "dense"}, {"direction", "forward"}, {"time_us", 8.0}},
                            {{"name", "dispatch"}, {"layer_kind", "moe"}, {"direction", "forward"}, {"time_us", 7.5}}}}};
  CHECK(dockyard::PredictedMoeForwardUs(predicted, "dispatch") == 7.5);
  CHECK_FALSE(dockyard::PredictedMoeForwardUs(predicted, "combine").has_value());
  CHECK_FALSE(dockyard::PredictedMoeForwardUs(Json(), "dispatch").has_value());
}
