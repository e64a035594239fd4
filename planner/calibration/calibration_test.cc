// Calibration files: the shipped ones are the defaults exactly; applying one sets every knob.
#include "planner/calibration/calibration.h"
#include "planner/cost/cost.h"

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
CostBreakdown Step(const ClusterSpec& cluster, ComputeModel model = ComputeModel::kKernels) {
  ParallelDimsOptions d;
  d.world_size = 16;
  d.ep = 8;
  TrainingConfig t;
  t.seq_len = 1024;
  const Plan plan = BuildPlan(LoadModel("testdata/hf/deepseek-v2-lite.json"), d, t);
  return SimulateStep(plan, cluster, SampleRoutingForPlan(plan, ParseRoutingSpec("uniform"), 2), model);
}

double Phase(const CostBreakdown& c, const std::string& name, const std::string& kind) {
  for (const auto& p : c.phases) {
    if (PhaseName(p.phase) == std::string(name) && LayerKindName(p.layer_kind) == std::string(kind) && p.direction == Direction::kForward) return p.time_us;
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
    for (const KnobSpec& k : KnobTable()) {
      CAPTURE(k.Path());
      CHECK(k.Get(cal.knobs) == k.Get(def.knobs));
    }
    CHECK(cal.knobs.links.intra_node_gbps == def.knobs.links.intra_node_gbps);
    CHECK(cal.knobs.links.intra_node_latency_us == def.knobs.links.intra_node_latency_us);
    CHECK(cal.knobs.links.network_gbps == def.knobs.links.network_gbps);
    CHECK(cal.knobs.links.network_latency_us == def.knobs.links.network_latency_us);
    // Writing it back gives the same knobs.
    const Calibration again = CalibrationFromJson(CalibrationToJson(cal), "again");
    CHECK(again.knobs.links.network_gbps == cal.knobs.links.network_gbps);
    CHECK(again.knobs.compute.gemm.grouped_half_rows == cal.knobs.compute.gemm.grouped_half_rows);
  }
  // The h100-pcie-400g preset's links (planner/cost/cluster.cc): 50 GB/s PCIe, 6 GB/s network per GPU.
  CHECK(LoadCalibration("calibration/h100-pcie-400g.json").knobs.links.intra_node_gbps == 50.0);
  CHECK(LoadCalibration("calibration/h100-pcie-400g.json").knobs.links.network_gbps == 6.0);
}

TEST_CASE("the shipped calibration leaves a prediction unchanged; a changed knob moves its phases") {
  const ClusterSpec base = ClusterPreset("h100-sxm");
  const CostBreakdown before = Step(base);
  ClusterSpec cluster = base;
  ApplyCalibration(LoadCalibration("calibration/h100-sxm.json"), &cluster);
  const CostBreakdown same = Step(cluster);
  CHECK(same.step_time_us == before.step_time_us);
  CHECK(CostToJson(same).dump() == CostToJson(before).dump());

  // Dense efficiency 0.70 -> 0.35 under --compute-model gemm (the model that reads it): the dense
  // MLP's forward time doubles (FLOPs / (peak x eff)).
  const CostBreakdown gemm_before = Step(base, ComputeModel::kGemm);
  Calibration cal = DefaultCalibration("h100-sxm");
  cal.knobs.compute.gemm.dense_efficiency = 0.35;
  ClusterSpec c2 = base;
  ApplyCalibration(cal, &c2);
  const CostBreakdown slower = Step(c2, ComputeModel::kGemm);
  CHECK(Phase(slower, "dense_mlp", "dense") == doctest::Approx(2.0 * Phase(gemm_before, "dense_mlp", "dense")));
  CHECK(slower.step_time_us > gemm_before.step_time_us);
  // The network knob reaches the cluster.
  cal.knobs.links.network_gbps = 24.0;
  ApplyCalibration(cal, &c2);
  CHECK(c2.knobs.links.network_gbps == 24.0);
  CHECK(c2.dense_bf16_tflops == base.dense_bf16_tflops);  // datasheet figures stay in the preset
}

