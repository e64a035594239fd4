// SimulateStep: the step inputs gathered from a plan's meshes and placements (rank 0's groups, the
// FSDP units, the step-end collectives, the MoE phases of its routing sample), then the cost model
// (see cost.h).
#include "planner/cost/cost.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <optional>
#include <unordered_map>

#include <fmt/format.h>

#include "planner/accounting/comm.h"
#include "planner/accounting/memory.h"
#include "planner/accounting/workload.h"
#include "planner/base/error.h"
#include "planner/base/phase.h"
#include "planner/cost/attention_support.h"
#include "planner/cost/ep_overlap.h"
#include "planner/cost/gemm_efficiency.h"
#include "planner/cost/kernels_model.h"
#include "planner/cost/model_flops.h"
#include "planner/cost/network.h"
#include "planner/cost/op_sac_time.h"
#include "planner/cost/units.h"
#include "planner/model/pipeline_schedule.h"
#include "planner/model/precision.h"
#include "planner/model/recompute.h"
#include "planner/cost/moe_phases.h"

namespace dockyard {

namespace {

// Rank 0's view of a collective over `group` (global ranks): its size, whether it spans NVLink
// domains and its members in rank 0's domain (network.h).
CollectiveGroup CollectiveGroupOf(const std::vector<int64_t>& group, const ClusterSpec& c) {
  return CollectiveGroup{static_cast<int64_t>(group.size()), SpansNodes(group, NvlinkDomainGpus(c)),
                         MembersPerDomain(group, NvlinkDomainGpus(c))};
}

// Rank 0's FSDP data-parallel group (global ranks, sorted): efsdp x edp on the sparse mesh,
// dp_shard x dp x cp on the dense mesh (the axes the mesh has).
std::vector<int64_t> FsdpGroupOfRank0(const Plan& plan, bool sparse) {
  const Mesh& mesh = sparse ? plan.meshes.sparse : plan.meshes.dense;
  std::vector<int64_t> g = {0};
  for (const char* name : sparse ? std::vector<const char*>{"efsdp", "edp"} : std::vector<const char*>{"dp_shard", "dp", "cp"}) {
    const int ax = mesh.AxisIndex(name);
    if (ax < 0) continue;
    std::vector<int64_t> next;
    for (int64_t r : g)
      for (int64_t x : mesh.GroupOf(r, ax)) next.push_back(x);
    g = next;
  }
  std::sort(g.begin(), g.end());
  g.erase(std::unique(g.begin(), g.end()), g.end());
  return g;
}

// FSDP's step inputs (StepInputs): rank 0's data-parallel groups and, for the first MoE [0] and the
// first dense [1] layer, rank 0's model-parallel elements on each mesh (and, with
// --fp8-param-gather, the FP8 GEMM weights among them). Nothing without FSDP.
void AddFsdpInputs(const Plan& plan, const ClusterSpec& c, StepInputs& in) {
  const auto& m = plan.model;
  const auto& t = plan.training;
  if (*t.dp_sharding != DpSharding::kFsdp) return;
  in.dense_dp_group = CollectiveGroupOf(FsdpGroupOfRank0(plan, false), c);
  in.sparse_dp_group = CollectiveGroupOf(FsdpGroupOfRank0(plan, true), c);
  for (int kind = 0; kind < 2; ++kind) {
    const bool moe = kind == 0;
    int64_t layer = -1;
    for (int64_t l = 0; l < m.num_hidden_layers && layer < 0; ++l)
      if (m.moe_layers[l] == moe) layer = l;
    if (layer < 0) continue;
    double dense_elems = 0, sparse_elems = 0, fp8_dense = 0, fp8_sparse = 0;
    for (size_t i = 0; i < plan.inventory.params.size(); ++i) {
      const auto& p = plan.inventory.params[i];
      if (p.layer != layer) continue;
      // FSDP gathers the model-parallel shard back (rank 0 holds the largest one).
      const double n = static_cast<double>(ModelParallelNumel(plan, i, 0));
      (plan.placements[i].sparse_mesh ? sparse_elems : dense_elems) += n;
      if (t.fp8_param_gather && Fp8GemmGroup(RoleGroup(p.role))) (plan.placements[i].sparse_mesh ? fp8_sparse : fp8_dense) += n;
    }
    in.fsdp_layer[kind] = {true, dense_elems, sparse_elems, fp8_dense, fp8_sparse};
  }
}

// The MoE phase shape of `plan` (MoePhaseShapeOf and, with replicas, the physical slots). Throws dockyard::Error when `routing` was sampled for another
// deredundency oep.
MoePhaseShape PlanMoePhaseShape(const Plan& plan, const Workload& w, const RoutingResult& routing) {
  const auto& m = plan.model;
  const auto& d = plan.dims;
  const auto& t = plan.training;
  const bool deredundency = d.ep > 1 && t.dispatcher == Dispatcher::kDeredundency;
  if (deredundency && routing.oep != DeredundencyOep(plan)) {
    throw Error(
        fmt::format("routing was sampled for oep {}, the plan's deredundency dispatcher uses oep {}", routing.oep, DeredundencyOep(plan)));
  }
  MoePhaseShape shape = MoePhaseShapeOf(m, w, t, d.ep);
  if (routing.num_slots > 0) shape.num_experts = routing.num_slots;  // replicas: the physical slots
  return shape;
}

// Rank 0's step-end data-parallel communication (us): the sum of StepCollectiveUs over its "step"
// CommEntry list, in order, and the part of it that gathers ZeRO-1 parameters.
void AddStepCommInputs(const Plan& plan, const ClusterSpec& c, StepInputs& in) {
  const CommReport comm = ComputeComm(plan, 0);
  for (const auto& e : comm.entries) {
    if (e.phase != "step") continue;
    // Rank 0's step groups are {0, stride, ...} (comm.h StepCollective): rails from that shape.
    const int64_t domain = NvlinkDomainGpus(c);
    const double us =
        StepCollectiveUs(static_cast<double>(e.wire_bytes), e.group_size, MembersPerDomainStrided(e.group_size, e.stride, domain),
                         (e.group_size - 1) * e.stride / domain > 0, c);
    in.dp_step_comm_us += us;
    if (e.purpose == "zero1_all_gather_params") (e.mesh == "sparse" ? in.param_gather_sparse_us : in.param_gather_dense_us) += us;
    if (e.purpose == "zero1_reduce_scatter_grads" || e.purpose == "ddp_all_reduce_grads") {
      (e.mesh == "sparse" ? in.grad_reduce_sparse_us : in.grad_reduce_dense_us) += us;
    }
  }
  in.dense_elems_rank0 = static_cast<double>(comm.dense_elems);
  in.sparse_elems_rank0 = static_cast<double>(comm.sparse_elems);
}

}  // namespace

CostBreakdown SimulateStep(const Plan& plan, const ClusterSpec& c, const RoutingResult& routing, ComputeModel model) {
  const auto& m = plan.model;
  const auto& d = plan.dims;
  const auto& t = plan.training;
  // Once per plan (the layout search checks once before it enumerates, search_command.cc).
  ValidateFp8RecipeOnGpu(t, c.name, c.mxfp8_tensor_cores);
  // The flex dispatcher's SMs against this GPU's, with or without the overlap that prices them.
  if (t.run.moe_flex_dispatcher_num_sms > 0) FlexDispatcherSmShare(t.run.moe_flex_dispatcher_num_sms, c.sm_count, c.name);
  StepInputs in;
  in.workload = ComputeWorkload(plan);
  const Workload& w = in.workload;
  if (d.ep > 1 && (routing.ep != d.ep || routing.num_experts != m.moe.num_experts || routing.layers.empty())) {
    throw Error(fmt::format("routing was sampled for ep {} and {} experts, the plan has ep {} and {} experts", routing.ep,
                            routing.num_experts, d.ep, m.moe.num_experts));
  }
  // Attention parameters of one layer.
  for (const auto& p : plan.inventory.params) {
    if (p.layer == 0 && RoleGroup(p.role) == std::string("attention")) in.attention_params += static_cast<double>(p.Numel());
  }
  // Groups of the slowest ranks.
  in.tp_group = CollectiveGroupOf(plan.meshes.dense.GroupOf(0, plan.meshes.dense.AxisIndex("tp")), c);
  if (const int etp_axis = plan.meshes.sparse.AxisIndex("etp"); etp_axis >= 0) {
    in.etp_group = CollectiveGroupOf(plan.meshes.sparse.GroupOf(0, etp_axis), c);
  }
  const int ep_axis = plan.meshes.sparse.AxisIndex("ep");
  const auto ep_group = plan.meshes.sparse.GroupOf(0, ep_axis);
  AddFsdpInputs(plan, c, in);

  // Routing-dependent MoE phases.
  const MoePhaseShape shape = PlanMoePhaseShape(plan, w, routing);
  const MoePhaseTimes moe = SimulateMoePhases(routing, ep_group, shape, c, model);
  in.moe_phases = &moe;
  in.num_moe_layers = m.NumMoeLayers();
  in.layer_stage = &plan.layer_stage;
  in.layer_chunk = &plan.layer_chunk;
  in.loss_stage = plan.loss_stage;
  in.mtp_stage = plan.mtp_stage;

  AddStepCommInputs(plan, c, in);
  const MemoryBreakdown mem = StaticMemoryOnRank(plan, 0);
  in.grad_bytes_rank0 = mem.grads_bytes;
  in.optimizer_elems_rank0 = mem.optimizer_elems;
  return SimulateStepFromInputs(m, plan.inventory.totals, d, t, c, in, model, /*detail=*/true);
}

}  // namespace dockyard
