// The HTML report (see html_report.h): the page of one report, the figures each kind of report
// gets (drawn by the html_*.cc files, html_internal.h), its CSS and inline script; and the routing
// sample the plan and simulate pages draw.
#include "planner/report/html_report.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "planner/base/error.h"
#include "planner/report/html_internal.h"
#include "planner/cost/cost.h"
#include "planner/routing/plan_routing.h"

namespace dockyard {
namespace html {
namespace {

constexpr const char* kCss = R"(body{font:13px/1.4 system-ui,sans-serif;margin:16px;color:#222;max-width:1000px}
h1{font-size:20px;margin:0 0 8px}
.nums{display:flex;flex-wrap:wrap;gap:8px;margin-bottom:8px}
.num{border:1px solid #ddd;border-radius:4px;padding:4px 8px;min-width:110px}
.num b{display:block;font-size:16px}.num span{color:#666;font-size:11px}
table{border-collapse:collapse;margin:6px 0}th,td{border-bottom:1px solid #eee;padding:2px 6px;text-align:left;vertical-align:top}
.inputs td{word-break:break-all;font-size:12px}
figure.fig{margin:18px 0;padding:8px;border:1px solid #ddd;border-radius:6px;overflow-x:auto}
figcaption{font-weight:600;margin-bottom:4px}
.note{color:#555;font-size:12px;margin:2px 0 6px}
.legend{display:flex;flex-wrap:wrap;gap:10px;font-size:12px;margin-top:4px}
.key i{display:inline-block;width:12px;height:12px;margin-right:4px;vertical-align:-2px;border:1px solid #999}
svg text.lab{font-size:11px;fill:#333}svg text.small{font-size:10px}svg text.inv{fill:#fff}
svg .grid{stroke:#e6e6e6}svg rect.r{stroke:#fff;stroke-width:0.6}svg text.cellno{fill:#fff;font-size:10px}svg .node{fill:none;stroke:#000;stroke-width:1.5}
svg .budget{stroke:#d62728;stroke-width:2;stroke-dasharray:6 3}
svg .mark{fill:none;stroke:#000;stroke-width:1.5}svg .rankmark{fill:#e15759}
svg .nodeline{stroke:#555;stroke-width:0.8}svg .whisk{stroke:#000;stroke-width:1.5}svg .front{fill:none;stroke:#f28e2b;stroke-width:2}
svg .pt{stroke:#fff;stroke-width:1}tr.pareto td{background:#fff4e6}
.scroll{overflow-x:auto;max-width:100%}table.rows td,table.rows th{white-space:nowrap}
)";

// The palette (kPalette) as the script's array P.
std::string PaletteScript() {
  std::string out = "var P=[";
  for (int i = 0; i < kPaletteSize; ++i) out += fmt::format("{}\"{}\"", i ? "," : "", kPalette[i]);
  return out + "];\n";
}

// Recolours a rank grid when its axis selector changes (no network, no external code), with the
// palette P (PaletteScript) and the group data G (Page::script_data).
constexpr const char* kScript =
    R"(document.querySelectorAll("select[data-mesh]").forEach(function(s){s.addEventListener("change",function(){
var m=s.getAttribute("data-mesh"),a=s.value,g=G[m][a],n=G[m]["#"+a],f=document.getElementById("fig-mesh-"+m);
f.querySelectorAll("rect.r").forEach(function(e,i){e.setAttribute("fill",P[g[i]%12]);
var t=e.querySelector("title");if(t){var x=t.textContent;t.textContent=x.substring(0,x.lastIndexOf(": ")+2)+a+" group "+g[i];}});
var l=f.querySelector("div.legend"),k=l.querySelectorAll("span.key"),o=k[k.length-1].textContent,h="";
for(var i=0;i<Math.min(n,12);i++){h+='<span class="key"><i style="background:'+P[i]+'"></i>'+a+' group '+i+'</span>';}
l.innerHTML=h+'<span class="key">'+n+' group(s)'+(n>12?', colours repeat every 12':'')+o.substring(o.indexOf(";"))+'</span>';});});
)";

// The kind of page `r` is: "run", "search", "simulate" or "plan".
std::string Kind(const Json& r) {
  if (r.value("kind", Json("")) == "dockyard_run") return "run";
  if (r.contains("top") && r.contains("enumerated")) return "search";
  if (r.contains("meshes") && r.contains("predicted")) return "simulate";
  if (r.contains("meshes")) return "plan";
  throw Error("--html: the report is neither a plan, simulate, search nor dockyard-run report (no 'meshes', 'top' or 'kind')");
}

// The figures of a plan (and of a simulate report): the two meshes, expert ownership, tokens per
// expert of the routing sample, memory and the sampled traffic.
void PlanFigures(Page& p, const Json& r, const Json& sample, int64_t gpn) {
  MeshFigure(p, r.at("meshes").at("dense"), "dense", gpn);
  MeshFigure(p, r.at("meshes").at("sparse"), "sparse", gpn);
  ExpertsFigure(p, r.at("experts"));
  if (sample.is_object() && sample.contains("layers")) {
    std::vector<std::vector<int64_t>> rows, received;
    std::vector<std::string> names;
    for (size_t l = 0; l < sample.at("layers").size(); ++l) {
      rows.push_back(sample.at("layers")[l].at("tokens_per_expert").get<std::vector<int64_t>>());
      received.push_back(sample.at("layers")[l].at("received").get<std::vector<int64_t>>());
      names.push_back(fmt::format("sampled layer {}", l));
    }
    std::vector<int64_t> owner(r.at("experts").at("num_experts").get<int64_t>(), -1);
    for (const auto& own : r.at("experts").at("ownership")) {
      for (const auto& e : own.at("experts")) owner.at(e.get<int64_t>()) = own.at("ep_rank").get<int64_t>();
    }
    TokensFigure(p, rows, received, names, owner,
                 fmt::format("routing {}: {} tokens per EP rank, top_k {}", JsonText(r.value("routing", Json("uniform (sampled, seed 0)"))),
                             JsonText(sample.at("tokens_per_rank")), JsonText(sample.at("top_k"))));
  }
  if (r.contains("memory")) MemoryFigure(p, r.at("memory"));
  if (sample.is_object() && sample.contains("layers") && !sample.at("layers").empty()) {
    TrafficFigure(p, sample, r.at("meshes").at("sparse").at("groups").at("ep").at(0).get<std::vector<int64_t>>(), gpn);
  }
}

// The predicted phases of a simulate report: per phase, per EP rank and the pipeline.
void SimulateFigures(Page& p, const Json& r) {
  const Json& pred = r.at("predicted");
  std::vector<PhaseRow> rows;
  std::map<std::string, size_t> at;
  for (const auto& ph : pred.at("phases")) {
    if (ph.at("layer_kind") != "moe") continue;
    const std::string name = ph.at("name").get<std::string>();
    if (!at.count(name)) {
      at[name] = rows.size();
      rows.push_back({name, {0, 0}, {}, {}});
    }
    PhaseRow& row = rows[at[name]];
    const size_t s = ph.at("direction") == "forward" ? 0 : 1;
    row.values[s] = ph.at("time_us").get<double>();
    if (s == 0 && ph.contains("per_ep_rank_us") && !ph.at("per_ep_rank_us").empty()) {
      const auto v = ph.at("per_ep_rank_us").get<std::vector<double>>();
      row.lo = {*std::min_element(v.begin(), v.end())};
      row.hi = {*std::max_element(v.begin(), v.end())};
    }
  }
  PhaseFigure(p,
              fmt::format("Predicted time per phase of one MoE layer, one micro-batch (slowest rank), MoE layer {:.1f} us",
                          pred.at("moe_layer_us").get<double>()),
              pred.contains("ep_overlap") ? "predicted.phases with layer_kind moe. " + EpOverlapText(EpOverlapFromJson(pred.at("ep_overlap")))
                                          : std::string("predicted.phases with layer_kind moe"),
              rows, {"forward", "backward"});
  // Routing-dependent forward phases per EP rank.
  std::vector<std::string> phases;
  std::vector<std::vector<double>> per;
  for (const auto& ph : pred.at("phases")) {
    if (ph.at("layer_kind") != "moe" || ph.at("direction") != "forward" || !ph.contains("per_ep_rank_us")) continue;
    const auto v = ph.at("per_ep_rank_us").get<std::vector<double>>();
    if (per.empty()) per.assign(v.size(), {});
    if (v.size() != per.size()) continue;
    phases.push_back(ph.at("name").get<std::string>());
    for (size_t i = 0; i < v.size(); ++i) per[i].push_back(v[i]);
  }
  std::vector<std::string> names;
  for (size_t i = 0; i < per.size(); ++i) names.push_back(fmt::format("EP {}", i));
  RankPhaseFigure(p, "Predicted routing-dependent phases per EP rank (MoE layer forward, mean over sampled layers)", names, phases, per);
  const Json& model = r.at("model");
  const int64_t moe_layers = model.value("num_moe_layers", int64_t{0});
  const int64_t dense_layers = model.value("num_hidden_layers", int64_t{0}) - moe_layers;
  PipelineFigure(p, pred, r.at("parallel").at("pp").get<int64_t>(), r.at("training").value("vpp", int64_t{1}),
                 r.at("training").at("num_microbatches").get<int64_t>(),
                 ForwardShare(pred, moe_layers, dense_layers));
}

// The measured figures of a dockyard-run report: tokens per expert, phases, phases per rank.
void RunFigures(Page& p, const Json& r) {
  const std::vector<int64_t> tpe = r.at("tokens_per_expert").get<std::vector<int64_t>>();
  std::vector<int64_t> received;
  for (const auto& pr : r.at("per_rank")) received.push_back(pr.at("received_rows").get<int64_t>());
  const int64_t ep = r.at("layout").at("ep").get<int64_t>();
  // Rows received per EP rank: the run's ranks in EP order when one EP group was run.
  if (static_cast<int64_t>(received.size()) != ep) received.clear();
  TokensFigure(p, {tpe}, {received}, {fmt::format("layer {}", JsonText(r.at("model").at("layer")))}, {},
               fmt::format("routing {}: measured tokens per expert of the layer run", JsonText(r.at("run").at("routing"))));
  std::vector<PhaseRow> rows;
  bool has_pred = false;
  for (const auto& ph : r.at("measured").at("phases")) {
    PhaseRow row{ph.at("name").get<std::string>(), {ph.at("time_us").get<double>()}, {}, {}};
    if (ph.contains("predicted_us")) {
      row.values.push_back(ph.at("predicted_us").get<double>());
      has_pred = true;
    }
    rows.push_back(row);
  }
  if (has_pred) {
    for (auto& row : rows) row.values.resize(2, 0.0);
  }
  PhaseFigure(p, "Measured time per phase of the MoE layer (forward, slowest rank)" + std::string(has_pred ? ", predicted beside it" : ""),
              has_pred ? "predicted: the plan file's predicted.phases (MoE layer forward); 0 where the plan predicts no such phase" : "",
              rows, has_pred ? std::vector<std::string>{"measured", "predicted"} : std::vector<std::string>{"measured"});
  std::vector<std::string> names, phases;
  std::vector<std::vector<double>> per;
  for (const auto& pr : r.at("per_rank")) {
    names.push_back(fmt::format("rank {}", JsonText(pr.at("rank"))));
    std::vector<double> v;
    if (phases.empty()) {
      // In the pipeline's order (measured.phases), not the object's alphabetical one.
      for (const auto& ph : r.at("measured").at("phases")) phases.push_back(ph.at("name").get<std::string>());
    }
    for (const auto& ph : phases) v.push_back(pr.at("phases_us").value(ph, 0.0));
    per.push_back(v);
  }
  RankPhaseFigure(p, "Measured phases per rank (forward, one MoE layer)", names, phases, per);
}

// The page of report `r` (routing sample `sample`, or null): the header, the figures of its
// kind, the CSS and the script.
std::string Render(const Json& r, const Json& sample) {
  const std::string kind = Kind(r);
  Page p;
  Header(p, r, kind);
  const int64_t gpn = r.contains("training") ? r.at("training").value("gpus_per_node", int64_t{8}) : 8;
  if (gpn < 1) throw Error(fmt::format("--html: /training/gpus_per_node must be >= 1, got {}", gpn));
  if (kind == "plan" || kind == "simulate") PlanFigures(p, r, sample, gpn);
  if (kind == "simulate") SimulateFigures(p, r);
  if (kind == "search") SearchFigure(p, r);
  if (kind == "run") RunFigures(p, r);
  std::string out;
  out.reserve(p.body.size() + p.script_data.size() + 4096);
  out += "<!DOCTYPE html>\n<html xmlns=\"http://www.w3.org/1999/xhtml\" lang=\"en\"><head><meta charset=\"utf-8\"/>\n";
  out += fmt::format("<title>dockyard {} report</title>\n<style>\n{}</style></head>\n<body>\n", kind, kCss);
  out += p.body;
  out += "<script>\nvar G={" + p.script_data + "};\n" + PaletteScript() + kScript + "</script>\n</body></html>\n";
  return out;
}

}  // namespace
}  // namespace html

Json RoutingSampleToJson(const RoutingResult& sample) {
  Json layers = Json::array();
  for (size_t l = 0; l < sample.layers.size() && static_cast<int64_t>(l) < kHtmlMaxRoutingLayers; ++l) {
    const LayerRouting& lr = sample.layers[l];
    layers.push_back({{"tokens_per_expert", lr.tokens_per_expert}, {"dispatch", lr.dispatch}, {"received", lr.received}});
  }
  return Json{{"ep", sample.ep}, {"top_k", sample.top_k}, {"tokens_per_rank", sample.tokens_per_rank}, {"layers", layers}};
}

Json UniformRoutingSample(const Plan& plan) {
  if (plan.model.NumMoeLayers() == 0) return Json();
  return RoutingSampleToJson(SampleRoutingForPlan(plan, ParseRoutingSpec("uniform"), 1));
}

std::string ReportToHtml(const Json& report, const Json& routing_sample) {
  try {
    return html::Render(report, routing_sample);
  } catch (const Json::exception& e) {
    throw Error(fmt::format("--html: the report lacks a field the page draws or has the wrong type: {}", e.what()));
  }
}

}  // namespace dockyard
