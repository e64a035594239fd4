// Benchmark: dockyard's predictions held against published, measured MoE training runs.
//   bazel run -c opt //planner/calibration:bench_fidelity -- [runs.json] [--compute-model kernels|gemm]
// (default kernels, compute_model.h; gemm is the older model of fixed GEMM efficiencies)
// Prints Markdown tables (docs/fidelity.md): every expressible run's measured and predicted step,
// error and dominant phase; mean / max |error|; per group the error and the order of pairs whose
// measured throughput differs by more than 10 %; then the unsupported runs, predicted as
// approximations where possible, and the runs not predicted with the reason. Then the fit
// (dockyard-plan calibrate's, planner/calibration/calibrate.h, priors of the h100-sxm preset) over the same
// file: each whole-step row in-sample, group-held-out (fit without the row's group, predict it)
// and leave-one-hardware-out (fit without the row's cluster), with the order within each group.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "planner/calibration/calibrate.h"
#include "planner/base/error.h"
#include "planner/cost/compute_model.h"
#include "planner/calibration/fidelity.h"

int main(int argc, char** argv) {
  std::string path = "testdata/fidelity/runs.json";
  dockyard::ComputeModel compute_model = dockyard::ComputeModel::kKernels;
  dockyard::RunSettings unused_run;  // --compute-model takes no run setting here
  std::string given;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--compute-model" && i + 1 < argc) {
      try {
        dockyard::ApplyComputeModel(argv[++i], false, &compute_model, &unused_run);
      } catch (const dockyard::Error& e) {
        std::fprintf(stderr, "bench_fidelity: error: %s\n", e.what());
        return 1;
      }
    } else {
      given = a;
    }
  }
  if (!given.empty()) {
    path = given;
  } else if (const char* runfiles = std::getenv("RUNFILES_DIR")) {
    path = std::string(runfiles) + "/dockyard/" + path;
  }
  try {
    const auto t0 = std::chrono::steady_clock::now();
    const dockyard::FidelitySet set = dockyard::LoadFidelitySet(path);
    const dockyard::FidelityReport report = dockyard::RunFidelity(set, 0.10, compute_model);
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    std::fputs(dockyard::FidelityReportToMarkdown(set, report).c_str(), stdout);
    std::printf("\n(%zu runs, %zu component measurements; load + predict %.0f ms)\n", set.runs.size(), set.components.size(), ms);
    const auto t1 = std::chrono::steady_clock::now();
    std::fputs(dockyard::FidelityFitToMarkdown(set, "h100-sxm", compute_model).c_str(), stdout);
    std::printf("\n(fit + held-out fits %.0f ms)\n",
                std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t1).count());
  } catch (const dockyard::Error& e) {
    std::fprintf(stderr, "bench_fidelity: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
