// Benchmark: token-expert assignments sampled per second on one core.
//   bazel run //planner/routing:bench_routing -- [tokens_per_rank] [layers]
// E = 256 experts, top_k 8, ep 64 (DeepSeek-V3 routing on 64 EP ranks), T = 8192 tokens per rank,
// 4 MoE layers by default. SampleRouting is single-threaded, so assignments/s is per core.
// Each distribution runs twice: without a group limit, and group-limited as DeepSeek-V3 routes
// (n_group 8, topk_group 4, noaux_tc: group_routing.h GroupSampler::Draw).
// Prints the best of 5 runs for each distribution, and the one-off PrepareRouting time (weights,
// capping, calibration, alias tables) separately.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "planner/routing/group_routing.h"
#include "planner/routing/routing.h"

using Clock = std::chrono::steady_clock;

static double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

int main(int argc, char** argv) {
  const int64_t E = 256, k = 8, ep = 64;
  const int64_t T = argc > 1 ? std::atoll(argv[1]) : 8192;
  const int64_t layers = argc > 2 ? std::atoll(argv[2]) : 4;
  const int iters = 5;
  std::printf("bench_routing: E %lld, top_k %lld, ep %lld, T %lld tokens per rank, %lld layers (best of %d, one core)\n", (long long)E,
              (long long)k, (long long)ep, (long long)T, (long long)layers, iters);
  dockyard::GroupLimit v3_groups;  // DeepSeek-V3 config.json: n_group 8, topk_group 4
  v3_groups.n_group = 8;
  v3_groups.topk_group = 4;
  for (const dockyard::GroupLimit& limit : {dockyard::GroupLimit{}, v3_groups}) {
    for (const char* text : {"uniform", "zipf:1.2", "zipf:1.2:noshuffle", "zipf:0.6", "hot:8:0.3"}) {
      const std::string label = limit.active() ? std::string(text) + " groups 8/4" : std::string(text);
      dockyard::RoutingSpec spec = dockyard::ParseRoutingSpec(text);
      spec.seed = 1;
      double best_prepare = 1e30, best_sample = 1e30;
      dockyard::RoutingResult result;
      for (int i = 0; i < iters; ++i) {
        const auto t0 = Clock::now();
        const dockyard::RoutingModel model = dockyard::PrepareRouting(spec, E, k, layers, limit);
        const auto t1 = Clock::now();
        result = dockyard::SampleRouting(model, ep, T);
        const auto t2 = Clock::now();
        best_prepare = std::min(best_prepare, Seconds(t0, t1));
        best_sample = std::min(best_sample, Seconds(t1, t2));
      }
      // Experts every token picks (share capped at 1/top_k) are counted in bulk, not drawn; the
      // group-limited draw draws every pick.
      int forced = 0;
      for (double share : result.layers[0].expected_share) forced += !limit.active() && share * static_cast<double>(k) >= 1.0 ? 1 : 0;
      std::printf(
          "  %-31s %7.1f M assignments/s per core  (%lld in %7.2f ms; %d of %lld picks per token drawn; "
          "prepare %6.2f ms; max imbalance %.2f)\n",
          label.c_str(), static_cast<double>(result.assignments) / best_sample / 1e6, (long long)result.assignments, best_sample * 1e3,
          static_cast<int>(k) - forced, (long long)k, best_prepare * 1e3, result.max_imbalance);
    }
  }
  return 0;
}
