// Package-private pieces of the HTML report (html_report.h); only the html_report library's
// sources include this header. It declares the page being built and the helpers every figure
// uses (escaping, number and colour formats, the figure frame: caption, note, legend), defined in
// html_page.cc, and one entry point per part of the page, each defined in the file that draws it:
//   html_header.cc    the header: headline numbers and the table of inputs;
//   html_mesh.cc      fig-mesh-dense, fig-mesh-sparse (rank grids) and fig-experts (ownership);
//   html_routing.cc   fig-tokens (tokens per expert) and fig-traffic (dispatch heatmap);
//   html_memory.cc    fig-memory (memory per pipeline stage);
//   html_phases.cc    fig-phases (time per phase) and fig-rank-phases (phases per rank);
//   html_pipeline.cc  fig-pipeline (one step's schedule);
//   html_search.cc    fig-search (scatter, ranked rows, Pareto front, counts by outcome).
// html_report.cc assembles the page: which of these each report kind gets, CSS and script.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "planner/base/json_util.h"

namespace dockyard::html {

// ---------------------------------------------------------------------------------------------
// html_page.cc: the page and the helpers every figure uses.

// Categorical palette for groups (Tableau 10 plus two): adjacent groups always differ. The rank
// grids' inline script recolours with the same palette (html_report.cc writes it from this one).
inline constexpr const char* kPalette[] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948",
                                           "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac", "#17becf", "#8c564b"};
inline constexpr int kPaletteSize = 12;

// The page being built: the figures' markup, and the data the inline script needs.
struct Page {
  std::string body;
  std::string script_data;  // JSON object literal members for the inline script
};

// `s` with the five XML special characters (& < > " ') escaped, for text and attribute values.
std::string Esc(const std::string& s);

// A JSON value as text: a string unquoted, anything else as JSON.
std::string JsonText(const Json& v);

// Sequential colour scales from near-white (t = 0) to dark blue or dark orange (t = 1); t is
// clamped to [0, 1].
std::string Blue(double t);
std::string Orange(double t);

// Round tick step (1, 2 or 5 times a power of ten) for an axis from 0 to `max` with about `n` ticks.
double TickStep(double max, int n);

// A number for a label: 3 significant digits when very large or small, else whole or 2 decimals.
std::string Num(double v);

// Bytes in GiB.
double Gib(double bytes);

// An axis tick of a time axis whose largest value is max_us: in ms from 10 ms up, else in us.
std::string TimeTick(double us, double max_us);

// Opens a figure <figure class="fig" id="`id`"> with its caption and, when not empty, a note.
void OpenFigure(Page& p, const std::string& id, const std::string& title, const std::string& note);
// A figure's legend: one colour key per (colour, label) item, then `extra` as text when not empty.
void Legend(Page& p, const std::vector<std::pair<std::string, std::string>>& items, const std::string& extra = "");
// Closes the figure OpenFigure opened.
void CloseFigure(Page& p);

// The opening <svg> tag of a w x h figure.
std::string SvgOpen(double w, double h);

// Sequential colour legend of a heatmap: `scale` at 0, 1/2, 1 of `max`.
std::vector<std::pair<std::string, std::string>> RampLegend(std::string (*scale)(double), double max, const std::string& what);

// ---------------------------------------------------------------------------------------------
// html_header.cc

// The page header: title, headline numbers (the fields the JSON report and the terminal table
// give) and the table of inputs (model, degrees, training, cluster, routing, run, generator,
// command line, input files), each when report `r` of kind `kind` has it.
void Header(Page& p, const Json& r, const std::string& kind);

// ---------------------------------------------------------------------------------------------
// html_mesh.cc

// fig-mesh-`key`: the rank grid of one mesh (meshes.<key>, key "dense" or "sparse"), coloured by
// the groups of one axis (an inline-script selector recolours it), one outline per node of `gpn`
// ranks; adds the selector's group data to p.script_data.
void MeshFigure(Page& p, const Json& mesh, const std::string& key, int64_t gpn);

// fig-experts: expert ownership, EP rank x expert id (experts.ownership); nothing without routed experts.
void ExpertsFigure(Page& p, const Json& experts);

// ---------------------------------------------------------------------------------------------
// html_routing.cc

// fig-tokens: rows[l][e] tokens of expert e in layer l (named layer_names[l]); `received[l][r]`
// rows per EP rank (may be empty); `owner[e]` the EP rank owning expert e (from
// experts.ownership; empty when the report does not say); `note` under the caption.
void TokensFigure(Page& p, const std::vector<std::vector<int64_t>>& rows, const std::vector<std::vector<int64_t>>& received,
                  const std::vector<std::string>& layer_names, const std::vector<int64_t>& owner, const std::string& note);

// fig-traffic: the dispatch matrix of sampled layer 0 of routing sample `sample` (RoutingSampleToJson)
// for the EP group of global ranks `group`, per rank pair or, past kHtmlMaxMatrixSide ranks, per node pair.
void TrafficFigure(Page& p, const Json& sample, const std::vector<int64_t>& group, int64_t gpn);

// ---------------------------------------------------------------------------------------------
// html_memory.cc

// fig-memory: memory per pipeline stage (its worst rank), the five kinds stacked, against the
// budget when the report has one (memory.stages, memory.budget_bytes).
void MemoryFigure(Page& p, const Json& memory);

// ---------------------------------------------------------------------------------------------
// html_phases.cc

// One phase of the phase bars: its time per series, and optionally the per-rank range of series 0.
struct PhaseRow {
  std::string name;
  std::vector<double> values;  // one per series
  std::vector<double> lo, hi;  // optional per-rank range of series 0
};

// fig-phases: one bar per series for each phase row (a log axis when two series differ by more
// than 50x), whiskers where a row has a range.
void PhaseFigure(Page& p, const std::string& title, const std::string& note, const std::vector<PhaseRow>& rows,
                 const std::vector<std::string>& series);

// fig-rank-phases: per-rank stacked time of phases (us[rank][phase], in us).
void RankPhaseFigure(Page& p, const std::string& title, const std::vector<std::string>& rank_names, const std::vector<std::string>& phases,
                     const std::vector<std::vector<double>>& us);

// ---------------------------------------------------------------------------------------------
// html_pipeline.cc

// The forward share of a layer's forward + backward time, from the predicted per-layer phases
// (predicted.phases: time_us per layer and micro-batch, by layer kind and direction), the layer
// kinds weighted by how many layers of each the model has. 0.5 when the phases say nothing.
double ForwardShare(const Json& predicted, int64_t moe_layers, int64_t dense_layers);

// fig-pipeline: one step's schedule as the cost model times it (report.predicted), each slot
// split forward / backward by `forward_share`.
void PipelineFigure(Page& p, const Json& predicted, int64_t pp, int64_t vpp, int64_t microbatches, double forward_share);

// ---------------------------------------------------------------------------------------------
// html_search.cc

// fig-search: the search report's ranked rows (r.top) as tokens/s per GPU against peak memory,
// the Pareto front and the top rows highlighted; the first 20 rows as a table, the search's
// Pareto front as a table and the candidates counted by outcome. Nothing when no row was ranked.
void SearchFigure(Page& p, const Json& r);

}  // namespace dockyard::html
