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

#include "planner/model/model_spec.h"
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
// recompute_modules, or DefaultSelectiveSet when empty (a config no convention default reached:
// BuildPlan applies convention.h ApplyConventionDefaults first, which gives a bare selective
// Megatron's core_attn or torchtitan's selective_ac_option).
RecomputeSet RecomputeSetOf(const TrainingConfig& training);
// Norms and every SwiGLU activation (`--recompute-modules layernorm,moe_act` plus the dense and
// shared experts' activations): a selective config without modules or a convention's default.
RecomputeSet DefaultSelectiveSet();

// Checks module names (known, no duplicates) and that modules are only given with recompute
// selective. Throws dockyard::Error naming `field` ("--recompute-modules" or
// "/training/recompute_modules"), the value and the rule.
void ValidateRecomputeModules(const TrainingConfig& training, const std::string& field);
// The model rules of the module list (BuildPlan, and search before it enumerates layouts):
//  - "mla_up_proj" needs multi-latent attention (Megatron raises "mla_up_proj in
//    recompute_modules is only supported with multi_latent_attention",
//    megatron/core/transformer/transformer_config.py __post_init__);
//  - "shared_experts" needs shared experts (num_shared_experts > 0): Megatron wraps the
//    SharedExpertMLP in a checkpoint only where a MoE layer builds one
//    (megatron/core/transformer/moe/shared_experts.py), so on a model without them the module
//    would recompute nothing; dockyard refuses it rather than ignore it.
// Throws dockyard::Error naming recompute_modules (--recompute-modules), the module, the model's
// value and the rule.
void ValidateRecomputeModulesForModel(const TrainingConfig& training, const ModelSpec& model);

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
  // Per-op checkpointing only (OpSac): every memory-bound kernel of the attention block, the
  // re-run (even-numbered) linears of attention, shared experts and dense MLP, and the
  // sequence-parallel all-gathers (2 per layer with tp > 1) re-run with them.
  double attention_kernels = 0, attention_linears = 0, shared_linears = 0, dense_linears = 0, tp_all_gathers = 0;
};
struct RecomputeExtraUs {
  double attention = 0, router = 0, permute = 0, dispatch = 0, grouped_gemm = 0, unpermute = 0, combine = 0, shared_experts = 0,
         dense_mlp = 0, tp_comm = 0;
};
RecomputeExtraUs SelectiveRecomputeUs(const RecomputeSet& set, const RecomputeForwardUs& fwd);
// Per-op checkpointing (OpSac): the backward re-runs the block's memory-bound kernels, its
// even-numbered linears, the router (its gate force-recomputed), permute and unpermute, the routed
// experts' grouped GEMMs and SwiGLU, the shared experts' and dense MLP's re-run linears and
// activations, and the tp all-gathers; not attention's core nor the dispatch and combine
// all-to-alls (saved).
RecomputeExtraUs OpSacRecomputeUs(const RecomputeForwardUs& fwd);

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
// per-layer checkpointing is off (recompute is not selective, selective_ac_option is empty or "op").
int64_t LayerSacEvery(const TrainingConfig& training);
// Per decoder layer (`layer_stage[l]`: the pipeline rank holding layer l), whether it is
// checkpointed under frequency `every` >= 1: its position among its rank's layers, counted from 1
// in layer order, is a multiple of `every`.
std::vector<bool> LayerSacCheckpointed(const std::vector<int64_t>& layer_stage, int64_t every);
// Checks selective_ac_option: "op" or digits only (torchtitan's isdigit rule), only with recompute
// selective, not together with recompute_modules. Throws dockyard::Error naming `field`
// ("--selective-ac-option" or "/training/selective_ac_option"), the value and the rule.
void ValidateSelectiveAcOption(const TrainingConfig& training, const std::string& field);
// torchtitan's per-op selective activation checkpointing (selective_ac_option "op";
// torchtitan/distributed/activation_checkpoint.py `_apply_op_sac` with each model's
// `_op_sac_save_list` in models/{llama3,llama4,qwen3,deepseek_v3}/parallelize.py up to commit
// 114151ad4, and the `SelectiveAC` class with `_get_default_save_ops` since, per-op being its only
// selective mode now). Every transformer block is wrapped in a checkpoint whose policy sees each
// forward op in order and:
//  - saves (MUST_SAVE) the outputs of the compute-intensive ops (SDPA / flash / flex attention;
//    PyTorch's get_default_op_list compute_intensive_ops: mm, addmm, bmm, ...), aten.max, topk, and
//    the communication ops reduce_scatter_tensor and all_to_all_single (DeepEP / HybridEP dispatch
//    and combine),
//  - but recomputes every second aten.mm / aten.linear: a counter over the block's mm calls,
//    restarted per block, saves the odd-numbered ones and recomputes the even-numbered ones,
//  - recomputes, without counting it, every mm shaped like a linear of
//    per_op_sac_force_recompute_mm_shapes_by_fqns (default "moe.router.gate": the router gate),
//  - recomputes everything else: norms, rotary, SwiGLU activations, router scores, permutes,
//    tensor-parallel all-gathers, and the routed experts' torch._grouped_mm (in no save list).
// A block keeps its input (the checkpoint's) and the saved outputs; in backward it is rebuilt, the
// saved outputs reused, before its gradients run, one block at a time.
//
// True when `training` selects it: recompute selective and selective_ac_option "op".
bool OpSac(const TrainingConfig& training);
// Where a block's linear sits (torchtitan's order: attention, then the dense MLP or the shared
// experts) and how tensor parallelism shards it (torchtitan's TP plan: colwise q/k/v, wq_b, wkv_b,
// w1, w3; rowwise wo, w2, whose output is a partial sum of the full width; MLA's wq_a and wkv_a
// and the shared-expert gate replicated).
enum class OpSacPart { kAttention, kDenseMlp, kSharedExperts };
enum class LinearTp { kColwise, kRowwise, kReplicated };
struct OpSacLinear {
  const char* name;  // torchtitan's module name
  OpSacPart part;
  int64_t in = 0, out = 0;  // features, unsharded
  LinearTp tp = LinearTp::kColwise;
  bool saved = false;  // odd in the block's mm count: output kept; even: re-run in backward
};
// The mm-counted linears of one transformer block of `model` in forward order (torchtitan
// models/common/attention.py wq, wk, wv (or DBRX's fused wqkv), wo; deepseek_v3/model.py wq or
// wq_a, wq_b, wkv_a, wkv_b, wo; feed_forward.py w2(silu(w1(x)) * w3(x)); moe.py runs the routed
// experts (grouped GEMMs, not counted) before the shared experts), `moe_layer` choosing the shared
// experts (if any) over the dense MLP, each marked saved or recomputed by the counter. The router
// gate is force-recomputed and not listed.
std::vector<OpSacLinear> OpSacLinears(const ModelSpec& model, bool moe_layer);
// The model rules of the per-op policy: refused for models whose blocks dockyard does not list
// (linear-attention layers, DeepSeek Sparse Attention's indexer) and with --precision fp8
// (torchao's float8 linears run as _scaled_mm, which the policy's mm counter does not see: current
// torchtitan saves every one, the per-model lists before 114151ad4 none).
// Throws dockyard::Error naming the field, its value and the rule.
void ValidateOpSac(const TrainingConfig& training, const ModelSpec& model);

// The convention rule: selective_ac_option is torchtitan's setting, refused with `torchtitan` false
// (Megatron's selective recompute is --recompute-modules).
void ValidateSelectiveAcConvention(const TrainingConfig& training, bool torchtitan);

}  // namespace dockyard
