// The HTML report (see html_report.h): a page of inline SVG figures drawn from a report's JSON.
#include "planner/report/html_report.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "planner/base/error.h"
#include "planner/model/global_batch.h"
#include "planner/report/report.h"
#include "planner/cost/cost.h"
#include "planner/search/pareto.h"
#include "planner/routing/plan_routing.h"

namespace dockyard {
namespace {

// Categorical palette for groups (Tableau 10 plus two): adjacent groups always differ.
constexpr const char* kPalette[] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948",
                                    "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac", "#17becf", "#8c564b"};
constexpr int kPaletteSize = 12;
// Memory kinds in stacking order (memory.stages[] fields) and their colours.
constexpr const char* kMemoryKinds[] = {"params_bytes", "grads_bytes", "optimizer_bytes", "activations_bytes", "comm_buffers_bytes"};
constexpr const char* kMemoryColours[] = {"#4e79a7", "#59a14f", "#edc948", "#f28e2b", "#b07aa1"};

std::string Esc(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string JsonText(const Json& v) {
  return v.is_string() ? v.get<std::string>() : v.dump();
}

// A colour on a sequential scale from near-white (t = 0) to `dark` (t = 1).
std::string Ramp(double t, int r1, int g1, int b1) {
  t = std::clamp(t, 0.0, 1.0);
  const int r0 = 247, g0 = 251, b0 = 255;
  auto mix = [t](int a, int b) { return static_cast<int>(std::lround(a + (b - a) * t)); };
  return fmt::format("#{:02x}{:02x}{:02x}", mix(r0, r1), mix(g0, g1), mix(b0, b1));
}
std::string Blue(double t) {
  return Ramp(t, 8, 48, 107);
}
std::string Orange(double t) {
  return Ramp(t, 127, 39, 4);
}

// Round tick step for an axis from 0 to `max` with about `n` ticks.
double TickStep(double max, int n) {
  if (max <= 0) return 1;
  const double raw = max / n;
  const double p = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (m * p >= raw) return m * p;
  }
  return 10 * p;
}

std::string Num(double v) {
  if (v != 0 && (std::fabs(v) >= 1e6 || std::fabs(v) < 1e-2)) return fmt::format("{:.3g}", v);
  if (std::fabs(v - std::round(v)) < 1e-9) return fmt::format("{:.0f}", v);
  return fmt::format("{:.2f}", v);
}

double Gib(double bytes) {
  return bytes / 1073741824.0;
}

// An axis tick of a time axis whose largest value is max_us: in ms from 10 ms up, else in us.
std::string TimeTick(double us, double max_us) {
  return max_us >= 1e4 ? Num(us / 1e3) + " ms" : Num(us) + " us";
}

struct Page {
  std::string body;
  std::string script_data;  // JSON object literal members for the inline script
};

void OpenFigure(Page& p, const std::string& id, const std::string& title, const std::string& note) {
  p.body += fmt::format("<figure class=\"fig\" id=\"{}\"><figcaption>{}</figcaption>\n", id, Esc(title));
  if (!note.empty()) p.body += fmt::format("<p class=\"note\">{}</p>\n", Esc(note));
}
void Legend(Page& p, const std::vector<std::pair<std::string, std::string>>& items, const std::string& extra = "") {
  p.body += "<div class=\"legend\">";
  for (const auto& [colour, label] : items) {
    p.body += fmt::format("<span class=\"key\"><i style=\"background:{}\"></i>{}</span>", colour, Esc(label));
  }
  if (!extra.empty()) p.body += fmt::format("<span class=\"key\">{}</span>", Esc(extra));
  p.body += "</div>\n";
}
void CloseFigure(Page& p) {
  p.body += "</figure>\n";
}

std::string SvgOpen(double w, double h) {
  return fmt::format("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{:.0f}\" height=\"{:.0f}\" viewBox=\"0 0 {:.0f} {:.0f}\">\n", w, h,
                     w, h);
}

// Sequential colour legend of a heatmap: `scale` at 0, 1/2, 1 of `max`.
std::vector<std::pair<std::string, std::string>> RampLegend(std::string (*scale)(double), double max, const std::string& what) {
  return {{scale(0.0), what + " 0"}, {scale(0.5), Num(max / 2)}, {scale(1.0), Num(max) + " (max)"}};
}

// ---------------------------------------------------------------------------------------------
// Header.

void Row(std::string& out, const std::string& key, const std::string& value) {
  out += fmt::format("<tr><th>{}</th><td>{}</td></tr>\n", Esc(key), Esc(value));
}

std::string Degrees(const Json& par) {
  std::string out;
  for (const char* k : {"world_size", "pp", "dp_replicate", "dp_shard", "cp", "tp", "ep", "etp", "efsdp"}) {
    if (par.contains(k)) out += fmt::format("{}{} {}", out.empty() ? "" : ", ", k, JsonText(par[k]));
  }
  if (par.contains("convention")) out += " (" + JsonText(par.at("convention")) + ")";
  return out;
}

// The table of inputs: model, degrees, layout, training, cluster, routing, run, generator, command
// and input files, each when the report has it.
std::string InputRows(const Json& r, const std::string& kind) {
  std::string inputs;
  const Json& gen = r.contains("generator") ? r.at("generator") : Json::object();
  const Json& prov = r.contains("provenance") ? r.at("provenance") : gen.value("provenance", Json());
  if (r.contains("model")) {
    const Json& m = r.at("model");
    if (m.is_string()) {
      Row(inputs, "model", m.get<std::string>());
    } else {
      Row(inputs, "model",
          fmt::format("{} ({})", JsonText(m.value("source", m.value("name", Json("?")))), JsonText(m.value("family", Json("?")))));
      if (m.contains("num_experts")) {
        Row(inputs, "experts", fmt::format("{} routed, top_k {}", JsonText(m.at("num_experts")), JsonText(m.value("top_k", Json("?")))));
      }
    }
  }
  if (r.contains("parallel")) Row(inputs, "degrees", Degrees(r.at("parallel")));
  if (r.contains("layout")) {
    const Json& l = r.at("layout");
    Row(inputs, "layout",
        fmt::format("world {}, stage {}, {} ranks run, ep {}, expert tp {}, dispatcher {}", JsonText(l.at("world_size")),
                    JsonText(l.at("stage")), JsonText(l.at("ranks")), JsonText(l.at("ep")), JsonText(l.at("expert_tp")),
                    JsonText(l.at("dispatcher"))));
  }
  if (r.contains("world_size") && !r.contains("parallel")) Row(inputs, "world size", JsonText(r.at("world_size")));
  if (r.contains("training")) {
    const Json& t = r.at("training");
    std::string text;
    for (const char* k : {"dp_sharding", "seq_len", "micro_batch_size", "num_microbatches", "recompute", "gpus_per_node", "dispatcher",
                          "gpu_memory_gib", "imbalance"}) {
      if (t.contains(k)) text += fmt::format("{}{} {}", text.empty() ? "" : ", ", k, JsonText(t[k]));
    }
    Row(inputs, "training", text);
  }
  if (r.contains("cluster")) {
    const Json& c = r.at("cluster");
    std::string text = c.is_object() ? JsonText(c.value("name", Json("?"))) + ":" : JsonText(c);
    if (c.is_object()) {
      for (auto it = c.begin(); it != c.end(); ++it) {
        if (it.key() != "name") text += fmt::format(" {} {}", it.key(), JsonText(it.value()));
      }
    }
    Row(inputs, "cluster (calibration)", text);
  }
  if (r.contains("routing"))
    Row(inputs, "routing", JsonText(r.at("routing")) + (r.contains("seed") ? " (seed " + JsonText(r.at("seed")) + ")" : ""));
  if (r.contains("run")) {
    const Json& run = r.at("run");
    Row(inputs, "run",
        fmt::format("backend {}, {} tokens/rank, routing {}, seed {}, {} timed iterations", JsonText(run.at("backend")),
                    JsonText(run.at("tokens_per_rank")), JsonText(run.at("routing")), JsonText(run.at("seed")), JsonText(run.at("iters"))));
  }
  const std::string version =
      gen.contains("version") ? JsonText(gen.at("version")) : JsonText(r.value("dockyard_version", Json(kDockyardVersion)));
  Row(inputs, "generator", fmt::format("{} {}", JsonText(gen.value("name", Json(kind))), version));
  if (prov.is_object()) {
    if (prov.contains("argv")) {
      std::string argv;
      for (const auto& a : prov.at("argv")) argv += (argv.empty() ? "" : " ") + JsonText(a);
      Row(inputs, "command", argv);
    }
    if (prov.contains("inputs")) {
      for (const auto& in : prov.at("inputs")) {
        Row(inputs, "input",
            fmt::format("{} ({} bytes, sha256 {})", JsonText(in.value("path", Json("?"))), JsonText(in.value("bytes", Json("?"))),
                        JsonText(in.value("sha256", Json("?")))));
      }
    }
  }
  return inputs;
}

// Headline numbers: the same fields the JSON report and the terminal table give.
std::string HeadlineNumbers(const Json& r, const std::string& kind) {
  std::string headline;
  auto head = [&](const std::string& k, const std::string& v) {
    headline += fmt::format("<div class=\"num\"><b>{}</b><span>{}</span></div>", Esc(v), Esc(k));
  };
  if (r.contains("model") && r.at("model").is_object() && r.at("model").contains("total_params")) {
    head("total params", FormatCount(r.at("model").at("total_params").get<int64_t>()));
    head("active params / token", FormatCount(r.at("model").at("active_params").get<int64_t>()));
  }
  if (r.contains("memory")) {
    const Json& m = r.at("memory");
    head(fmt::format("peak memory (rank {})", JsonText(m.at("worst_rank"))), FormatBytes(m.at("worst_peak_bytes").get<int64_t>()));
    if (m.contains("headroom_bytes")) {
      const int64_t headroom = m.at("headroom_bytes").get<int64_t>();
      head("headroom vs budget", headroom >= 0 ? FormatBytes(headroom) : "over by " + FormatBytes(-headroom));
    }
    if (m.contains("over_budget_ranks") && !m.at("over_budget_ranks").empty()) {
      head("stage worst ranks over budget", m.at("over_budget_ranks").dump());
    }
  }
  if (r.contains("communication")) {
    const Json& c = r.at("communication");
    head(fmt::format("wire bytes / step (rank {})", JsonText(c.at("rank"))), FormatBytes(c.at("total_wire_bytes").get<int64_t>()));
    head("of which cross-node", FormatBytes(c.at("total_cross_node_bytes").get<int64_t>()));
  }
  if (r.contains("predicted") && r.at("predicted").is_object() && r.at("predicted").contains("step_time_us")) {
    const Json& c = r.at("predicted");
    head("step time (predicted)", fmt::format("{:.1f} ms", c.at("step_time_us").get<double>() / 1e3));
    head("tokens/s per GPU", fmt::format("{:.0f}", c.at("tokens_per_s_per_gpu").get<double>()));
    head("MFU", fmt::format("{:.1f}%", 100 * c.at("mfu").get<double>()));
    head("dominant phase", JsonText(c.at("dominant_phase")));
    head("routing imbalance", fmt::format("{:.2f}", c.at("routing_imbalance").get<double>()));
  }
  if (kind == "search") {
    head("layouts enumerated", JsonText(r.at("enumerated")));
    head("invalid", JsonText(r.at("invalid")));
    head(fmt::format("over the {:.1f} GiB budget", r.at("budget_gib").get<double>()), JsonText(r.at("over_budget")));
    head("ranked", JsonText(r.at("ranked")));
    if (!r.at("top").empty())
      head("best tokens/s per GPU", fmt::format("{:.0f}", r.at("top").at(0).at("tokens_per_s_per_gpu").get<double>()));
  }
  if (r.contains("validation")) {
    const Json& v = r.at("validation");
    head("validation", v.at("passed").get<bool>() ? "passed" : "FAILED");
    head("wrong / checked", fmt::format("{} / {}", JsonText(v.at("wrong")), JsonText(v.at("checked"))));
    head("max abs error", JsonText(v.at("max_abs_error")));
  }
  return headline;
}

void Header(Page& p, const Json& r, const std::string& kind) {
  p.body +=
      fmt::format("<header><h1>dockyard {} report</h1>\n<div class=\"nums\">{}</div>\n<table class=\"inputs\">\n{}</table></header>\n",
                  Esc(kind), HeadlineNumbers(r, kind), InputRows(r, kind));
}

// ---------------------------------------------------------------------------------------------
// Rank grid of one mesh.

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

// ---------------------------------------------------------------------------------------------
// Expert ownership and tokens per expert.

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

// rows[l][e] tokens; `received[l][r]` rows per EP rank (may be empty); `owner[e]` the EP rank
// owning expert e (from experts.ownership; empty when the report does not say).
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

// ---------------------------------------------------------------------------------------------
// Memory per stage.

void MemoryFigure(Page& p, const Json& memory) {
  const Json& stages = memory.at("stages");
  const int64_t n = static_cast<int64_t>(stages.size());
  double max = 0;
  for (const auto& s : stages) max = std::max(max, s.at("peak_bytes").get<double>());
  const bool has_budget = memory.contains("budget_bytes");
  const double budget = has_budget ? memory.at("budget_bytes").get<double>() : 0;
  const double scale_max = std::max(max, budget) * 1.08;
  const double plot_h = 260, left = 64, top = 16;
  const double bw = std::clamp(640.0 / std::max<int64_t>(1, n), 6.0, 60.0);
  const double w = left + n * bw * 1.4 + 160, h = top + plot_h + 44;
  OpenFigure(p, "fig-memory", fmt::format("Memory per pipeline stage (its worst rank), {} stage(s)", n),
             "memory.stages[]: the five kinds stacked; peak = their sum (an upper bound)");
  p.body += SvgOpen(w, h);
  const double step_gib = TickStep(Gib(scale_max), 5);
  for (double t = 0; t <= Gib(scale_max); t += step_gib) {
    const double y = top + plot_h - t * 1073741824.0 / scale_max * plot_h;
    p.body += fmt::format(
        "<line class=\"grid\" x1=\"{:.1f}\" x2=\"{:.1f}\" y1=\"{:.1f}\" y2=\"{:.1f}\"/><text class=\"lab\" x=\"{:.1f}\" y=\"{:.1f}\" "
        "text-anchor=\"end\">{} GiB</text>\n",
        left, left + n * bw * 1.4, y, y, left - 4, y + 4, Num(t));
  }
  const int label_every = static_cast<int>(std::ceil(28.0 / (bw * 1.4)));
  for (int64_t i = 0; i < n; ++i) {
    const Json& s = stages[i];
    const double x = left + i * bw * 1.4 + bw * 0.2;
    double acc = 0;
    std::string tip = fmt::format("stage {}, rank {}:", JsonText(s.at("stage")), JsonText(s.at("worst_rank")));
    for (int k = 0; k < 5; ++k) tip += fmt::format(" {} {};", kMemoryKinds[k], FormatBytes(s.at(kMemoryKinds[k]).get<int64_t>()));
    tip += " peak " + FormatBytes(s.at("peak_bytes").get<int64_t>());
    p.body += fmt::format("<g class=\"bar\" data-stage=\"{}\" data-peak=\"{}\">", JsonText(s.at("stage")), JsonText(s.at("peak_bytes")));
    for (int k = 0; k < 5; ++k) {
      const double b = s.at(kMemoryKinds[k]).get<double>();
      const double hgt = b / scale_max * plot_h;
      acc += hgt;
      p.body += fmt::format(
          "<rect class=\"seg\" data-kind=\"{}\" data-bytes=\"{}\" x=\"{:.1f}\" y=\"{:.3f}\" width=\"{:.1f}\" height=\"{:.3f}\" "
          "fill=\"{}\"><title>{}</title></rect>",
          kMemoryKinds[k], JsonText(s.at(kMemoryKinds[k])), x, top + plot_h - acc, bw, hgt, kMemoryColours[k], Esc(tip));
    }
    p.body += "</g>\n";
    if (i % label_every == 0) {
      p.body += fmt::format("<text class=\"lab\" x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">stage {}</text>\n", x + bw / 2,
                            top + plot_h + 14, JsonText(s.at("stage")));
      // The rank the bar describes, where there is room for it.
      if (bw * 1.4 >= 56) {
        p.body += fmt::format("<text class=\"lab small\" x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">rank {}</text>\n", x + bw / 2,
                              top + plot_h + 26, JsonText(s.at("worst_rank")));
      }
    }
  }
  if (has_budget) {
    const double y = top + plot_h - budget / scale_max * plot_h;
    p.body += fmt::format(
        "<line class=\"budget\" x1=\"{:.1f}\" x2=\"{:.1f}\" y1=\"{:.1f}\" y2=\"{:.1f}\"/><text class=\"lab\" x=\"{:.1f}\" "
        "y=\"{:.1f}\">budget {}</text>\n",
        left, left + n * bw * 1.4, y, y, left + n * bw * 1.4 + 4, y + 4, FormatBytes(static_cast<int64_t>(budget)));
  }
  p.body += "</svg>\n";
  std::vector<std::pair<std::string, std::string>> items;
  for (int k = 0; k < 5; ++k) {
    std::string name = kMemoryKinds[k];
    items.push_back({kMemoryColours[k], name.substr(0, name.size() - 6)});
  }
  Legend(p, items, has_budget ? "dashed red line: --gpu-memory-gib budget" : "no budget given (--gpu-memory-gib)");
  CloseFigure(p);
}

// ---------------------------------------------------------------------------------------------
// Dispatch traffic.

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

// ---------------------------------------------------------------------------------------------
// Phase bars.

struct PhaseRow {
  std::string name;
  std::vector<double> values;  // one per series
  std::vector<double> lo, hi;  // optional per-rank range of series 0
};

void PhaseFigure(Page& p, const std::string& title, const std::string& note, const std::vector<PhaseRow>& rows,
                 const std::vector<std::string>& series) {
  if (rows.empty()) return;
  double max = 0, min_positive = 0;
  std::vector<double> series_max(series.size(), 0.0);
  bool whiskers = false;
  for (const auto& r : rows) {
    for (size_t s = 0; s < r.values.size() && s < series.size(); ++s) series_max[s] = std::max(series_max[s], r.values[s]);
    for (double v : r.values) {
      max = std::max(max, v);
      if (v > 0 && (min_positive == 0 || v < min_positive)) min_positive = v;
    }
    for (double v : r.hi) max = std::max(max, v);
    whiskers = whiskers || !r.lo.empty();
  }
  // Measured (here, on this machine) and predicted (on the cluster) can differ by orders of
  // magnitude: then a log axis, so that both series stay visible.
  const double smin = series_max.empty() ? 0 : *std::min_element(series_max.begin(), series_max.end());
  const bool log_axis = series.size() > 1 && smin > 0 && max / smin > 50;
  const double lo_exp = log_axis ? std::floor(std::log10(min_positive) - 0.01) : 0;
  const double hi_exp = log_axis ? std::ceil(std::log10(max)) : 0;
  const double left = 130, top = 8, plot_w = 560, bar_h = 12;
  const double scale = max > 0 ? plot_w / (max * 1.05) : 0;
  auto pos = [&](double v) {
    if (!log_axis) return v * scale;
    return v <= 0 ? 0.0 : (std::log10(v) - lo_exp) / (hi_exp - lo_exp) * plot_w;
  };
  const double row_h = bar_h * series.size() + 8;
  const double h = top + rows.size() * row_h + 34;
  OpenFigure(p, "fig-phases", title, note);
  p.body += SvgOpen(left + plot_w + 120, h);
  std::vector<double> ticks;
  if (log_axis) {
    for (double e = lo_exp; e <= hi_exp; ++e) ticks.push_back(std::pow(10.0, e));
  } else {
    const double step = TickStep(max * 1.05, 6);
    for (double t = 0; t <= max * 1.05; t += step) ticks.push_back(t);
  }
  for (double t : ticks) {
    const double x = left + pos(t);
    p.body += fmt::format(
        "<line class=\"grid\" x1=\"{:.1f}\" x2=\"{:.1f}\" y1=\"{:.1f}\" y2=\"{:.1f}\"/><text class=\"lab\" x=\"{:.1f}\" y=\"{:.1f}\" "
        "text-anchor=\"middle\">{}</text>\n",
        x, x, top, top + rows.size() * row_h, x, top + rows.size() * row_h + 14, TimeTick(t, log_axis ? t : max));
  }
  p.body += fmt::format("<text class=\"lab\" x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>\n", left + plot_w / 2,
                        top + rows.size() * row_h + 28, log_axis ? "time, log scale (bar labels in us)" : "time (bar labels in us)");
  for (size_t i = 0; i < rows.size(); ++i) {
    const double y = top + i * row_h + 4;
    p.body += fmt::format("<text class=\"lab\" x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>\n", left - 4,
                          y + bar_h * series.size() / 2 + 4, Esc(rows[i].name));
    for (size_t s = 0; s < series.size() && s < rows[i].values.size(); ++s) {
      const double v = rows[i].values[s];
      p.body += fmt::format(
          "<rect class=\"pbar\" data-us=\"{}\" x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.2f}\" height=\"{:.1f}\" fill=\"{}\"><title>{} {}: "
          "{:.1f} us</title></rect>",
          v, left, y + s * bar_h, pos(v), bar_h - 1, kPalette[s], Esc(rows[i].name), Esc(series[s]), v);
      p.body += fmt::format("<text class=\"lab small\" x=\"{:.1f}\" y=\"{:.1f}\">{:.1f}</text>\n", left + pos(v) + 3,
                            y + s * bar_h + bar_h - 3, v);
    }
    if (!rows[i].lo.empty()) {
      const double lo = rows[i].lo[0], hi = rows[i].hi[0];
      p.body += fmt::format(
          "<line class=\"whisk\" x1=\"{:.1f}\" x2=\"{:.1f}\" y1=\"{:.1f}\" y2=\"{:.1f}\"><title>per EP rank: {:.1f} to {:.1f} "
          "us</title></line>\n",
          left + pos(lo), left + pos(hi), y + bar_h / 2, y + bar_h / 2, lo, hi);
    }
  }
  p.body += "</svg>\n";
  std::vector<std::pair<std::string, std::string>> items;
  for (size_t s = 0; s < series.size(); ++s) items.push_back({kPalette[s], series[s]});
  Legend(p, items,
         std::string(log_axis ? "log scale: the series differ by more than 50x. " : "") +
             (whiskers ? "Black whisker (routing-dependent phases): the lowest to the highest EP rank's mean over the sampled "
                         "layers; the bar is the mean of each layer's slowest rank"
                       : ""));
  CloseFigure(p);
}

// Per-rank stacked time of phases (rank -> phase -> us).
void RankPhaseFigure(Page& p, const std::string& title, const std::vector<std::string>& rank_names, const std::vector<std::string>& phases,
                     const std::vector<std::vector<double>>& us) {
  if (rank_names.empty() || phases.empty()) return;
  const int64_t n = static_cast<int64_t>(rank_names.size());
  double max = 0;
  for (const auto& r : us) {
    double sum = 0;
    for (double v : r) sum += v;
    max = std::max(max, sum);
  }
  const double left = 80, top = 8, plot_h = 220;
  const double bw = std::clamp(640.0 / n, 3.0, 40.0);
  const double w = left + n * bw + 20, h = top + plot_h + 36;
  const double scale = max > 0 ? plot_h / (max * 1.05) : 0;
  OpenFigure(p, "fig-rank-phases", title, "");
  p.body += SvgOpen(w, h);
  const double step = TickStep(max * 1.05, 5);
  for (double t = 0; t <= max * 1.05; t += step) {
    const double y = top + plot_h - t * scale;
    p.body += fmt::format(
        "<line class=\"grid\" x1=\"{:.1f}\" x2=\"{:.1f}\" y1=\"{:.1f}\" y2=\"{:.1f}\"/><text class=\"lab\" x=\"{:.1f}\" y=\"{:.1f}\" "
        "text-anchor=\"end\">{}</text>\n",
        left, left + n * bw, y, y, left - 4, y + 4, TimeTick(t, max));
  }
  const int label_every = static_cast<int>(std::ceil(40.0 / bw));
  for (int64_t r = 0; r < n; ++r) {
    double acc = 0;
    for (size_t k = 0; k < phases.size(); ++k) {
      const double v = us[r][k];
      acc += v * scale;
      p.body += fmt::format(
          "<rect x=\"{:.1f}\" y=\"{:.2f}\" width=\"{:.1f}\" height=\"{:.2f}\" fill=\"{}\"><title>{}: {} {:.1f} us</title></rect>",
          left + r * bw, top + plot_h - acc, std::max(bw - 1, 1.0), v * scale, kPalette[k % kPaletteSize], Esc(rank_names[r]),
          Esc(phases[k]), v);
    }
    p.body += "\n";
    if (r % label_every == 0) {
      p.body += fmt::format("<text class=\"lab\" x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>\n", left + (r + 0.5) * bw,
                            top + plot_h + 14, Esc(rank_names[r]));
    }
  }
  p.body += "</svg>\n";
  std::vector<std::pair<std::string, std::string>> items;
  for (size_t k = 0; k < phases.size(); ++k) items.push_back({kPalette[k % kPaletteSize], phases[k]});
  Legend(p, items);
  CloseFigure(p);
}

// ---------------------------------------------------------------------------------------------
// Pipeline schedule: the cost model's step (cost.cc): M + pp - 1 slots of the slowest stage's
// micro-batch time, stage s busy with micro-batch m in slot s + m, then the exposed
// data-parallel communication and the optimizer.

// The forward share of a layer's forward + backward time, from the predicted per-layer phases
// (predicted.phases: time_us per layer and micro-batch, by layer kind and direction), the layer
// kinds weighted by how many layers of each the model has. 0.5 when the phases say nothing.
double ForwardShare(const Json& predicted, int64_t moe_layers, int64_t dense_layers) {
  double fwd = 0, all = 0;
  if (predicted.contains("phases")) {
    for (const auto& ph : predicted.at("phases")) {
      const std::string kind = ph.value("layer_kind", ""), dir = ph.value("direction", "");
      const double n = kind == "moe" ? static_cast<double>(moe_layers) : kind == "dense" ? static_cast<double>(dense_layers) : 0.0;
      const double us = ph.value("time_us", 0.0) * n;
      if (dir == "forward") fwd += us;
      if (dir == "forward" || dir == "backward") all += us;
    }
  }
  return all > 0 ? fwd / all : 0.5;
}

void PipelineFigure(Page& p, const Json& predicted, int64_t pp, int64_t microbatches, double forward_share) {
  const double slot = predicted.at("stage_microbatch_us").get<double>();
  const double dp = predicted.at("dp_step_comm_us").get<double>();
  const double opt = predicted.at("optimizer_us").get<double>();
  const double step = predicted.at("step_time_us").get<double>();
  const int64_t slots = microbatches + pp - 1;
  const double left = 64, top = 8, plot_w = 720;
  const double rh = std::clamp(240.0 / pp, 6.0, 24.0);
  const double scale = step > 0 ? plot_w / step : 0;
  const double h = top + pp * rh + 40;
  OpenFigure(p, "fig-pipeline",
             fmt::format("Pipeline schedule of one step: {} stage(s), {} micro-batch(es), step {:.1f} ms (predicted)", pp, microbatches,
                         step / 1e3),
             fmt::format("each slot is the slowest stage's forward + backward of one micro-batch (predicted.stage_microbatch_us), "
                         "split {:.0f} % forward / {:.0f} % backward as the predicted layer phases are; "
                         "dockyard does not model virtual stages (interleaving) yet",
                         100 * forward_share, 100 * (1 - forward_share)));
  p.body += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + fmt::format("{:.0f}", left + plot_w + 20) + "\" height=\"" +
            fmt::format("{:.0f}", h) +
            "\"><defs><pattern id=\"hatch\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" patternTransform=\"rotate(45)\"><rect "
            "width=\"6\" height=\"6\" fill=\"#eeeeee\"/><line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"6\" stroke=\"#bbbbbb\" "
            "stroke-width=\"3\"/></pattern></defs>\n";
  for (int64_t s = 0; s < pp; ++s) {
    const double y = top + s * rh;
    p.body +=
        fmt::format("<text class=\"lab\" x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\">stage {}</text>\n", left - 4, y + rh / 2 + 4, s);
    for (int64_t k = 0; k < slots; ++k) {
      const int64_t m = k - s;
      const bool busy = m >= 0 && m < microbatches;
      const double x = left + k * slot * scale;
      p.body += fmt::format(
          "<rect class=\"{}\" data-us=\"{}\" x=\"{:.2f}\" y=\"{:.1f}\" width=\"{:.2f}\" height=\"{:.1f}\" fill=\"{}\"><title>stage {} slot "
          "{}: {}</title></rect>",
          busy ? "busy" : "bubble", slot, x, y + 1, slot * scale, rh - 2, busy ? "#4e79a7" : "url(#hatch)", s, k,
          busy ? fmt::format("micro-batch {} forward + backward, {:.1f} us", m, slot) : fmt::format("bubble, {:.1f} us", slot));
      if (busy) {
        // The backward part of the slot, after its forward.
        const double bwd = slot * (1 - forward_share);
        p.body += fmt::format(
            "<rect class=\"bwd\" data-us=\"{}\" x=\"{:.2f}\" y=\"{:.1f}\" width=\"{:.2f}\" height=\"{:.1f}\" "
            "fill=\"#76b7b2\"><title>micro-batch {} backward, {:.1f} us</title></rect>",
            bwd, x + (slot - bwd) * scale, y + 1, bwd * scale, rh - 2, m, bwd);
      }
      if (busy && slot * scale > 18 && rh >= 12) {
        p.body += fmt::format("<text class=\"lab inv\" x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>", x + slot * scale / 2,
                              y + rh / 2 + 4, m);
      }
    }
    const double x0 = left + slots * slot * scale;
    p.body += fmt::format(
        "<rect class=\"dp\" x=\"{:.2f}\" y=\"{:.1f}\" width=\"{:.2f}\" height=\"{:.1f}\" fill=\"#f28e2b\"><title>exposed data-parallel "
        "communication {:.1f} us</title></rect>",
        x0, y + 1, dp * scale, rh - 2, dp);
    p.body += fmt::format(
        "<rect class=\"opt\" x=\"{:.2f}\" y=\"{:.1f}\" width=\"{:.2f}\" height=\"{:.1f}\" fill=\"#59a14f\"><title>optimizer {:.1f} "
        "us</title></rect>\n",
        x0 + dp * scale, y + 1, opt * scale, rh - 2, opt);
  }
  const double tick = TickStep(step / 1e3, 6);
  for (double t = 0; t <= step / 1e3 + 1e-9; t += tick) {
    p.body += fmt::format("<text class=\"lab\" x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{} ms</text>\n", left + t * 1e3 * scale,
                          top + pp * rh + 14, Num(t));
  }
  p.body += "</svg>\n";
  Legend(p, {{"#4e79a7", "micro-batch forward (number = micro-batch)"},
             {"#76b7b2", "its backward"},
             {"#dddddd", fmt::format("bubble ({:.1f} ms per stage)", predicted.at("pipeline_bubble_us").get<double>() / 1e3)},
             {"#f28e2b", "exposed data-parallel comm"},
             {"#59a14f", "optimizer"}});
  CloseFigure(p);
}

// ---------------------------------------------------------------------------------------------
// Search scatter.

constexpr int64_t kHtmlMaxTitledPoints = 3000;

std::string LayoutName(const Json& x) {
  return fmt::format("pp {} dp_replicate {} dp_shard {} cp {} tp {} ep {} etp {} {}", JsonText(x.at("pp")), JsonText(x.at("dp_replicate")),
                     JsonText(x.at("dp_shard")), JsonText(x.at("cp")), JsonText(x.at("tp")), JsonText(x.at("ep")), JsonText(x.at("etp")),
                     JsonText(x.at("dispatcher")));
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
// tokens/s per GPU, MFU, peak and headroom (budget - reserve - peak), the dominant phase.
constexpr const char* kSearchRowHeads =
    "<th>layout</th><th>vpp</th><th>mbs</th><th>micro-batches</th><th>recompute</th><th>dp sharding</th><th>dispatcher</th><th>step "
    "(ms)</th><th>tokens/s/GPU</th><th>MFU</th><th>peak GiB</th><th>headroom GiB</th><th>dominant phase</th>";

std::string SearchRowCells(const Json& x) {
  const int64_t a = x.value("grad_accumulation_steps", int64_t{1});
  const Json& m = x.value("num_microbatches", Json(nullptr));
  const std::string mb =
      m.is_number_integer() ? MicroBatchesText(x.value("pp", int64_t{1}), a, m.get<int64_t>()) : JsonText(m);  // search.cc's cell
  const std::string dispatcher = JsonText(x.at("dispatcher")) + (x.value("overlap_moe_ep_comm", false) ? "+ov" : "");
  return fmt::format(
      "<td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.1f}</td><td>{:.0f}</td><td>{:.1f}%</td>"
      "<td>{:.2f}</td><td>{:.2f}</td><td>{}</td>",
      Esc(fmt::format("pp {} dp_replicate {} dp_shard {} cp {} tp {} ep {} etp {}", JsonText(x.at("pp")), JsonText(x.at("dp_replicate")),
                      JsonText(x.at("dp_shard")), JsonText(x.at("cp")), JsonText(x.at("tp")), JsonText(x.at("ep")), JsonText(x.at("etp")))),
      Esc(JsonText(x.value("vpp", Json(nullptr)))), Esc(JsonText(x.value("micro_batch_size", Json(nullptr)))), Esc(mb),
      Esc(JsonText(x.value("recompute", Json(nullptr)))), Esc(JsonText(x.value("dp_sharding", Json(nullptr)))), Esc(dispatcher),
      x.at("step_time_us").get<double>() / 1e3, x.at("tokens_per_s_per_gpu").get<double>(), 100 * x.at("mfu").get<double>(),
      Gib(x.at("peak_bytes").get<double>()), x.value("headroom_gib", 0.0), Esc(JsonText(x.at("dominant_phase"))));
}

// The first 20 ranked rows as a table, Pareto rows shaded.
void SearchTable(Page& p, const Json& top, const std::vector<bool>& front) {
  const int64_t n = static_cast<int64_t>(top.size());
  p.body += "<p class=\"note\">The first 20 ranked layouts; shaded rows are on the Pareto front.</p>\n";
  p.body += fmt::format("<table class=\"rows search-rows\"><tr><th>#</th>{}</tr>\n", kSearchRowHeads);
  for (int64_t i = 0; i < std::min<int64_t>(n, 20); ++i) {
    p.body += fmt::format("<tr{}><td>{}</td>{}</tr>\n", front[i] ? " class=\"pareto\"" : "", i + 1, SearchRowCells(top[i]));
  }
  p.body += "</table>\n";
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
    p.body += fmt::format("<table class=\"rows search-pareto\"><tr>{}</tr>\n", kSearchRowHeads);
    for (const Json& x : pareto) p.body += fmt::format("<tr>{}</tr>\n", SearchRowCells(x));
    p.body += "</table>\n";
  }
  p.body += "<p class=\"note\">Candidates by outcome.</p>\n<table class=\"rows search-counts\">\n";
  auto row = [&](const std::string& what, const Json& value) {
    p.body += fmt::format("<tr><td>{}</td><td>{}</td></tr>\n", Esc(what), Esc(JsonText(value)));
  };
  row("enumerated", r.at("enumerated"));
  row("invalid by rule", r.at("invalid"));
  row("global batch not divisible", r.value("not_divisible", Json(0)));
  row(fmt::format("over the {:.1f} GiB budget", r.at("budget_gib").get<double>()), r.at("over_budget"));
  row("of which pruned by the static-memory bound", r.value("pruned", Json(0)));
  row("ranked", r.at("ranked"));
  p.body += "</table>\n";
}

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

// ---------------------------------------------------------------------------------------------

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
)";

