// The shape of a model's MoE phases (see moe_shape.h).
#include "planner/cost/moe_shape.h"

#include <algorithm>

#include "planner/model/dispatcher.h"
#include "planner/model/flex_backend_limits.h"
#include "planner/model/precision.h"

namespace dockyard {

double FlexSmBandwidthScale(FlexBackend backend, int64_t num_sms) {
  if (num_sms <= 0) return 1.0;
  const int64_t full = backend == FlexBackend::kHybridEp ? kHybridEpFullRateSms : backend == FlexBackend::kDeepEp ? kDeepEpFullRateSms : 0;
  return full > 0 ? std::min(1.0, static_cast<double>(num_sms) / static_cast<double>(full)) : 1.0;
}

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
  if (shape.flex) shape.flex_nvlink_scale = FlexSmBandwidthScale(FlexBackendOf(t), t.run.moe_flex_dispatcher_num_sms);
  shape.allgather = ep > 1 && t.dispatcher == Dispatcher::kAllGather;
  if (t.fp8_dispatch) shape.dispatch_act_bytes = DispatchBytesPerElement(t, static_cast<double>(m.hidden_size), shape.act_bytes);
  shape.gemm_precision = GemmPrecisionOf(t);
  return shape;
}

}  // namespace dockyard
