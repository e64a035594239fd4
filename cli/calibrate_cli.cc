// `dockyard-plan calibrate` (see calibrate_cli.h).
#include "cli/calibrate_cli.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "planner/calibration/calibrate.h"
#include "planner/calibration/calibration.h"
#include "planner/cost/compute_model.h"
#include "planner/base/digest.h"
#include "planner/base/error.h"
#include "planner/base/file_util.h"
#include "planner/calibration/fidelity.h"

namespace dockyard {

namespace {

// Refuses a run without --runs or --out, and an --out that is one of the inputs or cannot be
// written (checked before the fit, not after it).
void CheckCalibrateFiles(const CalibrateOptions& o) {
  if (o.runs.empty()) throw Error("calibrate: give at least one --runs FILE");
  if (o.out.empty()) throw Error("calibrate: --out CAL.json is required");
  std::vector<std::string> inputs = o.runs;
  inputs.push_back(o.from);
  inputs.push_back(o.cluster);
  RejectOutputOverInputs(o.out, "--out", inputs);
  CheckOutputPath(o.out, "--out");  // before the fit, not after it
}

// The calibration the priors come from: --from (whose preset must be --preset's when both are
// given), else the built-in one of --preset (default h100-sxm).
Calibration PriorCalibration(const CalibrateOptions& o) {
  Calibration prior;
  if (!o.from.empty()) {
    prior = WithFlag("--from", [&] { return LoadCalibration(o.from); });
    if (!o.preset.empty() && o.preset != prior.preset) {
      throw Error(fmt::format("--from {} is a calibration for preset \"{}\", --preset is \"{}\"", o.from, prior.preset, o.preset));
    }
  } else {
    prior = DefaultCalibration(o.preset.empty() ? "h100-sxm" : o.preset);
  }
  return prior;
}

// Puts `prior`'s cluster knobs on `hardware` (the preset's cluster) or, with --cluster, on that
// cluster; without --from, a --cluster's own figures become the cluster knobs' priors.
void ApplyCalibrateHardware(const CalibrateOptions& o, Calibration* prior, ClusterSpec* hardware) {
  ApplyCalibration(*prior, hardware);
  if (!o.cluster.empty()) {
    *hardware = WithFlag("--cluster", [&] { return LoadCluster(o.cluster); });
    // The cluster's own link figures are the priors; with --from, the calibration's apply to it.
    if (o.from.empty()) prior->knobs.links = hardware->knobs.links;
    ApplyCalibration(*prior, hardware);
  }
}

// The fit's rows of every --runs file (a runs file or a dockyard-run --json report); the runs,
// phases and components left out go to `skipped`. Throws when a file is neither kind, or when no
// row is left (listing what was left out).
std::vector<CalibrationRow> CalibrateRows(const CalibrateOptions& o, const std::string& preset, const ClusterSpec& hardware,
                                          ComputeModel model, std::vector<std::pair<std::string, std::string>>* skipped) {
  std::vector<CalibrationRow> rows;
  std::map<std::string, std::string> file_of;  // row id -> the --runs file it came from
  for (const std::string& path : o.runs) {
    const Json json = WithFlag("--runs", [&] { return ReadJsonFile(path); });
    std::vector<CalibrationRow> more;
    if (json.is_object() && json.contains("kind") && json.at("kind") == "dockyard_run") {
      more = RowsFromRunReport(json, path, hardware, skipped, model);
    } else if (json.is_object() && json.contains("runs")) {
      const size_t slash = path.rfind('/');
      const FidelitySet set = FidelitySetFromJson(json, path, slash == std::string::npos ? "." : path.substr(0, slash));
      more = RowsFromFidelitySet(set, preset, skipped, o.cluster.empty() ? preset : hardware.name, model);
    } else {
      throw Error(
          fmt::format("{}: neither a runs file (a \"runs\" list, testdata/fidelity/README.md) nor a dockyard-run --json "
                      "report (\"kind\": \"dockyard_run\")",
                      path));
    }
    // A run or measurement counted twice would count as two independent rows: refused.
    for (const CalibrationRow& r : more) {
      const auto [at, added] = file_of.emplace(r.id, path);
      if (!added) {
        throw Error(fmt::format("--runs: row \"{}\" appears in {} and again in {}{}: give each run and measurement once", r.id,
                                at->second, path, at->second == path ? " (the same file given twice)" : ""));
      }
    }
    rows.insert(rows.end(), more.begin(), more.end());
  }
  if (rows.empty()) {
    std::string why;
    for (const auto& [id, reason] : *skipped) why += fmt::format("\n  {}: {}", id, reason);
    throw Error(fmt::format("calibrate: the --runs files hold no row a knob models{}",
                            skipped->empty() ? " (no runs, no component measurements, no phases)" : "; left out:" + why));
  }
  return rows;
}

// `prior` with the fitted knob values, named (--name, else "<preset or cluster>-fitted") and
// described after the --runs files, with a source for every fitted knob; file and sha256 cleared.
Calibration FittedCalibration(const CalibrateOptions& o, const Calibration& prior, const CalibrationFit& fit, const std::string& preset,
                              const ClusterSpec& hardware) {
  Calibration fitted = prior;
  SetKnobValues(fit.values, &fitted);
  // A calibration fitted on a cluster JSON (e.g. the CPU backend) is named after that cluster, so
  // that it is not mistaken for the preset's.
  fitted.name = !o.name.empty() ? o.name : (o.cluster.empty() ? preset : hardware.name) + "-fitted";
  // Each --runs file with the SHA-256 of its bytes: the measurements the knobs came from.
  std::string files;
  for (const std::string& p : o.runs) {
    std::ifstream in(p, std::ios::binary);
    std::ostringstream bytes;
    bytes << in.rdbuf();
    files += fmt::format("{}{} (sha256 {})", files.empty() ? "" : ", ", p, Sha256Hex(bytes.str()));
  }
  fitted.description = fmt::format("fitted by dockyard-plan calibrate from {} (priors: {}{})", files, prior.name,
                                   o.cluster.empty() ? "" : ", cluster " + o.cluster);
  fitted.file.clear();
  fitted.sha256.clear();
  // A knob these rows did not fit keeps what it came with: its value (SetKnobValues, the prior's),
  // its source and an earlier fit's 80 % interval (a chained refit); a fitted one gets its own.
  for (const FittedKnob& k : fit.knobs) {
    if (!k.determined) continue;
    fitted.knob_intervals[k.knob.Path()] = {std::min(k.low80, k.value), std::max(k.high80, k.value)};
    fitted.knob_sources[k.knob.Path()] =
        fmt::format("fitted by dockyard-plan calibrate ({} stage) from {}; prior {} ({}); 80 % interval [{:.4g}, {:.4g}]",
                    k.stage == KnobSpec::kComponent ? "component" : "step", files, k.prior, KnobSource(prior, k.knob), k.low80, k.high80);
  }
  return fitted;
}

}  // namespace

int RunCalibrate(const CalibrateOptions& o, std::ostream& out) {
  CheckCalibrateFiles(o);
  Calibration prior = PriorCalibration(o);
  const std::string preset = prior.preset;
  // The hardware of the dockyard-run reports; without --from, a --cluster's figures are the
  // cluster knobs' priors.
  ClusterSpec hardware = ClusterPreset(preset);
  ComputeModel model = ComputeModel::kKernels;
  RunSettings unused_run;  // calibrate takes no run setting: each run's are its own
  ApplyComputeModel(o.compute_model, false, &model, &unused_run);
  ApplyCalibrateHardware(o, &prior, &hardware);

  std::vector<std::pair<std::string, std::string>> skipped;
  const std::vector<CalibrationRow> rows = CalibrateRows(o, preset, hardware, model, &skipped);
  const std::vector<double> prior_values = KnobValues(prior);
  const CalibrationFit fit = FitCalibration(rows, prior_values);
  // A group-held-out figure needs a group to hold out and another to fit on.
  std::set<std::string> step_groups;
  for (const CalibrationRow& r : rows) {
    if (r.stage == KnobSpec::kResidual) step_groups.insert(r.group);
  }
  const std::map<std::string, double> held_out =
      step_groups.size() >= 2 ? HeldOutErrors(rows, prior_values, [](const CalibrationRow& r) { return r.group; })
                              : std::map<std::string, double>{};

  const Calibration fitted = FittedCalibration(o, prior, fit, preset, hardware);
  const std::string text = CalibrationToJson(fitted).dump(1) + "\n";
  CalibrationFromJson(CalibrationToJson(fitted), o.out);  // the file must load back

  out << fmt::format("Calibration fit for preset {} ({} rows; priors {})\n\n", preset, rows.size(), prior.name);
  out << CalibrationFitToText(rows, fit, step_groups.size() >= 2 ? &held_out : nullptr);
  if (step_groups.size() < 2) {
    out << fmt::format("group-held-out error: not computed ({} group of whole-step rows; it needs two or more)\n", step_groups.size());
  }
  if (!skipped.empty()) {
    out << "\nLeft out of the fit:\n";
    for (const auto& [id, why] : skipped) out << fmt::format("  {}: {}\n", id, why);
  }
  // A file that changes nothing would pass the priors off as a calibration: refused.
  if (std::none_of(fit.knobs.begin(), fit.knobs.end(), [](const FittedKnob& k) { return k.determined && k.value != k.prior; })) {
    const int64_t pinned = std::count_if(fit.knobs.begin(), fit.knobs.end(), [](const FittedKnob& k) { return k.determined; });
    out << fmt::format(
        "\ncalibrate: nothing written to {}: {}. What determines more: a component measurement (runs.json \"components\"), a run "
        "of another layout or at another micro-batch count (the per-step overhead against the per-micro-batch time), or a "
        "dockyard-run report's phases; rows the model cannot match in shape (errors beyond their noise in opposite "
        "directions) move no knob: the table above shows them.\n",
        o.out,
        pinned == 0 ? "the rows pin no knob better than its prior"
                    : fmt::format("the rows pin {} knob(s) at their priors, so the file would change nothing", pinned));
    return 1;
  }
  WriteFileAtomically(o.out, text);
  out << fmt::format("\nCalibration written to {}\n", o.out);
  return 0;
}

}  // namespace dockyard