// Recolours a rank grid when its axis selector changes (no network, no external code).
constexpr const char* kScript =
    R"(var P=["#4e79a7","#f28e2b","#e15759","#76b7b2","#59a14f","#edc948","#b07aa1","#ff9da7","#9c755f","#bab0ac","#17becf","#8c564b"];
document.querySelectorAll("select[data-mesh]").forEach(function(s){s.addEventListener("change",function(){
var m=s.getAttribute("data-mesh"),a=s.value,g=G[m][a],n=G[m]["#"+a],f=document.getElementById("fig-mesh-"+m);
f.querySelectorAll("rect.r").forEach(function(e,i){e.setAttribute("fill",P[g[i]%12]);
var t=e.querySelector("title");if(t){var x=t.textContent;t.textContent=x.substring(0,x.lastIndexOf(": ")+2)+a+" group "+g[i];}});
var l=f.querySelector("div.legend"),k=l.querySelectorAll("span.key"),o=k[k.length-1].textContent,h="";
for(var i=0;i<Math.min(n,12);i++){h+='<span class="key"><i style="background:'+P[i]+'"></i>'+a+' group '+i+'</span>';}
l.innerHTML=h+'<span class="key">'+n+' group(s)'+(n>12?', colours repeat every 12':'')+o.substring(o.indexOf(";"))+'</span>';});});
)";

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
              "predicted.phases with layer_kind moe", rows, {"forward", "backward"});
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
  PipelineFigure(p, pred, r.at("parallel").at("pp").get<int64_t>(), r.at("training").at("num_microbatches").get<int64_t>(),
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
  out += "<script>\nvar G={" + p.script_data + "};\n" + kScript + "</script>\n</body></html>\n";
  return out;
}

}  // namespace

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
    return Render(report, routing_sample);
  } catch (const Json::exception& e) {
    throw Error(fmt::format("--html: the report lacks a field the page draws or has the wrong type: {}", e.what()));
  }
}

}  // namespace dockyard
