// What dockyard-run takes from a plan file beyond its degrees (plan_file.h): the model it names,
// the routing its predictions assumed, the plan rebuilt and verified from it, and its predicted
// phases joined to the phases a run measured.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "planner/base/json_util.h"
#include "planner/layout/plan.h"
#include "planner/model/model_spec.h"
#include "planner/model/training.h"
#include "planner/report/plan_file.h"
#include "planner/routing/routing.h"

namespace dockyard {

// The model a run of `file` (read from `path`) loads: `model_override` (dockyard-run --model) when
// not empty, else the file's /model/source. Throws dockyard::Error naming `path` and /model/source
// when the plan was made from dockyard-plan's embedded default ("<embedded ...>"), which names no
// file: the caller must pass the model.
std::string PlanFileModelPath(const PlanFile& file, const std::string& path, const std::string& model_override);

// The routing a simulate plan's predictions assumed (/routing and its seed), for a run given no
// --routing; nullopt for a plain plan report. Throws dockyard::Error "PATH: /routing: ..." when the
// text does not parse (ParseRoutingSpec's rule).
std::optional<RoutingSpec> PlanFileRouting(const PlanFile& file, const std::string& path);

// BuildPlan(model, file.dims, training, machine), then CheckPlacementsMatch: the run never re-decides a
// placement. A degree rule BuildPlan refuses is reported as "PATH: /parallel: ...".
Plan RebuildPlanFromFile(const ModelSpec& model, const PlanFile& file, const TrainingConfig& training, const Machine& machine,
                         const std::string& path);

// Predicted beside measured in a dockyard-run JSON report (runtime RunReportToJson): sets
// report["predicted"] = predicted (CostToJson of simulate) and, for every /measured/phases entry
// whose name the prediction has (PredictedMoeForwardUs, the MoE layer's forward), its
// "predicted_us". No-op when `predicted` is not an object (a plain plan report).
void JoinPredictedPhases(const Json& predicted, Json* report);

// The same join as text lines under "Predicted (from the plan file, MoE layer forward, us) beside
// measured:", one per measured (name, us) phase the prediction has; empty when `predicted` is not
// an object.
std::string PredictedBesideMeasuredText(const Json& predicted, const std::vector<std::pair<std::string, double>>& measured);

// The document a run's HTML page renders (html_report.h ReportToHtml): the run report `run_report`
// (runtime RunReportToJson) with the plan report's sections it does not carry itself (PlanToJson of
// the plan the run executed: meshes, expert ownership, memory), so the page also draws the plan.
Json RunPageDocument(const Json& run_report, const Plan& plan, const std::string& model_path);

}  // namespace dockyard
