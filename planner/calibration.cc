// Calibration files (see calibration.h and docs/calibration.md).
#include "planner/calibration.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "planner/error.h"
#include "planner/provenance.h"

namespace dockyard {
namespace {

struct Knob {
  const char* name;
  double Calibration::*field;
  double min;          // exclusive when min_open, else inclusive
  bool min_open;
  double max;          // inclusive
  const char* source;  // where the prior value comes from
};

// The one list of knobs: their fields, ranges and the home of their prior values.
const Knob kKnobs[] = {
    {"gemm_max_efficiency", &Calibration::gemm_max_efficiency, 0, true, 1,
     "CostOptions::gemm_max_efficiency (planner/cost.h); docs/cost-model.md, grouped GEMM"},
    {"gemm_half_rows", &Calibration::gemm_half_rows, 0, true, 1e9, "CostOptions::gemm_half_rows (planner/cost.h)"},
    {"dense_efficiency", &Calibration::dense_efficiency, 0, true, 1, "CostOptions::dense_efficiency (planner/cost.h)"},
    {"attention_efficiency", &Calibration::attention_efficiency, 0, true, 1,
     "CostOptions::attention_efficiency (planner/cost.h)"},
    {"memory_floor_us", &Calibration::memory_floor_us, 0, false, 1e6, "CostOptions::memory_floor_us (planner/cost.h)"},
    {"hbm_efficiency", &Calibration::hbm_efficiency, 0, true, 1,
     "CostOptions::hbm_efficiency (planner/cost.h); docs/cost-model.md, memory-bound kernels"},
    {"kernel_launch_us", &Calibration::kernel_launch_us, 0, false, 1e6, "CostOptions::kernel_launch_us (planner/cost.h)"},
    {"graph_launch_us", &Calibration::graph_launch_us, 0, false, 1e6, "CostOptions::graph_launch_us (planner/cost.h)"},
    {"gemm_shape_efficiency", &Calibration::gemm_shape_efficiency, 0, true, 1,
     "CostOptions::gemm_shape_efficiency (planner/cost.h); docs/cost-model.md, GEMM efficiency by shape"},
    {"gemm_half_nk", &Calibration::gemm_half_nk, 0, true, 1e9, "CostOptions::gemm_half_nk (planner/cost.h)"},
    {"gemm_tile_rows", &Calibration::gemm_tile_rows, 1, false, 1e6, "CostOptions::gemm_tile_rows (planner/cost.h)"},
    {"flash_max_efficiency", &Calibration::flash_max_efficiency, 0, true, 1, "CostOptions::flash_max_efficiency (planner/cost.h)"},
    {"flash_half_head_dim", &Calibration::flash_half_head_dim, 0, true, 1e6, "CostOptions::flash_half_head_dim (planner/cost.h)"},
    {"flash_half_seq", &Calibration::flash_half_seq, 0, true, 1e9, "CostOptions::flash_half_seq (planner/cost.h)"},
    {"flash_bwd_ratio", &Calibration::flash_bwd_ratio, 0, true, 1, "CostOptions::flash_bwd_ratio (planner/cost.h)"},
    {"fp8_efficiency_ratio", &Calibration::fp8_efficiency_ratio, 0, true, 1,
     "CostOptions::fp8_efficiency_ratio (planner/cost.h); docs/cost-model.md, precision"},
    {"intra_node_gbps", &Calibration::intra_node_gbps, 0, true, 1e6, "the preset's intra_node_gbps (docs/cluster.md)"},
    {"intra_node_latency_us", &Calibration::intra_node_latency_us, 0, true, 1e6,
     "the preset's intra_node_latency_us (docs/cluster.md)"},
    {"network_gbps", &Calibration::network_gbps, 0, true, 1e6, "the preset's network_gbps (docs/cluster.md)"},
    {"network_latency_us", &Calibration::network_latency_us, 0, true, 1e6, "the preset's network_latency_us (docs/cluster.md)"},
};

}  // namespace

Calibration DefaultCalibration(const std::string& preset) {
  const ClusterSpec c = ClusterPreset(preset);
  const CostOptions o;
  Calibration cal;
  cal.name = preset + "-prior";
  cal.preset = preset;
  cal.description = "the knobs dockyard uses without a calibration file (CostOptions defaults and the " + preset +
                    " preset); priors, not fitted";
  cal.gemm_max_efficiency = o.gemm_max_efficiency;
  cal.gemm_half_rows = o.gemm_half_rows;
  cal.dense_efficiency = o.dense_efficiency;
  cal.attention_efficiency = o.attention_efficiency;
  cal.memory_floor_us = o.memory_floor_us;
  cal.hbm_efficiency = o.hbm_efficiency;
  cal.kernel_launch_us = o.kernel_launch_us;
  cal.graph_launch_us = o.graph_launch_us;
  cal.gemm_shape_efficiency = o.gemm_shape_efficiency;
  cal.gemm_half_nk = o.gemm_half_nk;
  cal.gemm_tile_rows = o.gemm_tile_rows;
  cal.flash_max_efficiency = o.flash_max_efficiency;
  cal.flash_half_head_dim = o.flash_half_head_dim;
  cal.flash_half_seq = o.flash_half_seq;
  cal.flash_bwd_ratio = o.flash_bwd_ratio;
  cal.fp8_efficiency_ratio = o.fp8_efficiency_ratio;
  cal.intra_node_gbps = c.intra_node_gbps;
  cal.intra_node_latency_us = c.intra_node_latency_us;
  cal.network_gbps = c.network_gbps;
  cal.network_latency_us = c.network_latency_us;
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
  for (const Knob& k : kKnobs) names.push_back(k.name);
  knobs.RejectUnknownKeys(names);
  for (const Knob& k : kKnobs) {
    const JsonView knob = knobs.Object(k.name);
    knob.RejectUnknownKeys({"value", "source"});
    const double x = knob.Number("value");
    const bool low_ok = k.min_open ? x > k.min : x >= k.min;
    if (!low_ok || !(x <= k.max)) {
      knob.Fail("value", fmt::format("must be in {}{}, {}], got {}", k.min_open ? "(" : "[", k.min, k.max, x));
    }
    cal.*k.field = x;
  }
  return cal;
}

Calibration LoadCalibration(const std::string& path) {
  const Json json = ReadJsonFile(path);  // size, type and parse checks
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
    throw Error(fmt::format("calibration \"{}\" is for preset \"{}\", the cluster is preset \"{}\"", cal.name, cal.preset,
                            cluster->name));
  }
  options->gemm_max_efficiency = cal.gemm_max_efficiency;
  options->gemm_half_rows = cal.gemm_half_rows;
  options->dense_efficiency = cal.dense_efficiency;
  options->attention_efficiency = cal.attention_efficiency;
  options->memory_floor_us = cal.memory_floor_us;
  options->hbm_efficiency = cal.hbm_efficiency;
  options->kernel_launch_us = cal.kernel_launch_us;
  options->graph_launch_us = cal.graph_launch_us;
  options->gemm_shape_efficiency = cal.gemm_shape_efficiency;
  options->gemm_half_nk = cal.gemm_half_nk;
  options->gemm_tile_rows = cal.gemm_tile_rows;
  options->flash_max_efficiency = cal.flash_max_efficiency;
  options->flash_half_head_dim = cal.flash_half_head_dim;
  options->flash_half_seq = cal.flash_half_seq;
  options->flash_bwd_ratio = cal.flash_bwd_ratio;
  options->fp8_efficiency_ratio = cal.fp8_efficiency_ratio;
  cluster->intra_node_gbps = cal.intra_node_gbps;
  cluster->intra_node_latency_us = cal.intra_node_latency_us;
  cluster->network_gbps = cal.network_gbps;
  cluster->network_latency_us = cal.network_latency_us;
}

Json CalibrationToJson(const Calibration& cal) {
  Json knobs = Json::object();
  for (const Knob& k : kKnobs) knobs[k.name] = Json{{"value", cal.*k.field}, {"source", k.source}};
  return Json{{"format", "dockyard-calibration"}, {"version", 1},          {"name", cal.name},
              {"preset", cal.preset},             {"description", cal.description}, {"knobs", knobs}};
}

Json CalibrationRefToJson(const Calibration& cal) {
  return Json{{"name", cal.name}, {"preset", cal.preset}, {"file", cal.file}, {"sha256", cal.sha256}};
}

}  // namespace dockyard
