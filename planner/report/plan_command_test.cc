// plan / check / simulate as one library call: the routing sample, the header, the cost and the
// documents, on TinyMixtral (2 MoE layers, 8 experts, top-2) over 4 ranks with ep 2.
#include "planner/report/plan_command.h"

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "planner/base/error.h"
#include "planner/layout/default_layout.h"
#include "planner/report/header.h"
#include "planner/report/report.h"
#include "tests/test_models.h"

namespace {

dockyard::ParallelDimsOptions TinyDims() {
  dockyard::ParallelDimsOptions o;
  o.world_size = 4;
  o.ep = 2;
  return o;
}

dockyard::Plan TinyPlan() {
  return dockyard::BuildPlan(dockyard::testing::TinyMixtral(), TinyDims());
}

}  // namespace

TEST_CASE("plan: the JSON report is the plan report with the header and provenance; nothing sampled") {
  dockyard::PlanCommandRequest r;
  r.model_source = "tiny.json";
  r.provenance = {{"argv", {"dockyard-plan"}}};
  r.json = true;
  const auto result = dockyard::RunPlanCommand(TinyPlan(), r);
  CHECK_FALSE(result.routing.has_value());
  CHECK_FALSE(result.cost.has_value());
  CHECK(result.html_text.empty());
  CHECK(result.refit_text.empty());
  CHECK(result.header["command"] == "plan");
  CHECK(result.header["model"]["source"] == "tiny.json");
  dockyard::Json expected = dockyard::PlanToJson(result.plan, "tiny.json", result.memory);
  expected["generator"]["provenance"] = r.provenance;
  expected["header"] = result.header;
  CHECK(result.report_text == expected.dump(1, ' ', false, dockyard::Json::error_handler_t::replace) + "\n");
}

TEST_CASE("check: a given routing samples min(4, MoE layers) = 2 layers and its received rows size the memory") {
  dockyard::PlanCommandRequest r;
  r.command = dockyard::PlanCommand::kCheck;
  const auto plain = dockyard::RunPlanCommand(TinyPlan(), r);
  CHECK_FALSE(plain.routing.has_value());  // no --routing, no --capacity-factor: nothing sampled
  CHECK(plain.plan.training.imbalance == 1.0);

  r.routing_given = true;
  r.routing_text = "zipf:1.2";
  r.seed = 3;
  const auto sampled = dockyard::RunPlanCommand(TinyPlan(), r);
  REQUIRE(sampled.received.has_value());
  CHECK(sampled.routing_layers == 2);
  CHECK(sampled.plan.training.imbalance == sampled.received->imbalance);
  CHECK(sampled.plan.training.imbalance >= 1.0);  // max / mean received rows
  CHECK(sampled.header["routing"]["spec"] == "zipf:1.2");
  CHECK(sampled.header["routing"]["seed"] == 3);
  CHECK(sampled.header["routing"]["layers_sampled"] == 2);

  r.routing_layers = 3;  // more than the 2 MoE layers
  CHECK_THROWS_WITH_AS(dockyard::RunPlanCommand(TinyPlan(), r), doctest::Contains("--routing-layers"), dockyard::Error);
}

TEST_CASE("simulate: the step is priced on the cluster and the refit map carries the provenance") {
  dockyard::PlanCommandRequest r;
  r.command = dockyard::PlanCommand::kSimulate;
  r.cluster = dockyard::ClusterPreset("h100-sxm");
  r.provenance = {{"argv", {"dockyard-plan", "simulate"}}};
  r.json = true;
  r.refit = true;
  const auto result = dockyard::RunPlanCommand(TinyPlan(), r);
  REQUIRE(result.cost.has_value());
  CHECK(result.cost->step_time_us > 0);
  CHECK_FALSE(result.received.has_value());  // the default routing prices the step, it does not size the memory
  CHECK(result.plan.training.imbalance == 1.0);
  const dockyard::Json j = dockyard::ParseJsonText(result.report_text, "report");
  CHECK(j["header"]["command"] == "simulate");
  CHECK(j["header"]["cluster"] == "h100-sxm");
  CHECK(j["header"]["routing"]["spec"] == "uniform");
  CHECK(dockyard::ParseJsonText(result.refit_text, "refit")["provenance"] == r.provenance);
}

