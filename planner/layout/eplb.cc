// Redundant-expert placement (see eplb.h).
#include "planner/layout/eplb.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <utility>

#include <fmt/format.h>

#include "planner/base/error.h"

namespace dockyard {

namespace {

// Replication: counts[e] replicas of each of n experts filling `slots` slots; returns the
// expert of every slot (the first n slots are experts 0..n-1, then the extra replicas in the
// order they were added).
std::vector<int64_t> Replicate(const std::vector<double>& load, int64_t slots, std::vector<int64_t>& counts) {
  const int64_t n = static_cast<int64_t>(load.size());
  std::vector<int64_t> slot_expert(static_cast<size_t>(slots));
  counts.assign(static_cast<size_t>(n), 1);
  std::iota(slot_expert.begin(), slot_expert.begin() + n, int64_t{0});
  for (int64_t s = n; s < slots; ++s) {
    int64_t best = 0;
    double best_load = -1.0;
    for (int64_t e = 0; e < n; ++e) {
      const double per_replica = load[static_cast<size_t>(e)] / static_cast<double>(counts[static_cast<size_t>(e)]);
      if (per_replica > best_load) {  // strict: ties keep the lowest index
        best_load = per_replica;
        best = e;
      }
    }
    slot_expert[static_cast<size_t>(s)] = best;
    ++counts[static_cast<size_t>(best)];
  }
  return slot_expert;
}

// Packing: the position (pack * per_pack + rank in pack) of each of n items in m packs.
std::vector<int64_t> Pack(const std::vector<double>& load, int64_t num_packs) {
  const int64_t n = static_cast<int64_t>(load.size());
  const int64_t per_pack = n / num_packs;
  std::vector<int64_t> position(static_cast<size_t>(n));
  if (per_pack == 1) {
    std::iota(position.begin(), position.end(), int64_t{0});
    return position;
  }
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), int64_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return load[static_cast<size_t>(a)] > load[static_cast<size_t>(b)]; });
  std::vector<double> pack_load(static_cast<size_t>(num_packs), 0.0);
  std::vector<int64_t> pack_items(static_cast<size_t>(num_packs), 0);
  for (int64_t item : order) {
    int64_t best = -1;
    for (int64_t p = 0; p < num_packs; ++p) {
      if (pack_items[static_cast<size_t>(p)] >= per_pack) continue;
      if (best < 0 || pack_load[static_cast<size_t>(p)] < pack_load[static_cast<size_t>(best)]) best = p;
    }
    position[static_cast<size_t>(item)] = best * per_pack + pack_items[static_cast<size_t>(best)];
    ++pack_items[static_cast<size_t>(best)];
    pack_load[static_cast<size_t>(best)] += load[static_cast<size_t>(item)];
  }
  return position;
}

// The hierarchical policy; the global one is this with one group and one node.
std::vector<int64_t> Hierarchical(const std::vector<double>& load, int64_t P, int64_t groups, int64_t nodes, int64_t gpus) {
  const int64_t E = static_cast<int64_t>(load.size());
  const int64_t group_size = E / groups;
  const int64_t experts_per_node = E / nodes, slots_per_node = P / nodes, gpus_per_node = gpus / nodes;
  // (1) groups onto nodes. node_order[i] = the logical expert at position i when the experts are
  // listed node by node (each node's groups in their packing order).
  std::vector<double> group_load(static_cast<size_t>(groups), 0.0);
  for (int64_t e = 0; e < E; ++e) group_load[static_cast<size_t>(e / group_size)] += load[static_cast<size_t>(e)];
  const std::vector<int64_t> group_position = Pack(group_load, nodes);  // node * groups_per_node + rank
  std::vector<int64_t> node_order(static_cast<size_t>(E));
  for (int64_t e = 0; e < E; ++e) {
    node_order[static_cast<size_t>(group_position[static_cast<size_t>(e / group_size)] * group_size + e % group_size)] = e;
  }
  std::vector<int64_t> physical_to_logical(static_cast<size_t>(P));
  for (int64_t node = 0; node < nodes; ++node) {
    // (2) replicate the node's experts over its slots.
    std::vector<double> node_load(static_cast<size_t>(experts_per_node));
    for (int64_t i = 0; i < experts_per_node; ++i) {
      node_load[static_cast<size_t>(i)] = load[static_cast<size_t>(node_order[static_cast<size_t>(node * experts_per_node + i)])];
    }
    std::vector<int64_t> counts;
    const std::vector<int64_t> slot_expert = Replicate(node_load, slots_per_node, counts);
    // (3) pack the replicas onto the node's GPUs.
    std::vector<double> replica_load(static_cast<size_t>(slots_per_node));
    for (int64_t s = 0; s < slots_per_node; ++s) {
      const int64_t i = slot_expert[static_cast<size_t>(s)];
      replica_load[static_cast<size_t>(s)] = node_load[static_cast<size_t>(i)] / static_cast<double>(counts[static_cast<size_t>(i)]);
    }
    const std::vector<int64_t> position = Pack(replica_load, gpus_per_node);
    for (int64_t s = 0; s < slots_per_node; ++s) {
      physical_to_logical[static_cast<size_t>(node * slots_per_node + position[static_cast<size_t>(s)])] =
          node_order[static_cast<size_t>(node * experts_per_node + slot_expert[static_cast<size_t>(s)])];
    }
  }
  return physical_to_logical;
}

}  // namespace

