// `dockyard-plan` (plan), `check` and `simulate` as one library call: from a built plan and what
// the command line asked for to every figure and document they print or write, computed before
// anything is written (the CLI then writes the files all-or-nothing and prints the text).
//
// The steps, in order: the routing sample of check / simulate (a given --routing sizes the
// received rows in place of --imbalance: AnalyzeReceivedRows); the memory (ComputeMemory); the
// report header (header.h); simulate's cost (SimulateStep with the calibration applied), its
// redundant-experts analysis and replica refit map; the JSON report, the HTML page and the refit
// map. Throws dockyard::Error (a bad routing spec, a routing-layer count out of range, ...).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "planner/accounting/memory.h"
#include "planner/base/file_util.h"
#include "planner/base/json_util.h"
#include "planner/layout/parallel_dims.h"
#include "planner/layout/plan.h"
#include "planner/model/global_batch.h"
#include "planner/model/training.h"
#include "planner/calibration/calibration.h"
#include "planner/cost/cluster.h"
#include "planner/cost/cost.h"
#include "planner/routing/received_rows.h"
#include "planner/cost/redundant_experts.h"
#include "planner/routing/routing.h"

namespace dockyard {

enum class PlanCommand { kPlan, kCheck, kSimulate };

// The inputs a dockyard-plan report's provenance digests (provenance.h Provenance): the model file,
// or the embedded default (default_layout.h) by name and text when `model_path` is empty; the
// cluster when it names a regular file (a preset name does not); the trace of "trace:PATH"
// routing; the calibration file when given.
struct ReportInputs {
  std::vector<InputFile> files;  // --model, --cluster, --routing trace:, --calibration
  std::vector<std::pair<std::string, std::string>> embedded;  // (name, content)
};
ReportInputs PlanReportInputs(const std::string& model_path, const std::string& cluster, const std::string& routing,
                              const std::string& calibration);

// The schedule a global batch of `global_batch_size` sequences gives the layout `dims`
// (ResolveGlobalBatch over dp = dp_replicate x dp_shard, training's micro-batch size and pinned
// micro-batches), written into `training` (num_microbatches, grad_accumulation_steps). Throws
// dockyard::Error for degrees ParallelDims::Build refuses or a batch the layout does not divide.
GlobalBatchSchedule ApplyGlobalBatch(int64_t global_batch_size, const ParallelDimsOptions& dims, TrainingConfig* training);

struct PlanCommandRequest {
  PlanCommand command = PlanCommand::kPlan;
  std::string model_source;  // the model file, or "<embedded ...>" (default_layout.h ModelSourceName)
  Json provenance;           // Provenance of the inputs (provenance.h)
  // check / simulate: the routing sampled. Given (`routing_given`), its largest received rows size
  // the memory (SampleImbalance) in place of training.imbalance; `capacity_factor` reports the
  // assignments a per-expert capacity would drop. Simulate always samples it (default uniform).
  bool routing_given = false;
  std::string routing_text = "uniform";
  uint64_t seed = 0;
  std::optional<int64_t> routing_layers;  // unset: min(4, MoE layers) (a trace: its own)
  std::optional<double> capacity_factor;
  // simulate
  std::optional<ClusterSpec> cluster;
  std::optional<Calibration> calibration;  // its knobs replace the cluster's
  ComputeModel compute_model = ComputeModel::kKernels;
  std::optional<RedundantExpertsOptions> redundant;  // --redundant-experts
  // Which documents to assemble.
  bool json = false, html = false, refit = false;
  // The front end's warnings about its inputs (a sequence beyond the model's positions, a budget
  // or node size against the cluster, a partly used node), each as WarningText keeps it: the JSON
  // report's and the HTML page's `warnings`, with PeakAboveClusterWarning's after them.
  std::vector<std::string> warnings;
};

// A warning line as the command line prints it ("dockyard-plan: warning: ...\n") as the JSON
// report's and the HTML page's `warnings` keep it: without the "dockyard-plan: " and "warning: "
// labels and the line end. "" stays "".
std::string WarningText(const std::string& line);

// simulate on a cluster with no budget (nothing holds the plan to memory): the warning line, ""
// when it fits, that the worst rank's peak `peak_bytes` with `reserve_gib` is above the cluster's
// memory_gib per GPU (memory.h OverBudget), naming the --gpu-memory-gib that would hold simulate to
// it (exit 3). Printed by the CLI after the plan and carried in the reports' `warnings`.
std::string PeakAboveClusterWarning(double peak_bytes, double reserve_gib, const ClusterSpec& cluster);

struct PlanCommandResult {
  Plan plan;  // the plan, its imbalance set by a given routing
  MemoryReport memory;
  Json header;  // ReportHeader
  std::optional<RoutingSpec> routing;
  int64_t routing_layers = 0;
  std::optional<ReceivedRowsReport> received;
  std::optional<CostBreakdown> cost;               // simulate
  std::string redundant_text;                      // simulate --redundant-experts
  // simulate --redundant-experts: the peak after the replicas over the limit in force
  // (RedundantOverBudgetText with prefix "dockyard-plan simulate"); empty when it fits.
  std::string redundant_over_budget_text;
  // simulate --redundant-experts with a budget, the peak after within it: the line that says so
  // (redundant_experts.h RedundantWithinBudgetText), printed when the plan without them is over.
  std::string redundant_within_budget_text;
  // simulate with a cluster and no budget: PeakAboveClusterWarning of the worst rank's peak with
  // the plan's reserve (default kDefaultMemoryReserveGib); "" otherwise or when it fits.
  std::string peak_warning;
  std::string report_text, html_text, refit_text;  // the documents asked for ("" otherwise)
};

PlanCommandResult RunPlanCommand(Plan plan, const PlanCommandRequest& request);

// The terminal report: the header, `note` (e.g. default_layout.h DefaultModelNote), the received
// rows when sampled, then per command: simulate the global batch's schedule (when given), memory,
// cost and the redundant-experts analysis; check the memory; plan the plan's tables.
std::string PlanCommandText(const PlanCommandRequest& request, const PlanCommandResult& result,
                            const std::optional<GlobalBatchSchedule>& global_batch, const std::string& note);

// Whether the command fails on the budget: check and simulate exit kExitOverBudget (3) when a rank
// is over it (their reports are still written), and simulate too when the peak after its redundant
// experts is (redundant_over_budget_text); plan only reports headroom.
bool FailsBudget(const PlanCommandRequest& request, const PlanCommandResult& result);

}  // namespace dockyard
