// Fitting a calibration to measurements (see calibrate.h and docs/calibration.md, "Fitting").
#include "planner/calibration/calibrate.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fstream>
#include <functional>
#include <memory>
#include <set>
#include <utility>

#include <fmt/format.h>

#include "planner/base/error.h"
#include "planner/layout/parallel_dims.h"
#include "planner/layout/plan.h"
#include "planner/routing/routing.h"
#include "planner/accounting/workload.h"
#include "planner/cost/gemm_efficiency.h"
#include "planner/cost/network.h"
#include "planner/cost/prediction_error.h"
#include "planner/routing/plan_routing.h"
#include "planner/model/model_file.h"

namespace dockyard {
namespace {

constexpr double kMinSensitivity = 0.01;  // below (and two prior sd's move under 1 %): the rows do not move the knob at all
constexpr double kHuberDelta = 1.0;       // in units of the row's noise
constexpr double kDeterminedRatio = 0.5;  // posterior / prior sd at or below which the rows determine a knob
// The noise of a component or phase row: a kernel or collective benchmark, or a phase timed over
// many iterations, repeats within a few per cent (nccl-tests and CUTLASS sweeps run tens of
// iterations); the 0.15 of a published step time is the spread between releases and setups.
constexpr double kComponentNoise = 0.05;

const std::vector<KnobSpec>& Table() {
  return KnobTable();
}

double LowerBound(const KnobSpec& k, double prior) {
  return k.relative ? k.lower * prior : k.lower;
}
double UpperBound(const KnobSpec& k, double prior) {
  return k.relative ? k.upper * prior : k.upper;
}

// The prior's standard deviation of ln(knob): the knob table's prior_sd, else a quarter of the
// log width of its physical bounds (the bounds at about two standard deviations).
double PriorSd(const KnobSpec& k, double prior) {
  return k.prior_sd > 0 ? k.prior_sd : std::log(UpperBound(k, prior) / LowerBound(k, prior)) / 4.0;
}

// The loss weight of every row of `stage`: w_i / (sum of its group's w) / groups (0 for other rows).
std::vector<double> RowWeights(const std::vector<CalibrationRow>& rows, KnobSpec::Stage stage) {
  std::map<std::string, double> group_weight;
  for (const CalibrationRow& r : rows) {
    if (r.stage == stage) group_weight[r.group] += r.weight;
  }
  std::vector<double> w(rows.size(), 0.0);
  for (size_t i = 0; i < rows.size(); ++i) {
    if (rows[i].stage == stage) w[i] = rows[i].weight / group_weight[rows[i].group] / static_cast<double>(group_weight.size());
  }
  return w;
}

// Root mean square over the stage's rows (loss weights) of d ln(predicted) / d ln(knob k).
// Root mean square over the rows of nonzero weight (loss weights) of ln(predicted under `to` /
// predicted under `from`).
double RmsLogChange(const std::vector<CalibrationRow>& rows, const std::vector<double>& weights, const std::vector<double>& from,
                    const std::vector<double>& to) {
  double sum = 0, wsum = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    if (weights[i] == 0) continue;
    const double d = std::log(PredictRow(rows[i], to) / PredictRow(rows[i], from));
    sum += weights[i] * d * d;
    wsum += weights[i];
  }
  return wsum > 0 ? std::sqrt(sum / wsum) : 0.0;
}

// The two points of a central difference in ln(knob k), `h` each way from `values`, the pair
// shifted down to stay inside the knob's valid range where the value sits at its maximum (a
// communication rate of 1): {down, up}.
std::pair<std::vector<double>, std::vector<double>> LogDifferencePoints(const std::vector<double>& values, size_t k, double h) {
  std::vector<double> up = values, down = values;
  const double u = std::min(std::log(values[k]), std::log(Table()[k].max) - h);
  up[k] = std::exp(u + h);
  down[k] = std::exp(u - h);
  return {down, up};
}

double Sensitivity(const std::vector<CalibrationRow>& rows, const std::vector<double>& weights, const std::vector<double>& values,
                   size_t k) {
  constexpr double h = 0.01;
  const auto [down, up] = LogDifferencePoints(values, k, h);
  return RmsLogChange(rows, weights, down, up) / (2 * h);
}

// Solves a x = b for a square `a` (copied) by Gauss-Jordan elimination with partial pivoting;
// false when `a` is singular.
bool SolveLinear(std::vector<std::vector<double>> a, std::vector<double> b, std::vector<double>* x) {
  const size_t m = a.size();
  for (size_t c = 0; c < m; ++c) {
    size_t piv = c;
    for (size_t r = c + 1; r < m; ++r) {
      if (std::fabs(a[r][c]) > std::fabs(a[piv][c])) piv = r;
    }
    if (!(std::fabs(a[piv][c]) > 1e-300)) return false;
    std::swap(a[c], a[piv]);
    std::swap(b[c], b[piv]);
    for (size_t r = 0; r < m; ++r) {
      if (r == c || a[r][c] == 0) continue;
      const double f = a[r][c] / a[c][c];
      for (size_t l = c; l < m; ++l) a[r][l] -= f * a[c][l];
      b[r] -= f * b[c];
    }
  }
  x->assign(m, 0.0);
  for (size_t c = 0; c < m; ++c) (*x)[c] = b[c] / a[c][c];
  return true;
}

// d ln(predicted_i) / d ln(knob) for each row of nonzero weight `w` and each knob in `active`, at
// `values` (central differences, h = 0.01); rows of zero weight stay 0.
std::vector<std::vector<double>> LogJacobian(const std::vector<CalibrationRow>& rows, const std::vector<double>& w,
                                             const std::vector<size_t>& active, const std::vector<double>& values) {
  constexpr double h = 0.01;
  std::vector<std::vector<double>> jac(rows.size(), std::vector<double>(active.size(), 0.0));
  for (size_t j = 0; j < active.size(); ++j) {
    const auto [down, up] = LogDifferencePoints(values, active[j], h);
    for (size_t i = 0; i < rows.size(); ++i) {
      if (w[i] > 0) jac[i][j] = (std::log(PredictRow(rows[i], up)) - std::log(PredictRow(rows[i], down))) / (2 * h);
    }
  }
  return jac;
}

// Rows of `stage`.
double StageRows(const std::vector<CalibrationRow>& rows, KnobSpec::Stage stage) {
  return static_cast<double>(std::count_if(rows.begin(), rows.end(), [&](const CalibrationRow& r) { return r.stage == stage; }));
}

// Root mean square over the stage's rows (loss weights) of ln(predicted at value x e^(2 sd) /
// predicted at value), sd = the knob's prior sd: how much a move of two prior sd (the prior's
// reach) shows in the rows -- a knob with a small prior (the host's 2 ms) whose derivative there
// is tiny can still matter within that reach.
double PriorSdEffect(const std::vector<CalibrationRow>& rows, const std::vector<double>& weights, const std::vector<double>& values,
                     const std::vector<double>& prior, size_t k) {
  std::vector<double> up = values;
  up[k] = std::min(values[k] * std::exp(2.0 * PriorSd(Table()[k], prior[k])), UpperBound(Table()[k], prior[k]));
  // At its upper bound (a communication rate of 1) the knob's reach is downward.
  if (!(up[k] > values[k])) up[k] = std::max(values[k] * std::exp(-2.0 * PriorSd(Table()[k], prior[k])), LowerBound(Table()[k], prior[k]));
  return RmsLogChange(rows, weights, values, up);
}

// Bounded coordinate descent in ln(value) over the knobs in `active` of the stage's objective:
// rows x StageLoss (the data's negative log-likelihood under the rows' noise) + sum over the
// active knobs of ln(value / prior)^2 / (2 PriorSd^2) (the knob's prior).
void Minimize(const std::vector<CalibrationRow>& rows, KnobSpec::Stage stage, const std::vector<size_t>& active,
              const std::vector<double>& prior, std::vector<double>* values) {
  const double n = StageRows(rows, stage);
  auto loss = [&](const std::vector<double>& v) {
    double pull = 0;
    for (size_t k : active) pull += std::pow(std::log(v[k] / prior[k]) / PriorSd(Table()[k], prior[k]), 2) / 2.0;
    return n * StageLoss(rows, stage, v) + pull;
  };
  // First a scan of each knob over its prior's reach, the others held: ln(value) on a grid
  // prior x e^(t sd / 2), t = -8 .. 8, then a golden-section search between the best grid point's
  // neighbours. A knob whose effect grows with its value (the host's per-step overhead from a 2 ms
  // prior) is invisible to small steps from its prior. The knobs are scanned in the order of the
  // loss each alone removes from the start, so that the one that explains the rows best is set
  // first (an overhead per step is not taken up by a bandwidth).
  auto scan = [&](size_t k, const std::vector<double>& from) {
    const double sd = PriorSd(Table()[k], prior[k]);
    const double lo = std::log(LowerBound(Table()[k], prior[k])), hi = std::log(UpperBound(Table()[k], prior[k]));
    auto at = [&](double u) {
      std::vector<double> trial = from;
      trial[k] = std::exp(std::clamp(u, lo, hi));
      return loss(trial);
    };
    double best_u = std::log(from[k]), best_f = at(best_u);
    for (int t = -8; t <= 8; ++t) {
      const double u = std::log(prior[k]) + 0.5 * t * sd;
      const double f = at(u);
      if (f < best_f) best_f = f, best_u = u;
    }
    double a = best_u - 0.5 * sd, b = best_u + 0.5 * sd;
    constexpr double kGolden = 0.6180339887498949;
    double c = b - kGolden * (b - a), d = a + kGolden * (b - a), fc = at(c), fd = at(d);
    for (int i = 0; i < 20; ++i) {
      if (fc < fd) {
        b = d, d = c, fd = fc, c = b - kGolden * (b - a), fc = at(c);
      } else {
        a = c, c = d, fc = fd, d = a + kGolden * (b - a), fd = at(d);
      }
    }
    if (std::min(fc, fd) < best_f) best_u = fc < fd ? c : d;
    return std::exp(std::clamp(best_u, lo, hi));
  };
  double best = loss(*values);
  std::vector<std::pair<double, size_t>> order;
  for (size_t k : active) {
    std::vector<double> trial = *values;
    trial[k] = scan(k, *values);
    order.push_back({loss(trial) - best, k});
  }
  std::sort(order.begin(), order.end());
  for (const auto& [gain, k] : order) {
    std::vector<double> trial = *values;
    trial[k] = scan(k, *values);
    const double f = loss(trial);
    if (f < best) {
      best = f;
      *values = trial;
    }
  }
  std::vector<double> step(values->size(), 0.5);
  for (int sweep = 0; sweep < 400; ++sweep) {
    bool moving = false;
    for (size_t k : active) {
      if (step[k] < 1e-7) continue;
      moving = true;
      const double lo = std::log(LowerBound(Table()[k], prior[k])), hi = std::log(UpperBound(Table()[k], prior[k]));
      const double u = std::log((*values)[k]);
      bool improved = false;
      for (double dir : {1.0, -1.0}) {
        const double t = std::clamp(u + dir * step[k], lo, hi);
        if (t == u) continue;
        std::vector<double> trial = *values;
        trial[k] = std::exp(t);
        const double f = loss(trial);
        if (f < best) {
          best = f;
          *values = trial;
          improved = true;
          break;
        }
      }
      step[k] = improved ? std::min(1.0, step[k] * 2) : step[k] * 0.5;
    }
    if (!moving) break;
  }
  // Then damped Gauss-Newton on all of them at once (Levenberg-Marquardt, Huber by iteratively
  // reweighted least squares): coordinate descent stalls in a valley where two knobs trade
  // against each other (a network bandwidth against a per-step overhead), which a joint step
  // crosses.
  const size_t m = active.size();
  if (m == 0) return;
  const std::vector<double> w = RowWeights(rows, stage);
  double lambda = 1e-3;
  double current = loss(*values);
  for (int iter = 0; iter < 60 && lambda < 1e8; ++iter) {
    std::vector<double> r(rows.size(), 0.0);
    for (size_t i = 0; i < rows.size(); ++i) {
      if (w[i] > 0) r[i] = RowLogError(rows[i], PredictRow(rows[i], *values));
    }
    const std::vector<std::vector<double>> jac = LogJacobian(rows, w, active, *values);
    std::vector<std::vector<double>> a(m, std::vector<double>(m, 0.0));
    std::vector<double> g(m, 0.0);
    for (size_t j = 0; j < m; ++j) {
      const double sd = PriorSd(Table()[active[j]], prior[active[j]]);
      a[j][j] += 1.0 / (sd * sd);
      g[j] += std::log((*values)[active[j]] / prior[active[j]]) / (sd * sd);
    }
    for (size_t i = 0; i < rows.size(); ++i) {
      if (w[i] == 0) continue;
      const double z = std::fabs(r[i]) / rows[i].noise;
      const double omega = n * w[i] / (rows[i].noise * rows[i].noise) * (z <= kHuberDelta ? 1.0 : kHuberDelta / z);
      for (size_t j = 0; j < m; ++j) {
        g[j] += omega * jac[i][j] * r[i];
        for (size_t l = 0; l < m; ++l) a[j][l] += omega * jac[i][j] * jac[i][l];
      }
    }
    for (size_t j = 0; j < m; ++j) a[j][j] *= 1.0 + lambda;
    std::vector<double> step_u(m, 0.0);
    if (!SolveLinear(a, g, &step_u)) break;
    std::vector<double> trial = *values;
    double largest = 0;
    for (size_t j = 0; j < m; ++j) {
      const size_t k = active[j];
      const double lo = std::log(LowerBound(Table()[k], prior[k])), hi = std::log(UpperBound(Table()[k], prior[k]));
      const double u = std::clamp(std::log((*values)[k]) - step_u[j], lo, hi);
      largest = std::max(largest, std::fabs(u - std::log((*values)[k])));
      trial[k] = std::exp(u);
    }
    if (largest < 1e-7) break;
    const double f = loss(trial);
    if (f < current) {
      current = f;
      *values = trial;
      lambda = std::max(1e-6, lambda / 3);
    } else {
      lambda *= 4;
    }
  }
}

}  // namespace

