// The HTML report's search figure (html_internal.h SearchFigure, fig-search): tokens/s per GPU
// against peak memory of every ranked row on the page, the Pareto front as a line and the top
// rows highlighted; the first 20 rows as a table with the text rows' columns, the search's Pareto
// front as a table and the candidates counted by outcome.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "planner/model/global_batch.h"
#include "planner/report/html_internal.h"
#include "planner/search/pareto.h"
#include "planner/search/search.h"

namespace dockyard::html {
namespace {

// Points with a hover title: the first rows (and every top or front row), so that a large search
// stays a few MB.
constexpr int64_t kHtmlMaxTitledPoints = 3000;

// A ranked row's degrees, as the table's layout cell shows them: one short line, with the text
// table's column names (search.cc RankedLayoutsTable: dpr = dp_replicate, dps = dp_shard).
std::string LayoutDegrees(const Json& x) {
  return fmt::format("pp{} dpr{} dps{} cp{} tp{} ep{} etp{}{}", JsonText(x.at("pp")), JsonText(x.at("dp_replicate")),
                     JsonText(x.at("dp_shard")), JsonText(x.at("cp")), JsonText(x.at("tp")), JsonText(x.at("ep")), JsonText(x.at("etp")),
                     x.contains("efsdp") ? " efsdp" + JsonText(x.at("efsdp")) : "");
}

// A ranked row's degrees, dispatcher and searched settings (vpp, micro-batch size, recompute, dp
// sharding: rows that share degrees differ there), as a point's hover title names it.
std::string LayoutName(const Json& x) {
  std::string name = fmt::format("pp {} dp_replicate {} dp_shard {} cp {} tp {} ep {} etp {} {}", JsonText(x.at("pp")),
                                 JsonText(x.at("dp_replicate")), JsonText(x.at("dp_shard")), JsonText(x.at("cp")), JsonText(x.at("tp")),
                                 JsonText(x.at("ep")), JsonText(x.at("etp")), JsonText(x.at("dispatcher")));
  for (const char* k : {"vpp", "micro_batch_size", "recompute", "dp_sharding"}) {
    if (x.contains(k)) name += fmt::format(", {} {}", k, JsonText(x.at(k)));
  }
  return name;
}

// Geometry of the search scatter plot: peak memory (GiB) on x, tokens/s per GPU on y.
struct Scatter {
  double xmax, ymax, left = 80, top = 10, pw = 640, ph = 340;
  double X(double gib) const { return left + gib / xmax * pw; }
  double Y(double tps) const { return top + ph - tps / ymax * ph; }
};

// Grid lines, tick labels, axis titles and the budget line.
void ScatterAxes(Page& p, const Scatter& s, double budget_gib) {
  const double xs_step = TickStep(s.xmax, 6), ys_step = TickStep(s.ymax, 6);
  for (double t = 0; t <= s.xmax; t += xs_step) {
    const double x = s.X(t);
    p.body += fmt::format(
        "<line class=\"grid\" x1=\"{:.1f}\" x2=\"{:.1f}\" y1=\"{:.1f}\" y2=\"{:.1f}\"/><text class=\"lab\" x=\"{:.1f}\" y=\"{:.1f}\" "
        "text-anchor=\"middle\">{}</text>\n",
        x, x, s.top, s.top + s.ph, x, s.top + s.ph + 14, Num(t));
  }
  for (double t = 0; t <= s.ymax; t += ys_step) {
    const double y = s.Y(t);
    p.body += fmt::format(
        "<line class=\"grid\" x1=\"{:.1f}\" x2=\"{:.1f}\" y1=\"{:.1f}\" y2=\"{:.1f}\"/><text class=\"lab\" x=\"{:.1f}\" y=\"{:.1f}\" "
        "text-anchor=\"end\">{}</text>\n",
        s.left, s.left + s.pw, y, y, s.left - 4, y + 4, Num(t));
  }
  p.body += fmt::format("<text class=\"lab\" x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">peak memory per GPU (GiB)</text>\n",
                        s.left + s.pw / 2, s.top + s.ph + 32);
  p.body +=
      fmt::format("<text class=\"lab\" transform=\"translate(14,{:.1f}) rotate(-90)\" text-anchor=\"middle\">tokens/s per GPU</text>\n",
                  s.top + s.ph / 2);
  const double bx = s.X(budget_gib);
  p.body += fmt::format(
      "<line class=\"budget\" x1=\"{:.1f}\" x2=\"{:.1f}\" y1=\"{:.1f}\" y2=\"{:.1f}\"/><text class=\"lab\" x=\"{:.1f}\" y=\"{:.1f}\" "
      "text-anchor=\"end\">budget {:.1f} GiB</text>\n",
      bx, bx, s.top, s.top + s.ph, bx - 3, s.top + 12, budget_gib);
}

// One point per ranked row (best drawn last, on top), the front's line and the "#1" label.
void ScatterPoints(Page& p, const Scatter& s, const Json& top, const std::vector<double>& xs, const std::vector<double>& ys,
                   const std::vector<bool>& front, int64_t highlighted) {
  const int64_t n = static_cast<int64_t>(xs.size());
  // The front's line, by memory then throughput.
  std::vector<int64_t> order;
  for (int64_t i = 0; i < n; ++i) {
    if (front[i]) order.push_back(i);
  }
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return xs[a] < xs[b] || (xs[a] == xs[b] && ys[a] < ys[b]); });
  std::string line;
  for (int64_t i : order) line += fmt::format("{:.1f},{:.1f} ", s.X(xs[i]), s.Y(ys[i]));
  p.body += fmt::format("<polyline class=\"front\" points=\"{}\"/>\n", line);
  for (int64_t i = n; i-- > 0;) {
    const double x = s.X(xs[i]), y = s.Y(ys[i]);
    const bool hi = i < highlighted;
    // Hover titles on the first kHtmlMaxTitledPoints rows only: a large search stays a few MB.
    const bool titled = i < kHtmlMaxTitledPoints || hi || front[i];
    p.body += fmt::format("<circle class=\"pt{}{}\" data-row=\"{}\" cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"{}\" fill=\"{}\">", hi ? " top" : "",
                          front[i] ? " pareto" : "", i, x, y,
                          hi       ? 6
                          : titled ? 4
                                   : 3,
                          hi         ? "#e15759"
                          : front[i] ? "#f28e2b"
                                     : "#4e79a7");
    if (titled) {
      p.body +=
          fmt::format("<title>#{} {}: {:.0f} tokens/s/GPU, {:.2f} GiB, MFU {:.1f}%, dominant {}</title>", i + 1, Esc(LayoutName(top.at(i))),
                      ys[i], xs[i], 100 * top.at(i).at("mfu").get<double>(), Esc(JsonText(top.at(i).at("dominant_phase"))));
    }
    p.body += "</circle>\n";
    if (i == 0) p.body += fmt::format("<text class=\"lab\" x=\"{:.1f}\" y=\"{:.1f}\">#1</text>\n", x + 8, y - 6);
  }
}

