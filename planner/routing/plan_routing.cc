// The routing sample of a plan (see plan_routing.h).
#include "planner/routing/plan_routing.h"

#include <algorithm>

#include <fmt/format.h>

#include "planner/accounting/workload.h"
#include "planner/base/error.h"
#include "planner/routing/flex_counts.h"

namespace dockyard {

int64_t RoutingLayersToSample(const ModelSpec& model, const RoutingSpec& routing, std::optional<int64_t> requested, int64_t default_layers,
                              const char* flag) {
  const int64_t moe_layers = model.NumMoeLayers();
  if (routing.kind == RoutingKind::kTrace) return moe_layers;
  const int64_t layers = requested.value_or(std::min<int64_t>(moe_layers, default_layers));
  if (layers < 1 || layers > moe_layers) {
    throw Error(fmt::format("{} ({}) must be in [1, num MoE layers ({})]", flag, layers, moe_layers));
  }
  return layers;
}

RoutingResult SampleRoutingForPlan(const Plan& plan, const RoutingSpec& routing, int64_t layers) {
  const Workload w = ComputeWorkload(plan);
  const RoutingModel model =
      PrepareRouting(routing, plan.model.moe.num_experts, plan.model.moe.top_k, layers, GroupLimitOf(plan.model.moe));
  RoutingResult result = SampleRouting(model, plan.dims.ep, w.routed_tokens, DispatchOep(plan));
  if (plan.dims.ep > 1 && plan.training.dispatcher == Dispatcher::kDeepEp) {
    AddFlexCounts(model, plan.meshes.sparse.GroupOf(0, plan.meshes.sparse.AxisIndex("ep")), plan.machine.gpus_per_node, result);
  }
  return result;
}

}  // namespace dockyard
