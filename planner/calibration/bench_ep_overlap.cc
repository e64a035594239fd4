// Benchmark: the gain dockyard predicts for turning on EP communication overlap (Megatron-Core's
// --overlap-moe-expert-parallel-comm) or delayed expert weight gradients, held against published
// same-layout pairs of measured steps.
//   bazel run -c opt //planner/calibration:bench_ep_overlap -- [pairs.json]
// (default testdata/ep_overlap/pairs.json; the format is the fidelity set's, testdata/fidelity/README.md,
// two runs per group: the baseline, then the variant). Prints a Markdown table (docs/fidelity.md,
// "EP-overlap pairs"): each pair's measured and predicted steps and gains, the errors of both
// predictions, the baseline's all-to-all share, and how many predicted gains have the measured
// sign. Then, with no measurement, the gain EP overlap predicts inside one node (8 H100, EP 2 / 4 /
// 8, the first pair's other settings) for models of coarse and fine expert granularity, beside the
// all-to-alls' share of the baseline step (issue 33: the gain follows that share).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include <fmt/format.h>

#include "planner/base/error.h"
#include "planner/calibration/fidelity.h"
#include "planner/model/model_file.h"

namespace {

// One-node EP sweep: the first pair's baseline as the template (cluster, dispatcher, precision,
// features), world 8, TP1 PP1, GBS 256, MBS 1; each model with and without EP overlap.
std::string OneNodeSweep(const dockyard::FidelitySet& set, const std::vector<dockyard::FidelityPair>& pairs, const std::string& hf_dir) {
  if (pairs.empty()) return "";
  const dockyard::FidelityRun* base = nullptr;
  for (const auto& r : set.runs)
    if (r.id == pairs.front().baseline.id) base = &r;
  std::string out = fmt::format(
      "\n### Inside one node, no measurement ({} as {}'s baseline, 8 GPUs, GBS 256, MBS 1)\n\n"
      "| model | EP | baseline s | with EP overlap s | predicted gain | baseline all-to-all share |\n|---|---|---|---|---|---|\n",
      base->cluster_name, pairs.front().group);
  for (const char* name : {"mixtral-8x7b", "deepseek-v2-lite", "qwen3-30b-a3b"}) {
    const dockyard::ModelSpec model = dockyard::LoadModel(hf_dir + "/" + name + ".json");
    for (int64_t ep : {2, 4, 8}) {
      dockyard::FidelityRun off = *base;
      off.model = name;
      off.world_size = 8;
      off.tp = off.pp = off.vpp = off.cp = off.etp = 1;
      off.ep = ep;
      off.gbs = 256;
      off.mbs = 1;
      off.features.erase(std::remove(off.features.begin(), off.features.end(), "ep_overlap"), off.features.end());
      dockyard::FidelityRun on = off;
      on.features.push_back("ep_overlap");
      const auto a = dockyard::PredictRun(off, model);
      const auto b = dockyard::PredictRun(on, model);
      out += fmt::format("| {} | {} | {:.3f} | {:.3f} | {:+.1f} % | {:.1f} % |\n", name, ep, a.predicted_s, b.predicted_s,
                         100 * (1 - b.predicted_s / a.predicted_s), 100 * a.a2a_share);
    }
  }
  return out;
}

}  // namespace

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
    const size_t slash = path.rfind('/');
    std::fputs(OneNodeSweep(set, pairs, (slash == std::string::npos ? std::string(".") : path.substr(0, slash)) + "/../hf").c_str(), stdout);
  } catch (const dockyard::Error& e) {
    std::fprintf(stderr, "bench_ep_overlap: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
