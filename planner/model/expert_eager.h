// Which of Megatron-Core's eager PyTorch ops run around a run's routed experts (TEGroupedMLP,
// megatron/core/transformer/moe/experts.py, Megatron-Core 0.15-0.19): the one home of the rule that
// the time (planner/cost/kernels_model.h ExpertEagerKernels) and the saved tensors
// (planner/accounting/memory.cc) read.
#pragma once

#include "planner/model/model_spec.h"
#include "planner/model/training.h"

namespace dockyard {

struct ExpertEagerOps {
  // The activation clamp (ModelSpec moe.swiglu_limit > 0; Megatron activation_func_clamp_value):
  // fused_bias_geglu.py weighted_bias_quick_geglu_impl clamps both halves of the first linear's
  // [rows, 2F] output and torch.cat's them before the fused activation. Without recomputation of
  // the activation the clamps keep that output and the fused activation saves the cat's.
  bool clamp = false;
  // The second linear's bias (ModelSpec moe.expert_bias) added by TEGroupedMLP._apply_bias, scaled
  // by each row's router probability.
  bool fc2_bias = false;
};
// Both under Megatron (`megatron`) with routed experts, unless TransformerEngine's op fuser runs
// them inside its fused op (RunSettings::use_transformer_engine_op_fuser); none under torchtitan.
ExpertEagerOps ExpertEagerOpsOf(const ModelSpec& model, const TrainingConfig& training, bool megatron);

}  // namespace dockyard