// The cells a search row shows, as the text and JSON rows have them (search.cc
// RankedLayoutsTable): degrees, vpp, micro-batch size, micro-batches per step (M, or AxM for A
// accumulation steps of M), recompute, dp sharding, dispatcher (+ov with EP overlap), step time,
// vs best ("=" when tied with it, prediction_error.h), tokens/s per GPU, MFU, peak and headroom
// (budget - reserve - peak), the dominant phase.
constexpr const char* kSearchRowHeads =
    "<th>layout</th><th>vpp</th><th>mbs</th><th>micro-batches</th><th>recompute</th><th>dp sharding</th><th>dispatcher</th><th>step "
    "(ms)</th><th>vs best</th><th>tokens/s/GPU</th><th>MFU</th><th>peak GiB</th><th>headroom GiB</th><th>dominant phase</th>";

// The "vs best" cell of a JSON row (RankedLayoutToJson's vs_best), as the text rows write it.
std::string VersusBestCell(const Json& x) {
  if (!x.contains("vs_best")) return "";
  const Json& v = x.at("vs_best");
  VersusBest b;
  b.ratio = v.at("ratio").get<double>();
  b.tied = v.at("tied").get<bool>();
  return VersusBestText(b);
}

std::string SearchRowCells(const Json& x) {
  const int64_t a = x.value("grad_accumulation_steps", int64_t{1});
  const Json& m = x.value("num_microbatches", Json(nullptr));
  const std::string mb =
      m.is_number_integer() ? MicroBatchesText(x.value("pp", int64_t{1}), a, m.get<int64_t>()) : JsonText(m);  // search.cc's cell
  // deepep names its backend (moe_flex_dispatcher_backend) as the text rows do: deepep[hybridep].
  const std::string backend = x.contains("moe_flex_dispatcher_backend") ? "[" + JsonText(x.at("moe_flex_dispatcher_backend")) + "]" : "";
  const std::string dispatcher = JsonText(x.at("dispatcher")) + backend + (x.value("overlap_moe_ep_comm", false) ? "+ov" : "");
  return fmt::format(
      "<td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.1f}</td><td>{}</td><td>{:.0f}</td>"
      "<td>{:.1f}%</td><td>{:.2f}</td><td>{:.2f}</td><td>{}</td>",
      Esc(LayoutDegrees(x)), Esc(JsonText(x.value("vpp", Json(nullptr)))), Esc(JsonText(x.value("micro_batch_size", Json(nullptr)))),
      Esc(mb), Esc(JsonText(x.value("recompute", Json(nullptr)))), Esc(JsonText(x.value("dp_sharding", Json(nullptr)))), Esc(dispatcher),
      x.at("step_time_us").get<double>() / 1e3, Esc(VersusBestCell(x)), x.at("tokens_per_s_per_gpu").get<double>(),
      100 * x.at("mfu").get<double>(), Gib(x.at("peak_bytes").get<double>()), x.value("headroom_gib", 0.0),
      Esc(JsonText(x.at("dominant_phase"))));
}

