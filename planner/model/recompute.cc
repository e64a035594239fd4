// Selective recomputation by module (see recompute.h).
#include "planner/model/recompute.h"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "planner/base/error.h"

namespace dockyard {

const std::vector<std::string>& RecomputeModuleNames() {
  static const std::vector<std::string> names = {"core_attn", "layernorm", "moe_act", "moe", "mla_up_proj", "shared_experts", "mlp"};
  return names;
}

RecomputeSet DefaultSelectiveSet() {
  RecomputeSet s;
  s.layernorm = s.moe_act = s.mlp_act = s.shared_act = true;
  return s;
}

RecomputeSet RecomputeSetOf(const TrainingConfig& t) {
  if (t.recompute != Recompute::kSelective) return {};
  if (t.recompute_modules.empty()) return DefaultSelectiveSet();
  RecomputeSet s;
  for (const std::string& m : t.recompute_modules) {
    if (m == "core_attn")
      s.core_attn = true;
    else if (m == "layernorm")
      s.layernorm = true;
    else if (m == "moe_act")
      s.moe_act = true;
    else if (m == "moe")
      s.moe = true;
    else if (m == "mla_up_proj")
      s.mla_up_proj = true;
    else if (m == "shared_experts")
      s.shared_experts = true;
    else if (m == "mlp")
      s.mlp = true;
    else
      throw Error(fmt::format("recompute_modules: unknown module \"{}\"", m));
  }
  return s;
}

void ValidateRecomputeModules(const TrainingConfig& t, const std::string& field) {
  const auto& names = RecomputeModuleNames();
  std::vector<std::string> seen;
  for (const std::string& m : t.recompute_modules) {
    if (std::find(names.begin(), names.end(), m) == names.end()) {
      throw Error(fmt::format("{}: unknown module \"{}\"; modules (Megatron --recompute-modules): {}", field, m, fmt::join(names, ", ")));
    }
    if (std::find(seen.begin(), seen.end(), m) != seen.end()) throw Error(fmt::format("{}: module \"{}\" given twice", field, m));
    seen.push_back(m);
  }
  if (!t.recompute_modules.empty() && t.recompute != Recompute::kSelective) {
    throw Error(
        fmt::format("{}: modules are only recomputed with recompute selective, recompute is {}", field, RecomputeName(t.recompute)));
  }
}

RecomputeExtraUs SelectiveRecomputeUs(const RecomputeSet& s, const RecomputeForwardUs& f) {
  RecomputeExtraUs x;
  if (s.layernorm) x.attention += f.norms;
  if (s.core_attn) x.attention += f.attention_core;
  if (s.mla_up_proj) x.attention += f.mla_up_proj;
  if (s.moe) {
    // The whole MoE block again, its all-to-alls included (Megatron's "moe").
    x.router += f.router;
    x.permute += f.permute;
    x.dispatch += f.dispatch;
    x.grouped_gemm += f.grouped_gemm;
    x.unpermute += f.unpermute;
    x.combine += f.combine;
    x.shared_experts += f.shared_experts;
  } else {
    if (s.moe_act) x.grouped_gemm += f.routed_act;
    if (s.shared_experts)
      x.shared_experts += f.shared_experts;
    else if (s.shared_act)
      x.shared_experts += f.shared_act;
  }
  if (s.mlp)
    x.dense_mlp += f.dense_mlp;
  else if (s.mlp_act)
    x.dense_mlp += f.dense_act;
  return x;
}

}  // namespace dockyard
