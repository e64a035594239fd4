// What redundant experts buy and cost for a plan: the placement (eplb.h) of every sampled MoE
// layer from the routing model's expected load, the routing over it (replica_routing.h), the
// imbalance and the predicted MoE-layer and step time before and after (cost.h, same cluster
// and options), the memory of the extra expert slots and the replica-gradient all-reduce.
//
// Before: dockyard's ordinary placement (EP rank r owns experts [r * E/ep, (r + 1) * E/ep)) and
// the plain routing sample. After: P = E + R slots, P/ep per rank.
// Load: the routing model's expected share per expert and layer (LayerRouting::expected_share):
// the long-run statistics a load balancer collects, not the one sample it is then evaluated on.
// Memory (training): every rank holds P/ep expert slots instead of E/ep, so its routed-expert
// parameters, gradients and optimizer state grow by the factor P/E; the extra is
// bytes_by_role["routed_experts"] x R / E for each kind (the worst rank of each stage, from
// ComputeMemory), added to the stage's peak; when a routing sample sizes the received rows, the
// peak after holds the rows received over the replicas (AnalyzeRedundantExperts).
// Replica-gradient all-reduce (training, once per step, not overlapped): each replica computes
// the gradient of its own tokens; replicas on one rank are summed locally, and the d distinct
// ranks holding a logical expert sum theirs with a ring all-reduce, 2 (d - 1) / d x one slot's
// gradient bytes on the wire per member (docs/redundant-experts.md). A slot's gradient bytes
// are the rank's routed-expert gradient bytes / (its stage's MoE layers x E/ep). Per rank the
// sum over the replicated experts it holds in the sampled layers, averaged per layer and scaled
// to the MoE layers of its stage; the worst rank's figure is reported as a CommEntry (purpose
// "replica_grad_all_reduce", mesh "sparse", axis "ep", phase "step", group = the largest d) and
// priced with StepCommUs; the bytes of sets that span nodes count as cross-node. The "after"
// step time adds it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "planner/accounting/comm.h"
#include "planner/cost/cost.h"
#include "planner/layout/eplb.h"
#include "planner/base/json_util.h"
#include "planner/accounting/memory.h"
#include "planner/layout/plan.h"
#include "planner/routing/replica_routing.h"
#include "planner/routing/routing.h"

