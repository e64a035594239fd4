// Why a search rejected its candidates, in words: the layouts per rule broken (SearchResult's
// invalid_reasons, LayoutEvaluation::reason as BuildPlan words it) and per global-batch mismatch
// (not_divisible_reasons), most first, and the most common reason as simulate would print it for
// such a layout. EmptySearchText (search_space.h) prints it when nothing ranked and nothing was
// over the budget.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "planner/search/search.h"

namespace dockyard {

// The reasons of `result`, as (layouts, "invalid: " or "global batch: " + message), by layouts
// descending, ties by text ascending (deterministic whatever the thread count).
std::vector<std::pair<int64_t, std::string>> RejectionReasons(const SearchResult& result);

// Text lines (each ends in '\n'; "" when no candidate was rejected):
//   Rejected   N layouts by rule, M by the global batch; reasons by layouts:
//      <layouts>  <reason>           (at most `max_reasons` lines)
//                 ... and K more reasons (L layouts)
//   dockyard-plan search: error: <most common message> (<layouts> of <rejected> layouts)
// max_reasons >= 1.
std::string RejectionReasonsText(const SearchResult& result, size_t max_reasons = 5);

}  // namespace dockyard
