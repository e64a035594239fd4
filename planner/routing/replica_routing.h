// Routing over replicated experts: which physical slot (replica) each token-expert assignment
// goes to, and the dispatch matrices, rows per physical slot, imbalance and p99 that follow.
//
// The tokens and their logical experts are those of the routing model (routing.h
// SampleTokenExperts, stream (seed, layer, source EP rank)); only the choice of replica is added.
// Rules (deterministic under the seed):
//   local   (default) an assignment of source EP rank s to logical expert e goes to the replicas
//           of e on s's node when there are any, else to all replicas of e; among those c
//           candidates (increasing slot order) the k-th assignment of s to e (k = 0, 1, ...,
//           counted in token order) goes to candidate (s + k) mod c: an even split, rotated by
//           the source so that sources with few tokens for e do not all pick the first replica.
//   random  as vLLM's EPLB: a uniformly drawn replica of e for every assignment of an expert with
//           more than one replica (xoshiro256** stream (seed ^ kReplicaStreamSalt, layer, s), one
//           Below(c) per such assignment, in token order); experts with one replica draw nothing.
// The runtime (dockyard-run --redundant-experts) calls ChooseReplicas with the same arguments, so
// its measured rows per rank equal these matrices exactly.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "planner/layout/eplb.h"
#include "planner/routing/routing.h"

namespace dockyard {

enum class ReplicaChoice { kLocal, kRandom };

// "local" or "random"; throws dockyard::Error naming --replica-choice.
ReplicaChoice ParseReplicaChoice(const std::string& text);
const char* ReplicaChoiceName(ReplicaChoice choice);

// Salt of the replica-choice streams, so that they never coincide with the routing streams.
constexpr uint64_t kReplicaStreamSalt = 0x5245504c49434153ULL;  // "REPLICAS"

// The physical slot of each assignment of source EP rank `source` in one layer. `experts`:
// [tokens * top_k] logical experts (SampleTokenExperts order). Returns [tokens * top_k] slots.
// Throws dockyard::Error for an expert outside [0, E) or a source outside [0, ep).
std::vector<int32_t> ChooseReplicas(const ExpertPlacement& placement, ReplicaChoice choice, uint64_t seed, int64_t layer, int64_t source,
                                    const std::vector<int32_t>& experts);

// One layer of SampleReplicatedRouting: `layer` of `model` over `placement` (ep source ranks of
// tokens_per_rank tokens). Throws dockyard::Error on a layer outside the model or a placement for
// another E.
LayerRouting SampleReplicatedLayer(const RoutingModel& model, int64_t layer, const ExpertPlacement& placement, int64_t tokens_per_rank,
                                   ReplicaChoice choice);

// The routing of `model`'s tokens (ep ranks of tokens_per_rank tokens, the seed of model.spec)
// over `placements` ([model.num_layers], all with the same E, ep and slot count). The result has
// num_slots = P; per layer: tokens_per_expert [E] (logical, as without replicas), dispatch
// [ep*ep], received [ep], rows_per_local_expert [P] (rank d's local slot j at d*(P/ep)+j), the
// statistics of FillReceivedStats, iep_dispatch empty (IepDispatchOf: dispatch; no deredundency dispatcher), and
// expected_share of the model. Throws dockyard::Error on mismatched shapes.
RoutingResult SampleReplicatedRouting(const RoutingModel& model, const std::vector<ExpertPlacement>& placements, int64_t tokens_per_rank,
                                      ReplicaChoice choice);

}  // namespace dockyard
