// The HTML report's mesh figures (html_internal.h): the rank grid of each mesh (fig-mesh-dense,
// fig-mesh-sparse), coloured by the groups of one axis with node outlines, and expert ownership
// over the sparse mesh's EP ranks (fig-experts).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "planner/report/html_internal.h"
#include "planner/report/html_report.h"

namespace dockyard::html {
namespace {

// Group index of every rank along every axis of a mesh, from meshes.<key>.groups.
struct MeshGroups {
  std::vector<std::string> axes;
  std::vector<int64_t> sizes;
  int64_t world = 1;
  std::map<std::string, std::vector<int64_t>> group_of;  // axis -> group index per rank
  std::map<std::string, int64_t> num_groups;             // axis -> number of groups
};

MeshGroups GroupsOf(const Json& mesh) {
  MeshGroups m;
  m.axes = mesh.at("axes").get<std::vector<std::string>>();
  m.sizes = mesh.at("sizes").get<std::vector<int64_t>>();
  for (int64_t s : m.sizes) m.world *= s;
  for (const auto& a : m.axes) {
    std::vector<int64_t> g(m.world, 0);
    const Json& groups = mesh.at("groups")[a];
    for (size_t i = 0; i < groups.size(); ++i) {
      for (const auto& r : groups[i]) g.at(r.get<int64_t>()) = static_cast<int64_t>(i);
    }
    m.group_of[a] = std::move(g);
    m.num_groups[a] = static_cast<int64_t>(groups.size());
  }
  return m;
}

// Default axis: ep (sparse mesh) or tp (dense mesh) when of size > 1, else the innermost axis of
// size > 1, else the last axis.
std::string DefaultAxis(const MeshGroups& m, const std::string& key) {
  const std::string preferred = key == "sparse" ? "ep" : "tp";
  for (size_t i = 0; i < m.axes.size(); ++i) {
    if (m.axes[i] == preferred && m.sizes[i] > 1) return preferred;
  }
  for (size_t i = m.axes.size(); i-- > 0;) {
    if (m.sizes[i] > 1) return m.axes[i];
  }
  return m.axes.back();
}

// The rank grid's geometry. Cells: one per rank up to kHtmlMaxRankCells ranks, else one per node,
// else one per block of nodes_per_cell nodes so that there are at most kHtmlMaxRankCells cells.
struct RankGrid {
  int64_t nodes, nodes_per_cell, unit, cells, cells_per_node, outlines, cols, rows;
  bool per_node;
  double cell, left = 64, top = 8;
};

RankGrid GridOf(int64_t world, int64_t gpn) {
  RankGrid g{};
  g.left = 64;
  g.top = 8;
  g.nodes = (world + gpn - 1) / gpn;
  g.nodes_per_cell = world <= kHtmlMaxRankCells ? 0 : (g.nodes + kHtmlMaxRankCells - 1) / kHtmlMaxRankCells;
  g.per_node = g.nodes_per_cell > 0;
  g.unit = g.per_node ? gpn * g.nodes_per_cell : 1;  // ranks per cell
  g.cells = (world + g.unit - 1) / g.unit;
  g.cells_per_node = g.per_node ? 1 : gpn;  // cells per outline
  g.outlines = g.per_node ? g.cells : g.nodes;
  const int64_t nodes_per_row = std::max<int64_t>(1, 64 / std::max<int64_t>(1, g.cells_per_node));
  g.cols = std::min(g.cells, nodes_per_row * g.cells_per_node);
  g.rows = (g.cells + g.cols - 1) / g.cols;
  g.cell = std::clamp(720.0 / g.cols, 6.0, 36.0);
  return g;
}

// The SVG body of the grid: row labels, one coloured cell per rank (or node block) and node outlines
// (a node never wraps a row: a row holds whole nodes; one outline per cell when cells are nodes).
void DrawRankGrid(Page& p, const RankGrid& gr, const std::vector<int64_t>& g, const std::string& axis, int64_t gpn) {
  const int label_every = static_cast<int>(std::ceil(12.0 / gr.cell));
  for (int64_t row = 0; row < gr.rows; ++row) {
    if (row % label_every == 0) {
      p.body += fmt::format("<text class=\"lab\" x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\">{} {}</text>\n", gr.left - 4,
                            gr.top + (row + 0.5) * gr.cell + 4, gr.per_node ? "node" : "rank",
                            row * gr.cols * std::max<int64_t>(1, gr.nodes_per_cell));
    }
  }
  for (int64_t c = 0; c < gr.cells; ++c) {
    const int64_t rank = c * gr.unit;
    const double x = gr.left + (c % gr.cols) * gr.cell, y = gr.top + (c / gr.cols) * gr.cell;
    p.body += fmt::format(
        "<rect class=\"r\" x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"{}\"><title>{} {}{}: {} group "
        "{}</title></rect>\n",
        x, y, gr.cell, gr.cell, kPalette[g[rank] % kPaletteSize], gr.per_node ? "node" : "rank", gr.per_node ? rank / gpn : rank,
        gr.per_node ? "" : fmt::format(" (node {})", rank / gpn), axis, g[rank]);
    // Rank numbers where the cells are wide enough for them.
    if (!gr.per_node && gr.cell >= 24) {
      p.body += fmt::format("<text class=\"lab cellno\" x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>\n", x + gr.cell / 2,
                            y + gr.cell / 2 + 4, rank);
    }
  }
  for (int64_t n = 0; n < gr.outlines; ++n) {
    const int64_t c0 = n * gr.cells_per_node;
    const int64_t span = std::min(gr.cells_per_node, gr.cells - c0);
    const double x = gr.left + (c0 % gr.cols) * gr.cell, y = gr.top + (c0 / gr.cols) * gr.cell;
    p.body += fmt::format("<rect class=\"node\" x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\"/>\n", x, y,
                          std::min<int64_t>(span, gr.cols) * gr.cell, gr.cell * ((span + gr.cols - 1) / gr.cols));
  }
}

// Group index per cell for every axis, for the selector (which also rewrites the hover titles and
// the legend), and the number of groups of each axis ("#n" keys).
std::string MeshScriptData(const MeshGroups& m, const RankGrid& gr, const std::string& key) {
  std::string data = fmt::format("\"{}\":{{", key);
  for (size_t i = 0; i < m.axes.size(); ++i) {
    data += fmt::format("{}\"{}\":[", i ? "," : "", m.axes[i]);
    const std::vector<int64_t>& ga = m.group_of.at(m.axes[i]);
    for (int64_t c = 0; c < gr.cells; ++c) data += fmt::format("{}{}", c ? "," : "", ga[c * gr.unit]);
    data += fmt::format("],\"#{}\":{}", m.axes[i], m.num_groups.at(m.axes[i]));
  }
  return data + "}";
}

}  // namespace

void MeshFigure(Page& p, const Json& mesh, const std::string& key, int64_t gpn) {
  const MeshGroups m = GroupsOf(mesh);
  const std::string axis = DefaultAxis(m, key);
  const RankGrid gr = GridOf(m.world, gpn);
  const double w = gr.left + gr.cols * gr.cell + 10, h = gr.top + gr.rows * gr.cell + 10;
  std::string title = fmt::format("{} mesh: {} ranks, axes (", JsonText(mesh.at("name")), m.world);
  for (size_t i = 0; i < m.axes.size(); ++i) title += fmt::format("{}{} {}", i ? ", " : "", m.axes[i], m.sizes[i]);
  title += fmt::format("), {} nodes of {} GPUs", gr.nodes, gpn);
  OpenFigure(p, "fig-mesh-" + key, title,
             !gr.per_node ? ""
             : gr.nodes_per_cell == 1
                 ? fmt::format("{} ranks: one cell per node of {} ranks, coloured by the group of its first rank", m.world, gpn)
                 : fmt::format("{} nodes: one cell per block of {} nodes ({} ranks), coloured by the group of its first rank", gr.nodes,
                               gr.nodes_per_cell, gr.unit));
  // Axis selector (the inline script recolours the cells).
  p.body += fmt::format("<label class=\"sel\">colour by the groups of axis <select data-mesh=\"{}\">", key);
  for (const auto& a : m.axes) {
    p.body += fmt::format("<option value=\"{}\"{}>{} ({} group(s))</option>", a, a == axis ? " selected=\"selected\"" : "", a,
                          m.num_groups.at(a));
  }
  p.body += "</select></label>\n";
  p.body += SvgOpen(w, h);
  DrawRankGrid(p, gr, m.group_of.at(axis), axis, gpn);
  p.body += "</svg>\n";
  const int64_t n = m.num_groups.at(axis);
  std::vector<std::pair<std::string, std::string>> items;
  for (int64_t i = 0; i < std::min<int64_t>(n, kPaletteSize); ++i) items.push_back({kPalette[i], fmt::format("{} group {}", axis, i)});
  Legend(p, items,
         fmt::format("{} group(s){}; black outline = one node of {} GPUs", n, n > kPaletteSize ? ", colours repeat every 12" : "", gpn));
  CloseFigure(p);
  p.script_data += (p.script_data.empty() ? "" : ",") + MeshScriptData(m, gr, key);
}

void ExpertsFigure(Page& p, const Json& experts) {
  const int64_t E = experts.at("num_experts").get<int64_t>();
  const int64_t ep = experts.at("ep").get<int64_t>();
  if (E < 1 || ep < 1) return;  // no routed experts: nothing to draw
  const double plot_w = 720;
  const double ex = plot_w / static_cast<double>(E);
  const double rh = std::clamp(360.0 / ep, 3.0, 20.0);
  const double left = 70, top = 8;
  const double w = left + plot_w + 20, h = top + ep * rh + 36;
  OpenFigure(
      p, "fig-experts",
      fmt::format("Expert ownership: {} EP ranks x {} routed experts ({} per EP rank)", ep, E, JsonText(experts.at("num_local_experts"))),
      "EP rank = coordinate on the sparse mesh's ep axis; its global ranks are meshes.sparse.groups.ep");
  p.body += SvgOpen(w, h);
  const int label_every = static_cast<int>(std::ceil(12.0 / rh));
  for (const auto& own : experts.at("ownership")) {
    const int64_t r = own.at("ep_rank").get<int64_t>();
    const std::vector<int64_t> ids = own.at("experts").get<std::vector<int64_t>>();
    if (ids.empty()) continue;
    // Ownership is a contiguous run per EP rank (Shard(0) on ep); draw each run of ids as one bar.
    size_t i = 0;
    while (i < ids.size()) {
      size_t j = i;
      while (j + 1 < ids.size() && ids[j + 1] == ids[j] + 1) ++j;
      p.body += fmt::format(
          "<rect class=\"own\" x=\"{:.2f}\" y=\"{:.2f}\" width=\"{:.2f}\" height=\"{:.2f}\" fill=\"{}\"><title>EP rank {}: experts "
          "{}-{}</title></rect>\n",
          left + ids[i] * ex, top + r * rh, (ids[j] - ids[i] + 1) * ex, rh, kPalette[r % kPaletteSize], r, ids[i], ids[j]);
      i = j + 1;
    }
    if (r % label_every == 0) {
      p.body += fmt::format("<text class=\"lab\" x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\">EP {}</text>\n", left - 4,
                            top + (r + 0.5) * rh + 4, r);
    }
  }
  const double step = TickStep(static_cast<double>(E), 8);
  for (double e = 0; e < E; e += step) {
    p.body += fmt::format("<text class=\"lab\" x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>\n", left + e * ex,
                          top + ep * rh + 14, Num(e));
  }
  p.body += fmt::format("<text class=\"lab\" x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">expert id</text>\n", left + plot_w / 2,
                        top + ep * rh + 30);
  p.body += "</svg>\n";
  Legend(p, {{kPalette[0], "EP rank 0"}, {kPalette[1], "EP rank 1"}},
         "one bar per EP rank over the experts it owns; colours repeat every 12 ranks");
  CloseFigure(p);
}

}  // namespace dockyard::html
