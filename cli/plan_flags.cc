// dockyard-plan's options and flag registration (see plan_flags.h).
#include "cli/plan_flags.h"

#include <optional>

#include <fmt/format.h>

#include "cli/flags.h"
#include "planner/accounting/memory.h"
#include "planner/base/file_util.h"
#include "planner/model/training_overrides.h"
#include "planner/report/plan_command.h"
#include "planner/report/provenance.h"
#include "planner/cost/cluster.h"
#include "planner/cost/network.h"
#include "planner/routing/plan_routing.h"

namespace dockyard::cli {

namespace {
// --cluster's help: every preset (cluster.h, the one list) or a cluster JSON.
std::string ClusterFlagHelp() {
  return "preset (" + ClusterPresetNamesText() + ") or cluster JSON (default h100-sxm)";
}
}  // namespace

const char* const kPlanExamples = R"(Examples:
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

void ApplyComputeFlags(const PlanCliOptions& o, ComputeModel* model, RunSettings* run) {
  ApplyComputeModel(o.compute_model, o.cuda_graphs, model, run, o.full_iteration_cuda_graph);
}

void AddComputeFlags(CLI::App* app, PlanCliOptions& o) {
  app->add_option("--compute-model", o.compute_model,
                  "kernels (GEMMs by shape, memory-bound kernels, launch gaps; default) | gemm (the older model: GEMMs at fixed "
                  "efficiencies)")
      ->check(CLI::IsMember({"gemm", "kernels"}));
  app->add_flag("--cuda-graphs", o.cuda_graphs, "kernels launched from CUDA graphs (not with --compute-model gemm)");
  app->add_flag("--full-iteration-cuda-graph", o.full_iteration_cuda_graph,
                "the whole training iteration in one CUDA graph (Megatron --cuda-graph-impl full_iteration; implies --cuda-graphs): no "
                "host synchronization in the MoE layers (docs/cost-model.md §3.11)");
}

void AddPlanOptions(CLI::App* app, PlanCliOptions& o) {
  app->add_option("--model", o.model, "HF config.json or dockyard model spec (default: embedded DeepSeek-V3)");
  o.degrees.AddTo(app, "number of GPUs (required with --model)", "pipeline parallel degree, outermost axis (default 1)");
  app->add_option("--json", o.json_path, "write the JSON report to PATH ('-' = stdout, replaces the tables)");
  app->add_option("--html", o.html_path, "write a self-contained HTML page of figures to PATH (docs/html-report.md)");
  o.training.AddTo(app);
  app->add_option("--refit-json", o.refit_json, "write the per-expert refit map to PATH ('-' = stdout)");
}

// The routing flags of check and simulate: the routing sampled, its seed, the MoE layers sampled
// and the capacity factor whose drops are reported.
void AddRoutingFlags(CLI::App* app, PlanCliOptions& o) {
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

void AddPlanCommands(CLI::App& app, PlanCliOptions& o, CLI::App** plan_out, CLI::App** check_out, CLI::App** simulate_out) {
  AddPlanOptions(&app, o);
  o.global_batch.AddTo(&app, "sets --num-microbatches as check, simulate and search do (default: not given)");
  // `dockyard-plan plan ...` is the default command spelled out (reports say "Report dockyard-plan plan").
  CLI::App* plan = app.add_subcommand("plan", "the default without a subcommand: meshes, placements, local shapes, memory and traffic per rank");
  AddPlanOptions(plan, o);
  o.global_batch.AddTo(plan, "sets --num-microbatches as check, simulate and search do (default: not given)");
  CLI::App* check = app.add_subcommand("check", "exit 3 and list the ranks whose peak memory exceeds --gpu-memory-gib less the reserve");
  AddPlanOptions(check, o);
  AddRoutingFlags(check, o);
  o.global_batch.AddTo(check,
                       "sets --num-microbatches as simulate and search do (the micro-batches in flight size the activations; "
                       "default: not given)");
  CLI::App* simulate = app.add_subcommand("simulate", "predict the time of every phase of a training step on a cluster");
  AddPlanOptions(simulate, o);
  simulate->add_option("--cluster", o.cluster, ClusterFlagHelp());
  AddRoutingFlags(simulate, o);
  simulate->add_flag("--no-overlap", o.no_overlap,
                     "do not overlap the shared experts with the combine all-to-all (torchtitan's default overlaps them; megatron's "
                     "does not: --moe-shared-expert-overlap)");
  AddComputeFlags(simulate, o);
  AddRedundantExpertsFlags(simulate, o.redundant, "report the EPLB placement, imbalance, MoE-layer time and memory before/after");
  simulate->add_option("--calibration", o.calibration, "calibration JSON (calibration/PRESET.json; default: the built-in knobs)");
  o.global_batch.AddTo(simulate,
                       "sets --num-microbatches (Megatron: all in one schedule) and torchtitan's accumulation steps (default: not given)");
  *plan_out = plan;
  *check_out = check;
  *simulate_out = simulate;
}

// The search subcommand's options: the model, world and convention, the cluster and routing, the
// pinned degrees and settings, the ranking's size and outputs.
CLI::App* AddSearchCommand(CLI::App& app, PlanCliOptions& o) {
  CLI::App* search =
      app.add_subcommand("search", "enumerate valid layouts, drop those over the memory budget, rank by predicted tokens/s per GPU");
  search->add_option("--model", o.model, "HF config.json or dockyard model spec (default: embedded DeepSeek-V3)");
  search->add_option("--world-size", o.degrees.world_size, "number of GPUs (required with --model)");
  search->add_option("--convention", o.degrees.convention,
                     "whose rules and defaults: torchtitan (as it is), torchtitan-2026-03 (before PR #3167) or megatron")
      ->check(CLI::IsMember(ConventionNames()));
  search->add_option("--cluster", o.cluster, ClusterFlagHelp());
  search->add_option("--routing", o.routing, "uniform | zipf:S | hot:H:F | trace:PATH (default uniform)");
  AddComputeFlags(search, o);
  search->add_option("--seed", o.seed, "routing sampling seed (default 0)");
  AddRedundantExpertsFlags(search, o.redundant,
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
  search->add_option("--etp", o.degrees.etp, "pins the expert tensor parallel degree (default: searched, 1 or tp; torchtitan: 1, no expert TP since PR #3167)");
  search->add_option("--pp", o.degrees.pp, "pins the pipeline degree (default: searched up to --max-pp)");
  search->add_option("--threads", o.threads, "worker threads; the result does not depend on them (default 1)");
  search->add_option("--progress-interval", o.progress_interval,
                     "seconds between two plain progress lines on stderr when it is not a terminal (default 10; 0 = at every "
                     "update; a terminal gets a bar)");
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

void RecordGivenFlags(std::initializer_list<CLI::App*> apps, const CLI::App* search, PlanCliOptions& o) {
  for (CLI::App* a : apps) {
    auto given = [a](const char* name) {
      const CLI::Option* opt = a->get_option_no_throw(name);
      return opt != nullptr && opt->count() > 0;
    };
    o.model_given = o.model_given || given("--model");
    o.training.tp_comm_overlap_given = o.training.tp_comm_overlap_given || given("--tp-comm-overlap");
    if (a != search) o.routing_given = o.routing_given || given("--routing");
    if (a == search) o.search_routing_given = given("--routing");
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
}

// --json, --refit-json and --html: given a path, distinct, at most one on stdout (never the HTML
// page), none over an input (model, cluster JSON, calibration, routing trace).
void CheckPlanOutputs(const PlanCliOptions& o) {
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
  std::vector<std::string> inputs = {o.model, o.cluster, o.calibration, o.from_megatron, o.from_torchtitan, o.from_megatron_bridge};
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

// The model spec's training block with the training flags over it (ApplyTrainingOverrides); the
// memory reserve: the flag, else the block's, else the default (ResolveMemoryReserve).
TrainingConfig ResolveTraining(const TrainingFlags& flags, const ModelSpec& model, int64_t pp) {
  const TrainingConfig base = model.training.value_or(TrainingConfig{});
  TrainingOverrides overrides = flags.Parse();
  overrides.memory_reserve_gib = ResolveMemoryReserve(flags.memory_reserve_gib, base.memory_reserve_gib);
  return ApplyTrainingOverrides(base, overrides, pp, model.num_hidden_layers);
}

Machine ResolveMachine(const TrainingFlags& flags, const ModelSpec& model) {
  return ApplyMachineOverrides(model.machine, flags.Parse());
}

void RejectImbalanceWithRouting(bool routing_given, const std::string& imbalance) {
  if (routing_given && !imbalance.empty()) {
    throw UsageError("--imbalance and --routing both size the received rows: give one (--routing samples them)");
  }
}

void Warn(const std::string& line, std::vector<std::string>* kept, std::ostream& err) {
  if (line.empty()) return;
  const std::string labelled = line.rfind("dockyard-plan: ", 0) == 0 ? line : "dockyard-plan: " + line;
  err << labelled;
  kept->push_back(WarningText(labelled));
}

std::string BudgetAboveClusterWarning(double budget_gib, const ClusterSpec& cluster) {
  if (!(budget_gib > cluster.memory_gib)) return "";
  return fmt::format(
      "dockyard-plan: warning: --gpu-memory-gib {} is above {}'s {} GiB per GPU (memory_gib): layouts are judged "
      "against memory its GPUs do not have\n",
      budget_gib, cluster.name, cluster.memory_gib);
}

std::string PartialNodeWarning(int64_t world_size, const ClusterSpec& cluster) {
  if (world_size <= cluster.gpus_per_node || cluster.gpus_per_node < 1 || world_size % cluster.gpus_per_node == 0) return "";
  return fmt::format(
      "dockyard-plan: warning: world_size {} is not a multiple of {}'s gpus_per_node {}: the last node is partly used ({} of {} "
      "GPUs), which launchers starting the same ranks per node (torchrun --nproc-per-node) do not do\n",
      world_size, cluster.name, cluster.gpus_per_node, world_size % cluster.gpus_per_node, cluster.gpus_per_node);
}

std::string NodeSizeClusterWarning(const TrainingFlags& flags, const ModelSpec& model, const ClusterSpec& cluster,
                                   const std::string& command) {
  const int64_t domain = NvlinkDomainGpus(cluster);
  if (const std::optional<int64_t> flag = ParseInt("--gpus-per-node", flags.gpus_per_node)) {
    if (*flag == domain) return "";
    return fmt::format(
        "dockyard-plan: warning: --gpus-per-node {} differs from {}'s NVLink domain of {} GPUs (the cluster's node size): "
        "{} counts the memory and traffic tables' node crossings by {} (the flag is over the cluster) while the time model "
        "prices NVLink by {}; give the cluster's number (docs/cluster.md)\n",
        *flag, cluster.name, domain, command, *flag, domain);
  }
  if (!model.training || !model.machine.gpus_per_node_given || model.machine.gpus_per_node == domain) return "";
  return fmt::format(
      "dockyard-plan: warning: the model spec's training.gpus_per_node {} differs from {}'s NVLink domain of {} GPUs (the "
      "cluster's node size): {} uses {} (the cluster is over the spec){}\n",
      model.machine.gpus_per_node, cluster.name, domain, command, domain,
      command == "simulate" ? fmt::format("; --gpus-per-node {} would use the spec's", model.machine.gpus_per_node) : "");
}

Json ReportProvenance(const PlanCliOptions& o) {
  ReportInputs in = PlanReportInputs(o.model_given ? o.model : "", o.cluster, o.routing, o.calibration);
  if (!o.framework_config) return Provenance(o.argv, in.files, in.embedded);
  // --from-megatron / --from-torchtitan: the file is an input (its model, without --model, in place of
  // the default), and what was taken from it and what was not is recorded beside the inputs.
  if (!o.model_given) in.embedded.clear();
  in.files.push_back({o.framework_flag, o.framework_config->file});
  if (!o.model_given && !o.framework_config->model_file.empty()) in.files.push_back({"hf_assets_path", o.framework_config->model_file});
  Json p = Provenance(o.argv, in.files, in.embedded);
  Json flags = Json::array();
  for (const auto& f : o.framework_config->flags) flags.push_back({{"flag", f.flag}, {"value", f.value}, {"from", f.from}});
  p["framework_config"] = {{"framework", o.framework_config->framework},
                           {"file", o.framework_config->file},
                           {"form", o.framework_config->form},
                           {"flags", flags},
                           {"ignored", o.framework_config->ignored},
                           {"searched", o.framework_config->searched},
                           {"without_effect", o.framework_config->not_read}};
  return p;
}

}  // namespace dockyard::cli
