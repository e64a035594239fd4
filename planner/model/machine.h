// Machine: what the machine is, as the planner's memory and traffic rules need it — the node size
// (ranks that share a node's fast interconnect) and the per-GPU memory budget. One home for both:
// TrainingConfig (training.h) holds how the model is trained, a ClusterSpec (planner/cost/cluster.h)
// holds the hardware and produces the node size (planner/cost/network.h MachineOf), and a Plan
// carries one Machine beside its one TrainingConfig (planner/layout/plan.h). It lives in model/,
// the lowest domain layer, so layout/ and accounting/ take it without reaching up into cost/
// (docs/architecture.md "One home for the node size and the budget").
//
// Set by --gpus-per-node / --gpu-memory-gib, by the cluster (simulate, search: its NVLink domain,
// network.h NvlinkDomainGpus), or by the keys `gpus_per_node` / `gpu_memory_gib` of a model spec's
// or plan file's `training` block (kept there so existing files load unchanged; docs/memory-model.md).
#pragma once

#include <cstdint>
#include <string>

#include "planner/base/json_util.h"

namespace dockyard {

struct Machine {
  // Ranks per node: ranks fill nodes in order (rank / gpus_per_node is a rank's node), so a group
  // whose ranks fall in different nodes crosses the network (comm.h, deepep.h, the deredundency
  // dispatcher's default oep, workload.h DeredundencyOep). Default 8 (an 8-GPU HGX node).
  int64_t gpus_per_node = 8;
  // Memory budget per GPU in GiB (2^30 bytes); 0 = none. What memory.h OverBudget holds the
  // per-rank peak against, less TrainingConfig::memory_reserve_gib.
  double gpu_memory_gib = 0;
  // Whether a training block set gpus_per_node (MachineFromTrainingJson), not the default: only then
  // is there a spec's node size to warn about against a cluster's.
  bool gpus_per_node_given = false;
};

// Checks ranges: gpus_per_node in [1, 2^20], gpu_memory_gib finite in [0, 1e6]. Throws
// dockyard::Error naming the field with `origin` ("--" for flags, spelled with dashes:
// "--gpus-per-node: must be in [1, 2^20], got 0"; "/training/" for JSON; "training." for a plan).
void ValidateMachine(const Machine& m, const std::string& origin);

// The `gpus_per_node` and `gpu_memory_gib` keys of a `training` block (model spec or plan file);
// absent keys keep the defaults above. Validated (ValidateMachine with the block's path). The
// block's other keys are TrainingFromJson's (training.h), which accepts these two and leaves them here.
Machine MachineFromTrainingJson(const JsonView& training_block);

// Writes `gpus_per_node` and `gpu_memory_gib` into a `training` block (the keys and values
// TrainingToJson wrote before the machine had its own home, so reports stay byte-identical).
void AddMachineToTrainingJson(const Machine& m, Json* training_block);

}  // namespace dockyard
