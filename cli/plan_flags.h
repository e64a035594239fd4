// dockyard-plan's options and flag registration (plan, check, simulate, search): the options
// struct the flags write into, the subcommands' flags, and the checks of the outputs they name.
// cli/plan_cli.cc parses with them and makes the library calls.
#pragma once

#include <initializer_list>
#include <ostream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "cli/flags.h"
#include "planner/base/json_util.h"
#include "planner/model/model_spec.h"
#include "planner/model/training.h"
#include "planner/cost/compute_model.h"
#include "planner/cost/cost.h"
#include "planner/frameworks/framework_config.h"

namespace dockyard::cli {

// The --help footer: examples and the training defaults.
extern const char* const kPlanExamples;

struct PlanCliOptions {
  std::string model;
  DegreeFlags degrees;
  std::string json_path, refit_json, html_path;
  // Training settings (empty = the spec's training block, else the default).
  TrainingFlags training;
  bool model_given = false, json_given = false, refit_given = false, html_given = false;
  std::string search_dispatchers;      // search --search-dispatchers
  GlobalBatchFlags global_batch;       // simulate / search
  std::string threads = "1", explain;  // search
  // simulate
  std::string cluster = "h100-sxm", routing = "uniform", seed = "0", routing_layers;
  // check / simulate: --routing given sizes the received rows in memory (received_rows.h);
  // --capacity-factor reports the assignments that capacity would drop.
  bool routing_given = false;
  bool search_routing_given = false;  // search --routing: each layout's sample sizes its memory
  std::string capacity_factor;
  bool no_overlap = false;
  // simulate / search: the compute model and its run settings (compute_model.h).
  std::string compute_model = kDefaultComputeModel;  // --cross-entropy is a training flag (flags.h)
  bool cuda_graphs = false;
  bool full_iteration_cuda_graph = false;  // --full-iteration-cuda-graph (run_settings.h; implies cuda_graphs)
  RedundantExpertsFlags redundant;  // simulate: redundant experts (opt-in)
  std::string calibration;          // simulate / search: calibration JSON (empty = the built-in defaults)
  std::vector<std::string> argv;    // the command line, recorded in reports
  // search
  std::string top = "10", max_pp;
  std::string progress_interval;  // search --progress-interval (progress_lines.h; empty = the default)
  // A framework's job config (cli/framework_flags.h): --from-megatron / --from-torchtitan /
  // --from-megatron-bridge FILE, read
  // before the flags are parsed (its settings become flags); search --unpin; --emit / --emit-out /
  // --emit-row. `framework_flag`: which --from-* gave `framework_config`.
  std::string from_megatron, from_torchtitan, from_megatron_bridge, unpin, emit, emit_out, emit_row;
  std::string framework_flag;
  std::optional<FrameworkConfig> framework_config;
};

// --compute-model into `model`, --cuda-graphs into the run settings `run`, checked against the
// run's cross-entropy (compute_model.h ApplyComputeModel).
void ApplyComputeFlags(const PlanCliOptions& o, ComputeModel* model, RunSettings* run);
// The flags of each command: the compute model's, the plan's (model, degrees, outputs, training),
// the routing flags of check and simulate.
void AddComputeFlags(CLI::App* app, PlanCliOptions& o);
void AddPlanOptions(CLI::App* app, PlanCliOptions& o);
void AddRoutingFlags(CLI::App* app, PlanCliOptions& o);
// The plan's flags on `app`, then the plan (the default spelled out), check and simulate
// subcommands with theirs.
void AddPlanCommands(CLI::App& app, PlanCliOptions& o, CLI::App** plan, CLI::App** check, CLI::App** simulate);
// The search subcommand's options: the model, world and convention, the cluster and routing, the
// pinned degrees and settings, the ranking's size and outputs.
CLI::App* AddSearchCommand(CLI::App& app, PlanCliOptions& o);
// After parsing: which of --model, --routing (not search's), --json, --refit-json, --html were
// given on any of `apps`, and search's EP-overlap pin (UsageError when pinned twice).
void RecordGivenFlags(std::initializer_list<CLI::App*> apps, const CLI::App* search, PlanCliOptions& o);
// --json, --refit-json and --html: given a path, distinct, at most one on stdout (never the HTML
// page), none over an input (model, cluster JSON, calibration, routing trace). Throws UsageError.
void CheckPlanOutputs(const PlanCliOptions& o);
// The model spec's training block with the training flags over it (ApplyTrainingOverrides); the
// memory reserve: the flag, else the block's, else the default (ResolveMemoryReserve).
TrainingConfig ResolveTraining(const TrainingFlags& flags, const ModelSpec& model, int64_t pp);
// The model spec's machine (its training block's gpus_per_node and gpu_memory_gib) with
// --gpus-per-node and --gpu-memory-gib over it (ApplyMachineOverrides).
Machine ResolveMachine(const TrainingFlags& flags, const ModelSpec& model);

// What produced a report (planner/report/provenance.h Provenance): the version, the command
// line and the digests of the input files the flags name (model, cluster, routing trace,
// calibration).
Json ReportProvenance(const PlanCliOptions& o);

// --imbalance and --routing both size the received rows (check, simulate, search: --routing's
// samples do): throws cli::UsageError when both are given.
void RejectImbalanceWithRouting(bool routing_given, const std::string& imbalance);

// "warning: ..." (one line) when --gpu-memory-gib `budget_gib` is above `cluster`'s memory per
// GPU (memory_gib: a budget none of its GPUs has), else empty. A warning, not an error: a user may
// size for a GPU the presets do not hold.
std::string BudgetAboveClusterWarning(double budget_gib, const ClusterSpec& cluster);
// Prints a warning line (one of the functions here or planner/model/seq_len.h SeqLenWarning; ""
// = none) on `err` with the "dockyard-plan: " label, and keeps it in `kept` as the reports'
// `warnings` hold it (plan_command.h WarningText).
void Warn(const std::string& line, std::vector<std::string>* kept, std::ostream& err);
// A world larger than one node that does not fill whole nodes of `cluster` (gpus_per_node): the
// warning (one line, "" otherwise). Launchers start the same number of ranks on every node
// (torchrun --nproc-per-node, Slurm --ntasks-per-node), so such a job leaves GPUs idle or cannot
// start as one; the figures still place ranks 0..world-1 node by node.
std::string PartialNodeWarning(int64_t world_size, const ClusterSpec& cluster);

// "warning: ..." (one line) when the node size given by --gpus-per-node (simulate; over the spec) or,
// without the flag, by the model spec's training.gpus_per_node differs from `cluster`'s NVLink domain
// (network.h NvlinkDomainGpus, the time model's locality unit), else empty. It names both values,
// their sources and the one `command` uses: the flag is over the cluster (simulate), the cluster is
// over the spec (simulate, search: network.h MachineOf; docs/cluster.md "gpus_per_node in simulate
// and search"). A spec with a training block but no gpus_per_node key counts as its default 8.
std::string NodeSizeClusterWarning(const TrainingFlags& flags, const ModelSpec& model, const ClusterSpec& cluster,
                                   const std::string& command);

}  // namespace dockyard::cli
