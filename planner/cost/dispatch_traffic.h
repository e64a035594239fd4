// The plan's traffic table for the deepep dispatcher: its dispatch and combine per link level
// (network = RDMA between NVLink domains, nvlink = inside one), from the rows per link the time
// model reads (deepep.h FlexDispatchRows over the routing sample's per-token counts: the row and
// column sums of the link-level matrices, rows of precision.h DispatchRowBytes). ComputeComm (accounting/comm.h) lists no deepep
// dispatch or combine: they depend on the routing sample, which lives in this layer.
#pragma once

#include <cstdint>
#include <vector>

#include "planner/accounting/comm.h"
#include "planner/layout/plan.h"
#include "planner/cost/deepep.h"
#include "planner/routing/flex_counts.h"

namespace dockyard {

// Bytes of one dispatched token row of `plan` under the deepep dispatcher, as the time model
// sends it (moe_phases.cc SimulateMoePhases): DispatchRowBytes(hidden, act bytes, training.fp8_dispatch)
// x dispatch_tokens / routed_tokens (Megatron's expert TP sends the routed share of its tokens).
// `fp8` false gives the combine's BF16 row.
double DeepEpRowBytes(const Plan& plan, bool fp8);

// Adds the deepep dispatch and combine of `rank` to `comm` (ComputeComm(plan, rank)) from the
// per-token counts of each sampled MoE layer over rank's EP group (counts[l].node_of the nodes
// of machine.gpus_per_node): per MoE layer and micro-batch, forward and backward,
//   deepep_dispatch_network  bytes rank sends by RDMA  (row sums of FlexDispatchBytes().network)
//   deepep_dispatch_nvlink   bytes rank writes over NVLink (row sums of .nvlink)
//   deepep_combine_network / _nvlink   the transposes (column sums) in BF16 rows
// each the mean over the layers; network bytes are all cross-node, NVLink bytes none. Fills
// comm.links with every member's per-call sums. Throws dockyard::Error when counts is empty or
// a count's members differ from rank's EP group.
void AddDeepEpTraffic(const Plan& plan, int64_t rank, const std::vector<FlexCounts>& counts, CommReport& comm);

// For the deepep dispatcher with ep > 1: samples `layers` MoE layers (uniform routing, seed 0,
// the model's group limit: what `simulate` samples by default) over rank's EP group with
// SampleFlexCounts and calls AddDeepEpTraffic. Other dispatchers: nothing.
void AddDispatcherTraffic(const Plan& plan, int64_t rank, int64_t layers, CommReport& comm);

// ComputeComm(plan, rank) with AddDispatcherTraffic for up to 4 sampled MoE layers (as
// `simulate` samples by default): the plan report's traffic.
CommReport ComputePlanComm(const Plan& plan, int64_t rank);

}  // namespace dockyard
