// The fidelity set: loader, validation and the benchmark's core (see fidelity.h).
#include "planner/calibration/fidelity.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <tuple>
#include <type_traits>

#include <fmt/format.h>

#include "planner/base/error.h"
#include "planner/base/phase.h"
#include "planner/accounting/memory.h"
#include "planner/cost/prediction_error.h"
#include "planner/cost/network.h"
#include "planner/layout/plan.h"
#include "planner/routing/routing.h"
#include "planner/routing/plan_routing.h"
#include "planner/model/model_file.h"
#include "planner/model/precision.h"
#include "planner/layout/convention.h"

namespace dockyard {

const std::vector<std::string> kFidelityFeatures = {
    // Not expressible yet (UnsupportedReasons).
    "megatron_fsdp", "mtp", "dualpipe", "dropless", "custom_pp_layout", "node_limited_routing", "batch_ramp",
    // Expressible for the step time; the memory they move is not placed (MemoryUnsupportedFeatureReasons).
    "activation_offloading", "paged_stash",
    // Settings dockyard models (pipeline_schedule.h RunSettings; muon.h; FP8 attention: training.h
    // fp8_dot_product_attention).
    "ep_overlap", "delay_wgrad_compute", "muon", "fp8_attention", "tp_comm_overlap", "overlap_grad_reduce", "overlap_param_gather",
    "overlap_param_gather_with_optimizer_step",
    // Framework settings dockyard predicts without.
    "sequence_parallel", "distributed_optimizer", "embedding_loss_pipeline_layers",
    "grouped_gemm", "permute_fusion", "router_fusion", "cuda_graphs", "capacity_padded",
    // Megatron-Core's TransformerEngine op fuser for the routed experts (run_settings.h).
    "te_op_fuser",
    // A whole iteration captured in one CUDA graph (Megatron-Bridge's full-iteration graphs): priced as
    // cuda_graphs (graph launches, kernels_model.h).
    "full_iteration_cuda_graph"};

namespace {

// "N256 TP2 PP8 VPP4 EP32": the degrees of a run or a memory run, for the tables.
template <class Run>
std::string Layout(const Run& r) {
  std::string s = fmt::format("N{} TP{} PP{}", r.world_size, r.tp, r.pp);
  if (r.vpp > 1) s += fmt::format(" VPP{}", r.vpp);
  if (r.cp > 1) s += fmt::format(" CP{}", r.cp);
  s += fmt::format(" EP{}", r.ep);
  if (r.etp > 1) s += fmt::format(" ETP{}", r.etp);
  return s;
}

constexpr double kGib = static_cast<double>(int64_t{1} << 30);

// The degrees of a run or a memory run under `convention`.
template <class Run>
ParallelDimsOptions DimsOf(const Run& r, Convention convention) {
  ParallelDimsOptions d;
  d.world_size = r.world_size;
  d.tp = r.tp;
  d.pp = r.pp;
  d.cp = r.cp;
  d.ep = r.ep;
  d.etp = r.etp;
  d.convention = convention;
  return d;
}

std::string Pct(double x) {
  return fmt::format("{:+.1f} %", 100.0 * x);
}

const std::map<std::string, std::string>& UnsupportedFeatureReasons() {
  static const std::map<std::string, std::string> reasons = {
      {"megatron_fsdp", "Megatron FSDP (parameters, gradients and optimizer sharded over DP, overlapped gathers)"},
      {"dualpipe", "DualPipe schedule"},
      {"dropless", "dropless routing (the routing the run saw is not given)"},
      {"custom_pp_layout", "custom pipeline layout (give /layout/pp_layout)"},
      {"node_limited_routing", "node-limited routing"},
      {"batch_ramp", "global batch ramped during the run"},
  };
  return reasons;
}

const std::map<std::string, std::string>& MemoryUnsupportedFeatureReasons() {
  static const std::map<std::string, std::string> reasons = {
      // Memory the model cannot place (docs/memory-model.md, "What is not in torch's allocator"):
      // saved tensors moved to host memory, or paged into a shared stash, between forward and backward.
      {"activation_offloading", "activation offloading (saved tensors moved to host memory)"},
      {"paged_stash", "paged activation stash"},
  };
  return reasons;
}

MeasuredKind ParseKind(const JsonView& v, const std::string& key) {
  const std::string s = v.String(key);
  if (s == "step_s") return MeasuredKind::kStepSeconds;
  if (s == "tokens_per_s_per_gpu") return MeasuredKind::kTokensPerSecondPerGpu;
  if (s == "tflops_per_gpu") return MeasuredKind::kTflopsPerGpu;
  v.Fail(key, fmt::format("unknown kind \"{}\"; kinds: step_s, tokens_per_s_per_gpu, tflops_per_gpu", s));
}

std::string OneOf(const JsonView& v, const std::string& key, const std::vector<std::string>& allowed) {
  const std::string s = v.String(key);
  if (std::find(allowed.begin(), allowed.end(), s) != allowed.end()) return s;
  std::string list;
  for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
  std::string message = fmt::format("unknown value \"{}\"; allowed: {}", s, list);
  if (auto m = DidYouMean(s, allowed)) message += fmt::format("; did you mean '{}'?", *m);
  v.Fail(key, message);
}

double Positive(const JsonView& v, const std::string& key) {
  const double x = v.Number(key);
  if (!(x > 0)) v.Fail(key, fmt::format("must be > 0, got {}", x));
  return x;
}

std::vector<std::string> StringList(const JsonView& v, const std::string& key) {
  std::vector<std::string> out;
  if (!v.Has(key)) return out;
  const Json& a = v.value().at(key);
  if (!a.is_array()) v.Fail(key, fmt::format("must be a list of strings, got {}", JsonValueText(a)));
  for (const Json& e : a) {
    if (!e.is_string()) v.Fail(key, fmt::format("must be a list of strings, got element {}", JsonValueText(e)));
    out.push_back(e.get<std::string>());
  }
  return out;
}

std::string Keys(const std::map<std::string, std::string>& m) {
  std::string s;
  for (const auto& [k, _] : m) s += (s.empty() ? "" : ", ") + k;
  return s;
}

// The run's model and cluster, each a key of the file's /models and /clusters.
// /model and /cluster of a run or a memory run; returns the model's config path ("" without one).
template <class Run>
std::string ReadRunModelAndCluster(const JsonView& v, const std::map<std::string, ClusterSpec>& clusters,
                                   const std::map<std::string, std::string>& model_files, Run& r) {
  r.model = v.String("model");
  auto mf = model_files.find(r.model);
  if (mf == model_files.end()) {
    std::string names;
    for (const auto& [k, _] : model_files) names += (names.empty() ? "" : ", ") + k;
    v.Fail("model", fmt::format("unknown model \"{}\"; models: {}", r.model, names));
  }
  r.cluster_name = v.String("cluster");
  auto c = clusters.find(r.cluster_name);
  if (c == clusters.end()) {
    std::string names;
    for (const auto& [k, _] : clusters) names += (names.empty() ? "" : ", ") + k;
    v.Fail("cluster", fmt::format("unknown cluster \"{}\"; clusters: {}", r.cluster_name, names));
  }
  r.cluster = c->second;
  return mf->second;
}

// /layout: the degrees of a run or a memory run (a run may also give its pp_layout).
template <class Run>
void ReadRunLayout(const JsonView& v, Run& r) {
  const JsonView l = v.Object("layout");
  if constexpr (std::is_same_v<Run, FidelityRun>) {
    l.RejectUnknownKeys({"world_size", "tp", "pp", "vpp", "cp", "ep", "etp", "pp_layout"});
    r.pp_layout = l.StringOr("pp_layout", "");
  } else {
    l.RejectUnknownKeys({"world_size", "tp", "pp", "vpp", "cp", "ep", "etp"});
  }
  r.world_size = l.Int("world_size");
  r.tp = l.Int("tp");
  r.pp = l.Int("pp");
  r.vpp = l.Int("vpp");
  r.cp = l.Int("cp");
  r.ep = l.Int("ep");
  r.etp = l.Int("etp");
}

// /layout (degrees) and /batch (gbs, mbs or null, seq) of a run.
void ReadRunLayoutAndBatch(const JsonView& v, FidelityRun& r) {
  ReadRunLayout(v, r);
  const JsonView b = v.Object("batch");
  b.RejectUnknownKeys({"gbs", "mbs", "seq"});
  r.gbs = b.Int("gbs");
  // "mbs": null where the source does not state it (the run is then unexpressible); absent is an error.
  if (!b.value().contains("mbs")) b.Int("mbs");
  if (b.Has("mbs")) r.mbs = b.Int("mbs");
  r.seq = b.Int("seq");
}

// The run's settings: precision, recompute, dispatcher and features (each a known name).
void ReadRunSettings(const JsonView& v, FidelityRun& r) {
  r.precision = OneOf(v, "precision", {"bf16", "fp8", "mxfp8"});
  const std::string rc = OneOf(v, "recompute", {"none", "selective", "full"});
  r.recompute = rc == "full" ? Recompute::kFull : rc == "selective" ? Recompute::kSelective : Recompute::kNone;
  r.recompute_modules = StringList(v, "recompute_modules");
  r.dispatcher = OneOf(v, "dispatcher", {"a2a", "deepep", "hybridep"});
  if (!v.value().contains("features")) v.String("features");  // required (may be empty): the missing-key error
  if (v.value().at("features").is_null()) v.Fail("features", "must be a list of strings (empty for none), got null");
  r.features = StringList(v, "features");
  for (size_t i = 0; i < r.features.size(); ++i) {
    const std::string& f = r.features[i];
    if (std::find(r.features.begin(), r.features.begin() + static_cast<std::ptrdiff_t>(i), f) != r.features.begin() + static_cast<std::ptrdiff_t>(i))
      v.Fail("features", fmt::format("\"{}\" is listed twice", f));
    if (std::find(kFidelityFeatures.begin(), kFidelityFeatures.end(), f) == kFidelityFeatures.end()) {
      std::string message = fmt::format("unknown feature \"{}\"", f);
      if (auto m = DidYouMean(f, kFidelityFeatures)) message += fmt::format("; did you mean '{}'?", *m);
      v.Fail("features", message + " (planner/calibration/fidelity.cc kFidelityFeatures lists them)");
    }
  }
}

// /measured: the kind, its value (GFLOP per token with tflops_per_gpu) and an optional [lo, hi].
FidelityMeasured ReadMeasured(const JsonView& v) {
  FidelityMeasured out;
  const JsonView m = v.Object("measured");
  m.RejectUnknownKeys({"kind", "value", "gflop_per_token", "range", "noise"});
  out.kind = ParseKind(m, "kind");
  out.value = Positive(m, "value");
  // What a training step can be: a step of 1 ms to 10 days, 1e-3 to 1e8 tokens/s per GPU, or
  // 1e-3 to 1e5 TFLOP/s per GPU (beyond that a unit slipped).
  const double lo = 1e-3;
  const double hi = out.kind == MeasuredKind::kStepSeconds ? 864000.0 : out.kind == MeasuredKind::kTokensPerSecondPerGpu ? 1e8 : 1e5;
  if (out.value < lo || out.value > hi) {
    m.Fail("value", fmt::format("must be in [{}, {}] for kind {}, got {}", lo, hi, m.String("kind"), out.value));
  }
  if (m.value().contains("noise")) {
    if (!m.value().at("noise").is_number()) m.Fail("noise", fmt::format("must be a number in (0, 1], got {}", m.value().at("noise").dump()));
    out.noise = Positive(m, "noise");
    if (out.noise > 1 || out.noise < 1e-3) {
      m.Fail("noise", fmt::format("is the sd of ln(value), in [0.001, 1] (0.03: 3 % spread), got {}", out.noise));
    }
  }
  if (out.kind == MeasuredKind::kTflopsPerGpu) {
    out.gflop_per_token = Positive(m, "gflop_per_token");
  } else if (m.Has("gflop_per_token")) {
    m.Fail("gflop_per_token", "is only read with kind tflops_per_gpu");
  }
  if (m.Has("range")) {
    const Json& a = m.value().at("range");
    if (!a.is_array() || a.size() != 2 || !a[0].is_number() || !a[1].is_number()) {
      m.Fail("range", fmt::format("must be [lo, hi], got {}", JsonValueText(a)));
    }
    const double lo = a[0].get<double>(), hi = a[1].get<double>();
    if (!(lo > 0) || !(hi >= lo) || !std::isfinite(hi)) m.Fail("range", fmt::format("needs 0 < lo <= hi, got [{}, {}]", lo, hi));
    out.range = {lo, hi};
  }
  return out;
}

// /measured_peak (optional): {"gib", "kind", "source"}; a peak torch's allocator measured lies
// within the device's capacity (`capacity_gib`, the cluster's memory_gib).
std::optional<MeasuredPeak> ReadMeasuredPeak(const JsonView& v, const std::map<std::string, std::string>& sources, double capacity_gib) {
  if (!v.Has("measured_peak")) return std::nullopt;
  const JsonView m = v.Object("measured_peak");
  m.RejectUnknownKeys({"gib", "kind", "source"});
  MeasuredPeak out;
  out.gib = Positive(m, "gib");
  if (out.gib > capacity_gib) {
    m.Fail("gib", fmt::format("{} GiB is more than the device holds ({} GiB, the cluster's memory_gib): a peak of torch's allocator "
                              "lies within it",
                              out.gib, capacity_gib));
  }
  out.kind = OneOf(m, "kind", {"max_allocated", "max_reserved"});
  out.source = m.String("source");
  if (!sources.count(out.source)) m.Fail("source", fmt::format("unknown source \"{}\"; sources: {}", out.source, Keys(sources)));
  return out;
}

// /phases (optional): measured phase times.
std::vector<FidelityRun::Phase> ReadRunPhases(const JsonView& v) {
  std::vector<FidelityRun::Phase> out;
  if (!v.Has("phases")) return out;
  const Json& phases = v.value().at("phases");
  if (!phases.is_array()) v.Fail("phases", fmt::format("must be a list of phases, got {}", JsonValueText(phases)));
  for (size_t i = 0; i < phases.size(); ++i) {
    const JsonView p(&phases[i], v.file(), fmt::format("{}/phases/{}", v.pointer(), i));
    p.RejectUnknownKeys({"name", "layer_kind", "direction", "time_us"});
    FidelityRun::Phase ph{p.String("name"), OneOf(p, "layer_kind", {"moe", "dense"}), OneOf(p, "direction", {"forward", "backward"}),
                          p.Number("time_us")};
    if (!(ph.time_us >= 0)) p.Fail("time_us", fmt::format("must be a time >= 0, got {}", ph.time_us));
    out.push_back(ph);
  }
  return out;
}

FidelityRun ParseRun(const JsonView& v, const std::map<std::string, ClusterSpec>& clusters,
                     const std::map<std::string, std::string>& model_files, const std::map<std::string, std::string>& sources) {
  v.RejectUnknownKeys({"id", "model", "cluster", "layout", "batch", "precision", "recompute", "recompute_modules", "dispatcher", "features",
                       "measured", "group", "weight", "source", "notes", "phases", "measured_peak", "megatron_core",
                       "ddp_bucket_size", "moe_flex_dispatcher_num_sms"});
  FidelityRun r;
  r.id = v.String("id");
  r.model_file = ReadRunModelAndCluster(v, clusters, model_files, r);
  ReadRunLayoutAndBatch(v, r);
  ReadRunSettings(v, r);
  r.measured = ReadMeasured(v);
  r.group = v.String("group");
  if (r.group.find_first_not_of(" \t\r\n") == std::string::npos) v.Fail("group", "must not be empty or blank");
  r.weight = Positive(v, "weight");
  if (r.weight > 1) v.Fail("weight", fmt::format("must be in (0, 1], got {}", r.weight));
  r.source = v.String("source");
  if (!sources.count(r.source)) v.Fail("source", fmt::format("unknown source \"{}\"; sources: {}", r.source, Keys(sources)));
  r.notes = v.StringOr("notes", "");
  r.phases = ReadRunPhases(v);
  r.measured_peak = ReadMeasuredPeak(v, sources, r.cluster.memory_gib);
  r.megatron_core = v.StringOr("megatron_core", "");
  if (v.Has("ddp_bucket_size")) {
    r.ddp_bucket_size = v.Int("ddp_bucket_size");
    if (r.ddp_bucket_size < 1 || r.ddp_bucket_size > (int64_t{1} << 40)) {
      v.Fail("ddp_bucket_size", fmt::format("must be a number of parameters in [1, 2^40], got {}", r.ddp_bucket_size));
    }
  }
  if (v.Has("moe_flex_dispatcher_num_sms")) {
    r.moe_flex_dispatcher_num_sms = v.Int("moe_flex_dispatcher_num_sms");
    if (r.moe_flex_dispatcher_num_sms < 1 || r.moe_flex_dispatcher_num_sms >= r.cluster.sm_count) {
      v.Fail("moe_flex_dispatcher_num_sms", fmt::format("must be a number of SMs in [1, {}] ({}'s GPU has {}), got {}", r.cluster.sm_count - 1,
                                                        r.cluster.name, r.cluster.sm_count, r.moe_flex_dispatcher_num_sms));
    }
  }
  ValidateMegatronCoreVersion(r.megatron_core, v.Where("megatron_core"));

  // Degrees on their own (world, divisibility), then GBS against DP·MBS.
  std::string error;
  if (!TryBuildParallelDims(FidelityDims(r), nullptr, &error)) v.Fail("layout", error);
  const int64_t dp = r.world_size / (r.tp * r.pp * r.cp);
  if (r.mbs && r.gbs % (dp * *r.mbs) != 0) {
    v.Object("batch").Fail("gbs", fmt::format("gbs ({}) must be a multiple of DP ({}) x MBS ({})", r.gbs, dp, *r.mbs));
  }
  r.unsupported = UnsupportedReasons(r);
  return r;
}

}  // namespace

const char* MeasuredKindName(MeasuredKind k) {
  switch (k) {
    case MeasuredKind::kStepSeconds:
      return "step_s";
    case MeasuredKind::kTokensPerSecondPerGpu:
      return "tokens_per_s_per_gpu";
    case MeasuredKind::kTflopsPerGpu:
      return "tflops_per_gpu";
  }
  return "?";
}

std::vector<std::string> UnsupportedReasons(const FidelityRun& r) {
  std::vector<std::string> out;
  if (r.model_file.empty()) out.push_back("no model config in the project");
  if (!r.mbs) out.push_back("MBS not stated");
  for (const auto& f : r.features) {
    auto it = UnsupportedFeatureReasons().find(f);
    if (it != UnsupportedFeatureReasons().end()) out.push_back(it->second);
  }
  return out;
}

std::vector<std::string> MemoryUnsupportedReasons(const FidelityRun& r) {
  std::vector<std::string> out;
  for (const auto& f : r.features) {
    auto it = MemoryUnsupportedFeatureReasons().find(f);
    if (it != MemoryUnsupportedFeatureReasons().end()) out.push_back(it->second);
  }
  return out;
}

double MeasuredStepSeconds(const FidelityRun& r) {
  const double tokens = static_cast<double>(r.gbs) * static_cast<double>(r.seq);
  const double n = static_cast<double>(r.world_size);
  switch (r.measured.kind) {
    case MeasuredKind::kStepSeconds:
      return r.measured.value;
    case MeasuredKind::kTokensPerSecondPerGpu:
      return tokens / (n * r.measured.value);
    case MeasuredKind::kTflopsPerGpu:
      return tokens * r.measured.gflop_per_token * 1e9 / (n * r.measured.value * 1e12);
  }
  return 0;
}

double TokensPerSecondPerGpu(const FidelityRun& r, double step_s) {
  return static_cast<double>(r.gbs) * static_cast<double>(r.seq) / (static_cast<double>(r.world_size) * step_s);
}

ParallelDimsOptions FidelityDims(const FidelityRun& r) {
  return DimsOf(r, Convention::kMegatron);
}

Machine FidelityMachine(const FidelityRun& run) {
  return MachineOf(run.cluster, 0);
}

TrainingConfig FidelityTraining(const FidelityRun& r) {
  if (!r.mbs) throw Error(fmt::format("run {}: /batch/mbs is not stated", r.id));
  TrainingConfig t;
  t.seq_len = r.seq;
  t.micro_batch_size = *r.mbs;
  const int64_t dp = r.world_size / (r.tp * r.pp * r.cp);
  t.num_microbatches = r.gbs / (dp * *r.mbs);
  t.recompute = r.recompute;
  // FP8 GEMMs (precision.h; "fp8" rows' recipes are per-tensor current scaling, "mxfp8" rows'
  // TransformerEngine's MXFP8BlockScaling) and MTP modules.
  t.precision = r.precision;
  NormalizeMxfp8Precision(&t, "run " + r.id + " /");
  if (std::find(r.features.begin(), r.features.end(), "mtp") != r.features.end()) t.mtp_layers = 1;
  // Megatron's --recompute-modules; DeepSeek-V3's report names its norm recomputation "rmsnorm".
  for (const std::string& module : r.recompute_modules) t.recompute_modules.push_back(module == "rmsnorm" ? "layernorm" : module);
  t.dispatcher = r.dispatcher == "a2a" ? Dispatcher::kAllToAll : Dispatcher::kDeepEp;  // Megatron flex: DeepEP / HybridEP
  // The run's flex backend as Megatron names it (--moe-flex-dispatcher-backend; dispatcher.h FlexBackend).
  if (r.dispatcher == "hybridep") t.moe_flex_dispatcher_backend = FlexBackend::kHybridEp;
  t.run.vpp = r.vpp;                                                                   // interleaved 1F1B (pipeline_schedule.h)
  auto has = [&](const char* f) { return std::find(r.features.begin(), r.features.end(), f) != r.features.end(); };
  t.run.overlap_grad_reduce = has("overlap_grad_reduce");
  t.run.overlap_param_gather = has("overlap_param_gather") && t.run.overlap_grad_reduce;
  // --overlap-param-gather-with-optimizer-step (param_gather.h) and the DDP bucket (/ddp_bucket_size;
  // 0 = Megatron-LM's default).
  t.run.overlap_param_gather_with_optimizer_step = has("overlap_param_gather_with_optimizer_step");
  t.run.ddp_bucket_size = r.ddp_bucket_size;
  t.run.moe_flex_dispatcher_num_sms = r.moe_flex_dispatcher_num_sms;  // --moe-flex-dispatcher-num-sms (0: the backend's default)
  t.run.overlap_moe_ep_comm = has("ep_overlap");  // --overlap-moe-expert-parallel-comm
  t.run.delay_wgrad_compute = has("delay_wgrad_compute");  // --delay-wgrad-compute (needs ep_overlap)
  t.run.tp_comm_overlap = has("tp_comm_overlap");  // --tp-comm-overlap (TransformerEngine userbuffers)
  if (has("muon")) t.optimizer = Optimizer::kMuon;  // --optimizer muon (muon.h)
  t.fp8_dot_product_attention = has("fp8_attention");  // TransformerEngine's FP8 DPA (compute.flash.fp8_speedup)
  t.run.cuda_graphs = has("cuda_graphs") || has("full_iteration_cuda_graph");  // graph launches (the kernel-level compute model)
  // No host synchronization in the MoE layers (kernels_model.h MoeSyncIdleUs): the whole iteration
  // in one graph (--full-iteration-cuda-graph), or the expert inputs padded to capacity
  // (--moe-pad-expert-input-to-capacity).
  t.run.full_iteration_cuda_graph = has("full_iteration_cuda_graph");
  // Megatron-LM asserts --no-check-for-nan-in-loss-and-grad with --cuda-graph-impl full_iteration.
  if (t.run.full_iteration_cuda_graph) t.run.check_for_nan_in_grad = false;
  t.run.moe_pad_expert_input_to_capacity = has("capacity_padded");
  t.run.use_transformer_engine_op_fuser = has("te_op_fuser");  // --use-transformer-engine-op-fuser
  t.run.pipeline_layout = r.pp_layout;  // Megatron --pipeline-model-parallel-layout (pipeline_layout.h)
  t.run.megatron_core_version = r.megatron_core;  // the saved-tensor rules of its release (workload.h SavedTensorRules)
  return t;
}

namespace {

// /clusters: each a preset name or an inline cluster, with its source.
std::map<std::string, ClusterSpec> ReadClusters(const JsonView& top) {
  std::map<std::string, ClusterSpec> clusters;
  const JsonView cl = top.Object("clusters");
  for (const auto& [k, _] : cl.value().items()) {
    const JsonView c = cl.Object(k);
    c.RejectUnknownKeys({"preset", "cluster", "source"});
    c.String("source");
    if (c.Has("preset") == c.Has("cluster")) c.Fail("preset", "give exactly one of \"preset\" and \"cluster\"");
    try {
      clusters[k] = c.Has("preset") ? ClusterPreset(c.String("preset")) : ClusterFromJson(c.value().at("cluster"), c.Where("cluster"));
    } catch (const Error& e) {
      c.Fail(c.Has("preset") ? "preset" : "cluster", e.what());
    }
  }
  return clusters;
}

// /models: each model's config file (relative to base_dir unless absolute; null = no config),
// loaded into set.models. Returns the path per model key ("" without a config).
std::map<std::string, std::string> ReadModels(const JsonView& top, const std::string& base_dir, FidelitySet& set) {
  std::map<std::string, std::string> model_files;
  const JsonView ms = top.Object("models");
  for (const auto& [k, _] : ms.value().items()) {
    const JsonView m = ms.Object(k);
    m.RejectUnknownKeys({"file", "source"});
    m.String("source");
    if (!m.value().contains("file")) m.String("file");  // the missing-key error; null = no config
    if (!m.Has("file")) {
      model_files[k] = "";
      continue;
    }
    const std::string file_name = m.String("file");  // relative to the runs file, unless absolute
    const std::string path = base_dir.empty() || file_name[0] == '/' ? file_name : base_dir + "/" + file_name;
    try {
      set.models.emplace(k, LoadModel(path));
    } catch (const Error& e) {
      m.Fail("file", e.what());
    }
    model_files[k] = path;
  }
  return model_files;
}

// Calls parse(view) on each element of the list json[key] (`required`: an absent key is an error;
// otherwise none), an error in it prefixed "{label} {id}: " (id: the element's "id", else "#i").
template <class Parse>
void ForEachListed(const Json& json, const JsonView& top, const std::string& file, const char* key, const char* label, bool required,
                   Parse&& parse) {
  if (!required && !json.contains(key)) return;
  const Json& list = json.contains(key) ? json.at(key) : Json();
  if (!list.is_array()) top.Fail(key, fmt::format("must be a list, got {}", JsonValueText(list)));
  for (size_t i = 0; i < list.size(); ++i) {
    const JsonView v(&list[i], file, fmt::format("/{}/{}", key, i));
    const bool object = list[i].is_object();
    const std::string id =
        object && list[i].contains("id") && list[i]["id"].is_string() ? list[i]["id"].get<std::string>() : fmt::format("#{}", i);
    try {
      if (!object) top.Fail(key, fmt::format("element {} must be an object", i));
      parse(v);
    } catch (const Error& e) {
      throw Error(fmt::format("{} {}: {}", label, id, e.what()));
    }
  }
}

// /runs: each run parsed, its id unique, its layout valid for its model; errors name the run.
void ReadRuns(const Json& json, const JsonView& top, const std::map<std::string, ClusterSpec>& clusters,
              const std::map<std::string, std::string>& model_files, std::set<std::string>& ids, FidelitySet& set) {
  ForEachListed(json, top, set.file, "runs", "run", true, [&](const JsonView& v) {
    FidelityRun r = ParseRun(v, clusters, model_files, set.sources);
    if (!ids.insert(r.id).second) v.Fail("id", fmt::format("duplicate id \"{}\"", r.id));
    auto model = set.models.find(r.model);
    if (model != set.models.end()) {
      try {
        ValidateDimsForModel(ParallelDims::Build(FidelityDims(r)), model->second);
      } catch (const Error& e) {
        v.Fail("layout", e.what());
      }
    }
    set.runs.push_back(std::move(r));
  });
}

// /memory_runs/i: a run known by its memory (FidelityMemoryRun).
FidelityMemoryRun ParseMemoryRun(const JsonView& v, const std::map<std::string, ClusterSpec>& clusters,
                                 const std::map<std::string, std::string>& model_files, const std::map<std::string, std::string>& sources) {
  v.RejectUnknownKeys({"id", "model", "cluster", "convention", "layout", "batch", "precision", "recompute", "recompute_modules",
                       "selective_ac_option", "megatron_core", "measured_peak", "oom", "source", "notes"});
  FidelityMemoryRun r;
  r.id = v.String("id");
  if (ReadRunModelAndCluster(v, clusters, model_files, r).empty()) {
    v.Fail("model", fmt::format("\"{}\" has no config in the set: a memory run is predicted or it is not listed", r.model));
  }
  r.convention = ParseConvention(v.String("convention"), v.Where("convention"));
  ReadRunLayout(v, r);
  const JsonView b = v.Object("batch");
  b.RejectUnknownKeys({"mbs", "seq", "num_microbatches"});
  r.mbs = b.Int("mbs");
  r.seq = b.Int("seq");
  if (b.Has("num_microbatches")) r.num_microbatches = b.Int("num_microbatches");
  r.precision = OneOf(v, "precision", {"bf16", "fp8"});
  const std::string rc = OneOf(v, "recompute", {"none", "selective", "full"});
  r.recompute = rc == "full" ? Recompute::kFull : rc == "selective" ? Recompute::kSelective : Recompute::kNone;
  r.recompute_modules = StringList(v, "recompute_modules");
  r.selective_ac_option = v.StringOr("selective_ac_option", "");
  r.megatron_core = v.StringOr("megatron_core", "");
  ValidateMegatronCoreVersion(r.megatron_core, v.Where("megatron_core"));
  if (!r.megatron_core.empty() && r.convention != Convention::kMegatron) {
    v.Fail("megatron_core", fmt::format("names a Megatron-Core release; this run's convention is {}", ConventionName(r.convention)));
  }
  r.measured_peak = ReadMeasuredPeak(v, sources, r.cluster.memory_gib);
  r.oom = v.Has("oom") && v.Bool("oom");
  if (r.measured_peak.has_value() == r.oom) v.Fail("oom", "give exactly one of \"measured_peak\" and \"oom\": true");
  r.source = v.String("source");
  if (!sources.count(r.source)) v.Fail("source", fmt::format("unknown source \"{}\"; sources: {}", r.source, Keys(sources)));
  r.notes = v.StringOr("notes", "");
  return r;
}

// /memory_runs (optional): each parsed, its id unique among runs and components, its plan built.
void ReadMemoryRuns(const Json& json, const JsonView& top, const std::map<std::string, ClusterSpec>& clusters,
                    const std::map<std::string, std::string>& model_files, std::set<std::string>& ids, FidelitySet& set) {
  ForEachListed(json, top, set.file, "memory_runs", "memory run", false, [&](const JsonView& v) {
    FidelityMemoryRun r = ParseMemoryRun(v, clusters, model_files, set.sources);
    if (!ids.insert(r.id).second) v.Fail("id", fmt::format("duplicate id \"{}\"", r.id));
    try {
      MemoryRunPlan(r, set.models.at(r.model));
    } catch (const Error& e) {
      throw Error(fmt::format("{}: its plan cannot be built: {}", v.Where(), e.what()));
    }
    set.memory_runs.push_back(std::move(r));
  });
}

// /components/i: a measured component (kind, hardware, params, one value or several, unit,
// source); its id unique among runs and components.
FidelityComponent ParseComponent(const JsonView& v, std::set<std::string>& ids, const std::map<std::string, std::string>& sources) {
  v.RejectUnknownKeys({"id", "kind", "hardware", "params", "value", "values", "unit", "source", "notes"});
  FidelityComponent c;
  c.id = v.String("id");
  if (!ids.insert(c.id).second) v.Fail("id", fmt::format("duplicate id \"{}\"", c.id));
  c.kind = v.String("kind");
  c.hardware = v.String("hardware");
  c.params = v.Object("params").value();
  if (v.Has("value") == v.Has("values")) v.Fail("value", "give exactly one of \"value\" and \"values\"");
  if (v.Has("value")) {
    c.values.push_back(Positive(v, "value"));
  } else {
    const Json& a = v.value().at("values");
    if (!a.is_array() || a.empty()) v.Fail("values", fmt::format("must be a non-empty list of numbers, got {}", JsonValueText(a)));
    for (const Json& e : a) {
      if (!e.is_number() || !(e.get<double>() > 0))
        v.Fail("values", fmt::format("every value must be a number > 0, got {}", JsonValueText(e)));
      c.values.push_back(e.get<double>());
    }
  }
  c.unit = v.String("unit");
  c.source = v.String("source");
  if (!sources.count(c.source)) v.Fail("source", fmt::format("unknown source \"{}\"; sources: {}", c.source, Keys(sources)));
  c.notes = v.StringOr("notes", "");
  return c;
}

// /components (optional: a user's runs file may hold none): every component parsed; errors name
// the component.
void ReadComponents(const Json& json, const JsonView& top, std::set<std::string>& ids, FidelitySet& set) {
  ForEachListed(json, top, set.file, "components", "component", false,
                [&](const JsonView& v) { set.components.push_back(ParseComponent(v, ids, set.sources)); });
}

}  // namespace

FidelitySet FidelitySetFromJson(const Json& json, const std::string& file, const std::string& base_dir) {
  FidelitySet set;
  set.file = file;
  JsonView top(&json, file, "");
  top.RejectUnknownKeys({"version", "description", "clusters", "models", "sources", "runs", "memory_runs", "components"});
  const int64_t version = top.Int("version");
  if (version != 1) top.Fail("version", fmt::format("unsupported version {}; this dockyard reads version 1", version));

  const JsonView sources = top.Object("sources");
  for (const auto& [k, val] : sources.value().items()) set.sources[k] = sources.String(k);
  const std::map<std::string, ClusterSpec> clusters = ReadClusters(top);
  const std::map<std::string, std::string> model_files = ReadModels(top, base_dir, set);
  std::set<std::string> ids;  // run and component ids share one namespace
  ReadRuns(json, top, clusters, model_files, ids, set);
  ReadMemoryRuns(json, top, clusters, model_files, ids, set);
  ReadComponents(json, top, ids, set);
  return set;
}

FidelitySet LoadFidelitySet(const std::string& path) {
  const size_t slash = path.rfind('/');
  return FidelitySetFromJson(ReadJsonFile(path), path, slash == std::string::npos ? "." : path.substr(0, slash));
}

PreparedRun PrepareRun(const FidelityRun& run, const ModelSpec& model) {
  PreparedRun p{BuildPlan(model, FidelityDims(run), FidelityTraining(run), FidelityMachine(run)), {}, 0, 0};
  const MemoryReport memory = ComputeMemory(p.plan);
  p.peak_gib = static_cast<double>(memory.worst_peak_bytes) / kGib;
  p.allocator_peak_gib = static_cast<double>(memory.worst_allocator_peak_bytes) / kGib;
  RoutingSpec routing = ParseRoutingSpec("uniform");
  routing.seed = 0;
  const int64_t layers = RoutingLayersToSample(p.plan.model, routing, std::nullopt, kDefaultRoutingLayers, "routing layers");
  p.routing = SampleRoutingForPlan(p.plan, routing, layers);
  return p;
}

std::string MarkdownCell(const std::string& text) {
  std::string o;
  for (char ch : text) {
    if (ch == '|' || ch == '\\') {
      o += '\\';
      o += ch;
    } else if (ch == '\n' || ch == '\r') {
      o += ' ';
    } else {
      o += ch;
    }
  }
  return o;
}

bool PeakFitsCluster(double peak_gib, const ClusterSpec& cluster) {
  return !OverBudget(peak_gib * kGib, cluster.memory_gib, kDefaultMemoryReserveGib);
}

FidelityPrediction PredictRun(const FidelityRun& run, const ModelSpec& model, ComputeModel compute_model) {
  FidelityPrediction p;
  p.id = run.id;
  p.approximate = !run.unsupported.empty();
  const PreparedRun prepared = PrepareRun(run, model);
  p.peak_gib = prepared.peak_gib;
  p.allocator_peak_gib = prepared.allocator_peak_gib;
  const CostBreakdown cost = SimulateStep(prepared.plan, run.cluster, prepared.routing, compute_model);
  p.measured_s = MeasuredStepSeconds(run);
  p.predicted_s = cost.step_time_us * 1e-6;
  p.error = p.predicted_s / p.measured_s - 1.0;
  p.dominant_phase = cost.dominant_phase;
  for (size_t i = 0; i < cost.critical_path.size(); ++i)
    if (cost.critical_path[i] == PhaseName(Phase::kDispatch) || cost.critical_path[i] == PhaseName(Phase::kCombine))
      p.a2a_share += cost.critical_path_us[i] / cost.step_time_us;
  return p;
}

namespace {

// Per group (in order of first appearance): error and the order of pairs whose measured
// tokens/s/GPU differ by more than `order_threshold`.
std::vector<FidelityGroupSummary> GroupSummaries(const std::vector<FidelityPrediction>& rows,
                                                 const std::map<std::string, const FidelityRun*>& by_id, double order_threshold) {
  std::vector<std::string> group_order;
  std::map<std::string, std::vector<const FidelityPrediction*>> groups;
  for (const FidelityPrediction& p : rows) {
    const std::string& g = by_id.at(p.id)->group;
    if (!groups.count(g)) group_order.push_back(g);
    groups[g].push_back(&p);
  }
  std::vector<FidelityGroupSummary> out;
  for (const std::string& g : group_order) {
    FidelityGroupSummary s;
    s.group = g;
    const auto& ps = groups[g];
    s.rows = static_cast<int64_t>(ps.size());
    for (const FidelityPrediction* p : ps) {
      s.mean_abs_error += std::fabs(p->error) / static_cast<double>(ps.size());
      s.max_abs_error = std::max(s.max_abs_error, std::fabs(p->error));
    }
    for (size_t i = 0; i < ps.size(); ++i) {
      for (size_t j = i + 1; j < ps.size(); ++j) {
        const FidelityRun& a = *by_id.at(ps[i]->id);
        const FidelityRun& b = *by_id.at(ps[j]->id);
        const double ma = TokensPerSecondPerGpu(a, ps[i]->measured_s), mb = TokensPerSecondPerGpu(b, ps[j]->measured_s);
        if (std::max(ma, mb) / std::min(ma, mb) - 1.0 <= order_threshold) continue;
        const double pa = TokensPerSecondPerGpu(a, ps[i]->predicted_s), pb = TokensPerSecondPerGpu(b, ps[j]->predicted_s);
        ++s.ordered_pairs;
        if ((ma > mb) == (pa > pb)) {
          ++s.concordant_pairs;
        } else {
          s.discordant.push_back(ma > mb ? fmt::format("{} > {}", a.id, b.id) : fmt::format("{} > {}", b.id, a.id));
        }
      }
    }
    out.push_back(s);
  }
  return out;
}

}  // namespace

Plan MemoryRunPlan(const FidelityMemoryRun& r, const ModelSpec& model) {
  const ParallelDimsOptions d = DimsOf(r, r.convention);
  TrainingConfig t;
  t.seq_len = r.seq;
  t.micro_batch_size = r.mbs;
  t.num_microbatches = r.num_microbatches;
  t.recompute = r.recompute;
  t.recompute_modules = r.recompute_modules;
  if (!r.selective_ac_option.empty()) t.selective_ac_option = r.selective_ac_option;
  t.precision = r.precision;
  t.run.vpp = r.vpp;
  t.run.megatron_core_version = r.megatron_core;
  return BuildPlan(model, d, t, MachineOf(r.cluster, 0));
}

namespace {

// A row of the memory table: the peak against the capacity, with the reserve the CLI holds back.
FidelityMemoryRow MemoryRow(const std::string& id, const std::string& model, const std::string& cluster_name, const ClusterSpec& cluster,
                            std::string layout, std::string batch, double peak_gib, double allocator_peak_gib,
                            const std::optional<MeasuredPeak>& measured) {
  FidelityMemoryRow row;
  row.id = id;
  row.model = model;
  row.cluster = cluster_name;
  row.layout = std::move(layout);
  row.batch = std::move(batch);
  row.peak_gib = peak_gib;
  row.allocator_peak_gib = allocator_peak_gib;
  row.capacity_gib = cluster.memory_gib;
  row.fits = PeakFitsCluster(peak_gib, cluster);
  row.measured = measured;
  if (measured) row.error = allocator_peak_gib / measured->gib - 1.0;
  return row;
}

}  // namespace

FidelityMemoryRow PredictMemoryRun(const FidelityMemoryRun& r, const ModelSpec& model) {
  const MemoryReport memory = ComputeMemory(MemoryRunPlan(r, model));
  FidelityMemoryRow row =
      MemoryRow(r.id, r.model, r.cluster_name, r.cluster, Layout(r), fmt::format("-/{}/{} ({})", r.mbs, r.seq, ConventionName(r.convention)),
                static_cast<double>(memory.worst_peak_bytes) / kGib, static_cast<double>(memory.worst_allocator_peak_bytes) / kGib,
                r.measured_peak);
  row.oom_reported = r.oom;
  return row;
}

namespace {

// The memory table's rows (every predicted run, then every memory run) and its summary.
void AddMemoryRows(const FidelitySet& set, const std::map<std::string, const FidelityRun*>& by_id, FidelityReport& rep) {
  for (const auto* list : {&rep.rows, &rep.approximate}) {
    for (const FidelityPrediction& p : *list) {
      const FidelityRun& r = *by_id.at(p.id);
      rep.memory.push_back(MemoryRow(r.id, r.model, r.cluster_name, r.cluster, Layout(r),
                                     fmt::format("{}/{}/{}", r.gbs, r.mbs ? std::to_string(*r.mbs) : "?", r.seq), p.peak_gib,
                                     p.allocator_peak_gib, r.measured_peak));
      rep.memory.back().approximate = p.approximate || !MemoryUnsupportedReasons(r).empty();
    }
  }
  for (const FidelityMemoryRun& r : set.memory_runs) rep.memory.push_back(PredictMemoryRun(r, set.models.at(r.model)));
  double sum = 0;
  for (const FidelityMemoryRow& m : rep.memory) {
    if (m.oom_reported) {
      ++rep.oom_reported;
      rep.oom_over += m.fits ? 0 : 1;
    } else if (!m.approximate) {
      ++rep.ran;
      rep.ran_fit += m.fits ? 1 : 0;
    }
    if (!m.measured) continue;
    ++rep.measured_peaks;
    sum += std::fabs(m.error);
    if (std::fabs(m.error) > rep.peak_max_abs_error || rep.peak_max_abs_error_id.empty()) {
      rep.peak_max_abs_error = std::fabs(m.error);
      rep.peak_max_abs_error_id = m.id;
    }
  }
  if (rep.measured_peaks > 0) rep.peak_mean_abs_error = sum / static_cast<double>(rep.measured_peaks);
}

}  // namespace

FidelityReport RunFidelity(const FidelitySet& set, double order_threshold, ComputeModel compute_model) {
  FidelityReport rep;
  std::map<std::string, const FidelityRun*> by_id;
  for (const FidelityRun& r : set.runs) {
    by_id[r.id] = &r;
    auto model = set.models.find(r.model);
    const bool predictable = model != set.models.end() && r.mbs.has_value();
    if (!predictable) {
      std::string why;
      for (const auto& u : r.unsupported) why += (why.empty() ? "" : "; ") + u;
      rep.not_predicted.push_back({r.id, why});
      continue;
    }
    try {
      FidelityPrediction p = PredictRun(r, model->second, compute_model);
      (p.approximate ? rep.approximate : rep.rows).push_back(p);
    } catch (const Error& e) {
      if (r.unsupported.empty()) throw Error(fmt::format("run {}: {}", r.id, e.what()));
      rep.not_predicted.push_back({r.id, e.what()});
    }
  }
  double sum = 0, wsum = 0, w = 0;
  for (const FidelityPrediction& p : rep.rows) {
    const FidelityRun& r = *by_id.at(p.id);
    const double e = std::fabs(p.error);
    sum += e;
    wsum += r.weight * e;
    w += r.weight;
    if (e > rep.max_abs_error || rep.max_abs_error_id.empty()) {
      rep.max_abs_error = e;
      rep.max_abs_error_id = p.id;
    }
  }
  if (!rep.rows.empty()) {
    rep.mean_abs_error = sum / static_cast<double>(rep.rows.size());
    rep.weighted_mean_abs_error = wsum / w;
  }
  rep.groups = GroupSummaries(rep.rows, by_id, order_threshold);
  rep.approximate_groups = GroupSummaries(rep.approximate, by_id, order_threshold);
  AddMemoryRows(set, by_id, rep);
  return rep;
}

namespace {

std::string Batch(const FidelityRun& r) {
  return fmt::format("{}/{}/{}", r.gbs, r.mbs ? std::to_string(*r.mbs) : "?", r.seq);
}

std::string PredictionTable(const std::vector<FidelityPrediction>& rows, const std::map<std::string, const FidelityRun*>& by_id,
                            bool reasons) {
  std::string out =
      reasons
          ? "| id | model | cluster | layout | GBS/MBS/seq | measured s | predicted s | error | dominant phase | peak GiB | predicted "
            "without |\n"
            "|---|---|---|---|---|---|---|---|---|---|---|\n"
          : "| id | model | cluster | layout | GBS/MBS/seq | recompute | measured s | predicted s | error | dominant phase | peak GiB |\n"
            "|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const FidelityPrediction& p : rows) {
    const FidelityRun& r = *by_id.at(p.id);
    std::string tail;
    if (reasons) {
      for (const auto& u : r.unsupported) tail += (tail.empty() ? "" : "; ") + u;
    } else {
      tail = RecomputeName(r.recompute);
    }
    if (reasons) {
      out += fmt::format("| {} | {} | {} | {} | {} | {:.3f} | {:.3f} | {} | {} | {:.1f} | {} |\n", p.id, r.model, r.cluster_name, Layout(r),
                         Batch(r), p.measured_s, p.predicted_s, Pct(p.error), p.dominant_phase, p.peak_gib, tail);
    } else {
      out += fmt::format("| {} | {} | {} | {} | {} | {} | {:.3f} | {:.3f} | {} | {} | {:.1f} |\n", p.id, r.model, r.cluster_name, Layout(r),
                         Batch(r), tail, p.measured_s, p.predicted_s, Pct(p.error), p.dominant_phase, p.peak_gib);
    }
  }
  return out;
}

// Every predicted run's worst peak against its device, measured peaks and reported OOMs beside.
std::string MemoryTable(const FidelityReport& rep) {
  std::string out = fmt::format(
      "\n### Memory: each run's predicted worst peak against its device ({} rows)\n\n"
      "Fits: the peak plus the {:.0f} GiB reserve (CUDA context, NCCL buffers, fragmentation: outside torch's allocator) within "
      "the capacity `nvidia-smi` reports. A measured peak (torch's allocator) is held against the peak less DeepEP's / HybridEP's "
      "buffers, which DeepEP allocates outside it.\n\n"
      "| id | model | cluster | layout | GBS/MBS/seq | peak GiB | capacity GiB | fits | measured GiB | kind | error | source |\n"
      "|---|---|---|---|---|---|---|---|---|---|---|---|\n",
      rep.memory.size(), kDefaultMemoryReserveGib);
  for (const FidelityMemoryRow& m : rep.memory) {
    const std::string fits = m.oom_reported  ? (m.fits ? "FITS (reported OOM)" : "over (reported OOM)")
                             : m.approximate ? (m.fits ? "yes (approximation)" : "no (approximation: predicted without a feature)")
                                             : (m.fits ? "yes" : "NO (ran)");
    out += fmt::format("| {} | {} | {} | {} | {} | {:.1f} | {:.1f} | {} | {} | {} | {} | {} |\n", m.id, m.model, m.cluster, m.layout,
                       m.batch, m.peak_gib, m.capacity_gib, fits, m.measured ? fmt::format("{:.2f}", m.measured->gib) : "-",
                       m.measured ? m.measured->kind : "-", m.measured ? Pct(m.error) : "-", m.measured ? m.measured->source : "-");
  }
  out += fmt::format("\n{} of {} runs that ran (approximations apart) fit their device; {} of {} reported out-of-memory runs stay over it",
                     rep.ran_fit, rep.ran,
                     rep.oom_over, rep.oom_reported);
  if (rep.measured_peaks > 0) {
    out += fmt::format("; measured peaks: mean |error| {:.1f} %, max |error| {:.1f} % ({}) over {} rows", 100 * rep.peak_mean_abs_error,
                       100 * rep.peak_max_abs_error, rep.peak_max_abs_error_id, rep.measured_peaks);
  }
  return out + "\n";
}

std::string GroupTable(const std::vector<FidelityGroupSummary>& groups) {
  std::string out =
      "| group | runs | mean abs error | max abs error | ordered pairs right | reversed (measured order) |\n"
      "|---|---|---|---|---|---|\n";
  for (const auto& g : groups) {
    std::string rev;
    for (const auto& d : g.discordant) rev += (rev.empty() ? "" : ", ") + d;
    out += fmt::format("| {} | {} | {:.1f} % | {:.1f} % | {} / {} | {} |\n", g.group, g.rows, 100 * g.mean_abs_error, 100 * g.max_abs_error,
                       g.concordant_pairs, g.ordered_pairs, rev.empty() ? "-" : rev);
  }
  return out;
}

}  // namespace

