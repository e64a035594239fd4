// Calibration files: the efficiencies, effective link bandwidths, latencies and kernel floors the
// cost model uses, in one documented, versioned JSON per hardware preset (calibration/*.json,
// docs/calibration.md). Datasheet figures (peak TFLOP/s, HBM bandwidth, memory, GPUs per node)
// stay in the preset; framework features (shared-expert overlap, ...) are settings of a run, not
// knobs.
//
// Format (version 1), every knob required, no other key accepted:
//   {"format": "dockyard-calibration", "version": 1, "name": "h100-sxm-prior", "preset": "h100-sxm",
//    "description": "...",
//    "knobs": {"gemm_max_efficiency": {"value": 0.80, "source": "..."}, ...}}
// The knobs (units and ranges):
//   gemm_max_efficiency   (0, 1]  grouped-GEMM efficiency ceiling: eff(M) = max * M / (M + half_rows)
//   gemm_half_rows        > 0     rows of one expert at which eff(M) is half the ceiling
//   dense_efficiency      (0, 1]  large dense GEMMs (attention projections, dense MLP, router, lm_head)
//   attention_efficiency  (0, 1]  flash-attention core
//   memory_floor_us       >= 0    fixed cost of a memory-bound kernel (permute, top-k), us
//   hbm_efficiency        (0, 1]  fraction of the HBM bandwidth a memory-bound kernel moves (--compute-model kernels)
//   kernel_launch_us      >= 0    exposed host gap per kernel launch, eager (--compute-model kernels), us
//   graph_launch_us       >= 0    the same inside a CUDA graph (--cuda-graphs), us
//   gemm_shape_efficiency (0, 1]  GEMM-by-shape ceiling (--compute-model kernels; gemm_efficiency.h)
//   gemm_half_nk          > 0     N or K at which the GEMM's N / K factor is one half
//   gemm_tile_rows        >= 1    rows of a grouped-GEMM tile
//   flash_max_efficiency  (0, 1]  flash-attention forward ceiling
//   flash_half_head_dim   > 0     head dim at which its factor is one half
//   flash_half_seq        > 0     attended keys at which their factor is one half
//   flash_bwd_ratio       (0, 1]  flash backward efficiency / forward efficiency
//   fp8_efficiency_ratio  (0, 1]  FP8 GEMM efficiency / BF16 efficiency of the same shape (--precision fp8)
//   intra_node_gbps       > 0     NVLink bandwidth a collective sees, per direction, GB/s
//   intra_node_latency_us >= 0    per collective step inside a node, us
//   network_gbps          > 0     network bandwidth per GPU, per direction, GB/s
//   network_latency_us    >= 0    per collective step across nodes, us
//   flex_nvlink_efficiency  (0, 1]  deepep dispatcher: fraction of intra_node_gbps its kernels reach
//   flex_network_efficiency (0, 1]  deepep dispatcher: fraction of network_gbps its RDMA sends reach
#pragma once

#include <map>
#include <string>
#include <vector>

#include "planner/cost/cluster.h"
#include "planner/cost/cost.h"
#include "planner/base/json_util.h"

namespace dockyard {

struct Calibration {
  std::string name;
  std::string preset;  // the hardware preset it was made for
  std::string description;
  std::string file;    // where it was read from ("" for DefaultCalibration)
  std::string sha256;  // SHA-256 of the file's bytes ("" for DefaultCalibration)
  // CostOptions knobs.
  double gemm_max_efficiency = 0, gemm_half_rows = 0, dense_efficiency = 0, attention_efficiency = 0, memory_floor_us = 0;
  double flex_nvlink_efficiency = 0, flex_network_efficiency = 0;  // deepep dispatcher
  double hbm_efficiency = 0, kernel_launch_us = 0, graph_launch_us = 0;
  double gemm_shape_efficiency = 0, gemm_half_nk = 0, gemm_tile_rows = 0, flash_max_efficiency = 0, flash_half_head_dim = 0,
         flash_half_seq = 0, flash_bwd_ratio = 0, fp8_efficiency_ratio = 0;
  // ClusterSpec knobs.
  double intra_node_gbps = 0, intra_node_latency_us = 0, network_gbps = 0, network_latency_us = 0;
  // Knob name -> source written instead of the table's prior source (a fitted value says how it
  // was fitted); read back from a file's "source" fields.
  std::map<std::string, std::string> knob_sources;
};

// One row of the knob table (calibration.cc kKnobs: the one list parsing, writing, the defaults,
// ApplyCalibration, docs/calibration.md and the fitter iterate). A knob sets exactly one field of
// ClusterSpec or CostOptions. Valid range: what a file may hold; physical bounds [lower, upper]:
// what the fitter (planner/calibration/calibrate.h) keeps to. Stage: fitted from component measurements and
// dockyard-run phase timings (kComponent) or from whole-step rows (kResidual, at most about five).
struct CalibrationKnob {
  enum Stage { kComponent, kResidual };
  const char* name;
  const char* unit;
  double Calibration::*field;
  double ClusterSpec::*cluster_field;  // nullptr when the knob sets CostOptions
  double CostOptions::*options_field;  // nullptr when the knob sets ClusterSpec
  double min;                          // exclusive when min_open, else inclusive
  bool min_open;
  double max;           // inclusive
  double lower, upper;  // physical bounds (inside the valid range)
  bool relative;        // lower and upper are multiples of the prior value (cluster figures)
  Stage stage;
  const char* source;  // where the prior value comes from
};
std::vector<CalibrationKnob> CalibrationKnobs();
// Sets knob `k` to `value` on `cluster` or `options` (whichever it belongs to; either may be nullptr).
void ApplyKnob(const CalibrationKnob& k, double value, ClusterSpec* cluster, CostOptions* options);

// The knobs dockyard uses without a calibration file: CostOptions{} and ClusterPreset(preset).
// Named "<preset>-prior". Throws dockyard::Error for an unknown preset.
Calibration DefaultCalibration(const std::string& preset);

// Parses a calibration; `file` names it in errors ("cal.json: /knobs/dense_efficiency: must be in
// (0, 1], got 1.4"). Throws dockyard::Error for a wrong format or version, a missing or unknown
// knob, a value out of range, an unknown preset.
Calibration CalibrationFromJson(const Json& json, const std::string& file);
// Reads `path` (ReadJsonFile's checks) and records its SHA-256.
Calibration LoadCalibration(const std::string& path);

// Sets the knobs on `cluster` and `options`. Throws dockyard::Error when `cluster` is a preset
// (its name is one of ClusterPresetNames) other than calibration.preset.
void ApplyCalibration(const Calibration& calibration, ClusterSpec* cluster, CostOptions* options);

// The file format (with each knob's source), for writing a calibration.
Json CalibrationToJson(const Calibration& calibration);
// What a report names: {"name", "preset", "file", "sha256"}.
Json CalibrationRefToJson(const Calibration& calibration);

}  // namespace dockyard
