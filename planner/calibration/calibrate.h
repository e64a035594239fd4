// Fitting a calibration (calibration.h) to measurements: `dockyard-plan calibrate` and the
// held-out figures of bench_fidelity (docs/calibration.md, "Fitting").
//
// Two stages over the knob table (planner/cost/knobs.h KnobTable):
//  1. component knobs (Stage kComponent) from component measurements (a runs file's
//     "components") and dockyard-run phase timings, each kept inside its physical bounds;
//  2. the compute model's step-level knobs (StepLevelKnob) that stage 1 left undetermined, from
//     whole-step rows, the stage-1 knobs held.
// Loss of a stage: sum over groups of (1 / groups) x sum over the group's rows of
// (w_i / sum of the group's w) x Huber(r_i / sigma_i, delta = 1), where r_i = ln(predicted /
// measured) (0 when a release range is given and the prediction lies inside it, else the log
// distance to the nearer end), sigma_i = the row's noise (0.15: the sources' own spread), w_i the
// row's weight (the source's confidence). Each group thus weighs the same whatever its row count.
// Minimized, by bounded coordinate descent in ln(value): rows x that loss + sum over the fitted
// knobs of ln(value / prior)^2 / (2 s^2), s = ln(upper / lower) / 4 the prior's sd (a Gaussian
// prior in log space whose physical bounds sit at two sd). The Gauss-Newton posterior at the
// fit gives each knob's sd; a knob is determined when the rows cut its sd to at most half the
// prior's, else it goes back to its prior. A knob starts at its prior even outside its physical
// bounds; only a fitted one is brought inside them. Knobs with sensitivity below 0.01 (root mean square
// over the stage's rows of d ln(predicted) / d ln(knob)) are not fitted at all.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "planner/calibration/calibration.h"
#include "planner/cost/cluster.h"
#include "planner/cost/cost.h"
#include "planner/calibration/fidelity.h"
#include "planner/base/json_util.h"

