// Benchmark: the gain dockyard predicts for turning on EP communication overlap (Megatron-Core's
// --overlap-moe-expert-parallel-comm) or delayed expert weight gradients, held against published
// same-layout pairs of measured steps.
//   bazel run -c opt //planner/calibration:bench_ep_overlap -- [pairs.json]
// (default testdata/ep_overlap/pairs.json; the format is the fidelity set's, testdata/fidelity/README.md,
// two runs per group: the baseline, then the variant). Prints a Markdown table (docs/fidelity.md,
// "EP-overlap pairs"): each pair's measured and predicted steps and gains, the errors of both
// predictions, and how many predicted gains have the measured sign.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "planner/base/error.h"
#include "planner/calibration/fidelity.h"

int main(int argc, char** argv) {
  std::string path = "testdata/ep_overlap/pairs.json";
  if (argc > 2) {
    std::fprintf(stderr, "usage: bench_ep_overlap [pairs.json]\n");
    return 2;
  }
  if (argc == 2) {
    path = argv[1];
  } else if (const char* runfiles = std::getenv("RUNFILES_DIR")) {
    path = std::string(runfiles) + "/dockyard/" + path;
  }
  try {
    const auto t0 = std::chrono::steady_clock::now();
    const dockyard::FidelitySet set = dockyard::LoadFidelitySet(path);
    const auto pairs = dockyard::PredictPairs(set);
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    std::fputs(dockyard::PairsToMarkdown(set, pairs).c_str(), stdout);
    std::printf("\n(%zu pairs; load + predict %.0f ms)\n", pairs.size(), ms);
  } catch (const dockyard::Error& e) {
    std::fprintf(stderr, "bench_ep_overlap: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
