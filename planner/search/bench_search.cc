// Benchmark: layout search throughput on DeepSeek-V3.
//   bazel run -c opt //planner/search:bench_search -- [--repeat N] [--compute-model kernels|gemm] [--every-dimension-only]
//       [--routing-layers N] [--no-opt-in-dispatchers] [--vpps-124] [--threads 1|2] [world_size ...]
// Two sweeps, each search run N times (default 3) on one thread, best and median reported:
//  1. world size (default 256 2048 16384): DeepSeek-V3 as published (256 routed experts);
//  2. number of routed experts at 2048 GPUs: DeepSeek-V3 with moe.num_experts overridden to 64,
//     128, 256 and 512 (a modified copy of the ModelSpec; every other field as published, so the
//     routed-expert tensors grow with E and ep ranges over the divisors of E).
// layouts/s/core = candidates enumerated / wall seconds of SearchLayouts (enumeration, validation,
// memory, the per-phase cost model, first-time routing samples, ranking), one thread. The
// "excl. routing" rate leaves out the once-per-key work (routing samples and the routing-dependent
// MoE phases, SearchResult::routing_seconds), i.e. the per-candidate evaluation alone.
#include <algorithm>
#include <cstdio>
#include <ctime>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "planner/model/model_spec.h"
#include "planner/cost/compute_model.h"
#include "planner/search/search.h"
#include "planner/routing/plan_routing.h"
#include "planner/model/model_file.h"

