// Benchmark: the HTML report of a DeepSeek-V3 plan on a large world.
//   bazel run -c opt //planner/report:bench_html -- [world_size] [output.html]
// Builds the plan, its memory report, JSON report and a uniform routing sample (not timed), then
// times ReportToHtml and the atomic write, best of 5, and prints the page's size.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "planner/base/file_util.h"
#include "planner/report/html_report.h"
#include "planner/accounting/memory.h"
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
  const std::string out = argc > 2 ? argv[2] : "/tmp/dockyard_bench_html.html";
  const char* runfiles = std::getenv("RUNFILES_DIR");
  std::string path = "testdata/hf/deepseek-v3.json";
  if (runfiles) path = std::string(runfiles) + "/dockyard/" + path;
  dockyard::ParallelDimsOptions dims;
  dims.world_size = world;
  dims.ep = world >= 64 ? 64 : world;
  dockyard::TrainingConfig training;
  training.recompute = dockyard::Recompute::kFull;
  dockyard::Machine machine;
  machine.gpu_memory_gib = 80;
  const dockyard::Plan plan = dockyard::BuildPlan(dockyard::LoadModel(path), dims, training, machine);
  const dockyard::MemoryReport memory = dockyard::ComputeMemory(plan);
  auto t0 = Clock::now();
  const dockyard::Json report = dockyard::PlanToJson(plan, path, memory);
  auto t1 = Clock::now();
  const dockyard::Json routing = dockyard::UniformRoutingSample(plan);
  double best_html = 1e30, best_write = 1e30;
  size_t bytes = 0;
  const int iters = 5;
  for (int i = 0; i < iters; ++i) {
    auto a = Clock::now();
    const std::string html = dockyard::ReportToHtml(report, routing);
    auto b = Clock::now();
    dockyard::WriteFileAtomically(out, html);
    auto c = Clock::now();
    bytes = html.size();
    best_html = std::min(best_html, Ms(a, b));
    best_write = std::min(best_write, Ms(b, c));
  }
  std::printf("bench_html: DeepSeek-V3, world_size %lld, ep %lld, full recompute (best of %d)\n", (long long)world, (long long)plan.dims.ep,
              iters);
  std::printf(
      "  JSON report (PlanToJson, once) %9.2f ms\n  ReportToHtml                   %9.2f ms (%zu bytes)\n"
      "  write                          %9.2f ms\n  HTML total                     %9.2f ms\n",
      Ms(t0, t1), best_html, bytes, best_write, best_html + best_write);
  std::printf("  HTML written to %s\n", out.c_str());
  return 0;
}
