// Calibration files: the shipped ones are the defaults exactly; applying one sets every knob.
#include "planner/calibration/calibration.h"

#include <fstream>
#include <sstream>
#include <string>

#include <doctest/doctest.h>

#include "planner/base/error.h"
#include "planner/accounting/memory.h"
#include "planner/model/model_spec.h"
#include "planner/layout/plan.h"
#include "planner/base/digest.h"
#include "planner/routing/routing.h"
#include "planner/routing/plan_routing.h"
#include "planner/model/model_file.h"

namespace dockyard {
namespace {

std::string Bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string ErrorOf(const Json& j) {
  try {
    CalibrationFromJson(j, "cal.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// Step of DeepSeek-V2-Lite (layer 0 dense, 26 MoE layers) on 16 GPUs, ep 8, across two nodes.
CostBreakdown Step(const ClusterSpec& cluster, const CostOptions& options) {
  ParallelDimsOptions d;
  d.world_size = 16;
  d.ep = 8;
  TrainingConfig t;
  t.seq_len = 1024;
  const Plan plan = BuildPlan(LoadModel("testdata/hf/deepseek-v2-lite.json"), d, t);
  return SimulateStep(plan, cluster, SampleRoutingForPlan(plan, ParseRoutingSpec("uniform"), 2), options);
}

double Phase(const CostBreakdown& c, const std::string& name, const std::string& kind) {
  for (const auto& p : c.phases) {
    if (p.name == name && p.layer_kind == kind && p.direction == "forward") return p.time_us;
  }
  FAIL("no phase " << name);
  return 0;
}

TEST_CASE("each preset ships a calibration equal to the defaults, named and hashed") {
  for (const std::string& preset : ClusterPresetNames()) {
    const std::string path = "calibration/" + preset + ".json";
    const Calibration cal = LoadCalibration(path);
    const Calibration def = DefaultCalibration(preset);
    CHECK(cal.name == preset + "-prior");
    CHECK(cal.preset == preset);
    CHECK(cal.sha256 == Sha256Hex(Bytes(path)));
    CHECK(cal.sha256.size() == 64);
    CHECK(cal.gemm_max_efficiency == def.gemm_max_efficiency);
    CHECK(cal.gemm_half_rows == def.gemm_half_rows);
    CHECK(cal.dense_efficiency == def.dense_efficiency);
    CHECK(cal.attention_efficiency == def.attention_efficiency);
    CHECK(cal.memory_floor_us == def.memory_floor_us);
    CHECK(cal.intra_node_gbps == def.intra_node_gbps);
    CHECK(cal.intra_node_latency_us == def.intra_node_latency_us);
    CHECK(cal.network_gbps == def.network_gbps);
    CHECK(cal.network_latency_us == def.network_latency_us);
    // Writing it back gives the same knobs.
    const Calibration again = CalibrationFromJson(CalibrationToJson(cal), "again");
    CHECK(again.network_gbps == cal.network_gbps);
    CHECK(again.gemm_half_rows == cal.gemm_half_rows);
  }
  // The h100-pcie-400g preset's links (planner/cost/cluster.cc): 50 GB/s PCIe, 6 GB/s network per GPU.
  CHECK(LoadCalibration("calibration/h100-pcie-400g.json").intra_node_gbps == 50.0);
  CHECK(LoadCalibration("calibration/h100-pcie-400g.json").network_gbps == 6.0);
}

TEST_CASE("the shipped calibration leaves a prediction unchanged; a changed knob moves its phases") {
  const ClusterSpec base = ClusterPreset("h100-sxm");
  const CostBreakdown before = Step(base, CostOptions{});
  ClusterSpec cluster = base;
  CostOptions options;
  ApplyCalibration(LoadCalibration("calibration/h100-sxm.json"), &cluster, &options);
  const CostBreakdown same = Step(cluster, options);
  CHECK(same.step_time_us == before.step_time_us);
  CHECK(CostToJson(same).dump() == CostToJson(before).dump());

  // Dense efficiency 0.70 -> 0.35 under --compute-model gemm (the model that reads it): the dense
  // MLP's forward time doubles (FLOPs / (peak x eff)).
  CostOptions gemm;
  gemm.kernel_compute = false;
  const CostBreakdown gemm_before = Step(base, gemm);
  Calibration cal = DefaultCalibration("h100-sxm");
  cal.dense_efficiency = 0.35;
  ClusterSpec c2 = base;
  CostOptions o2 = gemm;
  ApplyCalibration(cal, &c2, &o2);
  const CostBreakdown slower = Step(c2, o2);
  CHECK(Phase(slower, "dense_mlp", "dense") == doctest::Approx(2.0 * Phase(gemm_before, "dense_mlp", "dense")));
  CHECK(slower.step_time_us > gemm_before.step_time_us);
  // The network knob reaches the cluster.
  cal.network_gbps = 24.0;
  ApplyCalibration(cal, &c2, &o2);
  CHECK(c2.network_gbps == 24.0);
  CHECK(c2.dense_bf16_tflops == base.dense_bf16_tflops);  // datasheet figures stay in the preset
}

TEST_CASE("bad calibrations: the field, its value and the rule") {
  const Json good = CalibrationToJson(DefaultCalibration("h100-sxm"));
  CHECK(ErrorOf(good).empty());
  Json j = good;
  j["knobs"].erase("network_gbps");
  CHECK(ErrorOf(j).find("network_gbps") != std::string::npos);
  j = good;
  j["knobs"]["dense_efficiency"]["value"] = 1.4;
  CHECK(ErrorOf(j).find("/knobs/dense_efficiency/value: must be in (0, 1], got 1.4") != std::string::npos);
  j = good;
  j["knobs"]["memory_floor_us"]["value"] = -1;
  CHECK(ErrorOf(j).find("/knobs/memory_floor_us/value") != std::string::npos);
  j = good;
  j["knobs"]["nic_efficiency"] = Json{{"value", 0.9}};
  CHECK(ErrorOf(j).find("nic_efficiency") != std::string::npos);
  j = good;
  j["version"] = 2;
  CHECK(ErrorOf(j).find("unsupported version 2") != std::string::npos);
  j = good;
  j["preset"] = "b300";
  CHECK(ErrorOf(j).find("/preset") != std::string::npos);
  // A calibration for one preset on another preset's cluster.
  ClusterSpec h200 = ClusterPreset("h200-sxm");
  CostOptions o;
  CHECK_THROWS_WITH_AS(ApplyCalibration(DefaultCalibration("h100-sxm"), &h200, &o),
                       "calibration \"h100-sxm-prior\" is for preset \"h100-sxm\", the cluster is preset \"h200-sxm\"", Error);
}

}  // namespace
}  // namespace dockyard
