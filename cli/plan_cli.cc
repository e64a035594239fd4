// dockyard-plan command line (see plan_cli.h).
#include "cli/plan_cli.h"

#include "planner/sim/dispatch_traffic.h"

#include <cerrno>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <numeric>
#include <optional>
#include <sstream>
#include <limits>
#include <map>
#include <string>
#include <tuple>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "cli/flag_suggest.h"
#include "cli/flags.h"
#include "cli/default_model.h"
#include "planner/sim/calibration.h"
#include "cli/calibrate_cli.h"
#include "planner/base/error.h"
#include "planner/base/file_util.h"
#include "planner/sim/cost.h"
#include "planner/sim/deepep.h"
#include "planner/model/hf_config.h"
#include "planner/report/header.h"
#include "planner/report/html_report.h"
#include "planner/accounting/memory.h"
#include "planner/model/model_spec.h"
#include "planner/report/provenance.h"
#include "planner/layout/plan.h"
#include "planner/sim/redundant_experts.h"
#include "planner/search/redundant_search.h"
#include "planner/sim/group_routing.h"
#include "planner/sim/received_rows.h"
#include "planner/accounting/refit.h"
#include "planner/accounting/replica_refit.h"
#include "planner/report/report.h"
#include "planner/search/explain.h"
#include "planner/search/search.h"
#include "planner/model/global_batch.h"
#include "planner/accounting/workload.h"
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

// The embedded default: DeepSeek-V3 on 32 nodes x 8 GPUs; FSDP over all 256 ranks and EP 64
// (DeepSeek-V3's own training used EP 64), giving 4 experts per EP rank and efsdp 4.
constexpr int64_t kDefaultWorldSize = 256;
constexpr int64_t kDefaultEp = 64;
constexpr const char* kDefaultModelName = "<embedded testdata/hf/deepseek-v3.json>";

using cli::ParseInt;
using cli::ParseNumber;
using cli::UsageError;
using cli::WriteOutput;

struct CliOptions {
  std::string model;
  cli::DegreeFlags degrees;
  std::string json_path, refit_json, html_path;
  // Training settings (empty = the spec's training block, else the default).
  std::string dp_sharding, pp_layer_split, param_dtype, grad_dtype, optimizer, seq_len, micro_batch_size, num_microbatches, recompute,
      recompute_modules, precision, fp8_recipe, optimizer_states_dtype, gpu_memory_gib, imbalance, gpus_per_node, dispatcher, oep,
      refit_dtype, memory_reserve_gib, selective_ac_option;
  bool fp8_dispatch = false;
  bool fp8_param_gather = false;
  std::string mtp_layers;
  bool model_given = false, json_given = false, refit_given = false, html_given = false;
  // Schedule settings (planner/model/pipeline_schedule.h RunSettings).
  std::string fsdp_reshard, grad_accumulation_steps, vpp, cp_comm;
  std::string pipeline_layout;  // Megatron --pipeline-model-parallel-layout (planner/model/pipeline_layout.h)
  bool account_for_embedding = false, account_for_loss = false;
  std::string pipeline_schedule;  // --pipeline-schedule (pipeline_schedule.h)
  bool overlap_grad_reduce = false, overlap_param_gather = false, overlap_moe_ep_comm = false;
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
  // simulate / search: the kernel-level compute model and its run settings (opt-in).
  std::string compute_model = "gemm", cross_entropy = "unfused";
  bool cuda_graphs = false;
  cli::RedundantExpertsFlags redundant;  // simulate: redundant experts (opt-in)
  std::string calibration;               // simulate / search: calibration JSON (empty = the built-in defaults)
  std::vector<std::string> argv;         // the command line, recorded in reports
  // search
  std::string top = "10", max_pp;
};

// --compute-model, --cuda-graphs, --cross-entropy on `options`.
void ApplyComputeFlags(const CliOptions& o, CostOptions* options) {
  // The launch-gap and cross-entropy kernels exist only in the kernel-level compute model: refuse
  // them elsewhere rather than ignore them.
  if (o.compute_model != "kernels" && o.cuda_graphs) {
    throw Error("--cuda-graphs: CUDA graphs shorten the kernel launch gaps of --compute-model kernels; with --compute-model " +
                o.compute_model + " there are none to shorten (add --compute-model kernels)");
  }
  if (o.compute_model != "kernels" && o.cross_entropy == "fused") {
    throw Error("--cross-entropy fused: the cross-entropy kernels are priced by --compute-model kernels only; with --compute-model " +
                o.compute_model + " it changes nothing (add --compute-model kernels)");
  }
  options->kernel_compute = o.compute_model == "kernels";
  options->cuda_graphs = o.cuda_graphs;
  options->fused_cross_entropy = o.cross_entropy == "fused";
}

void AddComputeFlags(CLI::App* app, CliOptions& o) {
  app->add_option("--compute-model", o.compute_model,
                  "gemm (GEMMs at fixed efficiencies) | kernels (also memory-bound kernels and launch gaps; default gemm)")
      ->check(CLI::IsMember({"gemm", "kernels"}));
  app->add_flag("--cuda-graphs", o.cuda_graphs, "with --compute-model kernels: kernels launched from CUDA graphs");
  app->add_option("--cross-entropy", o.cross_entropy, "with --compute-model kernels: unfused | fused (default unfused)")
      ->check(CLI::IsMember({"unfused", "fused"}));
}