double PredictRow(const CalibrationRow& row, const std::vector<double>& values) {
  ClusterSpec cluster = row.cluster;
  for (size_t k = 0; k < Table().size(); ++k) {
    const KnobSpec& knob = Table()[k];
    if (!row.calibrated_hardware && knob.group == KnobSpec::kLink) continue;
    if (!row.relative_to.empty() && row.relative_to[k] > 0) {
      // The fit's move as a ratio of the row's own prior, kept inside the knob's valid range: one
      // preset's rate below 1 may rise where another's already sits at 1 (HybridEP's comm rate,
      // measured 0.349 on Hopper, assumed 1 on Blackwell).
      knob.Set(cluster.knobs, std::min(knob.max, knob.Get(row.cluster.knobs) * values[k] / row.relative_to[k]));
    } else {
      knob.Set(cluster.knobs, values[k]);
    }
  }
  return row.predict(cluster);
}

double RowLogError(const CalibrationRow& row, double predicted) {
  if (row.range) {
    if (predicted < row.range->first) return std::log(predicted / row.range->first);
    if (predicted > row.range->second) return std::log(predicted / row.range->second);
    return 0.0;
  }
  return std::log(predicted / row.measured);
}

double Huber(double z) {
  const double a = std::fabs(z);
  return a <= kHuberDelta ? 0.5 * z * z : kHuberDelta * (a - 0.5 * kHuberDelta);
}

