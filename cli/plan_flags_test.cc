// The command-line rules that live beside the flags (plan_flags.h, run_flags.h): the training
// settings resolved from a spec's block and the flags, and the output-path checks.
#include "cli/plan_flags.h"

#include <sstream>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "cli/run_flags.h"

namespace dockyard::cli {

TEST_CASE("ResolveTraining: a flag replaces the spec's value, the others keep the block's; the reserve defaults") {
  ModelSpec model;
  model.num_hidden_layers = 4;
  TrainingConfig block;
  block.seq_len = 1024;
  block.dispatcher = Dispatcher::kDeredundency;
  model.training = block;
  TrainingFlags flags;
  flags.seq_len = "2048";
  const TrainingConfig t = ResolveTraining(flags, model, 1);
  CHECK(t.seq_len == 2048);                          // the flag
  CHECK(t.dispatcher == Dispatcher::kDeredundency);  // the block's
  CHECK(*t.memory_reserve_gib == 2.0);               // neither: kDefaultMemoryReserveGib (memory.h)
  flags.memory_reserve_gib = "5";
  CHECK(*ResolveTraining(flags, model, 1).memory_reserve_gib == 5.0);
}

TEST_CASE("Warn prints a warning with the program's label and keeps it for the reports without the labels") {
  std::ostringstream err;
  std::vector<std::string> kept;
  Warn("", &kept, err);  // none
  Warn("warning: --seq-len 8192 is above the model's max_position_embeddings (4096)\n", &kept, err);
  Warn(PartialNodeWarning(12, ClusterPreset("h100-sxm")), &kept, err);
  CHECK(err.str().rfind("dockyard-plan: warning: --seq-len 8192 is above", 0) == 0);
  REQUIRE(kept.size() == 2);
  CHECK(kept[0] == "--seq-len 8192 is above the model's max_position_embeddings (4096)");
  CHECK(kept[1].rfind("world_size 12 is not a multiple of h100-sxm's gpus_per_node 8", 0) == 0);
}

TEST_CASE("PartialNodeWarning: a world beyond one node that leaves a node partly used") {
  ClusterSpec c = ClusterPreset("h100-sxm");  // 8 GPUs per node
  CHECK(PartialNodeWarning(4, c).empty());    // within one node: a partial node is a small job
  CHECK(PartialNodeWarning(256, c).empty());  // 32 whole nodes
  c.name = "c3";
  c.gpus_per_node = 3;
  // QA: 256 on 3-GPU nodes passed without a word: 256 = 85 x 3 + 1.
  CHECK(PartialNodeWarning(256, c) ==
        "dockyard-plan: warning: world_size 256 is not a multiple of c3's gpus_per_node 3: the last node is partly used (1 of 3 "
        "GPUs), which launchers starting the same ranks per node (torchrun --nproc-per-node) do not do\n");
}

TEST_CASE("CheckPlanOutputs and CheckRunOutputs refuse clashing or impossible outputs") {
  PlanCliOptions o;
  o.json_given = o.refit_given = true;
  o.json_path = o.refit_json = "same.json";
  CHECK_THROWS_WITH_AS(CheckPlanOutputs(o), "--json and --refit-json name the same output (same.json)", UsageError);
  o.refit_json = "refit.json";
  o.html_given = true;
  o.html_path = "-";
  CHECK_THROWS_WITH_AS(CheckPlanOutputs(o), "--html needs a file path ('-' is not supported)", UsageError);
  RunCliOptions r;
  r.html_path = "-";
  CHECK_THROWS_WITH_AS(CheckRunOutputs(r, false), "--html needs a file path ('-' is not supported)", UsageError);
  r.json_path = "";
  CHECK_THROWS_WITH_AS(CheckRunOutputs(r, true), "--json needs a path or '-', got an empty string", UsageError);
}

}  // namespace dockyard::cli
