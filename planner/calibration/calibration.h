// Calibration files: the cost model's knobs (planner/cost/knobs.h: efficiencies, effective link
// figures, latencies, kernel floors) in one documented, versioned JSON per hardware preset
// (calibration/*.json, docs/calibration.md). A file holds the knobs and nothing else: datasheet
// figures (peak TFLOP/s, HBM bandwidth, memory, GPUs per node) stay in the preset; framework
// features (shared-expert overlap, CUDA graphs, ...) are settings of a run.
//
// Format (version 2, written), every knob required, no other key accepted; each knob sits in the
// object of its table section (KnobSpec::section):
//   {"format": "dockyard-calibration", "version": 2, "name": "h100-sxm-prior", "preset": "h100-sxm",
//    "description": "...",
//    "knobs": {"compute": {"gemm": {"shape_efficiency": {"value": 0.72, "source": "..."}, ...},
//    (a fitted knob may also hold "interval80": [lo, hi], its 80 % interval from calibrate)
//                          "flash": {...}, "memory_bound": {...}},
//              "dispatchers": {"deepep": {...}},
//              "links": {"intra_node_gbps": {...}, ...}}}
// Version 1 (read): "knobs" one flat object of the version-1 keys (KnobSpec::v1_name:
// "gemm_max_efficiency", "flex_nvlink_efficiency", ...). The knobs, their units, ranges, bounds
// and sources: the knob table, knobs.cc KnobTable (listed in docs/calibration.md).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "planner/base/json_util.h"
#include "planner/cost/cluster.h"
#include "planner/cost/knobs.h"

namespace dockyard {

// The version CalibrationToJson writes.
constexpr int kCalibrationVersion = 2;

struct Calibration {
  std::string name;
  std::string preset;  // the hardware preset it was made for
  std::string description;
  std::string file;    // where it was read from ("" for DefaultCalibration)
  std::string sha256;  // SHA-256 of the file's bytes ("" for DefaultCalibration)
  Knobs knobs;
  // Knob path (KnobSpec::Path) -> source written instead of the table's prior source (a fitted
  // value says how it was fitted); read back from a file's "source" fields.
  std::map<std::string, std::string> knob_sources;
  // Knob path -> the 80 % interval calibrate gave a fitted knob (lo <= value <= hi); a file's
  // optional "interval80": [lo, hi] beside the knob's value. Reports name them
  // (CalibrationRefToJson).
  std::map<std::string, std::pair<double, double>> knob_intervals;
};

// The knobs dockyard uses without a calibration file: ClusterPreset(preset).knobs. Named
// "<preset>-prior". Throws dockyard::Error for an unknown preset.
Calibration DefaultCalibration(const std::string& preset);

// Parses a calibration of version 1 or 2; `file` names it in errors ("cal.json:
// /knobs/compute/gemm/dense_efficiency/value: must be in (0, 1], got 1.4"). Throws
// dockyard::Error for a wrong format or version, a missing or unknown knob, a value out of range,
// an unknown preset.
Calibration CalibrationFromJson(const Json& json, const std::string& file);
// Reads `path` (ReadJsonFile's checks) and records its SHA-256.
Calibration LoadCalibration(const std::string& path);

// Sets the cluster's knobs to the calibration's. Throws dockyard::Error when `cluster` is a preset
// (its name is one of ClusterPresetNames) other than calibration.preset.
// Also sets cluster->compute_source to name the calibration (its name and file), which the
// reports print on the Cluster line.
void ApplyCalibration(const Calibration& calibration, ClusterSpec* cluster);

// Where knob `k`'s value in `calibration` comes from: its recorded source (a file's, a fit's); else,
// where the preset's built-in value differs from the Hopper prior of knobs.h, the preset's figure
// (whose source, measured or borrowed, cluster.cc and the shipped calibration file give); else the
// knob table's source.
std::string KnobSource(const Calibration& calibration, const KnobSpec& k);
// The file format (version kCalibrationVersion, with each knob's source), for writing a calibration.
Json CalibrationToJson(const Calibration& calibration);
// What a report names: {"name", "preset", "file", "sha256"}, and with fitted intervals
// "fitted": {path: {"value", "interval80": [lo, hi]}}.
Json CalibrationRefToJson(const Calibration& calibration);

}  // namespace dockyard
