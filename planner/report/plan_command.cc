// plan / check / simulate as one library call (see plan_command.h).
#include "planner/report/plan_command.h"

#include <sys/stat.h>

#include <vector>

#include "planner/accounting/refit.h"
#include "planner/layout/default_layout.h"
#include "planner/accounting/replica_refit.h"
#include "planner/report/budget_text.h"
#include "planner/report/header.h"
#include "planner/sim/compute_model.h"
#include "planner/report/html_report.h"
#include "planner/report/report.h"
#include "planner/sim/cost.h"
#include "planner/sim/deepep.h"
#include "planner/sim/dispatch_traffic.h"
#include "planner/sim/group_routing.h"

namespace dockyard {

ReportInputs PlanReportInputs(const std::string& model_path, const std::string& cluster, const std::string& routing,
                              const std::string& calibration) {
  ReportInputs in;
  if (!model_path.empty()) {
    in.files.push_back(model_path);
  } else {
    in.embedded.push_back({kDefaultModelName, DefaultModelJson()});
  }
  struct stat st {};
  if (stat(cluster.c_str(), &st) == 0 && S_ISREG(st.st_mode)) in.files.push_back(cluster);
  if (routing.rfind("trace:", 0) == 0) in.files.push_back(routing.substr(6));
  if (!calibration.empty()) in.files.push_back(calibration);
  return in;
}

GlobalBatchSchedule ApplyGlobalBatch(int64_t global_batch_size, const ParallelDimsOptions& dims, TrainingConfig* training) {
  // The micro-batches per step and their schedule follow from the global batch (global_batch.h).
  const ParallelDims built = ParallelDims::Build(dims);
  const GlobalBatchSchedule global_batch =
      ResolveGlobalBatch(global_batch_size, built.dp_replicate * built.dp_shard, training->micro_batch_size, built.pp,
                         built.convention == Convention::kMegatron, training->num_microbatches);
  training->num_microbatches = global_batch.num_microbatches;
  training->run.grad_accumulation_steps = global_batch.grad_accumulation_steps;
  return global_batch;
}

PlanCommandResult RunPlanCommand(Plan plan_in, const PlanCommandRequest& r) {
  PlanCommandResult result;
  result.plan = std::move(plan_in);
  Plan& plan = result.plan;
  const bool check = r.command == PlanCommand::kCheck;
  const bool simulate = r.command == PlanCommand::kSimulate;
  const std::string& source = r.model_source;
  std::optional<ClusterSpec> cluster = r.cluster;
  // check / simulate: the routing sample. Given --routing, its largest received rows size the
  // memory (SampleImbalance) in place of --imbalance; simulate also prices the step with it.
  std::optional<RoutingSpec>& routing = result.routing;
  int64_t& layers = result.routing_layers;
  std::optional<RoutingResult> sampled;
  std::optional<ReceivedRowsReport>& received = result.received;
  const std::optional<double>& capacity_factor = r.capacity_factor;
  if (simulate || (check && (r.routing_given || capacity_factor))) {
    routing = ParseRoutingSpec(r.routing_text);
    routing->seed = r.seed;
    // A trace is given per MoE layer (or one layer for all); other distributions are sampled for
    // a few layers whose per-layer slowest ranks are averaged.
    layers = RoutingLayersToSample(plan.model, *routing, r.routing_layers, kDefaultRoutingLayers, "--routing-layers");
    sampled = SampleRoutingForPlan(plan, *routing, layers);
    if (r.routing_given || capacity_factor) {
      const RoutingModel routing_model =
          PrepareRouting(*routing, plan.model.moe.num_experts, plan.model.moe.top_k, layers, GroupLimitOf(plan.model.moe));
      received = AnalyzeReceivedRows(routing_model, *sampled, capacity_factor);
      if (r.routing_given) plan.training.imbalance = received->imbalance;
    }
  }
  // Everything that can fail is computed before anything is written.
  result.memory = ComputeMemory(plan);
  const MemoryReport& memory = result.memory;
  ReportHeaderInputs header_inputs;
  header_inputs.command = check ? "check" : simulate ? "simulate" : "plan";
  header_inputs.model_name = plan.model.name;
  header_inputs.model_source = source;
  header_inputs.dims = plan.dims;
  header_inputs.world_size = plan.dims.world_size;
  header_inputs.convention = plan.dims.convention;
  if (cluster) header_inputs.cluster = cluster->name;
  if (r.calibration) header_inputs.calibration = CalibrationRefToJson(*r.calibration);
  if (routing) {
    header_inputs.routing = RoutingSpecText(*routing);
    header_inputs.seed = routing->seed;
    header_inputs.routing_layers = layers;
  }
  header_inputs.imbalance = plan.training.imbalance;
  header_inputs.provenance = r.provenance;
  if (simulate) header_inputs.compute = ComputeModelToJson(r.cost_options);
  result.header = ReportHeader(header_inputs);
  const Json& header = result.header;
  std::string& report_text = result.report_text;
  std::string& html_text = result.html_text;
  std::optional<CostBreakdown>& cost = result.cost;
  std::optional<Json> replica_refit;  // simulate --redundant-experts --refit-json
  if (simulate) {
    CostOptions options = r.cost_options;
    if (r.calibration) ApplyCalibration(*r.calibration, &*cluster, &options);
    cost = SimulateStep(plan, *cluster, *sampled, options);
    std::optional<RedundantExpertsReport> redundant;
    if (r.redundant) {
      const RedundantExpertsOptions& ro = *r.redundant;
      const RoutingModel routing_model =
          PrepareRouting(*routing, plan.model.moe.num_experts, plan.model.moe.top_k, layers, GroupLimitOf(plan.model.moe));
      redundant = AnalyzeRedundantExperts(plan, *cluster, routing_model, *sampled, *cost, memory, ro, options);
      result.redundant_text = RedundantExpertsToText(*redundant);
      if (r.refit) {
        // The refit map targets the physical slots of every MoE layer's placement.
        const std::vector<ExpertPlacement> placements = PlaceMoeLayers(plan, *routing, ro);
        const RefitMap map = BuildRefitMap(plan, plan.training.refit_dtype);
        replica_refit = ReplicaRefitMapToJson(map, ReplicaRefitTargets(map, plan.model, placements), placements);
      }
    }
    if (r.json || r.html) {
      Json j = SimulateReportToJson(plan, memory, *cost, {source, *cluster, r.routing_text, routing->seed, layers, r.provenance});
      if (redundant) j["redundant_experts"] = RedundantExpertsToJson(*redundant);
      if (received) j["received_rows"] = ReceivedRowsToJson(*received);
      j["header"] = header;
      if (r.calibration) j["calibration"] = CalibrationRefToJson(*r.calibration);
      if (plan.dims.ep > 1 && plan.training.dispatcher == Dispatcher::kDeepEp) {  // the link-level matrices (deepep.h)
        j["dispatch_links"] = FlexLinksToJson(*sampled, DeepEpRowBytes(plan, /*fp8=*/true));
      }
      if (r.json) report_text = j.dump(1, ' ', false, Json::error_handler_t::replace) + "\n";
      if (r.html) {
        Json page = PlanToJson(plan, source, memory);
        page.update(j);  // the plan's figures and simulate's report, one document
        html_text = ReportToHtml(page, RoutingSampleToJson(*sampled));
      }
    }
  } else if (r.json || r.html) {
    Json j = PlanToJson(plan, source, memory);
    j["generator"]["provenance"] = r.provenance;
    j["header"] = header;
    if (received) j["received_rows"] = ReceivedRowsToJson(*received);
    if (r.json) report_text = j.dump(1, ' ', false, Json::error_handler_t::replace) + "\n";
    if (r.html) html_text = ReportToHtml(j, UniformRoutingSample(plan));
  }
  if (r.refit) {
    Json refit = replica_refit ? *replica_refit : RefitMapToJson(BuildRefitMap(plan, plan.training.refit_dtype));
    refit["provenance"] = r.provenance;
    result.refit_text = refit.dump(1, ' ', false, Json::error_handler_t::replace) + "\n";
  }
  return result;
}

std::string PlanCommandText(const PlanCommandRequest& r, const PlanCommandResult& result,
                            const std::optional<GlobalBatchSchedule>& global_batch, const std::string& note) {
  const Plan& plan = result.plan;
  const MemoryReport& memory = result.memory;
  std::string out = ReportHeaderToText(result.header) + note;
  if (result.received) out += ReceivedRowsToText(*result.received);
  if (result.cost) {
    if (global_batch) out += GlobalBatchText(*global_batch, plan);
    out += MemoryToText(plan, memory) + CostToText(*result.cost) + result.redundant_text;
  } else {
    out += r.command == PlanCommand::kCheck ? MemoryToText(plan, memory) : PlanToText(plan, r.model_source, memory);
  }
  return out;
}

bool FailsBudget(const PlanCommandRequest& r, const PlanCommandResult& result) {
  return (r.command == PlanCommand::kCheck || r.command == PlanCommand::kSimulate) && !result.memory.over_budget_ranks.empty();
}

}  // namespace dockyard
