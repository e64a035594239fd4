// Redundant experts as a dimension of the layout search: the best layouts of SearchLayouts
// re-evaluated with R redundant expert slots each (redundant_experts.h), those whose peak
// memory after exceeds the budget dropped, the rest ranked by predicted tokens/s per GPU after
// (with the replica-gradient all-reduce).
//
// R values are given per layout as integers or as multiples of its ep ("ep", "2ep"), since a
// valid R depends on ep (num_experts + R divisible by ep); a (layout, R) pair that breaks the
// rule, or a layout with the deredundency or the deepep dispatcher (whose replicated routing the
// redundant-experts model cannot price: its sample has no per-token node counts), is skipped
// and counted. Each pair goes through the reference path (BuildPlan, ComputeMemory, SampleRouting
// with the search's routing and sampled layers, SimulateStep and AnalyzeRedundantExperts with the
// search's compute model and cluster knobs), so its "before" numbers are the search's own. It runs for the search's
// shown rows only (base.top), after the search: the per-candidate evaluation (layout_eval.h) has
// no replica model, and none is needed there.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "planner/base/json_util.h"
#include "planner/model/model_spec.h"
#include "planner/cost/redundant_experts.h"
#include "planner/search/search.h"

namespace dockyard {

struct RedundantCount {
  int64_t value = 0;
  bool per_ep = false;  // R = value * ep
  int64_t For(int64_t ep) const { return per_ep ? value * ep : value; }
};

// "0,ep,2ep,64": comma-separated integers >= 0 or k "ep" (k >= 1 integer, "ep" = 1ep). Throws
// dockyard::Error naming --redundant-experts and the item.
std::vector<RedundantCount> ParseRedundantCounts(const std::string& text);
std::string RedundantCountText(const RedundantCount& count);

struct RedundantRankedLayout {
  RankedLayout layout;            // the search's figures (before)
  int64_t redundant_experts = 0;  // R
  std::string policy;             // applied
  double imbalance_before = 1.0, imbalance_after = 1.0;
  double moe_layer_us_before = 0, moe_layer_us_after = 0;
  double step_time_us = 0;          // after, with the replica-gradient all-reduce
  double tokens_per_s_per_gpu = 0;  // after
  int64_t peak_bytes = 0;           // after
};

struct RedundantSearchResult {
  std::vector<RedundantRankedLayout> ranked;  // best tokens/s per GPU first
  int64_t skipped = 0;                        // (layout, R) pairs that break a rule, or of deredundency or deepep layouts
  int64_t over_budget = 0;                    // pairs over the budget after
};

// Re-evaluates every layout of `base.top` with each R of `counts` (`options`: policy, groups,
// choice; its redundant_experts is ignored). `search` are the options the search ran with.
// Throws dockyard::Error for errors other than a rule a pair breaks.
RedundantSearchResult SearchRedundantExperts(const ModelSpec& model, const SearchOptions& search, const SearchResult& base,
                                             const std::vector<RedundantCount>& counts, const RedundantExpertsOptions& options);

Json RedundantSearchToJson(const RedundantSearchResult& result);
std::string RedundantSearchToText(const RedundantSearchResult& result);

}  // namespace dockyard
