// The Megatron split notes of a search's rows (layout/megatron_split.h): which listed layouts
// Megatron would refuse without a split flag, and the flag that reproduces dockyard's even split.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "planner/model/model_spec.h"
#include "planner/search/search.h"

namespace dockyard {

// One "Note       rows R1, R2, Pareto front rows P1, P2 (pp P, vpp V): <MegatronEvenSplitReason>"
// line per (pp, vpp) of the ranked `rows` and of the `pareto` front's rows (each numbered from 1 in
// its own table) that needs one, then "Note       explained layout (pp P, vpp V): ..." for
// `explained` when it needs one; when a row line has its (pp, vpp), that line ends its list with
// "explained layout" instead. "" for the torchtitan convention or when none needs one.
std::string SearchSplitNotes(const ModelSpec& model, const SearchOptions& options, const std::vector<RankedLayout>& rows,
                             const std::optional<RankedLayout>& explained, const std::vector<RankedLayout>& pareto = {});

}  // namespace dockyard