double StageLoss(const std::vector<CalibrationRow>& rows, KnobSpec::Stage stage, const std::vector<double>& values) {
  const std::vector<double> w = RowWeights(rows, stage);
  double loss = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    if (w[i] > 0) loss += w[i] * Huber(RowLogError(rows[i], PredictRow(rows[i], values)) / rows[i].noise);
  }
  return loss;
}

std::vector<double> KnobValues(const Calibration& cal) {
  std::vector<double> v;
  for (const KnobSpec& k : Table()) v.push_back(k.Get(cal.knobs));
  return v;
}

void SetKnobValues(const std::vector<double>& values, Calibration* cal) {
  for (size_t k = 0; k < Table().size(); ++k) Table()[k].Set(cal->knobs, values[k]);
}

bool StepLevelKnob(const KnobSpec& knob, ComputeModel model) {
  // The EP-overlap communication rates have no component row kind: whole steps run with
  // --overlap-moe-expert-parallel-comm are what measure them, under either compute model; the
  // grouped weight gradient's main-grad traffic share likewise, under the kernel-level model that
  // reads it.
  static const char* const kKernels[] = {"compute.gemm.shape_efficiency", "compute.flash.max_efficiency",
                                         "compute.memory_bound.hbm_efficiency", "links.intra_node_gbps",
                                         "links.network_gbps", "host.step_overhead_us", "compute.memory_bound.wgrad_accumulate_share"};
  static const char* const kGemm[] = {"compute.gemm.dense_efficiency", "compute.gemm.grouped_max_efficiency",
                                      "compute.flash.fixed_efficiency", "links.intra_node_gbps",
                                      "links.network_gbps", "host.step_overhead_us"};
  static const char* const kBoth[] = {"dispatchers.ep_overlap.all_to_all_comm_rate", "dispatchers.ep_overlap.deepep_comm_rate",
                                      "dispatchers.ep_overlap.hybridep_comm_rate"};
  const std::string path = knob.Path();
  if (model == ComputeModel::kKernels) {
    for (const char* k : kKernels) {
      if (path == k) return true;
    }
  } else {
    for (const char* k : kGemm) {
      if (path == k) return true;
    }
  }
  for (const char* k : kBoth) {
    if (path == k) return true;
  }
  return false;
}

namespace {

// The Gauss-Newton posterior of the knobs in `active` at `values`: the inverse of
// rows x sum_i w_i J_i J_i^T / sigma_i^2 + diag(1 / PriorSd^2), J_i = d ln(predicted_i) / d ln(knob)
// (central differences); returns each active knob's standard deviation of ln(value), in `active`'s
// order (the prior's where the matrix cannot be inverted).
std::vector<double> PosteriorSd(const std::vector<CalibrationRow>& rows, KnobSpec::Stage stage, const std::vector<size_t>& active,
                                const std::vector<double>& prior, const std::vector<double>& values) {
  const size_t m = active.size();
  const std::vector<double> w = RowWeights(rows, stage);
  const double n = StageRows(rows, stage);
  const std::vector<std::vector<double>> jac = LogJacobian(rows, w, active, values);
  std::vector<std::vector<double>> a(m, std::vector<double>(m, 0.0));
  std::vector<double> sd(m);
  for (size_t j = 0; j < m; ++j) {
    sd[j] = PriorSd(Table()[active[j]], prior[active[j]]);
    a[j][j] = 1.0 / (sd[j] * sd[j]);
    for (size_t l = 0; l < m; ++l) {
      for (size_t i = 0; i < rows.size(); ++i) {
        if (w[i] > 0) a[j][l] += n * w[i] * jac[i][j] * jac[i][l] / (rows[i].noise * rows[i].noise);
      }
    }
  }
  // Each diagonal element of the inverse: column j of it solves a x = e_j.
  for (size_t j = 0; j < m; ++j) {
    std::vector<double> e(m, 0.0), x;
    e[j] = 1.0;
    if (!SolveLinear(a, e, &x)) return sd;  // singular: the priors' sd
    sd[j] = std::sqrt(std::max(0.0, x[j]));
  }
  return sd;
}

}  // namespace

