// torchtitan's pipeline layer split (torchtitan_split.h).
#include "planner/layout/torchtitan_split.h"

#include <algorithm>

#include <fmt/format.h>

namespace dockyard {

std::vector<int64_t> TorchtitanStageLayers(int64_t stages, int64_t layers, int64_t input_weight, int64_t output_weight, std::string* error) {
  if (stages == 1) return {layers};
  const int64_t effective = layers + input_weight + output_weight;
  if (stages > effective) {
    *error = fmt::format("the {} pipeline stages are more than the {} effective layers (num_layers {} + first / last stage less layers {} + {})",
                         stages, effective, layers, input_weight, output_weight);
    return {};
  }
  const int64_t per = effective / stages, extra = effective % stages;
  if (input_weight > per || output_weight > per) {
    *error = fmt::format("the first / last stage less layers ({} / {}) exceed the {} layers of the smallest stage", input_weight, output_weight, per);
    return {};
  }
  std::vector<int64_t> out;
  int64_t placed = 0;
  for (int64_t s = 0; s < stages; ++s) {
    int64_t n = per + (s < extra ? 1 : 0);
    if (s == 0) n -= input_weight;
    else if (s == stages - 1) n -= output_weight;
    n = std::max<int64_t>(0, std::min(n, layers - placed));
    out.push_back(n);
    placed += n;
  }
  return out;
}

std::vector<int64_t> TorchtitanRankLayers(const std::vector<int64_t>& stage_layers, int64_t pp) {
  std::vector<int64_t> out(static_cast<size_t>(pp), 0);
  for (size_t s = 0; s < stage_layers.size(); ++s) out[s % static_cast<size_t>(pp)] += stage_layers[s];
  return out;
}

}  // namespace dockyard
