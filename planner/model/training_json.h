// The training settings' validation and their JSON block (the `training` object of model specs,
// plan reports and plan files): the rules of every setting together, above the rules of each
// (recompute.h, precision.h).
#pragma once

#include <string>

#include "planner/base/json_util.h"
#include "planner/model/machine.h"
#include "planner/model/training.h"

namespace dockyard {

// Checks ranges (dtypes known, sizes >= 1, imbalance >= 1, budget >= 0, finite). Throws
// dockyard::Error naming the field with `prefix` ("--" for flags, "/training/" for JSON).
void ValidateTraining(const TrainingConfig& t, const std::string& origin);

// The `training` block of a dockyard model spec. Unknown keys are rejected with a suggestion. The
// block's `gpus_per_node` and `gpu_memory_gib` are accepted and left to MachineFromTrainingJson
// (machine.h): they are the machine's, not the training's.
TrainingConfig TrainingFromJson(const JsonView& view);
// The block with the machine's two keys written beside the training's (AddMachineToTrainingJson),
// as one `training` object: the shape plan reports and spec files have always had.
Json TrainingToJson(const TrainingConfig& t, const Machine& machine);

}  // namespace dockyard
