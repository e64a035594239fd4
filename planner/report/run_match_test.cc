// dockyard-run's warnings when a plan file's prediction is for other hardware or another token count.
#include "planner/report/run_match.h"

#include <string>

#include <doctest/doctest.h>

#include "planner/model/model_spec.h"
#include "planner/model/model_file.h"

namespace dockyard {
namespace {

Plan QwenPlan(int64_t tp, int64_t ep) {
  ParallelDimsOptions d;
  d.world_size = 8;
  d.tp = tp;
  d.ep = ep;
  TrainingConfig t;
  t.seq_len = 16;
  return BuildPlan(LoadModel("testdata/hf/qwen3-30b-a3b.json"), d, t);
}

PlanFile Simulated() {
  PlanFile f;
  f.predicted = Json{{"step_time_us", 1.0}};
  f.cluster = ClusterPreset("h100-sxm");
  return f;
}

TEST_CASE("a prediction for GPUs beside a CPU run, and for other tokens, is said; a matching one is not") {
  const Plan plan = QwenPlan(1, 8);  // T = T_r = seq_len 16 x micro-batch 1
  CHECK(PredictedRunMismatches(Simulated(), plan, "cuda", 16).empty());
  const auto cpu = PredictedRunMismatches(Simulated(), plan, "cpu", 16);
  REQUIRE(cpu.size() == 1);
  CHECK(cpu[0].find("costed for cluster \"h100-sxm\" (989 TFLOP/s per GPU), the run measures the CPU backend") != std::string::npos);
  const auto tokens = PredictedRunMismatches(Simulated(), plan, "cuda", 64);
  REQUIRE(tokens.size() == 1);
  CHECK(tokens[0].find("costed for 16 routed tokens per rank (seq_len 16 x micro_batch_size 1), the run routes 64") != std::string::npos);
  CHECK(PredictedRunMismatches(Simulated(), plan, "cpu", 64).size() == 2);
  // A plain plan report (no prediction) warns of nothing.
  PlanFile plain;
  CHECK(PredictedRunMismatches(plain, plan, "cpu", 64).empty());
}

TEST_CASE("tp 2 with EP on: the sequence-parallel reorderer halves the routed tokens") {
  // T_r = ceil(16 / 2) = 8 (torchtitan, etp 1).
  const Plan plan = QwenPlan(2, 4);
  CHECK(PredictedRunMismatches(Simulated(), plan, "cuda", 8).empty());
  const auto w = PredictedRunMismatches(Simulated(), plan, "cuda", 16);
  REQUIRE(w.size() == 1);
  CHECK(w[0].find("costed for 8 routed tokens per rank") != std::string::npos);
}

}  // namespace
}  // namespace dockyard