TEST_CASE("bad calibrations: the field, its value and the rule") {
  const Json good = CalibrationToJson(DefaultCalibration("h100-sxm"));
  CHECK(ErrorOf(good).empty());
  Json j = good;
  j["knobs"]["links"].erase("network_gbps");
  CHECK(ErrorOf(j).find("network_gbps") != std::string::npos);
  j = good;
  j["knobs"]["compute"]["gemm"]["dense_efficiency"]["value"] = 1.4;
  CHECK(ErrorOf(j).find("/knobs/compute/gemm/dense_efficiency/value: must be in (0, 1], got 1.4") != std::string::npos);
  j = good;
  j["knobs"]["compute"]["memory_bound"]["floor_us"]["value"] = -1;
  CHECK(ErrorOf(j).find("/knobs/compute/memory_bound/floor_us/value") != std::string::npos);
  j = good;
  j["knobs"]["links"]["nic_efficiency"] = Json{{"value", 0.9}};
  CHECK(ErrorOf(j).find("nic_efficiency") != std::string::npos);
  j = good;
  j["knobs"]["dispatchers"]["hybridep"] = Json::object();  // an unknown section
  CHECK(ErrorOf(j).find("hybridep") != std::string::npos);
  j = good;
  j["version"] = 3;
  CHECK(ErrorOf(j).find("unsupported version 3") != std::string::npos);
  j = good;
  j["preset"] = "b400";
  CHECK(ErrorOf(j).find("/preset") != std::string::npos);
  // A calibration for one preset on another preset's cluster.
  ClusterSpec h200 = ClusterPreset("h200-sxm");
  CHECK_THROWS_WITH_AS(ApplyCalibration(DefaultCalibration("h100-sxm"), &h200),
                       "calibration \"h100-sxm-prior\" is for preset \"h100-sxm\", the cluster is preset \"h200-sxm\" (its calibration: "
                       "h200-sxm.json)",
                       Error);
}

TEST_CASE("optional knobs (the EP-overlap SM shares and communication rates): a file without them keeps the preset's prior; a bad value is refused") {
  const Json good = CalibrationToJson(DefaultCalibration("b200"));
  Json j = good;
  j["knobs"]["dispatchers"].erase("ep_overlap");  // a file written before the knobs existed
  const Calibration cal = CalibrationFromJson(j, "old.json");
  // b200's prior: DeepEP's 20 SMs of Blackwell's 148 (cluster.cc SetSmShares).
  CHECK(cal.knobs.dispatchers.ep_overlap.deepep_sm_share == doctest::Approx(20.0 / 148.0));
  j = good;
  j["knobs"]["dispatchers"]["ep_overlap"].erase("hybridep_sm_share");  // one of them left out
  CHECK(CalibrationFromJson(j, "old.json").knobs.dispatchers.ep_overlap.hybridep_sm_share == doctest::Approx(32.0 / 148.0));
  j = good;
  j["knobs"]["dispatchers"]["ep_overlap"]["deepep_sm_share"]["value"] = 1.5;
  CHECK(ErrorOf(j).find("/knobs/dispatchers/ep_overlap/deepep_sm_share/value: must be in [0, 0.9], got 1.5") != std::string::npos);
  // The communication side's rate: (0, 1], and left out it is the prior (NCCL 0.5, knobs.h).
  j = good;
  j["knobs"]["dispatchers"]["ep_overlap"].erase("all_to_all_comm_rate");
  CHECK(CalibrationFromJson(j, "old.json").knobs.dispatchers.ep_overlap.all_to_all_comm_rate == 0.5);
  j = good;
  j["knobs"]["dispatchers"]["ep_overlap"]["all_to_all_comm_rate"]["value"] = 0.0;
  CHECK(ErrorOf(j).find("/knobs/dispatchers/ep_overlap/all_to_all_comm_rate/value: must be in (0, 1], got 0") != std::string::npos);
  // Null is not "left out": an optional knob, its section and its value set to null are refused,
  // naming the key (a version-1 key: below).
  j = good;
  j["knobs"]["dispatchers"]["ep_overlap"]["all_to_all_comm_rate"] = nullptr;
  CHECK(ErrorOf(j).find("/knobs/dispatchers/ep_overlap/all_to_all_comm_rate: must have a value, got null") != std::string::npos);
  j = good;
  j["knobs"]["dispatchers"]["ep_overlap"] = nullptr;
  CHECK(ErrorOf(j).find("/knobs/dispatchers/ep_overlap: must have a value, got null") != std::string::npos);
  j = good;
  j["knobs"]["dispatchers"]["ep_overlap"]["hybridep_comm_rate"]["value"] = nullptr;
  CHECK(ErrorOf(j).find("/knobs/dispatchers/ep_overlap/hybridep_comm_rate/value: must have a value, got null") != std::string::npos);
  // A calibration names itself as the cluster's compute-knob source.
  ClusterSpec b200 = ClusterPreset("b200");
  ApplyCalibration(cal, &b200);
  CHECK(b200.compute_source == "calibration \"b200-prior\"");
}

