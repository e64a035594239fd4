// dockyard-run's options and flag registration: the options struct the flags write into, the
// flags, and the checks of the outputs they name. cli/run_cli.cc parses with them and runs.
#pragma once

#include <set>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "cli/flags.h"

namespace dockyard::cli {

// The --help footer: examples, degrees, routing and exit codes.
extern const char* const kRunExamples;

struct RunCliOptions {
  std::string model;
  DegreeFlags degrees;
  TrainingFlags training;  // --dispatcher, --oep, --gpus-per-node, --seq-len (replay)
  std::string backend = "cpu";
  std::string tokens_per_rank = "64", routing, layer, iters = "3", warmup = "1", seed = "0", atol, rtol;
  std::string json_path, fault, plan_path, html_path;
  std::string gemm_precision = "fp32", grouped_gemm = "auto", nccl_id_dir, nccl_job_id;
  std::string replay_rank, cluster;
  RedundantExpertsFlags redundant;
  std::string placement;
  bool overlap_shared = false, tokens_per_rank_given = false;
  std::set<std::string> cuda_flags_given;  // cuda-only flags present on the command line
  bool convention_given = false;
  std::vector<std::string> argv;  // the command line, recorded in the report
};

// Every flag of dockyard-run on `app`, bound to `o`.
void AddRunFlags(CLI::App& app, RunCliOptions& o);
// After parsing: whether --convention and --tokens-per-rank were given, and which CUDA-only
// flags (--gemm-precision, --grouped-gemm, --nccl-id-dir, --nccl-job-id).
void RecordRunFlagsGiven(const CLI::App& app, RunCliOptions& o);
// --json and --html: writable, not the same file, not over an input (model, plan, cluster,
// placement, routing trace); checked before the run, not after it. Throws UsageError.
void CheckRunOutputs(const RunCliOptions& o, bool json_given);

}  // namespace dockyard::cli
