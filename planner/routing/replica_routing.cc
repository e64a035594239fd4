// Routing over replicated experts (see replica_routing.h).
#include "planner/routing/replica_routing.h"

#include <algorithm>

#include <fmt/format.h>

#include "planner/base/checked_math.h"
#include "planner/base/error.h"

namespace dockyard {

ReplicaChoice ParseReplicaChoice(const std::string& text) {
  if (text == "local") return ReplicaChoice::kLocal;
  if (text == "random") return ReplicaChoice::kRandom;
  throw Error(fmt::format("--replica-choice '{}' is not one of local, random", text));
}

const char* ReplicaChoiceName(ReplicaChoice choice) {
  return choice == ReplicaChoice::kLocal ? "local" : "random";
}

std::vector<int32_t> ChooseReplicas(const ExpertPlacement& p, ReplicaChoice choice, uint64_t seed, int64_t layer, int64_t source,
                                    const std::vector<int32_t>& experts) {
  const int64_t E = p.num_experts;
  if (source < 0 || source >= p.ep) throw Error(fmt::format("replica choice: source EP rank {} outside [0, {})", source, p.ep));
  // Candidates per expert for this source: the replicas on its node if any, else all.
  std::vector<std::vector<int64_t>> candidates(static_cast<size_t>(E));
  if (choice == ReplicaChoice::kLocal) {
    const int64_t node = p.NodeOfRank(source);
    for (int64_t e = 0; e < E; ++e) {
      const auto& all = p.logical_to_physical[static_cast<size_t>(e)];
      auto& c = candidates[static_cast<size_t>(e)];
      for (int64_t s : all) {
        if (p.NodeOfRank(p.RankOfSlot(s)) == node) c.push_back(s);
      }
      if (c.empty()) c = all;
    }
  }
  std::vector<int64_t> seen(static_cast<size_t>(E), 0);  // assignments of `source` to e so far
  Xoshiro256ss rng = Xoshiro256ss::ForStream(seed ^ kReplicaStreamSalt, static_cast<uint64_t>(layer), static_cast<uint64_t>(source));
  std::vector<int32_t> out(experts.size());
  for (size_t i = 0; i < experts.size(); ++i) {
    const int64_t e = experts[i];
    if (e < 0 || e >= E) throw Error(fmt::format("replica choice: assignment {} picks expert {}, outside [0, {})", i, e, E));
    const auto& all = p.logical_to_physical[static_cast<size_t>(e)];
    if (choice == ReplicaChoice::kRandom) {
      out[i] = static_cast<int32_t>(all.size() == 1 ? all[0] : all[static_cast<size_t>(rng.Below(all.size()))]);
      continue;
    }
    const auto& c = candidates[static_cast<size_t>(e)];
    const int64_t k = seen[static_cast<size_t>(e)]++;
    out[i] = static_cast<int32_t>(c[static_cast<size_t>((source + k) % static_cast<int64_t>(c.size()))]);
  }
  return out;
}

LayerRouting SampleReplicatedLayer(const RoutingModel& model, int64_t l, const ExpertPlacement& p, int64_t tokens_per_rank,
                                   ReplicaChoice choice) {
  CheckPlacement(p);
  const int64_t E = model.num_experts, ep = p.ep, P = p.num_physical, slots_per_rank = P / ep;
  if (p.num_experts != E) throw Error(fmt::format("replicated routing: placement for {} experts, the model has {}", p.num_experts, E));
  if (tokens_per_rank < 0) throw Error(fmt::format("tokens_per_rank must be >= 0, got {}", tokens_per_rank));
  LayerRouting out;
  out.tokens_per_expert.assign(static_cast<size_t>(E), 0);
  out.dispatch.assign(static_cast<size_t>(ep * ep), 0);
  out.rows_per_local_expert.assign(static_cast<size_t>(P), 0);
  out.received.assign(static_cast<size_t>(ep), 0);
  out.expected_share = ExpectedShare(model, l);
  for (int64_t src = 0; src < ep; ++src) {
    const std::vector<int32_t> experts = SampleTokenExperts(model, l, src, tokens_per_rank);
    const std::vector<int32_t> slots = ChooseReplicas(p, choice, model.spec.seed, l, src, experts);
    for (size_t i = 0; i < experts.size(); ++i) {
      ++out.tokens_per_expert[static_cast<size_t>(experts[i])];
      ++out.rows_per_local_expert[static_cast<size_t>(slots[i])];
      ++out.dispatch[static_cast<size_t>(src * ep + slots[i] / slots_per_rank)];
    }
  }
  for (int64_t s = 0; s < P; ++s)
    out.received[static_cast<size_t>(s / slots_per_rank)] += out.rows_per_local_expert[static_cast<size_t>(s)];
  FillReceivedStats(out, tokens_per_rank, model.top_k);
  return out;  // iep_dispatch empty: dispatch itself (IepDispatchOf)
}

RoutingResult SampleReplicatedRouting(const RoutingModel& model, const std::vector<ExpertPlacement>& placements, int64_t tokens_per_rank,
                                      ReplicaChoice choice) {
  if (static_cast<int64_t>(placements.size()) != model.num_layers) {
    throw Error(fmt::format("replicated routing: {} placements for {} MoE layers", placements.size(), model.num_layers));
  }
  if (placements.empty()) throw Error("replicated routing: the model has no MoE layer");
  const int64_t E = model.num_experts, ep = placements.front().ep, P = placements.front().num_physical;
  if (tokens_per_rank < 0) throw Error(fmt::format("tokens_per_rank must be >= 0, got {}", tokens_per_rank));
  RoutingResult result;
  result.num_experts = E;
  result.top_k = model.top_k;
  result.ep = ep;
  result.tokens_per_rank = tokens_per_rank;
  result.oep = 1;
  result.num_slots = P;
  result.assignments = CheckedMul(
      CheckedMul(CheckedMul(tokens_per_rank, ep, "routing tokens (tokens_per_rank * ep)"), model.top_k, "routing assignments per layer"),
      model.num_layers, "routing assignments");
  result.layers.resize(placements.size());
  for (int64_t l = 0; l < model.num_layers; ++l) {
    const ExpertPlacement& p = placements[static_cast<size_t>(l)];
    if (p.num_experts != E || p.ep != ep || p.num_physical != P) {
      throw Error(fmt::format("replicated routing: layer {} placement has {} experts, ep {}, {} slots; expected {}, {}, {}", l,
                              p.num_experts, p.ep, p.num_physical, E, ep, P));
    }
    LayerRouting& out = result.layers[static_cast<size_t>(l)];
    out = SampleReplicatedLayer(model, l, p, tokens_per_rank, choice);
    result.max_imbalance = l == 0 ? out.imbalance : std::max(result.max_imbalance, out.imbalance);
  }
  return result;
}

}  // namespace dockyard
