// The HTML report's pipeline schedule (html_internal.h PipelineFigure, fig-pipeline): the cost
// model's step (cost/step.cc): M + (pp - 1) / vpp slots of the slowest stage's micro-batch time
// (pipeline_schedule.h PipelineSlots; vpp 1 without interleaving), stage s starting after
// s / vpp slots and busy with its M micro-batches back to back, bubbles hatched, then the flush's
// pipeline transfers (interleaved), the exposed data-parallel communication, the optimizer and the
// host's per-step work: the cells of a stage add up to the step.
#include <algorithm>
#include <cstdint>
#include <string>

#include <fmt/format.h>

#include "planner/model/pipeline_schedule.h"
#include "planner/report/html_internal.h"

namespace dockyard::html {

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

void PipelineFigure(Page& p, const Json& predicted, int64_t pp, int64_t vpp, int64_t microbatches, double forward_share) {
  const double slot = predicted.at("stage_microbatch_us").get<double>();
  const double dp = predicted.at("dp_step_comm_us").get<double>();
  const double opt = predicted.at("optimizer_us").get<double>();
  const double step = predicted.at("step_time_us").get<double>();
  const double host = predicted.value("host_overhead_us", 0.0);
  // Interleaved 1F1B (vpp model chunks per rank) shrinks the bubble to (pp - 1) / vpp slots: each
  // stage waits s / vpp slots before its first micro-batch and (pp - 1 - s) / vpp after its last.
  const double slots = PipelineSlots(microbatches, pp, vpp);
  const double lead = pp > 1 ? (slots - static_cast<double>(microbatches)) / static_cast<double>(pp - 1) : 0.0;  // 1 / vpp
  // The bubble beyond the idle slots: the interleaved flush's pipeline transfers, which no chunk
  // hides (cost/step.cc: pipeline_bubble_us = idle slots + flush), drawn after the last slot.
  const double flush = std::max(0.0, predicted.at("pipeline_bubble_us").get<double>() - (slots - static_cast<double>(microbatches)) * slot);
  const double left = 64, top = 8, plot_w = 720;
  const double rh = std::clamp(240.0 / pp, 6.0, 24.0);
  const double scale = step > 0 ? plot_w / step : 0;
  const double h = top + pp * rh + 40;
  OpenFigure(p, "fig-pipeline",
             fmt::format("Pipeline schedule of one step: {} stage(s), {} micro-batch(es), step {:.1f} ms (predicted)", pp, microbatches,
                         step / 1e3),
             fmt::format("each slot is the slowest stage's forward + backward of one micro-batch (predicted.stage_microbatch_us), "
                         "split {:.0f} % forward / {:.0f} % backward as the predicted layer phases are; {}",
                         100 * forward_share, 100 * (1 - forward_share),
                         vpp > 1 ? fmt::format("interleaved 1F1B with {} model chunks per rank: the bubble is {} = {:.2f} "
                                               "slots (docs/cost-model.md section 5), a micro-batch's {} chunks drawn as one slot",
                                               vpp, microbatches >= pp ? "(pp - 1) / vpp" : "((vpp - 1) (pp - M) + pp - 1) / vpp, fewer micro-batches than stages",
                                               slots - static_cast<double>(microbatches), vpp)
                                 : std::string("1F1B without interleaving: the bubble is pp - 1 slots")));
  p.body += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + fmt::format("{:.0f}", left + plot_w + 20) + "\" height=\"" +
            fmt::format("{:.0f}", h) +
            "\"><defs><pattern id=\"hatch\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" patternTransform=\"rotate(45)\"><rect "
            "width=\"6\" height=\"6\" fill=\"#eeeeee\"/><line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"6\" stroke=\"#bbbbbb\" "
            "stroke-width=\"3\"/></pattern></defs>\n";
  for (int64_t s = 0; s < pp; ++s) {
    const double y = top + s * rh;
    p.body +=
        fmt::format("<text class=\"lab\" x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\">stage {}</text>\n", left - 4, y + rh / 2 + 4, s);
    // s bubbles of 1 / vpp slot before the first micro-batch, M micro-batches, pp - 1 - s bubbles after.
    struct Cell {
      double start;   // in slots
      int64_t m;      // micro-batch; -1 = bubble
      double width;   // in slots
    };
    std::vector<Cell> cells;
    const double head = lead * static_cast<double>(s);
    for (int64_t j = 0; j < s; ++j) cells.push_back({lead * static_cast<double>(j), -1, lead});
    for (int64_t m = 0; m < microbatches; ++m) cells.push_back({head + static_cast<double>(m), m, 1.0});
    for (int64_t j = 0; j < pp - 1 - s; ++j) {
      cells.push_back({head + static_cast<double>(microbatches) + lead * static_cast<double>(j), -1, lead});
    }
    for (size_t c = 0; c < cells.size(); ++c) {
      const int64_t m = cells[c].m;
      const bool busy = m >= 0;
      const int64_t k = static_cast<int64_t>(c);
      const double x = left + cells[c].start * slot * scale;
      const double width_slots = cells[c].width;
      p.body += fmt::format(
          "<rect class=\"{}\" data-us=\"{}\" x=\"{:.2f}\" y=\"{:.1f}\" width=\"{:.2f}\" height=\"{:.1f}\" fill=\"{}\"><title>stage {} slot "
          "{}: {}</title></rect>",
          busy ? "busy" : "bubble", slot * width_slots, x, y + 1, slot * width_slots * scale, rh - 2, busy ? "#4e79a7" : "url(#hatch)", s, k,
          busy ? fmt::format("micro-batch {} forward + backward, {:.1f} us", m, slot) : fmt::format("bubble, {:.1f} us", slot * width_slots));
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
    const double x_flush = left + slots * slot * scale;
    if (flush > 0) {
      p.body += fmt::format(
          "<rect class=\"flush\" data-us=\"{}\" x=\"{:.2f}\" y=\"{:.1f}\" width=\"{:.2f}\" height=\"{:.1f}\" fill=\"#bab0ac\"><title>the "
          "flush's pipeline transfers, {:.1f} us (part of the bubble)</title></rect>",
          flush, x_flush, y + 1, flush * scale, rh - 2, flush);
    }
    const double x0 = x_flush + flush * scale;
    p.body += fmt::format(
        "<rect class=\"dp\" data-us=\"{}\" x=\"{:.2f}\" y=\"{:.1f}\" width=\"{:.2f}\" height=\"{:.1f}\" fill=\"#f28e2b\"><title>exposed "
        "data-parallel communication {:.1f} us</title></rect>",
        dp, x0, y + 1, dp * scale, rh - 2, dp);
    p.body += fmt::format(
        "<rect class=\"opt\" data-us=\"{}\" x=\"{:.2f}\" y=\"{:.1f}\" width=\"{:.2f}\" height=\"{:.1f}\" fill=\"#59a14f\"><title>optimizer "
        "{:.1f} us</title></rect>\n",
        opt, x0 + dp * scale, y + 1, opt * scale, rh - 2, opt);
    p.body += fmt::format(
        "<rect class=\"host\" data-us=\"{}\" x=\"{:.2f}\" y=\"{:.1f}\" width=\"{:.2f}\" height=\"{:.1f}\" fill=\"#b07aa1\"><title>the "
        "host's per-step work {:.1f} us</title></rect>\n",
        host, x0 + (dp + opt) * scale, y + 1, host * scale, rh - 2, host);
  }
  const double tick = TickStep(step / 1e3, 6);
  for (double t = 0; t <= step / 1e3 + 1e-9; t += tick) {
    p.body += fmt::format("<text class=\"lab\" x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{} ms</text>\n", left + t * 1e3 * scale,
                          top + pp * rh + 14, Num(t));
  }
  p.body += "</svg>\n";
  Legend(p, {{"#4e79a7", "micro-batch forward (number = micro-batch)"},
             {"#76b7b2", "its backward"},
             {"#dddddd", fmt::format("bubble ({:.1f} ms per stage{})", predicted.at("pipeline_bubble_us").get<double>() / 1e3,
                                     flush > 0 ? fmt::format(", of which the flush's pipeline transfers {:.1f} ms", flush / 1e3) : "")},
             {"#bab0ac", "the flush's pipeline transfers (interleaved 1F1B)"},
             {"#f28e2b", "exposed data-parallel comm"},
             {"#59a14f", "optimizer"},
             {"#b07aa1", "host"}});
  CloseFigure(p);
}

}  // namespace dockyard::html
