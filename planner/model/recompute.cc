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
  if (LayerSacEvery(t) > 0) return {};  // torchtitan per-layer: whole blocks, no module set
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

int64_t LayerSacEvery(const TrainingConfig& t) {
  if (t.recompute != Recompute::kSelective || t.selective_ac_option.empty()) return 0;
  const int64_t n = std::stoll(t.selective_ac_option);  // digits only (ValidateSelectiveAcOption)
  return n == 0 ? 1 : n;
}

std::vector<bool> LayerSacCheckpointed(const std::vector<int64_t>& layer_stage, int64_t every) {
  std::vector<bool> out(layer_stage.size(), false);
  std::vector<int64_t> count;  // blocks wrapped so far per rank
  for (size_t l = 0; l < layer_stage.size(); ++l) {
    const size_t s = static_cast<size_t>(layer_stage[l]);
    if (count.size() <= s) count.resize(s + 1, 0);
    out[l] = ++count[s] % every == 0;
  }
  return out;
}

void ValidateSelectiveAcOption(const TrainingConfig& t, const std::string& field) {
  const std::string& v = t.selective_ac_option;
  if (v.empty()) return;
  const bool digits = v.size() <= 9 && std::all_of(v.begin(), v.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
  if (!digits) {
    throw Error(
        fmt::format("{}: \"{}\" is not a layer frequency; torchtitan's per-layer option is a non-negative integer N "
                    "(every N-th transformer block checkpointed, at most 9 digits)",
                    field, v));
  }
  if (t.recompute != Recompute::kSelective) {
    throw Error(
        fmt::format("{}: {} applies with recompute selective (torchtitan activation_checkpoint.mode \"selective\"), recompute is {}", field,
                    v, RecomputeName(t.recompute)));
  }
  if (!t.recompute_modules.empty()) {
    throw Error(
        fmt::format("{}: {} checkpoints whole blocks (torchtitan); it cannot be combined with the Megatron module list "
                    "recompute_modules ({})",
                    field, v, fmt::join(t.recompute_modules, ",")));
  }
}

void ValidateSelectiveAcConvention(const TrainingConfig& t, bool torchtitan) {
  if (t.selective_ac_option.empty() || torchtitan) return;
  throw Error(
      fmt::format("selective_ac_option ({}): torchtitan's per-layer selective activation checkpointing needs --convention "
                  "torchtitan; with --convention megatron use --recompute-modules",
                  t.selective_ac_option));
}

}  // namespace dockyard
