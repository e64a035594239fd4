// dockyard-run's settings (see run_settings.h).
#include "runtime/run_settings.h"

#include <fmt/format.h>

#include "planner/base/error.h"

namespace dockyard::runtime {

TrainingConfig RunTraining(const TrainingConfig& base, bool from_plan_file, TrainingOverrides flags) {
  if (!from_plan_file && !flags.dispatcher) flags.dispatcher = Dispatcher::kAllToAll;
  if (flags.seq_len && (*flags.seq_len < 1 || *flags.seq_len > (int64_t{1} << 24))) {
    throw Error(fmt::format("--seq-len must be in [1, 2^24], got {}", *flags.seq_len));
  }
  return ApplyTrainingOverrides(base, flags, /*pp=*/1, /*num_layers=*/0);  // no --pp-layer-split in a run
}

Machine RunMachine(const Machine& base, const TrainingOverrides& flags) {
  return ApplyMachineOverrides(base, flags);
}

Tolerances GemmPrecisionTolerances(const std::string& gemm_precision) {
  // Looser defaults where the expert GEMMs round their inputs (kernels/grouped_gemm.h).
  if (gemm_precision == "bf16") return {5e-3, 5e-2};
  if (gemm_precision == "tf32") return {1e-3, 1e-2};
  return {};
}

std::string ExpandRankInPath(std::string path, int64_t rank) {
  // One report per process: "{rank}" in --json becomes this process's rank.
  for (size_t at = path.find("{rank}"); at != std::string::npos; at = path.find("{rank}")) path.replace(at, 6, std::to_string(rank));
  return path;
}

ReplayOptions ReplayOptionsFromRun(const RunOptions& run, int64_t rank, int64_t world_size) {
  ReplayOptions ro;
  ro.rank = rank;
  if (ro.rank < 0 || ro.rank >= world_size) {
    throw Error(fmt::format("--replay-rank must be in [0, {}) (the plan's world size), got {}", world_size, ro.rank));
  }
  if (run.routing) ro.routing = *run.routing;
  ro.routing.seed = run.seed;
  ro.seed = run.seed;
  ro.iters = run.iters;
  ro.warmup = run.warmup;
  ro.atol = run.atol;
  ro.rtol = run.rtol;
  ro.layer = run.layer;
  return ro;
}

ClusterSpec ReplayCluster(const std::string& cluster_flag, const std::optional<ClusterSpec>& plan_cluster) {
  // The cluster: --cluster, else the simulate plan's, else h100-sxm (dockyard-plan's default).
  return !cluster_flag.empty() ? LoadCluster(cluster_flag) : plan_cluster ? *plan_cluster : ClusterPreset("h100-sxm");
}

std::vector<InputFile> RunInputFiles(const std::string& model_path, const std::string& plan_path, const std::string& routing,
                                     const std::string& placement) {
  std::vector<InputFile> inputs = {{"--model", model_path}};
  if (!plan_path.empty()) inputs.push_back({"--plan", plan_path});
  if (routing.rfind("trace:", 0) == 0) inputs.push_back({"--routing trace:", routing.substr(6)});
  if (!placement.empty()) inputs.push_back({"--placement", placement});
  return inputs;
}

std::vector<InputFile> ReplayInputFiles(const std::string& model_path, const std::string& plan_path, const std::string& routing,
                                        const std::string& cluster_flag) {
  std::vector<InputFile> inputs = RunInputFiles(model_path, plan_path, routing, "");
  if (!cluster_flag.empty() && cluster_flag.find('/') != std::string::npos) inputs.push_back({"--cluster", cluster_flag});
  return inputs;
}

}  // namespace dockyard::runtime
