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

int64_t MtpExtraElementsOnRank(const ModelSpec& m, int64_t tp, int64_t pp) {
  const int64_t D = m.hidden_size;
  const int64_t embedding = pp > 1 ? CheckedMul((m.vocab_size + tp - 1) / tp, D, "MTP embedding") : 0;
  return 3 * D + 2 * D * D / tp + embedding;
}

}  // namespace dockyard
