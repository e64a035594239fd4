// Why a layout ranks where it does: `search --explain "tp=2,pp=8,vpp=4,ep=32"` finds the best
// ranked layout that matches every key given (keys not given are free), its rank, its cost
// breakdown beside the winner's, and the phases that make the difference.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "planner/base/json_util.h"
#include "planner/model/dispatcher.h"
#include "planner/model/model_spec.h"
#include "planner/search/search.h"

namespace dockyard {

// A partial layout. Keys (comma-separated key=value): pp, dp_replicate (dpr), dp_shard (dps),
// cp, tp, ep, etp, vpp, mbs (micro_batch_size), recompute (none | selective | full), dispatcher,
// dp_sharding (fsdp | zero1 | ddp), overlap (EP overlap: on | off).
struct LayoutQuery {
  std::string text;
  std::optional<int64_t> pp, dp_replicate, dp_shard, cp, tp, ep, etp, vpp, micro_batch_size;
  std::optional<std::string> recompute, dp_sharding;
  std::optional<Dispatcher> dispatcher;
  std::optional<bool> overlap_moe_ep_comm;

  bool Matches(const RankedLayout& row) const;
  bool Matches(const LayoutCandidate& candidate, const TrainingConfig& base) const;  // the candidate's own settings
};

// Reads a yes/no value (overlap=VALUE) as the front end reads a flag's value; throws on a word it
// does not take. The CLI passes CLI11's flag parser (on/off, true/false, yes/no, 1/0, ...).
using QueryBoolParser = std::function<bool(const std::string& value)>;

// Spaces and tabs around an item, a key or a value are ignored (" tp = 2 , ep=8" is tp=2,ep=8).
// Yes/no values go through `parse_bool`; without one only on and off are taken.
// Throws dockyard::Error naming --explain, the key and the rule (unknown keys with a suggestion,
// malformed numbers, unknown values, a key given twice, an empty query).
LayoutQuery ParseLayoutQuery(const std::string& text, const QueryBoolParser& parse_bool = nullptr);

// Checks a query against the search it explains, before any layout is evaluated: every key the
// search pins (--tp 2, --vpp 1, --recompute full, --dispatcher, the EP overlap, ...) must take the
// pinned value, every searched setting one of the searched values (mbs 1, 2, 4; the dispatchers
// searched, deepep / allgather only with --search-dispatchers), pp at most max_pp, the degrees
// given must multiply to a divisor of the world size, and the query must obey the rules that need
// only its own keys (vpp > 1 needs pp > 1; EP overlap needs ep > 1 and the alltoall or flex
// dispatcher, and is searched under --convention megatron only). Throws dockyard::Error naming
// --explain, the key, its value and the pin or rule.
void ValidateLayoutQuery(const LayoutQuery& query, const SearchOptions& options);

// One line of --explain's breakdown. Phases are CostBreakdown::critical_path_us shares, each counted
// in full even where it runs under another phase (FSDP all-gathers under compute, the shared expert
// under the combine, Megatron's EP overlap), so the shares can add up to more or less than the step.
// "other" is the step time no share covers (pipeline sends, what the shares leave of the bubble);
// "overlapped" (subtracted) is what the shares count beyond the step: time hidden under another
// phase, net of "other". At most one of the two is > 0 for a row; both are >= 0.
struct PhaseDifference {
  std::string phase;
  double winner_us = 0, layout_us = 0;  // share of the step (CostBreakdown::critical_path_us), >= 0
  bool subtracted = false;              // "overlapped": taken off the sum of the shares
  // This line's part of the step difference (layout - winner): the lines' parts add up to it.
  double difference_us() const { return subtracted ? winner_us - layout_us : layout_us - winner_us; }
};

struct ExplainResult {
  LayoutQuery query;
  int64_t rank = 0;    // 1-based among the ranked layouts; 0 = no ranked layout matches
  int64_t ranked = 0;  // ranked layouts in all
  std::optional<RankedLayout> layout, winner;
  std::vector<PhaseDifference> differences;  // largest |difference| first; every phase of either
  // When no ranked layout matches: the candidates matching the query by outcome.
  int64_t matching = 0, matching_invalid = 0, matching_over_budget = 0, matching_not_divisible = 0;
  std::string example_reason;  // a global-batch reason of one of them, when any
  // Each rule the matching invalid candidates break: its message as the plan path words it
  // (LayoutEvaluation::reason), how many break it and one of them (its --explain text); most first.
  struct RuleBroken {
    std::string message;
    int64_t candidates = 0;
    std::string example;
  };
  std::vector<RuleBroken> rules_broken;
  // Each matching candidate over the budget: its --explain text and its worst rank's peak
  // (LayoutEvaluation::peak_bytes), lowest peak first, against budget_gib less reserve_gib.
  struct OverBudget {
    std::string layout;
    int64_t peak_bytes = 0;
  };
  std::vector<OverBudget> over_budget;
  double budget_gib = 0, reserve_gib = 0;  // SearchBudgetGib, training.memory_reserve_gib
};

// `result` must come from SearchLayouts(model, options) with options.keep_all. Breakdowns through
// the plan path (DescribeRows). Throws dockyard::Error when keep_all was off, where
// ValidateLayoutQuery does, when no candidate of the search matches the query, and when every
// matching candidate is invalid by rule (the message is one such candidate's BuildPlan error).
ExplainResult ExplainLayout(const ModelSpec& model, const SearchOptions& options, const SearchResult& result, const LayoutQuery& query);

Json ExplainToJson(const ExplainResult& e);
std::string ExplainToText(const ExplainResult& e);

}  // namespace dockyard