TEST_CASE("a fitted knob's 80 % interval round-trips and reaches the reports; a bad one is refused") {
  Calibration cal = DefaultCalibration("h100-sxm");
  cal.knobs.compute.gemm.shape_efficiency = 0.70;
  cal.knob_intervals["compute.gemm.shape_efficiency"] = {0.66, 0.74};
  const Json j = CalibrationToJson(cal);
  CHECK(j["knobs"]["compute"]["gemm"]["shape_efficiency"]["interval80"] == Json::array({0.66, 0.74}));
  const Calibration back = CalibrationFromJson(j, "fit.json");
  REQUIRE(back.knob_intervals.count("compute.gemm.shape_efficiency") == 1);
  CHECK(back.knob_intervals.at("compute.gemm.shape_efficiency") == std::make_pair(0.66, 0.74));
  const Json ref = CalibrationRefToJson(back);
  CHECK(ref["fitted"]["compute.gemm.shape_efficiency"]["value"] == 0.70);
  CHECK(ref["fitted"]["compute.gemm.shape_efficiency"]["interval80"] == Json::array({0.66, 0.74}));
  CHECK_FALSE(CalibrationRefToJson(DefaultCalibration("h100-sxm")).contains("fitted"));  // no interval: no key
  Json bad = j;
  bad["knobs"]["compute"]["gemm"]["shape_efficiency"]["interval80"] = Json::array({0.72, 0.80});  // the value outside it
  CHECK(ErrorOf(bad).find("/knobs/compute/gemm/shape_efficiency/interval80: must be [lo, hi] with lo <= value (0.7) <= hi, got "
                          "[0.72,0.8]") != std::string::npos);
  bad = j;
  bad["knobs"]["compute"]["gemm"]["shape_efficiency"]["interval80"] = Json::array({-1.0, 0.8});  // outside (0, 1]
  CHECK(ErrorOf(bad).find("interval80: must lie in the knob's range (0, 1], got [-1, 0.8]") != std::string::npos);
  bad = j;
  bad["knobs"]["compute"]["gemm"]["shape_efficiency"]["interval80"] = nullptr;
  CHECK(ErrorOf(bad).find("interval80: must be [lo, hi]") != std::string::npos);
}

