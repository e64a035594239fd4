// The plan report: a versioned JSON document (docs/report.md lists every field with units) and
// the compact human view printed on the terminal.
#pragma once

#include <string>

#include "planner/cost/cluster.h"
#include "planner/accounting/comm.h"
#include "planner/cost/cost.h"
#include "planner/base/json_util.h"
#include "planner/accounting/memory.h"
#include "planner/layout/plan.h"
#include "planner/search/search.h"

namespace dockyard {

// Report schema version. Bump on any incompatible change to field names or meanings.
// 2: every report opens with `header` (header.h); simulate carries `memory` and
// `communication`; `memory.reserve_bytes`, `training.memory_reserve_gib` (docs/report.md).
constexpr int kReportSchemaVersion = 2;
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

// The dispatcher as the reports name it: "deepep (backend hybridep)" for the deepep (Megatron
// flex) dispatcher, with its --moe-flex-dispatcher-backend, else the dispatcher's name.
std::string DispatcherLabel(Dispatcher dispatcher, FlexBackend backend);

// simulate's "Dispatcher" line (empty at ep 1: no token leaves its rank): the dispatcher that priced
// the MoE layer's token exchange, and for deepep that its three backends are priced alike until
// each has its own figures (docs/cost-model.md §3.5a).
std::string DispatcherToText(const Plan& plan);

// The `dockyard-plan simulate` report: schema version, generator (with `provenance`), the
// plan's model, parameters and degrees, the cluster, the routing as given (`routing_text`, its
// seed and the MoE layers sampled), the resolved training settings and the predicted cost.
struct SimulateInputs {
  std::string model_source;
  ClusterSpec cluster;
  std::string routing_text;  // as given on the command line
  uint64_t seed = 0;
  int64_t routing_layers = 0;  // MoE layers sampled
  Json provenance;
};
Json SimulateReportToJson(const Plan& plan, const MemoryReport& memory, const CostBreakdown& cost, const SimulateInputs& inputs);

// The `dockyard-plan search` report: SearchResultToJson with the schema version, `provenance`,
// the model name, world size, cluster, the training settings as evaluated (the cluster's
// gpus_per_node and the budget in use), the routing and the MoE layers sampled.
Json SearchReportToJson(const SearchResult& result, const SearchOptions& options, const std::string& model_name, int64_t moe_layers,
                        const Json& provenance);

Json MemoryToJson(const MemoryReport& memory);
Json CommToJson(const CommReport& comm);

// "1.23 GiB", "512 B" ...
std::string FormatBytes(int64_t bytes);
// "671.03B", "12.9M" ...
std::string FormatCount(int64_t count);

}  // namespace dockyard
