// The shape of a model's MoE phases (see moe_shape.h).
#include "planner/cost/moe_shape.h"

#include "planner/model/dispatcher.h"
#include "planner/model/precision.h"

namespace dockyard {

MoePhaseShape MoePhaseShapeOf(const ModelSpec& m, const Workload& w, const TrainingConfig& t, int64_t ep) {
  const bool deredundency = ep > 1 && t.dispatcher == Dispatcher::kDeredundency;
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
  shape.flex = ep > 1 && t.dispatcher == Dispatcher::kDeepEp;
  shape.flex_fp8 = t.fp8_dispatch;
  shape.allgather = ep > 1 && t.dispatcher == Dispatcher::kAllGather;
  if (t.fp8_dispatch) shape.dispatch_act_bytes = DispatchBytesPerElement(t, static_cast<double>(m.hidden_size), shape.act_bytes);
  shape.gemm_precision = GemmPrecisionOf(t);
  return shape;
}

}  // namespace dockyard
