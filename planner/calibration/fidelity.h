// The fidelity set: published, measured MoE training runs with known layouts, and component
// measurements (all-to-all, grouped GEMM, permute), held against dockyard's predictions
// (docs/fidelity.md; the data and its sources: testdata/fidelity/README.md).
//
// A runs file (testdata/fidelity/runs.json) holds:
//   "clusters": name -> {"preset": NAME} or {"cluster": <cluster JSON, docs/cluster.md>}, + "source"
//   "models":   name -> {"file": PATH relative to the runs file, or null when the config is not in
//               the project}, + "source"
//   "sources":  short name -> citation
//   "runs":     one record per published run (FidelityRun)
//   "memory_runs": runs a source published a memory figure of but no step time: a measured peak
//               or an out-of-memory failure (FidelityMemoryRun)
//   "components": one record per component measurement (FidelityComponent)
// Degrees follow Megatron-Core (the convention of every source): DP = N / (TP·PP·CP),
// EDP = N / (PP·EP·ETP), micro-batches per step per DP rank = GBS / (DP·MBS).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "planner/cost/cluster.h"
#include "planner/cost/cost.h"
#include "planner/base/json_util.h"
#include "planner/model/model_spec.h"
#include "planner/layout/parallel_dims.h"
#include "planner/layout/plan.h"
#include "planner/routing/routing.h"
#include "planner/model/training.h"

