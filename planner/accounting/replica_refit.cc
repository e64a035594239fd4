// Refit map targeting physical slots with replicas (see replica_refit.h).
#include "planner/accounting/replica_refit.h"

#include <fmt/format.h>

#include "planner/base/error.h"

namespace dockyard {

std::vector<ReplicaRefitTarget> ReplicaRefitTargets(const RefitMap& map, const ModelSpec& model,
                                                    const std::vector<ExpertPlacement>& placements) {
  if (static_cast<int64_t>(placements.size()) != model.NumMoeLayers()) {
    throw Error(fmt::format("refit: {} placements for {} MoE layers", placements.size(), model.NumMoeLayers()));
  }
  std::vector<int64_t> moe_index(model.moe_layers.size(), -1);
  for (size_t l = 0, i = 0; l < model.moe_layers.size(); ++l) {
    if (model.moe_layers[l]) moe_index[l] = static_cast<int64_t>(i++);
  }
  std::vector<ReplicaRefitTarget> out;
  out.reserve(map.entries.size());
  for (const RefitEntry& e : map.entries) {
    if (e.layer < 0 || e.layer >= static_cast<int64_t>(moe_index.size()) || moe_index[static_cast<size_t>(e.layer)] < 0) {
      throw Error(fmt::format("refit: {} is in layer {}, which is not an MoE layer", e.name, e.layer));
    }
    const ExpertPlacement& p = placements[static_cast<size_t>(moe_index[static_cast<size_t>(e.layer)])];
    if (p.num_experts != map.num_experts || e.expert_idx < 0 || e.expert_idx >= p.num_experts) {
      throw Error(fmt::format("refit: {}: expert {} of a {}-expert map, the placement has {} experts", e.name, e.expert_idx,
                              map.num_experts, p.num_experts));
    }
    ReplicaRefitTarget t;
    t.physical_slots = p.logical_to_physical[static_cast<size_t>(e.expert_idx)];
    for (int64_t s : t.physical_slots) t.ep_ranks.push_back(p.RankOfSlot(s));
    out.push_back(std::move(t));
  }
  return out;
}

Json ReplicaRefitMapToJson(const RefitMap& map, const std::vector<ReplicaRefitTarget>& targets,
                           const std::vector<ExpertPlacement>& placements) {
  if (targets.size() != map.entries.size() || placements.empty()) {
    throw Error(fmt::format("refit: {} targets for {} entries", targets.size(), map.entries.size()));
  }
  Json j = RefitMapToJson(map);
  j["num_slots"] = placements.front().num_physical;
  j["redundant_experts"] = placements.front().num_physical - placements.front().num_experts;
  for (size_t i = 0; i < targets.size(); ++i) {
    j["entries"][i]["physical_slots"] = targets[i].physical_slots;
    j["entries"][i]["slot_ep_ranks"] = targets[i].ep_ranks;
  }
  return j;
}

}  // namespace dockyard