CalibrationFit FitCalibration(const std::vector<CalibrationRow>& rows, const std::vector<double>& prior) {
  CalibrationFit fit;
  fit.prior = prior;
  fit.values = prior;
  const size_t nk = Table().size();
  // Every knob starts at its prior, even one outside its physical bounds (a file may hold any
  // valid value): only a knob the rows fit is brought inside them (below), so what they do not
  // move keeps the value it came with.
  // The compute model of the whole-step rows (the calibration's), kernels when there are none.
  ComputeModel model = ComputeModel::kKernels;
  for (const CalibrationRow& r : rows) {
    if (r.stage == KnobSpec::kResidual) model = r.model;
  }
  const KnobSpec::Stage stages[2] = {KnobSpec::kComponent, KnobSpec::kResidual};
  std::vector<bool> determined(nk, false);
  std::vector<int> fitted_stage(nk, -1);
  std::vector<bool> considered(nk, false);
  std::vector<double> sd(nk, 0.0), sensitivity(nk, 0.0);
  for (size_t k = 0; k < nk; ++k) sd[k] = PriorSd(Table()[k], prior[k]);
  for (int s = 0; s < 2; ++s) {
    const std::vector<double> w = RowWeights(rows, stages[s]);
    fit.loss_before[s] = StageLoss(rows, stages[s], prior);
    // Stage 1: the component knobs; stage 2: the compute model's step-level knobs stage 1 left
    // undetermined. A knob the stage's rows do not move is not fitted.
    std::vector<size_t> active;
    for (size_t k = 0; k < nk; ++k) {
      const bool candidate = s == 0 ? Table()[k].stage == KnobSpec::kComponent : StepLevelKnob(Table()[k], model) && !determined[k];
      if (!candidate) continue;
      fitted_stage[k] = s;
      sensitivity[k] = Sensitivity(rows, w, fit.values, k);
      if (sensitivity[k] >= kMinSensitivity || PriorSdEffect(rows, w, fit.values, prior, k) >= kMinSensitivity) {
        active.push_back(k);
        considered[k] = true;
      }
    }
    for (size_t k : active) fit.values[k] = std::clamp(fit.values[k], LowerBound(Table()[k], prior[k]), UpperBound(Table()[k], prior[k]));
    // Fit, then keep only what the rows determine (posterior sd at most half the prior's): the
    // others go back to their priors and the rest is fitted again.
    for (int pass = 0; pass < 2 && !active.empty(); ++pass) {
      Minimize(rows, stages[s], active, prior, &fit.values);
      const std::vector<double> post = PosteriorSd(rows, stages[s], active, prior, fit.values);
      std::vector<size_t> kept;
      for (size_t j = 0; j < active.size(); ++j) {
        const size_t k = active[j];
        sd[k] = post[j];
        if (post[j] <= kDeterminedRatio * PriorSd(Table()[k], prior[k])) {
          kept.push_back(k);
        } else {
          fit.values[k] = prior[k];
        }
      }
      if (kept.size() == active.size()) break;
      active = kept;
    }
    for (size_t k : active) determined[k] = true;
  }
  for (int s = 0; s < 2; ++s) fit.loss_after[s] = StageLoss(rows, stages[s], fit.values);
  for (size_t k = 0; k < nk; ++k) {
    const KnobSpec& knob = Table()[k];
    FittedKnob f{knob, prior[k], fit.values[k], LowerBound(knob, prior[k]), UpperBound(knob, prior[k]), sensitivity[k], determined[k], false};
    f.stage = fitted_stage[k] < 0 ? knob.stage : stages[fitted_stage[k]];
    f.considered = considered[k];
    f.sd = determined[k] ? sd[k] : PriorSd(knob, prior[k]);
    f.prior_sd = PriorSd(knob, prior[k]);
    // Inside the physical bounds, and holding the value (an unfitted one may lie outside them).
    f.low80 = std::min(f.value, std::max(f.lower, f.value * std::exp(-kZ80 * f.sd)));
    f.high80 = std::max(f.value, std::min(f.upper, f.value * std::exp(kZ80 * f.sd)));
    f.hit_bound = determined[k] && (std::fabs(std::log(f.value / f.lower)) < 1e-3 || std::fabs(std::log(f.value / f.upper)) < 1e-3);
    fit.knobs.push_back(f);
  }
  return fit;
}

std::map<std::string, double> HeldOutErrors(const std::vector<CalibrationRow>& rows, const std::vector<double>& prior,
                                            const std::function<std::string(const CalibrationRow&)>& key) {
  std::vector<std::string> keys;
  for (const CalibrationRow& r : rows) {
    if (r.stage == KnobSpec::kResidual && std::find(keys.begin(), keys.end(), key(r)) == keys.end()) keys.push_back(key(r));
  }
  std::map<std::string, double> errors;
  for (const std::string& held : keys) {
    std::vector<CalibrationRow> train;
    for (const CalibrationRow& r : rows) {
      if (r.stage != KnobSpec::kResidual || key(r) != held) train.push_back(r);
    }
    const CalibrationFit fit = FitCalibration(train, prior);
    for (const CalibrationRow& r : rows) {
      if (r.stage == KnobSpec::kResidual && key(r) == held) errors[r.id] = PredictRow(r, fit.values) / r.measured - 1.0;
    }
  }
  return errors;
}

