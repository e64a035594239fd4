// dockyard-plan command line (see plan_cli.h).
#include "cli/plan_cli.h"

#include <algorithm>
#include <functional>
#include <optional>
#include <string>
#include <unistd.h>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "cli/calibrate_cli.h"
#include "cli/flag_suggest.h"
#include "cli/flags.h"
#include "cli/framework_flags.h"
#include "cli/plan_flags.h"
#include "cli/search_cli.h"
#include "planner/base/error.h"
#include "planner/base/file_util.h"
#include "planner/layout/default_layout.h"
#include "planner/cost/compute_model.h"
#include "planner/layout/plan.h"
#include "planner/model/model_spec.h"
#include "planner/model/recompute.h"
#include "planner/model/seq_len.h"
#include "planner/report/budget_text.h"
#include "planner/report/plan_command.h"
#include "planner/report/provenance.h"
#include "planner/report/search_command.h"
#include "planner/accounting/memory.h"
#include "planner/search/explain.h"
#include "planner/search/redundant_search.h"
#include "planner/search/search_space.h"
#include "planner/calibration/calibration.h"
#include "planner/cost/network.h"
#include "planner/model/model_file.h"

namespace dockyard {
namespace {

using CliOptions = cli::PlanCliOptions;
using cli::AddSearchCommand;
using cli::ApplyComputeFlags;
using cli::CheckPlanOutputs;
using cli::ParseInt;
using cli::ParseNumber;
using cli::RecordGivenFlags;
using cli::ReportProvenance;
using cli::ResolveTraining;
using cli::UsageError;
using cli::WriteOutput;

using Command = PlanCommand;

// What plan, check and simulate build the plan from: the degrees (the embedded default's layout
// without --model), the model, its training with the flags over it, simulate's cluster and
// calibration, and the global batch's schedule when --global-batch-size is given.
struct PlanInputs {
  bool use_default = false;
  ParallelDimsOptions dims;
  ModelSpec model;
  std::string source;
  TrainingConfig training;
  Machine machine;  // the node size and budget: the spec's, the flags', simulate's cluster's node size
  std::optional<ClusterSpec> cluster;
  std::optional<Calibration> calibration;
  std::optional<GlobalBatchSchedule> global_batch;
  ComputeModel compute_model = ComputeModel::kKernels;  // simulate
  std::vector<std::string> warnings;  // printed on stderr as found, and carried to the reports (WarningText)
};


// The degrees from the flags (--model: only with --world-size).
ParallelDimsOptions PlanDims(const CliOptions& o, Command command) {
  cli::RequireWorldSize(o);
  ParallelDimsOptions dims = o.degrees.Parse(kDefaultWorldSize);
  if (!cli::ModelGiven(o)) ApplyDefaultLayout(!o.degrees.ep.empty(), &dims);
  return dims;
}

// The model's training with the flags over it (and its machine, set in `in`), its sequence length
// warned about on `err` and its memory reserve checked against the budget.
TrainingConfig PlanTraining(const CliOptions& o, Command command, PlanInputs& in, std::ostream& err) {
  // Megatron-only flags under torchtitan first: their own rules (a release, a fusion) are moot there.
  RejectMegatronOnlyOverrides(o.training.Parse(), IsTorchtitan(in.dims.convention));
  TrainingConfig training = ResolveTraining(o.training, in.model, in.dims.pp);
  RejectMegatronOnlyRunSettings(training, IsTorchtitan(in.dims.convention));
  in.machine = cli::ResolveMachine(o.training, in.model);
  // check holds every rank to a budget: the flag's, else the spec's (the range is ValidateMachine's, exit 1).
  if (command == Command::kCheck && !(in.machine.gpu_memory_gib > 0)) {
    throw UsageError("check needs a budget: --gpu-memory-gib GiB (> 0) or the model spec's training.gpu_memory_gib");
  }
  // The bound first (BuildPlan holds it too, naming the flag): a bad value is blamed on where it came from.
  ValidateSeqLenForModel(training.seq_len, in.model, cli::SeqLenName(o.training.seq_len));
  cli::Warn(SeqLenWarning(training.seq_len, in.model, cli::SeqLenName(o.training.seq_len)), &in.warnings, err);
  if (in.use_default) ApplyDefaultTraining(!o.training.recompute.empty(), &training);
  // A reserve at or above the budget is invalid input (exit 1), not a plan over budget (exit 3).
  ValidateMemoryReserve(in.machine.gpu_memory_gib, training.memory_reserve_gib.value_or(0),
                        cli::MemoryBudgetName(o.training.gpu_memory_gib), cli::MemoryReserveName(o.training.memory_reserve_gib));
  // simulate always has a cluster (h100-sxm without --cluster): with no budget its reserve holds the
  // warning against the cluster's memory (PeakAboveClusterWarning), so only the plan refuses it.
  if (!o.training.memory_reserve_gib.empty() && command != Command::kSimulate) {
    RequireBudgetForReserve(in.machine.gpu_memory_gib, training.memory_reserve_gib.value_or(0), "--memory-reserve-gib", "plan");
  }
  return training;
}

// Every input of the plan, read and checked in the order the flags' errors are reported.
PlanInputs ReadPlanInputs(const CliOptions& o, Command command, std::ostream& err) {
  PlanInputs in;
  in.use_default = !cli::ModelGiven(o);
  in.dims = PlanDims(o, command);
  in.model = cli::LoadPlanModel(o);
  in.source = cli::PlanModelSource(o);
  in.training = PlanTraining(o, command, in, err);
  if (command == Command::kSimulate) {
    // Run settings of the simulated step: the shared-expert overlap (unset: the convention's
    // default, BuildPlan), CUDA graphs, the cross-entropy.
    if (o.no_overlap) {
      if (o.training.moe_shared_expert_overlap) {
        throw UsageError("--no-overlap and --moe-shared-expert-overlap: one turns the shared-expert overlap off, the other on; give one");
      }
      in.training.run.overlap_shared_experts = false;
    }
    ApplyComputeFlags(o, &in.compute_model, &in.training.run);
    in.cluster = WithFlag("--cluster", [&] { return LoadCluster(o.cluster); });
    cli::Warn(cli::NodeSizeClusterWarning(o.training, in.model, *in.cluster, "simulate"), &in.warnings, err);
    if (!o.calibration.empty()) in.calibration = WithFlag("--calibration", [&] { return LoadCalibration(o.calibration); });
    // The cluster's locality unit decides cross-node traffic unless --gpus-per-node says otherwise:
    // the NVLink domain, the time model's rule (network.h NvlinkDomainGpus).
    if (o.training.gpus_per_node.empty()) in.machine = MachineOf(*in.cluster, in.machine.gpu_memory_gib);
  }
  if (const auto gbs = o.global_batch.Sequences(in.training.seq_len)) {
    if (!o.training.grad_accumulation_steps.empty()) {
      throw UsageError("--grad-accumulation-steps: derived from --global-batch-size (torchtitan's outer loop); give one of them");
    }
    in.global_batch = ApplyGlobalBatch(*gbs, in.dims, &in.training);
  }
  return in;
}

// The library request of the command: provenance, routing (simulate, and check given --routing or
// --capacity-factor), cluster and calibration, simulate's compute and redundant-experts options,
// the documents asked for.
PlanCommandRequest MakePlanRequest(const CliOptions& o, Command command, const PlanInputs& in) {
  PlanCommandRequest request;
  request.command = command;
  request.model_source = in.source;
  request.provenance = ReportProvenance(o);
  request.capacity_factor = ParseNumber("--capacity-factor", o.capacity_factor);
  request.routing_given = o.routing_given;
  request.routing_text = o.routing;
  if (command == Command::kSimulate || (command == Command::kCheck && (o.routing_given || request.capacity_factor))) {
    cli::RejectImbalanceWithRouting(o.routing_given, o.training.imbalance);
    request.seed = cli::ParseSeed(o.seed);
    request.routing_layers = ParseInt("--routing-layers", o.routing_layers);
  }
  request.cluster = in.cluster;
  request.calibration = in.calibration;
  if (command == Command::kSimulate) {
    request.compute_model = in.compute_model;
    request.redundant = cli::ParseRedundantExpertsFlags(o.redundant);
  }
  request.json = o.json_given;
  request.html = o.html_given;
  request.refit = o.refit_given;
  request.warnings = in.warnings;
  return request;
}

// Writes the documents asked for (files all-or-nothing; '-' goes to stdout) and, unless a document
// went to stdout, the command's text and where each file went. Returns whether it was quiet.
bool WritePlanOutputs(const CliOptions& o, const PlanCommandRequest& request, const PlanCommandResult& result, const PlanInputs& in,
                      std::ostream& out) {
  // --emit: the launch config, made before any file is written (a layout Megatron cannot express is refused first).
  const std::string emitted = o.emit.empty() ? "" : cli::EmitText(o, result.plan, 0);
  const bool emit_stdout = !o.emit.empty() && (o.emit_out.empty() || o.emit_out == "-");
  std::vector<cli::OutputFile> files;
  if (!o.emit.empty() && !emit_stdout) files.push_back({"--emit-out", o.emit_out, emitted});
  if (o.json_given && o.json_path != "-") files.push_back({"--json", o.json_path, result.report_text});
  if (o.refit_given && o.refit_json != "-") files.push_back({"--refit-json", o.refit_json, result.refit_text});
  if (o.html_given) files.push_back({"--html", o.html_path, result.html_text});
  cli::WriteOutputFiles(files);
  if (o.json_given && o.json_path == "-") out << result.report_text;
  if (o.refit_given && o.refit_json == "-") out << result.refit_text;
  if (emit_stdout) out << emitted;
  const bool quiet = (o.json_given && o.json_path == "-") || (o.refit_given && o.refit_json == "-") || emit_stdout;
  if (!quiet) {
    if (o.framework_config) out << FrameworkConfigText(*o.framework_config);
    out << PlanCommandText(request, result, in.global_batch,
                           in.use_default ? DefaultModelNote(in.dims, result.plan.training.recompute) : "");
    if (o.json_given) out << "JSON report written to " << o.json_path << "\n";
    if (o.refit_given) out << "Refit map written to " << o.refit_json << "\n";
    if (o.html_given) out << "HTML report written to " << o.html_path << "\n";
    if (!o.emit.empty()) out << cli::EmitFormatName(o.emit) << " written to " << o.emit_out << "\n";
  }
  return quiet;
}

// Builds the plan from flags (or the embedded default) and writes what was asked.
int PlanAndReport(const CliOptions& o, Command command, std::ostream& out, std::ostream& err) {
  const bool check = command == Command::kCheck;
  PlanInputs in = ReadPlanInputs(o, command, err);
  if (in.cluster) cli::Warn(cli::BudgetAboveClusterWarning(in.machine.gpu_memory_gib, *in.cluster), &in.warnings, err);
  if (in.cluster) cli::Warn(cli::PartialNodeWarning(in.dims.world_size, *in.cluster), &in.warnings, err);
  // simulate with no budget holds its reserve against the cluster's memory (the warning after the
  // plan): a reserve that leaves nothing of it is invalid input, as with a budget (exit 1).
  const bool against_cluster = in.cluster && !(in.machine.gpu_memory_gib > 0);
  const double reserve_gib = in.training.memory_reserve_gib.value_or(kDefaultMemoryReserveGib);
  if (against_cluster) {
    ValidateMemoryReserve(in.cluster->memory_gib, reserve_gib, fmt::format("{}'s memory_gib", in.cluster->name),
                          cli::MemoryReserveName(o.training.memory_reserve_gib));
  }
  const PlanCommandRequest request = MakePlanRequest(o, command, in);
  const PlanCommandResult result = RunPlanCommand(BuildPlan(in.model, in.dims, in.training, in.machine), request);
  const bool quiet = WritePlanOutputs(o, request, result, in, out);
  err << result.peak_warning;  // simulate with no budget (RunPlanCommand holds the peak to the cluster's memory)
  // check and simulate: a plan over its budget exits kExitOverBudget (its reports are written).
  if (FailsBudget(request, result)) {
    err << OverBudgetText(result.plan, result.memory, check ? "dockyard-plan check" : "dockyard-plan simulate");
    err << result.redundant_over_budget_text;
    err << result.redundant_within_budget_text;  // the plan is over, the replicas' peak is not: said
    return cli::kExitOverBudget;
  }
  if (check && !quiet) {
    out << BudgetFitsText(result.memory);
  }
  return cli::kExitOk;
}

}  // namespace

int RunPlanCli(int argc, char** argv, std::ostream& out, std::ostream& err) {
  CliOptions o;
  o.argv.assign(argv, argv + argc);
  CLI::App app{
      "dockyard-plan: a dry run of an MoE sharding layout (meshes, rank groups, placements, local shapes, "
      "expert ownership, memory and traffic per rank)."};
  app.footer(cli::kPlanExamples);
  CLI::App* plan = nullptr;
  CLI::App* check = nullptr;
  CLI::App* simulate = nullptr;
  cli::AddPlanCommands(app, o, &plan, &check, &simulate);
  CLI::App* search = AddSearchCommand(app, o);
  for (CLI::App* a : {&app, plan, check, simulate}) cli::AddFrameworkFlags(a, o, false);
  cli::AddFrameworkFlags(search, o, true);
  CLI::App* spec = app.add_subcommand("spec", "write the normalized dockyard model spec of a model");
  std::string spec_model, spec_out = "-";
  spec->add_option("--model", spec_model, "HF config.json or dockyard model spec")->required();
  spec->add_option("--out", spec_out, "output path ('-' = stdout, the default)");
  CLI::App* calibrate = app.add_subcommand("calibrate",
                                           "fit a calibration file to measured runs, component measurements and "
                                           "dockyard-run reports (docs/calibration.md)");
  CalibrateOptions cal;
  calibrate->add_option("--runs", cal.runs, "runs file (testdata/fidelity/runs.json format) or dockyard-run --json report; repeatable")
      ->required();
  calibrate->add_option("--out", cal.out, "calibration JSON to write")->required();
  calibrate->add_option("--preset", cal.preset, "hardware preset calibrated (default: --from's preset, else h100-sxm)");
  calibrate->add_option("--from", cal.from, "calibration whose knobs are the priors (default: the preset's built-in knobs)");
  calibrate->add_option("--cluster", cal.cluster, "preset or cluster JSON the dockyard-run reports ran on (default: the preset)");
  calibrate->add_option("--name", cal.name, "name of the written calibration (default PRESET-fitted; with --cluster, CLUSTER-NAME-fitted)");
  calibrate->add_option("--compute-model", cal.compute_model, "kernels (default) | gemm: the compute model the rows are predicted under")
      ->check(CLI::IsMember({"gemm", "kernels"}));
  app.require_subcommand(0, 1);

  app.set_version_flag("--version", VersionText("dockyard-plan"), "print the version and the git commit this binary was built from");
  cli::RefuseRepeatedFlags(app);
  // --from-megatron / --from-torchtitan FILE: its settings join the command line as the flags they are, before parsing.
  std::vector<std::string> args(argv, argv + argc);
  const int expanded = cli::RunReportingErrors("dockyard-plan", "out of memory reading a --from-* job config", err, [&] {
    cli::RejectEmptyEquals(args);
    args = cli::ExpandFrameworkConfig(args, app, &o);
    return 0;
  });
  if (expanded != 0) return expanded;
  std::vector<char*> expanded_argv;
  for (std::string& a : args) expanded_argv.push_back(a.data());
  try {
    app.parse(static_cast<int>(expanded_argv.size()), expanded_argv.data());
  } catch (const CLI::CallForHelp&) {
    out << app.help();
    return 0;
  } catch (const CLI::CallForVersion& v) {
    out << v.what();
    return 0;
  } catch (const CLI::ParseError& e) {
    return cli::ReportParseError("dockyard-plan", app, e, err);
  }

  const auto run_parsed = [&]() -> int {
    RecordGivenFlags({&app, plan, check, simulate, search}, search, o);
    // A flag given with an empty value is a usage error, whatever the flag.
    for (CLI::App* a : {&app, plan, check, simulate, search, spec, calibrate}) {
      if (a == &app || a->parsed()) cli::RejectEmptyValues(*a);
    }
    CheckPlanOutputs(o);
    cli::CheckEmitFlags(o, search->parsed());
    if (spec->parsed()) RejectOutputOverInputs(spec_out, "--out", {spec_model});
    if (spec->parsed()) {
      if (spec_out.empty()) throw UsageError("--out needs a path or '-', got an empty string");
      CheckOutputPath(spec_out, "--out");  // before any work, naming the flag
      ModelSpec model = WithFlag("--model", [&] { return LoadModel(spec_model); });
      WriteOutput(spec_out, ModelSpecToJson(model).dump(2, ' ', false, Json::error_handler_t::replace) + "\n", out);
      return 0;
    }
    if (search->parsed()) return cli::RunSearch(o, out, err);
    if (calibrate->parsed()) return RunCalibrate(cal, out);
    return PlanAndReport(o, check->parsed() ? Command::kCheck : simulate->parsed() ? Command::kSimulate : Command::kPlan, out, err);
  };
  return cli::RunReportingErrors("dockyard-plan", "out of memory building the plan", err, [&] {
    // An error about a flag a job config set names the config's key too.
    try {
      return run_parsed();
    } catch (const UsageError& e) {
      throw UsageError(e.what() + cli::FrameworkAttribution(o, e.what()));
    } catch (const Error& e) {
      throw Error(e.what() + cli::FrameworkAttribution(o, e.what()));
    }
  });
}

}  // namespace dockyard
