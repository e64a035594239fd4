// dockyard-run command line (see run_cli.h).
#include "cli/run_cli.h"

#include <cstdlib>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "cli/flag_suggest.h"
#include "cli/flags.h"
#include "cli/run_flags.h"
#include "planner/base/error.h"
#include "planner/base/file_util.h"
#include "planner/layout/plan.h"
#include "planner/model/model_spec.h"
#include "planner/report/html_report.h"
#include "planner/report/plan_file.h"
#include "planner/report/plan_file_run.h"
#include "planner/report/provenance.h"
#include "planner/report/report.h"
#include "planner/report/run_match.h"
#include "planner/routing/routing.h"
#include "planner/model/model_file.h"
#include "runtime/config.h"
#include "runtime/cpu/cpu_backend.h"
#include "runtime/cuda/cuda_backend.h"
#include "runtime/cuda/launch.h"
#include "runtime/replay.h"
#include "runtime/run.h"
#include "runtime/run_settings.h"

namespace dockyard {
namespace {

using CliOptions = cli::RunCliOptions;
using cli::CheckRunOutputs;
using cli::ParseInt;
using cli::ParseNumber;
using cli::UsageError;
using cli::WriteOutput;

std::unique_ptr<runtime::Backend> MakeBackend(const CliOptions& o, const runtime::LaunchInfo& launch) {
  if (o.backend != "cuda") return std::make_unique<runtime::cpu::CpuBackend>();
  runtime::cuda::CudaBackendOptions co;
  co.precision = o.gemm_precision;
  co.gemm_path = o.grouped_gemm;
  co.launch = launch;
  co.nccl_id_dir = o.nccl_id_dir;
  return runtime::cuda::MakeCudaBackend(co);
}

// --replay-rank: one rank's share of the plan on one device (runtime/replay.h).
int RunReplay(const CliOptions& o, const Plan& plan, const runtime::RunOptions& run, const runtime::LaunchInfo& launch,
              const std::optional<ClusterSpec>& plan_cluster, const std::string& model_path, bool json_given, std::ostream& out,
              std::ostream& err) {
  if (launch.multi_process()) throw UsageError("--replay-rank runs on one GPU: start it without torchrun/srun/mpirun");
  // Flags a replay does not use are errors, not silently ignored.
  if (o.tokens_per_rank_given) {
    throw UsageError(
        "--tokens-per-rank does not apply to --replay-rank: the replay's tokens are the plan's routed "
        "tokens per rank (set them with --seq-len)");
  }
  if (o.overlap_shared) throw UsageError("--overlap-shared-experts does not apply to --replay-rank (no combine runs)");
  if (!o.fault.empty()) throw UsageError("--inject-fault does not apply to --replay-rank");
  runtime::ReplayOptions ro = runtime::ReplayOptionsFromRun(run, *ParseInt("--replay-rank", o.replay_rank), plan.dims.world_size);
  ro.cluster = WithFlag("--cluster", [&] { return runtime::ReplayCluster(o.cluster, plan_cluster); });
  ro.precision = o.backend == "cuda" ? o.gemm_precision : "fp32";
  if (o.backend != "cuda") ro.weight_block_bytes = run.weight_block_bytes;  // CPU: blocks sized for L2
  const std::unique_ptr<runtime::Backend> backend = MakeBackend(o, launch);
  const runtime::ReplayReport report = runtime::ReplayRank(plan, ro, *backend);
  if (json_given) {
    Json j = runtime::ReplayReportToJson(report);
    j["provenance"] = Provenance(o.argv, runtime::ReplayInputFiles(model_path, o.plan_path, o.routing, o.cluster));
    j["generator"] = {{"name", "dockyard-run"}, {"version", kDockyardVersion}};
    WriteOutput(o.json_path, j.dump(1, ' ', false, Json::error_handler_t::replace) + "\n", out);
  }
  if (!json_given || o.json_path != "-") {
    out << runtime::ReplayReportToText(report);
    if (json_given) out << "JSON report written to " << o.json_path << "\n";
  }
  if (!report.passed()) {
    err << fmt::format("dockyard-run: validation failed: {} of {} checked elements differ from the reference\n", report.wrong,
                       report.checked);
    return 3;
  }
  return 0;
}

// --backend cuda: the CUDA backend compiled in, the launcher's ranks (torchrun/srun/mpirun) and
// "{rank}" in --json; --backend cpu refuses the CUDA-only flags.
runtime::LaunchInfo PrepareLaunch(CliOptions* options) {
  CliOptions& o = *options;
  runtime::LaunchInfo launch;
  if (o.backend == "cuda") {
    if (!runtime::cuda::CudaBackendCompiled()) {
      throw Error(
          "this dockyard-run was built without the CUDA backend (--backend cuda): no CUDA toolkit was found at "
          "build time; use --backend cpu");
    }
    launch = runtime::LaunchFromEnv([](const char* name) { return std::getenv(name); });
    if (!o.nccl_job_id.empty()) launch.job_id = o.nccl_job_id;
    if (launch.multi_process()) o.json_path = runtime::ExpandRankInPath(o.json_path, launch.rank);
  } else {
    for (const char* flag : {"--gemm-precision", "--grouped-gemm", "--nccl-id-dir", "--nccl-job-id"}) {
      if (o.cuda_flags_given.count(flag)) throw UsageError(fmt::format("{} applies to --backend cuda only", flag));
    }
  }
  return launch;
}

// The run's options from its flags (seed and layer >= 0; tolerances: the flag, else the CUDA
// GEMM precision's, else RunOptions').
runtime::RunOptions ParseRunOptions(const CliOptions& o, const TrainingOverrides& training_flags) {
  runtime::RunOptions run;
  run.oep = training_flags.oep;
  run.tokens_per_rank = *ParseInt("--tokens-per-rank", o.tokens_per_rank);
  run.iters = *ParseInt("--iters", o.iters);
  run.warmup = *ParseInt("--warmup", o.warmup);
  run.seed = cli::ParseSeed(o.seed);
  run.layer = ParseInt("--layer", o.layer).value_or(-1);
  if (!o.layer.empty() && run.layer < 0) throw Error(fmt::format("--layer must be >= 0, got {}", run.layer));
  const runtime::Tolerances tolerances = o.backend == "cuda" ? runtime::GemmPrecisionTolerances(o.gemm_precision) : runtime::Tolerances{};
  run.atol = ParseNumber("--atol", o.atol).value_or(tolerances.atol.value_or(run.atol));
  run.rtol = ParseNumber("--rtol", o.rtol).value_or(tolerances.rtol.value_or(run.rtol));
  if (!o.routing.empty()) {
    RoutingSpec spec = WithFlag("--routing", [&] { return ParseRoutingSpec(o.routing); });
    spec.seed = run.seed;
    run.routing = spec;
  }
  run.redundant = cli::ParseRedundantExpertsFlags(o.redundant);
  run.placement_file = o.placement;
  if (o.fault == "wrong-expert") run.fault = runtime::Fault::kWrongExpertOwner;
  run.overlap_shared_experts = o.overlap_shared;
  if (o.backend == "cuda") run.rank_weight_block_bytes = int64_t{1} << 30;  // whole experts per grouped GEMM
  return run;
}

int Run(const CliOptions& o_in, bool json_given, std::ostream& out, std::ostream& err) {
  CliOptions o = o_in;
  const runtime::LaunchInfo launch = PrepareLaunch(&o);
  std::optional<PlanFile> plan_file;
  if (!o.plan_path.empty()) {
    if (o.degrees.AnyDegreeGiven()) throw UsageError("--plan gives the degrees; do not also pass --world-size/--tp/--ep/...");
    if (o.convention_given) throw UsageError("--plan gives the convention; do not also pass --convention");
    plan_file = WithFlag("--plan", [&] { return ReadPlanFile(o.plan_path); });
  } else {
    if (o.model.empty()) throw UsageError("--model is required (or --plan PLAN.json)");
    if (o.degrees.world_size.empty()) throw UsageError("--world-size is required (or --plan PLAN.json)");
  }
  CheckRunOutputs(o, json_given);

  const ParallelDimsOptions dims = plan_file ? plan_file->dims : o.degrees.Parse(/*default_world_size=*/0);

  const TrainingOverrides training_flags = o.training.Parse();
  runtime::RunOptions run = ParseRunOptions(o, training_flags);
  const std::string model_path = plan_file ? PlanFileModelPath(*plan_file, o.plan_path, o.model) : o.model;
  ModelSpec model = WithFlag(o.model.empty() ? "--plan's model" : "--model", [&] { return LoadModel(model_path); });
  if (training_flags.seq_len && o.replay_rank.empty()) {
    throw UsageError("--seq-len applies to --replay-rank only (the run's tokens: --tokens-per-rank)");
  }
  if (!o.cluster.empty() && o.replay_rank.empty()) {
    throw UsageError("--cluster applies to --replay-rank only (its dispatch and combine come from the cost model)");
  }
  const TrainingConfig training = runtime::RunTraining(plan_file ? plan_file->training : model.training.value_or(TrainingConfig{}),
                                                       plan_file.has_value(), training_flags);
  const Machine machine = runtime::RunMachine(plan_file ? plan_file->machine : model.machine, training_flags);
  run.dispatcher = training.dispatcher;
  if (plan_file && !run.routing) run.routing = PlanFileRouting(*plan_file, o.plan_path);
  const Plan plan =
      plan_file ? RebuildPlanFromFile(model, *plan_file, training, machine, o.plan_path) : BuildPlan(model, dims, training, machine);
  if (plan_file && o.replay_rank.empty()) {
    for (const std::string& w : PredictedRunMismatches(*plan_file, plan, o.backend, run.tokens_per_rank)) {
      err << "dockyard-run: warning: " << w << "\n";
    }
  }
  if (!o.replay_rank.empty()) {
    if (run.redundant || !run.placement_file.empty()) {
      throw Error("--redundant-experts and --placement are not supported with --replay-rank (run the whole EP group)");
    }
    return RunReplay(o, plan, run, launch, plan_file ? plan_file->cluster : std::nullopt, model_path, json_given, out, err);
  }
  // Everything that can be rejected is rejected before any thread starts.
  const runtime::RunConfig config = runtime::MakeRunConfig(plan, run);
  const std::unique_ptr<runtime::Backend> backend = MakeBackend(o, launch);
  const runtime::RunReport report = runtime::RunMoeLayer(config, *backend);

  if (json_given || !o.html_path.empty()) {
    Json j = runtime::RunReportToJson(report, model_path);
    j["provenance"] = Provenance(o.argv, runtime::RunInputFiles(model_path, o.plan_path, o.routing, o.placement));
    j["generator"] = {{"name", "dockyard-run"}, {"version", kDockyardVersion}};
    if (plan_file) JoinPredictedPhases(plan_file->predicted, &j);
    // Files all-or-nothing; '-' goes to stdout.
    const std::string text = j.dump(1, ' ', false, Json::error_handler_t::replace) + "\n";
    std::vector<cli::OutputFile> files;
    if (!o.html_path.empty()) {
      files.push_back({"--html", o.html_path, ReportToHtml(RunPageDocument(j, plan, model_path))});
    }
    if (json_given && o.json_path != "-") files.push_back({"--json", o.json_path, text});
    cli::WriteOutputFiles(files);
    if (json_given && o.json_path == "-") WriteOutput("-", text, out);
  }
  if (!json_given || o.json_path != "-") {
    out << runtime::RunReportToText(report, model_path);
    if (plan_file) {
      std::vector<std::pair<std::string, double>> measured;
      for (const auto& ph : report.phases) measured.push_back({ph.name, ph.time_us});
      out << PredictedBesideMeasuredText(plan_file->predicted, measured);
    }
    if (json_given) out << "JSON report written to " << o.json_path << "\n";
    if (!o.html_path.empty()) out << "HTML report written to " << o.html_path << "\n";
  }
  if (!report.passed()) {
    err << fmt::format("dockyard-run: validation failed: {} of {} output elements differ from the reference\n", report.wrong,
                       report.checked);
    return 3;
  }
  return 0;
}

}  // namespace

int RunRunCli(int argc, char** argv, std::ostream& out, std::ostream& err) {
  CliOptions o;
  o.argv.assign(argv, argv + argc);
  CLI::App app{
      "dockyard-run: execute one MoE layer of a plan with real tokens (one thread per rank on the cpu backend), "
      "check every output against a single-process reference and time each phase."};
  app.footer(cli::kRunExamples);
  cli::AddRunFlags(app, o);

  app.set_version_flag("--version", VersionText("dockyard-run"), "print the version and the git commit this binary was built from");
  cli::RefuseRepeatedFlags(app);
  const int empty = cli::RunReportingErrors("dockyard-run", "out of memory", err, [&] {
    cli::RejectEmptyEquals(std::vector<std::string>(argv, argv + argc));
    return 0;
  });
  if (empty != 0) return empty;
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    out << app.help();
    return 0;
  } catch (const CLI::CallForVersion& v) {
    out << v.what();
    return 0;
  } catch (const CLI::ParseError& e) {
    return cli::ReportParseError("dockyard-run", app, e, err);
  }
  return cli::RunReportingErrors("dockyard-run", "out of memory", err, [&] {
    cli::RejectEmptyValues(app);
    cli::RecordRunFlagsGiven(app, o);
    return Run(o, app.get_option("--json")->count() > 0, out, err);
  });
}

}  // namespace dockyard
