// The deepep dispatcher's link-level traffic for the plan report (see dispatch_traffic.h).
#include "planner/cost/dispatch_traffic.h"

#include <algorithm>
#include <string>

#include <fmt/format.h>

#include "planner/accounting/workload.h"
#include "planner/base/checked_math.h"
#include "planner/base/error.h"
#include "planner/routing/routing.h"
#include "planner/routing/flex_counts.h"

namespace dockyard {

double DeepEpRowBytes(const Plan& plan, bool fp8) {
  const Workload w = ComputeWorkload(plan);
  const double scale = w.routed_tokens > 0 && w.dispatch_tokens != w.routed_tokens
                           ? static_cast<double>(w.dispatch_tokens) / static_cast<double>(w.routed_tokens)
                           : 1.0;
  return FlexTokenBytes(static_cast<double>(plan.model.hidden_size), static_cast<double>(w.act_bytes), fp8 && plan.training.fp8_dispatch) *
         scale;
}

namespace {

std::vector<int64_t> EpGroupOf(const Plan& plan, int64_t rank) {
  return plan.meshes.sparse.GroupOf(rank, plan.meshes.sparse.AxisIndex("ep"));
}

}  // namespace

void AddDeepEpTraffic(const Plan& plan, int64_t rank, const std::vector<FlexCounts>& counts, CommReport& comm) {
  if (counts.empty()) throw Error("the deepep traffic needs the per-token counts of at least one sampled MoE layer");
  const std::vector<int64_t> group = EpGroupOf(plan, rank);
  const int64_t n = static_cast<int64_t>(group.size());
  const int64_t me = static_cast<int64_t>(std::find(group.begin(), group.end(), rank) - group.begin());
  DispatchLinks links;
  links.ep_group = group;
  links.layers_sampled = static_cast<int64_t>(counts.size());
  links.dispatch_bytes_per_token = DeepEpRowBytes(plan, true);
  links.combine_bytes_per_token = DeepEpRowBytes(plan, false);
  for (auto* v : {&links.network_send, &links.network_recv, &links.nvlink_send, &links.nvlink_recv}) v->assign(static_cast<size_t>(n), 0.0);
  const double per_layer = 1.0 / static_cast<double>(counts.size());
  for (const FlexCounts& c : counts) {
    if (static_cast<int64_t>(c.node_of.size()) != n) {
      throw Error(fmt::format("deepep traffic: counts over {} members, rank {}'s EP group has {}", c.node_of.size(), rank, n));
    }
    const FlexLinkRows rows = FlexDispatchRows(c);
    const double bytes = links.dispatch_bytes_per_token * per_layer;
    for (size_t s = 0; s < static_cast<size_t>(n); ++s) {
      links.network_send[s] += static_cast<double>(rows.network_send[s]) * bytes;
      links.network_recv[s] += static_cast<double>(rows.network_recv[s]) * bytes;
      links.nvlink_send[s] += static_cast<double>(rows.nvlink_send[s]) * bytes;
      links.nvlink_recv[s] += static_cast<double>(rows.nvlink_recv[s]) * bytes;
    }
  }
  // The combine sends back what the dispatch received, in BF16 rows.
  const double combine = links.combine_bytes_per_token / links.dispatch_bytes_per_token;
  const int64_t calls = comm.moe_calls;
  const size_t m = static_cast<size_t>(me);
  struct Item {
    const char* purpose;
    double bytes;
    bool network;
  };
  const Item items[4] = {{"deepep_dispatch_network", links.network_send[m], true},
                         {"deepep_dispatch_nvlink", links.nvlink_send[m], false},
                         {"deepep_combine_network", links.network_recv[m] * combine, true},
                         {"deepep_combine_nvlink", links.nvlink_recv[m] * combine, false}};
  for (const char* phase : {"forward", "backward"}) {
    for (const Item& it : items) {
      // Only the forward dispatch sends FP8 rows: the backward dispatch moves BF16 gradients.
      const bool bf16_dispatch = std::string(phase) == "backward" && std::string(it.purpose).rfind("deepep_dispatch", 0) == 0;
      const int64_t per_call = static_cast<int64_t>(bf16_dispatch ? it.bytes * combine : it.bytes);
      if (calls == 0 || per_call == 0 || n < 2) continue;
      CommEntry e{it.purpose, it.network ? "rdma" : "nvlink", "sparse", "ep", phase, n, calls, per_call, 0, 0};
      e.wire_bytes = CheckedMul(calls, per_call, "deepep bytes per step");
      e.cross_node_bytes = it.network ? e.wire_bytes : 0;
      comm.total_wire_bytes = CheckedAdd(comm.total_wire_bytes, e.wire_bytes, "total wire bytes");
      comm.total_cross_node_bytes = CheckedAdd(comm.total_cross_node_bytes, e.cross_node_bytes, "total cross-node bytes");
      comm.entries.push_back(std::move(e));
    }
  }
  comm.links = std::move(links);
}

void AddDispatcherTraffic(const Plan& plan, int64_t rank, int64_t layers, CommReport& comm) {
  if (plan.dims.ep < 2 || plan.training.dispatcher != Dispatcher::kDeepEp) return;
  const RoutingModel model =
      PrepareRouting(RoutingSpec{}, plan.model.moe.num_experts, plan.model.moe.top_k, layers, GroupLimitOf(plan.model.moe));
  const std::vector<int64_t> group = EpGroupOf(plan, rank);
  const int64_t tokens = ComputeWorkload(plan).routed_tokens;
  std::vector<FlexCounts> counts;
  for (int64_t l = 0; l < layers; ++l) counts.push_back(SampleFlexCounts(model, l, group, plan.machine.gpus_per_node, tokens));
  AddDeepEpTraffic(plan, rank, counts, comm);
}

CommReport ComputePlanComm(const Plan& plan, int64_t rank) {
  CommReport comm = ComputeComm(plan, rank);
  AddDispatcherTraffic(plan, rank, std::min<int64_t>(4, plan.model.NumMoeLayers()), comm);
  return comm;
}

}  // namespace dockyard
