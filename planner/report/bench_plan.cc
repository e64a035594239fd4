// Benchmark: build and report a DeepSeek-V3 plan on a large world.
//   bazel run //planner/report:bench_plan -- [world_size] [output.json]
// Prints the time of each step (model load, BuildPlan, JSON report, write) as the best of N runs.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "planner/base/file_util.h"
#include "planner/model/model_spec.h"
#include "planner/layout/plan.h"
#include "planner/report/report.h"
#include "planner/model/model_file.h"

using Clock = std::chrono::steady_clock;

static double Ms(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

int main(int argc, char** argv) {
  const int64_t world = argc > 1 ? std::atoll(argv[1]) : 4096;
  const std::string out = argc > 2 ? argv[2] : "/tmp/dockyard_bench_plan.json";
  const char* runfiles = std::getenv("RUNFILES_DIR");
  std::string path = "testdata/hf/deepseek-v3.json";
  if (runfiles) path = std::string(runfiles) + "/dockyard/" + path;
  dockyard::ParallelDimsOptions dims;
  dims.world_size = world;
  dims.ep = 64;
  double best_load = 1e30, best_plan = 1e30, best_json = 1e30, best_write = 1e30;
  size_t bytes = 0;
  const int iters = 5;
  for (int i = 0; i < iters; ++i) {
    auto t0 = Clock::now();
    dockyard::ModelSpec model = dockyard::LoadModel(path);
    auto t1 = Clock::now();
    dockyard::Plan plan = dockyard::BuildPlan(model, dims);
    auto t2 = Clock::now();
    std::string text = dockyard::PlanToJson(plan, path).dump(1);
    auto t3 = Clock::now();
    dockyard::WriteFileAtomically(out, text);
    auto t4 = Clock::now();
    bytes = text.size();
    best_load = std::min(best_load, Ms(t0, t1));
    best_plan = std::min(best_plan, Ms(t1, t2));
    best_json = std::min(best_json, Ms(t2, t3));
    best_write = std::min(best_write, Ms(t3, t4));
  }
  std::printf("bench_plan: DeepSeek-V3, world_size %lld, dp_shard %lld, ep 64 (best of %d)\n", (long long)world, (long long)world, iters);
  std::printf(
      "  load model   %9.2f ms\n  BuildPlan    %9.2f ms\n  JSON report  %9.2f ms (%zu bytes)\n  write        %9.2f ms\n  total        "
      "%9.2f ms\n",
      best_load, best_plan, best_json, bytes, best_write, best_load + best_plan + best_json + best_write);
  std::printf("  JSON written to %s\n", out.c_str());
  return 0;
}