TEST_CASE("the FP8 small-head ratio split in two (2026-12-06): the old key is refused naming both new ones; sources name the preset") {
  Json j = CalibrationToJson(DefaultCalibration("gb200-nvl72"));
  j["knobs"]["compute"]["flash"]["fp8_small_head_speedup"] = Json{{"value", 0.654}};
  const std::string e = ErrorOf(j);
  CHECK(e.find("/knobs/compute/flash/fp8_small_head_speedup: was split into fp8_small_head_fwd_speedup") != std::string::npos);
  CHECK(e.find("fp8_small_head_bwd_efficiency") != std::string::npos);
  Json v1 = ReadJsonFile("testdata/calibration-v1/h100-sxm.json");
  v1["knobs"]["flash_fp8_small_head_speedup"] = Json{{"value", 1.0}};
  CHECK(ErrorOf(v1).find("/knobs/flash_fp8_small_head_speedup: was split into") != std::string::npos);
  // A preset's figure is named as the preset's, not by the Hopper prior's text (knobs.h); a Hopper
  // prior keeps the knob table's.
  const Calibration gb200 = DefaultCalibration("gb200-nvl72");
  for (const KnobSpec& k : KnobTable()) {
    if (k.Path() == "compute.flash.fp8_speedup") {
      CHECK(KnobSource(gb200, k) == "the gb200-nvl72 preset's figure, not the Hopper prior (its source, measured on the GPU or borrowed: "
                                    "planner/cost/cluster.cc, calibration/gb200-nvl72.json, docs/cluster.md); compute.flash.fp8_speedup");
      CHECK(KnobSource(DefaultCalibration("h100-sxm"), k) == k.source);
    }
  }
}

TEST_CASE("version 1 files (one flat object of the old keys) are read: the same knobs as version 2") {
  // testdata/calibration-v1/h100-sxm.json: calibration/h100-sxm.json as shipped at version 1.
  const Calibration v1 = LoadCalibration("testdata/calibration-v1/h100-sxm.json");
  const Calibration v2 = LoadCalibration("calibration/h100-sxm.json");
  for (const KnobSpec& k : KnobTable()) {
    CAPTURE(k.Path());
    CHECK(k.Get(v1.knobs) == k.Get(v2.knobs));
  }
  // Hand check of three keys moved by the version: gemm_max_efficiency 0.80 ->
  // compute.gemm.grouped_max_efficiency, attention_efficiency 0.50 -> compute.flash.fixed_efficiency,
  // flex_network_efficiency 0.852 -> dispatchers.deepep.network_efficiency.
  CHECK(v1.knobs.compute.gemm.grouped_max_efficiency == 0.80);
  CHECK(v1.knobs.compute.flash.fixed_efficiency == 0.50);
  CHECK(v1.knobs.dispatchers.deepep.network_efficiency == 0.852);
  // A version-1 file with a version-2 section is refused, naming the section and the version.
  Json j = ReadJsonFile("testdata/calibration-v1/h100-sxm.json");
  j["knobs"]["compute"] = Json::object();
  CHECK(ErrorOf(j).find("/knobs/compute: a version-1 file holds its knobs in one flat object") != std::string::npos);
  // A version-2 file with a version-1 key: where version 2 holds it.
  Json v2_json = CalibrationToJson(v2);
  v2_json["knobs"]["gemm_max_efficiency"] = Json{{"value", 0.8}};
  CHECK(ErrorOf(v2_json).find("/knobs/gemm_max_efficiency: a version-1 key; version 2 holds this knob at "
                         "/knobs/compute/gemm/grouped_max_efficiency") != std::string::npos);
  // An optional knob's version-1 key set to null is refused, not read as left out.
  j = ReadJsonFile("testdata/calibration-v1/h100-sxm.json");
  j["knobs"]["ep_overlap_all_to_all_comm_rate"] = nullptr;
  CHECK(ErrorOf(j).find("/knobs/ep_overlap_all_to_all_comm_rate: must have a value, got null") != std::string::npos);
  // Written back, it is version 2.
  CHECK(CalibrationToJson(v1).at("version") == 2);
}

}  // namespace
}  // namespace dockyard