namespace {

struct Run {
  dockyard::SearchResult result;  // of the fastest run
  double best = 0, median = 0;    // seconds
  double cpu = 0;                 // process CPU seconds of the fastest run (all threads): the work on a loaded machine
};

// Every dimension searched as `dockyard-plan search --search-dispatchers deepep,allgather` does
// (torchtitan): micro-batch size 1, 2, 4; recompute none, selective, full; vpp 1..floor((layers + 2) / pp) (pp > 1);
// dp sharding fsdp, ddp; the four dispatchers (all_to_all; deredundency where an EP group spans
// nodes; deepep and allgather where ep > 1); the global batch = world size sequences; the
// search's default routing layers (cost.h kDefaultRoutingLayers, as simulate).
// --routing-layers N, --no-opt-in-dispatchers (all_to_all and deredundency only) and --vpps-124
// (vpp 1, 2, 4 only, as the search did before it took every vpp the chunk rule allows) reproduce
// earlier configurations.
int64_t g_every_routing_layers = dockyard::kDefaultRoutingLayers;
bool g_every_opt_in_dispatchers = true;
bool g_vpps_124 = false;
void EveryDimension(dockyard::SearchOptions* o) {
  o->include_deepep = g_every_opt_in_dispatchers;
  o->include_allgather = g_every_opt_in_dispatchers;
  o->routing_layers = g_every_routing_layers;
  o->micro_batch_sizes = {1, 2, 4};
  o->recomputes = {dockyard::Recompute::kNone, dockyard::Recompute::kSelective, dockyard::Recompute::kFull};
  // As `search` without --vpp: every vpp 1..MaxVpp(pp, layers) (search_space.cc ApplySearchedSettings).
  o->every_vpp = !g_vpps_124;
  if (g_vpps_124) o->vpps = {1, 2, 4};
  o->dp_shardings = {dockyard::DpSharding::kFsdp, dockyard::DpSharding::kDdp};
  o->global_batch_size = o->world_size;
}

// --compute-model (compute_model.h; default kernels).
std::string g_compute_model = dockyard::kDefaultComputeModel;

Run Measure(const dockyard::ModelSpec& model, int64_t world, int repeat, bool every_dimension = false, int threads = 1) {
  dockyard::SearchOptions o;
  dockyard::ApplyComputeModel(g_compute_model, false, &o.compute_model, &o.training.run);
  o.world_size = world;
  o.training.recompute = dockyard::Recompute::kFull;
  o.routing_layers = 1;  // the world and expert sweeps (EveryDimension sets the search's default)
  o.threads = threads;
  if (every_dimension) EveryDimension(&o);
  Run run;
  std::vector<double> seconds;
  for (int i = 0; i < repeat; ++i) {
    const std::clock_t cpu_start = std::clock();
    auto r = dockyard::SearchLayouts(model, o);
    const double cpu = static_cast<double>(std::clock() - cpu_start) / CLOCKS_PER_SEC;
    seconds.push_back(r.seconds);
    if (i == 0 || r.seconds < run.result.seconds) {
      run.result = std::move(r);
      run.cpu = cpu;
    }
  }
  std::sort(seconds.begin(), seconds.end());
  run.best = seconds.front();
  run.median = seconds[seconds.size() / 2];
  return run;
}

void Header(const char* first) {
  std::printf("%8s %9s %8s %8s %8s %8s %9s %9s %10s %10s %14s\n", first, "layouts", "invalid", "over", "ranked", "routing", "best s",
              "median s", "routing s", "layouts/s", "excl. routing");
}

void Row(int64_t key, const Run& run) {
  const auto& r = run.result;
  const double n = static_cast<double>(r.enumerated);
  std::printf("%8lld %9lld %8lld %8lld %8lld %8lld %9.3f %9.3f %10.3f %10.0f %14.0f\n", (long long)key, (long long)r.enumerated,
              (long long)r.invalid, (long long)r.over_budget, (long long)r.ranked, (long long)r.routing_samples, run.best, run.median,
              r.routing_seconds, n / run.best, n / (run.best - r.routing_seconds));
}

void Best(const dockyard::SearchResult& r) {
  if (r.top.empty()) return;
  const auto& x = r.top.front();
  const auto& d = x.layout.dims;
  std::printf("         best: pp %lld dp_replicate %lld dp_shard %lld cp %lld tp %lld ep %lld etp %lld %s, %.0f tokens/s/GPU, %s\n",
              (long long)d.pp, (long long)d.dp_replicate, (long long)d.dp_shard, (long long)d.cp, (long long)d.tp, (long long)d.ep,
              (long long)EtpOf(d), DispatcherName(x.layout.dispatcher), x.tokens_per_s_per_gpu, x.dominant_phase.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  const char* runfiles = std::getenv("RUNFILES_DIR");
  std::string path = "testdata/hf/deepseek-v3.json";
  if (runfiles) path = std::string(runfiles) + "/dockyard/" + path;
  const dockyard::ModelSpec model = dockyard::LoadModel(path);
  std::vector<int64_t> worlds;
  int repeat = 3;
  bool every_only = false;  // --every-dimension-only: the every-dimension sweep alone
  std::vector<int> thread_counts = {1, 2};  // --threads N: one thread count instead of both
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--every-dimension-only") == 0) {
      every_only = true;
    } else if (std::strcmp(argv[i], "--no-opt-in-dispatchers") == 0) {
      g_every_opt_in_dispatchers = false;
    } else if (std::strcmp(argv[i], "--vpps-124") == 0) {
      g_vpps_124 = true;
    } else if (std::strcmp(argv[i], "--routing-layers") == 0 && i + 1 < argc) {
      g_every_routing_layers = std::max(1, std::atoi(argv[++i]));
    } else if (std::strcmp(argv[i], "--repeat") == 0 && i + 1 < argc) {
      repeat = std::max(1, std::atoi(argv[++i]));
    } else if (std::strcmp(argv[i], "--compute-model") == 0 && i + 1 < argc) {
      g_compute_model = argv[++i];
      dockyard::ComputeModel check;
      dockyard::RunSettings run;
      dockyard::ApplyComputeModel(g_compute_model, false, &check, &run);  // throws for an unknown model
    } else if (std::strcmp(argv[i], "--threads") == 0 && i + 1 < argc) {
      const int t = std::atoi(argv[++i]);
      if (t < 1 || t > 2) {
        std::fprintf(stderr, "bench_search: --threads must be 1 or 2, got %s\n", argv[i]);
        return 1;
      }
      thread_counts = {t};
    } else {
      char* end = nullptr;
      const long long world = std::strtoll(argv[i], &end, 10);
      if (end == argv[i] || *end != '\0' || world < 1) {
        std::fprintf(stderr,
                     "bench_search: unknown argument '%s' (flags: --repeat N, --threads 1|2, --compute-model M, "
                     "--every-dimension-only, --routing-layers N, --no-opt-in-dispatchers, --vpps-124; or a world size >= 1)\n",
                     argv[i]);
        return 1;
      }
      worlds.push_back(world);
    }
  }
  if (worlds.empty()) worlds = {256, 2048, 16384};
  std::printf(
      "bench_search: DeepSeek-V3, h100-sxm, seq_len 4096, recompute full, uniform routing (1 layer sampled), "
      "compute model %s, one thread, best of %d\n\n",
      g_compute_model.c_str(), repeat);
  std::printf("World size sweep (256 routed experts)\n");
  Header("world");
  for (int64_t world : every_only ? std::vector<int64_t>{} : worlds) {
    const Run run = Measure(model, world, repeat);
    Row(world, run);
    Best(run.result);
  }
  std::printf(
      "\nEvery dimension (micro-batch size, recompute, vpp, dp sharding, 4 dispatchers; global batch = world size sequences; "
      "%lld routing layers%s), static-memory pruning on; cpu s = process CPU seconds (all threads), routing s = wall seconds "
      "filling the once-per-key caches (routing samples, deepep counts, MoE phases; summed over threads)\n",
      (long long)g_every_routing_layers, g_every_opt_in_dispatchers ? "" : "; deepep and allgather off");
  std::printf("%8s %8s %9s %9s %9s %9s %8s %8s %9s %8s %10s %12s\n", "world", "threads", "layouts", "evaluated", "pruned", "not-div",
              "ranked", "best s", "median s", "cpu s", "routing s", "eval/cpu-s");
  for (int64_t world : worlds) {
    for (int threads : thread_counts) {
      const Run run = Measure(model, world, repeat, true, threads);
      const auto& r = run.result;
      const int64_t evaluated = r.enumerated - r.pruned - r.not_divisible;
      std::printf("%8lld %8d %9lld %9lld %9lld %9lld %8lld %8.3f %9.3f %8.3f %10.3f %12.0f\n", (long long)world, threads,
                  (long long)r.enumerated, (long long)evaluated, (long long)r.pruned, (long long)r.not_divisible, (long long)r.ranked,
                  run.best, run.median, run.cpu, r.routing_seconds, static_cast<double>(evaluated) / run.cpu);
      if (threads == 1) Best(r);
    }
  }
  std::printf("\nRouted-expert sweep at 2048 GPUs (DeepSeek-V3 with num_experts overridden)\n");
  Header("experts");
  for (int64_t experts : every_only ? std::vector<int64_t>{} : std::vector<int64_t>{64, 128, 256, 512}) {
    dockyard::ModelSpec m = model;
    m.moe.num_experts = experts;
    const Run run = Measure(m, 2048, repeat);
    Row(experts, run);
    Best(run.result);
  }
  return 0;
}