namespace dockyard {

struct RedundantExpertsOptions {
  int64_t redundant_experts = 0;                 // --redundant-experts R
  EplbPolicy policy = EplbPolicy::kAuto;         // --eplb-policy
  int64_t expert_groups = 1;                     // --expert-groups (hierarchical policy)
  ReplicaChoice choice = ReplicaChoice::kLocal;  // --replica-choice
};

struct RedundantExpertsSide {
  double imbalance = 1.0;    // max over the sampled layers of max / mean received rows
  int64_t max_received = 0;  // max over the sampled layers
  int64_t p99_received = 0;  // max over the sampled layers
  double moe_layer_us = 0;   // CostBreakdown::moe_layer_us
  double step_time_us = 0;   // with the replica-gradient all-reduce (after)
  double tokens_per_s_per_gpu = 0;
  int64_t peak_bytes = 0;  // worst rank over the stages
};

struct RedundantExpertsReport {
  RedundantExpertsOptions options;
  EplbPolicy policy = EplbPolicy::kGlobal;  // applied (auto resolved)
  int64_t num_experts = 0, num_slots = 0, slots_per_rank = 0, ep = 1, num_nodes = 1;
  std::vector<ExpertPlacement> placements;  // [sampled MoE layers]
  RoutingResult routing;                    // over the placements
  RedundantExpertsSide before, after;
  // Extra bytes of the worst rank of the stage with the largest peak after.
  int64_t extra_params_bytes = 0, extra_grads_bytes = 0, extra_optimizer_bytes = 0;
  CommEntry replica_grad_all_reduce;  // calls 0 when no expert has two replicas
  double replica_grad_all_reduce_us = 0;
  double budget_gib = 0;           // the plan's memory budget (0 = none), as MemoryReport
  double reserve_gib = 0;          // held back from it (MemoryReport::reserve_gib)
  bool after_over_budget = false;  // after.peak_bytes exceeds budget less reserve (memory.h OverBudget)
};

// The nodes the EP group of `plan` spans (rank 0's group, machine.gpus_per_node per node).
// Throws dockyard::Error when the group does not fill nodes in EP order, ep / nodes ranks each
// (the node model of eplb.h).
int64_t EpGroupNodes(const Plan& plan);

// The placement options of `plan` for `options`: its ep, EpGroupNodes, the groups, R and policy
// (the one definition shared by the planner's analysis and dockyard-run). Throws what
// EpGroupNodes throws.
EplbOptions EplbOptionsFor(const Plan& plan, const RedundantExpertsOptions& options);

// The placement of every MoE layer of `plan` (in layer order) for the routing `spec` (its
// expected shares per layer): what a refit into an engine with redundant experts targets
// (replica_refit.h). The first layers equal those AnalyzeRedundantExperts places (a layer's
// shares do not depend on how many layers are prepared). Throws what PlaceExperts throws.
std::vector<ExpertPlacement> PlaceMoeLayers(const Plan& plan, const RoutingSpec& spec, const RedundantExpertsOptions& options);

// The physical->logical map of MoE layer `moe_layer` from a placement file (dockyard-run
// --placement): either {"physical_to_logical": [ints]} (one map, used for any layer) or a
// `simulate --redundant-experts --json` report, whose /redundant_experts/layers/<moe_layer>/
// physical_to_logical is taken (the sampled layers only). Values are checked by PlacementFromMap
// when the map is used. A report must have been made for the run's layout: its /parallel/ep must
// be `ep` and its /model/num_experts `num_experts` (the placement was priced for those). Throws
// dockyard::Error naming the file, the JSON pointer and the mismatch.
std::vector<int64_t> ReadPlacementFile(const std::string& path, int64_t moe_layer, int64_t ep, int64_t num_experts);

// Runs the analysis. `before` is the plain routing sample of `model` for the plan (SampleRouting
// with the plan's ep and routed tokens, oep 1) and `cost_before` its SimulateStep. With
// `routing_sizes_memory` (--routing given: `memory` was sized by the sample's received rows,
// received_rows.h SampleImbalance), the peak after is sized by the received rows of the routing over
// the replicas (fewer when they even the load); without, by the plan's imbalance as `memory`. Throws
// dockyard::Error on invalid options (ValidateEplbOptions), the deredundency dispatcher (not
// supported with replicas) or mismatched inputs.
RedundantExpertsReport AnalyzeRedundantExperts(const Plan& plan, const ClusterSpec& cluster, const RoutingModel& model,
                                               const RoutingResult& before, const CostBreakdown& cost_before, const MemoryReport& memory,
                                               const RedundantExpertsOptions& options, ComputeModel compute_model = ComputeModel::kKernels,
                                               bool routing_sizes_memory = false);

// JSON block "redundant_experts" (docs/report.md) and the terminal section.
Json RedundantExpertsToJson(const RedundantExpertsReport& report);
std::string RedundantExpertsToText(const RedundantExpertsReport& report);

// When the peak after the replicas exceeds the limit in force (budget less reserve, memory.h
// OverBudget), the line `simulate` exits kExitOverBudget with, as `check` does for the ranks over:
// "<prefix>: with R redundant experts the worst rank needs P GiB, over the L GiB limit (B GiB budget
// less the X GiB reserve) by D GiB\n"; empty when it fits or there is no budget.
std::string RedundantOverBudgetText(const RedundantExpertsReport& report, const std::string& prefix);
// The converse, for a budget the peak after fits (empty when it does not or there is no budget):
// "<prefix>: with R redundant experts the worst rank needs P GiB, within the L GiB limit (B GiB budget
// less the X GiB reserve; Q GiB without them)\n". simulate prints it when the plan without the
// replicas is over (it exits kExitOverBudget for that plan, as check does).
std::string RedundantWithinBudgetText(const RedundantExpertsReport& report, const std::string& prefix);

}  // namespace dockyard
