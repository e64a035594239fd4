// The per-layer sampler's construction: target inclusion by water-filling, per-draw weights
// calibrated so that successive sampling includes each expert at its target, alias tables (see
// layer_sampler.h and routing.h).
#include "planner/routing/layer_sampler.h"

#include <algorithm>
#include <cmath>

namespace dockyard {
namespace routing_detail {

namespace {

// An expert whose target inclusion probability is above 1 - kForceEpsilon is picked by every
// token (it would miss fewer than one token in a million).
constexpr double kForceEpsilon = 1e-6;

// Target inclusion probabilities (sum top_k, each in [0, 1]) from weights: pi = min(1, c * w)
// (water-filling); with fewer than top_k positive weights, the positive ones get 1 and the rest
// of the picks go evenly to the zero-weight experts.
std::vector<double> TargetInclusion(const std::vector<double>& w, int64_t k) {
  const size_t n = w.size();
  std::vector<double> pi(n, 0.0);
  std::vector<size_t> order;
  for (size_t e = 0; e < n; ++e) {
    if (w[e] > 0) order.push_back(e);
  }
  const int64_t positive = static_cast<int64_t>(order.size());
  if (positive <= k) {
    for (size_t e : order) pi[e] = 1.0;
    if (static_cast<int64_t>(n) > positive) {
      const double rest = static_cast<double>(k - positive) / static_cast<double>(static_cast<int64_t>(n) - positive);
      for (size_t e = 0; e < n; ++e) {
        if (w[e] <= 0) pi[e] = rest;
      }
    }
    return pi;
  }
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return w[a] > w[b]; });
  // suffix[m] = sum of the weights order[m..], summed from the smallest for accuracy.
  std::vector<double> suffix(order.size() + 1, 0.0);
  for (size_t m = order.size(); m-- > 0;) suffix[m] = suffix[m + 1] + w[order[m]];
  size_t m = 0;
  while (static_cast<int64_t>(m) < k && suffix[m] > 0 &&
         static_cast<double>(k - static_cast<int64_t>(m)) * w[order[m]] / suffix[m] >= 1.0 - kForceEpsilon) {
    pi[order[m]] = 1.0;
    ++m;
  }
  if (static_cast<int64_t>(m) < k && suffix[m] > 0) {
    const double c = static_cast<double>(k - static_cast<int64_t>(m)) / suffix[m];
    for (size_t j = m; j < order.size(); ++j) pi[order[j]] = std::min(1.0, c * w[order[j]]);
  }
  return pi;
}

// Inclusion probabilities of successive sampling (k draws without replacement, per-draw
// weights w) by the exponential-clock representation: expert i has a clock X_i ~ Exp(w_i), the
// k first clocks are picked, so
//   pi_i = integral_0^inf w_i exp(-w_i t) P(fewer than k other clocks before t) dt.
// The integral is taken over u = ln t by the trapezoid rule (exponentially accurate for this
// smooth, doubly decaying integrand); the Poisson-binomial count of the other clocks comes from
// prefix and suffix distributions truncated at k.
std::vector<double> SuccessiveInclusion(const std::vector<double>& weights, int64_t k) {
  const size_t n = weights.size();
  const size_t kk = static_cast<size_t>(k);
  double total = 0;
  for (double x : weights) total += x;
  std::vector<double> w(n);
  for (size_t i = 0; i < n; ++i) w[i] = weights[i] / total;
  std::vector<double> sorted = w;
  std::sort(sorted.begin(), sorted.end(), std::greater<double>());
  const double w_max = sorted[0];
  // The (k+1)-th largest weight, floored so that the integration range stays finite.
  const double w_tail = std::max(sorted[std::min(n - 1, kk)], 1e-280);
  // Below t_lo every integrand is under w_i t_lo <= 1e-13; above t_hi at least k of the k+1
  // heaviest other clocks have run out, except with probability (k+1) e^-40.
  const double u_lo = std::log(1e-13 / w_max);
  const double u_hi = std::log((40.0 + std::log(static_cast<double>(kk + 1))) / w_tail);
  const double step_target = 0.125;
  const int64_t steps = std::min<int64_t>(1 << 16, std::max<int64_t>(16, static_cast<int64_t>(std::ceil((u_hi - u_lo) / step_target))));
  const double h = (u_hi - u_lo) / static_cast<double>(steps);
  std::vector<double> pi(n, 0.0), fired(n), waiting(n), pre(kk), suffix_cum((n + 1) * kk), dist(kk);
  for (int64_t s = 0; s <= steps; ++s) {
    const double t = std::exp(u_lo + h * static_cast<double>(s));
    for (size_t j = 0; j < n; ++j) {
      waiting[j] = std::exp(-w[j] * t);
      fired[j] = -std::expm1(-w[j] * t);
    }
    // Suffix distributions of the count of fired clocks among j..n-1, as cumulative P(<= b).
    std::fill(dist.begin(), dist.end(), 0.0);
    dist[0] = 1.0;
    for (size_t b = 0; b < kk; ++b) suffix_cum[n * kk + b] = 1.0;
    for (size_t j = n; j-- > 0;) {
      for (size_t c = kk; c-- > 1;) dist[c] = dist[c] * waiting[j] + dist[c - 1] * fired[j];
      dist[0] *= waiting[j];
      double cum = 0;
      for (size_t b = 0; b < kk; ++b) {
        cum += dist[b];
        suffix_cum[j * kk + b] = cum;
      }
    }
    std::fill(pre.begin(), pre.end(), 0.0);
    pre[0] = 1.0;
    const double weight = (s == 0 || s == steps) ? 0.5 * h : h;
    for (size_t i = 0; i < n; ++i) {
      double fewer = 0;  // P(fewer than k of the others fired)
      const double* suf = &suffix_cum[(i + 1) * kk];
      for (size_t a = 0; a < kk; ++a) fewer += pre[a] * suf[kk - 1 - a];
      pi[i] += weight * w[i] * t * waiting[i] * fewer;
      for (size_t c = kk; c-- > 1;) pre[c] = pre[c] * waiting[i] + pre[c - 1] * fired[i];
      pre[0] *= waiting[i];
    }
  }
  return pi;
}

// Per-draw weights whose successive-sampling inclusion probabilities are `target` (each in
// (0, 1), summing to k): start from -ln(1 - target) (exact if the k-th clock always stopped at
// t = 1) and correct by the same transform of the error until the largest error is below 1e-8
// (a share error far below the sampling noise of any simulated batch).
std::vector<double> CalibrateWeights(const std::vector<double>& target, int64_t k, double* error) {
  const size_t n = target.size();
  std::vector<double> w(n);
  for (size_t i = 0; i < n; ++i) w[i] = -std::log1p(-target[i]);
  *error = 1.0;
  for (int iter = 0; iter < 60; ++iter) {
    const std::vector<double> pi = SuccessiveInclusion(w, k);
    double worst = 0;
    for (size_t i = 0; i < n; ++i) worst = std::max(worst, std::fabs(pi[i] - target[i]));
    *error = worst;
    if (worst < 1e-8) break;
    double total = 0;
    for (size_t i = 0; i < n; ++i) {
      const double got = std::min(std::max(pi[i], 1e-300), 1.0 - 1e-15);
      w[i] *= std::log1p(-target[i]) / std::log1p(-got);
      total += w[i];
    }
    for (double& x : w) x /= total;
  }
  return w;
}

void BuildAlias(LayerSampler& s) {
  s.threshold.resize(s.prob.size());
  s.alias.resize(s.prob.size());
  routing_detail::BuildAliasTable(s.prob.data(), s.prob.size(), s.threshold.data(), s.alias.data());
}

}  // namespace