namespace dockyard {

// What a source published: a step time, a throughput, or model TFLOP/s per GPU.
enum class MeasuredKind { kStepSeconds, kTokensPerSecondPerGpu, kTflopsPerGpu };
const char* MeasuredKindName(MeasuredKind k);  // "step_s", "tokens_per_s_per_gpu", "tflops_per_gpu"

struct FidelityMeasured {
  MeasuredKind kind = MeasuredKind::kStepSeconds;
  double value = 0;                                // > 0, in the unit of `kind`
  double gflop_per_token = 0;                      // kTflopsPerGpu only (> 0): the source's model GFLOP per token
  std::optional<std::pair<double, double>> range;  // other releases, same kind, lo <= hi
  // The measurement's noise, the sd of ln(value) (in (0, 1]): 0.15 for a published figure (the
  // sources' own spread) unless the file says otherwise; a user's repeated step times, e.g. 0.03.
  double noise = 0.15;
};

// A peak of GPU memory a source measured, in GiB (2^30 B).
struct MeasuredPeak {
  double gib = 0;  // > 0
  // "max_allocated" (torch.cuda.max_memory_allocated: Megatron's "max allocated", SimuMax's "real
  // alloc") or "max_reserved" (torch.cuda.max_memory_reserved: torchtitan's "memory:" figure, the
  // allocator's cached blocks too, so at or above the allocated peak).
  std::string kind;
  std::string source;  // key of "sources"
};

struct FidelityRun {
  std::string id;
  std::string model;         // key of "models"
  std::string model_file;    // resolved path; empty when the set has no config for the model
  std::string cluster_name;  // key of "clusters"
  ClusterSpec cluster;
  int64_t world_size = 0, tp = 1, pp = 1, vpp = 1, cp = 1, ep = 1, etp = 1;
  int64_t gbs = 0;
  std::optional<int64_t> mbs;  // unset where the source does not state it
  int64_t seq = 0;
  std::string precision;  // "bf16", "fp8" (per-tensor scaling) or "mxfp8"
  // Megatron's --pipeline-model-parallel-layout where the run gives one (/layout/pp_layout), else empty.
  std::string pp_layout;
  Recompute recompute = Recompute::kNone;
  std::vector<std::string> recompute_modules;  // Megatron --recompute-modules (selective)
  std::string dispatcher;                      // "a2a" (NCCL all-to-all), "deepep", "hybridep" (Megatron flex dispatcher)
  std::vector<std::string> features;           // kFidelityFeatures
  FidelityMeasured measured;
  std::string group;    // source x model x hardware
  double weight = 1.0;  // (0, 1]: the source's confidence
  std::string source;   // key of "sources"
  std::string notes;
  // Optional measured phases of the run (a user's profile): per layer and micro-batch, in the
  // cost model's phase vocabulary (planner/base/phase.h), compared with the same-named predicted phase
  // by the fitter (planner/calibration/calibrate.h), never summed into a step.
  struct Phase {
    std::string name, layer_kind, direction;  // e.g. "dispatch", "moe", "forward"
    double time_us = 0;                       // >= 0
  };
  std::vector<Phase> phases;
  // Optional: the peak memory the source measured (its own source), and the Megatron-Core release
  // the run used when it is older than the current one ("0.9": run_settings.h
  // MegatronProbsInActivation; empty = current).
  std::optional<MeasuredPeak> measured_peak;
  std::string megatron_core;
  // Optional: the DDP bucket in parameters where the run's framework sets one (Megatron-Bridge's
  // CommOverlapConfig: 134,217,728 with dp > 1); 0 = Megatron-LM's default (param_gather.h).
  int64_t ddp_bucket_size = 0;
  // Optional: the SMs of the flex dispatcher's kernels where the run's recipe sets them
  // (Megatron-Core moe_flex_dispatcher_num_sms / moe_hybridep_num_sms; run_settings.h); 0 = the
  // backend's default (the cluster's knob).
  int64_t moe_flex_dispatcher_num_sms = 0;
  // Why dockyard cannot express the run yet (empty: it can). Derived from the fields above by
  // UnsupportedReasons, never written in the data.
  std::vector<std::string> unsupported;
};

// The feature flags a run may carry. Those in kUnsupportedFeatures make the run unexpressible;
// the others are framework settings dockyard does not model yet and predicts without.
extern const std::vector<std::string> kFidelityFeatures;

struct FidelityComponent {
  std::string id, kind, hardware;
  Json params;                 // the conditions of the measurement, as the source states them
  std::vector<double> values;  // "value" or "values", each > 0
  std::string unit, source, notes;
};

// A run known by its memory alone: a measured peak, or an out-of-memory failure a source reported
// (which must stay over its device's capacity). Any convention (torchtitan's FSDP runs too);
// micro-batches in flight from `num_microbatches` (default pp).
struct FidelityMemoryRun {
  std::string id;
  std::string model;  // key of "models" (with a config)
  std::string cluster_name;
  ClusterSpec cluster;
  Convention convention = Convention::kMegatron;
  int64_t world_size = 0, tp = 1, pp = 1, vpp = 1, cp = 1, ep = 1, etp = 1;
  int64_t mbs = 1, seq = 0;
  std::optional<int64_t> num_microbatches;
  std::string precision = "bf16";
  Recompute recompute = Recompute::kNone;
  std::vector<std::string> recompute_modules;
  std::string selective_ac_option;  // torchtitan's (convention.h): "op" or N
  std::string megatron_core;        // megatron only: as FidelityRun::megatron_core
  std::optional<MeasuredPeak> measured_peak;
  bool oom = false;  // exactly one of measured_peak and oom
  std::string source, notes;
};

struct FidelitySet {
  std::string file;
  std::map<std::string, std::string> sources;
  std::map<std::string, ModelSpec> models;  // the models with a config, loaded
  std::vector<FidelityRun> runs;            // in file order
  std::vector<FidelityMemoryRun> memory_runs;
  std::vector<FidelityComponent> components;
};

// Reads and validates a runs file; model paths are relative to its directory. Throws
// dockyard::Error naming the run ("run H03: runs.json: /runs/2/batch/gbs: ...") for: a missing
// or mistyped field, an unknown key, model, cluster, source, dispatcher, precision, recompute,
// feature or measured kind, a value <= 0 (times, throughputs, weights), a duplicate id, degrees
// that do not validate (ParallelDims::Build, and ValidateDimsForModel when the model is loaded),
// GBS not divisible by DP·MBS.
FidelitySet LoadFidelitySet(const std::string& path);
// The same from parsed JSON; `file` names it in errors, `base_dir` resolves model paths.
FidelitySet FidelitySetFromJson(const Json& json, const std::string& file, const std::string& base_dir);

// The reasons a run cannot be expressed (Megatron FSDP, DualPipe, dropless routing, a custom
// PP layout not given as /layout/pp_layout, node-limited routing, a ramped batch, no MBS, no
// model config). Empty: SimulateStep can predict its step as published.
std::vector<std::string> UnsupportedReasons(const FidelityRun& run);
// Why dockyard cannot place the run's memory though it predicts its step (activation offloading,
// a paged stash): its memory row is an approximation; empty when the memory is modelled.
std::vector<std::string> MemoryUnsupportedReasons(const FidelityRun& run);

// The measured step in seconds. kTokensPerSecondPerGpu: GBS·seq / (N·value); kTflopsPerGpu:
// GBS·seq·gflop_per_token·1e9 / (N·value·1e12) (the sources' "model FLOPs", see the README).
double MeasuredStepSeconds(const FidelityRun& run);
// Tokens per second per GPU of a step of `step_s` seconds: GBS·seq / (N·step_s).
double TokensPerSecondPerGpu(const FidelityRun& run, double step_s);

// The run's degrees (Megatron convention) and training settings: seq, MBS, micro-batches =
// GBS / (DP·MBS), recompute, the dispatcher (a2a -> all_to_all;
// deepep / hybridep -> deepep: tokens cross the network once per destination node, then NVLink),
// and the framework features the cost model expresses as run settings (overlaps, CUDA graphs).
// Requires run.mbs.
ParallelDimsOptions FidelityDims(const FidelityRun& run);
TrainingConfig FidelityTraining(const FidelityRun& run);
// The machine of a run's plan: the node is the cluster's NVLink domain (HybridEP's and the
// deredundency dispatcher's locality unit; gb200-nvl72: 72 GPUs over trays of 4), no budget
// (network.h MachineOf).
Machine FidelityMachine(const FidelityRun& run);

struct FidelityPrediction {
  std::string id;
  bool approximate = false;  // predicted although unsupported (the unsupported features dropped)
  double measured_s = 0, predicted_s = 0;
  double error = 0;  // predicted_s / measured_s - 1 (negative: predicted too fast)
  std::string dominant_phase;
  // The EP all-to-alls' share of the predicted step: the dispatch and combine phases' time on the
  // critical path (CostBreakdown::critical_path_us, what EP overlap leaves exposed) / the step.
  double a2a_share = 0;
  double peak_gib = 0;            // ComputeMemory's worst rank
  double allocator_peak_gib = 0;  // MemoryReport::worst_allocator_peak_bytes
};

// One run's predicted worst peak against its device (RunFidelity's memory table): every predicted
// run of "runs" (expressible or approximate) and every memory run.
struct FidelityMemoryRow {
  std::string id, model, cluster, layout, batch;
  double peak_gib = 0;            // ComputeMemory's worst rank, held against the capacity
  double allocator_peak_gib = 0;  // the same without what lies outside torch's allocator, held against a measured peak
  double capacity_gib = 0;        // the cluster's memory_gib (what nvidia-smi reports)
  // The peak plus the default reserve (memory.h kDefaultMemoryReserveGib: CUDA context, NCCL
  // buffers, fragmentation, none of them in torch's allocator) within the capacity (OverBudget).
  bool fits = false;
  bool oom_reported = false;  // a memory run that failed with out-of-memory: must not fit
  bool approximate = false;   // an unsupported run predicted without its unsupported features
  std::optional<MeasuredPeak> measured;
  double error = 0;  // allocator_peak_gib / measured gib - 1, with `measured`
};

// What PredictRun builds once per run (the fitter re-costs it under many knob values): the plan,
// its worst-rank peak (GiB) and the sampled routing.
struct PreparedRun {
  Plan plan;
  RoutingResult routing;
  double peak_gib = 0, allocator_peak_gib = 0;
};
PreparedRun PrepareRun(const FidelityRun& run, const ModelSpec& model);

// dockyard's `simulate` path for a run: BuildPlan + ComputeMemory + SampleRoutingForPlan
// (uniform routing, seed 0, 4 sampled MoE layers: the CLI's defaults) + SimulateStep under
// `compute_model`, the run's settings in its plan (FidelityTraining). `model` is set.models.at(run.model).
// Throws dockyard::Error when the plan cannot be built.
FidelityPrediction PredictRun(const FidelityRun& run, const ModelSpec& model, ComputeModel compute_model = ComputeModel::kKernels);

// `text` as one cell of a Markdown table: '|' and '\' escaped, line breaks as spaces, so that a
// name or a message cannot break the table.
std::string MarkdownCell(const std::string& text);

// Whether a predicted worst-rank peak (GiB) fits the cluster's device: the peak plus the default
// reserve (memory.h kDefaultMemoryReserveGib) within ClusterSpec::memory_gib (memory.h OverBudget).
bool PeakFitsCluster(double peak_gib, const ClusterSpec& cluster);

// The plan of a memory run (its convention's defaults applied by BuildPlan) and its row of the
// memory table. Throws dockyard::Error naming the run when the plan cannot be built.
Plan MemoryRunPlan(const FidelityMemoryRun& run, const ModelSpec& model);
FidelityMemoryRow PredictMemoryRun(const FidelityMemoryRun& run, const ModelSpec& model);

// The benchmark's core: predicts every expressible run, and every unsupported run that has a
// model config and an MBS as an approximation (listed apart, never in the summary), and sums up.
struct FidelityGroupSummary {
  std::string group;
  int64_t rows = 0;
  double mean_abs_error = 0, max_abs_error = 0;
  int64_t ordered_pairs = 0, concordant_pairs = 0;  // pairs whose measured tokens/s/GPU differ by > 10 %
  std::vector<std::string> discordant;              // "S01 > S04" (measured order) where predicted reverses it
};
struct FidelityReport {
  std::vector<FidelityPrediction> rows;                            // expressible runs, file order
  std::vector<FidelityPrediction> approximate;                     // unsupported runs predicted anyway
  std::vector<std::pair<std::string, std::string>> not_predicted;  // id, why
  double mean_abs_error = 0, weighted_mean_abs_error = 0, max_abs_error = 0;
  std::string max_abs_error_id;
  std::vector<FidelityGroupSummary> groups;              // over `rows`
  std::vector<FidelityGroupSummary> approximate_groups;  // over `approximate`, shown apart
  std::vector<FidelityMemoryRow> memory;                 // runs (file order), then memory runs
  // Over `memory`: runs that ran (no OOM reported; approximations apart) and fit; reported OOMs
  // predicted over;
  // |error| of the measured peaks (mean, max and its id).
  int64_t ran = 0, ran_fit = 0, oom_reported = 0, oom_over = 0, measured_peaks = 0;
  double peak_mean_abs_error = 0, peak_max_abs_error = 0;
  std::string peak_max_abs_error_id;
};
// Pairs in a group are compared on tokens/s/GPU; a pair counts when the measured values differ
// by more than `order_threshold` (0.10: closer pairs are within the sources' own noise).
FidelityReport RunFidelity(const FidelitySet& set, double order_threshold = 0.10, ComputeModel compute_model = ComputeModel::kKernels);

// The per-group summaries (RunFidelity's `groups`) of any predictions of `set`'s runs, e.g. a
// fitted calibration's or held-out ones; and the Markdown table of such summaries.
std::vector<FidelityGroupSummary> SummarizeFidelityGroups(const FidelitySet& set, const std::vector<FidelityPrediction>& rows,
                                                          double order_threshold = 0.10);
std::string FidelityGroupTable(const std::vector<FidelityGroupSummary>& groups);

// What the predictions `rows` (expressible runs) are worth (planner/cost/prediction_error.h): the
// root mean square of ln(predicted / measured) over the rows, and of the difference of two rows'
// log errors over every pair of rows of one group; and, for each group in turn, the pair figure
// of the other groups' pairs held against the group's own pairs: how many of them lie within
// z80 x that figure (the 80 % interval's coverage out of sample; the aim, 80 %).
struct PredictionErrorFigures {
  int64_t runs = 0, pairs = 0;
  double step_log_sd = 0, pair_log_sd = 0;
  int64_t held_out_pairs = 0, held_out_inside = 0;
};
PredictionErrorFigures PredictionErrorOf(const FidelitySet& set, const std::vector<FidelityPrediction>& rows);
std::string PredictionErrorToMarkdown(const PredictionErrorFigures& figures);

// The report as Markdown tables (docs/fidelity.md).
std::string FidelityReportToMarkdown(const FidelitySet& set, const FidelityReport& report);

// A same-layout pair of measured steps (bench_ep_overlap, testdata/ep_overlap/pairs.json): a
// baseline and a variant that adds run settings (EP overlap, delayed weight gradients), each
// predicted by PredictRun. Gains are step-time reductions, 1 - variant / baseline (negative: the
// variant is slower), as the sources quote them.
struct FidelityPair {
  std::string group;                   // the two runs' group, e.g. "EPO1 a2a EP16"
  std::vector<std::string> toggled;    // the variant's features the baseline lacks, in file order
  FidelityPrediction baseline, variant;
  double measured_gain = 0, predicted_gain = 0;
};
// The pairs of `set`: its runs grouped by /group in file order, two per group (the first the
// baseline, the second the variant). Throws dockyard::Error naming the group when a group has
// other than two runs, when the variant drops a feature of the baseline or adds none, when the two
// differ in anything else (model, cluster, layout, batch, precision, recompute, dispatcher, pp_layout,
// ddp_bucket_size, moe_flex_dispatcher_num_sms, megatron_core), or when
// either run is unsupported (UnsupportedReasons).
std::vector<FidelityPair> PredictPairs(const FidelitySet& set, ComputeModel compute_model = ComputeModel::kKernels);
// The pairs as a Markdown table: measured and predicted steps and gains, and each prediction's
// error; then the count of pairs whose predicted gain has the measured sign (within 2 points of
// zero counts as either) and the mean |predicted - measured| gain in points.
std::string PairsToMarkdown(const FidelitySet& set, const std::vector<FidelityPair>& pairs);

}  // namespace dockyard
