// The node size and per-GPU memory budget (see machine.h).
#include "planner/model/machine.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "planner/base/error.h"

namespace dockyard {

void ValidateMachine(const Machine& m, const std::string& origin) {
  // Flags spell fields with dashes (--gpus-per-node), JSON with underscores (/training/gpus_per_node).
  auto fail = [&](std::string field, const std::string& rule) {
    if (origin == "--") std::replace(field.begin(), field.end(), '_', '-');
    throw Error(fmt::format("{}{}: {}", origin, field, rule));
  };
  if (!std::isfinite(m.gpu_memory_gib) || m.gpu_memory_gib < 0 || m.gpu_memory_gib > 1e6) {
    fail("gpu_memory_gib", fmt::format("must be a finite number in [0, 1e6] GiB, got {}", m.gpu_memory_gib));
  }
  if (m.gpus_per_node < 1 || m.gpus_per_node > (int64_t{1} << 20)) {
    fail("gpus_per_node", fmt::format("must be in [1, 2^20], got {}", m.gpus_per_node));
  }
}

Machine MachineFromTrainingJson(const JsonView& v) {
  Machine m;
  m.gpu_memory_gib = v.NumberOr("gpu_memory_gib", m.gpu_memory_gib);
  m.gpus_per_node = v.IntOr("gpus_per_node", m.gpus_per_node);
  m.gpus_per_node_given = v.Has("gpus_per_node");
  ValidateMachine(m, v.Where() + "/");
  return m;
}

void AddMachineToTrainingJson(const Machine& m, Json* training_block) {
  (*training_block)["gpu_memory_gib"] = m.gpu_memory_gib;
  (*training_block)["gpus_per_node"] = m.gpus_per_node;
}

}  // namespace dockyard
