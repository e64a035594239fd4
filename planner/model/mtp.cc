// MTP modules (see mtp.h).
#include "planner/model/mtp.h"

#include "planner/base/checked_math.h"
#include "planner/model/inventory.h"

namespace dockyard {

int64_t MtpModuleParams(const ModelSpec& m) {
  const ParamInventory inv = BuildInventory(m);
  const int64_t last = m.num_hidden_layers - 1;
  int64_t layer = 0;
  for (const auto& p : inv.params) {
    if (p.layer == last) layer = CheckedAdd(layer, p.Numel(), "MTP layer parameters");
  }
  const int64_t D = m.hidden_size, V = m.vocab_size;
  // enorm, hnorm, shared_head.norm; eh_proj [D, 2D]; embed_tokens and shared_head.head [V, D].
  return CheckedAdd(layer, CheckedAdd(3 * D + 2 * D * D, CheckedMul(2 * V, D, "MTP embedding and head"), "MTP module"),
                    "MTP module parameters");
}

std::vector<ParamInfo> MtpExtraParams(const ModelSpec& m, int64_t pp) {
  const int64_t D = m.hidden_size;
  auto param = [&](const char* name, std::vector<int64_t> shape, Role role, int tp_dim) {
    ParamInfo p;
    p.fqn = std::string("mtp.") + name;
    p.shape = std::move(shape);
    p.dtype = m.dtype;
    p.role = role;
    p.tp_dim = tp_dim;
    return p;
  };
  std::vector<ParamInfo> out = {param("enorm.weight", {D}, Role::kNorm, -1), param("hnorm.weight", {D}, Role::kNorm, -1),
                                param("eh_proj.weight", {D, 2 * D}, Role::kDenseMlpUp, 0),
                                param("final_layernorm.weight", {D}, Role::kNorm, -1)};
  if (pp > 1) out.push_back(param("embed_tokens.weight", {m.vocab_size, D}, Role::kEmbedding, 0));
  return out;
}

}  // namespace dockyard
