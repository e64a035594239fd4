// Benchmark: dockyard's predictions held against published, measured MoE training runs.
//   bazel run -c opt //planner:bench_fidelity -- [runs.json]
// Prints Markdown tables (docs/fidelity.md): every expressible run's measured and predicted step,
// error and dominant phase; mean / max |error|; per group the error and the order of pairs whose
// measured throughput differs by more than 10 %; then the unsupported runs, predicted as
// approximations where possible, and the runs not predicted with the reason. Then the fit
// (dockyard-plan calibrate's, planner/calibrate.h, priors of the h100-sxm preset) over the same
// file: each whole-step row in-sample, group-held-out (fit without the row's group, predict it)
// and leave-one-hardware-out (fit without the row's cluster), with the order within each group.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>

#include <fmt/format.h>

#include "planner/calibrate.h"
#include "planner/calibration.h"
#include "planner/error.h"
#include "planner/fidelity.h"

namespace {

using dockyard::CalibrationRow;
using dockyard::FidelityPrediction;

std::string FitSection(const dockyard::FidelitySet& set) {
  std::vector<std::pair<std::string, std::string>> skipped;
  const std::string preset = "h100-sxm";
  const std::vector<CalibrationRow> rows = dockyard::RowsFromFidelitySet(set, preset, &skipped);
  const std::vector<double> prior = dockyard::KnobValues(dockyard::DefaultCalibration(preset));
  const dockyard::CalibrationFit fit = dockyard::FitCalibration(rows, prior);
  const auto by_group = dockyard::HeldOutErrors(rows, prior, [](const CalibrationRow& r) { return r.group; });
  const auto by_hardware = dockyard::HeldOutErrors(rows, prior, [](const CalibrationRow& r) { return r.hardware; });
  const char* names[4] = {"prior (no fit)", "in-sample fit", "group-held-out", "leave-one-hardware-out"};
  std::vector<FidelityPrediction> variants[4];
  std::string table =
      "| id | group | hardware | measured s | prior | in-sample | group-held-out | hardware-held-out |\n|---|---|---|---|---|---|---|---|\n";
  for (const CalibrationRow& r : rows) {
    if (r.stage != dockyard::CalibrationKnob::kResidual) continue;
    const double err[4] = {dockyard::PredictRow(r, prior) / r.measured - 1, dockyard::PredictRow(r, fit.values) / r.measured - 1,
                           by_group.at(r.id), by_hardware.at(r.id)};
    for (int v = 0; v < 4; ++v) {
      FidelityPrediction p;
      p.id = r.id;
      p.measured_s = r.measured;
      p.predicted_s = r.measured * (1 + err[v]);
      p.error = err[v];
      variants[v].push_back(p);
    }
    table += fmt::format("| {} | {} | {} | {:.3f} | {:+.1f} % | {:+.1f} % | {:+.1f} % | {:+.1f} % |\n", r.id, r.group, r.hardware, r.measured,
                         100 * err[0], 100 * err[1], 100 * err[2], 100 * err[3]);
  }
  std::string out = "\n### Fitted (dockyard-plan calibrate's two-stage fit over this file, h100-sxm priors)\n\n";
  out += "| predictions | rows | mean abs error | max abs error | ordered pairs right (within groups, > 10 % apart) |\n|---|---|---|---|---|\n";
  for (int v = 0; v < 4; ++v) {
    double sum = 0, mx = 0;
    for (const auto& p : variants[v]) {
      sum += std::fabs(p.error);
      mx = std::max(mx, std::fabs(p.error));
    }
    int64_t right = 0, pairs = 0;
    for (const auto& g : dockyard::SummarizeFidelityGroups(set, variants[v])) {
      right += g.concordant_pairs;
      pairs += g.ordered_pairs;
    }
    out += fmt::format("| {} | {} | {:.1f} % | {:.1f} % | {} / {} |\n", names[v], variants[v].size(),
                       variants[v].empty() ? 0.0 : 100 * sum / static_cast<double>(variants[v].size()), 100 * mx, right, pairs);
  }
  out += "\n" + table;
  out += "\nPer group, group-held-out predictions:\n\n" + dockyard::FidelityGroupTable(dockyard::SummarizeFidelityGroups(set, variants[2]));
  out += "\nThe fit (knobs, component rows):\n\n" + dockyard::CalibrationFitToText(rows, fit, nullptr);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::string path = "testdata/fidelity/runs.json";
  if (argc > 1) {
    path = argv[1];
  } else if (const char* runfiles = std::getenv("RUNFILES_DIR")) {
    path = std::string(runfiles) + "/dockyard/" + path;
  }
  try {
    const auto t0 = std::chrono::steady_clock::now();
    const dockyard::FidelitySet set = dockyard::LoadFidelitySet(path);
    const dockyard::FidelityReport report = dockyard::RunFidelity(set);
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    std::fputs(dockyard::FidelityReportToMarkdown(set, report).c_str(), stdout);
    std::printf("\n(%zu runs, %zu component measurements; load + predict %.0f ms)\n", set.runs.size(), set.components.size(), ms);
    const auto t1 = std::chrono::steady_clock::now();
    std::fputs(FitSection(set).c_str(), stdout);
    std::printf("\n(fit + held-out fits %.0f ms)\n", std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t1).count());
  } catch (const dockyard::Error& e) {
    std::fprintf(stderr, "bench_fidelity: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
