// dockyard-run's settings that are rules rather than flag parsing: the training a run executes
// (which dispatcher, the replay's sequence length), the tolerances of the reduced-precision GEMMs,
// the per-process report path of a multi-process launch, and a replay's options.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "planner/base/file_util.h"
#include "planner/model/training.h"
#include "planner/model/training_overrides.h"
#include "planner/cost/cluster.h"
#include "runtime/config.h"
#include "runtime/replay.h"

namespace dockyard::runtime {

// The training a run executes: `base` (the plan file's training with --plan, else the model spec's
// block) with the run's flags over it (ApplyTrainingOverrides: --dispatcher, --oep, --seq-len),
// validated (ValidateTraining, names the flag). The dispatcher is
// --dispatcher; without a plan file it is all_to_all when not given (dockyard-run's default, not
// the spec's), with one the file's. A replay's --seq-len must be in [1, 2^24] (dockyard::Error).
TrainingConfig RunTraining(const TrainingConfig& base, bool from_plan_file, TrainingOverrides flags);
// The machine a run plans on: `base` (the plan file's, else the model spec's) with --gpus-per-node
// over it (ApplyMachineOverrides; the node size the deepep dispatcher and the default --oep count
// nodes by), validated with the flag's name.
Machine RunMachine(const Machine& base, const TrainingOverrides& flags);

// The default tolerances of the CUDA backend's expert GEMMs at `gemm_precision`, looser where they
// round their inputs (kernels/grouped_gemm.h): bf16 atol 5e-3, rtol 5e-2; tf32 atol 1e-3, rtol 1e-2;
// fp32 none (RunOptions' 1e-4 / 1e-3 stand).
struct Tolerances {
  std::optional<double> atol, rtol;
};
Tolerances GemmPrecisionTolerances(const std::string& gemm_precision);

// One report per process of a multi-process launch: every "{rank}" in `path` becomes `rank`.
std::string ExpandRankInPath(std::string path, int64_t rank);

// A replay's options (--replay-rank) from the run's: the rank (must be in [0, world_size), the
// plan's world; dockyard::Error otherwise), the routing and its seed, iterations, tolerances and
// layer. The cluster, precision and weight blocks are the caller's (backend-dependent).
ReplayOptions ReplayOptionsFromRun(const RunOptions& run, int64_t rank, int64_t world_size);

// The cluster a replay prices dispatch and combine on: `cluster_flag` (--cluster, a preset or
// cluster JSON, LoadCluster), else the simulate plan's, else h100-sxm (dockyard-plan's default).
ClusterSpec ReplayCluster(const std::string& cluster_flag, const std::optional<ClusterSpec>& plan_cluster);

// The files a run report's provenance digests: the model, the plan file (when given), the routing
// trace of "trace:PATH", the placement file (when given).
std::vector<InputFile> RunInputFiles(const std::string& model_path, const std::string& plan_path, const std::string& routing,
                                     const std::string& placement);
// A replay's: the model, the plan file, the trace, and --cluster when it names a file (has a '/').
std::vector<InputFile> ReplayInputFiles(const std::string& model_path, const std::string& plan_path, const std::string& routing,
                                        const std::string& cluster_flag);

}  // namespace dockyard::runtime
