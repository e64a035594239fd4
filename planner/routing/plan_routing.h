// The routing sample of a plan: how many MoE layers to sample and the sample itself, drawn for the
// plan's EP degree, routed tokens per rank and dispatcher (what SimulateStep reads).
#pragma once

#include <cstdint>
#include <optional>

#include "planner/layout/plan.h"
#include "planner/model/model_spec.h"
#include "planner/routing/routing.h"

namespace dockyard {

// MoE layers sampled for routing unless told otherwise (--routing-layers), the same in simulate,
// search (SearchOptions::routing_layers) and the fidelity bench, so that a search row's step
// time is simulate's for the same layout and flags. Each phase is the mean over the sampled
// layers of their slowest ranks; more layers average the sampling noise of the max down.
constexpr int64_t kDefaultRoutingLayers = 4;

// The MoE layers to sample for a plan of `model`: a trace gives every MoE layer its own routing
// (all of them); otherwise `requested`, else min(`default_layers`, MoE layers). Throws
// dockyard::Error naming `flag` when the count is outside [1, MoE layers].
int64_t RoutingLayersToSample(const ModelSpec& model, const RoutingSpec& routing, std::optional<int64_t> requested, int64_t default_layers,
                              const char* flag);

// Routing of `layers` MoE layers sampled for `plan`: its EP degree, its routed tokens per rank
// (ComputeWorkload) and its dispatcher's outer EP size (DispatchOep) -- what SimulateStep reads.
RoutingResult SampleRoutingForPlan(const Plan& plan, const RoutingSpec& routing, int64_t layers);

}  // namespace dockyard
