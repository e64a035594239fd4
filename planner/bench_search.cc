// Benchmark: layout search throughput on DeepSeek-V3.
//   bazel run //planner:bench_search -- [world_size ...]
// Prints layouts enumerated and evaluated per second on one core (validation, memory and the
// per-phase cost model with routing sampled once per EP degree), for each world size.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "planner/model_spec.h"
#include "planner/search.h"

int main(int argc, char** argv) {
  const char* runfiles = std::getenv("RUNFILES_DIR");
  std::string path = "testdata/hf/deepseek-v3.json";
  if (runfiles) path = std::string(runfiles) + "/dockyard/" + path;
  const dockyard::ModelSpec model = dockyard::LoadModel(path);
  std::vector<int64_t> worlds;
  for (int i = 1; i < argc; ++i) worlds.push_back(std::atoll(argv[i]));
  if (worlds.empty()) worlds = {256, 2048};
  std::printf("bench_search: DeepSeek-V3, h100-sxm, seq_len 4096, recompute full, uniform routing (1 layer sampled)\n");
  std::printf("%8s %10s %8s %8s %8s %10s %14s\n", "world", "layouts", "invalid", "over", "ranked", "seconds", "layouts/s/core");
  for (int64_t world : worlds) {
    dockyard::SearchOptions o;
    o.world_size = world;
    o.training.recompute = dockyard::Recompute::kFull;
    o.routing_layers = 1;
    const auto r = dockyard::SearchLayouts(model, o);
    std::printf("%8lld %10lld %8lld %8lld %8lld %10.2f %14.0f\n", (long long)world, (long long)r.enumerated,
                (long long)r.invalid, (long long)r.over_budget, (long long)r.ranked, r.seconds, r.enumerated / r.seconds);
    if (!r.top.empty()) {
      const auto& d = r.top.front().layout.dims;
      std::printf("         best: pp %lld dp_replicate %lld dp_shard %lld cp %lld tp %lld ep %lld etp %lld %s, %.0f tokens/s/GPU, %s\n",
                  (long long)d.pp, (long long)d.dp_replicate, (long long)d.dp_shard, (long long)d.cp, (long long)d.tp,
                  (long long)d.ep, (long long)d.etp, r.top.front().layout.dispatcher.c_str(), r.top.front().tokens_per_s_per_gpu,
                  r.top.front().dominant_phase.c_str());
    }
  }
  return 0;
}
