// The HTML report: one self-contained page (inline SVG and CSS, a few lines of inline script,
// nothing fetched when it is viewed) drawn from the same JSON documents that --json writes, so
// the pictures cannot disagree with the numbers. docs/html-report.md lists every figure, the
// JSON fields it draws and how large worlds are aggregated.
//
// Figures (each a <figure class="fig" id="fig-..."> with a caption and a legend):
//   fig-mesh-dense, fig-mesh-sparse  rank grid of each mesh, coloured by the groups of one axis
//                                    (a selector recolours it), node outlines every
//                                    training.gpus_per_node ranks;
//   fig-experts                      expert ownership, EP rank x expert (experts.ownership);
//   fig-tokens                       tokens per expert per sampled layer, hot experts and the
//                                    most-loaded EP rank marked (routing sample or run);
//   fig-memory                       memory per pp stage (worst rank) stacked by kind against
//                                    the budget (memory.stages, memory.budget_bytes);
//   fig-traffic                      dispatch assignments source x destination rank of one EP
//                                    group, intra- and inter-node cells in two colour scales;
//   fig-phases                       per-phase time of one MoE layer (predicted, and measured
//                                    beside predicted for dockyard-run);
//   fig-rank-phases                  per-rank time of the phases that depend on routing;
//   fig-pipeline                     one step's pipeline schedule as the cost model times it;
//   fig-search                       tokens/s per GPU against peak memory of every ranked row,
//                                    the Pareto front and the top rows highlighted.
// Figures whose data a report does not carry are left out.
//
// Sizes: rank grids draw one cell per rank up to kHtmlMaxRankCells ranks and one per node
// beyond; the traffic heatmap draws one cell per rank pair up to kHtmlMaxMatrixSide ranks and
// one per node pair beyond.
#pragma once

#include <cstdint>
#include <string>

#include "planner/base/json_util.h"
#include "planner/layout/plan.h"
#include "planner/routing/routing.h"

namespace dockyard {

constexpr int64_t kHtmlMaxRankCells = 4096;
constexpr int64_t kHtmlMaxMatrixSide = 64;
// Sampled layers drawn in the tokens-per-expert heatmap.
constexpr int64_t kHtmlMaxRoutingLayers = 8;

// The routing sample a plan or simulate page draws (tokens per expert, dispatch matrix), as
// {"ep", "top_k", "tokens_per_rank", "layers": [{"tokens_per_expert": [E], "dispatch": [ep*ep]
// row-major source -> destination EP rank, "received": [ep]}]} for the first
// min(layers, kHtmlMaxRoutingLayers) layers of `sample` (routing.h LayerRouting).
Json RoutingSampleToJson(const RoutingResult& sample);

// The sample a plan (or check) page draws when no routing was simulated: uniform routing, one
// MoE layer, seed 0, sampled as simulate samples it (SampleRoutingForPlan), as RoutingSampleToJson.
Json UniformRoutingSample(const Plan& plan);

// Renders one report as an HTML page. `report` is one of:
//   the plan report (PlanToJson, generator.name "dockyard-plan"), optionally with simulate's
//   keys merged in ("predicted", "cluster", "routing");
//   the search report (SearchResultToJson plus the CLI's keys: "top", "enumerated", ...);
//   the dockyard-run report (RunReportToJson, "kind" "dockyard_run").
// `routing_sample` is RoutingSampleToJson of the plan's routing, or null.
// Throws dockyard::Error when `report` is none of these or a field it draws has the wrong type
// (the message names the JSON pointer).
std::string ReportToHtml(const Json& report, const Json& routing_sample = Json());

}  // namespace dockyard
