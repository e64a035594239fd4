// search as one library call (see search_command.h).
#include "planner/report/search_command.h"


#include <algorithm>
#include <limits>
#include <set>
#include <sstream>
#include <utility>

#include "planner/model/muon.h"
#include "planner/model/precision.h"
#include "planner/report/header.h"
#include "planner/cost/compute_model.h"
#include "planner/report/html_report.h"
#include "planner/report/report.h"
#include "planner/search/pareto.h"
#include "planner/search/search_pins.h"
#include "planner/search/search_space.h"
#include "planner/search/split_notes.h"
#include "planner/cost/gemm_efficiency.h"
#include "planner/cost/kernels_model.h"
#include "planner/cost/network.h"

namespace dockyard {

std::vector<RankedLayout> HtmlSearchRows(const std::vector<RankedLayout>& ranked, int64_t rows) {
  const std::vector<bool> front = ParetoFrontOf(ranked);
  std::vector<RankedLayout> out;
  // Beyond the best `rows`, one row per front point (the best-ranked of layouts that tie on step
  // time and peak, as the JSON's pareto has them): a search over every vpp has such ties.
  std::set<std::pair<double, int64_t>> points;
  for (size_t i = 0; i < ranked.size(); ++i) {
    const std::pair<double, int64_t> point{ranked[i].step_time_us, ranked[i].peak_bytes};
    if (static_cast<int64_t>(i) < rows) {
      out.push_back(ranked[i]);
      if (front[i]) points.insert(point);
    } else if (front[i] && points.insert(point).second) {
      out.push_back(ranked[i]);
    }
  }
  return out;
}

SearchCommandResult RunSearchCommand(const ModelSpec& model, SearchOptions s, const SearchCommandRequest& r) {
  SearchCommandResult out;
  SearchResult& result = out.result;
  // The HTML page plots the front and the best rows (HtmlSearchRows); the JSON and the table keep the first --top.
  const int64_t top_rows = s.top;
  if (r.html) s.top = std::numeric_limits<int64_t>::max();
  if (r.explain) ValidateLayoutQuery(*r.explain, s);  // a query outside the pins or the rules fails before the search
  result = SearchLayouts(model, s);
  s.top = top_rows;
  std::optional<ExplainResult>& explained = out.explained;
  if (r.explain) explained = ExplainLayout(model, s, result, *r.explain);
  result.all.clear();
  SearchResult every = result;
  if (static_cast<int64_t>(result.top.size()) > top_rows) result.top.resize(top_rows);
  if (result.top.empty()) {
    // The same outcome in every output mode: the counts on stderr, exit 1, no file.
    out.empty = true;
    out.empty_text = EmptySearchText(result);
    return out;
  }
  // The header every report opens with (header.h); the routing is sampled per (ep, tokens, oep).
  ReportHeaderInputs header_inputs;
  header_inputs.command = "search";
  header_inputs.model_name = model.name;
  header_inputs.model_source = r.model_source;
  header_inputs.world_size = s.world_size;
  header_inputs.convention = s.convention;
  {
    // The convention's defaults every row takes (etp is searched, not defaulted); the bare selective
    // recompute's modules where selective is among the recomputes searched or pinned.
    TrainingConfig t = s.training;
    if (std::find(s.recomputes.begin(), s.recomputes.end(), Recompute::kSelective) != s.recomputes.end()) {
      t.recompute = Recompute::kSelective;
    }
    DefaultsApplied applied = ApplyConventionDefaults(s.convention, &t);
    if (!s.dp_shardings.empty()) applied.dp_sharding = false;  // searched, not defaulted
    header_inputs.defaults_applied = DefaultsAppliedLines(s.convention, applied, t, 1, model.moe.num_shared_experts > 0);
  }
  header_inputs.pinned = SearchPinsToJson(s);
  header_inputs.cluster = s.cluster.name;
  header_inputs.cluster_compute = s.cluster.compute_source;
  if (r.calibration) header_inputs.calibration = CalibrationRefToJson(*r.calibration);
  header_inputs.routing = RoutingSpecText(s.routing);
  header_inputs.seed = s.routing.seed;
  header_inputs.routing_layers = HeaderRoutingLayers(model, s);
  header_inputs.imbalance = s.training.imbalance;
  header_inputs.imbalance_per_layout = s.routing_sizes_memory;
  header_inputs.provenance = r.provenance;
  header_inputs.machine = MachineOf(s.cluster, SearchBudgetGib(s));  // the node size its layouts were counted by
  header_inputs.compute =
      ComputeModelToJson(s.compute_model, s.training, FlashCoreSpeedup(s.cluster, s.training, model),
                         UnfusedRotaryFactor(model, s.convention == Convention::kMegatron));
  out.header = ReportHeader(header_inputs);
  const Json& header = out.header;
  std::optional<RedundantSearchResult>& redundant = out.redundant;
  if (r.redundant) redundant = SearchRedundantExperts(model, s, result, r.redundant_counts, *r.redundant);
  // Megatron's refusals of the rows' even splits (split_notes.h): the text's Note lines, and the
  // JSON's and the page's `notes` (each line without its "Note" label).
  const std::string split_notes = SearchSplitNotes(model, s, result.top, explained ? explained->layout : std::nullopt, result.pareto);
  if (r.json || r.html) {
    DescribeRows(model, s, &result.top);  // the phase breakdown of each row
    Json j = SearchReportToJson(result, s, r.model_source, model.NumMoeLayers(), r.provenance);
    std::istringstream lines(split_notes);
    for (std::string line; std::getline(lines, line);) {
      const std::string label = "Note       ";
      if (line.rfind(label, 0) == 0) line.erase(0, label.size());
      if (!line.empty()) j["notes"].push_back(line);
    }
    if (!r.warnings.empty()) j["warnings"] = r.warnings;
    if (explained) j["explain"] = ExplainToJson(*explained);
    if (redundant) j["redundant_experts"] = RedundantSearchToJson(*redundant);
    if (r.calibration) j["calibration"] = CalibrationRefToJson(*r.calibration);
    j["header"] = header;
    if (r.json) out.report_text = j.dump(1, ' ', false, Json::error_handler_t::replace) + "\n";
    if (r.html) {
      Json page = j;
      Json rows = Json::array();
      for (const RankedLayout& x : HtmlSearchRows(every.top, std::max(kHtmlSearchRows, top_rows))) rows.push_back(RankedLayoutToJson(x));
      page["top"] = rows;
      page["top_rows"] = top_rows;
      out.html_text = ReportToHtml(page);
    }
  }
  out.text = ReportHeaderToText(header) + SearchResultToText(result);
  if (explained) out.text += ExplainToText(*explained);
  out.text += split_notes;
  if (redundant) out.text += RedundantSearchToText(*redundant);
  return out;
}

}  // namespace dockyard