EplbPolicy ParseEplbPolicy(const std::string& text) {
  if (text == "auto") return EplbPolicy::kAuto;
  if (text == "hierarchical") return EplbPolicy::kHierarchical;
  if (text == "global") return EplbPolicy::kGlobal;
  if (text == "contiguous") return EplbPolicy::kContiguous;
  throw Error(fmt::format("--eplb-policy '{}' is not one of auto, hierarchical, global, contiguous", text));
}

const char* EplbPolicyName(EplbPolicy policy) {
  switch (policy) {
    case EplbPolicy::kAuto:
      return "auto";
    case EplbPolicy::kHierarchical:
      return "hierarchical";
    case EplbPolicy::kGlobal:
      return "global";
    case EplbPolicy::kContiguous:
      return "contiguous";
  }
  return "?";
}

int64_t MaxRedundantExperts(int64_t num_experts, int64_t ep) {
  return num_experts * (ep - 1);
}

void ValidateEplbOptions(const EplbOptions& o, int64_t E) {
  if (E < 1) throw Error(fmt::format("num_experts ({}) must be at least 1 for redundant experts", E));
  if (o.ep < 1) throw Error(fmt::format("ep ({}) must be at least 1", o.ep));
  if (o.redundant_experts < 0) {
    throw Error(fmt::format("--redundant-experts ({}) must be >= 0", o.redundant_experts));
  }
  // More copies of an expert than EP ranks cannot spread its load further: every logical expert
  // has at most ep replicas, so at most num_experts x (ep - 1) redundant slots are useful.
  const int64_t max_redundant = MaxRedundantExperts(E, o.ep);
  if (o.redundant_experts > max_redundant) {
    throw Error(
        fmt::format("--redundant-experts ({}) must be <= num_experts ({}) x (ep ({}) - 1) = {}: an expert with "
                    "more replicas than EP ranks cannot spread its load further",
                    o.redundant_experts, E, o.ep, max_redundant));
  }
  const int64_t P = E + o.redundant_experts;
  if (P % o.ep != 0) {
    throw Error(
        fmt::format("--redundant-experts ({}): num_experts ({}) + redundant experts = {} physical slots must be divisible by ep ({}) "
                    "so that every EP rank holds the same number of slots{}",
                    o.redundant_experts, E, P, o.ep,
                    E % o.ep == 0 ? fmt::format("; use a multiple of ep ({}, {}, ...)", o.ep, 2 * o.ep) : std::string()));
  }
  if (o.num_nodes < 1 || o.ep % o.num_nodes != 0) {
    throw Error(fmt::format("the EP group's nodes ({}) must divide ep ({})", o.num_nodes, o.ep));
  }
  if (o.num_groups < 1 || E % o.num_groups != 0) {
    throw Error(fmt::format("--expert-groups ({}) must divide num_experts ({})", o.num_groups, E));
  }
  if (o.policy == EplbPolicy::kHierarchical && o.num_groups % o.num_nodes != 0) {
    throw Error(
        fmt::format("--eplb-policy hierarchical packs whole expert groups onto nodes: the EP group's nodes ({}) must divide "
                    "--expert-groups ({}); use --eplb-policy global (or auto)",
                    o.num_nodes, o.num_groups));
  }
}