namespace dockyard {

// One measurement the fit compares with a prediction, in the measurement's own unit.
struct CalibrationRow {
  std::string id;        // "C21[1]", "H06", "run.json:dispatch"
  std::string what;      // "grouped_gemm_fraction at 128 rows", "step", "phase dispatch"
  std::string group;     // source x model x hardware (runs), "component <source>", "dockyard-run <file>"
  std::string hardware;  // the cluster's name (leave-one-hardware-out)
  std::string unit;
  KnobSpec::Stage stage = KnobSpec::kResidual;
  double measured = 0;                             // > 0
  std::optional<std::pair<double, double>> range;  // release range in `unit`, lo <= hi
  double weight = 1.0;                             // (0, 1]
  double noise = 0.15;                             // sigma of ln(measured)
  ClusterSpec cluster;                             // the row's hardware before the knobs
  bool calibrated_hardware = true;                 // the cluster knobs apply to this row (its hardware is the one calibrated)
  // A row on other hardware than the calibrated preset keeps its own preset's operator table: its
  // compute and dispatcher knobs move by the fit's relative change, own value x value / prior,
  // with `relative_to` the calibrated preset's knob values (KnobTable order). Empty: the knob
  // values are set as they are (the calibrated hardware's rows).
  std::vector<double> relative_to;
  ComputeModel model = ComputeModel::kKernels;  // the compute model it is predicted under (its run settings are in `predict`)
  // In `unit`, from a copy of `cluster` whose knobs are set to the values tried.
  std::function<double(const ClusterSpec&)> predict;
};

// The row's prediction under knob values `values` (one per KnobTable entry, in order): the compute
// and dispatcher knobs always (relative to the row's own when row.relative_to is given), the link
// knobs when row.calibrated_hardware (set on a copy of row.cluster).
double PredictRow(const CalibrationRow& row, const std::vector<double>& values);
// r_i of the loss above.
double RowLogError(const CalibrationRow& row, double predicted);
// Huber(z) = z^2 / 2 for |z| <= 1, |z| - 1/2 beyond.
double Huber(double z);
// The stage's loss (without the prior term) over `rows` whose stage is `stage`.
double StageLoss(const std::vector<CalibrationRow>& rows, KnobSpec::Stage stage, const std::vector<double>& values);

struct FittedKnob {
  KnobSpec knob;
  double prior = 0, value = 0;
  double lower = 0, upper = 0;  // physical bounds (absolute)
  double sensitivity = 0;       // at the prior values, over the rows of the stage it was considered in
  bool determined = false;      // fitted: the rows cut its sd to at most half the prior's; else left at the prior
  bool hit_bound = false;       // fitted value within 0.1 % of a bound
  KnobSpec::Stage stage = KnobSpec::kComponent;  // the stage that considered it (its table stage when none did)
  bool considered = false;      // a stage's rows move it (sensitivity, or two prior sd's move, >= 1 %): fitted or undetermined
  double prior_sd = 0;          // sd of ln(value) before the rows: ln(upper / lower) / 4
  double sd = 0;                // after them (the prior's when not determined)
  double low80 = 0, high80 = 0;  // the 80 % interval value x exp(-+1.28 sd), within the bounds
};
struct CalibrationFit {
  std::vector<FittedKnob> knobs;                           // KnobTable order
  std::vector<double> prior, values;                       // knob values before and after
  double loss_before[2] = {0, 0}, loss_after[2] = {0, 0};  // per stage
};
// Fits both stages from `prior` (a calibration's knob values, KnobTable order).
CalibrationFit FitCalibration(const std::vector<CalibrationRow>& rows, const std::vector<double>& prior);

// The knobs whole-step rows fit under `model` (stage 2) when the component rows left them
// undetermined: what scales the step as a whole. Kernel-level model: the GEMM shape efficiency,
// the flash ceiling, the memory-bound kernels' HBM efficiency, the NVLink and network bandwidths
// and the host's per-step overhead; gemm model: its dense, grouped and flash efficiencies, the
// same links and the host's overhead; under both, the EP-overlap communication rates (knobs.h
// EpOverlapKnobs: no component row measures them, only steps run with EP overlap).
bool StepLevelKnob(const KnobSpec& knob, ComputeModel model);

// Knob values of a calibration, KnobTable order, and back.
std::vector<double> KnobValues(const Calibration& calibration);
void SetKnobValues(const std::vector<double>& values, Calibration* calibration);

// Held-out error of the whole-step rows: for each distinct key(row) among them, fit (both
// stages) without the rows of that key and predict them. Returns per row id the error
// predicted / measured - 1 (against the measured value, ranges ignored).
std::map<std::string, double> HeldOutErrors(const std::vector<CalibrationRow>& rows, const std::vector<double>& prior,
                                            const std::function<std::string(const CalibrationRow&)>& key);

// Rows from a fidelity set (runs.json format; also a user's own runs file in that format):
// whole-step rows of the expressible runs (dropless runs excluded; `skipped` gets id and why for
// every run left out), and component rows of the measurements a knob models whose hardware is
// `preset`'s GPU (the preset name before '-', upper-cased, in the component's "hardware"):
//   all_to_all (params.scope "network")  GB/s       network_gbps
//   nvlink_collective                      GB/s       intra_node_gbps
//   grouped_gemm (params.dtype "bf16")     TFLOP/s    dense_bf16_tflops x GroupedGemmEfficiency(params.m);
//                                                     under the kernel-level model x GemmShapeEfficiency(m, n, k)
//   grouped_gemm_fraction                  fraction   GroupedGemmEfficiency(params.rows_per_expert[i]) (gemm model
//                                                     only: a rule of thumb without the GEMM's N and K)
//   kernel_floor                           us         memory_floor_us
// Other kinds (DeepEP, HybridEP, permute, FP8 GEMM) have no knob yet and are listed in `skipped`.
// A run's measured "phases" (optional; FidelityRun::phases) become stage-1 rows through the
// dockyard-run mapping below (same-named predicted phase, same layer kind and direction).
// A run's cluster gets the cluster knobs when its cluster is `preset` itself.
// With `only_hardware` non-empty, whole-step rows of runs on other hardware (cluster name) are left
// out and listed: the efficiencies a calibration file holds belong to one hardware preset
// (calibrate's rule); bench_fidelity's cross-hardware held-out errors pass "". Every row is
// predicted under `model` (a run's rows with the run's own settings, fidelity.h FidelityTraining).
std::vector<CalibrationRow> RowsFromFidelitySet(const FidelitySet& set, const std::string& preset,
                                                std::vector<std::pair<std::string, std::string>>* skipped,
                                                const std::string& only_hardware = "",
                                                ComputeModel model = ComputeModel::kKernels);

// Rows from a dockyard-run JSON report (`report` parsed from `file`): one stage-1 row per
// measured phase the cost model predicts through the mapping below, on `cluster` (the hardware
// the run ran on; the cluster knobs apply). The plan is rebuilt as dockyard-run ran it (world
// size, ep, expert TP, dispatcher, oep; seq_len = tokens_per_rank, one micro-batch), routing
// uniform with the run's seed, and predicted with SimulateStep's forward MoE phases. Phase
// mapping (measured -> predicted; the phase vocabulary of planner/base/phase.h):
//   permute, dispatch, grouped_gemm, unpermute, combine, tp_comm -> the same name, fitted;
//   router, shared_experts -> not fitted (they depend on dense_efficiency, a residual knob; the
//     shared experts also overlap the combine when overlap is applied);
//   weight_gen -> not a training phase, never fitted; a phase measured as 0 us, or one the cost
//   model predicts as 0 us for the layout, is skipped (listed).
// Throws dockyard::Error naming the file and field for a missing or mistyped field, a negative
// time, an unknown model file or a layout that does not validate.
// Every row is predicted under `model`.
std::vector<CalibrationRow> RowsFromRunReport(const Json& report, const std::string& file, const ClusterSpec& cluster,
                                              std::vector<std::pair<std::string, std::string>>* skipped,
                                              ComputeModel model = ComputeModel::kKernels);

// The fit as text: the rows before and after, the knobs (prior, fitted, bounds, hit-bound,
// sensitivity, stage), the undetermined knobs, and `held_out` (group-held-out) when given.
std::string CalibrationFitToText(const std::vector<CalibrationRow>& rows, const CalibrationFit& fit,
                                 const std::map<std::string, double>* held_out);

// bench_fidelity's fit section (docs/fidelity.md): the fit over `set` (priors: `preset`'s
// built-in knobs); per whole-step row the error with the priors, in-sample, group-held-out and
// leave-one-hardware-out; for each variant mean / max |error| and the pairs ordered right within
// groups (SummarizeFidelityGroups); the group-held-out per-group table; the fit's text.
std::string FidelityFitToMarkdown(const FidelitySet& set, const std::string& preset, ComputeModel model = ComputeModel::kKernels);

}  // namespace dockyard