TEST_CASE("PeakAboveClusterWarning: simulate on a cluster without a budget says when the peak would not fit its GPUs") {
  const dockyard::ClusterSpec h100 = dockyard::ClusterPreset("h100-sxm");  // memory_gib 79.6
  const double gib = static_cast<double>(int64_t{1} << 30);
  // 77 + 2 = 79 <= 79.6: fits, no warning.
  CHECK(dockyard::PeakAboveClusterWarning(77 * gib, 2.0, h100).empty());
  // 78 + 2 = 80 > 79.6: the warning names the peak, the reserve, the cluster and the flag that would enforce it.
  const std::string w = dockyard::PeakAboveClusterWarning(78 * gib, 2.0, h100);
  CHECK(w.find("the worst rank's peak, 78.00 GiB, with the 2.00 GiB reserve is above h100-sxm's 79.6 GiB per GPU") != std::string::npos);
  CHECK(w.find("--gpu-memory-gib 79.6 exits 3 on it") != std::string::npos);
  // A larger reserve moves the line: 77 + 3 = 80 > 79.6.
  CHECK_FALSE(dockyard::PeakAboveClusterWarning(77 * gib, 3.0, h100).empty());
}

TEST_CASE("simulate's reports carry the front end's warnings and the peak's, without their labels") {
  dockyard::PlanCommandRequest r;
  r.command = dockyard::PlanCommand::kSimulate;
  dockyard::ClusterSpec small = dockyard::ClusterPreset("h100-sxm");
  small.memory_gib = 2.0000001;  // with the default 2 GiB reserve, any peak above 107 bytes is over it
  r.cluster = small;
  r.json = true;
  r.warnings = {dockyard::WarningText("dockyard-plan: warning: world_size 12 is not a multiple of 8\n")};
  const auto result = dockyard::RunPlanCommand(TinyPlan(), r);
  CHECK(result.peak_warning.rfind("dockyard-plan: warning: the worst rank's peak", 0) == 0);
  const dockyard::Json j = dockyard::ParseJsonText(result.report_text, "report");
  REQUIRE(j.contains("warnings"));
  REQUIRE(j["warnings"].size() == 2);
  CHECK(j["warnings"][0] == "world_size 12 is not a multiple of 8");
  CHECK(j["warnings"][1].get<std::string>().rfind("the worst rank's peak", 0) == 0);
  // The cluster's own memory: the peak fits, no warning, no key.
  r.cluster = dockyard::ClusterPreset("h100-sxm");
  r.warnings.clear();
  const auto fits = dockyard::RunPlanCommand(TinyPlan(), r);
  CHECK(fits.peak_warning.empty());
  CHECK_FALSE(dockyard::ParseJsonText(fits.report_text, "report").contains("warnings"));
}

TEST_CASE("A global batch of 16 sequences on dp 4 at micro-batch 1 is 4 micro-batches in one schedule") {
  dockyard::ParallelDimsOptions d;
  d.world_size = 4;  // dp_shard inferred: 4
  dockyard::TrainingConfig t;
  const auto s = dockyard::ApplyGlobalBatch(16, d, &t);
  CHECK(s.microbatches_per_step == 4);  // 16 / (4 x 1)
  CHECK(s.num_microbatches == 4);
  CHECK(s.grad_accumulation_steps == 1);
  CHECK(t.num_microbatches == 4);
  CHECK(t.run.grad_accumulation_steps == 1);
  CHECK_THROWS_AS(dockyard::ApplyGlobalBatch(6, d, &t), dockyard::Error);  // 6 is not a multiple of dp 4
}

