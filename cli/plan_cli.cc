// dockyard-plan command line (see plan_cli.h).
#include "cli/plan_cli.h"

#include <algorithm>
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
#include "planner/base/error.h"
#include "planner/base/file_util.h"
#include "planner/layout/default_layout.h"
#include "planner/sim/compute_model.h"
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
#include "planner/sim/calibration.h"
#include "planner/sim/network.h"

namespace dockyard {
namespace {

constexpr const char* kExamples = R"(Examples:
  dockyard-plan                                   # embedded default: DeepSeek-V3 on 256 GPUs, dp_shard 256, ep 64
  dockyard-plan --model testdata/hf/qwen3-30b-a3b.json --world-size 64 --ep 8 --gpu-memory-gib 80
  dockyard-plan --model testdata/hf/mixtral-8x7b.json --world-size 16 --tp 4 --json plan.json
  dockyard-plan --model testdata/hf/deepseek-v3.json --world-size 2048 --pp 8 --ep 64 --convention megatron --json -
  dockyard-plan --model testdata/hf/deepseek-v3.json --world-size 1280 --pp 10 --pp-layer-split 7+6 --ep 64 \
                --seq-len 4096 --recompute full --gpu-memory-gib 141
  dockyard-plan check --model testdata/hf/qwen3-30b-a3b.json --world-size 8 --ep 8 --gpu-memory-gib 80
  dockyard-plan --model testdata/hf/qwen3-30b-a3b.json --world-size 64 --ep 8 --refit-json refit.json
  dockyard-plan spec --model testdata/hf/gpt-oss-120b.json --out gpt-oss-120b.spec.json
  dockyard-plan search --model testdata/hf/qwen3-30b-a3b.json --world-size 64 --cluster h200-sxm --top 5
  dockyard-plan simulate --model testdata/hf/deepseek-v3.json --world-size 256 --ep 64 --recompute full \
                --cluster h200-sxm --routing zipf:1.2
  dockyard-plan simulate --model testdata/hf/deepseek-v3.json --world-size 256 --ep 64 --recompute full \
                --cluster h200-sxm --routing zipf:1.2 --redundant-experts 64 --expert-groups 8

Training defaults: --param-dtype bfloat16, --grad-dtype float32, --optimizer adamw (fp32 master + 2 fp32
moments), --seq-len 4096, --micro-batch-size 1, --num-microbatches = pp, --recompute none, --dp-sharding fsdp
(torchtitan) or zero1 (megatron), --imbalance 1.0, --gpus-per-node 8, --dispatcher all_to_all.
A dockyard model spec's "training" block sets the same values; flags override it.
)";

using cli::ParseInt;
using cli::ParseNumber;
using cli::UsageError;
using cli::WriteOutput;

struct CliOptions {
  std::string model;
  cli::DegreeFlags degrees;
  std::string json_path, refit_json, html_path;
  // Training settings (empty = the spec's training block, else the default).
  cli::TrainingFlags training;
  bool model_given = false, json_given = false, refit_given = false, html_given = false;
  std::string search_dispatchers;      // search --search-dispatchers
  cli::GlobalBatchFlags global_batch;  // simulate / search
  std::string threads = "1", explain;  // search
  // simulate
  std::string cluster = "h100-sxm", routing = "uniform", seed = "0", routing_layers;
  // check / simulate: --routing given sizes the received rows in memory (received_rows.h);
  // --capacity-factor reports the assignments that capacity would drop.
  bool routing_given = false;
  std::string capacity_factor;
  bool no_overlap = false;
  // simulate / search: the compute model and its run settings (compute_model.h).
  std::string compute_model = kDefaultComputeModel, cross_entropy = "unfused";
  bool cuda_graphs = false;
  cli::RedundantExpertsFlags redundant;  // simulate: redundant experts (opt-in)
  std::string calibration;               // simulate / search: calibration JSON (empty = the built-in defaults)
  std::vector<std::string> argv;         // the command line, recorded in reports
  // search
  std::string top = "10", max_pp;
};

// --compute-model, --cuda-graphs, --cross-entropy on `options` (compute_model.h).
void ApplyComputeFlags(const CliOptions& o, CostOptions* options) {
  ApplyComputeModel(o.compute_model, o.cuda_graphs, o.cross_entropy, options);
}

void AddComputeFlags(CLI::App* app, CliOptions& o) {
  app->add_option("--compute-model", o.compute_model,
                  "kernels (GEMMs by shape, memory-bound kernels, launch gaps; default) | gemm (the older model: GEMMs at fixed "
                  "efficiencies)")
      ->check(CLI::IsMember({"gemm", "kernels"}));
  app->add_flag("--cuda-graphs", o.cuda_graphs, "kernels launched from CUDA graphs (not with --compute-model gemm)");
  app->add_option("--cross-entropy", o.cross_entropy, "unfused | fused (default unfused; fused not with --compute-model gemm)")
      ->check(CLI::IsMember({"unfused", "fused"}));
}

void AddPlanOptions(CLI::App* app, CliOptions& o) {
  app->add_option("--model", o.model, "HF config.json or dockyard model spec (default: embedded DeepSeek-V3)");
  o.degrees.AddTo(app, "number of GPUs (required with --model)", "pipeline parallel degree, outermost axis (default 1)");
  app->add_option("--json", o.json_path, "write the JSON report to PATH ('-' = stdout, replaces the tables)");
  app->add_option("--html", o.html_path, "write a self-contained HTML page of figures to PATH (docs/html-report.md)");
  o.training.AddTo(app);
  app->add_option("--refit-json", o.refit_json, "write the per-expert refit map to PATH ('-' = stdout)");
}

// The routing flags of check and simulate: the routing sampled, its seed, the MoE layers sampled
// and the capacity factor whose drops are reported.
void AddRoutingFlags(CLI::App* app, CliOptions& o) {
  app->add_option("--routing", o.routing,
                  "uniform | zipf:S | hot:H:F | trace:PATH (default uniform); when given, the sample's largest received rows "
                  "size the all-to-all buffers and expert activations (in place of --imbalance)");
  app->add_option("--seed", o.seed, "routing sampling seed (default 0)");
  app->add_option(
      "--routing-layers", o.routing_layers,
      fmt::format("MoE layers to sample; each phase takes the mean of their slowest ranks (default min({}, MoE layers); a trace uses "
                  "its own layers)",
                  kDefaultRoutingLayers));
  app->add_option("--capacity-factor", o.capacity_factor,
                  "report the share of token-expert assignments a per-expert capacity of ceil(C x T x top_k / num_experts) per "
                  "source rank would drop (Megatron --moe-expert-capacity-factor; default: not reported)");
}

// The model spec's training block with the training flags over it (ApplyTrainingOverrides); the
// memory reserve: the flag, else the block's, else the default (ResolveMemoryReserve).
TrainingConfig ResolveTraining(const cli::TrainingFlags& flags, const ModelSpec& model, int64_t pp) {
  const TrainingConfig base = model.training.value_or(TrainingConfig{});
  TrainingOverrides overrides = flags.Parse();
  overrides.memory_reserve_gib = cli::ResolveMemoryReserve(flags.memory_reserve_gib, base.memory_reserve_gib);
  return ApplyTrainingOverrides(base, overrides, pp, model.num_hidden_layers);
}

using Command = PlanCommand;

// What produced a report: version, command line and the digests of the input files.
Json ReportProvenance(const CliOptions& o) {
  const ReportInputs in = PlanReportInputs(o.model_given ? o.model : "", o.cluster, o.routing, o.calibration);
  return Provenance(o.argv, in.files, in.embedded);
}

// Builds the plan from flags (or the embedded default) and writes what was asked.
int PlanAndReport(const CliOptions& o, Command command, std::ostream& out, std::ostream& err) {
  const bool check = command == Command::kCheck;
  if (check && ParseNumber("--gpu-memory-gib", o.training.gpu_memory_gib).value_or(0) <= 0) {
    throw UsageError("check needs a budget: --gpu-memory-gib GiB (> 0)");
  }
  const bool use_default = !o.model_given;
  if (!use_default && o.degrees.world_size.empty()) throw UsageError("--world-size is required with --model");
  ParallelDimsOptions dims = o.degrees.Parse(kDefaultWorldSize);
  if (use_default) ApplyDefaultLayout(!o.degrees.ep.empty(), &dims);

  ModelSpec model = LoadModelOrDefault(o.model);
  const std::string source = ModelSourceName(o.model);
  TrainingConfig training = ResolveTraining(o.training, model, dims.pp);
  RejectMegatronOnlyOverrides(o.training.Parse(), dims.convention == Convention::kTorchtitan);
  err << SeqLenWarning(training.seq_len, model, "--seq-len");
  if (use_default) ApplyDefaultTraining(!o.training.recompute.empty(), &training);
  // A reserve at or above the budget is invalid input (exit 1), not a plan over budget (exit 3).
  ValidateMemoryReserve(training.gpu_memory_gib, training.memory_reserve_gib.value_or(0), cli::MemoryBudgetName(o.training.gpu_memory_gib),
                        cli::MemoryReserveName(o.training.memory_reserve_gib));
  if (!o.training.memory_reserve_gib.empty()) {
    RequireBudgetForReserve(training.gpu_memory_gib, training.memory_reserve_gib.value_or(0), "--memory-reserve-gib",
                            command == Command::kSimulate ? "simulate" : "plan");
  }
  std::optional<ClusterSpec> cluster;
  std::optional<Calibration> calibration;
  if (command == Command::kSimulate) {
    cluster = LoadCluster(o.cluster);
    if (!o.calibration.empty()) calibration = LoadCalibration(o.calibration);
    // The cluster's locality unit decides cross-node traffic unless --gpus-per-node says otherwise:
    // the NVLink domain, the time model's rule (network.h NvlinkDomainGpus).
    if (o.training.gpus_per_node.empty()) training.gpus_per_node = NvlinkDomainGpus(*cluster);
  }
  std::optional<GlobalBatchSchedule> global_batch;
  if (const auto gbs = o.global_batch.Sequences(training.seq_len)) {
    if (!o.training.grad_accumulation_steps.empty()) {
      throw UsageError("--grad-accumulation-steps: derived from --global-batch-size (torchtitan's outer loop); give one of them");
    }
    global_batch = ApplyGlobalBatch(*gbs, dims, &training);
  }
  PlanCommandRequest request;
  request.command = command;
  request.model_source = source;
  request.provenance = ReportProvenance(o);
  request.capacity_factor = ParseNumber("--capacity-factor", o.capacity_factor);
  request.routing_given = o.routing_given;
  request.routing_text = o.routing;
  if (command == Command::kSimulate || (check && (o.routing_given || request.capacity_factor))) {
    if (o.routing_given && !o.training.imbalance.empty()) {
      throw UsageError("--imbalance and --routing both size the received rows: give one (--routing samples them)");
    }
    request.seed = static_cast<uint64_t>(ParseInt("--seed", o.seed).value_or(0));
    request.routing_layers = ParseInt("--routing-layers", o.routing_layers);
  }
  request.cluster = cluster;
  request.calibration = calibration;
  if (command == Command::kSimulate) {
    request.cost_options.overlap_shared_experts = !o.no_overlap;
    ApplyComputeFlags(o, &request.cost_options);
    request.redundant = cli::ParseRedundantExpertsFlags(o.redundant);
  }
  request.json = o.json_given;
  request.html = o.html_given;
  request.refit = o.refit_given;
  const PlanCommandResult result = RunPlanCommand(BuildPlan(model, dims, training), request);
  const Plan& plan = result.plan;
  const MemoryReport& memory = result.memory;
  const std::string &report_text = result.report_text, &html_text = result.html_text, &refit_text = result.refit_text;
  // Files are written all-or-nothing; '-' goes to stdout.
  std::vector<std::pair<std::string, std::string>> files;
  if (o.json_given && o.json_path != "-") files.push_back({o.json_path, report_text});
  if (o.refit_given && o.refit_json != "-") files.push_back({o.refit_json, refit_text});
  if (o.html_given) files.push_back({o.html_path, html_text});
  WriteFilesAtomically(files);
  if (o.json_given && o.json_path == "-") out << report_text;
  if (o.refit_given && o.refit_json == "-") out << refit_text;
  const bool quiet = (o.json_given && o.json_path == "-") || (o.refit_given && o.refit_json == "-");
  if (!quiet) {
    out << PlanCommandText(request, result, global_batch, use_default ? DefaultModelNote(dims, plan.training.recompute) : "");
    if (o.json_given) out << "JSON report written to " << o.json_path << "\n";
    if (o.refit_given) out << "Refit map written to " << o.refit_json << "\n";
    if (o.html_given) out << "HTML report written to " << o.html_path << "\n";
  }
  // check and simulate: a plan over its budget exits kExitOverBudget (its reports are written).
  if (FailsBudget(request, result)) {
    err << OverBudgetText(plan, memory, check ? "dockyard-plan check" : "dockyard-plan simulate");
    return cli::kExitOverBudget;
  }
  if (check && !quiet) {
    out << BudgetFitsText(memory);
  }
  return cli::kExitOk;
}

int RunSearch(const CliOptions& o, std::ostream& out, std::ostream& err) {
  const bool use_default = !o.model_given;
  if (!use_default && o.degrees.world_size.empty()) throw UsageError("--world-size is required with --model");
  SearchOptions s;
  const ParallelDimsOptions given = o.degrees.Parse(kDefaultWorldSize);
  s.world_size = given.world_size;
  s.convention = given.convention;
  s.top = ParseInt("--top", o.top).value_or(10);
  if (s.top < 1) throw Error(fmt::format("--top must be >= 1, got {}", s.top));
  s.max_pp = ParseInt("--max-pp", o.max_pp).value_or(16);
  if (s.max_pp < 1) throw Error(fmt::format("--max-pp must be >= 1, got {}", s.max_pp));
  ValidateSearchBudgetFlag(ParseNumber("--gpu-memory-gib", o.training.gpu_memory_gib));
  s.cluster = LoadCluster(o.cluster);
  std::optional<Calibration> calibration;
  if (!o.calibration.empty()) {
    calibration = LoadCalibration(o.calibration);
    ApplyCalibration(*calibration, &s.cluster, &s.cost);
  }
  ApplyComputeFlags(o, &s.cost);
  s.routing = ParseRoutingSpec(o.routing);
  s.routing.seed = static_cast<uint64_t>(ParseInt("--seed", o.seed).value_or(0));
  RejectUnsearchableRunSettings(o.training.pipeline_layout, o.training.pipeline_schedule);
  const ModelSpec model = LoadModelOrDefault(o.model);
  // --fp8-dispatch reaches the candidates whose dispatcher has it (all_to_all, deepep).
  cli::TrainingFlags training_flags = o.training;
  training_flags.fp8_dispatch = false;
  // torchtitan's selective_ac_option is a form of selective recompute: it pins that dimension
  // (search_space.h ApplySearchedSettings), so the training it is validated with has it.
  if (!training_flags.selective_ac_option.empty() && training_flags.recompute.empty()) training_flags.recompute = "selective";
  s.training = ResolveTraining(training_flags, model, 1);
  RejectMegatronOnlyOverrides(training_flags.Parse(), s.convention == Convention::kTorchtitan);
  err << SeqLenWarning(s.training.seq_len, model, "--seq-len");
  s.training.fp8_dispatch = o.training.fp8_dispatch;
  ValidateMemoryReserve(s.training.gpu_memory_gib > 0 ? s.training.gpu_memory_gib : s.cluster.memory_gib,
                        s.training.memory_reserve_gib.value_or(0),
                        s.training.gpu_memory_gib > 0 ? cli::MemoryBudgetName(o.training.gpu_memory_gib)
                                                      : "the cluster's memory_gib (" + s.cluster.name + ")",
                        cli::MemoryReserveName(o.training.memory_reserve_gib));
  ParseSearchDispatchers(o.search_dispatchers, &s);
  s.pins = o.degrees.ParsePins();
  ApplySearchedSettings(o.training.SearchPinned(), &s);
  s.threads = static_cast<int>(std::clamp<int64_t>(ParseInt("--threads", o.threads).value_or(1), -1, 1 << 20));
  if (s.threads < 1 || s.threads > 1024) throw Error(fmt::format("--threads: must be in [1, 1024], got {}", o.threads));
  if (s.world_size < 1) throw Error(fmt::format("--world-size: must be >= 1, got {}", s.world_size));
  s.global_batch_size = o.global_batch.Sequences(s.training.seq_len).value_or(s.world_size);
  SearchCommandRequest request;
  if (!o.explain.empty()) {
    request.explain = ParseLayoutQuery(o.explain);
    s.keep_all = true;
  }
  ValidateSelectiveAcConvention(s.training, s.convention == Convention::kTorchtitan);  // else every layout is invalid
  ValidateRecomputeModulesForModel(s.training, model);                                 // the fast path builds no plan
  s.routing_layers = SearchRoutingLayers(model, s.routing, ParseInt("--routing-layers", o.routing_layers));
  err << PinnedLayerSplitNote(s.training);
  if (isatty(2)) {
    s.progress = [&err](int64_t done, int64_t total) {
      const int width = 40;
      const int filled = static_cast<int>(width * done / std::max<int64_t>(1, total));
      err << "\r[" << std::string(filled, '#') << std::string(width - filled, ' ') << "] " << done << "/" << total << std::flush;
      if (done == total) err << "\n";
    };
  }
  if (!o.redundant.redundant_experts.empty()) {  // search --redundant-experts LIST (opt-in)
    request.redundant_counts = ParseRedundantCounts(o.redundant.redundant_experts);
    cli::RedundantExpertsFlags rest = o.redundant;
    rest.redundant_experts = "0";  // the list is parsed above; the policy, groups and choice here
    request.redundant = cli::ParseRedundantExpertsFlags(rest);
  }
  request.model_source = ModelSourceName(o.model);
  request.provenance = ReportProvenance(o);
  request.calibration = calibration;
  request.json = o.json_given;
  request.html = o.html_given;
  const SearchCommandResult result = RunSearchCommand(model, s, request);
  if (result.empty) {
    err << result.empty_text;
    return 1;
  }
  std::vector<std::pair<std::string, std::string>> files;
  if (o.html_given) files.push_back({o.html_path, result.html_text});
  if (o.json_given && o.json_path != "-") files.push_back({o.json_path, result.report_text});
  WriteFilesAtomically(files);
  if (o.json_given && o.json_path == "-") {
    WriteOutput("-", result.report_text, out);
    return 0;
  }
  out << result.text;
  if (o.html_given) out << "HTML report written to " << o.html_path << "\n";
  return 0;
}

}  // namespace