// The first 20 ranked rows as a table, Pareto rows shaded.
void SearchTable(Page& p, const Json& top, const std::vector<bool>& front) {
  const int64_t n = static_cast<int64_t>(top.size());
  p.body +=
      "<p class=\"note\">The first 20 ranked layouts; shaded rows are on the Pareto front. \"vs best\": the step time against "
      "the best row, \"=\" when the 80 % interval of that difference reaches the best (a tie: the model cannot tell them apart; "
      "docs/fidelity.md).</p>\n";
  // In a scrolling box, cells on one line: the 14 columns are wider than the page (never clipped).
  p.body += fmt::format("<div class=\"scroll\"><table class=\"rows search-rows\"><tr><th>#</th>{}</tr>\n", kSearchRowHeads);
  for (int64_t i = 0; i < std::min<int64_t>(n, 20); ++i) {
    p.body += fmt::format("<tr{}><td>{}</td>{}</tr>\n", front[i] ? " class=\"pareto\"" : "", i + 1, SearchRowCells(top[i]));
  }
  p.body += "</table></div>\n";
}

// The search's Pareto front (the JSON's `pareto`, by peak ascending) and the candidates counted by
// outcome: enumerated = invalid by rule + global batch not divisible + over budget + ranked.
void SearchParetoAndCounts(Page& p, const Json& r) {
  if (r.contains("pareto") && r.at("pareto").is_array() && !r.at("pareto").empty()) {
    const Json& pareto = r.at("pareto");
    p.body += fmt::format(
        "<p class=\"note\">Pareto front of throughput against peak memory: {} layout(s) no other ranked layout beats on both "
        "(faster at the same or lower peak), by peak.</p>\n",
        pareto.size());
    p.body += fmt::format("<div class=\"scroll\"><table class=\"rows search-pareto\"><tr>{}</tr>\n", kSearchRowHeads);
    for (const Json& x : pareto) p.body += fmt::format("<tr>{}</tr>\n", SearchRowCells(x));
    p.body += "</table></div>\n";
  }
  p.body += "<p class=\"note\">Candidates by outcome.</p>\n<table class=\"rows search-counts\">\n";
  auto row = [&](const std::string& what, const Json& value) {
    p.body += fmt::format("<tr><td>{}</td><td>{}</td></tr>\n", Esc(what), Esc(JsonText(value)));
  };
  row("enumerated", r.at("enumerated"));
  row("invalid by rule", r.at("invalid"));
  row("global batch not divisible", r.value("not_divisible", Json(0)));
  // The limit in force, as the text's count line says it: the budget less the reserve (memory.h OverBudget).
  const double reserve = r.contains("training") ? r.at("training").value("memory_reserve_gib", 0.0) : 0.0;
  row(fmt::format("over the {:.1f} GiB budget{}", r.at("budget_gib").get<double>(),
                  reserve > 0 ? fmt::format(" less the {:.1f} GiB reserve", reserve) : ""),
      r.at("over_budget"));
  row("of which pruned by the static-memory bound", r.value("pruned", Json(0)));
  row("ranked", r.at("ranked"));
  p.body += "</table>\n";
}

}  // namespace

void SearchFigure(Page& p, const Json& r) {
  const Json& top = r.at("top");
  const int64_t n = static_cast<int64_t>(top.size());
  if (n == 0) return;
  const double budget = r.at("budget_gib").get<double>();
  std::vector<double> xs(n), ys(n);
  std::vector<int64_t> peak(n);
  Scatter s{budget, 0};
  for (int64_t i = 0; i < n; ++i) {
    peak[i] = top.at(i).at("peak_bytes").get<int64_t>();
    xs[i] = Gib(top[i].at("peak_bytes").get<double>());
    ys[i] = top[i].at("tokens_per_s_per_gpu").get<double>();
    s.xmax = std::max(s.xmax, xs[i]);
    s.ymax = std::max(s.ymax, ys[i]);
  }
  s.xmax *= 1.08;
  s.ymax *= 1.1;
  const std::vector<bool> front = ParetoFront(peak, ys);
  // The top rows: the report's --top (top_rows, when the page plots every ranked layout), else 5.
  const int64_t highlighted = std::min<int64_t>(r.value("top_rows", int64_t{5}), n);
  OpenFigure(
      p, "fig-search",
      fmt::format("Search: tokens/s per GPU against peak memory, {} ranked row(s) of {} ranked layouts", n, JsonText(r.at("ranked"))),
      "each point is a ranked layout (dockyard-plan search --html plots the Pareto front and the best 1000 or --top; the JSON keeps the "
      "first --top); hover for the layout");
  p.body += SvgOpen(s.left + s.pw + 30, s.top + s.ph + 44);
  ScatterAxes(p, s, budget);
  ScatterPoints(p, s, top, xs, ys, front, highlighted);
  p.body += "</svg>\n";
  Legend(p,
         {{"#e15759", fmt::format("top {} rows (#1 labelled; the first 20 in the table below)", highlighted)},
          {"#f28e2b", "on the Pareto front (line)"},
          {"#4e79a7", "other ranked rows"}},
         "dashed red line: memory budget");
  SearchTable(p, top, front);
  SearchParetoAndCounts(p, r);
  CloseFigure(p);
}

}  // namespace dockyard::html
