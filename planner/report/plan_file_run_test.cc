// What dockyard-run takes from a plan file: the model, the routing, the verified plan and the
// predicted phases beside the measured ones.
#include "planner/report/plan_file_run.h"

#include <cstdlib>
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

dockyard::ParallelDimsOptions TinyDims() {
  dockyard::ParallelDimsOptions o;
  o.world_size = 4;
  o.tp = 2;
  o.ep = 2;
  return o;
}

}  // namespace

TEST_CASE("The model of a plan-file run: --model first, else the file's source; the embedded default is refused") {
  dockyard::PlanFile f;
  f.model_source = "testdata/hf/qwen3-30b-a3b.json";
  CHECK(dockyard::PlanFileModelPath(f, "p.json", "") == "testdata/hf/qwen3-30b-a3b.json");
  CHECK(dockyard::PlanFileModelPath(f, "p.json", "other.json") == "other.json");
  f.model_source = "<embedded testdata/hf/deepseek-v3.json>";
  CHECK_THROWS_WITH_AS(dockyard::PlanFileModelPath(f, "p.json", ""),
                       doctest::Contains("p.json: /model/source: the plan used dockyard-plan's embedded default model"), Error);
  CHECK(dockyard::PlanFileModelPath(f, "p.json", "testdata/hf/deepseek-v3.json") == "testdata/hf/deepseek-v3.json");
}

TEST_CASE("A simulate plan's routing and seed come back; a plain plan has none; a bad one names /routing") {
  dockyard::PlanFile f;
  CHECK_FALSE(dockyard::PlanFileRouting(f, "p.json").has_value());
  f.routing = "zipf:1.2";
  f.routing_seed = 7;
  const auto spec = dockyard::PlanFileRouting(f, "p.json");
  REQUIRE(spec.has_value());
  CHECK(spec->kind == dockyard::RoutingKind::kZipf);
  CHECK(spec->zipf_s == 1.2);
  CHECK(spec->seed == 7);
  f.routing = "zipf:nope";
  CHECK_THROWS_WITH_AS(dockyard::PlanFileRouting(f, "p.json"), doctest::Contains("p.json: /routing: "), Error);
}

TEST_CASE("RebuildPlanFromFile rebuilds the file's layout and refuses an edited placement or degrees") {
  const auto model = dockyard::testing::TinyMixtral();
  const auto plan = dockyard::BuildPlan(model, TinyDims());
  Json j = dockyard::PlanToJson(plan, "/");
  const std::string ok_path = WriteTemp(j, "run_plan_ok.json");
  const auto f = dockyard::ReadPlanFile(ok_path);
  const auto rebuilt = dockyard::RebuildPlanFromFile(model, f, f.training, f.machine, ok_path);
  CHECK(rebuilt.dims.world_size == 4);
  CHECK(rebuilt.dims.dp_shard == 2);  // 4 / tp 2
  CHECK(rebuilt.inventory.params.size() == plan.inventory.params.size());

  Json edited = j;
  edited["parameters"][0]["placements"][1] = "Replicate()";  // embed_tokens: Shard(0) on dp_shard in the plan
  const std::string edited_path = WriteTemp(edited, "run_plan_edited.json");
  const auto fe = dockyard::ReadPlanFile(edited_path);
  CHECK_THROWS_WITH_AS(dockyard::RebuildPlanFromFile(model, fe, fe.training, fe.machine, edited_path),
                       doctest::Contains(edited_path.c_str()), Error);

  dockyard::PlanFile bad = f;
  bad.dims.tp = 3;  // 4 ranks do not divide by tp 3
  CHECK_THROWS_WITH_AS(dockyard::RebuildPlanFromFile(model, bad, bad.training, bad.machine, "p.json"),
                       doctest::Contains("p.json: /parallel: "), Error);
}

TEST_CASE("Predicted phases join the measured ones by name, in JSON and text") {
  const Json predicted = {{"phases",
                           {{{"name", "dispatch"}, {"layer_kind", "moe"}, {"direction", "forward"}, {"time_us", 7.5}},
                            {{"name", "grouped_gemm"}, {"layer_kind", "moe"}, {"direction", "forward"}, {"time_us", 120.0}}}}};
  Json report = {{"measured", {{"phases", {{{"name", "dispatch"}, {"time_us", 9.0}}, {{"name", "route"}, {"time_us", 1.0}}}}}}};
  dockyard::JoinPredictedPhases(predicted, &report);
  CHECK(report["predicted"] == predicted);
  CHECK(report["measured"]["phases"][0]["predicted_us"] == 7.5);
  CHECK_FALSE(report["measured"]["phases"][1].contains("predicted_us"));  // no "route" phase predicted

  Json plain = {{"measured", {{"phases", Json::array()}}}};
  dockyard::JoinPredictedPhases(Json(), &plain);
  CHECK_FALSE(plain.contains("predicted"));

  const std::string text = dockyard::PredictedBesideMeasuredText(predicted, {{"dispatch", 9.0}, {"route", 1.0}});
  CHECK(text ==
        "Predicted (from the plan file, MoE layer forward, us) beside measured:\n"
        "  dispatch         predicted          7.5   measured          9.0\n");
  CHECK(dockyard::PredictedBesideMeasuredText(Json(), {{"dispatch", 9.0}}).empty());
}

TEST_CASE("A run's page document adds the plan's sections the run report lacks, keeping the run's own") {
  const auto plan = dockyard::BuildPlan(dockyard::testing::TinyMixtral(), TinyDims());
  const Json run = {{"kind", "dockyard_run"}, {"model", {{"source", "run-model"}}}};
  const Json page = dockyard::RunPageDocument(run, plan, "tiny.json");
  const Json plan_json = dockyard::PlanToJson(plan, "tiny.json", dockyard::ComputeMemory(plan));
  CHECK(page["kind"] == "dockyard_run");
  CHECK(page["model"] == run["model"]);          // the run's own section is kept
  CHECK(page["meshes"] == plan_json["meshes"]);  // the plan's are added
  CHECK(page.size() == plan_json.size() + 1);    // every plan key, and "kind"
}
