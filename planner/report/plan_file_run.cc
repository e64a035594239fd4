// What dockyard-run takes from a plan file (see plan_file_run.h).
#include "planner/report/plan_file_run.h"

#include <fmt/format.h>

#include "planner/accounting/memory.h"
#include "planner/base/error.h"
#include "planner/report/report.h"

namespace dockyard {

std::string PlanFileModelPath(const PlanFile& file, const std::string& path, const std::string& model_override) {
  if (!model_override.empty()) return model_override;
  if (file.model_source.rfind("<embedded", 0) == 0) {
    throw Error(
        fmt::format("{}: /model/source: the plan used dockyard-plan's embedded default model; pass --model "
                    "testdata/hf/deepseek-v3.json with --plan",
                    path));
  }
  return file.model_source;
}

std::optional<RoutingSpec> PlanFileRouting(const PlanFile& file, const std::string& path) {
  if (file.routing.empty()) return std::nullopt;
  // A simulate plan carries the routing its predictions assumed: run with the same.
  RoutingSpec spec;
  try {
    spec = ParseRoutingSpec(file.routing);
  } catch (const Error& e) {
    throw Error(fmt::format("{}: /routing: {}", path, e.what()));
  }
  spec.seed = file.routing_seed;
  return spec;
}

Plan RebuildPlanFromFile(const ModelSpec& model, const PlanFile& file, const TrainingConfig& training, const Machine& machine,
                         const std::string& path) {
  Plan plan;
  try {
    plan = BuildPlan(model, file.dims, training, machine);
  } catch (const Error& e) {
    throw Error(fmt::format("{}: /parallel: {}", path, e.what()));
  }
  CheckPlacementsMatch(plan, file, path);
  return plan;
}

void JoinPredictedPhases(const Json& predicted, Json* report) {
  if (!predicted.is_object()) return;
  // Predicted beside measured, row by row (same phase names, MoE layer forward).
  Json& j = *report;
  j["predicted"] = predicted;
  if (j.contains("measured") && j["measured"].contains("phases")) {
    for (auto& phase : j["measured"]["phases"]) {
      if (auto us = PredictedMoeForwardUs(predicted, phase.value("name", ""))) phase["predicted_us"] = *us;
    }
  }
}

std::string PredictedBesideMeasuredText(const Json& predicted, const std::vector<std::pair<std::string, double>>& measured) {
  if (!predicted.is_object()) return "";
  std::string out = "Predicted (from the plan file, MoE layer forward, us) beside measured:\n";
  for (const auto& [name, time_us] : measured) {
    if (auto us = PredictedMoeForwardUs(predicted, name)) {
      out += fmt::format("  {:<16} predicted {:>12.1f}   measured {:>12.1f}\n", name, *us, time_us);
    }
  }
  return out;
}

Json RunPageDocument(const Json& run_report, const Plan& plan, const std::string& model_path) {
  // The page also draws the plan the run executed (meshes, expert ownership, memory): the
  // plan report's sections that the run report does not carry itself.
  Json page = run_report;
  const Json plan_json = PlanToJson(plan, model_path, ComputeMemory(plan));
  for (const auto& [key, value] : plan_json.items()) {
    if (!page.contains(key)) page[key] = value;
  }
  return page;
}

}  // namespace dockyard