std::vector<FidelityGroupSummary> SummarizeFidelityGroups(const FidelitySet& set, const std::vector<FidelityPrediction>& rows,
                                                          double order_threshold) {
  std::map<std::string, const FidelityRun*> by_id;
  for (const FidelityRun& r : set.runs) by_id[r.id] = &r;
  return GroupSummaries(rows, by_id, order_threshold);
}

std::string FidelityGroupTable(const std::vector<FidelityGroupSummary>& groups) {
  return GroupTable(groups);
}

PredictionErrorFigures PredictionErrorOf(const FidelitySet& set, const std::vector<FidelityPrediction>& rows) {
  std::map<std::string, std::string> group_of;
  for (const FidelityRun& r : set.runs) group_of[r.id] = r.group;
  // Each group's log errors, in the rows' order.
  std::map<std::string, std::vector<double>> by_group;
  PredictionErrorFigures f;
  double step_sum = 0;
  for (const FidelityPrediction& p : rows) {
    const double e = std::log(p.predicted_s / p.measured_s);
    step_sum += e * e;
    ++f.runs;
    by_group[group_of.at(p.id)].push_back(e);
  }
  // Squared pair differences per group.
  std::map<std::string, std::vector<double>> pair_d2;
  double pair_sum = 0;
  for (const auto& [g, e] : by_group) {
    for (size_t i = 0; i < e.size(); ++i) {
      for (size_t j = i + 1; j < e.size(); ++j) {
        const double d = e[i] - e[j];
        pair_d2[g].push_back(d * d);
        pair_sum += d * d;
        ++f.pairs;
      }
    }
  }
  f.step_log_sd = f.runs > 0 ? std::sqrt(step_sum / static_cast<double>(f.runs)) : 0.0;
  f.pair_log_sd = f.pairs > 0 ? std::sqrt(pair_sum / static_cast<double>(f.pairs)) : 0.0;
  for (const auto& [g, d2] : pair_d2) {
    double other_sum = pair_sum;
    for (double x : d2) other_sum -= x;
    const int64_t other = f.pairs - static_cast<int64_t>(d2.size());
    if (other <= 0) continue;
    const double sd = std::sqrt(std::max(0.0, other_sum) / static_cast<double>(other));
    for (double x : d2) {
      ++f.held_out_pairs;
      if (std::sqrt(x) <= kZ80 * sd) ++f.held_out_inside;
    }
  }
  return f;
}