namespace {

std::string Upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

// The phase mapping (calibrate.h): empty when the measured phase `name` is fitted, else why not.
std::string PhaseNotFitted(const std::string& name, bool shared_overlapped) {
  static const std::set<std::string> fitted = {"permute", "dispatch", "grouped_gemm", "unpermute", "combine", "tp_comm"};
  if (fitted.count(name)) return "";
  if (name == "weight_gen") return "not a training phase";
  if (name == "shared_experts" && shared_overlapped) return "overlapped with the combine: not fitted";
  return "not fitted in the component stage (depends on a residual knob, or not a component phase)";
}

// The predicted time of phase (name, layer_kind, direction) of `cost`, 0 when it has none.
double PredictedPhaseUs(const CostBreakdown& cost, const std::string& name, const std::string& layer_kind, const std::string& direction) {
  for (const PhaseCost& ph : cost.phases) {
    if (PhaseName(ph.phase) == name && LayerKindName(ph.layer_kind) == layer_kind && DirectionName(ph.direction) == direction) return ph.time_us;
  }
  return 0.0;
}

double StepSecondsAt(FidelityRun run, double value) {
  run.measured.value = value;
  return MeasuredStepSeconds(run);
}

// Why `run` is left out of the fit ("" when it is fitted): dropless routing, a feature the cost
// model does not express, or hardware other than `only_hardware` (when given).
std::string RunLeftOutReason(const FidelityRun& run, const std::string& only_hardware) {
  if (std::find(run.features.begin(), run.features.end(), "dropless") != run.features.end()) return "dropless routing: out of the fit";
  if (!run.unsupported.empty()) {
    std::string why;
    for (const auto& u : run.unsupported) why += (why.empty() ? "" : "; ") + u;
    return "not expressible: " + why;
  }
  // The hardware is the cluster's own name (its preset's, or a cluster file's), not the runs file's key for it.
  if (!only_hardware.empty() && run.cluster.name != only_hardware) {
    return fmt::format("hardware {} (cluster \"{}\"): a calibration is per hardware (calibrating {}; --preset {} calibrates that one)",
                       run.cluster.name, run.cluster_name, only_hardware, run.cluster.name);
  }
  return "";
}

// The whole-step row of `run` (stage 2, seconds; its release range when given), predicted by
// SimulateStep on `prepared` (its run's settings) under `model`.
CalibrationRow StepRow(const FidelityRun& run, const std::string& preset, ComputeModel model,
                       const std::shared_ptr<PreparedRun>& prepared) {
  CalibrationRow r;
  r.id = run.id;
  r.what = "step";
  r.group = run.group;
  r.hardware = run.cluster_name;
  r.unit = "s";
  r.stage = KnobSpec::kResidual;
  r.measured = MeasuredStepSeconds(run);
  if (run.measured.range) {
    const double a = StepSecondsAt(run, run.measured.range->first), b = StepSecondsAt(run, run.measured.range->second);
    r.range = std::make_pair(std::min(a, b), std::max(a, b));
  }
  r.weight = run.weight;
  r.noise = run.measured.noise;
  r.cluster = run.cluster;
  r.calibrated_hardware = run.cluster.name == preset;
  if (!r.calibrated_hardware) r.relative_to = KnobValues(DefaultCalibration(preset));
  r.model = model;
  r.predict = [prepared, model](const ClusterSpec& c) { return SimulateStep(prepared->plan, c, prepared->routing, model).step_time_us * 1e-6; };
  return r;
}

// Appends to `rows` the stage-1 rows (us) of a user's measured phases of `run`, each a copy of
// its whole-step row `step` predicted through PredictedPhaseUs; the phases left out go to `skipped`.
void AppendPhaseRows(const FidelityRun& run, const CalibrationRow& step, const std::shared_ptr<PreparedRun>& prepared,
                     std::vector<CalibrationRow>* rows, std::vector<std::pair<std::string, std::string>>* skipped) {
  for (const FidelityRun::Phase& ph : run.phases) {
    const std::string id = run.id + ":" + ph.layer_kind + ":" + ph.direction + ":" + ph.name;
    const std::string why = PhaseNotFitted(ph.name, SharedExpertsOverlapped(prepared->plan.training.run));
    if (!why.empty() || ph.time_us == 0) {
      skipped->push_back({id, why.empty() ? "measured 0 us" : why});
      continue;
    }
    CalibrationRow p = step;
    p.id = id;
    p.what = fmt::format("phase {} ({}, {} layer)", ph.name, ph.direction, ph.layer_kind);
    p.unit = "us";
    p.stage = KnobSpec::kComponent;
    p.noise = kComponentNoise;
    p.measured = ph.time_us;
    p.range.reset();
    const ComputeModel model = step.model;
    p.predict = [prepared, ph, model](const ClusterSpec& c) {
      return PredictedPhaseUs(SimulateStep(prepared->plan, c, prepared->routing, model), ph.name, ph.layer_kind, ph.direction);
    };
    if (!(p.predict(p.cluster) > 0)) {
      skipped->push_back({id, "the cost model predicts no such phase for this layout"});
      continue;
    }
    rows->push_back(std::move(p));
  }
}

// Whether `hardware` (a component's "hardware", e.g. "2 x DGX-H100", "NVIDIA GB200") names `gpu` as a
// word of its own: "B200" is not GB200's.
bool NamesGpu(const std::string& hardware, const std::string& gpu) {
  for (size_t at = hardware.find(gpu); at != std::string::npos; at = hardware.find(gpu, at + 1)) {
    if (at == 0 || !std::isalnum(static_cast<unsigned char>(hardware[at - 1]))) return true;
  }
  return false;
}

// A flash_attention component's rows, one per sequence length of `pass` (AppendComponentRows has
// checked dtype, unit, seq and pass); `add(id, what, measured, predict)` appends one.
using AddRow = std::function<void(const std::string&, const std::string&, double, std::function<double(const ClusterSpec&)>)>;

// BF16: TFLOP/s (causal FLOPs when causal), the preset's peak x FlashAttentionEfficiency at head_dim
// (the query-key dim, as the cost model passes it), with the component's sliding window.
void FlashBf16Rows(const FidelityComponent& c, const JsonView& params, const std::vector<int64_t>& seqs, const std::string& pass,
                   const AddRow& add) {
  const double head_dim = static_cast<double>(params.Int("head_dim"));
  const bool causal = params.Bool("causal"), backward = pass == "bwd";
  // A sliding window (keys, causal only): its FLOPs and keys per query (gemm_efficiency.h CausalAttendedKeys).
  const double window = static_cast<double>(params.IntOr("sliding_window", 0, 1));
  if (window > 0 && !causal) params.Fail("sliding_window", "applies to causal attention only (\"causal\": true)");
  for (size_t i = 0; i < c.values.size(); ++i) {
    const double seq = static_cast<double>(seqs[i]);
    add(fmt::format("{}[{}]", c.id, i),
        window > 0 ? fmt::format("flash attention {} at head dim {}, seq {}, window {}", pass, head_dim, seq, window)
                   : fmt::format("flash attention {} at head dim {}, seq {}", pass, head_dim, seq),
        c.values[i], [=](const ClusterSpec& cl) {
          return cl.dense_bf16_tflops * FlashAttentionEfficiency(head_dim, seq, causal, backward, cl.knobs.compute, window);
        });
  }
}

// FP8 (TransformerEngine's FP8 dot-product attention): one pass's time in ms, FlashCoreUs of one
// causal attention layer of `heads` heads at head_dim over batch x seq tokens with its window, on
// the GPU's FP8 kernels (knobs.h FlashKnobs: fp8_speedup, and below head dim 128
// fp8_small_head_fwd_speedup / fp8_small_head_bwd_efficiency).
void FlashFp8Rows(const FidelityComponent& c, const JsonView& params, const std::vector<int64_t>& seqs, const std::string& pass,
                  const AddRow& add) {
  if (!params.Bool("causal")) params.Fail("causal", "FP8 attention components are causal (the cost model's core)");
  ModelSpec layer;
  layer.num_hidden_layers = 1;
  layer.attention.kind = AttentionKind::kGqa;
  layer.attention.head_dim = params.Int("head_dim", 1);
  layer.attention.num_attention_heads = params.Int("heads", 1);
  layer.attention.sliding_window = params.IntOr("sliding_window", 0, 1);
  if (layer.attention.sliding_window > 0) layer.sliding_attention_layers = {true};
  const double heads = static_cast<double>(layer.attention.num_attention_heads);
  const double batch = static_cast<double>(params.Int("batch", 1));
  const bool backward = pass == "bwd";
  for (size_t i = 0; i < c.values.size(); ++i) {
    const double seq = static_cast<double>(seqs[i]);
    add(fmt::format("{}[{}]", c.id, i),
        fmt::format("FP8 flash attention {} at head dim {}, seq {}{}, ms", pass, layer.attention.head_dim, seq,
                    layer.attention.sliding_window > 0 ? fmt::format(", window {}", layer.attention.sliding_window) : ""),
        c.values[i], [=](const ClusterSpec& cl) {
          GemmPrecision fp8;
          fp8.fp8_attention = true;
          fp8.fp8_small_head_bwd_full_causal = cl.fp8_small_head_bwd_full_causal;  // the GPU's kernels
          return FlashCoreUs(layer, batch * seq, seq, heads, 1.0, backward, cl.dense_bf16_tflops, cl.knobs.compute, fp8) / 1000.0;
        });
  }
}

// Appends to `rows` the stage-1 rows (in the measurement's unit) of component measurement `ci` of
// `set` on `preset_cluster` (the kinds a knob models: calibrate.h RowsFromFidelitySet); a
// measurement on another GPU than `gpu`, or of a kind no knob models, goes to `skipped`. Throws
// dockyard::Error naming the component for a missing or mistyped parameter.
void AppendComponentRows(const FidelitySet& set, size_t ci, const std::string& gpu, const std::string& preset,
                         const ClusterSpec& preset_cluster, ComputeModel model, std::vector<CalibrationRow>* rows,
                         std::vector<std::pair<std::string, std::string>>* skipped) {
  const FidelityComponent& c = set.components[ci];
  if (!NamesGpu(c.hardware, gpu)) {
    skipped->push_back({c.id, fmt::format("hardware \"{}\" is not the preset's {}", c.hardware, gpu)});
    return;
  }
  const JsonView params(&c.params, set.file, fmt::format("/components/{}/params", ci));
  CalibrationRow base;
  base.group = "component " + c.source;
  base.hardware = preset;
  base.unit = c.unit;
  base.stage = KnobSpec::kComponent;
  base.noise = kComponentNoise;
  base.cluster = preset_cluster;
  base.calibrated_hardware = true;
  base.model = model;
  auto add = [&](const std::string& id, const std::string& what, double measured, std::function<double(const ClusterSpec&)> predict) {
    CalibrationRow r = base;
    r.id = id;
    r.what = what;
    r.measured = measured;
    r.predict = std::move(predict);
    rows->push_back(std::move(r));
  };
  try {
    if (c.kind == "all_to_all" && params.StringOr("scope", "") == "network" && c.values.size() == 1) {
      add(c.id, "network all-to-all bandwidth", c.values[0], [](const ClusterSpec& cl) { return cl.knobs.links.network_gbps; });
    } else if (c.kind == "nvlink_collective" && c.values.size() == 1) {
      add(c.id, "NVLink collective bandwidth", c.values[0], [](const ClusterSpec& cl) { return cl.knobs.links.intra_node_gbps; });
    } else if (c.kind == "grouped_gemm" && params.StringOr("dtype", "") == "bf16" && c.values.size() == 1) {
      const double m = static_cast<double>(params.Int("m"));
      if (model == ComputeModel::kKernels) {  // by shape: N and K are required
        const double n = static_cast<double>(params.Int("n")), k = static_cast<double>(params.Int("k"));
        add(c.id, fmt::format("grouped GEMM at {} x {} x {}", m, n, k), c.values[0],
            [m, n, k](const ClusterSpec& cl) { return cl.dense_bf16_tflops * GemmShapeEfficiency(m, n, k, cl.knobs.compute); });
      } else {
        add(c.id, fmt::format("grouped GEMM at {} rows", m), c.values[0],
            [m](const ClusterSpec& cl) { return cl.dense_bf16_tflops * GroupedGemmEfficiency(m, cl.knobs.compute); });
      }
    } else if (c.kind == "grouped_gemm_fraction" && model == ComputeModel::kKernels) {
      skipped->push_back({c.id, "a rule of thumb without the GEMM's N and K: the kernel-level model's efficiency needs the shape"});
    } else if (c.kind == "grouped_gemm_fraction") {
      const std::vector<int64_t> rows_per_expert = params.IntList("rows_per_expert", 1);
      if (rows_per_expert.size() != c.values.size()) {
        params.Fail("rows_per_expert", fmt::format("needs one entry per value ({}), got {}", c.values.size(), rows_per_expert.size()));
      }
      for (size_t i = 0; i < c.values.size(); ++i) {
        const double m = static_cast<double>(rows_per_expert[i]);
        add(fmt::format("{}[{}]", c.id, i), fmt::format("grouped-GEMM fraction at {} rows", m), c.values[i],
            [m](const ClusterSpec& cl) { return GroupedGemmEfficiency(m, cl.knobs.compute); });
      }
    } else if (c.kind == "flash_attention") {
      // Both dtypes: one value per sequence length of one pass.
      const std::string dtype = params.StringOr("dtype", "");
      if (dtype != "bf16" && dtype != "fp8") {
        params.Fail("dtype", fmt::format("flash_attention components are \"bf16\" (TFLOP/s) or \"fp8\" (ms), got {}",
                                         params.Has("dtype") ? "\"" + dtype + "\"" : "none"));
      }
      const std::string unit = dtype == "bf16" ? "TFLOP/s" : "ms";
      if (c.unit != unit) {
        throw Error(fmt::format("unit \"{}\": {} attention components give {}", c.unit, dtype == "bf16" ? "BF16" : "FP8",
                                dtype == "bf16" ? "TFLOP/s (\"TFLOP/s\")" : "a pass's time in \"ms\""));
      }
      const std::vector<int64_t> seqs = params.IntList("seq", 1);
      if (seqs.size() != c.values.size()) params.Fail("seq", fmt::format("needs one entry per value ({}), got {}", c.values.size(), seqs.size()));
      const std::string pass = params.String("pass");
      if (pass != "fwd" && pass != "bwd") params.Fail("pass", fmt::format("\"{}\" is not fwd or bwd", pass));
      if (dtype == "bf16") {
        FlashBf16Rows(c, params, seqs, pass, add);
      } else {
        FlashFp8Rows(c, params, seqs, pass, add);
      }
    } else if (c.kind == "kernel_floor" && c.values.size() == 1) {
      add(c.id, "memory-bound kernel floor", c.values[0], [](const ClusterSpec& cl) { return cl.knobs.compute.memory_bound.floor_us; });
    } else {
      skipped->push_back({c.id, fmt::format("{}: no knob models it yet", c.kind)});
    }
  } catch (const Error& e) {
    throw Error(fmt::format("component {}: {}", c.id, e.what()));
  }
}

// The model a dockyard-run report's /model/source names (relative to the report's folder when it
// is not found as given); `source` gets the path read. Throws naming /model/source.
ModelSpec ReportModel(const JsonView& m, const std::string& file, std::string* source) {
  *source = m.String("source");
  if (!std::ifstream(*source).good()) {
    const size_t slash = file.rfind('/');
    if (slash != std::string::npos && !source->empty() && (*source)[0] != '/') *source = file.substr(0, slash) + "/" + *source;
  }
  ModelSpec model;
  try {
    model = LoadModel(*source);
  } catch (const Error& e) {
    m.Fail("source", e.what());
  }
  return model;
}

// The plan as dockyard-run ran it (the report `v`'s /layout and /run: world size, ep, expert TP,
// dispatcher, oep; seq_len = tokens_per_rank, one micro-batch; `cluster`'s NVLink domain as the
// node). Throws naming /layout when it does not validate, /run/tokens_per_rank when it does not
// match the plan's routed tokens.
std::shared_ptr<Plan> ReportPlan(const JsonView& v, const JsonView& layout, const JsonView& run, const ModelSpec& model,
                                 const ClusterSpec& cluster) {
  ParallelDimsOptions d;
  d.world_size = layout.Int("world_size");
  d.ep = layout.Int("ep");
  d.etp = layout.Int("expert_tp");
  TrainingConfig t;
  t.seq_len = run.Int("tokens_per_rank");
  t.micro_batch_size = 1;
  t.num_microbatches = 1;
  t.dispatcher = ParseDispatcher(layout.String("dispatcher"), layout.Where("dispatcher"));
  if (t.dispatcher == Dispatcher::kDeredundency) t.oep = layout.Int("oep");
  auto plan = std::make_shared<Plan>();
  try {
    ValidateDimsForModel(ParallelDims::Build(d), model);
    *plan = BuildPlan(model, d, t, MachineOf(cluster, 0));  // the time model's locality unit (network.h)
  } catch (const Error& e) {
    v.Fail("layout", e.what());
  }
  if (ComputeWorkload(*plan).routed_tokens != t.seq_len) {
    run.Fail("tokens_per_rank",
             fmt::format("{} tokens per rank do not match the rebuilt plan's routed tokens {} (tensor-parallel runs are not fitted yet)",
                         t.seq_len, ComputeWorkload(*plan).routed_tokens));
  }
  return plan;
}

}  // namespace

