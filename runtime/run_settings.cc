// dockyard-run's settings (see run_settings.h).
#include "runtime/run_settings.h"

#include <fmt/format.h>

#include "planner/base/error.h"

namespace dockyard::runtime {

TrainingConfig RunTraining(const TrainingConfig& base, bool from_plan_file, TrainingOverrides flags) {
  if (!from_plan_file && !flags.dispatcher) flags.dispatcher = "all_to_all";
  if (flags.seq_len && (*flags.seq_len < 1 || *flags.seq_len > (int64_t{1} << 24))) {
    throw Error(fmt::format("--seq-len must be in [1, 2^24], got {}", *flags.seq_len));
  }
  return ApplyTrainingOverrides(base, flags, /*pp=*/1, /*num_layers=*/0);  // no --pp-layer-split in a run
}

}  // namespace dockyard::runtime
