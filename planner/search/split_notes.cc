// The Megatron split notes of a search's rows (see split_notes.h).
#include "planner/search/split_notes.h"

#include <map>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "planner/layout/megatron_split.h"

namespace dockyard {

namespace {

// The row's note sentence ("" when none): its training as the search formed it (CandidateTraining).
std::string RowReason(const ModelSpec& model, const SearchOptions& o, const RankedLayout& row) {
  TrainingConfig t = CandidateTraining(o.training, row.layout);
  t.run.vpp = row.vpp;
  return MegatronEvenSplitReason(t, model.num_hidden_layers, row.layout.dims.pp, o.convention == Convention::kMegatron);
}

}  // namespace

std::string SearchSplitNotes(const ModelSpec& model, const SearchOptions& o, const std::vector<RankedLayout>& rows,
                             const std::optional<RankedLayout>& explained, const std::vector<RankedLayout>& pareto) {
  if (o.convention != Convention::kMegatron) return "";
  struct Split {
    std::vector<size_t> rows, pareto;  // numbered from 1
    bool explained = false;
    std::string reason;
  };
  std::map<std::pair<int64_t, int64_t>, Split> by_split;  // (pp, vpp) -> the rows that need the note
  for (const auto& [list, numbers] : {std::make_pair(&rows, &Split::rows), std::make_pair(&pareto, &Split::pareto)}) {
    for (size_t i = 0; i < list->size(); ++i) {
      const RankedLayout& row = (*list)[i];
      const std::string reason = RowReason(model, o, row);
      if (reason.empty()) continue;
      Split& entry = by_split[{row.layout.dims.pp, row.vpp}];
      (entry.*numbers).push_back(i + 1);
      entry.reason = reason;
    }
  }
  // The explained layout joins the line of its (pp, vpp) when there is one, else gets its own below.
  if (explained) {
    auto it = by_split.find({explained->layout.dims.pp, explained->vpp});
    if (it != by_split.end()) it->second.explained = true;
  }
  const auto numbered = [](const char* what, const std::vector<size_t>& numbers) {
    return numbers.empty() ? std::string() : fmt::format("{}{} {}", what, numbers.size() > 1 ? "s" : "", fmt::join(numbers, ", "));
  };
  std::string out;
  for (const auto& [split, entry] : by_split) {
    std::vector<std::string> who;
    for (std::string part : {numbered("row", entry.rows), numbered("Pareto front row", entry.pareto),
                             std::string(entry.explained ? "explained layout" : "")}) {
      if (!part.empty()) who.push_back(part);
    }
    out += fmt::format("Note       {} (pp {}, vpp {}): {}\n", fmt::join(who, ", "), split.first, split.second, entry.reason);
  }
  if (explained && by_split.count({explained->layout.dims.pp, explained->vpp}) == 0) {
    const std::string reason = RowReason(model, o, *explained);
    if (!reason.empty()) {
      out += fmt::format("Note       explained layout (pp {}, vpp {}): {}\n", explained->layout.dims.pp, explained->vpp, reason);
    }
  }
  return out;
}

}  // namespace dockyard
