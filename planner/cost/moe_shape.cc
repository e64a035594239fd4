// The shape of a model's MoE phases (see moe_shape.h).
#include "planner/cost/moe_shape.h"

namespace dockyard {

MoePhaseShape MoePhaseShapeOf(const ModelSpec& m, const Workload& w, int64_t ep, bool deredundency) {
  MoePhaseShape shape;
  shape.ep = ep;
  shape.num_experts = m.moe.num_experts;
  shape.routed_tokens = static_cast<double>(w.routed_tokens);
  shape.dispatch_tokens = static_cast<double>(w.dispatch_tokens);
  shape.top_k = static_cast<double>(m.moe.top_k);
  shape.hidden = static_cast<double>(m.hidden_size);
  shape.act_bytes = static_cast<double>(w.act_bytes);
  shape.f_local = static_cast<double>(w.expert_f_local);
  shape.deredundency = deredundency;
  return shape;
}

}  // namespace dockyard
