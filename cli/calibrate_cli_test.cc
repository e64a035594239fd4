#include "cli/calibrate_cli.h"

#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <unistd.h>

#include "planner/calibration/calibration.h"
#include "planner/cost/gemm_efficiency.h"
#include "planner/base/error.h"
#include "planner/base/json_util.h"
#include <doctest/doctest.h>

namespace dockyard {
namespace {

std::string TempDir() {
  const char* t = std::getenv("TEST_TMPDIR");
  return t != nullptr ? t : "/tmp";
}

// testdata/fidelity/runs.json with `edit` applied, written beside the original's model paths
// (the models resolve against testdata/fidelity through a "../hf" path rewritten absolute).
template <typename Edit>
std::string WriteRuns(const std::string& name, Edit edit) {
  Json j = ReadJsonFile("testdata/fidelity/runs.json");
  char cwd[4096];
  REQUIRE(getcwd(cwd, sizeof cwd) != nullptr);
  for (auto it = j["models"].begin(); it != j["models"].end(); ++it) {
    Json& m = it.value();
    if (m["file"].is_string()) m["file"] = std::string(cwd) + "/testdata/fidelity/" + m["file"].get<std::string>();
  }
  edit(j);
  const std::string path = TempDir() + "/" + name;
  std::ofstream(path) << j.dump(1);
  return path;
}

Json& RunJson(Json& j, const std::string& id) {
  for (Json& r : j["runs"]) {
    if (r["id"] == id) return r;
  }
  throw Error("no run " + id);
}

// The error RunCalibrate gives, and that it wrote nothing.
// Keeps only the runs of `j` whose id is in `ids`.
void KeepRuns(Json& j, const std::set<std::string>& ids) {
  Json kept = Json::array();
  for (const Json& r : j["runs"]) {
    if (ids.count(r["id"].get<std::string>())) kept.push_back(r);
  }
  j["runs"] = kept;
}

std::string CalibrateError(const std::string& runs) {
  CalibrateOptions o;
  o.runs = {runs};
  o.out = TempDir() + "/never-written.json";
  std::ostringstream out;
  std::string message;
  try {
    RunCalibrate(o, out);
  } catch (const Error& e) {
    message = e.what();
  }
  INFO("the error: " << message);
  CHECK_FALSE(message.empty());
  CHECK_FALSE(std::ifstream(o.out).good());
  return message;
}

TEST_CASE("calibrate refuses a bad runs file with one error naming the row and the field, and writes nothing") {
  const std::string unknown_model = CalibrateError(WriteRuns("m.json", [](Json& j) { RunJson(j, "S01")["model"] = "deepseek-v9"; }));
  CHECK(unknown_model.find("run S01: ") == 0);
  CHECK(unknown_model.find("/runs/14/model: unknown model \"deepseek-v9\"") != std::string::npos);

  const std::string missing = CalibrateError(WriteRuns("f.json", [](Json& j) { RunJson(j, "S02")["batch"].erase("seq"); }));
  CHECK(missing.find("run S02: ") == 0);
  CHECK(missing.find("/runs/15/batch") != std::string::npos);
  CHECK(missing.find("seq") != std::string::npos);

  const std::string negative = CalibrateError(WriteRuns("n.json", [](Json& j) { RunJson(j, "S03")["measured"]["value"] = -4.1412; }));
  CHECK(negative.find("run S03: ") == 0);
  CHECK(negative.find("/runs/16/measured/value: must be > 0, got -4.1412") != std::string::npos);

  const std::string phase = CalibrateError(WriteRuns("p.json", [](Json& j) {
    RunJson(j, "S02")["phases"] =
        Json::array({Json{{"name", "dispatch"}, {"layer_kind", "moe"}, {"direction", "forward"}, {"time_us", -2.5}}});
  }));
  CHECK(phase.find("run S02: ") == 0);
  CHECK(phase.find("/runs/15/phases/0/time_us: must be a time >= 0, got -2.5") != std::string::npos);

  // features null is refused like a missing list (was: read as none, pricing an EP-overlap row without it).
  const std::string features = CalibrateError(WriteRuns("fn.json", [](Json& j) { RunJson(j, "S01")["features"] = nullptr; }));
  CHECK(features.find("run S01: ") == 0);
  CHECK(features.find("/runs/14/features: must be a list of strings (empty for none), got null") != std::string::npos);
  // A step of 1e-300 s is a unit slip, not a measurement; a noise of 1e-300 would make the fit degenerate.
  const std::string tiny = CalibrateError(WriteRuns("t.json", [](Json& j) { RunJson(j, "S03")["measured"]["value"] = 1e-300; }));
  CHECK(tiny.find("/runs/16/measured/value: must be in [0.001, 864000] for kind step_s, got 1e-300") != std::string::npos);
  const std::string noise = CalibrateError(WriteRuns("ns.json", [](Json& j) { RunJson(j, "S03")["measured"]["noise"] = 1e-300; }));
  CHECK(noise.find("/runs/16/measured/noise: is the sd of ln(value), in [0.001, 1]") != std::string::npos);
  // A rule of the plan (in command-line words) names the run it came from.
  const std::string rule = CalibrateError(WriteRuns("r.json", [](Json& j) {
    Json& h05 = RunJson(j, "H05");
    h05["recompute"] = "full";
  }));
  CHECK(rule.find("run H05: ") == 0);
  CHECK(rule.find("--overlap-moe-expert-parallel-comm: disable full recomputation") != std::string::npos);

  // EP 3 divides neither the 8 ranks nor DeepSeek-V3's 256 routed experts.
  const std::string layout = CalibrateError(WriteRuns("l.json", [](Json& j) { RunJson(j, "S01")["layout"]["ep"] = 3; }));
  CHECK(layout.find("run S01: ") == 0);
  CHECK(layout.find("/runs/14/layout") != std::string::npos);
}

TEST_CASE("calibrate --compute-model gemm writes a calibration that loads back, fitted knobs with their source, from the published runs") {
  CalibrateOptions o;
  o.runs = {"testdata/fidelity/runs.json"};
  o.out = TempDir() + "/fitted.json";
  o.compute_model = "gemm";  // the older model: the grouped-GEMM curve eff(M) the figures below fit
  std::ostringstream out;
  CHECK(RunCalibrate(o, out) == 0);
  const Calibration cal = LoadCalibration(o.out);
  CHECK(cal.preset == "h100-sxm");
  CHECK(cal.name == "h100-sxm-fitted");
  // C21: 64.5 % of peak at 2048 rows and 29 % at 128 rows give max x 2048/(2048+h) = 0.645 and
  // max x 128/(128+h) = 0.29: h = 182, max = 0.70 (C18/C19 pull them slightly: within 3 %).
  CHECK(cal.knobs.compute.gemm.grouped_half_rows == doctest::Approx(182).epsilon(0.03));
  CHECK(cal.knobs.compute.gemm.grouped_max_efficiency == doctest::Approx(0.70).epsilon(0.03));
  CHECK(cal.knobs.links.network_gbps == doctest::Approx(46).epsilon(0.01));  // C01, 46 GB/s busbw
  CHECK(cal.knob_sources.at("compute.gemm.grouped_half_rows").find("fitted by dockyard-plan calibrate (component stage)") == 0);
  CHECK(cal.knob_sources.at("links.network_latency_us") ==
        "the preset's network_latency_us (planner/cost/cluster.cc, docs/cluster.md)");  // undetermined: the prior's source
  const std::string text = out.str();
  CHECK(text.find("group-held-out error") != std::string::npos);
  // The undetermined knobs: no row moves them (the latencies, the kernel floor, and the kernel
  // model's and the deepep dispatcher's knobs, which the gemm compute model and the dispatchers of
  // these rows never read); the fitted ones are not among them.
  const size_t at = text.find("undetermined (left at their priors): ");
  REQUIRE(at != std::string::npos);
  const std::string undetermined = text.substr(at, text.find('\n', at) - at);
  for (const char* k : {"compute.memory_bound.floor_us", "links.intra_node_latency_us", "links.network_latency_us",
                        "compute.memory_bound.hbm_efficiency", "dispatchers.deepep.nvlink_efficiency"}) {
    CHECK_MESSAGE(undetermined.find(k) != std::string::npos, k);
  }
  for (const char* k : {"compute.gemm.grouped_half_rows", "compute.gemm.grouped_max_efficiency", "links.network_gbps"})
    CHECK_MESSAGE(undetermined.find(k) == std::string::npos, k);
  // A chained refit (--from this file) on rows that do not move a knob keeps its value, its source
  // and its 80 % interval (was: the interval dropped, so reports no longer listed it as fitted).
  REQUIRE(cal.knob_intervals.count("compute.gemm.grouped_half_rows") == 1);
  CalibrateOptions again;
  again.runs = {WriteRuns("h.json", [](Json& j) {
    KeepRuns(j, {"H02", "H03", "H04", "H05", "H06", "H08", "H09"});
    j["components"] = Json::array();
  })};
  again.from = o.out;
  again.out = TempDir() + "/refitted.json";
  again.compute_model = "gemm";  // the step-level knobs these rows fit: not the grouped-GEMM curve's
  std::ostringstream out2;
  CHECK(RunCalibrate(again, out2) == 0);
  const Calibration re = LoadCalibration(again.out);
  CHECK(re.knobs.compute.gemm.grouped_half_rows == cal.knobs.compute.gemm.grouped_half_rows);
  CHECK(re.knob_sources.at("compute.gemm.grouped_half_rows") == cal.knob_sources.at("compute.gemm.grouped_half_rows"));
  CHECK(re.knob_intervals.at("compute.gemm.grouped_half_rows") == cal.knob_intervals.at("compute.gemm.grouped_half_rows"));
}

TEST_CASE("calibrate refuses to write a file that changes nothing: exit 1, the reason, no file") {
  // Only H02 and H03 (two rows of one group at 15 % noise, no component row): they pin no knob
  // better than its prior.
  const std::string runs = WriteRuns("two.json", [](Json& j) {
    KeepRuns(j, {"H02", "H03"});
    j["components"] = Json::array();
  });
  CalibrateOptions o;
  o.runs = {runs};
  o.out = TempDir() + "/nothing.json";
  std::remove(o.out.c_str());
  std::ostringstream out;
  CHECK(RunCalibrate(o, out) == 1);
  CHECK(out.str().find("calibrate: nothing written to " + o.out + ": the rows pin no knob better than its prior") != std::string::npos);
  CHECK(out.str().find("group-held-out error: not computed (1 group") != std::string::npos);
  CHECK_FALSE(std::ifstream(o.out).good());
}

TEST_CASE("calibrate: the same run given twice is refused, naming it and both files; a runs file may leave out components") {
  const std::string runs = WriteRuns("dup.json", [](Json& j) {
    KeepRuns(j, {"H02", "H03"});
    j.erase("components");  // optional (a user's runs file measures no component)
  });
  CalibrateOptions o;
  o.runs = {runs, runs};
  o.out = TempDir() + "/dup-out.json";
  std::ostringstream out;
  try {
    RunCalibrate(o, out);
    FAIL("expected an error");
  } catch (const Error& e) {
    CHECK(std::string(e.what()) == "--runs: row \"H02\" appears in " + runs + " and again in " + runs +
                                       " (the same file given twice): give each run and measurement once");
  }
}

TEST_CASE("calibrate under the default kernel-level model: the GEMM-by-shape knobs fit C18 and C19, the fixed efficiencies are not read") {
  CalibrateOptions o;
  o.runs = {"testdata/fidelity/runs.json"};
  o.out = TempDir() + "/fitted-kernels.json";
  std::ostringstream out;
  CHECK(RunCalibrate(o, out) == 0);
  const Calibration cal = LoadCalibration(o.out);
  ClusterSpec cluster = ClusterPreset("h100-sxm");
  ApplyCalibration(cal, &cluster);
  const ComputeKnobs& options = cluster.knobs.compute;
  // C18 (TE CUTLASS grouped GEMM, H100, m 4096, n 768, k 2048) 650.6 TFLOP/s and C19 (m 2048) 636.9:
  // the fitted curve x the 989 TFLOP/s peak reproduces both within 1 %.
  CHECK(cluster.dense_bf16_tflops * GemmShapeEfficiency(4096, 768, 2048, options) == doctest::Approx(650.6).epsilon(0.01));
  CHECK(cluster.dense_bf16_tflops * GemmShapeEfficiency(2048, 768, 2048, options) == doctest::Approx(636.9).epsilon(0.01));
  CHECK(cal.knob_sources.at("compute.gemm.shape_efficiency").find("fitted by dockyard-plan calibrate (component stage)") == 0);
  // The file names the runs it came from by digest (sha256sum testdata/fidelity/runs.json) and each
  // fitted knob's 80 % interval.
  CHECK(cal.description.find("testdata/fidelity/runs.json (sha256 ") != std::string::npos);
  CHECK(cal.knob_sources.at("compute.gemm.shape_efficiency").find("; 80 % interval [") != std::string::npos);
  const std::string text = out.str();
  const size_t at = text.find("undetermined (left at their priors): ");
  REQUIRE(at != std::string::npos);
  const std::string undetermined = text.substr(at, text.find('\n', at) - at);
  for (const char* k : {"compute.gemm.dense_efficiency", "compute.flash.fixed_efficiency", "compute.gemm.grouped_max_efficiency"}) {
    CHECK_MESSAGE(undetermined.find(k) != std::string::npos, k);
  }
  // The C21 rule of thumb gives no N and K: left out, with the reason.
  CHECK(text.find("C21") != std::string::npos);
  CHECK(text.find("rule of thumb without the GEMM's N and K") != std::string::npos);
}

}  // namespace
}  // namespace dockyard
