// Which eager ops run around the routed experts (see expert_eager.h).
#include "planner/model/expert_eager.h"

namespace dockyard {

ExpertEagerOps ExpertEagerOpsOf(const ModelSpec& m, const TrainingConfig& t, bool megatron) {
  ExpertEagerOps o;
  if (!megatron || t.run.use_transformer_engine_op_fuser || m.moe.num_experts == 0) return o;
  o.clamp = m.moe.swiglu_limit > 0;
  o.fc2_bias = m.moe.expert_bias;
  return o;
}

}  // namespace dockyard
