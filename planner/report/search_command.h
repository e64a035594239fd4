// `dockyard-plan search` as one library call: from the search options to the ranking, the
// explained layout, the redundant-experts re-rank and every document the command prints or writes
// (the CLI writes the files all-or-nothing and prints the text).
//
// The HTML page plots the Pareto front and the best max(kHtmlSearchRows, options.top) ranked
// layouts (HtmlSearchRows); the JSON report and the table keep the first options.top. A search that ranks nothing gives no documents:
// `empty_text` says why (search_space.h EmptySearchText) and the command exits 1.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "planner/base/json_util.h"
#include "planner/model/model_spec.h"
#include "planner/search/explain.h"
#include "planner/search/redundant_search.h"
#include "planner/search/search.h"
#include "planner/calibration/calibration.h"

namespace dockyard {

// Ranked layouts the HTML page plots beside the Pareto front: every ranked layout of DeepSeek-V3 on
// 2048 GPUs made a 14 MB page; the best 1000 show where the good layouts lie, and the front is kept
// whole (it is what a scatter of throughput against peak memory is read for).
constexpr int64_t kHtmlSearchRows = 1000;

// The rows of `ranked` (best first) the HTML page plots, in rank order: the first `rows`, and any
// later one on the Pareto front of throughput against peak memory (pareto.h ParetoFront).
std::vector<RankedLayout> HtmlSearchRows(const std::vector<RankedLayout>& ranked, int64_t rows);

struct SearchCommandRequest {
  std::string model_source;                          // the model file, or "<embedded ...>"
  Json provenance;                                   // Provenance of the inputs (provenance.h)
  std::optional<Calibration> calibration;            // already applied to the options; named in the header and JSON
  std::optional<LayoutQuery> explain;                // --explain (options.keep_all must be set with it)
  std::vector<RedundantCount> redundant_counts;      // --redundant-experts LIST
  std::optional<RedundantExpertsOptions> redundant;  // its policy, groups and choice; unset = no re-rank
  bool json = false, html = false;                   // which documents to assemble
  // The front end's warnings about its inputs (plan_command.h WarningText of each): the JSON
  // report's and the HTML page's `warnings`.
  std::vector<std::string> warnings;
};

struct SearchCommandResult {
  SearchResult result;  // top: the first options.top rows
  bool empty = false;   // nothing ranked
  std::string empty_text;
  Json header;
  std::optional<ExplainResult> explained;
  std::optional<RedundantSearchResult> redundant;
  std::string report_text, html_text;  // the documents asked for ("" otherwise)
  std::string text;                    // the terminal report: header, ranking, explain, re-rank
};

SearchCommandResult RunSearchCommand(const ModelSpec& model, SearchOptions s, const SearchCommandRequest& request);

}  // namespace dockyard
