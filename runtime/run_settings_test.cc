// dockyard-run's settings: the training a run executes.
#include "runtime/run_settings.h"

#include <doctest/doctest.h>

#include "planner/base/error.h"

using dockyard::Error;
using dockyard::TrainingConfig;
using dockyard::TrainingOverrides;

TEST_CASE("A run without a plan file runs all_to_all unless --dispatcher says otherwise, whatever the spec says") {
  TrainingConfig spec;
  spec.dispatcher = "deredundency";  // a spec's training block
  CHECK(dockyard::runtime::RunTraining(spec, false, {}).dispatcher == "all_to_all");
  TrainingOverrides flags;
  flags.dispatcher = "allgather";
  CHECK(dockyard::runtime::RunTraining(spec, false, flags).dispatcher == "allgather");
}

TEST_CASE("A plan file's dispatcher is kept unless --dispatcher is given") {
  TrainingConfig file;
  file.dispatcher = "deredundency";
  file.oep = 2;
  CHECK(dockyard::runtime::RunTraining(file, true, {}).dispatcher == "deredundency");
  TrainingOverrides flags;
  flags.dispatcher = "all_to_all";
  flags.oep.reset();
  TrainingConfig no_oep = file;
  no_oep.oep.reset();
  CHECK(dockyard::runtime::RunTraining(no_oep, true, flags).dispatcher == "all_to_all");
}

TEST_CASE("--oep, --gpus-per-node and a replay's --seq-len apply; --seq-len is bounded by 2^24 tokens") {
  TrainingOverrides flags;
  flags.dispatcher = "deredundency";
  flags.oep = 2;
  flags.gpus_per_node = 4;
  flags.seq_len = 1 << 24;  // 16,777,216: the largest accepted
  const TrainingConfig t = dockyard::runtime::RunTraining({}, false, flags);
  CHECK(t.oep == 2);
  CHECK(t.gpus_per_node == 4);
  CHECK(t.seq_len == 16777216);
  flags.seq_len = (1 << 24) + 1;
  CHECK_THROWS_WITH_AS(dockyard::runtime::RunTraining({}, false, flags), "--seq-len must be in [1, 2^24], got 16777217", Error);
  flags.seq_len = 0;
  CHECK_THROWS_WITH_AS(dockyard::runtime::RunTraining({}, false, flags), "--seq-len must be in [1, 2^24], got 0", Error);
}

TEST_CASE("The run's training is validated with the flag's name") {
  TrainingOverrides flags;
  flags.gpus_per_node = 0;
  CHECK_THROWS_WITH_AS(dockyard::runtime::RunTraining({}, false, flags), doctest::Contains("--gpus-per-node"), Error);
}
