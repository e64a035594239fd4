// The HTML report's routing figures (html_internal.h): tokens per expert per sampled layer
// (fig-tokens: hot experts and the most-loaded EP rank marked) and the dispatch traffic of one EP
// group, source x destination rank or node pair (fig-traffic).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "planner/report/html_internal.h"
#include "planner/report/html_report.h"

namespace dockyard::html {
namespace {

// The dispatch matrix of one EP group, per rank or (past kHtmlMaxMatrixSide ranks) summed per
// node pair, with its hottest cell.
struct TrafficMatrix {
  bool per_node = false;
  std::vector<std::string> unit_name;  // [n]: "rank r" or "node k"
  int64_t n = 0;
  std::vector<int64_t> m;  // [n * n]: assignments source x destination
  std::vector<int> inter;  // [n * n]: 1 where source and destination sit on different nodes
  int64_t max = 0;
  size_t hot = 0;  // index of the first largest cell
};

TrafficMatrix AggregateTraffic(const std::vector<int64_t>& d, const std::vector<int64_t>& group, int64_t ep, int64_t gpn) {
  auto node_of = [&](int64_t i) { return group[i] / gpn; };
  TrafficMatrix tm;
  // Aggregate to node pairs when the group is too large to draw per rank.
  std::vector<int64_t> unit_of(ep);
  tm.per_node = ep > kHtmlMaxMatrixSide;
  if (tm.per_node) {
    std::map<int64_t, int64_t> index;
    for (int64_t i = 0; i < ep; ++i) {
      auto [it, inserted] = index.emplace(node_of(i), static_cast<int64_t>(index.size()));
      if (inserted) tm.unit_name.push_back(fmt::format("node {}", node_of(i)));
      unit_of[i] = it->second;
    }
  } else {
    for (int64_t i = 0; i < ep; ++i) {
      unit_of[i] = i;
      tm.unit_name.push_back(fmt::format("rank {}", group[i]));
    }
  }
  const int64_t n = static_cast<int64_t>(tm.unit_name.size());
  tm.n = n;
  tm.m.assign(n * n, 0);
  tm.inter.assign(n * n, 0);
  for (int64_t s = 0; s < ep; ++s) {
    for (int64_t t = 0; t < ep; ++t) {
      tm.m[unit_of[s] * n + unit_of[t]] += d[s * ep + t];
      tm.inter[unit_of[s] * n + unit_of[t]] = node_of(s) != node_of(t);
    }
  }
  for (size_t i = 0; i < tm.m.size(); ++i) {
    if (tm.m[i] > tm.max) {
      tm.max = tm.m[i];
      tm.hot = i;
    }
  }
  return tm;
}

// One coloured cell per (source, destination): blue within a node, orange across nodes.
void DrawTrafficCells(Page& p, const TrafficMatrix& tm, double cell, double left, double top) {
  const int64_t n = tm.n;
  for (int64_t s = 0; s < n; ++s) {
    for (int64_t t = 0; t < n; ++t) {
      const int64_t v = tm.m[s * n + t];
      const double f = tm.max > 0 ? static_cast<double>(v) / tm.max : 0;
      p.body += fmt::format(
          "<rect class=\"cell{}\" data-v=\"{}\" x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"{}\"><title>{} -&gt; "
          "{}: {} assignments ({})</title></rect>\n",
          static_cast<size_t>(s * n + t) == tm.hot ? " hot" : "", v, left + t * cell, top + s * cell, cell, cell,
          tm.inter[s * n + t] ? Orange(f) : Blue(f), tm.unit_name[s], tm.unit_name[t], v,
          tm.inter[s * n + t] ? "inter-node" : "intra-node");
    }
  }
}

// Node boundaries (per-rank view), the hottest pair outlined, row labels and the axis caption.
void DrawTrafficMarks(Page& p, const TrafficMatrix& tm, const std::vector<int64_t>& group, int64_t gpn, double cell, double left,
                      double top) {
  auto node_of = [&](int64_t i) { return group[i] / gpn; };
  const int64_t n = tm.n;
  const size_t hot = tm.hot;
  // Node boundaries of the destination and source ranks (per-rank view).
  if (!tm.per_node) {
    for (int64_t i = 1; i < n; ++i) {
      if (node_of(i) == node_of(i - 1)) continue;
      p.body += fmt::format(
          "<line class=\"nodeline\" x1=\"{:.1f}\" x2=\"{:.1f}\" y1=\"{:.1f}\" y2=\"{:.1f}\"/><line class=\"nodeline\" x1=\"{:.1f}\" "
          "x2=\"{:.1f}\" y1=\"{:.1f}\" y2=\"{:.1f}\"/>\n",
          left + i * cell, left + i * cell, top, top + n * cell, left, left + n * cell, top + i * cell, top + i * cell);
    }
  }
  // The hottest pair, outlined.
  p.body += fmt::format("<rect class=\"mark\" x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\"/>\n", left + (hot % n) * cell,
                        top + (hot / n) * cell, cell, cell);
  const int label_every = static_cast<int>(std::ceil(12.0 / cell));
  for (int64_t s = 0; s < n; s += label_every) {
    p.body += fmt::format("<text class=\"lab\" x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>\n", left - 4,
                          top + (s + 0.5) * cell + 4, tm.unit_name[s]);
  }
  p.body += fmt::format(
      "<text class=\"lab\" x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">destination (hottest pair {} -&gt; {}: {})</text>\n",
      left + n * cell / 2, top + n * cell + 16, tm.unit_name[hot / n], tm.unit_name[hot % n], tm.max);
}

}  // namespace

void TokensFigure(Page& p, const std::vector<std::vector<int64_t>>& rows, const std::vector<std::vector<int64_t>>& received,
                  const std::vector<std::string>& layer_names, const std::vector<int64_t>& owner, const std::string& note) {
  if (rows.empty() || rows[0].empty()) return;
  const int64_t E = static_cast<int64_t>(rows[0].size());
  int64_t max = 0;
  for (const auto& r : rows)
    for (int64_t v : r) max = std::max(max, v);
  const double plot_w = 720, ex = plot_w / E, rh = 22, left = 110, top = 8;
  const double h = top + rows.size() * (rh + 14) + 40;
  OpenFigure(p, "fig-tokens", fmt::format("Tokens per expert, {} layer(s) x {} experts", rows.size(), E), note);
  p.body += SvgOpen(left + plot_w + 20, h);
  const bool owned = static_cast<int64_t>(owner.size()) == E;
  for (size_t l = 0; l < rows.size(); ++l) {
    const double y = top + l * (rh + 14);
    // The hottest expert of the layer, and the five hottest (outlined).
    std::vector<int64_t> order(E);
    for (int64_t e = 0; e < E; ++e) order[e] = e;
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return rows[l][a] > rows[l][b]; });
    for (int64_t e = 0; e < E; ++e) {
      const int64_t v = rows[l][e];
      const bool hottest = e == order[0];
      p.body += fmt::format(
          "<rect class=\"cell{}\" data-v=\"{}\" x=\"{:.2f}\" y=\"{:.1f}\" width=\"{:.2f}\" height=\"{:.1f}\" fill=\"{}\"><title>{} expert "
          "{}{}: {} tokens</title></rect>\n",
          hottest ? " hot" : "", v, left + e * ex, y, ex, rh, Orange(max > 0 ? static_cast<double>(v) / max : 0), Esc(layer_names[l]), e,
          owned ? fmt::format(" (EP rank {})", owner[e]) : "", v);
    }
    for (int64_t k = 0; k < std::min<int64_t>(5, E); ++k) {
      const int64_t e = order[k];
      p.body += fmt::format("<rect class=\"mark\" x=\"{:.2f}\" y=\"{:.1f}\" width=\"{:.2f}\" height=\"{:.1f}\"/>\n", left + e * ex, y,
                            std::max(ex, 2.0), rh);
    }
    p.body += fmt::format("<text class=\"lab\" x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>\n", left - 4, y + rh / 2 + 4,
                          Esc(layer_names[l]));
    // The most-loaded EP rank: a bracket under its experts.
    if (l < received.size() && !received[l].empty()) {
      const auto it = std::max_element(received[l].begin(), received[l].end());
      const int64_t r = it - received[l].begin();
      if (owned) {
        int64_t lo = E, hi = -1;
        for (int64_t e = 0; e < E; ++e) {
          if (owner[e] == r) lo = std::min(lo, e), hi = std::max(hi, e);
        }
        if (hi >= lo) {
          p.body += fmt::format(
              "<rect class=\"rankmark\" x=\"{:.2f}\" y=\"{:.1f}\" width=\"{:.2f}\" height=\"4\"><title>most-loaded EP rank {}: {} "
              "rows</title></rect>\n",
              left + lo * ex, y + rh + 2, (hi - lo + 1) * ex, r, *it);
        }
      }
      p.body += fmt::format(
          "<text class=\"lab small\" x=\"{:.1f}\" y=\"{:.1f}\">EP rank {} receives the most: {} rows; hottest expert {} ({} "
          "tokens)</text>\n",
          left, y + rh + 13, r, *it, order[0], rows[l][order[0]]);
    }
  }
  p.body += "</svg>\n";
  auto legend = RampLegend(Orange, static_cast<double>(max), "tokens");
  legend.push_back({"#000000", "outline: 5 hottest experts"});
  legend.push_back({"#e15759", "bar: most-loaded EP rank"});
  Legend(p, legend);
  CloseFigure(p);
}

