// dockyard-plan's embedded default (see default_layout.h).
#include "planner/layout/default_layout.h"

#include <fmt/format.h>

#include "planner/base/json_util.h"
#include "planner/layout/default_model.h"
#include "planner/model/hf_config.h"
#include "planner/model/model_file.h"

namespace dockyard {

const char* DefaultModelJson() {
  return kDefaultModelJson;
}

ModelSpec LoadModelOrDefault(const std::string& path) {
  if (!path.empty()) return LoadModel(path);
  return ModelSpecFromHfConfig(ParseJsonText(kDefaultModelJson, kDefaultModelName), kDefaultModelName);
}

std::string ModelSourceName(const std::string& path) {
  return path.empty() ? kDefaultModelName : path;
}

void ApplyDefaultLayout(bool ep_given, ParallelDimsOptions* dims) {
  if (!ep_given) dims->ep = DefaultEp(*dims, kDefaultEp);
}

void ApplyDefaultTraining(bool recompute_given, TrainingConfig* training) {
  // The embedded default recomputes activations (full AC, as torchtitan's DeepSeek-V3 configs
  // do) so that its 256-GPU layout fits 80 GiB GPUs; --recompute overrides it.
  if (!recompute_given) training->recompute = Recompute::kFull;
}

std::string DefaultModelNote(const ParallelDimsOptions& dims, Recompute recompute) {
  return fmt::format("(no --model: the embedded default, DeepSeek-V3 on {} GPUs{}, ep {}, recompute {})\n", dims.world_size,
                     dims.world_size % 8 == 0 ? fmt::format(" = {} nodes x 8", dims.world_size / 8) : "", dims.ep,
                     RecomputeName(recompute));
}

}  // namespace dockyard
