// `dockyard-plan calibrate` (see calibrate_cli.h).
#include "cli/calibrate_cli.h"

#include <fmt/format.h>

#include "planner/sim/calibrate.h"
#include "planner/sim/calibration.h"
#include "planner/sim/compute_model.h"
#include "planner/base/error.h"
#include "planner/base/file_util.h"
#include "planner/sim/fidelity.h"

namespace dockyard {

int RunCalibrate(const CalibrateOptions& o, std::ostream& out) {
  if (o.runs.empty()) throw Error("calibrate: give at least one --runs FILE");
  if (o.out.empty()) throw Error("calibrate: --out CAL.json is required");
  std::vector<std::string> inputs = o.runs;
  inputs.push_back(o.from);
  inputs.push_back(o.cluster);
  RejectOutputOverInputs(o.out, "--out", inputs);
  CheckOutputPath(o.out, "--out");  // before the fit, not after it

  Calibration prior;
  if (!o.from.empty()) {
    prior = LoadCalibration(o.from);
    if (!o.preset.empty() && o.preset != prior.preset) {
      throw Error(fmt::format("--from {} is a calibration for preset \"{}\", --preset is \"{}\"", o.from, prior.preset, o.preset));
    }
  } else {
    prior = DefaultCalibration(o.preset.empty() ? "h100-sxm" : o.preset);
  }
  const std::string preset = prior.preset;
  // The hardware of the dockyard-run reports; without --from, a --cluster's figures are the
  // cluster knobs' priors.
  ClusterSpec hardware = ClusterPreset(preset);
  CostOptions unused, options;
  ApplyComputeModel(o.compute_model, false, "unfused", &options);
  ApplyCalibration(prior, &hardware, &unused);
  if (!o.cluster.empty()) {
    hardware = LoadCluster(o.cluster);
    if (o.from.empty()) {  // the cluster's own figures are the priors; with --from, the calibration's apply to it
      for (const CalibrationKnob& k : CalibrationKnobs()) {
        if (k.cluster_field != nullptr) prior.*k.field = hardware.*k.cluster_field;
      }
    }
    ApplyCalibration(prior, &hardware, &unused);
  }

  std::vector<CalibrationRow> rows;
  std::vector<std::pair<std::string, std::string>> skipped;
  for (const std::string& path : o.runs) {
    const Json json = ReadJsonFile(path);
    std::vector<CalibrationRow> more;
    if (json.is_object() && json.contains("kind") && json.at("kind") == "dockyard_run") {
      more = RowsFromRunReport(json, path, hardware, &skipped, options);
    } else if (json.is_object() && json.contains("runs")) {
      const size_t slash = path.rfind('/');
      const FidelitySet set = FidelitySetFromJson(json, path, slash == std::string::npos ? "." : path.substr(0, slash));
      more = RowsFromFidelitySet(set, preset, &skipped, o.cluster.empty() ? preset : hardware.name, options);
    } else {
      throw Error(
          fmt::format("{}: neither a runs file (a \"runs\" list, testdata/fidelity/README.md) nor a dockyard-run --json "
                      "report (\"kind\": \"dockyard_run\")",
                      path));
    }
    rows.insert(rows.end(), more.begin(), more.end());
  }
  if (rows.empty()) {
    std::string why;
    for (const auto& [id, reason] : skipped) why += fmt::format("\n  {}: {}", id, reason);
    throw Error(fmt::format("calibrate: the --runs files hold no row a knob models{}",
                            skipped.empty() ? " (no runs, no component measurements, no phases)" : "; left out:" + why));
  }

  const std::vector<double> prior_values = KnobValues(prior);
  const CalibrationFit fit = FitCalibration(rows, prior_values);
  const std::map<std::string, double> held_out = HeldOutErrors(rows, prior_values, [](const CalibrationRow& r) { return r.group; });

  Calibration fitted = prior;
  SetKnobValues(fit.values, &fitted);
  // A calibration fitted on a cluster JSON (e.g. the CPU backend) is named after that cluster, so
  // that it is not mistaken for the preset's.
  fitted.name = !o.name.empty() ? o.name : (o.cluster.empty() ? preset : hardware.name) + "-fitted";
  std::string files;
  for (const std::string& p : o.runs) files += (files.empty() ? "" : ", ") + p;
  fitted.description = fmt::format("fitted by dockyard-plan calibrate from {} (priors: {}{})", files, prior.name,
                                   o.cluster.empty() ? "" : ", cluster " + o.cluster);
  fitted.file.clear();
  fitted.sha256.clear();
  for (const FittedKnob& k : fit.knobs) {
    if (!k.determined) continue;
    fitted.knob_sources[k.knob.name] =
        fmt::format("fitted by dockyard-plan calibrate ({} stage) from {}; prior {} ({})",
                    k.knob.stage == CalibrationKnob::kComponent ? "component" : "residual", files, k.prior, k.knob.source);
  }
  const std::string text = CalibrationToJson(fitted).dump(1) + "\n";
  CalibrationFromJson(CalibrationToJson(fitted), o.out);  // the file must load back

  out << fmt::format("Calibration fit for preset {} ({} rows; priors {})\n\n", preset, rows.size(), prior.name);
  out << CalibrationFitToText(rows, fit, &held_out);
  if (!skipped.empty()) {
    out << "\nLeft out of the fit:\n";
    for (const auto& [id, why] : skipped) out << fmt::format("  {}: {}\n", id, why);
  }
  WriteFileAtomically(o.out, text);
  out << fmt::format("\nCalibration written to {}\n", o.out);
  return 0;
}

}  // namespace dockyard
