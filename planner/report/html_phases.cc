// The HTML report's phase figures (html_internal.h): time per phase, one bar per series (fig-phases:
// predicted forward and backward, or measured beside predicted, a log axis when they differ by
// orders of magnitude) and the phases stacked per rank (fig-rank-phases).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "planner/report/html_internal.h"

namespace dockyard::html {

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

}  // namespace dockyard::html
