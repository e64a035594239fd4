// The Megatron split notes of a search's rows (see split_notes.h).
#include "planner/search/split_notes.h"

#include <map>
#include <utility>

#include <fmt/format.h>

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
                             const std::optional<RankedLayout>& explained) {
  if (o.convention != Convention::kMegatron) return "";
  std::map<std::pair<int64_t, int64_t>, std::pair<std::string, std::string>> by_split;  // (pp, vpp) -> (row numbers, reason)
  for (size_t i = 0; i < rows.size(); ++i) {
    const std::string reason = RowReason(model, o, rows[i]);
    if (reason.empty()) continue;
    auto& entry = by_split[{rows[i].layout.dims.pp, rows[i].vpp}];
    entry.first += (entry.first.empty() ? "" : ", ") + std::to_string(i + 1);
    entry.second = reason;
  }
  // The explained layout joins the line of its (pp, vpp) when there is one, else gets its own below.
  if (explained) {
    auto it = by_split.find({explained->layout.dims.pp, explained->vpp});
    if (it != by_split.end()) it->second.first += ", explained layout";
  }
  std::string out;
  for (const auto& [split, entry] : by_split) {
    out += fmt::format("Note       row{} {} (pp {}, vpp {}): {}\n", entry.first.find(',') == std::string::npos ? "" : "s", entry.first,
                       split.first, split.second, entry.second);
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
