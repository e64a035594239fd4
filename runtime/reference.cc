// The single-process reference (reference.h).
#include "runtime/reference.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <thread>

#include "runtime/cpu/cpu_backend.h"
#include "runtime/cpu/cpu_ops.h"
#include "runtime/data.h"
#include "runtime/expert_ffn.h"
#include "runtime/pipeline.h"
#include "runtime/router.h"

namespace dockyard::runtime {

namespace {

// Runs fn(i) for i in [0, n) on `threads` threads (dynamic assignment).
template <typename F>
void ParallelFor(int64_t n, int threads, F&& fn) {
  std::atomic<int64_t> next{0};
  auto worker = [&] {
    for (int64_t i = next++; i < n; i = next++) fn(i);
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (auto& t : pool) t.join();
}

struct SourceRouting {
  int64_t tokens = 0;
  std::vector<float> x;          // [T, D]
  std::vector<int64_t> experts;  // [T, k]
  std::vector<float> weights;    // [T, k]
  std::vector<float> rows;       // [T * k, D]: expert output of slot (t, j)
};

// The router weights [E, D], generated as the ranks generate them.
std::vector<float> RouterWeightsOf(cpu::CpuOps& ops, const RunConfig& c) {
  const int64_t D = c.hidden, E = c.num_experts;
  std::vector<float> router_w(static_cast<size_t>(E * D));
  WeightRowsArgs w;
  w.seed = c.options.seed;
  w.layer = c.layer;
  w.matrix = kMatrixRouter;
  w.row_end = E;
  w.col_end = D;
  w.scale = RouterScale(D);
  w.out = router_w.data();
  ops.FillWeightRows(w);
  return router_w;
}

// Source i's tokens, their experts and router weights (the same ops as the ranks); its expert
// rows zeroed.
void RouteSource(cpu::CpuOps& ops, const RunConfig& c, const std::vector<float>& router_w, const std::vector<float>& bias, int64_t i,
                 SourceRouting& s) {
  const int64_t D = c.hidden, E = c.num_experts, k = c.top_k;
  const int64_t T = c.tokens_of_source[static_cast<size_t>(i)];
  s.tokens = T;
  s.x.resize(static_cast<size_t>(T * D));
  ops.FillTokens(c.options.seed, c.sources[static_cast<size_t>(i)], 0, T, D, s.x.data());
  std::vector<float> scores(static_cast<size_t>(T * E)), select;
  RouterScores(ops, c, s.x.data(), router_w.data(), T, scores.data());
  s.experts.resize(static_cast<size_t>(T * k));
  if (c.routing_model) {
    s.experts = AssignedExperts(c, *c.routing_model, c.sources[static_cast<size_t>(i)], T);
  } else {
    select.resize(scores.size());
    SelectExperts(ops, c, scores.data(), bias.data(), T, select.data(), s.experts.data());
  }
  s.weights.resize(static_cast<size_t>(T * k));
  ops.RouterWeights(scores.data(), s.experts.data(), T, E, k, c.norm_topk_prob, static_cast<float>(c.routed_scaling_factor),
                    s.weights.data());
  s.rows.assign(static_cast<size_t>(T * k * D), 0.0f);
}

// (source index, slot) pairs per expert, in source then slot order.
using ExpertPairs = std::vector<std::vector<std::pair<int64_t, int64_t>>>;

// Every (source, slot) pair grouped by expert; counts the tokens per expert into `out`.
ExpertPairs GroupByExpert(const std::vector<SourceRouting>& src, int64_t num_experts, int64_t k, ReferenceOutput& out) {
  out.tokens_per_expert.assign(static_cast<size_t>(num_experts), 0);
  ExpertPairs pairs(static_cast<size_t>(num_experts));
  for (size_t i = 0; i < src.size(); ++i) {
    const SourceRouting& s = src[i];
    for (int64_t slot = 0; slot < s.tokens * k; ++slot) {
      const int64_t e = s.experts[static_cast<size_t>(slot)];
      pairs[static_cast<size_t>(e)].push_back({static_cast<int64_t>(i), slot});
      ++out.tokens_per_expert[static_cast<size_t>(e)];
    }
  }
  return pairs;
}

// Expert e over the full intermediate dim on the rows routed to it; writes each output row into
// its source's slot.
void RunExpert(cpu::CpuOps& ops, cpu::CpuDevice& device, const RunConfig& c, int64_t e,
               const std::vector<std::pair<int64_t, int64_t>>& list, std::vector<SourceRouting>& src) {
  const int64_t D = c.hidden, k = c.top_k;
  const int64_t n = static_cast<int64_t>(list.size());
  if (n == 0) return;
  std::vector<float> xe(static_cast<size_t>(n * D)), ye(static_cast<size_t>(n * D));
  for (int64_t r = 0; r < n; ++r) {
    const SourceRouting& s = src[static_cast<size_t>(list[static_cast<size_t>(r)].first)];
    const int64_t t = list[static_cast<size_t>(r)].second / k;
    std::copy_n(s.x.begin() + t * D, D, xe.begin() + r * D);
  }
  FfnArgs a = RoutedFfnArgs(c, {e}, {0, n}, 0, c.moe_intermediate);
  a.x = xe.data();
  a.out = ye.data();
  a.block_bytes = c.options.weight_block_bytes;
  FfnWorkspace ws(&device);
  RunSwiGluFfn(ops, device, a, ws);
  for (int64_t r = 0; r < n; ++r) {
    SourceRouting& s = src[static_cast<size_t>(list[static_cast<size_t>(r)].first)];
    std::copy_n(ye.begin() + r * D, D, s.rows.begin() + list[static_cast<size_t>(r)].second * D);
  }
}

// The shared-expert sigmoid gate per token [T]: sigmoid(x . w), w generated as the ranks do.
std::vector<float> SharedGateScale(cpu::CpuOps& ops, const RunConfig& c, const SourceRouting& s) {
  const int64_t D = c.hidden, T = s.tokens;
  std::vector<float> gw(static_cast<size_t>(D)), scale(static_cast<size_t>(T));
  WeightRowsArgs sw;
  sw.seed = c.options.seed;
  sw.layer = c.layer;
  sw.matrix = kMatrixSharedSigmoidGate;
  sw.row_end = 1;
  sw.col_end = D;
  sw.scale = RouterScale(D);
  sw.out = gw.data();
  ops.FillWeightRows(sw);
  for (int64_t t = 0; t < T; ++t) {
    double dot = 0;
    for (int64_t d = 0; d < D; ++d) dot += static_cast<double>(s.x[static_cast<size_t>(t * D + d)]) * gw[static_cast<size_t>(d)];
    scale[static_cast<size_t>(t)] = static_cast<float>(1.0 / (1.0 + std::exp(-dot)));
  }
  return scale;
}

// Adds the shared experts' output (gated where the model gates it) to y [T, D].
void AddSharedExperts(cpu::CpuOps& ops, cpu::CpuDevice& device, const RunConfig& c, const SourceRouting& s, std::vector<float>& y) {
  const int64_t D = c.hidden, T = s.tokens;
  std::vector<float> shared(static_cast<size_t>(T * D));
  FfnArgs a = SharedFfnArgs(c, {0, T}, 0, c.shared_intermediate);
  a.x = s.x.data();
  a.out = shared.data();
  a.block_bytes = c.options.weight_block_bytes;
  FfnWorkspace ws(&device);
  RunSwiGluFfn(ops, device, a, ws);
  if (c.shared_expert_gate) {
    const std::vector<float> scale = SharedGateScale(ops, c, s);
    ops.ScaleRows(shared.data(), scale.data(), T, D);
  }
  ops.Add(shared.data(), y.data(), T * D);
}

// Source s's output [T, D]: the weighted sum of its expert rows in slot order, plus the shared experts.
void CombineSource(cpu::CpuOps& ops, cpu::CpuDevice& device, const RunConfig& c, const SourceRouting& s, std::vector<float>& y) {
  const int64_t D = c.hidden, k = c.top_k, T = s.tokens;
  y.assign(static_cast<size_t>(T * D), 0.0f);
  std::vector<int64_t> identity(static_cast<size_t>(T * k));
  for (int64_t j = 0; j < T * k; ++j) identity[static_cast<size_t>(j)] = j;
  ops.WeightedCombine(s.rows.data(), identity.data(), s.weights.data(), T, k, D, y.data());
  if (c.shared_intermediate > 0 && T > 0) AddSharedExperts(ops, device, c, s, y);
}

}  // namespace

ReferenceOutput ComputeReference(const RunConfig& c, int threads) {
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  cpu::CpuOps ops;  // host memory: plain vectors serve as device buffers
  cpu::CpuDevice device;
  const int64_t E = c.num_experts, S = static_cast<int64_t>(c.sources.size());
  std::vector<SourceRouting> src(static_cast<size_t>(S));

  // Router, per source (the same ops as the ranks).
  const std::vector<float> router_w = RouterWeightsOf(ops, c);
  std::vector<float> bias(static_cast<size_t>(E));
  FillScoreBias(ops, c, bias.data());
  ParallelFor(S, threads, [&](int64_t i) { RouteSource(ops, c, router_w, bias, i, src[static_cast<size_t>(i)]); });

  // Every (source, slot) pair grouped by expert, each expert over the full intermediate dim.
  ReferenceOutput out;
  out.sources = c.sources;
  const ExpertPairs pairs = GroupByExpert(src, E, c.top_k, out);
  ParallelFor(E, threads, [&](int64_t e) { RunExpert(ops, device, c, e, pairs[static_cast<size_t>(e)], src); });
  // Weighted sum in slot order, plus the shared experts.
  out.outputs.resize(static_cast<size_t>(S));
  ParallelFor(S, threads,
              [&](int64_t i) { CombineSource(ops, device, c, src[static_cast<size_t>(i)], out.outputs[static_cast<size_t>(i)]); });
  return out;
}

}  // namespace dockyard::runtime
