// Calibration files (see calibration.h and docs/calibration.md).
#include "planner/calibration/calibration.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "planner/base/error.h"
#include "planner/base/digest.h"

namespace dockyard {
namespace {

constexpr CalibrationKnob::Stage kComponent = CalibrationKnob::kComponent;
constexpr CalibrationKnob::Stage kResidual = CalibrationKnob::kResidual;

// The one table of knobs, one line each: parsing, writing, DefaultCalibration, ApplyCalibration,
// docs/calibration.md and the fitter (planner/calibration/calibrate.h) iterate it. Columns: name, unit,
// Calibration field, the field it sets (ClusterSpec or CostOptions, the other nullptr), valid range
// (min exclusive when min_open), physical bounds the fitter keeps to (multiples of the prior when
// relative), fit stage, prior source. Physical bounds: efficiencies between a tenth and all of the
// peak, except the GEMM and attention ceilings: a large BF16 GEMM reaches 40-90 % of the dense
// peak (cuBLAS on H100/H800/B200; the grouped-GEMM ceiling 30-95 %, runs.json C18-C21) and flash
// attention 25-85 % (FlashAttention-2/3 forward and backward on H100) -- a fit that wants less is
// missing physics and says so by hitting the bound; a kernel floor between 0.5 and 100 us; grouped-GEMM half-rows between 8 and 4096 rows
// (testdata/fidelity C21: 29 % of peak at 128 rows); a link's effective bandwidth between a tenth
// and 1.25x the cluster's figure (the presets' figures are effective busbw, 370 of NVLink4's 450
// GB/s line rate: 1.22x); a latency between 0.2x and 10x the cluster's figure.
const CalibrationKnob kKnobs[] = {
    {"gemm_max_efficiency", "fraction of peak", &Calibration::gemm_max_efficiency, nullptr, &CostOptions::gemm_max_efficiency, 0, true, 1,
     0.3, 0.95, false, kComponent, "CostOptions::gemm_max_efficiency (planner/cost/cost.h); docs/cost-model.md, grouped GEMM"},
    {"gemm_half_rows", "rows", &Calibration::gemm_half_rows, nullptr, &CostOptions::gemm_half_rows, 0, true, 1e9, 8, 4096, false,
     kComponent, "CostOptions::gemm_half_rows (planner/cost/cost.h)"},
    {"dense_efficiency", "fraction of peak", &Calibration::dense_efficiency, nullptr, &CostOptions::dense_efficiency, 0, true, 1, 0.4, 0.9,
     false, kResidual, "CostOptions::dense_efficiency (planner/cost/cost.h)"},
    {"attention_efficiency", "fraction of peak", &Calibration::attention_efficiency, nullptr, &CostOptions::attention_efficiency, 0, true,
     1, 0.25, 0.85, false, kResidual, "CostOptions::attention_efficiency (planner/cost/cost.h)"},
    {"memory_floor_us", "us", &Calibration::memory_floor_us, nullptr, &CostOptions::memory_floor_us, 0, false, 1e6, 0.5, 100, false,
     kComponent, "CostOptions::memory_floor_us (planner/cost/cost.h)"},
    {"hbm_efficiency", "fraction of hbm_gbps", &Calibration::hbm_efficiency, nullptr, &CostOptions::hbm_efficiency, 0, true, 1, 0.1, 1.0,
     false, kComponent, "CostOptions::hbm_efficiency (planner/cost/cost.h); docs/cost-model.md, memory-bound kernels"},
    {"kernel_launch_us", "us", &Calibration::kernel_launch_us, nullptr, &CostOptions::kernel_launch_us, 0, false, 1e6, 0.5, 20, false,
     kComponent, "CostOptions::kernel_launch_us (planner/cost/cost.h)"},
    {"graph_launch_us", "us", &Calibration::graph_launch_us, nullptr, &CostOptions::graph_launch_us, 0, false, 1e6, 0.1, 10, false,
     kComponent, "CostOptions::graph_launch_us (planner/cost/cost.h)"},
    {"gemm_shape_efficiency", "fraction of peak", &Calibration::gemm_shape_efficiency, nullptr, &CostOptions::gemm_shape_efficiency, 0,
     true, 1, 0.1, 1.0, false, kComponent,
     "CostOptions::gemm_shape_efficiency (planner/cost/cost.h); docs/cost-model.md, GEMM efficiency by shape"},
    {"gemm_half_nk", "elements", &Calibration::gemm_half_nk, nullptr, &CostOptions::gemm_half_nk, 0, true, 1e9, 1, 4096, false, kComponent,
     "CostOptions::gemm_half_nk (planner/cost/cost.h)"},
    {"gemm_tile_rows", "rows", &Calibration::gemm_tile_rows, nullptr, &CostOptions::gemm_tile_rows, 1, false, 1e6, 16, 256, false,
     kComponent, "CostOptions::gemm_tile_rows (planner/cost/cost.h)"},
    {"flash_max_efficiency", "fraction of peak", &Calibration::flash_max_efficiency, nullptr, &CostOptions::flash_max_efficiency, 0, true,
     1, 0.1, 1.0, false, kComponent, "CostOptions::flash_max_efficiency (planner/cost/cost.h)"},
    {"flash_half_head_dim", "head dim", &Calibration::flash_half_head_dim, nullptr, &CostOptions::flash_half_head_dim, 0, true, 1e6, 1, 256,
     false, kComponent, "CostOptions::flash_half_head_dim (planner/cost/cost.h)"},
    {"flash_half_seq", "keys", &Calibration::flash_half_seq, nullptr, &CostOptions::flash_half_seq, 0, true, 1e9, 16, 16384, false,
     kComponent, "CostOptions::flash_half_seq (planner/cost/cost.h)"},
    {"flash_bwd_ratio", "ratio", &Calibration::flash_bwd_ratio, nullptr, &CostOptions::flash_bwd_ratio, 0, true, 1, 0.1, 1.0, false,
     kComponent, "CostOptions::flash_bwd_ratio (planner/cost/cost.h)"},
    {"fp8_efficiency_ratio", "ratio", &Calibration::fp8_efficiency_ratio, nullptr, &CostOptions::fp8_efficiency_ratio, 0, true, 1, 0.1, 1.0,
     false, kComponent, "CostOptions::fp8_efficiency_ratio (planner/cost/cost.h); docs/cost-model.md, precision"},
    {"intra_node_gbps", "GB/s", &Calibration::intra_node_gbps, &ClusterSpec::intra_node_gbps, nullptr, 0, true, 1e6, 0.1, 1.25, true,
     kComponent, "the preset's intra_node_gbps (docs/cluster.md)"},
    {"intra_node_latency_us", "us", &Calibration::intra_node_latency_us, &ClusterSpec::intra_node_latency_us, nullptr, 0, true, 1e6, 0.2,
     10, true, kComponent, "the preset's intra_node_latency_us (docs/cluster.md)"},
    {"network_gbps", "GB/s", &Calibration::network_gbps, &ClusterSpec::network_gbps, nullptr, 0, true, 1e6, 0.1, 1.25, true, kComponent,
     "the preset's network_gbps (docs/cluster.md)"},
    {"network_latency_us", "us", &Calibration::network_latency_us, &ClusterSpec::network_latency_us, nullptr, 0, true, 1e6, 0.2, 10, true,
     kComponent, "the preset's network_latency_us (docs/cluster.md)"},
    {"flex_nvlink_efficiency", "fraction of link", &Calibration::flex_nvlink_efficiency, nullptr, &CostOptions::flex_nvlink_efficiency, 0,
     true, 1, 0.1, 1.0, false, kComponent,
     "CostOptions::flex_nvlink_efficiency (planner/cost/cost.h): DeepEP issue #493, 133.78 GB/s NVLink dispatch / 370"},
    {"flex_network_efficiency", "fraction of link", &Calibration::flex_network_efficiency, nullptr, &CostOptions::flex_network_efficiency,
     0, true, 1, 0.1, 1.0, false, kComponent,
     "CostOptions::flex_network_efficiency (planner/cost/cost.h): DeepEP issue #493, 40.89 GB/s RDMA dispatch / 48"},
};

}  // namespace

std::vector<CalibrationKnob> CalibrationKnobs() {
  return {std::begin(kKnobs), std::end(kKnobs)};
}

void ApplyKnob(const CalibrationKnob& k, double value, ClusterSpec* cluster, CostOptions* options) {
  if (k.cluster_field != nullptr && cluster != nullptr) cluster->*k.cluster_field = value;
  if (k.options_field != nullptr && options != nullptr) options->*k.options_field = value;
}

Calibration DefaultCalibration(const std::string& preset) {
  const ClusterSpec c = ClusterPreset(preset);
  const CostOptions o;
  Calibration cal;
  cal.name = preset + "-prior";
  cal.preset = preset;
  cal.description =
      "the knobs dockyard uses without a calibration file (CostOptions defaults and the " + preset + " preset); priors, not fitted";
  for (const CalibrationKnob& k : kKnobs) cal.*k.field = k.cluster_field != nullptr ? c.*k.cluster_field : o.*k.options_field;
  return cal;
}

Calibration CalibrationFromJson(const Json& json, const std::string& file) {
  JsonView v(&json, file, "");
  v.RejectUnknownKeys({"format", "version", "name", "preset", "description", "knobs"});
  const std::string format = v.String("format");
  if (format != "dockyard-calibration") v.Fail("format", fmt::format("must be \"dockyard-calibration\", got \"{}\"", format));
  const int64_t version = v.Int("version");
  if (version != 1) v.Fail("version", fmt::format("unsupported version {}; this dockyard reads version 1", version));
  Calibration cal;
  cal.name = v.String("name");
  if (cal.name.empty()) v.Fail("name", "must not be empty");
  cal.preset = v.String("preset");
  try {
    ClusterPreset(cal.preset);
  } catch (const Error& e) {
    v.Fail("preset", e.what());
  }
  cal.description = v.StringOr("description", "");
  const JsonView knobs = v.Object("knobs");
  std::vector<std::string> names;
  for (const CalibrationKnob& k : kKnobs) names.push_back(k.name);
  knobs.RejectUnknownKeys(names);
  for (const CalibrationKnob& k : kKnobs) {
    const JsonView knob = knobs.Object(k.name);
    knob.RejectUnknownKeys({"value", "source"});
    const double x = knob.Number("value");
    const bool low_ok = k.min_open ? x > k.min : x >= k.min;
    if (!low_ok || !(x <= k.max)) {
      knob.Fail("value", fmt::format("must be in {}{}, {}], got {}", k.min_open ? "(" : "[", k.min, k.max, x));
    }
    cal.*k.field = x;
    if (knob.Has("source")) cal.knob_sources[k.name] = knob.String("source");
  }
  return cal;
}

Calibration LoadCalibration(const std::string& path) {
  Json json;
  try {
    json = ReadJsonFile(path);  // size, type and parse checks
  } catch (const Error& e) {
    throw Error(fmt::format("calibration file {}", e.what()));  // names what the path was given as
  }
  std::ifstream in(path, std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  if (!in) throw Error(fmt::format("{}: cannot be read", path));
  Calibration cal = CalibrationFromJson(json, path);
  cal.file = path;
  cal.sha256 = Sha256Hex(bytes.str());
  return cal;
}

void ApplyCalibration(const Calibration& cal, ClusterSpec* cluster, CostOptions* options) {
  const std::vector<std::string> presets = ClusterPresetNames();
  if (std::find(presets.begin(), presets.end(), cluster->name) != presets.end() && cluster->name != cal.preset) {
    throw Error(fmt::format("calibration \"{}\" is for preset \"{}\", the cluster is preset \"{}\"", cal.name, cal.preset, cluster->name));
  }
  for (const CalibrationKnob& k : kKnobs) ApplyKnob(k, cal.*k.field, cluster, options);
}

Json CalibrationToJson(const Calibration& cal) {
  Json knobs = Json::object();
  for (const CalibrationKnob& k : kKnobs) {
    const auto src = cal.knob_sources.find(k.name);
    knobs[k.name] = Json{{"value", cal.*k.field}, {"source", src != cal.knob_sources.end() ? src->second : k.source}};
  }
  return Json{{"format", "dockyard-calibration"}, {"version", 1},  {"name", cal.name}, {"preset", cal.preset},
              {"description", cal.description},   {"knobs", knobs}};
}

Json CalibrationRefToJson(const Calibration& cal) {
  return Json{{"name", cal.name}, {"preset", cal.preset}, {"file", cal.file}, {"sha256", cal.sha256}};
}

}  // namespace dockyard
