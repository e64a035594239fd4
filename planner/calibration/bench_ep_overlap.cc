// Benchmark: the gain dockyard predicts for turning on EP communication overlap (Megatron-Core's
// --overlap-moe-expert-parallel-comm) or delayed expert weight gradients, held against published
// same-layout pairs of measured steps.
//   bazel run -c opt //planner/calibration:bench_ep_overlap -- [pairs.json]
// (default testdata/ep_overlap/pairs.json; the format is the fidelity set's, testdata/fidelity/README.md,
// two runs per group: the baseline, then the variant). Prints Markdown (docs/fidelity.md,
// "EP-overlap pairs"): each pair's measured and predicted steps and gains, the errors of both
// predictions, the baseline's all-to-all share, and how many predicted gains have the measured
// sign. Then, with no measurement, the gain EP overlap predicts with the EP group inside one node
// for every model of the file: 16 GPUs of the first pair's cluster (the EP group inside one NVLink
// domain), TP1 PP1, EP 2 / 4 / 8 (a layout that cannot be predicted says why in its row), GBS 256, MBS 1, seq 4096, all_to_all, BF16, the data-parallel overlaps; beside the
// all-to-alls' share of the baseline step and whether its peak fits the device (issue 33: the gain
// follows that share).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include <fmt/format.h>

#include "planner/base/error.h"
#include "planner/calibration/fidelity.h"

namespace {

constexpr const char* kUsage =
    "usage: bench_ep_overlap [PAIRS.json]\n"
    "  Holds the step-time gain dockyard predicts for EP overlap and delayed wgrad against published\n"
    "  same-layout pairs of measured steps (default testdata/ep_overlap/pairs.json; format:\n"
    "  testdata/ep_overlap/README.md, model paths relative to the file). docs/fidelity.md, \"EP-overlap pairs\".\n";

// The one-node sweep (see the file comment): every model of the file, with and without EP overlap.
std::string OneNodeSweep(const dockyard::FidelitySet& set, const std::vector<dockyard::FidelityPair>& pairs) {
  const dockyard::FidelityRun* first = nullptr;
  for (const auto& r : set.runs)
    if (r.id == pairs.front().baseline.id) first = &r;
  std::string out = fmt::format(
      "\n### EP inside one NVLink domain, no measurement (16 GPUs of {}; TP1 PP1, GBS 256, MBS 1, seq 4096, "
      "all_to_all, BF16, data-parallel overlaps)\n\n"
      "| model | EP | baseline s | with EP overlap s | predicted gain | baseline all-to-all share | peak GiB (the larger) | fits |\n"
      "|---|---|---|---|---|---|---|---|\n",
      dockyard::MarkdownCell(first->cluster_name));
  for (const auto& [name, model] : set.models) {
    for (int64_t ep : {2, 4, 8}) {
      dockyard::FidelityRun off = *first;
      off.id = fmt::format("sweep {} EP{}", name, ep);
      off.model = name;
      off.world_size = 16;
      off.tp = off.pp = off.vpp = off.cp = off.etp = 1;
      off.ep = ep;
      off.gbs = 256;
      off.mbs = 1;
      off.seq = 4096;
      off.precision = "bf16";
      off.recompute = dockyard::Recompute::kNone;
      off.recompute_modules.clear();
      off.pp_layout.clear();
      off.dispatcher = "a2a";
      off.features = {"overlap_grad_reduce", "overlap_param_gather"};
      dockyard::FidelityRun on = off;
      on.features.push_back("ep_overlap");
      dockyard::FidelityPrediction a, b;
      try {
        a = dockyard::PredictRun(off, model);
        b = dockyard::PredictRun(on, model);
      } catch (const dockyard::Error& e) {  // a layout or model the step cannot be predicted for: said in its row
        out += fmt::format("| {} | {} | - | - | - | - | - | not predicted: {} |\n", dockyard::MarkdownCell(name), ep, dockyard::MarkdownCell(e.what()));
        continue;
      }
      const bool fits = dockyard::PeakFitsCluster(a.peak_gib, first->cluster) && dockyard::PeakFitsCluster(b.peak_gib, first->cluster);
      out += fmt::format("| {} | {} | {:.3f} | {:.3f} | {:+.1f} % | {:.1f} % | {:.1f} | {} |\n", dockyard::MarkdownCell(name), ep, a.predicted_s, b.predicted_s,
                         100 * (1 - b.predicted_s / a.predicted_s), 100 * a.a2a_share, std::max(a.peak_gib, b.peak_gib),
                         fits ? "yes" : fmt::format("no ({:.1f} GiB device)", first->cluster.memory_gib));
    }
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::string path = "testdata/ep_overlap/pairs.json";
  if (argc == 2 && (std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h")) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (argc > 2 || (argc == 2 && argv[1][0] == '-')) {
    std::fprintf(stderr, "bench_ep_overlap: error: %s: takes one optional argument, the pairs file\n%s",
                 argc > 2 ? "too many arguments" : fmt::format("unknown option '{}'", argv[1]).c_str(), kUsage);
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
    std::printf("\n(%zu pair%s; load + predict %.0f ms)\n", pairs.size(), pairs.size() == 1 ? "" : "s", ms);
    std::fputs(OneNodeSweep(set, pairs).c_str(), stdout);
  } catch (const dockyard::Error& e) {
    std::fprintf(stderr, "bench_ep_overlap: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
