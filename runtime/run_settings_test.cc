// dockyard-run's settings: the training a run executes.
#include "runtime/run_settings.h"

#include <doctest/doctest.h>

#include "planner/base/error.h"

using dockyard::Error;
using dockyard::TrainingConfig;
using dockyard::TrainingOverrides;

TEST_CASE("A run without a plan file runs all_to_all unless --dispatcher says otherwise, whatever the spec says") {
  TrainingConfig spec;
  spec.dispatcher = dockyard::Dispatcher::kDeredundency;  // a spec's training block
  CHECK(dockyard::runtime::RunTraining(spec, false, {}).dispatcher == dockyard::Dispatcher::kAllToAll);
  TrainingOverrides flags;
  flags.dispatcher = dockyard::Dispatcher::kAllGather;
  CHECK(dockyard::runtime::RunTraining(spec, false, flags).dispatcher == dockyard::Dispatcher::kAllGather);
}

TEST_CASE("A plan file's dispatcher is kept unless --dispatcher is given") {
  TrainingConfig file;
  file.dispatcher = dockyard::Dispatcher::kDeredundency;
  file.oep = 2;
  CHECK(dockyard::runtime::RunTraining(file, true, {}).dispatcher == dockyard::Dispatcher::kDeredundency);
  TrainingOverrides flags;
  flags.dispatcher = dockyard::Dispatcher::kAllToAll;
  flags.oep.reset();
  TrainingConfig no_oep = file;
  no_oep.oep.reset();
  CHECK(dockyard::runtime::RunTraining(no_oep, true, flags).dispatcher == dockyard::Dispatcher::kAllToAll);
}

TEST_CASE("--oep, --gpus-per-node and a replay's --seq-len apply; --seq-len is bounded by 2^24 tokens") {
  TrainingOverrides flags;
  flags.dispatcher = dockyard::Dispatcher::kDeredundency;
  flags.oep = 2;
  flags.gpus_per_node = 4;
  flags.seq_len = 1 << 24;  // 16,777,216: the largest accepted
  const TrainingConfig t = dockyard::runtime::RunTraining({}, false, flags);
  CHECK(t.oep == 2);
  CHECK(dockyard::runtime::RunMachine({}, flags).gpus_per_node == 4);
  CHECK(t.seq_len == 16777216);
  flags.seq_len = (1 << 24) + 1;
  CHECK_THROWS_WITH_AS(dockyard::runtime::RunTraining({}, false, flags), "--seq-len must be in [1, 2^24], got 16777217", Error);
  flags.seq_len = 0;
  CHECK_THROWS_WITH_AS(dockyard::runtime::RunTraining({}, false, flags), "--seq-len must be in [1, 2^24], got 0", Error);
}

TEST_CASE("The run's training is validated with the flag's name") {
  TrainingOverrides flags;
  flags.gpus_per_node = 0;
  CHECK_THROWS_WITH_AS(dockyard::runtime::RunMachine({}, flags), doctest::Contains("--gpus-per-node"), Error);
}

TEST_CASE("The CUDA GEMMs' default tolerances loosen with the precision they round to") {
  const auto bf16 = dockyard::runtime::GemmPrecisionTolerances("bf16");
  CHECK(bf16.atol == 5e-3);
  CHECK(bf16.rtol == 5e-2);
  const auto tf32 = dockyard::runtime::GemmPrecisionTolerances("tf32");
  CHECK(tf32.atol == 1e-3);
  CHECK(tf32.rtol == 1e-2);
  const auto fp32 = dockyard::runtime::GemmPrecisionTolerances("fp32");
  CHECK_FALSE(fp32.atol.has_value());
  CHECK_FALSE(fp32.rtol.has_value());
}

TEST_CASE("{rank} in a report path becomes the process's rank, every time it appears") {
  CHECK(dockyard::runtime::ExpandRankInPath("run-{rank}.json", 7) == "run-7.json");
  CHECK(dockyard::runtime::ExpandRankInPath("{rank}/run-{rank}.json", 12) == "12/run-12.json");
  CHECK(dockyard::runtime::ExpandRankInPath("run.json", 3) == "run.json");
}

TEST_CASE("A replay takes the run's settings; its rank must be one of the plan's") {
  dockyard::runtime::RunOptions run;
  run.seed = 5;
  run.iters = 2;
  run.warmup = 0;
  run.atol = 1e-2;
  run.layer = 3;
  const auto ro = dockyard::runtime::ReplayOptionsFromRun(run, 7, 8);
  CHECK(ro.rank == 7);
  CHECK(ro.seed == 5);
  CHECK(ro.routing.seed == 5);
  CHECK(ro.iters == 2);
  CHECK(ro.warmup == 0);
  CHECK(ro.atol == 1e-2);
  CHECK(ro.layer == 3);
  CHECK_THROWS_WITH_AS(dockyard::runtime::ReplayOptionsFromRun(run, 8, 8), "--replay-rank must be in [0, 8) (the plan's world size), got 8",
                       Error);
  CHECK_THROWS_AS(dockyard::runtime::ReplayOptionsFromRun(run, -1, 8), Error);
}

TEST_CASE("A replay's cluster: --cluster, else the plan's, else h100-sxm") {
  CHECK(dockyard::runtime::ReplayCluster("", std::nullopt).name == "h100-sxm");
  CHECK(dockyard::runtime::ReplayCluster("h200-sxm", std::nullopt).name == "h200-sxm");
  const dockyard::ClusterSpec plan = dockyard::ClusterPreset("h200-sxm");
  CHECK(dockyard::runtime::ReplayCluster("", plan).name == "h200-sxm");
  CHECK(dockyard::runtime::ReplayCluster("h100-sxm", plan).name == "h100-sxm");
}

TEST_CASE("The inputs a run's provenance digests") {
  using V = std::vector<dockyard::InputFile>;
  CHECK(dockyard::runtime::RunInputFiles("m.json", "", "uniform", "") == V{{"--model", "m.json"}});
  CHECK(dockyard::runtime::RunInputFiles("m.json", "p.json", "trace:t.json", "pl.json") ==
        V{{"--model", "m.json"}, {"--plan", "p.json"}, {"--routing trace:", "t.json"}, {"--placement", "pl.json"}});
  // a preset is no file
  CHECK(dockyard::runtime::ReplayInputFiles("m.json", "", "zipf:1.2", "h100-sxm") == V{{"--model", "m.json"}});
  CHECK(dockyard::runtime::ReplayInputFiles("m.json", "", "", "cl/c.json") == V{{"--model", "m.json"}, {"--cluster", "cl/c.json"}});
}