ExpertPlacement PlaceExperts(const std::vector<double>& load, const EplbOptions& o) {
  const int64_t E = static_cast<int64_t>(load.size());
  ValidateEplbOptions(o, E);
  for (int64_t e = 0; e < E; ++e) {
    const double x = load[static_cast<size_t>(e)];
    if (!std::isfinite(x) || x < 0) throw Error(fmt::format("expert load [{}] ({}) must be finite and >= 0", e, x));
  }
  ExpertPlacement p;
  p.num_experts = E;
  p.num_physical = E + o.redundant_experts;
  p.policy = o.policy;
  if (p.policy == EplbPolicy::kAuto) {
    p.policy = o.num_groups % o.num_nodes == 0 ? EplbPolicy::kHierarchical : EplbPolicy::kGlobal;
  }
  switch (p.policy) {
    case EplbPolicy::kHierarchical:
      p.physical_to_logical = Hierarchical(load, p.num_physical, o.num_groups, o.num_nodes, o.ep);
      break;
    case EplbPolicy::kGlobal:
      p.physical_to_logical = Hierarchical(load, p.num_physical, 1, 1, o.ep);
      break;
    default: {  // contiguous
      std::vector<int64_t> counts;
      Replicate(load, p.num_physical, counts);
      for (int64_t e = 0; e < E; ++e) {
        for (int64_t c = 0; c < counts[static_cast<size_t>(e)]; ++c) p.physical_to_logical.push_back(e);
      }
      break;
    }
  }
  return PlacementFromMap(std::move(p.physical_to_logical), E, o.ep, o.num_nodes, p.policy);
}

ExpertPlacement PlacementFromMap(std::vector<int64_t> physical_to_logical, int64_t E, int64_t ep, int64_t num_nodes, EplbPolicy policy) {
  ExpertPlacement p;
  p.policy = policy;
  p.num_experts = E;
  p.num_physical = static_cast<int64_t>(physical_to_logical.size());
  p.ep = ep;
  p.num_nodes = num_nodes;
  if (E < 1 || ep < 1 || p.num_physical % ep != 0 || num_nodes < 1 || ep % num_nodes != 0) {
    throw Error(
        fmt::format("placement: {} physical slots over ep {} ({} nodes) for {} experts: the slots must be a multiple of "
                    "ep and the nodes must divide ep",
                    p.num_physical, ep, num_nodes, E));
  }
  p.physical_to_logical = std::move(physical_to_logical);
  p.replica_count.assign(static_cast<size_t>(E), 0);
  p.logical_to_physical.assign(static_cast<size_t>(E), {});
  for (int64_t s = 0; s < p.num_physical; ++s) {
    const int64_t e = p.physical_to_logical[static_cast<size_t>(s)];
    if (e < 0 || e >= E) throw Error(fmt::format("placement: physical slot {} holds expert {}, outside [0, {})", s, e, E));
    ++p.replica_count[static_cast<size_t>(e)];
    p.logical_to_physical[static_cast<size_t>(e)].push_back(s);
  }
  CheckPlacement(p);
  return p;
}

std::vector<double> RankLoads(const ExpertPlacement& p, const std::vector<double>& load) {
  std::vector<double> out(static_cast<size_t>(p.ep), 0.0);
  for (int64_t s = 0; s < p.num_physical; ++s) {
    const int64_t e = p.physical_to_logical[static_cast<size_t>(s)];
    out[static_cast<size_t>(p.RankOfSlot(s))] +=
        load[static_cast<size_t>(e)] / static_cast<double>(p.replica_count[static_cast<size_t>(e)]);
  }
  return out;
}

void CheckPlacement(const ExpertPlacement& p) {
  const int64_t E = p.num_experts, P = p.num_physical;
  if (p.ep < 1 || P % p.ep != 0 || static_cast<int64_t>(p.physical_to_logical.size()) != P ||
      static_cast<int64_t>(p.logical_to_physical.size()) != E || static_cast<int64_t>(p.replica_count.size()) != E) {
    throw Error(fmt::format("placement: {} slots, {} experts, ep {}: map sizes {} / {} / {} do not match", P, E, p.ep,
                            p.physical_to_logical.size(), p.logical_to_physical.size(), p.replica_count.size()));
  }
  int64_t total = 0;
  for (int64_t e = 0; e < E; ++e) {
    const auto& slots = p.logical_to_physical[static_cast<size_t>(e)];
    if (p.replica_count[static_cast<size_t>(e)] < 1 || static_cast<int64_t>(slots.size()) != p.replica_count[static_cast<size_t>(e)]) {
      throw Error(fmt::format("placement: logical expert {} has {} replicas and {} slots", e, p.replica_count[static_cast<size_t>(e)],
                              slots.size()));
    }
    for (int64_t s : slots) {
      if (s < 0 || s >= P || p.physical_to_logical[static_cast<size_t>(s)] != e) {
        throw Error(fmt::format("placement: logical expert {} lists slot {}, which does not hold it", e, s));
      }
    }
    total += static_cast<int64_t>(slots.size());
  }
  if (total != P) throw Error(fmt::format("placement: {} replicas for {} slots", total, P));
}

}  // namespace dockyard
