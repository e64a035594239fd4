// Megatron and dockyard's even layer split (see megatron_split.h).
#include "planner/layout/megatron_split.h"

#include <optional>
#include <vector>

#include <fmt/format.h>


namespace dockyard {

std::vector<int64_t> EvenLayerSplit(int64_t num_layers, int64_t pp) {
  std::vector<int64_t> stage_of(num_layers);
  const int64_t base = num_layers / pp, extra = num_layers % pp;
  int64_t layer = 0;
  for (int64_t s = 0; s < pp; ++s) {
    const int64_t n = base + (s < extra ? 1 : 0);
    for (int64_t i = 0; i < n; ++i) stage_of[layer++] = s;
  }
  return stage_of;
}

std::vector<int64_t> LayersPerRank(const std::vector<int64_t>& layer_stage, int64_t pp) {
  std::vector<int64_t> n(static_cast<size_t>(pp), 0);
  for (int64_t s : layer_stage) ++n[static_cast<size_t>(s)];
  return n;
}

std::vector<int64_t> LayersPerVirtualStage(const std::vector<int64_t>& layer_stage, const std::vector<int64_t>& layer_chunk, int64_t pp,
                                           int64_t vpp) {
  std::vector<int64_t> n(static_cast<size_t>(pp * vpp), 0);
  for (size_t l = 0; l < layer_stage.size(); ++l) ++n[static_cast<size_t>((layer_chunk.empty() ? 0 : layer_chunk[l]) * pp + layer_stage[l])];
  return n;
}

int64_t ChunkLayers(int64_t rank_layers, int64_t vpp, int64_t chunk) { return rank_layers / vpp + (chunk < rank_layers % vpp ? 1 : 0); }

std::vector<int64_t> VirtualStageLayers(const std::vector<int64_t>& rank_layers, int64_t vpp) {
  const int64_t pp = static_cast<int64_t>(rank_layers.size());
  std::vector<int64_t> out(static_cast<size_t>(pp * vpp), 0);
  for (int64_t v = 0; v < vpp; ++v) {
    for (int64_t p = 0; p < pp; ++p) out[static_cast<size_t>(v * pp + p)] = ChunkLayers(rank_layers[static_cast<size_t>(p)], vpp, v);
  }
  return out;
}

std::pair<std::vector<int64_t>, std::vector<int64_t>> VirtualStageLayerSplit(const std::vector<int64_t>& stage_layers, int64_t pp) {
  std::pair<std::vector<int64_t>, std::vector<int64_t>> out;
  for (size_t k = 0; k < stage_layers.size(); ++k) {
    for (int64_t i = stage_layers[k]; i > 0; --i) {
      out.first.push_back(static_cast<int64_t>(k) % pp);
      out.second.push_back(static_cast<int64_t>(k) / pp);
    }
  }
  return out;
}

std::pair<std::vector<int64_t>, std::vector<int64_t>> InterleavedLayerSplit(const std::vector<int64_t>& rank_layers, int64_t vpp) {
  return VirtualStageLayerSplit(VirtualStageLayers(rank_layers, vpp), static_cast<int64_t>(rank_layers.size()));
}

namespace {

// Layers per stage of EvenLayerSplit.
std::vector<int64_t> StageLayers(int64_t num_layers, int64_t pp) { return LayersPerRank(EvenLayerSplit(num_layers, pp), pp); }

// "t*N" (N > 1), "t" (N = 1) or "" (an empty stage).
std::string Layers(char c, int64_t n) {
  if (n <= 0) return "";
  return n == 1 ? std::string(1, c) : fmt::format("{}*{}", c, n);
}

}  // namespace

std::string EvenSplitPipelineLayout(int64_t num_layers, int64_t pp, int64_t vpp, int64_t mtp_layers) {
  return SplitPipelineLayout(StageLayers(num_layers, pp), vpp, mtp_layers);
}

std::string SplitPipelineLayout(const std::vector<int64_t>& per_rank, int64_t vpp, int64_t mtp_layers) {
  return VirtualStagesPipelineLayout(VirtualStageLayers(per_rank, vpp), mtp_layers);
}

std::string VirtualStagesPipelineLayout(const std::vector<int64_t>& stage_layers, int64_t mtp_layers) {
  const int64_t stages = static_cast<int64_t>(stage_layers.size());
  std::vector<std::string> text(static_cast<size_t>(stages));
  for (int64_t k = 0; k < stages; ++k) {
    std::string s = Layers('t', stage_layers[static_cast<size_t>(k)]);
    if (k == 0) s = "E" + s;
    if (k == stages - 1) s += Layers('m', mtp_layers) + "L";
    text[static_cast<size_t>(k)] = std::move(s);
  }
  // Runs of equal stages as "(S|)*N"; the last stage has no '|' after it.
  std::string out;
  for (size_t i = 0; i < text.size();) {
    size_t j = i + 1;
    while (j < text.size() && text[j] == text[i]) ++j;
    const size_t last = text.size() - 1;
    const size_t run = (j - 1 == last ? j - 1 : j) - i;  // stages of the run followed by '|'
    if (run > 1) {
      out += fmt::format("({}|)*{}", text[i], run);
    } else if (run == 1) {
      out += text[i] + "|";
    }
    if (j - 1 == last) out += text[last];
    i = j;
  }
  return out;
}

namespace {

// The rule Megatron breaks with dockyard's even split of this layout, "" when none.
std::string BrokenRule(const TrainingConfig& t, int64_t num_layers, int64_t pp, bool megatron) {
  const RunSettings& run = t.run;
  if (!megatron || pp <= 1 || num_layers < 1 || !t.pp_layer_split.empty() || !run.pipeline_layout.empty() || run.account_for_embedding ||
      run.account_for_loss) {
    return "";
  }
  const int64_t vpp = run.vpp, base = num_layers / pp, extra = num_layers % pp;
  if (extra != 0) {
    return fmt::format(
        "num_hidden_layers ({}) is not divisible by pp ({}): Megatron's validate_args asserts \"Number of layers should be "
        "divisible by the pipeline-model-parallel size\"",
        num_layers, pp);
  }
  if (vpp > 1 && base % vpp != 0) {
    return fmt::format(
        "the {} layers of each pipeline rank do not divide into vpp ({}) model chunks (Megatron's transformer_block.py "
        "get_num_layers_to_build asserts num_layers_per_pipeline_rank % vp_size == 0)",
        base, vpp);
  }
  return "";
}

}  // namespace

std::optional<MegatronSplitFlag> MegatronEvenSplitFlag(const TrainingConfig& t, int64_t num_layers, int64_t pp, bool megatron) {
  if (BrokenRule(t, num_layers, pp, megatron).empty()) return std::nullopt;
  const int64_t vpp = t.run.vpp, base = num_layers / pp, extra = num_layers % pp;
  if (vpp == 1 && extra == 1) return MegatronSplitFlag{"--decoder-first-pipeline-num-layers", std::to_string(base + 1)};
  if (vpp == 1 && extra == pp - 1) return MegatronSplitFlag{"--decoder-last-pipeline-num-layers", std::to_string(base)};
  return MegatronSplitFlag{"--pipeline-model-parallel-layout", EvenSplitPipelineLayout(num_layers, pp, vpp, t.mtp_layers)};
}

std::string MegatronEvenSplitReason(const TrainingConfig& t, int64_t num_layers, int64_t pp, bool megatron) {
  const std::string rule = BrokenRule(t, num_layers, pp, megatron);
  if (rule.empty()) return "";
  const MegatronSplitFlag f = *MegatronEvenSplitFlag(t, num_layers, pp, megatron);
  const int64_t vpp = t.run.vpp, base = num_layers / pp, extra = num_layers % pp;
  const std::string flag = f.key == "--pipeline-model-parallel-layout" ? fmt::format("{} \"{}\"", f.key, f.value) : f.key + " " + f.value;
  const std::string split =
      extra == 0 ? fmt::format("{} stages of {}", pp, base) : fmt::format("{} stage(s) of {}, {} of {}", extra, base + 1, pp - extra, base);
  return fmt::format("Megatron refuses this split without a split flag: {}. dockyard planned its even split ({}{}); to run it, pass {}",
                     rule, split, vpp > 1 ? fmt::format(", {} model chunks per rank", vpp) : "", flag);
}

std::string MegatronEvenSplitNote(const TrainingConfig& training, int64_t num_layers, int64_t pp, bool megatron) {
  const std::string reason = MegatronEvenSplitReason(training, num_layers, pp, megatron);
  return reason.empty() ? "" : "Note       " + reason + "\n";
}

}  // namespace dockyard