std::string PredictionErrorToMarkdown(const PredictionErrorFigures& f) {
  return fmt::format(
      "### Prediction intervals (planner/cost/prediction_error.h)\n\n"
      "| figure | value | over | in prediction_error.h |\n|---|---|---|---|\n"
      "| step: rms ln(predicted / measured) | {:.3f} | {} runs | {:.3f} |\n"
      "| pair: rms of the difference of two runs' log errors, within a group | {:.3f} | {} pairs | {:.3f} |\n\n"
      "80 % interval of a difference, each group's pairs against the other groups' figure: {} of {} pairs inside ({:.0f} %; "
      "the aim 80 %)\n\n",
      f.step_log_sd, f.runs, kStepLogErrorSd, f.pair_log_sd, f.pairs, kPairLogErrorSd, f.held_out_inside, f.held_out_pairs,
      f.held_out_pairs > 0 ? 100.0 * static_cast<double>(f.held_out_inside) / static_cast<double>(f.held_out_pairs) : 0.0);
}

std::string FidelityReportToMarkdown(const FidelitySet& set, const FidelityReport& rep) {
  std::map<std::string, const FidelityRun*> by_id;
  for (const FidelityRun& r : set.runs) by_id[r.id] = &r;
  std::string out;
  out += fmt::format("### Expressible runs ({} of {})\n\n", rep.rows.size(), set.runs.size());
  out += PredictionTable(rep.rows, by_id, false);
  out += fmt::format("\nmean |error| {:.1f} %, weighted mean |error| {:.1f} %, max |error| {:.1f} % ({}) over {} runs\n\n",
                     100 * rep.mean_abs_error, 100 * rep.weighted_mean_abs_error, 100 * rep.max_abs_error,
                     rep.max_abs_error_id.empty() ? "-" : rep.max_abs_error_id, rep.rows.size());
  out += "### Per group\n\n" + GroupTable(rep.groups);
  out += "\n" + PredictionErrorToMarkdown(PredictionErrorOf(set, rep.rows));
  out += fmt::format("\n### Unsupported runs predicted anyway (approximations, not in the figures above: {})\n\n", rep.approximate.size());
  out += PredictionTable(rep.approximate, by_id, true);
  out += "\nPer group (approximations):\n\n" + GroupTable(rep.approximate_groups);
  out += fmt::format("\n### Runs not predicted ({})\n\n| id | why |\n|---|---|\n", rep.not_predicted.size());
  for (const auto& [id, why] : rep.not_predicted) out += fmt::format("| {} | {} |\n", id, why);
  out += MemoryTable(rep);
  return out;
}