std::vector<CalibrationRow> RowsFromFidelitySet(const FidelitySet& set, const std::string& preset,
                                                std::vector<std::pair<std::string, std::string>>* skipped, const std::string& only_hardware,
                                                ComputeModel model) {
  const ClusterSpec preset_cluster = ClusterPreset(preset);  // throws for an unknown preset
  std::vector<CalibrationRow> rows;
  for (const FidelityRun& run : set.runs) {
    if (const std::string why = RunLeftOutReason(run, only_hardware); !why.empty()) {
      skipped->push_back({run.id, why});
      continue;
    }
    std::shared_ptr<PreparedRun> prepared;
    try {
      prepared = std::make_shared<PreparedRun>(PrepareRun(run, set.models.at(run.model)));
    } catch (const Error& e) {
      // The plan's rules speak in command-line flags; name the run whose fields set them.
      throw Error(fmt::format("run {}: {}: the plan of its layout, batch, precision, recompute, dispatcher and features: {}", run.id,
                              set.file, e.what()));
    }
    CalibrationRow r = StepRow(run, preset, model, prepared);
    AppendPhaseRows(run, r, prepared, &rows, skipped);  // a user's measured phases: stage-1 rows
    rows.push_back(std::move(r));
  }

  const std::string gpu = Upper(preset.substr(0, preset.find('-')));
  for (size_t ci = 0; ci < set.components.size(); ++ci) AppendComponentRows(set, ci, gpu, preset, preset_cluster, model, &rows, skipped);
  return rows;
}

