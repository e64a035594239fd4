// Plan files: the JSON report of `dockyard-plan --json` or `dockyard-plan simulate --json`, read
// back by dockyard-run (and any tool) to run exactly the planned layout.
//
// The runtime never re-decides a placement: the plan rebuilt from the file's degrees must place
// every parameter exactly as the file says (CheckPlacementsMatch), or the run is refused.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "planner/cost/cluster.h"
#include "planner/base/json_util.h"
#include "planner/layout/parallel_dims.h"
#include "planner/layout/plan.h"
#include "planner/model/training.h"

namespace dockyard {

struct PlanFile {
  std::string model_source;  // the model path as the report names it, resolved (see ReadPlanFile)
  ParallelDimsOptions dims;
  TrainingConfig training;
  Machine machine;      // the training block's gpus_per_node and gpu_memory_gib (machine.h)
  Json parameters;      // [{fqn, placements, ...}] as the file says
  Json predicted;       // simulate's predicted cost (CostToJson); null for a plain plan report
  std::string routing;  // simulate's --routing text; empty for a plain plan report
  uint64_t routing_seed = 0;
  std::optional<ClusterSpec> cluster;  // simulate's cluster; absent in a plain plan report
};

// Reads a plan file of the current report schema (kReportSchemaVersion). A relative model path
// is resolved from the current directory, else from the plan file's directory. Throws
// dockyard::Error naming the file, the JSON pointer and the rule (schema version, a missing
// field, an unknown convention, a model file found in neither place).
PlanFile ReadPlanFile(const std::string& path);

// Throws dockyard::Error unless `plan` (rebuilt from the file's degrees and training) lists the
// same tensors in the same order with the same placements as `file` (read from `path`).
void CheckPlacementsMatch(const Plan& plan, const PlanFile& file, const std::string& path);

// The predicted time of the MoE layer's forward phase `name` ("dispatch", "grouped_gemm", ...) in
// a simulate report's `predicted` object (CostToJson): the phase dockyard-run measures. nullopt
// when the report has no such phase.
std::optional<double> PredictedMoeForwardUs(const Json& predicted, const std::string& name);

}  // namespace dockyard
