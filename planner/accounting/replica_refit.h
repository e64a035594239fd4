// The per-expert refit map (refit.h) targeting a physical expert layout with replicas
// (eplb.h): every streamed per-expert tensor of logical expert e in MoE layer l must be written
// to each physical slot of e in that layer's placement (logical_to_physical), on the EP rank
// that holds the slot (slot / (P/ep)), as engines with redundant experts (vLLM, SGLang) load it.
// In the JSON, each entry's "ep_rank" stays the TRAINING plan's EP rank that holds the expert (the
// source of the stream, refit.h); "physical_slots" and "slot_ep_ranks" are the targets.
#pragma once

#include <cstdint>
#include <vector>

#include "planner/layout/eplb.h"
#include "planner/base/json_util.h"
#include "planner/model/model_spec.h"
#include "planner/accounting/refit.h"

namespace dockyard {

struct ReplicaRefitTarget {
  std::vector<int64_t> physical_slots;  // increasing; one per replica
  std::vector<int64_t> ep_ranks;        // the EP rank of each slot
};

// One target per entry of `map` (aligned with map.entries). `placements`: one per MoE layer of
// `model`, in layer order (entry.layer is a decoder layer; its MoE index is the number of MoE
// layers before it). Throws dockyard::Error when the counts or the expert counts do not match.
std::vector<ReplicaRefitTarget> ReplicaRefitTargets(const RefitMap& map, const ModelSpec& model,
                                                    const std::vector<ExpertPlacement>& placements);

// RefitMapToJson plus "num_slots" and "redundant_experts" at the top and, per entry,
// "physical_slots" and "slot_ep_ranks".
Json ReplicaRefitMapToJson(const RefitMap& map, const std::vector<ReplicaRefitTarget>& targets,
                           const std::vector<ExpertPlacement>& placements);

}  // namespace dockyard