std::vector<CalibrationRow> RowsFromRunReport(const Json& report, const std::string& file, const ClusterSpec& cluster,
                                              std::vector<std::pair<std::string, std::string>>* skipped, ComputeModel compute_model) {
  const JsonView v(&report, file, "");
  const std::string kind = v.String("kind");
  if (kind != "dockyard_run") v.Fail("kind", fmt::format("must be \"dockyard_run\" (a dockyard-run --json report), got \"{}\"", kind));
  const JsonView m = v.Object("model");
  std::string source;
  const ModelSpec model = ReportModel(m, file, &source);
  const JsonView layout = v.Object("layout");
  const JsonView run = v.Object("run");
  const std::shared_ptr<Plan> plan = ReportPlan(v, layout, run, model, cluster);
  RoutingSpec routing = ParseRoutingSpec("uniform");
  routing.seed = static_cast<uint64_t>(run.Int("seed", 0));
  auto sampled = std::make_shared<RoutingResult>(SampleRoutingForPlan(*plan, routing, 1));
  const bool overlap = run.Has("overlap_shared_experts") && run.Object("overlap_shared_experts").BoolOr("applied", false);

  const JsonView measured = v.Object("measured");
  const Json& phases = measured.value().contains("phases") ? measured.value().at("phases") : Json();
  if (!phases.is_array()) measured.Fail("phases", fmt::format("must be a list of phases, got {}", JsonValueText(phases)));
  std::string base = file.substr(file.rfind('/') == std::string::npos ? 0 : file.rfind('/') + 1);
  std::vector<CalibrationRow> rows;
  for (size_t i = 0; i < phases.size(); ++i) {
    const JsonView p(&phases[i], file, fmt::format("/measured/phases/{}", i));
    const std::string name = p.String("name");
    const double us = p.Number("time_us");
    if (!(us >= 0) || !std::isfinite(us)) p.Fail("time_us", fmt::format("must be a time >= 0, got {}", us));
    const std::string id = base + ":" + name;
    const std::string why = PhaseNotFitted(name, overlap);
    if (!why.empty()) {
      skipped->push_back({id, why});
      continue;
    }
    if (us == 0) {
      skipped->push_back({id, "measured 0 us (the layout has no such phase)"});
      continue;
    }
    CalibrationRow r;
    r.id = id;
    r.what = "phase " + name + " (forward, MoE layer)";
    r.group = fmt::format("dockyard-run {} {}", run.String("backend"), m.StringOr("name", source));
    r.hardware = cluster.name;
    r.unit = "us";
    r.stage = KnobSpec::kComponent;
    r.noise = kComponentNoise;
    r.measured = us;
    r.cluster = cluster;
    r.calibrated_hardware = true;
    r.model = compute_model;
    r.predict = [plan, sampled, name, compute_model](const ClusterSpec& c) {
      return PredictedPhaseUs(SimulateStep(*plan, c, *sampled, compute_model), name, "moe", "forward");
    };
    if (!(r.predict(r.cluster) > 0)) {
      skipped->push_back({id, "the cost model predicts no such phase for this layout"});
      continue;
    }
    rows.push_back(std::move(r));
  }
  return rows;
}

