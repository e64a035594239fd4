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
#include "planner/base/error.h"
#include "planner/base/file_util.h"
#include "planner/layout/plan.h"
#include "planner/model/model_spec.h"
#include "planner/report/html_report.h"
#include "planner/report/plan_file.h"
#include "planner/report/plan_file_run.h"
#include "planner/report/provenance.h"
#include "planner/report/run_match.h"
#include "planner/sim/routing.h"
#include "runtime/config.h"
#include "runtime/cpu/cpu_backend.h"
#include "runtime/cuda/cuda_backend.h"
#include "runtime/cuda/launch.h"
#include "runtime/replay.h"
#include "runtime/run.h"
#include "runtime/run_settings.h"

namespace dockyard {
namespace {

constexpr const char* kExamples = R"(Examples:
  dockyard-run --model testdata/hf/qwen3-30b-a3b.json --world-size 8 --ep 8 --tokens-per-rank 16
  dockyard-run --model testdata/hf/qwen3-30b-a3b.json --world-size 16 --ep 16 --dispatcher deredundency --oep 2
  dockyard-run --model testdata/hf/deepseek-v3.json --world-size 16 --ep 16 --tokens-per-rank 2 --iters 1 --warmup 0
  dockyard-run --model testdata/hf/deepseek-v2-lite.json --world-size 16 --tp 2 --ep 8 --etp 2 --json run.json
  dockyard-run --model testdata/hf/mixtral-8x7b.json --world-size 4 --tp 4 --routing zipf:1.2
  dockyard-run --model testdata/hf/qwen3-30b-a3b.json --world-size 8 --ep 8 --routing zipf:1.2 --redundant-experts 8

Degrees follow dockyard-plan (--dp-shard -1 = infer); the run uses the ranks of the pipeline stage
holding --layer. --routing: by default tokens go to the top-k of the real router GEMM over the
generated tokens; uniform | zipf:S | hot:H:F | trace:PATH instead draws each token's experts from the
planner's routing model (as `dockyard-plan simulate`), and the router's scores at those experts give
the weights. Exit codes: 0 ok, 1 invalid input, 2 usage error, 3 validation failure (#wrong > 0).
)";

using cli::ParseInt;
using cli::ParseNumber;
using cli::UsageError;
using cli::WriteOutput;

struct CliOptions {
  std::string model;
  cli::DegreeFlags degrees;
  cli::TrainingFlags training;  // --dispatcher, --oep, --gpus-per-node, --seq-len (replay)
  std::string backend = "cpu";
  std::string tokens_per_rank = "64", routing, layer, iters = "3", warmup = "1", seed = "0", atol, rtol;
  std::string json_path, fault, plan_path, html_path;
  std::string gemm_precision = "fp32", grouped_gemm = "grouped", nccl_id_dir, nccl_job_id;
  std::string replay_rank, cluster;
  cli::RedundantExpertsFlags redundant;
  std::string placement;
  bool overlap_shared = false, tokens_per_rank_given = false;
  std::set<std::string> cuda_flags_given;  // cuda-only flags present on the command line
  bool convention_given = false;
  std::vector<std::string> argv;  // the command line, recorded in the report
};

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
  ro.cluster = runtime::ReplayCluster(o.cluster, plan_cluster);
  ro.precision = o.backend == "cuda" ? o.gemm_precision : "fp32";
  if (o.backend != "cuda") ro.weight_block_bytes = run.weight_block_bytes;  // CPU: blocks sized for L2
  const std::unique_ptr<runtime::Backend> backend = MakeBackend(o, launch);
  const runtime::ReplayReport report = runtime::ReplayRank(plan, ro, *backend);
  if (json_given) {
    Json j = runtime::ReplayReportToJson(report);
    j["provenance"] = Provenance(o.argv, runtime::ReplayInputFiles(model_path, o.plan_path, o.routing, o.cluster));
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

// --json and --html: writable, not the same file, not over an input (model, plan, cluster,
// placement, routing trace); checked before the run, not after it.
void CheckRunOutputs(const CliOptions& o, bool json_given) {
  if (json_given && o.json_path.empty()) throw UsageError("--json needs a path or '-', got an empty string");
  if (json_given) {
    std::vector<std::string> inputs = {o.model, o.plan_path, o.cluster, o.placement};
    if (o.routing.rfind("trace:", 0) == 0) inputs.push_back(o.routing.substr(6));
    RejectOutputOverInputs(o.json_path, "--json", inputs);
    CheckOutputPath(o.json_path, "--json");  // before the run, not after it
  }
  if (!o.html_path.empty()) {
    if (o.html_path == "-") throw UsageError("--html needs a file path ('-' is not supported)");
    if (json_given && SameOutputPath(o.html_path, o.json_path)) {
      throw UsageError(fmt::format("--html and --json name the same output ({} and {})", o.html_path, o.json_path));
    }
    CheckOutputPath(o.html_path, "--html");
    if (!o.replay_rank.empty()) throw UsageError("--html applies to a multi-rank run, not to --replay-rank");
    std::vector<std::string> inputs = {o.model, o.plan_path, o.cluster, o.placement};
    if (o.routing.rfind("trace:", 0) == 0) inputs.push_back(o.routing.substr(6));
    RejectOutputOverInputs(o.html_path, "--html", inputs);
  }
}

// The run's options from its flags (seed and layer >= 0; tolerances: the flag, else the CUDA
// GEMM precision's, else RunOptions').
runtime::RunOptions ParseRunOptions(const CliOptions& o, const TrainingOverrides& training_flags) {
  runtime::RunOptions run;
  run.oep = training_flags.oep;
  run.tokens_per_rank = *ParseInt("--tokens-per-rank", o.tokens_per_rank);
  run.iters = *ParseInt("--iters", o.iters);
  run.warmup = *ParseInt("--warmup", o.warmup);
  run.seed = static_cast<uint64_t>(*ParseInt("--seed", o.seed));
  if (*ParseInt("--seed", o.seed) < 0) throw Error(fmt::format("--seed must be >= 0, got {}", o.seed));
  run.layer = ParseInt("--layer", o.layer).value_or(-1);
  if (!o.layer.empty() && run.layer < 0) throw Error(fmt::format("--layer must be >= 0, got {}", run.layer));
  const runtime::Tolerances tolerances = o.backend == "cuda" ? runtime::GemmPrecisionTolerances(o.gemm_precision) : runtime::Tolerances{};
  run.atol = ParseNumber("--atol", o.atol).value_or(tolerances.atol.value_or(run.atol));
  run.rtol = ParseNumber("--rtol", o.rtol).value_or(tolerances.rtol.value_or(run.rtol));
  if (!o.routing.empty()) {
    RoutingSpec spec = ParseRoutingSpec(o.routing);
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
    plan_file = ReadPlanFile(o.plan_path);
  } else {
    if (o.model.empty()) throw UsageError("--model is required (or --plan PLAN.json)");
    if (o.degrees.world_size.empty()) throw UsageError("--world-size is required (or --plan PLAN.json)");
  }
  CheckRunOutputs(o, json_given);

  const ParallelDimsOptions dims = plan_file ? plan_file->dims : o.degrees.Parse(/*default_world_size=*/0);

  const TrainingOverrides training_flags = o.training.Parse();
  runtime::RunOptions run = ParseRunOptions(o, training_flags);
  const std::string model_path = plan_file ? PlanFileModelPath(*plan_file, o.plan_path, o.model) : o.model;
  ModelSpec model = LoadModel(model_path);
  if (training_flags.seq_len && o.replay_rank.empty()) {
    throw UsageError("--seq-len applies to --replay-rank only (the run's tokens: --tokens-per-rank)");
  }
  if (!o.cluster.empty() && o.replay_rank.empty()) {
    throw UsageError("--cluster applies to --replay-rank only (its dispatch and combine come from the cost model)");
  }
  const TrainingConfig training = runtime::RunTraining(plan_file ? plan_file->training : model.training.value_or(TrainingConfig{}),
                                                       plan_file.has_value(), training_flags);
  run.dispatcher = training.dispatcher;
  if (plan_file && !run.routing) run.routing = PlanFileRouting(*plan_file, o.plan_path);
  const Plan plan = plan_file ? RebuildPlanFromFile(model, *plan_file, training, o.plan_path) : BuildPlan(model, dims, training);
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
    if (plan_file) JoinPredictedPhases(plan_file->predicted, &j);
    // Files all-or-nothing; '-' goes to stdout.
    const std::string text = j.dump(1, ' ', false, Json::error_handler_t::replace) + "\n";
    std::vector<std::pair<std::string, std::string>> files;
    if (!o.html_path.empty()) {
      files.push_back({o.html_path, ReportToHtml(RunPageDocument(j, plan, model_path))});
    }
    if (json_given && o.json_path != "-") files.push_back({o.json_path, text});
    WriteFilesAtomically(files);
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
  app.footer(kExamples);
  app.add_option("--plan", o.plan_path,
                 "a plan file from dockyard-plan --json or dockyard-plan simulate --json: degrees, "
                 "training settings and placements come from it (placements are verified)");
  app.add_option("--model", o.model, "HF config.json or dockyard model spec (required without --plan; with --plan, overrides its model)");
  o.degrees.AddTo(&app, "number of ranks (required without --plan)",
                  "pipeline parallel degree (default 1); the stage holding --layer runs");
  app.add_option("--backend", o.backend, "cpu | cuda (default cpu)")->check(CLI::IsMember({"cpu", "cuda"}));
  app.add_option("--gemm-precision", o.gemm_precision,
                 "cuda: expert GEMM precision fp32 | tf32 | bf16 (bf16 inputs, fp32 accumulation; default fp32)")
      ->check(CLI::IsMember({"fp32", "tf32", "bf16"}));
  app.add_option("--grouped-gemm", o.grouped_gemm,
                 "cuda: grouped (cublasGemmGroupedBatchedEx) | loop (cublasGemmEx per expert) (default grouped)")
      ->check(CLI::IsMember({"grouped", "loop"}));
  app.add_option("--nccl-id-dir", o.nccl_id_dir,
                 "cuda, one process per GPU (torchrun/srun/mpirun): a directory every process sees, for the NCCL ids");
  app.add_option("--nccl-job-id", o.nccl_job_id,
                 "cuda, one process per GPU: a name unique to this run for its NCCL id files (default: the launcher's "
                 "job id: TORCHELASTIC_RUN_ID, SLURM_JOB_ID, PMIX_NAMESPACE)");
  app.add_flag("--overlap-shared-experts", o.overlap_shared,
               "run the shared experts while the combine all-to-all is in flight (all_to_all dispatcher; the combine "
               "phase then reports its exposed time)");
  app.add_option("--replay-rank", o.replay_rank,
                 "single-GPU replay: run only this rank's share of the plan (its experts, the rows routing sends it) on "
                 "one device; dispatch/combine from the cost model (docs/runtime.md)");
  app.add_option("--cluster", o.cluster, "replay: cluster preset or JSON for the cost model (default h100-sxm)");
  o.training.AddRunTo(&app);
  app.add_option("--tokens-per-rank", o.tokens_per_rank, "tokens of hidden size on every rank (default 64)");
  app.add_option("--routing", o.routing, "uniform | zipf:S | hot:H:F | trace:PATH (default: the router's top-k)");
  cli::AddRedundantExpertsFlags(&app, o.redundant,
                                "run the EPLB placement of the layer (needs --routing), replicas holding identical "
                                "weights, and compare rows per rank with the planner's");
  app.add_option("--placement", o.placement,
                 "placement file: {\"physical_to_logical\": [...]} or a simulate --redundant-experts --json report "
                 "(its map of the layer); runs that layout of replicated experts (default: none)");
  app.add_option("--layer", o.layer, "decoder layer to run (default: the first MoE layer)");
  app.add_option("--iters", o.iters, "timed iterations (default 3)");
  app.add_option("--warmup", o.warmup, "untimed warm-up iterations (default 1)");
  app.add_option("--seed", o.seed, "seed of tokens, weights and sampled routing (default 0)");
  app.add_option("--atol", o.atol, "absolute tolerance (default 1e-4)");
  app.add_option("--rtol", o.rtol, "relative tolerance (default 1e-3): wrong when |out - ref| > atol + rtol |ref|");
  app.add_option("--json", o.json_path,
                 "write the JSON report to PATH ('-' = stdout, replaces the tables); "
                 "'{rank}' in PATH becomes the process's rank in a multi-process launch");
  app.add_option("--html", o.html_path, "write a self-contained HTML page of the run's figures to PATH (docs/html-report.md)");
  // A testing aid, not in --help: a deliberate ownership mistake that validation must catch.
  app.add_option("--inject-fault", o.fault, "")->group("")->check(CLI::IsMember({"wrong-expert"}));

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    out << app.help();
    return 0;
  } catch (const CLI::ParseError& e) {
    err << "dockyard-run: usage error: " << cli::ParseErrorText(app, e) << "\nRun 'dockyard-run --help' for usage.\n";
    return 2;
  }
  return cli::RunReportingErrors("dockyard-run", "out of memory", err, [&] {
    cli::RejectEmptyValues(app);
    o.convention_given = app.get_option("--convention")->count() > 0;
    o.tokens_per_rank_given = app.get_option("--tokens-per-rank")->count() > 0;
    for (const char* flag : {"--gemm-precision", "--grouped-gemm", "--nccl-id-dir", "--nccl-job-id"}) {
      if (app.get_option(flag)->count() > 0) o.cuda_flags_given.insert(flag);
    }
    return Run(o, app.get_option("--json")->count() > 0, out, err);
  });
}

}  // namespace dockyard
