// The plan report: a versioned JSON document (docs/report.md lists every field with units) and
// the compact human view printed on the terminal.
#pragma once

#include <string>

#include "planner/comm.h"
#include "planner/json_util.h"
#include "planner/memory.h"
#include "planner/plan.h"

namespace dockyard {

// Report schema version. Bump on any incompatible change to field names or meanings.
constexpr int kReportSchemaVersion = 1;
constexpr const char* kDockyardVersion = "0.1.0";

// The JSON report of a plan. `model_source` is the file the model came from (or "<embedded>").
Json PlanToJson(const Plan& plan, const std::string& model_source);
// The same with the plan's memory report already computed (ComputeMemory(plan)).
Json PlanToJson(const Plan& plan, const std::string& model_source, const MemoryReport& memory);

// The terminal view: model summary, degrees, meshes with example groups, parameters grouped by
// role (layers folded into ranges), expert ownership, parameter bytes per rank, then
// MemoryToText and CommToText.
std::string PlanToText(const Plan& plan, const std::string& model_source);
std::string PlanToText(const Plan& plan, const std::string& model_source, const MemoryReport& memory);

// Memory per stage (worst rank): kinds, peak, headroom against the budget; the worst rank's
// breakdown by role.
std::string MemoryToText(const Plan& plan, const MemoryReport& memory);

// Communication volumes of one rank per step, per collective and axis, with cross-node bytes.
std::string CommToText(const CommReport& comm);

Json MemoryToJson(const MemoryReport& memory);
Json CommToJson(const CommReport& comm);

// "1.23 GiB", "512 B" ...
std::string FormatBytes(int64_t bytes);
// "671.03B", "12.9M" ...
std::string FormatCount(int64_t count);

}  // namespace dockyard