std::vector<FidelityPair> PredictPairs(const FidelitySet& set, ComputeModel compute_model) {
  std::vector<std::string> order;
  std::map<std::string, std::vector<const FidelityRun*>> groups;
  for (const FidelityRun& r : set.runs) {
    if (!groups.count(r.group)) order.push_back(r.group);
    groups[r.group].push_back(&r);
  }
  if (order.empty()) throw Error(fmt::format("{}: /runs: no runs; a pairs file holds two runs per group (the baseline, then the variant)", set.file));
  std::vector<FidelityPair> pairs;
  for (const std::string& g : order) {
    const auto& runs = groups.at(g);
    auto fail = [&](const std::string& why) { throw Error(fmt::format("{}: pair \"{}\": {}", set.file, g, why)); };
    if (runs.size() != 2) fail(fmt::format("a pair is two runs (the baseline, then the variant), got {}", runs.size()));
    const FidelityRun& a = *runs[0];
    const FidelityRun& b = *runs[1];
    auto same = [&](const char* what, const auto& x, const auto& y) {
      if (x != y) fail(fmt::format("runs {} and {} differ in {}; a pair differs only in features", a.id, b.id, what));
    };
    same("model", a.model, b.model);
    same("cluster", a.cluster_name, b.cluster_name);
    same("layout", Layout(a), Layout(b));
    same("batch", std::tie(a.gbs, a.mbs, a.seq), std::tie(b.gbs, b.mbs, b.seq));
    same("precision", a.precision, b.precision);
    same("recompute", std::tie(a.recompute, a.recompute_modules), std::tie(b.recompute, b.recompute_modules));
    same("dispatcher", a.dispatcher, b.dispatcher);
    same("pp_layout", a.pp_layout, b.pp_layout);
    same("ddp_bucket_size", a.ddp_bucket_size, b.ddp_bucket_size);
    same("moe_flex_dispatcher_num_sms", a.moe_flex_dispatcher_num_sms, b.moe_flex_dispatcher_num_sms);
    same("megatron_core", a.megatron_core, b.megatron_core);
    FidelityPair p;
    p.group = g;
    for (const std::string& f : a.features)
      if (std::find(b.features.begin(), b.features.end(), f) == b.features.end())
        fail(fmt::format("the variant {} drops the baseline's feature \"{}\"", b.id, f));
    for (const std::string& f : b.features)
      if (std::find(a.features.begin(), a.features.end(), f) == a.features.end()) p.toggled.push_back(f);
    if (p.toggled.empty()) fail(fmt::format("the variant {} adds no feature to the baseline {}", b.id, a.id));
    for (const FidelityRun* r : runs) {
      const auto why = UnsupportedReasons(*r);
      if (!why.empty()) fail(fmt::format("run {} is not expressible: {}", r->id, why.front()));
    }
    auto predict = [&](const FidelityRun& r) {
      try {
        return PredictRun(r, set.models.at(r.model), compute_model);
      } catch (const Error& e) {
        fail(fmt::format("run {}: {}", r.id, e.what()));
      }
      return FidelityPrediction{};  // not reached: fail throws
    };
    p.baseline = predict(a);
    p.variant = predict(b);
    p.measured_gain = 1.0 - p.variant.measured_s / p.baseline.measured_s;
    p.predicted_gain = 1.0 - p.variant.predicted_s / p.baseline.predicted_s;
    pairs.push_back(std::move(p));
  }
  return pairs;
}