std::string CalibrationFitToText(const std::vector<CalibrationRow>& rows, const CalibrationFit& fit,
                                 const std::map<std::string, double>* held_out) {
  auto pct = [](double x) { return fmt::format("{:+.1f} %", 100 * x); };
  std::string out;
  std::set<std::string> groups[2];
  for (const CalibrationRow& r : rows) groups[r.stage == KnobSpec::kComponent ? 0 : 1].insert(r.group);
  out +=
      fmt::format("Rows: {} ({} groups) component / phase rows for stage 1, {} ({} groups) whole-step rows for stage 2\n\n",
                  std::count_if(rows.begin(), rows.end(), [](const CalibrationRow& r) { return r.stage == KnobSpec::kComponent; }),
                  groups[0].size(),
                  std::count_if(rows.begin(), rows.end(), [](const CalibrationRow& r) { return r.stage == KnobSpec::kResidual; }),
                  groups[1].size());
  out +=
      "| row | stage | measures | group | measured | unit | before | error | after | error |\n|---|---|---|---|---|---|---|---|---|---|\n";
  double sum[2] = {0, 0}, mx[2] = {0, 0};
  int64_t n = 0;
  for (const CalibrationRow& r : rows) {
    const double before = PredictRow(r, fit.prior), after = PredictRow(r, fit.values);
    out += fmt::format("| {} | {} | {} | {} | {:.4g}{} | {} | {:.4g} | {} | {:.4g} | {} |\n", r.id,
                       r.stage == KnobSpec::kComponent ? 1 : 2, r.what, r.group, r.measured,
                       r.range ? fmt::format(" [{:.4g}, {:.4g}]", r.range->first, r.range->second) : "", r.unit, before,
                       pct(before / r.measured - 1), after, pct(after / r.measured - 1));
    if (r.stage == KnobSpec::kResidual) {
      const double e[2] = {std::fabs(before / r.measured - 1), std::fabs(after / r.measured - 1)};
      for (int i = 0; i < 2; ++i) {
        sum[i] += e[i];
        mx[i] = std::max(mx[i], e[i]);
      }
      ++n;
    }
  }
  if (n > 0) {
    out += fmt::format("\nwhole-step rows, in-sample: mean |error| {:.1f} % -> {:.1f} %, max |error| {:.1f} % -> {:.1f} %\n",
                       100 * sum[0] / n, 100 * sum[1] / n, 100 * mx[0], 100 * mx[1]);
  }
  out += fmt::format("loss stage 1: {:.4g} -> {:.4g}; stage 2: {:.4g} -> {:.4g}\n\n", fit.loss_before[0], fit.loss_after[0],
                     fit.loss_before[1], fit.loss_after[1]);
  out +=
      "| knob | unit | stage | prior | fitted | 80 % interval | sd / prior sd | bounds | hit bound | sensitivity | status |\n"
      "|---|---|---|---|---|---|---|---|---|---|---|\n";
  std::string undetermined;
  for (const FittedKnob& k : fit.knobs) {
    out += fmt::format("| {} | {} | {} | {:.4g} | {:.4g} | [{:.4g}, {:.4g}] | {:.2f} | [{:.4g}, {:.4g}] | {} | {:.3f} | {} |\n",
                       k.knob.Path(), k.knob.unit, !k.considered ? "-" : k.stage == KnobSpec::kComponent ? "component" : "step", k.prior,
                       k.value, k.low80, k.high80, k.prior_sd > 0 ? k.sd / k.prior_sd : 1.0, k.lower, k.upper, k.hit_bound ? "YES" : "no",
                       k.sensitivity,
                       k.determined ? "fitted" : k.considered ? "undetermined (prior)" : "not moved by these rows (prior)");
    if (!k.determined) undetermined += (undetermined.empty() ? "" : ", ") + k.knob.Path();
  }
  out += fmt::format("\nundetermined (left at their priors): {}\n", undetermined.empty() ? "none" : undetermined);
  if (held_out != nullptr) {
    double s = 0, m = 0;
    std::string worst;
    for (const auto& [id, e] : *held_out) {
      s += std::fabs(e);
      if (std::fabs(e) >= m) {
        m = std::fabs(e);
        worst = id;
      }
    }
    if (held_out->empty()) {
      out += "group-held-out error: no whole-step rows\n";
    } else {
      out += fmt::format(
          "group-held-out error (fit without the row's group, predict it): mean |error| {:.1f} %, max {:.1f} % ({}) over {} rows\n",
          100 * s / static_cast<double>(held_out->size()), 100 * m, worst, held_out->size());
    }
  }
  return out;
}

std::string FidelityFitToMarkdown(const FidelitySet& set, const std::string& preset, ComputeModel model) {
  std::vector<std::pair<std::string, std::string>> skipped;
  const std::vector<CalibrationRow> rows = RowsFromFidelitySet(set, preset, &skipped, "", model);
  const std::vector<double> prior = KnobValues(DefaultCalibration(preset));
  const CalibrationFit fit = FitCalibration(rows, prior);
  const auto by_group = HeldOutErrors(rows, prior, [](const CalibrationRow& r) { return r.group; });
  const auto by_hardware = HeldOutErrors(rows, prior, [](const CalibrationRow& r) { return r.hardware; });
  const char* names[4] = {"prior (no fit)", "in-sample fit", "group-held-out", "leave-one-hardware-out"};
  std::vector<FidelityPrediction> variants[4];
  std::string table =
      "| id | group | hardware | measured s | prior | in-sample | group-held-out | hardware-held-out "
      "|\n|---|---|---|---|---|---|---|---|\n";
  for (const CalibrationRow& r : rows) {
    if (r.stage != KnobSpec::kResidual) continue;
    const double err[4] = {PredictRow(r, prior) / r.measured - 1, PredictRow(r, fit.values) / r.measured - 1, by_group.at(r.id),
                           by_hardware.at(r.id)};
    for (int v = 0; v < 4; ++v) {
      FidelityPrediction p;
      p.id = r.id;
      p.measured_s = r.measured;
      p.predicted_s = r.measured * (1 + err[v]);
      p.error = err[v];
      variants[v].push_back(p);
    }
    table += fmt::format("| {} | {} | {} | {:.3f} | {:+.1f} % | {:+.1f} % | {:+.1f} % | {:+.1f} % |\n", r.id, r.group, r.hardware,
                         r.measured, 100 * err[0], 100 * err[1], 100 * err[2], 100 * err[3]);
  }
  std::string out = fmt::format(
      "\n### Fitted (dockyard-plan calibrate's two-stage fit over this file, {} priors; other hardware on its own preset's, "
      "moved by the fit's relative change)\n\n",
      preset);
  out +=
      "| predictions | rows | mean abs error | max abs error | ordered pairs right (within groups, > 10 % apart) "
      "|\n|---|---|---|---|---|\n";
  for (int v = 0; v < 4; ++v) {
    double sum = 0, mx = 0;
    for (const auto& p : variants[v]) {
      sum += std::fabs(p.error);
      mx = std::max(mx, std::fabs(p.error));
    }
    int64_t right = 0, pairs = 0;
    for (const auto& g : SummarizeFidelityGroups(set, variants[v])) {
      right += g.concordant_pairs;
      pairs += g.ordered_pairs;
    }
    out += fmt::format("| {} | {} | {:.1f} % | {:.1f} % | {} / {} |\n", names[v], variants[v].size(),
                       variants[v].empty() ? 0.0 : 100 * sum / static_cast<double>(variants[v].size()), 100 * mx, right, pairs);
  }
  out += "\n" + table;
  out += "\nPer group, group-held-out predictions:\n\n" + FidelityGroupTable(SummarizeFidelityGroups(set, variants[2]));
  out += "\nThe fit (knobs, component rows):\n\n" + CalibrationFitToText(rows, fit, nullptr);
  return out;
}

}  // namespace dockyard