// The search subcommand's options: the model, world and convention, the cluster and routing, the
// pinned degrees and settings, the ranking's size and outputs.
CLI::App* AddSearchCommand(CLI::App& app, CliOptions& o) {
  CLI::App* search =
      app.add_subcommand("search", "enumerate valid layouts, drop those over the memory budget, rank by predicted tokens/s per GPU");
  search->add_option("--model", o.model, "HF config.json or dockyard model spec (default: embedded DeepSeek-V3)");
  search->add_option("--world-size", o.degrees.world_size, "number of GPUs (required with --model)");
  search->add_option("--convention", o.degrees.convention, "rank-group convention")->check(CLI::IsMember({"torchtitan", "megatron"}));
  search->add_option("--cluster", o.cluster, "preset (h100-sxm, h200-sxm, h100-pcie-400g) or cluster JSON (default h100-sxm)");
  search->add_option("--routing", o.routing, "uniform | zipf:S | hot:H:F | trace:PATH (default uniform)");
  AddComputeFlags(search, o);
  search->add_option("--seed", o.seed, "routing sampling seed (default 0)");
  cli::AddRedundantExpertsFlags(search, o.redundant,
                                "here a comma-separated list of R values or multiples of ep (e.g. 0,ep,2ep): re-rank the "
                                "best layouts with each");
  search->add_option("--search-dispatchers", o.search_dispatchers,
                     "comma-separated dispatchers to rank beside all_to_all and deredundency: deepep, allgather "
                     "(default none; --fp8-dispatch applies to the all_to_all and deepep candidates)");
  search->add_option("--top", o.top, "layouts to show (default 10)");
  o.global_batch.AddTo(search, "default: --global-batch-size = --world-size (one sequence per GPU per step)");
  search->add_option("--dp-replicate", o.degrees.dp_replicate, "pins the HSDP replicas (default: searched)");
  search->add_option("--dp-shard", o.degrees.dp_shard, "pins the FSDP degree (default: searched)");
  search->add_option("--cp", o.degrees.cp, "pins the context parallel degree (default: searched)");
  search->add_option("--tp", o.degrees.tp, "pins the tensor parallel degree (default: searched)");
  search->add_option("--ep", o.degrees.ep, "pins the expert parallel degree (default: searched)");
  search->add_option("--etp", o.degrees.etp, "pins the expert tensor parallel degree (default: searched, 1 or tp)");
  search->add_option("--pp", o.degrees.pp, "pins the pipeline degree (default: searched up to --max-pp)");
  search->add_option("--threads", o.threads, "worker threads; the result does not depend on them (default 1)");
  search->add_option("--explain,--layout", o.explain,
                     "LAYOUT, e.g. \"tp=2,pp=8,vpp=4,ep=32\": where the best layout matching it ranks, its breakdown beside the "
                     "winner's and the phases that differ");
  search->add_option("--max-pp", o.max_pp, "largest pipeline degree to try (default 16)");
  search->add_option("--calibration", o.calibration, "calibration JSON (calibration/PRESET.json; default: the built-in knobs)");
  search->add_option("--json", o.json_path, "write the ranking as JSON to PATH ('-' = stdout)");
  search->add_option("--html", o.html_path, "write the ranking as a self-contained HTML page to PATH");
  o.training.AddSearchPinsTo(search, app);
  search->get_option("--json")->description("write the ranking as JSON to PATH ('-' = stdout); not written when no layout fits");
  search->add_option("--routing-layers", o.routing_layers,
                     fmt::format("MoE layers to sample per (ep, tokens, oep); each phase takes the mean of their slowest ranks "
                                 "(default min({}, MoE layers), as simulate: a row's step time is simulate's for the same layout)",
                                 kDefaultRoutingLayers));
  return search;
}

