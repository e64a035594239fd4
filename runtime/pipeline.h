// One MoE layer's forward on one rank, through the backend interface only (backend.h), so the
// CPU backend runs it today and a CUDA backend later:
//
//   router      logits = x . W_gate^T; scores = softmax | sigmoid; top-k over scores (+ the
//               score-correction bias, selection only); weights = scores at the top-k,
//               normalized (norm_topk_prob) and times routed_scaling_factor
//   permute     sort the T * top_k (token, slot) pairs by expert and gather their rows
//   dispatch    all_to_all: exchange tokens per expert (all-to-all of counts), split sizes,
//               all-to-all of the rows with uneven splits (hyper_parallel expert_parallel.py, AllToAllTokenDispatcher);
//               deredundency: all-gather counts and rows over oep, select the outer expert
//               range, all-to-all over iep (hyper_parallel expert_parallel.py, DeredundencyTokenDispatcher)
//   permute     rank-major -> expert-major (_generate_permute_indices, as row blocks)
//   grouped_gemm  SwiGLU of the local experts on their f slice (expert_ffn.h)
//   unpermute   expert-major -> rank-major
//   combine     the reverse all-to-all (deredundency: reverse iep all-to-all, scatter into the
//               oep whiteboard, reduce-scatter over oep)
//   unpermute   out[t] = sum_j weight[t, j] * row(t, j)
//   shared_experts  + the shared experts (sequence-parallel ones all-gather / reduce-scatter
//               over tp, timed as tp_comm)
//   tp_comm     all-reduce of the partial sums over the expert-TP group (TP-sharded experts)
//
// Phase names are planner/cost/cost.h's, so measured and predicted phases can be diffed; weight
// generation (weight_gen) is timed apart from the GEMMs it feeds.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/backend.h"
#include "runtime/config.h"

namespace dockyard::runtime {

// The phases, in report order.
const std::vector<std::string>& PhaseNames();

struct RankResult {
  int64_t rank = 0;
  int64_t source = 0;
  int64_t tokens = 0;
  std::vector<float> output;  // [tokens, hidden] after the last iteration
  int64_t routed_rows = 0;    // tokens * top_k
  int64_t sent_rows = 0;      // routed rows sent to other ranks in the dispatch
  int64_t received_rows = 0;  // rows the local experts computed
  std::vector<int64_t> tokens_per_local_expert;
  std::vector<double> phase_us;               // aligned with PhaseNames(): mean per timed iteration
  std::vector<CollectiveRecord> collectives;  // one iteration's collectives (record_collectives)
  // deepep dispatcher: tokens sent to each EP member in the network stage (to rail peers) and in
  // the NVLink stage (inside the node), last iteration; empty for the other dispatchers.
  std::vector<int64_t> flex_network_rows, flex_nvlink_rows;
  // allgather dispatcher: token rows the EP all-gather delivered to this rank (its own included),
  // last iteration; 0 for the other dispatchers.
  int64_t gathered_rows = 0;
};

// Runs warmup + iters forwards of the layer as `rank` and fills `result`. Throws
// dockyard::Error (e.g. the deredundency dispatcher's equal-count precondition).
void RunRank(RankContext& ctx, const RunConfig& config, const RankConfig& rank, RankResult& result);

// The experts token `t` of `source` is routed to when options.routing is set: [tokens * top_k]
// (the planner's SampleTokenExperts; the same on every rank and in the reference).
// With redundant experts (config.placement): the physical slot of each of `experts` ([tokens *
// top_k] logical experts of the rank with EP index `ep_index`), by the planner's ChooseReplicas
// with the routing model's seed (options.seed without a routing model) and layer.
std::vector<int64_t> ReplicaSlots(const RunConfig& config, int64_t ep_index, const std::vector<int64_t>& experts);

std::vector<int64_t> AssignedExperts(const RunConfig& config, const RoutingModel& routing, int64_t source, int64_t tokens);

}  // namespace dockyard::runtime