std::string PairsToMarkdown(const FidelitySet& set, const std::vector<FidelityPair>& pairs) {
  std::map<std::string, const FidelityRun*> by_id;
  for (const FidelityRun& r : set.runs) by_id[r.id] = &r;
  std::string out =
      "| pair | model | cluster | layout | GBS/MBS/seq | adds | measured s | measured gain | predicted s | predicted gain | "
      "errors (baseline, variant) | baseline all-to-all share |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  int64_t sign_right = 0;
  double sum_abs_diff = 0;
  constexpr double kFlat = 0.02;  // gains within 2 points of zero count as flat, either sign
  const auto cell = MarkdownCell;
  // Percent with a sign; a rounded zero prints as +0.0, never -0.0.
  auto pct = [](double x) { return std::abs(100 * x) < 0.05 ? std::string("+0.0 %") : fmt::format("{:+.1f} %", 100 * x); };
  for (const FidelityPair& p : pairs) {
    const FidelityRun& r = *by_id.at(p.baseline.id);
    std::string adds;
    for (const std::string& f : p.toggled) adds += (adds.empty() ? "" : " + ") + f;
    out += fmt::format("| {} | {} | {} | {} | {}/{}/{} | {} | {:.3f} -> {:.3f} | {} | {:.3f} -> {:.3f} | {} | {}, {} | {:.1f} % |\n",
                       cell(p.group), cell(r.model), cell(r.cluster_name), Layout(r), r.gbs, r.mbs.value_or(0), r.seq, adds, p.baseline.measured_s,
                       p.variant.measured_s, pct(p.measured_gain), p.baseline.predicted_s, p.variant.predicted_s, pct(p.predicted_gain),
                       pct(p.baseline.error), pct(p.variant.error), 100 * p.baseline.a2a_share);
    const bool flat = std::abs(p.measured_gain) <= kFlat || std::abs(p.predicted_gain) <= kFlat;
    if (flat || (p.measured_gain > 0) == (p.predicted_gain > 0)) ++sign_right;
    sum_abs_diff += std::abs(p.predicted_gain - p.measured_gain);
  }
  out += fmt::format("\n{} of {} pairs with the measured sign of the gain (within 2 points of zero: either); mean |predicted - measured| gain {:.1f} points\n",
                     sign_right, pairs.size(), pairs.empty() ? 0.0 : 100 * sum_abs_diff / static_cast<double>(pairs.size()));
  return out;
}

}  // namespace dockyard