void AddPlanOptions(CLI::App* app, CliOptions& o) {
  app->add_option("--model", o.model, "HF config.json or dockyard model spec (default: embedded DeepSeek-V3)");
  o.degrees.AddTo(app, "number of GPUs (required with --model)", "pipeline parallel degree, outermost axis (default 1)");
  app->add_option("--json", o.json_path, "write the JSON report to PATH ('-' = stdout, replaces the tables)");
  app->add_option("--html", o.html_path, "write a self-contained HTML page of figures to PATH (docs/html-report.md)");
  app->add_option("--dp-sharding", o.dp_sharding, "fsdp | zero1 | ddp (default fsdp; zero1 with --convention megatron)")
      ->check(CLI::IsMember({"fsdp", "zero1", "ddp"}));
  app->add_option("--pp-layer-split", o.pp_layer_split, "layers per stage: '7,6,6,6' or '7+6' (first 7, then 6 per stage)");
  app->add_option("--param-dtype", o.param_dtype, "compute / all-gather dtype (default bfloat16)");
  app->add_option("--grad-dtype", o.grad_dtype, "gradient and reduction dtype (default float32)");
  app->add_option("--optimizer", o.optimizer, "adamw | sgd (default adamw)")->check(CLI::IsMember({"adamw", "sgd"}));
  app->add_option("--seq-len", o.seq_len, "tokens per sequence (default 4096)");
  app->add_option("--micro-batch-size", o.micro_batch_size, "sequences per micro-batch (default 1)");
  app->add_option("--num-microbatches", o.num_microbatches, "micro-batches per step (default pp)");
  app->add_option("--recompute", o.recompute, "none | selective | full (default none)")
      ->check(CLI::IsMember({"none", "selective", "full"}));
  app->add_option("--recompute-modules", o.recompute_modules,
                  "with --recompute selective: comma-separated Megatron modules (core_attn, layernorm, moe_act, moe, "
                  "mla_up_proj, shared_experts, mlp; default: layernorm and every SwiGLU activation)");
  app->add_option("--selective-ac-option", o.selective_ac_option,
                  "with --recompute selective and --convention torchtitan: torchtitan's per-layer selective_ac_option N, "
                  "every N-th block of a stage fully checkpointed, the others keep all activations (0 = every block)");
  app->add_option("--precision", o.precision,
                  "bf16 | fp8: GEMMs in FP8 (FP8 weight copies; FP8 peak under --compute-model kernels; default bf16)")
      ->check(CLI::IsMember({"bf16", "fp8"}));
  app->add_option("--fp8-recipe", o.fp8_recipe, "with --precision fp8: tensorwise | blockwise scaling (default tensorwise)")
      ->check(CLI::IsMember({"tensorwise", "blockwise"}));
  app->add_flag("--fp8-dispatch", o.fp8_dispatch, "the EP dispatch all-to-all in FP8 (1 B + a scale per 128 elements), combine in BF16");
  app->add_flag("--fp8-param-gather", o.fp8_param_gather,
                "with --precision fp8 and FSDP: all-gather the FP8 GEMM weights in FP8 (Megatron --fp8-param-gather)");
  app->add_option("--optimizer-states-dtype", o.optimizer_states_dtype, "AdamW moments: float32 | bfloat16 (default float32)");
  app->add_option("--mtp-layers", o.mtp_layers,
                  "MTP modules trained (Megatron --mtp-num-layers; DeepSeek-V3: 1) on the last stage, for any model: "
                  "each a copy of its last layer (default 0)");
  app->add_option("--gpu-memory-gib", o.gpu_memory_gib, "memory budget per GPU in GiB: prints headroom (default none)");
  cli::AddMemoryReserveFlag(app, o.memory_reserve_gib);
  app->add_option("--imbalance", o.imbalance, "max / mean tokens received per rank, sizes all-to-all buffers (default 1.0)");
  app->add_option("--gpus-per-node", o.gpus_per_node,
                  "GPUs per node, for cross-node traffic (default 8; simulate: the cluster's NVLink domain)");
  app->add_option("--dispatcher", o.dispatcher,
                  "all_to_all | deredundency | deepep (Megatron flex: DeepEP / HybridEP) | allgather (default all_to_all)")
      ->check(CLI::IsMember({"all_to_all", "deredundency", "deepep", "allgather"}));
  app->add_option("--oep", o.oep, "deredundency outer EP size (default: nodes spanned by an EP group)");
  app->add_option("--refit-dtype", o.refit_dtype, "dtype of the streamed per-expert tensors (default: param dtype)");
  app->add_option("--refit-json", o.refit_json, "write the per-expert refit map to PATH ('-' = stdout)");
  app->add_option("--fsdp-reshard-after-forward", o.fsdp_reshard,
                  "default | always | never: torchtitan's FSDP reshard-after-forward policy (default = not pp)")
      ->check(CLI::IsMember({"default", "always", "never"}));
  app->add_option("--grad-accumulation-steps", o.grad_accumulation_steps,
                  "torchtitan's outer gradient-accumulation loop: pipeline schedules per step (default 1)");
  app->add_option("--vpp", o.vpp, "model chunks per pipeline rank: interleaved 1F1B (default 1 = plain 1F1B)");
  app->add_option("--cp-comm-type", o.cp_comm, "p2p | a2a: context-parallel K/V exchange, ring or all-to-all (default p2p)")
      ->check(CLI::IsMember({"p2p", "a2a"}));
  app->add_flag("--overlap-moe-expert-parallel-comm", o.overlap_moe_ep_comm,
                "Megatron: EP all-to-alls of one micro-batch under another's compute (ep > 1, all_to_all, no full "
                "recompute, --vpp with pp > 1)");
  app->add_option("--pipeline-model-parallel-layout", o.pipeline_layout,
                  "Megatron layout of pp x vpp stages: E embedding, t layer, m MTP layer, L loss, | stage end, (..)*N "
                  "repeat, e.g. 'Et|(tt|)*30mL' (sets vpp)");
  app->add_option("--pipeline-schedule", o.pipeline_schedule,
                  "1f1b (interleaved with --vpp) | dualpipe (DeepSeek-V3: even pp, micro-batches even and >= 2 pp; default 1f1b)")
      ->check(CLI::IsMember({"1f1b", "dualpipe"}));
  app->add_flag("--account-for-embedding-in-pipeline-split", o.account_for_embedding,
                "Megatron: the embedding counts as one layer when splitting layers over stages");
  app->add_flag("--account-for-loss-in-pipeline-split", o.account_for_loss,
                "Megatron: the loss (final norm, lm_head) counts as one layer when splitting layers over stages");
  app->add_flag("--overlap-grad-reduce", o.overlap_grad_reduce,
                "Megatron: the step-end gradient reduce runs under the last backward (zero1 / ddp)");
  app->add_flag("--overlap-param-gather", o.overlap_param_gather,
                "Megatron: the distributed optimizer's parameter all-gather runs under the first forward (zero1)");
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

ModelSpec LoadModelOrDefault(const std::string& path) {
  if (!path.empty()) return LoadModel(path);
  return ModelSpecFromHfConfig(ParseJsonText(kDefaultModelJson, kDefaultModelName), kDefaultModelName);
}

TrainingConfig ResolveTraining(const CliOptions& o, const ModelSpec& model, int64_t pp) {
  TrainingConfig t = model.training.value_or(TrainingConfig{});
  if (!o.dp_sharding.empty()) {
    t.dp_sharding = o.dp_sharding == "zero1" ? DpSharding::kZero1 : o.dp_sharding == "ddp" ? DpSharding::kDdp : DpSharding::kFsdp;
  }
  if (!o.param_dtype.empty()) t.param_dtype = CanonicalDtype(o.param_dtype);
  if (!o.grad_dtype.empty()) t.grad_dtype = CanonicalDtype(o.grad_dtype);
  if (!o.optimizer.empty()) t.optimizer = o.optimizer == "sgd" ? Optimizer::kSgd : Optimizer::kAdamW;
  if (auto v = ParseInt("--seq-len", o.seq_len)) t.seq_len = *v;
  if (auto v = ParseInt("--micro-batch-size", o.micro_batch_size)) t.micro_batch_size = *v;
  if (auto v = ParseInt("--num-microbatches", o.num_microbatches)) t.num_microbatches = *v;
  if (!o.recompute.empty()) {
    t.recompute = o.recompute == "full" ? Recompute::kFull : o.recompute == "selective" ? Recompute::kSelective : Recompute::kNone;
  }
  if (auto v = ParseInt("--mtp-layers", o.mtp_layers)) t.mtp_layers = *v;
  if (!o.precision.empty()) t.precision = o.precision;
  if (!o.fp8_recipe.empty()) t.fp8_recipe = o.fp8_recipe;
  if (o.fp8_dispatch) t.fp8_dispatch = true;
  if (o.fp8_param_gather) t.fp8_param_gather = true;
  if (!o.optimizer_states_dtype.empty()) t.optimizer_states_dtype = CanonicalDtype(o.optimizer_states_dtype);
  if (!o.recompute_modules.empty()) {
    t.recompute_modules.clear();
    std::stringstream list(o.recompute_modules);
    for (std::string item; std::getline(list, item, ',');) t.recompute_modules.push_back(item);
  }
  if (!o.selective_ac_option.empty()) t.selective_ac_option = o.selective_ac_option;
  if (auto v = ParseNumber("--gpu-memory-gib", o.gpu_memory_gib)) t.gpu_memory_gib = *v;
  t.memory_reserve_gib = cli::ResolveMemoryReserve(o.memory_reserve_gib, t.memory_reserve_gib);
  if (auto v = ParseNumber("--imbalance", o.imbalance)) t.imbalance = *v;
  if (auto v = ParseInt("--gpus-per-node", o.gpus_per_node)) t.gpus_per_node = *v;
  if (!o.dispatcher.empty()) t.dispatcher = o.dispatcher;
  if (auto v = ParseInt("--oep", o.oep)) t.oep = *v;
  if (!o.refit_dtype.empty()) t.refit_dtype = CanonicalDtype(o.refit_dtype);
  if (!o.fsdp_reshard.empty()) t.run.reshard_after_forward = ParseReshardPolicy(o.fsdp_reshard, "--fsdp-reshard-after-forward");
  if (auto v = ParseInt("--grad-accumulation-steps", o.grad_accumulation_steps)) t.run.grad_accumulation_steps = *v;
  if (auto v = ParseInt("--vpp", o.vpp)) t.run.vpp = *v;
  if (!o.cp_comm.empty()) t.run.cp_comm = o.cp_comm;
  if (o.overlap_grad_reduce) t.run.overlap_grad_reduce = true;
  if (o.overlap_moe_ep_comm) t.run.overlap_moe_ep_comm = true;
  if (o.overlap_param_gather) t.run.overlap_param_gather = true;
  if (!o.pipeline_layout.empty()) t.run.pipeline_layout = o.pipeline_layout;
  if (o.account_for_embedding) t.run.account_for_embedding = true;
  if (o.account_for_loss) t.run.account_for_loss = true;
  if (!o.pipeline_schedule.empty()) t.run.schedule = o.pipeline_schedule;
  ValidateTraining(t, "--");
  if (!o.pp_layer_split.empty()) t.pp_layer_split = ParseLayerSplit(o.pp_layer_split, pp, model.num_hidden_layers, "--pp-layer-split");
  return t;
}

enum class Command { kPlan, kCheck, kSimulate };

// What produced a report: version, command line and the digests of the input files.
Json ReportProvenance(const CliOptions& o) {
  std::vector<std::string> files;
  std::vector<std::pair<std::string, std::string>> embedded;
  if (o.model_given) {
    files.push_back(o.model);
  } else {
    embedded.push_back({kDefaultModelName, kDefaultModelJson});
  }
  struct stat st {};
  if (stat(o.cluster.c_str(), &st) == 0 && S_ISREG(st.st_mode)) files.push_back(o.cluster);
  if (o.routing.rfind("trace:", 0) == 0) files.push_back(o.routing.substr(6));
  if (!o.calibration.empty()) files.push_back(o.calibration);
  return Provenance(o.argv, files, embedded);
}

// "0-127, 256-383" style list of ranks.
std::string RankList(const std::vector<int64_t>& ranks) {
  std::string out;
  size_t i = 0;
  while (i < ranks.size()) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    out += (out.empty() ? "" : ", ") + (i == j ? std::to_string(ranks[i]) : fmt::format("{}-{}", ranks[i], ranks[j]));
    i = j + 1;
  }
  return out;
}