// --json, --refit-json and --html: given a path, distinct, at most one on stdout (never the HTML
// page), none over an input (model, cluster JSON, calibration, routing trace).
void CheckPlanOutputs(const CliOptions& o) {
  if (o.json_given && o.refit_given && SameOutputPath(o.json_path, o.refit_json) && o.json_path != "-") {
    throw UsageError(fmt::format("--json and --refit-json name the same output ({})", o.json_path));
  }
  if (o.model_given && o.model.empty()) throw UsageError("--model needs a path, got an empty string");
  if (o.json_given && o.json_path.empty()) throw UsageError("--json needs a path or '-', got an empty string");
  if (o.refit_given && o.refit_json.empty()) throw UsageError("--refit-json needs a path or '-', got an empty string");
  if (o.json_given && o.refit_given && o.json_path == "-" && o.refit_json == "-") {
    throw UsageError("--json - and --refit-json - cannot both write to stdout");
  }
  // No output may replace an input (model, cluster JSON, routing trace).
  std::vector<std::string> inputs = {o.model, o.cluster, o.calibration};
  if (o.routing.rfind("trace:", 0) == 0) inputs.push_back(o.routing.substr(6));
  // An output that cannot be written is refused before any work, naming its flag.
  if (o.json_given) CheckOutputPath(o.json_path, "--json");
  if (o.refit_given) CheckOutputPath(o.refit_json, "--refit-json");
  if (o.html_given) CheckOutputPath(o.html_path, "--html");
  if (o.json_given) RejectOutputOverInputs(o.json_path, "--json", inputs);
  if (o.refit_given) RejectOutputOverInputs(o.refit_json, "--refit-json", inputs);
  if (o.html_given) {
    if (o.html_path == "-") throw UsageError("--html needs a file path ('-' is not supported)");
    if (o.json_given && SameOutputPath(o.html_path, o.json_path)) {
      throw UsageError(fmt::format("--html and --json name the same output ({} and {})", o.html_path, o.json_path));
    }
    if (o.refit_given && SameOutputPath(o.html_path, o.refit_json)) {
      throw UsageError(fmt::format("--html and --refit-json name the same output ({} and {})", o.html_path, o.refit_json));
    }
    RejectOutputOverInputs(o.html_path, "--html", inputs);
  }
}

