// plan / check / simulate as one library call (see plan_command.h).
#include "planner/report/plan_command.h"

#include <sys/stat.h>

#include <string>
#include <vector>

#include <fmt/format.h>

#include "planner/accounting/refit.h"
#include "planner/base/error.h"
#include "planner/layout/default_layout.h"
#include "planner/layout/megatron_split.h"
#include "planner/accounting/replica_refit.h"
#include "planner/report/budget_text.h"
#include "planner/report/header.h"
#include "planner/cost/compute_model.h"
#include "planner/report/html_report.h"
#include "planner/report/report.h"
#include "planner/cost/cost.h"
#include "planner/cost/deepep.h"
#include "planner/cost/gemm_efficiency.h"
#include "planner/cost/kernels_model.h"
#include "planner/cost/dispatch_traffic.h"
#include "planner/routing/plan_routing.h"

namespace dockyard {

ReportInputs PlanReportInputs(const std::string& model_path, const std::string& cluster, const std::string& routing,
                              const std::string& calibration) {
  ReportInputs in;
  if (!model_path.empty()) {
    in.files.push_back({"--model", model_path});
  } else {
    in.embedded.push_back({kDefaultModelName, DefaultModelJson()});
  }
  struct stat st {};
  if (stat(cluster.c_str(), &st) == 0 && S_ISREG(st.st_mode)) in.files.push_back({"--cluster", cluster});
  if (routing.rfind("trace:", 0) == 0) in.files.push_back({"--routing trace:", routing.substr(6)});
  if (!calibration.empty()) in.files.push_back({"--calibration", calibration});
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

namespace {

// check / simulate: the routing sample. Given --routing, its largest received rows size the
// memory (SampleImbalance) in place of --imbalance; simulate also prices the step with it. Sets
// result->routing, routing_layers, received and the plan's imbalance; nullopt for plan (and check
// without --routing or --capacity-factor).
std::optional<RoutingResult> SampleCommandRouting(const PlanCommandRequest& r, PlanCommandResult* result) {
  Plan& plan = result->plan;
  const bool check = r.command == PlanCommand::kCheck;
  const bool simulate = r.command == PlanCommand::kSimulate;
  const std::optional<double>& capacity_factor = r.capacity_factor;
  if (!simulate && !(check && (r.routing_given || capacity_factor))) return std::nullopt;
  std::optional<RoutingSpec>& routing = result->routing;
  int64_t& layers = result->routing_layers;
  routing = WithFlag("--routing", [&] { return ParseRoutingSpec(r.routing_text); });
  routing->seed = r.seed;
  // A trace is given per MoE layer (or one layer for all); other distributions are sampled for
  // a few layers whose per-layer slowest ranks are averaged.
  layers = RoutingLayersToSample(plan.model, *routing, r.routing_layers, kDefaultRoutingLayers, "--routing-layers");
  std::optional<RoutingResult> sampled = SampleRoutingForPlan(plan, *routing, layers);
  if (r.routing_given || capacity_factor) {
    const RoutingModel routing_model =
        PrepareRouting(*routing, plan.model.moe.num_experts, plan.model.moe.top_k, layers, GroupLimitOf(plan.model.moe));
    result->received = AnalyzeReceivedRows(routing_model, *sampled, capacity_factor);
    result->received->sizes_memory = r.routing_given;
    if (r.routing_given) plan.training.imbalance = result->received->imbalance;
  }
  return sampled;
}

// The command's report header (header.h): command, model, degrees, cluster, calibration, routing,
// imbalance, provenance and (simulate) the compute model.
Json CommandHeader(const PlanCommandRequest& r, const PlanCommandResult& result) {
  const Plan& plan = result.plan;
  const bool check = r.command == PlanCommand::kCheck;
  const bool simulate = r.command == PlanCommand::kSimulate;
  ReportHeaderInputs header_inputs;
  header_inputs.command = check ? "check" : simulate ? "simulate" : "plan";
  header_inputs.model_name = plan.model.name;
  header_inputs.model_source = r.model_source;
  header_inputs.dims = plan.dims;
  header_inputs.world_size = plan.dims.world_size;
  header_inputs.convention = plan.dims.convention;
  header_inputs.defaults_applied = DefaultsAppliedLines(plan.dims.convention, plan.defaults_applied, plan.training, plan.dims.tp,
                                                        plan.model.moe.num_shared_experts > 0);
  double attention_fp8_speedup = 1.0;
  if (r.cluster) {
    // The knobs the step is priced with: the calibration's when one is given (SimulateCommand).
    ClusterSpec priced = *r.cluster;
    if (r.calibration) ApplyCalibration(*r.calibration, &priced);
    header_inputs.cluster = priced.name;
    header_inputs.cluster_compute = priced.compute_source;
    attention_fp8_speedup = FlashCoreSpeedup(priced, plan.training, plan.model);
  }
  if (r.calibration) header_inputs.calibration = CalibrationRefToJson(*r.calibration);
  if (result.routing) {
    header_inputs.routing = RoutingSpecText(*result.routing);
    header_inputs.seed = result.routing->seed;
    header_inputs.routing_layers = result.routing_layers;
  }
  header_inputs.imbalance = plan.training.imbalance;
  header_inputs.provenance = r.provenance;
  if (check || simulate) header_inputs.machine = plan.machine;
  if (simulate) {
    header_inputs.compute = ComputeModelToJson(r.compute_model, plan.training, attention_fp8_speedup,
                                               UnfusedRotaryFactor(plan.model, plan.dims.convention == Convention::kMegatron));
  }
  return ReportHeader(header_inputs);
}

// What the text's Note lines say about the plan beyond its figures, for the JSON report and the
// HTML page (`notes`, present when any): Megatron's refusal of dockyard's even split and the flag
// that reproduces it (megatron_split.h MegatronEvenSplitReason). And the warnings printed on
// stderr (`warnings`, present when any): the request's, then the peak's.
void AddNotes(const Plan& plan, const PlanCommandRequest& r, const PlanCommandResult& result, Json* j) {
  const std::string split =
      MegatronEvenSplitReason(plan.training, plan.model.num_hidden_layers, plan.dims.pp, plan.dims.convention == Convention::kMegatron);
  if (!split.empty()) (*j)["notes"] = Json::array({split});
  std::vector<std::string> warnings = r.warnings;
  if (!result.peak_warning.empty()) warnings.push_back(WarningText(result.peak_warning));
  if (!warnings.empty()) (*j)["warnings"] = warnings;
}

// simulate: the step's cost on the calibrated cluster, the redundant-experts analysis (with its
// replica refit map when --refit-json is asked: returned), and the JSON report and HTML page asked for.
std::optional<Json> SimulateCommand(const PlanCommandRequest& r, const RoutingResult& sampled, PlanCommandResult* result) {
  const Plan& plan = result->plan;
  const MemoryReport& memory = result->memory;
  const RoutingSpec& routing = *result->routing;
  const int64_t layers = result->routing_layers;
  ClusterSpec cluster = *r.cluster;
  if (r.calibration) ApplyCalibration(*r.calibration, &cluster);
  result->cost = SimulateStep(plan, cluster, sampled, r.compute_model);
  const CostBreakdown& cost = *result->cost;
  std::optional<Json> replica_refit;
  std::optional<RedundantExpertsReport> redundant;
  if (r.redundant) {
    const RedundantExpertsOptions& ro = *r.redundant;
    const RoutingModel routing_model =
        PrepareRouting(routing, plan.model.moe.num_experts, plan.model.moe.top_k, layers, GroupLimitOf(plan.model.moe));
    redundant = AnalyzeRedundantExperts(plan, cluster, routing_model, sampled, cost, memory, ro, r.compute_model, r.routing_given);
    result->redundant_text = RedundantExpertsToText(*redundant);
    result->redundant_over_budget_text = RedundantOverBudgetText(*redundant, "dockyard-plan simulate");
    result->redundant_within_budget_text = RedundantWithinBudgetText(*redundant, "dockyard-plan simulate");
    if (r.refit) {
      // The refit map targets the physical slots of every MoE layer's placement.
      const std::vector<ExpertPlacement> placements = PlaceMoeLayers(plan, routing, ro);
      const RefitMap map = BuildRefitMap(plan, plan.training.refit_dtype);
      replica_refit = ReplicaRefitMapToJson(map, ReplicaRefitTargets(map, plan.model, placements), placements);
    }
  }
  if (!r.json && !r.html) return replica_refit;
  Json j = SimulateReportToJson(plan, memory, cost, {r.model_source, cluster, r.routing_text, routing.seed, layers, r.provenance});
  if (redundant) j["redundant_experts"] = RedundantExpertsToJson(*redundant);
  if (result->received) j["received_rows"] = ReceivedRowsToJson(*result->received);
  j["header"] = result->header;
  AddNotes(plan, r, *result, &j);
  if (r.calibration) j["calibration"] = CalibrationRefToJson(*r.calibration);
  if (plan.dims.ep > 1 && plan.training.dispatcher == Dispatcher::kDeepEp) {  // the link-level matrices (deepep.h)
    j["dispatch_links"] = FlexLinksToJson(sampled, DeepEpRowBytes(plan, /*fp8=*/true));
  }
  if (r.json) result->report_text = j.dump(1, ' ', false, Json::error_handler_t::replace) + "\n";
  if (r.html) {
    Json page = PlanToJson(plan, r.model_source, memory);
    page.update(j);  // the plan's figures and simulate's report, one document
    result->html_text = ReportToHtml(page, RoutingSampleToJson(sampled));
  }
  return replica_refit;
}

// plan and check: the JSON report and HTML page asked for.
void PlanDocuments(const PlanCommandRequest& r, PlanCommandResult* result) {
  if (!r.json && !r.html) return;
  const Plan& plan = result->plan;
  Json j = PlanToJson(plan, r.model_source, result->memory);
  j["generator"]["provenance"] = r.provenance;
  j["header"] = result->header;
  AddNotes(plan, r, *result, &j);
  if (result->received) j["received_rows"] = ReceivedRowsToJson(*result->received);
  if (r.json) result->report_text = j.dump(1, ' ', false, Json::error_handler_t::replace) + "\n";
  if (r.html) result->html_text = ReportToHtml(j, UniformRoutingSample(plan));
}

}  // namespace

std::string WarningText(const std::string& line) {
  std::string out = line;
  for (const char* label : {"dockyard-plan: ", "warning: "}) {
    if (out.rfind(label, 0) == 0) out.erase(0, std::string(label).size());
  }
  while (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

std::string PeakAboveClusterWarning(double peak_bytes, double reserve_gib, const ClusterSpec& cluster) {
  if (!OverBudget(peak_bytes, cluster.memory_gib, reserve_gib)) return "";
  return fmt::format(
      "dockyard-plan: warning: the worst rank's peak, {:.2f} GiB, with the {:.2f} GiB reserve is above {}'s {} GiB per GPU "
      "(memory_gib): this layout would not fit its GPUs; with no memory budget nothing holds simulate to it "
      "(--gpu-memory-gib {} exits 3 on it)\n",
      peak_bytes / static_cast<double>(int64_t{1} << 30), reserve_gib, cluster.name, cluster.memory_gib, cluster.memory_gib);
}

PlanCommandResult RunPlanCommand(Plan plan_in, const PlanCommandRequest& r) {
  PlanCommandResult result;
  result.plan = std::move(plan_in);
  const std::optional<RoutingResult> sampled = SampleCommandRouting(r, &result);
  // Everything that can fail is computed before anything is written.
  result.memory = ComputeMemory(result.plan);
  result.header = CommandHeader(r, result);
  // simulate with no budget holds the peak to the cluster's memory with a warning only.
  if (r.command == PlanCommand::kSimulate && r.cluster && !(result.plan.machine.gpu_memory_gib > 0)) {
    result.peak_warning = PeakAboveClusterWarning(static_cast<double>(result.memory.worst_peak_bytes),
                                                  result.plan.training.memory_reserve_gib.value_or(kDefaultMemoryReserveGib), *r.cluster);
  }
  std::optional<Json> replica_refit;  // simulate --redundant-experts --refit-json
  if (r.command == PlanCommand::kSimulate) {
    replica_refit = SimulateCommand(r, *sampled, &result);
  } else {
    PlanDocuments(r, &result);
  }
  if (r.refit) {
    Json refit = replica_refit ? *replica_refit : RefitMapToJson(BuildRefitMap(result.plan, result.plan.training.refit_dtype));
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
  // Megatron would refuse dockyard's even split without a split flag: say which flag reproduces it.
  out += MegatronEvenSplitNote(plan.training, plan.model.num_hidden_layers, plan.dims.pp, plan.dims.convention == Convention::kMegatron);
  if (result.received) out += ReceivedRowsToText(*result.received);
  if (global_batch) out += GlobalBatchText(*global_batch, plan);
  if (result.cost) {
    out += DispatcherToText(plan) + MemoryToText(plan, memory) + CostToText(*result.cost) + result.redundant_text;
  } else {
    out += r.command == PlanCommand::kCheck ? MemoryToText(plan, memory) : PlanToText(plan, r.model_source, memory);
  }
  return out;
}

bool FailsBudget(const PlanCommandRequest& r, const PlanCommandResult& result) {
  return (r.command == PlanCommand::kCheck || r.command == PlanCommand::kSimulate) &&
         (!result.memory.over_budget_ranks.empty() || !result.redundant_over_budget_text.empty());
}

}  // namespace dockyard