void TrafficFigure(Page& p, const Json& sample, const std::vector<int64_t>& group, int64_t gpn) {
  const int64_t ep = sample.at("ep").get<int64_t>();
  const std::vector<int64_t> d = sample.at("layers").at(0).at("dispatch").get<std::vector<int64_t>>();
  // One EP rank sends nothing to another: no traffic to draw.
  if (ep < 2 || static_cast<int64_t>(d.size()) != ep * ep || static_cast<int64_t>(group.size()) != ep) return;
  const TrafficMatrix tm = AggregateTraffic(d, group, ep, gpn);
  const int64_t n = tm.n;
  const double cell = std::clamp(560.0 / n, 4.0, 48.0), left = 90, top = 8;
  const double w = left + n * cell + 20, h = top + n * cell + 60;
  OpenFigure(p, "fig-traffic",
             fmt::format("Dispatch traffic of EP group 0 (sampled layer 0): token-expert assignments, source x destination {}",
                         tm.per_node ? "node" : "rank"),
             tm.per_node ? fmt::format("{} EP ranks: summed per node pair", ep)
                         : "rows: source rank; columns: destination rank (global ranks of meshes.sparse.groups.ep[0])");
  p.body += SvgOpen(w, h);
  DrawTrafficCells(p, tm, cell, left, top);
  DrawTrafficMarks(p, tm, group, gpn, cell, left, top);
  p.body += "</svg>\n";
  Legend(p, {{Blue(1.0), "intra-node (NVLink), max " + Num(static_cast<double>(tm.max))},
             {Orange(1.0), "inter-node (network)"},
             {Blue(0.0), "0"},
             {"#000000", "outline: hottest pair; grey lines: node boundaries"}});
  CloseFigure(p);
}

}  // namespace dockyard::html
