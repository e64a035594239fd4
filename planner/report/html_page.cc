// The HTML report's page helpers (html_internal.h): escaping, the number and colour formats and
// the figure frame (caption, note, legend) that every figure file uses.
#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "planner/report/html_internal.h"

namespace dockyard::html {
namespace {

// A colour on a sequential scale from near-white (t = 0) to `dark` (t = 1).
std::string Ramp(double t, int r1, int g1, int b1) {
  t = std::clamp(t, 0.0, 1.0);
  const int r0 = 247, g0 = 251, b0 = 255;
  auto mix = [t](int a, int b) { return static_cast<int>(std::lround(a + (b - a) * t)); };
  return fmt::format("#{:02x}{:02x}{:02x}", mix(r0, r1), mix(g0, g1), mix(b0, b1));
}

}  // namespace

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

void OpenFigure(Page& p, const std::string& id, const std::string& title, const std::string& note) {
  p.body += fmt::format("<figure class=\"fig\" id=\"{}\"><figcaption>{}</figcaption>\n", id, Esc(title));
  if (!note.empty()) p.body += fmt::format("<p class=\"note\">{}</p>\n", Esc(note));
}
void Legend(Page& p, const std::vector<std::pair<std::string, std::string>>& items, const std::string& extra) {
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

}  // namespace dockyard::html