LayerSampler BuildSampler(const std::vector<double>& weights, int64_t top_k) {
  LayerSampler s;
  s.num_experts = static_cast<int64_t>(weights.size());
  s.top_k = top_k;
  const std::vector<double> pi = TargetInclusion(weights, top_k);
  s.share.resize(pi.size());
  std::vector<double> free_target;
  for (size_t e = 0; e < pi.size(); ++e) {
    s.share[e] = pi[e] / static_cast<double>(top_k);
    if (pi[e] >= 1.0) {
      s.forced.push_back(static_cast<int32_t>(e));
    } else if (pi[e] > 0) {
      s.free_ids.push_back(static_cast<int32_t>(e));
      free_target.push_back(pi[e]);
    }
  }
  s.free_k = top_k - static_cast<int64_t>(s.forced.size());
  const int64_t n = static_cast<int64_t>(s.free_ids.size());
  if (s.free_k <= 0 || n == 0) {
    s.free_k = 0;
    s.free_ids.clear();
    s.mode = DrawMode::kNone;
    return s;
  }
  if (n <= s.free_k) {  // cannot happen with exact arithmetic (targets < 1 summing to free_k)
    for (int32_t e : s.free_ids) {
      s.forced.push_back(e);
      s.share[static_cast<size_t>(e)] = 1.0 / static_cast<double>(top_k);
    }
    std::sort(s.forced.begin(), s.forced.end());
    s.free_ids.clear();
    s.free_k = 0;
    s.mode = DrawMode::kNone;
    return s;
  }
  const auto [lo, hi] = std::minmax_element(free_target.begin(), free_target.end());
  if (*hi - *lo <= 1e-12 * *hi) {
    s.mode = 2 * s.free_k <= n ? DrawMode::kUniformReject : DrawMode::kUniformShuffle;
    return s;
  }
  s.mode = DrawMode::kWeighted;
  std::vector<double> w = CalibrateWeights(free_target, s.free_k, &s.calibration_error);
  double total = 0;
  for (double x : w) total += x;
  s.prob.resize(w.size());
  for (size_t i = 0; i < w.size(); ++i) s.prob[i] = w[i] / total;
  BuildAlias(s);
  return s;
}

LayerSampler Permuted(const LayerSampler& base, const std::vector<int32_t>& perm) {
  LayerSampler s = base;
  for (auto& e : s.forced) e = perm[e];
  std::sort(s.forced.begin(), s.forced.end());
  for (auto& e : s.free_ids) e = perm[e];
  for (size_t e = 0; e < base.share.size(); ++e) s.share[perm[e]] = base.share[e];
  return s;
}

}  // namespace routing_detail
}  // namespace dockyard
