// Redundant experts: how many replicas each logical expert gets and which physical slot (and so
// which EP rank) holds each replica, per MoE layer, from a per-expert load.
//
// Terms (DeepSeek EPLB, vLLM, SGLang). E logical experts are served by P = E + R physical slots
// (R = --redundant-experts); EP rank r holds the contiguous physical slots
// [r * P/ep, (r + 1) * P/ep), so P must be a multiple of ep. Every logical expert has at least one
// replica. The physical->logical map gives the logical expert of every slot; the
// logical->physical map lists every logical expert's slots (increasing).
//
// Policies (DeepSeek EPLB README, "The Algorithm", implemented here from its description):
//   hierarchical  the experts are split into `num_groups` contiguous groups (the groups of
//                 group-limited routing, DeepSeek-V3's n_group); (1) the groups are packed onto
//                 the `num_nodes` nodes of the EP group, groups/nodes each, balancing node load;
//                 (2) inside each node the node's experts are replicated to fill its P/nodes
//                 slots; (3) the replicas are packed onto the node's GPUs, P/ep each, balancing
//                 GPU load. Requires num_groups | E and num_nodes | num_groups.
//   global        the same with one group and one node: replicate over all P slots, then pack
//                 the replicas onto all ep GPUs.
//   contiguous    the same replica counts as global, but slots in logical order (expert 0's
//                 replicas first, then expert 1's, ...), cut into contiguous chunks per rank:
//                 what a load-blind placement gives. With R = 0 it is dockyard's ordinary
//                 placement (rank r owns experts [r * E/ep, (r + 1) * E/ep)).
//   auto          EPLB's rule: hierarchical when num_nodes divides num_groups, else global.
// Building blocks:
//   replication   one replica per expert, then each extra replica goes to the expert with the
//                 largest load per replica (load / replicas), ties to the lowest expert index;
//   packing       n items into m packs of exactly n/m items: items by decreasing load (ties:
//                 lowest index first), each to the non-full pack with the least load so far
//                 (ties: lowest pack index); the k-th item a pack receives is its k-th slot. With
//                 n/m = 1, item i goes to pack i.
// A replica's load is its expert's load divided by the expert's replica count (the tokens are
// split evenly between replicas, as EPLB assumes).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dockyard {

enum class EplbPolicy { kAuto, kHierarchical, kGlobal, kContiguous };

// "auto", "hierarchical", "global", "contiguous"; throws dockyard::Error naming --eplb-policy.
EplbPolicy ParseEplbPolicy(const std::string& text);
const char* EplbPolicyName(EplbPolicy policy);

struct EplbOptions {
  EplbPolicy policy = EplbPolicy::kAuto;
  int64_t redundant_experts = 0;  // R >= 0
  int64_t ep = 1;                 // EP ranks (GPUs) of the group
  int64_t num_nodes = 1;          // nodes the EP group spans; ep / num_nodes consecutive EP ranks per node
  int64_t num_groups = 1;         // expert groups (hierarchical policy)
};

// One MoE layer's placement.
struct ExpertPlacement {
  EplbPolicy policy = EplbPolicy::kGlobal;  // the policy applied (auto resolved)
  int64_t num_experts = 0;                  // E
  int64_t num_physical = 0;                 // P = E + R
  int64_t ep = 1;
  int64_t num_nodes = 1;
  std::vector<int64_t> physical_to_logical;               // [P]
  std::vector<std::vector<int64_t>> logical_to_physical;  // [E][replica_count[e]], increasing
  std::vector<int64_t> replica_count;                     // [E], each >= 1, sum P
  int64_t SlotsPerRank() const { return num_physical / ep; }
  int64_t RankOfSlot(int64_t slot) const { return slot / SlotsPerRank(); }
  int64_t NodeOfRank(int64_t ep_rank) const { return ep_rank / (ep / num_nodes); }
};

// The most redundant slots that can help: every logical expert has at most ep replicas (one
// per EP rank; more cannot spread its load further), so num_experts x (ep - 1).
int64_t MaxRedundantExperts(int64_t num_experts, int64_t ep);

// Checks the options against E: 0 <= R <= MaxRedundantExperts, ep >= 1, (E + R) % ep == 0,
// num_nodes | ep, and for the hierarchical policy num_groups | E and num_nodes | num_groups.
// Throws dockyard::Error naming the flag (--redundant-experts, --eplb-policy, --expert-groups),
// its value and the rule.
void ValidateEplbOptions(const EplbOptions& options, int64_t num_experts);

// The placement of one layer for `load` ([E], >= 0, finite: tokens or shares per logical
// expert). Throws dockyard::Error on invalid options or loads.
ExpertPlacement PlaceExperts(const std::vector<double>& load, const EplbOptions& options);

// The placement whose physical->logical map is `physical_to_logical` ([P], values in [0, E)):
// fills the replica counts and the logical->physical map (policy left as given). Throws
// dockyard::Error when P is not a multiple of ep, num_nodes does not divide ep, a value is out of
// range or a logical expert has no replica.
ExpertPlacement PlacementFromMap(std::vector<int64_t> physical_to_logical, int64_t num_experts, int64_t ep, int64_t num_nodes,
                                 EplbPolicy policy = EplbPolicy::kGlobal);

// Load per EP rank: the sum over the rank's slots of load[expert] / replica_count[expert]
// (the balance EPLB optimizes). [ep].
std::vector<double> RankLoads(const ExpertPlacement& placement, const std::vector<double>& load);

// Checks that the maps are consistent (every slot's expert lists the slot, counts match).
// Throws dockyard::Error naming the first inconsistency.
void CheckPlacement(const ExpertPlacement& placement);

}  // namespace dockyard
