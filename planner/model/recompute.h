// Selective activation recomputation by module (docs/memory-model.md "Selective recomputation by
// module", docs/cost-model.md §3.13): which activations of a layer are dropped after the forward
// and rebuilt in the backward, and what rebuilding them costs.
//
// Modules are Megatron-LM's --recompute-modules (megatron/core/transformer/transformer_config.py,
// recompute_modules): core_attn, layernorm, moe_act, moe, mla_up_proj, shared_experts, mlp.
// `--recompute selective` without --recompute-modules keeps dockyard's documented default set:
// layernorm plus the SwiGLU activation of every MLP (routed experts as Megatron's moe_act, and the
// dense and shared-expert MLPs likewise) -- the set dockyard's memory model has always used for
// "selective", so its figures do not move.
#pragma once

#include <string>
#include <vector>

#include "planner/model/training.h"

namespace dockyard {

struct RecomputeSet {
  bool layernorm = false;       // the norm outputs (input / post-attention RMSNorm, MLA q_a / kv_a norms)
  bool core_attn = false;       // the attention core's output and softmax statistics
  bool moe_act = false;         // routed experts' SwiGLU intermediates (silu(gate), gate x up)
  bool mlp_act = false;         // the dense MLP's SwiGLU intermediates (default set only)
  bool shared_act = false;      // the shared experts' SwiGLU intermediates (default set only)
  bool moe = false;             // the whole MoE block after its input (router, routed rows, shared experts)
  bool mla_up_proj = false;     // MLA's q_b and kv_b outputs
  bool shared_experts = false;  // the whole shared-expert MLP
  bool mlp = false;             // the whole dense MLP
};

// Megatron's module names, in its documentation's order.
const std::vector<std::string>& RecomputeModuleNames();

// The set a training config recomputes selectively: none unless recompute is selective; then
// recompute_modules, or the default set when empty.
RecomputeSet RecomputeSetOf(const TrainingConfig& training);
// The default set of `--recompute selective`.
RecomputeSet DefaultSelectiveSet();

// Checks module names (known, no duplicates) and that modules are only given with recompute
// selective. Throws dockyard::Error naming `field` ("--recompute-modules" or
// "/training/recompute_modules"), the value and the rule.
void ValidateRecomputeModules(const TrainingConfig& training, const std::string& field);

// What re-running the forward of the recomputed modules costs in the backward of one layer, per
// phase, in microseconds, from the forward times of the pieces (filled by the cost model).
struct RecomputeForwardUs {
  double norms = 0;           // the layer's norm kernels
  double attention_core = 0;  // flash-attention forward
  double mla_up_proj = 0;     // q_b and kv_b GEMMs
  double router = 0, permute = 0, dispatch = 0, grouped_gemm = 0, unpermute = 0, combine = 0;
  double routed_act = 0;  // the routed experts' SwiGLU kernel
  double dense_act = 0, shared_act = 0;
  double shared_experts = 0, dense_mlp = 0;
};
struct RecomputeExtraUs {
  double attention = 0, router = 0, permute = 0, dispatch = 0, grouped_gemm = 0, unpermute = 0, combine = 0, shared_experts = 0,
         dense_mlp = 0;
};
RecomputeExtraUs SelectiveRecomputeUs(const RecomputeSet& set, const RecomputeForwardUs& fwd);

// torchtitan's per-layer selective activation checkpointing (activation_checkpoint.mode "selective",
// selective_ac_option "N"; torchtitan/distributed/activation_checkpoint.py _apply_layer_sac up to
// commit 114151ad4, which removed it in March 2026): a process-wide counter runs over the
// transformer blocks each rank wraps, in order, and the k-th block (k from 1) is fully
// checkpointed (checkpoint_wrapper) when k % N == 0 -- every N-th block of the stage -- while the
// others keep all their activations; N = 0 checkpoints every block (its `not ac_freq` branch).
// A checkpointed block costs what recompute full costs it (its input kept, its forward re-run in
// backward), the others what recompute none costs them.
//
// The frequency N of `training` (an integer >= 1; torchtitan's 0 is returned as 1), or 0 when
// per-layer checkpointing is off (recompute is not selective or selective_ac_option is empty).
int64_t LayerSacEvery(const TrainingConfig& training);
// Per decoder layer (`layer_stage[l]`: the pipeline rank holding layer l), whether it is
// checkpointed under frequency `every` >= 1: its position among its rank's layers, counted from 1
// in layer order, is a multiple of `every`.
std::vector<bool> LayerSacCheckpointed(const std::vector<int64_t>& layer_stage, int64_t every);
// Checks selective_ac_option: digits only (torchtitan's isdigit rule), only with recompute
// selective, not together with recompute_modules. Throws dockyard::Error naming `field`
// ("--selective-ac-option" or "/training/selective_ac_option"), the value and the rule.
void ValidateSelectiveAcOption(const TrainingConfig& training, const std::string& field);
// The convention rule: selective_ac_option is torchtitan's setting, refused with `torchtitan` false
// (Megatron's selective recompute is --recompute-modules).
void ValidateSelectiveAcConvention(const TrainingConfig& training, bool torchtitan);

}  // namespace dockyard