TEST_CASE("The terminal report and the budget verdict follow the command") {
  dockyard::PlanCommandRequest r;
  r.model_source = "tiny.json";
  r.provenance = {{"argv", {"dockyard-plan"}}};
  const auto plan = dockyard::RunPlanCommand(TinyPlan(), r);
  const std::string header = dockyard::ReportHeaderToText(plan.header);
  CHECK(dockyard::PlanCommandText(r, plan, std::nullopt, "(note)\n") ==
        header + "(note)\n" + dockyard::PlanToText(plan.plan, "tiny.json", plan.memory));

  r.command = dockyard::PlanCommand::kCheck;
  const auto check = dockyard::RunPlanCommand(TinyPlan(), r);
  CHECK(dockyard::PlanCommandText(r, check, std::nullopt, "") ==
        dockyard::ReportHeaderToText(check.header) + dockyard::MemoryToText(check.plan, check.memory));
  CHECK_FALSE(dockyard::FailsBudget(r, check));  // no budget: nothing is over it

  dockyard::TrainingConfig tight;
  dockyard::Machine machine;
  machine.gpu_memory_gib = 0.01;  // 10 MiB: every rank is over
  tight.memory_reserve_gib = 0.0;
  const auto over = dockyard::RunPlanCommand(dockyard::BuildPlan(dockyard::testing::TinyMixtral(), TinyDims(), tight, machine), r);
  CHECK(dockyard::FailsBudget(r, over));
  dockyard::PlanCommandRequest plain = r;
  plain.command = dockyard::PlanCommand::kPlan;  // plan reports headroom, it does not fail
  CHECK_FALSE(dockyard::FailsBudget(plain, over));
}

TEST_CASE("A report's inputs: the model or the embedded default, a cluster file but not a preset, the trace, the calibration") {
  const auto embedded = dockyard::PlanReportInputs("", "h100-sxm", "uniform", "");
  CHECK(embedded.files.empty());  // a preset name is no file
  REQUIRE(embedded.embedded.size() == 1);
  CHECK(embedded.embedded[0].first == "<embedded testdata/hf/deepseek-v3.json>");
  CHECK(embedded.embedded[0].second == dockyard::DefaultModelJson());

  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string cluster = std::string(dir ? dir : "/tmp") + "/cluster_inputs.json";
  std::ofstream(cluster) << "{}";
  const auto files = dockyard::PlanReportInputs("m.json", cluster, "trace:t.json", "cal.json");
  CHECK(files.files ==
        std::vector<dockyard::InputFile>{{"--model", "m.json"}, {"--cluster", cluster}, {"--routing trace:", "t.json"}, {"--calibration", "cal.json"}});
  CHECK(files.embedded.empty());
}

TEST_CASE("check under Megatron notes an uneven even split and the flag that reproduces it") {
  auto model = dockyard::testing::TinyMixtral();
  model.num_hidden_layers = 3;  // 3 layers over pp 2: 2 + 1, which Megatron refuses without a split flag
  model.moe_layers = {true, true, true};
  dockyard::ParallelDimsOptions d = TinyDims();
  d.pp = 2;
  d.ep = 2;
  d.convention = dockyard::Convention::kMegatron;
  dockyard::PlanCommandRequest r;
  r.model_source = "tiny.json";
  r.provenance = {{"argv", {"dockyard-plan"}}};
  r.command = dockyard::PlanCommand::kCheck;
  const auto result = dockyard::RunPlanCommand(dockyard::BuildPlan(model, d), r);
  const std::string text = dockyard::PlanCommandText(r, result, std::nullopt, "");
  CHECK(text.find("Note       Megatron refuses this split without a split flag: num_hidden_layers (3) is not divisible by pp (2)") !=
        std::string::npos);
  CHECK(text.find("pass --decoder-first-pipeline-num-layers 2\n") != std::string::npos);
  // The JSON report and the HTML page carry it too (QA: only the terminal said it).
  r.json = r.html = true;
  const auto documents = dockyard::RunPlanCommand(dockyard::BuildPlan(model, d), r);
  const dockyard::Json report = dockyard::Json::parse(documents.report_text);
  REQUIRE(report.contains("notes"));
  REQUIRE(report.at("notes").size() == 1);
  CHECK(report.at("notes")[0].get<std::string>().rfind("Megatron refuses this split without a split flag: num_hidden_layers (3)", 0) == 0);
  CHECK(documents.html_text.find("<tr><th>note</th><td>Megatron refuses this split without a split flag") != std::string::npos);
  // torchtitan takes the split as it is: no note.
  d.convention = dockyard::Convention::kTorchtitan;
  const auto titan = dockyard::RunPlanCommand(dockyard::BuildPlan(model, d), r);
  CHECK(dockyard::PlanCommandText(r, titan, std::nullopt, "").find("Megatron refuses") == std::string::npos);
  CHECK_FALSE(dockyard::Json::parse(titan.report_text).contains("notes"));
}