// Builds the plan from flags (or the embedded default) and writes what was asked.
int PlanAndReport(const CliOptions& o, Command command, std::ostream& out, std::ostream& err) {
  const bool check = command == Command::kCheck;
  if (check && ParseNumber("--gpu-memory-gib", o.gpu_memory_gib).value_or(0) <= 0) {
    throw UsageError("check needs a budget: --gpu-memory-gib GiB (> 0)");
  }
  const bool use_default = !o.model_given;
  if (!use_default && o.degrees.world_size.empty()) throw UsageError("--world-size is required with --model");
  ParallelDimsOptions dims = o.degrees.Parse(kDefaultWorldSize);
  if (use_default && o.degrees.ep.empty()) dims.ep = DefaultEp(dims, kDefaultEp);

  ModelSpec model = LoadModelOrDefault(o.model);
  const std::string source = use_default ? kDefaultModelName : o.model;
  TrainingConfig training = ResolveTraining(o, model, dims.pp);
  // The embedded default recomputes activations (full AC, as torchtitan's DeepSeek-V3 configs
  // do) so that its 256-GPU layout fits 80 GiB GPUs; --recompute overrides it.
  if (use_default && o.recompute.empty()) training.recompute = Recompute::kFull;
  std::optional<ClusterSpec> cluster;
  std::optional<Calibration> calibration;
  if (command == Command::kSimulate) {
    cluster = LoadCluster(o.cluster);
    if (!o.calibration.empty()) calibration = LoadCalibration(o.calibration);
    // The cluster's locality unit decides cross-node traffic unless --gpus-per-node says otherwise:
    // the NVLink domain, the time model's rule (network.h NvlinkDomainGpus).
    if (o.gpus_per_node.empty()) training.gpus_per_node = NvlinkDomainGpus(*cluster);
  }
  std::optional<GlobalBatchSchedule> global_batch;
  if (const auto gbs = o.global_batch.Sequences(training.seq_len)) {
    // The micro-batches per step and their schedule follow from the global batch (global_batch.h).
    if (!o.grad_accumulation_steps.empty()) {
      throw UsageError("--grad-accumulation-steps: derived from --global-batch-size (torchtitan's outer loop); give one of them");
    }
    const ParallelDims built = ParallelDims::Build(dims);
    global_batch = ResolveGlobalBatch(*gbs, built.dp_replicate * built.dp_shard, training.micro_batch_size, built.pp,
                                      built.convention == Convention::kMegatron, training.num_microbatches);
    training.num_microbatches = global_batch->num_microbatches;
    training.run.grad_accumulation_steps = global_batch->grad_accumulation_steps;
  }
  Plan plan = BuildPlan(model, dims, training);
  // check / simulate: the routing sample. Given --routing, its largest received rows size the
  // memory (SampleImbalance) in place of --imbalance; simulate also prices the step with it.
  std::optional<RoutingSpec> routing;
  int64_t layers = 0;
  std::optional<RoutingResult> sampled;
  std::optional<ReceivedRowsReport> received;
  const std::optional<double> capacity_factor = ParseNumber("--capacity-factor", o.capacity_factor);
  if (command == Command::kSimulate || (check && (o.routing_given || capacity_factor))) {
    if (o.routing_given && !o.imbalance.empty()) {
      throw UsageError("--imbalance and --routing both size the received rows: give one (--routing samples them)");
    }
    routing = ParseRoutingSpec(o.routing);
    routing->seed = static_cast<uint64_t>(ParseInt("--seed", o.seed).value_or(0));
    // A trace is given per MoE layer (or one layer for all); other distributions are sampled for
    // a few layers whose per-layer slowest ranks are averaged.
    layers = RoutingLayersToSample(plan.model, *routing, ParseInt("--routing-layers", o.routing_layers), kDefaultRoutingLayers,
                                   "--routing-layers");
    sampled = SampleRoutingForPlan(plan, *routing, layers);
    if (o.routing_given || capacity_factor) {
      const RoutingModel routing_model =
          PrepareRouting(*routing, plan.model.moe.num_experts, plan.model.moe.top_k, layers, GroupLimitOf(plan.model.moe));
      received = AnalyzeReceivedRows(routing_model, *sampled, capacity_factor);
      if (o.routing_given) plan.training.imbalance = received->imbalance;
    }
  }
  // Everything that can fail is computed before anything is written.
  const MemoryReport memory = ComputeMemory(plan);
  ReportHeaderInputs header_inputs;
  header_inputs.command = check ? "check" : command == Command::kSimulate ? "simulate" : "plan";
  header_inputs.model_name = plan.model.name;
  header_inputs.model_source = source;
  header_inputs.dims = plan.dims;
  header_inputs.world_size = plan.dims.world_size;
  header_inputs.convention = plan.dims.convention;
  if (cluster) header_inputs.cluster = cluster->name;
  if (calibration) header_inputs.calibration = CalibrationRefToJson(*calibration);
  if (routing) {
    header_inputs.routing = RoutingSpecText(*routing);
    header_inputs.seed = routing->seed;
    header_inputs.routing_layers = layers;
  }
  header_inputs.imbalance = plan.training.imbalance;
  header_inputs.provenance = ReportProvenance(o);
  const Json header = ReportHeader(header_inputs);
  std::string report_text, html_text;
  std::optional<CostBreakdown> cost;
  std::string redundant_text;         // simulate --redundant-experts
  std::optional<Json> replica_refit;  // simulate --redundant-experts --refit-json
  if (command == Command::kSimulate) {
    CostOptions options;
    options.overlap_shared_experts = !o.no_overlap;
    ApplyComputeFlags(o, &options);
    if (calibration) ApplyCalibration(*calibration, &*cluster, &options);
    cost = SimulateStep(plan, *cluster, *sampled, options);
    std::optional<RedundantExpertsReport> redundant;
    if (const auto parsed = cli::ParseRedundantExpertsFlags(o.redundant)) {
      const RedundantExpertsOptions& ro = *parsed;
      const RoutingModel routing_model =
          PrepareRouting(*routing, plan.model.moe.num_experts, plan.model.moe.top_k, layers, GroupLimitOf(plan.model.moe));
      redundant = AnalyzeRedundantExperts(plan, *cluster, routing_model, *sampled, *cost, memory, ro, options);
      redundant_text = RedundantExpertsToText(*redundant);
      if (o.refit_given) {
        // The refit map targets the physical slots of every MoE layer's placement.
        const std::vector<ExpertPlacement> placements = PlaceMoeLayers(plan, *routing, ro);
        const RefitMap map = BuildRefitMap(plan, plan.training.refit_dtype);
        replica_refit = ReplicaRefitMapToJson(map, ReplicaRefitTargets(map, plan.model, placements), placements);
      }
    }
    if (o.json_given || o.html_given) {
      Json j = SimulateReportToJson(plan, memory, *cost, {source, *cluster, o.routing, routing->seed, layers, ReportProvenance(o)});
      if (redundant) j["redundant_experts"] = RedundantExpertsToJson(*redundant);
      if (received) j["received_rows"] = ReceivedRowsToJson(*received);
      j["header"] = header;
      if (calibration) j["calibration"] = CalibrationRefToJson(*calibration);
      if (plan.dims.ep > 1 && plan.training.dispatcher == "deepep") {  // the link-level matrices (deepep.h)
        j["dispatch_links"] = FlexLinksToJson(*sampled, DeepEpRowBytes(plan, /*fp8=*/true));
      }
      if (o.json_given) report_text = j.dump(1, ' ', false, Json::error_handler_t::replace) + "\n";
      if (o.html_given) {
        Json page = PlanToJson(plan, source, memory);
        page.update(j);  // the plan's figures and simulate's report, one document
        html_text = ReportToHtml(page, RoutingSampleToJson(*sampled));
      }
    }
  } else if (o.json_given || o.html_given) {
    Json j = PlanToJson(plan, source, memory);
    j["generator"]["provenance"] = ReportProvenance(o);
    j["header"] = header;
    if (received) j["received_rows"] = ReceivedRowsToJson(*received);
    if (o.json_given) report_text = j.dump(1, ' ', false, Json::error_handler_t::replace) + "\n";
    if (o.html_given) html_text = ReportToHtml(j, UniformRoutingSample(plan));
  }
  std::string refit_text;
  if (o.refit_given) {
    Json refit = replica_refit ? *replica_refit : RefitMapToJson(BuildRefitMap(plan, plan.training.refit_dtype));
    refit["provenance"] = ReportProvenance(o);
    refit_text = refit.dump(1, ' ', false, Json::error_handler_t::replace) + "\n";
  }
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
    out << ReportHeaderToText(header);
    if (use_default) {
      out << fmt::format("(no --model: the embedded default, DeepSeek-V3 on {} GPUs{}, ep {}, recompute {})\n", dims.world_size,
                         dims.world_size % 8 == 0 ? fmt::format(" = {} nodes x 8", dims.world_size / 8) : "", dims.ep,
                         RecomputeName(plan.training.recompute));
    }
    if (received) out << ReceivedRowsToText(*received);
    if (cost) {
      if (global_batch) {
        out << fmt::format(
            "Global batch {} sequences ({} tokens): {} micro-batches of {} per data-parallel rank = {} schedule(s) of {}\n",
            global_batch->microbatches_per_step * plan.training.micro_batch_size * plan.dims.dp_replicate * plan.dims.dp_shard,
            global_batch->microbatches_per_step * plan.training.micro_batch_size * plan.dims.dp_replicate * plan.dims.dp_shard *
                plan.training.seq_len,
            global_batch->microbatches_per_step, plan.training.micro_batch_size, global_batch->grad_accumulation_steps,
            global_batch->num_microbatches);
      }
      out << MemoryToText(plan, memory) << CostToText(*cost) << redundant_text;
    } else {
      out << (check ? MemoryToText(plan, memory) : PlanToText(plan, source, memory));
    }
    if (o.json_given) out << "JSON report written to " << o.json_path << "\n";
    if (o.refit_given) out << "Refit map written to " << o.refit_json << "\n";
    if (o.html_given) out << "HTML report written to " << o.html_path << "\n";
  }
  // check and simulate: a plan over its budget exits kExitOverBudget (its reports are written).
  if ((check || command == Command::kSimulate) && !memory.over_budget_ranks.empty()) {
    for (const auto& s : RanksOverBudget(plan, memory)) {
      err << fmt::format(
          "dockyard-plan {}: stage {}: {} of {} ranks exceed the {:.2f} GiB budget less the {:.2f} GiB reserve ({:.2f} GiB); "
          "worst rank {} needs {:.2f} GiB (over by {:.2f} GiB); ranks over: {}\n",
          check ? "check" : "simulate", s.stage, s.ranks_over.size(), s.stage_size, memory.budget_gib, memory.reserve_gib,
          memory.budget_gib - memory.reserve_gib, s.worst_rank, s.peak_gib, s.peak_gib - (memory.budget_gib - memory.reserve_gib),
          RankList(s.ranks_over));
    }
    return cli::kExitOverBudget;
  }
  if (check && !quiet) {
    out << fmt::format("check: every rank fits in {:.2f} GiB ({:.2f} GiB budget less the {:.2f} GiB reserve)\n",
                       memory.budget_gib - memory.reserve_gib, memory.budget_gib, memory.reserve_gib);
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
  s.cluster = LoadCluster(o.cluster);
  std::optional<Calibration> calibration;
  if (!o.calibration.empty()) {
    calibration = LoadCalibration(o.calibration);
    ApplyCalibration(*calibration, &s.cluster, &s.cost);
  }
  ApplyComputeFlags(o, &s.cost);
  s.routing = ParseRoutingSpec(o.routing);
  s.routing.seed = static_cast<uint64_t>(ParseInt("--seed", o.seed).value_or(0));
  if (!o.pipeline_layout.empty()) {
    throw Error(
        fmt::format("--pipeline-model-parallel-layout \"{}\": a layout fixes pp x vpp stages; search varies pp (use plan / "
                    "simulate for a layout, or --account-for-embedding-in-pipeline-split / --account-for-loss-in-pipeline-split)",
                    o.pipeline_layout));
  }
  if (o.pipeline_schedule == "dualpipe") {
    throw Error(
        "--pipeline-schedule dualpipe: the layout search's memory rules do not hold DualPipe's second model chunk per rank "
        "(use plan / simulate for DualPipe)");
  }
  const ModelSpec model = LoadModelOrDefault(o.model);
  // --fp8-dispatch reaches the candidates whose dispatcher has it (all_to_all, deepep).
  CliOptions training_flags = o;
  training_flags.fp8_dispatch = false;
  s.training = ResolveTraining(training_flags, model, 1);
  s.training.fp8_dispatch = o.fp8_dispatch;
  std::vector<std::string> names;
  for (size_t start = 0; !o.search_dispatchers.empty() && start <= o.search_dispatchers.size();) {
    const size_t comma = std::min(o.search_dispatchers.find(',', start), o.search_dispatchers.size());
    names.push_back(o.search_dispatchers.substr(start, comma - start));
    start = comma + 1;
  }
  for (const std::string& name : names) {
    if (name == "deepep") {
      s.include_deepep = true;
    } else if (name == "allgather") {
      s.include_allgather = true;
    } else {
      throw Error(fmt::format("--search-dispatchers: unknown dispatcher '{}' (expected deepep or allgather, comma-separated)", name));
    }
  }
  // Pins: a flag given fixes its dimension, any other is searched (docs/search.md).
  s.pins.dp_replicate = ParseInt("--dp-replicate", o.degrees.dp_replicate).value_or(0);
  s.pins.dp_shard = ParseInt("--dp-shard", o.degrees.dp_shard).value_or(0);
  s.pins.cp = ParseInt("--cp", o.degrees.cp).value_or(0);
  s.pins.tp = ParseInt("--tp", o.degrees.tp).value_or(0);
  s.pins.ep = ParseInt("--ep", o.degrees.ep).value_or(0);
  s.pins.etp = ParseInt("--etp", o.degrees.etp).value_or(0);
  s.pins.pp = ParseInt("--pp", o.degrees.pp).value_or(0);
  // A given flag pins its degree (0 would silently mean "searched"): it must be >= 1.
  for (const auto& [flag, raw, value] :
       {std::tuple<const char*, const std::string&, int64_t>{"--dp-replicate", o.degrees.dp_replicate, s.pins.dp_replicate},
        {"--dp-shard", o.degrees.dp_shard, s.pins.dp_shard},
        {"--cp", o.degrees.cp, s.pins.cp},
        {"--tp", o.degrees.tp, s.pins.tp},
        {"--ep", o.degrees.ep, s.pins.ep},
        {"--etp", o.degrees.etp, s.pins.etp},
        {"--pp", o.degrees.pp, s.pins.pp}}) {
    if (!raw.empty() && value < 1) throw UsageError(fmt::format("{}: a pinned degree must be >= 1, got {}", flag, value));
  }
  const bool megatron = s.convention == Convention::kMegatron;
  if (o.micro_batch_size.empty()) s.micro_batch_sizes = {1, 2, 4};
  if (o.recompute.empty()) s.recomputes = {Recompute::kNone, Recompute::kSelective, Recompute::kFull};
  if (o.vpp.empty()) s.vpps = {1, 2, 4};
  if (o.dp_sharding.empty()) {
    s.dp_shardings = megatron ? std::vector<DpSharding>{DpSharding::kZero1, DpSharding::kDdp}
                              : std::vector<DpSharding>{DpSharding::kFsdp, DpSharding::kDdp};
  }
  if (!o.overlap_moe_ep_comm && megatron) s.ep_overlaps = {false, true};
  if (!o.dispatcher.empty()) s.dispatchers = {o.dispatcher};
  s.threads = static_cast<int>(std::clamp<int64_t>(ParseInt("--threads", o.threads).value_or(1), -1, 1 << 20));
  if (s.threads < 1 || s.threads > 1024) throw UsageError(fmt::format("--threads: must be in [1, 1024], got {}", o.threads));
  if (s.world_size < 1) throw Error(fmt::format("--world-size: must be >= 1, got {}", s.world_size));
  s.global_batch_size = o.global_batch.Sequences(s.training.seq_len).value_or(s.world_size);
  std::optional<LayoutQuery> explain;
  if (!o.explain.empty()) {
    explain = ParseLayoutQuery(o.explain);
    s.keep_all = true;
  }
  ValidateSelectiveAcConvention(s.training, s.convention == Convention::kTorchtitan);  // else every layout is invalid
  // torchtitan's per-layer checkpointing is a form of selective recompute: it pins that dimension.
  if (!s.training.selective_ac_option.empty() && o.recompute.empty()) s.recomputes = {Recompute::kSelective};
  const int64_t moe_layers = model.NumMoeLayers();
  // (A trace samples every MoE layer; the sampler reads all of them whatever routing_layers says.)
  s.routing_layers = s.routing.kind == RoutingKind::kTrace
                         ? ParseInt("--routing-layers", o.routing_layers).value_or(std::min<int64_t>(moe_layers, kDefaultRoutingLayers))
                         : RoutingLayersToSample(model, s.routing, ParseInt("--routing-layers", o.routing_layers), kDefaultRoutingLayers,
                                                 "--routing-layers");
  if (!s.training.pp_layer_split.empty()) {
    err << fmt::format(
        "dockyard-plan search: note: the model's training block fixes pp_layer_split ({} stages): only "
        "pp = {} can be valid\n",
        s.training.pp_layer_split.size(), s.training.pp_layer_split.size());
  }
  if (isatty(2)) {
    s.progress = [&err](int64_t done, int64_t total) {
      const int width = 40;
      const int filled = static_cast<int>(width * done / std::max<int64_t>(1, total));
      err << "\r[" << std::string(filled, '#') << std::string(width - filled, ' ') << "] " << done << "/" << total << std::flush;
      if (done == total) err << "\n";
    };
  }
  std::vector<RedundantCount> redundant_counts;  // search --redundant-experts LIST (opt-in)
  std::optional<RedundantExpertsOptions> redundant_options;
  if (!o.redundant.redundant_experts.empty()) {
    redundant_counts = ParseRedundantCounts(o.redundant.redundant_experts);
    cli::RedundantExpertsFlags rest = o.redundant;
    rest.redundant_experts = "0";  // the list is parsed above; the policy, groups and choice here
    redundant_options = cli::ParseRedundantExpertsFlags(rest);
  }
  // The HTML page plots every ranked layout; the JSON and the table keep the first --top.
  const int64_t top_rows = s.top;
  if (o.html_given) s.top = std::numeric_limits<int64_t>::max();
  SearchResult result = SearchLayouts(model, s);
  s.top = top_rows;
  std::optional<ExplainResult> explained;
  if (explain) explained = ExplainLayout(model, s, result, *explain);
  result.all.clear();
  SearchResult every = result;
  if (static_cast<int64_t>(result.top.size()) > top_rows) result.top.resize(top_rows);
  if (result.top.empty()) {
    // The same outcome in every output mode: the counts on stderr, exit 1, no file.
    err << SearchCountsText(result);
    if (result.enumerated == 0) {
      err << "dockyard-plan search: no layout of this world size matches the pinned degrees\n";
    } else if (result.over_budget == 0 && result.invalid == 0) {
      err << fmt::format(
          "dockyard-plan search: the global batch ({} sequences) divides no layout: it must be a multiple of dp x "
          "micro_batch_size (dp = dp_replicate x dp_shard) of some layout\n",
          result.global_batch_size);
    } else if (result.over_budget == 0) {
      err << "dockyard-plan search: no valid layout (every candidate breaks a rule or the global batch; counts above)\n";
    } else {
      err << "dockyard-plan search: no valid layout fits the budget\n";
    }
    return 1;
  }
  // The header every report opens with (header.h); the routing is sampled per (ep, tokens, oep).
  ReportHeaderInputs header_inputs;
  header_inputs.command = "search";
  header_inputs.model_name = model.name;
  header_inputs.model_source = use_default ? kDefaultModelName : o.model;
  header_inputs.world_size = s.world_size;
  header_inputs.convention = s.convention;
  header_inputs.cluster = s.cluster.name;
  if (calibration) header_inputs.calibration = CalibrationRefToJson(*calibration);
  header_inputs.routing = RoutingSpecText(s.routing);
  header_inputs.seed = s.routing.seed;
  header_inputs.routing_layers = s.routing.kind == RoutingKind::kTrace ? moe_layers : s.routing_layers;
  header_inputs.imbalance = s.training.imbalance;
  header_inputs.provenance = ReportProvenance(o);
  const Json header = ReportHeader(header_inputs);
  std::optional<RedundantSearchResult> redundant;
  if (redundant_options) redundant = SearchRedundantExperts(model, s, result, redundant_counts, *redundant_options);
  if (o.json_given || o.html_given) {
    DescribeRows(model, s, &result.top);  // the phase breakdown of each row
    Json j = SearchReportToJson(result, s, use_default ? kDefaultModelName : o.model, moe_layers, ReportProvenance(o));
    if (explained) j["explain"] = ExplainToJson(*explained);
    if (redundant) j["redundant_experts"] = RedundantSearchToJson(*redundant);
    if (calibration) j["calibration"] = CalibrationRefToJson(*calibration);
    j["header"] = header;
    const std::string text = j.dump(1, ' ', false, Json::error_handler_t::replace) + "\n";
    std::vector<std::pair<std::string, std::string>> files;
    if (o.html_given) {
      Json page = j;
      page["top"] = SearchResultToJson(every).at("top");
      page["top_rows"] = top_rows;
      files.push_back({o.html_path, ReportToHtml(page)});
    }
    if (o.json_given && o.json_path != "-") files.push_back({o.json_path, text});
    WriteFilesAtomically(files);
    if (o.json_given && o.json_path == "-") {
      WriteOutput("-", text, out);
      return 0;
    }
  }
  out << ReportHeaderToText(header);
  out << SearchResultToText(result);
  if (explained) out << ExplainToText(*explained);
  if (redundant) out << RedundantSearchToText(*redundant);
  if (o.html_given) out << "HTML report written to " << o.html_path << "\n";
  return 0;
}

}  // namespace

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
  search->add_option("--vpp", o.vpp, "pins the model chunks per pipeline rank (default: searched, 1, 2, 4 where pp > 1)");
  search
      ->add_option("--dispatcher", o.dispatcher, "pins the dispatcher: all_to_all | deredundency | deepep | allgather (default: searched)")
      ->check(CLI::IsMember({"all_to_all", "deredundency", "deepep", "allgather"}));
  search->add_flag("--overlap-moe-expert-parallel-comm", o.overlap_moe_ep_comm,
                   "pins Megatron's EP overlap on (default: searched off and on with --convention megatron, off with torchtitan)");
  search->add_option("--threads", o.threads, "worker threads; the result does not depend on them (default 1)");
  search->add_option("--explain", o.explain,
                     "LAYOUT, e.g. \"tp=2,pp=8,vpp=4,ep=32\": where the best layout matching it ranks, its breakdown beside the "
                     "winner's and the phases that differ");
  search->add_option("--max-pp", o.max_pp, "largest pipeline degree to try (default 16)");
  search->add_option("--calibration", o.calibration, "calibration JSON (calibration/PRESET.json; default: the built-in knobs)");
  search->add_option("--json", o.json_path, "write the ranking as JSON to PATH ('-' = stdout)");
  search->add_option("--html", o.html_path, "write the ranking as a self-contained HTML page to PATH");
  // Training flags shared with the plan: bound to the same fields, with the plan's descriptions.
  const std::pair<const char*, std::string*> shared[] = {{"--dp-sharding", &o.dp_sharding},
                                                         {"--param-dtype", &o.param_dtype},
                                                         {"--grad-dtype", &o.grad_dtype},
                                                         {"--optimizer", &o.optimizer},
                                                         {"--seq-len", &o.seq_len},
                                                         {"--micro-batch-size", &o.micro_batch_size},
                                                         {"--num-microbatches", &o.num_microbatches},
                                                         {"--recompute", &o.recompute},
                                                         {"--recompute-modules", &o.recompute_modules},
                                                         {"--selective-ac-option", &o.selective_ac_option},
                                                         {"--gpu-memory-gib", &o.gpu_memory_gib},
                                                         {"--imbalance", &o.imbalance}};
  cli::AddMemoryReserveFlag(search, o.memory_reserve_gib);
  search->get_option("--json")->description("write the ranking as JSON to PATH ('-' = stdout); not written when no layout fits");
  // The same value checks as the plan's options.
  const std::map<std::string, std::vector<std::string>> allowed = {
      {"--dp-sharding", {"fsdp", "zero1", "ddp"}}, {"--optimizer", {"adamw", "sgd"}}, {"--recompute", {"none", "selective", "full"}}};
  for (const auto& [flag, target] : shared) {
    // Flags that pin a searched dimension say so.
    const std::map<std::string, std::string> search_help = {
        {"--gpu-memory-gib", "memory budget per GPU in GiB: layouts over it are dropped (default: the cluster's memory_gib)"},
        {"--micro-batch-size", "pins the sequences per micro-batch (default: searched, 1, 2, 4)"},
        {"--recompute", "pins the recomputation: none | selective | full (default: searched, all three)"},
        {"--dp-sharding",
         "pins the data-parallel sharding: fsdp | zero1 | ddp (default: searched, fsdp and ddp with torchtitan, zero1 "
         "and ddp with megatron)"},
        {"--num-microbatches",
         "micro-batches per pipeline schedule (torchtitan: the rest of the global batch is accumulation "
         "steps; default: every micro-batch of the step in one schedule)"}};
    const auto help = search_help.find(flag);
    const std::string description = help != search_help.end() ? help->second : app.get_option(flag)->get_description();
    CLI::Option* opt = search->add_option(flag, *target, description);
    const auto it = allowed.find(flag);
    if (it != allowed.end()) opt->check(CLI::IsMember(it->second));
  }
  search->add_option("--routing-layers", o.routing_layers,
                     fmt::format("MoE layers to sample per (ep, tokens, oep); each phase takes the mean of their slowest ranks "
                                 "(default min({}, MoE layers), as simulate: a row's step time is simulate's for the same layout)",
                                 kDefaultRoutingLayers));
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
    // A flag given with an empty value is a usage error, whatever the flag.
    for (CLI::App* a : {&app, check, simulate, search, spec, calibrate}) {
      if (a == &app || a->parsed()) cli::RejectEmptyValues(*a);
    }
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
