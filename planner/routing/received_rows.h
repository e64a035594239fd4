// Received rows of a routing sample: per-layer max / mean / p99 rows an EP rank receives, the one
// rule by which a sample sizes memory (the all-to-all receive buffers and the routed experts'
// activations, planner/accounting/workload.h R_max), and the share of the token-expert
// assignments a capacity factor would drop.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "planner/base/json_util.h"
#include "planner/routing/routing.h"

namespace dockyard {

// The imbalance (TrainingConfig::imbalance, max / mean rows received per EP rank) that makes the
// memory model's R_max = ceil(mean * imbalance) equal the sample's largest received rows over
// its layers: max_l max_received_l / (T * top_k), lowered by the last ulp where floating point
// would round the product above that integer. 1 when nothing is routed. The same rule sizes the
// buffers and activations of `check` and `simulate` given --routing.
double SampleImbalance(const RoutingResult& sample);

// Expert capacity of one source rank, Megatron-Core moe_utils.py get_capacity as
// topk_softmax_with_capacity calls it (--moe-expert-capacity-factor C, num_tokens = T * top_k
// routed assignments of the rank's T tokens): ceil((T * top_k / num_experts) * C). Throws
// dockyard::Error for C <= 0 or not finite, or num_experts < 1.
int64_t ExpertCapacity(int64_t tokens, int64_t top_k, int64_t num_experts, double capacity_factor);

struct LayerReceivedRows {
  int64_t layer = 0;         // sampled MoE layer index
  int64_t max_received = 0;  // rows the busiest EP rank receives
  double mean_received = 0;  // T * top_k
  int64_t p99_received = 0;  // nearest rank over the ep ranks
  double max_over_mean = 1.0;
  // With a capacity factor: assignments over capacity, summed over (source rank, expert).
  int64_t dropped = 0;
};

struct ReceivedRowsReport {
  int64_t ep = 1, tokens_per_rank = 0, top_k = 0, num_experts = 0;
  std::vector<LayerReceivedRows> layers;
  double imbalance = 1.0;         // SampleImbalance
  int64_t max_received_rows = 0;  // the largest over layers: R_max in memory
  std::optional<double> capacity_factor;
  int64_t capacity = 0;      // ExpertCapacity per expert per source rank
  int64_t assignments = 0;   // T * top_k * ep * layers
  int64_t dropped = 0;       // over all layers
  double drop_fraction = 0;  // dropped / assignments
  // Whether the sample sizes the memory figures (check / simulate given --routing); without it
  // --imbalance does, and the report says so instead of "memory sized for".
  bool sizes_memory = true;
};

// The statistics of `sample` (drawn from `model`, e.g. SampleRoutingForPlan). With a capacity
// factor, each source rank's tokens are re-drawn from the sample's streams (SampleTokenExperts,
// so the counts are those of `sample`) and every (source rank, expert) count above the capacity
// drops its excess, as Megatron's token-dropping router does before the dispatch (drop policy
// "probs" or "position" choose which, not how many). Throws dockyard::Error for a sample of
// replicated slots or a bad capacity factor.
ReceivedRowsReport AnalyzeReceivedRows(const RoutingModel& model, const RoutingResult& sample, std::optional<double> capacity_factor);

Json ReceivedRowsToJson(const ReceivedRowsReport& report);
std::string ReceivedRowsToText(const ReceivedRowsReport& report);

}  // namespace dockyard
