// The HTML report's memory figure (html_internal.h MemoryFigure, fig-memory): per pipeline stage
// (its worst rank) the five kinds of memory.stages[] stacked, against the budget as a dashed line.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "planner/report/html_internal.h"
#include "planner/report/report.h"

namespace dockyard::html {
namespace {

// Memory kinds in stacking order (memory.stages[] fields) and their colours.
constexpr const char* kMemoryKinds[] = {"params_bytes", "grads_bytes", "optimizer_bytes", "activations_bytes", "comm_buffers_bytes"};
constexpr const char* kMemoryColours[] = {"#4e79a7", "#59a14f", "#edc948", "#f28e2b", "#b07aa1"};

}  // namespace

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

}  // namespace dockyard::html
