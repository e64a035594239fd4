// dockyard-run's settings that are rules rather than flag parsing: the training a run executes
// (which dispatcher, the replay's sequence length), the tolerances of the reduced-precision GEMMs,
// the per-process report path of a multi-process launch, and a replay's options.
#pragma once

#include "planner/model/training.h"
#include "planner/model/training_overrides.h"

namespace dockyard::runtime {

// The training a run executes: `base` (the plan file's training with --plan, else the model spec's
// block) with the run's flags over it (ApplyTrainingOverrides: --dispatcher, --oep,
// --gpus-per-node, --seq-len), validated (ValidateTraining, names the flag). The dispatcher is
// --dispatcher; without a plan file it is all_to_all when not given (dockyard-run's default, not
// the spec's), with one the file's. A replay's --seq-len must be in [1, 2^24] (dockyard::Error).
TrainingConfig RunTraining(const TrainingConfig& base, bool from_plan_file, TrainingOverrides flags);

}  // namespace dockyard::runtime