int RunPlanCli(int argc, char** argv, std::ostream& out, std::ostream& err) {
  CliOptions o;
  o.argv.assign(argv, argv + argc);
  CLI::App app{
      "dockyard-plan: a dry run of an MoE sharding layout (meshes, rank groups, placements, local shapes, "
      "expert ownership, memory and traffic per rank)."};
  app.footer(kExamples);
  AddPlanOptions(&app, o);
  CLI::App* check = app.add_subcommand("check", "exit 3 and list the ranks whose peak memory exceeds --gpu-memory-gib less the reserve");
  AddPlanOptions(check, o);
  AddRoutingFlags(check, o);
  CLI::App* simulate = app.add_subcommand("simulate", "predict the time of every phase of a training step on a cluster");
  AddPlanOptions(simulate, o);
  simulate->add_option("--cluster", o.cluster, "preset (h100-sxm, h200-sxm, h100-pcie-400g) or cluster JSON (default h100-sxm)");
  AddRoutingFlags(simulate, o);
  simulate->add_flag("--no-overlap", o.no_overlap, "do not overlap the shared experts with the combine all-to-all");
  AddComputeFlags(simulate, o);
  cli::AddRedundantExpertsFlags(simulate, o.redundant, "report the EPLB placement, imbalance, MoE-layer time and memory before/after");
  simulate->add_option("--calibration", o.calibration, "calibration JSON (calibration/PRESET.json; default: the built-in knobs)");
  o.global_batch.AddTo(simulate,
                       "sets --num-microbatches (Megatron: all in one schedule) and torchtitan's accumulation steps (default: not given)");
  CLI::App* search = AddSearchCommand(app, o);
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

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    out << app.help();
    return 0;
  } catch (const CLI::ParseError& e) {
    err << "dockyard-plan: usage error: " << cli::ParseErrorText(app, e) << "\n"
        << "Run 'dockyard-plan --help' for usage.\n";
    return 2;
  }

  return cli::RunReportingErrors("dockyard-plan", "out of memory building the plan", err, [&] {
    for (CLI::App* a : {&app, check, simulate, search}) {
      auto given = [a](const char* name) {
        const CLI::Option* opt = a->get_option_no_throw(name);
        return opt != nullptr && opt->count() > 0;
      };
      o.model_given = o.model_given || given("--model");
      if (a != search) o.routing_given = o.routing_given || given("--routing");
      o.json_given = o.json_given || given("--json");
      o.refit_given = o.refit_given || given("--refit-json");
      o.html_given = o.html_given || given("--html");
    }
    if (search->parsed()) {
      // One of --overlap-moe-expert-parallel-comm[=true|false] / --no-overlap-moe-expert-parallel-comm pins it.
      const CLI::Option* overlap = search->get_option("--overlap-moe-expert-parallel-comm");
      o.training.overlap_moe_ep_comm_pinned = overlap->count() > 0;
      if (overlap->count() > 1) {
        throw UsageError(
            "--overlap-moe-expert-parallel-comm: pinned more than once (give one of --overlap-moe-expert-parallel-comm, "
            "--no-overlap-moe-expert-parallel-comm)");
      }
    }
    // A flag given with an empty value is a usage error, whatever the flag.
    for (CLI::App* a : {&app, check, simulate, search, spec, calibrate}) {
      if (a == &app || a->parsed()) cli::RejectEmptyValues(*a);
    }
    CheckPlanOutputs(o);
    if (spec->parsed()) RejectOutputOverInputs(spec_out, "--out", {spec_model});
    if (spec->parsed()) {
      if (spec_out.empty()) throw UsageError("--out needs a path or '-', got an empty string");
      ModelSpec model = LoadModel(spec_model);
      WriteOutput(spec_out, ModelSpecToJson(model).dump(2, ' ', false, Json::error_handler_t::replace) + "\n", out);
      return 0;
    }
    if (search->parsed()) return RunSearch(o, out, err);
    if (calibrate->parsed()) return RunCalibrate(cal, out);
    return PlanAndReport(o, check->parsed() ? Command::kCheck : simulate->parsed() ? Command::kSimulate : Command::kPlan, out, err);
  });
}

}  // namespace dockyard
