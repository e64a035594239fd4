// Tokens each rank handles per micro-batch, shared by the memory and communication models
// (docs/memory-model.md, "Tokens per rank").
#pragma once

#include <cstdint>

#include "planner/layout/plan.h"
#include "planner/model/precision.h"

namespace dockyard {

// Whose autograd graph decides what a layer's MLPs keep for backward (memory.h LayerActivations,
// docs/memory-model.md "Saved tensors by framework release"):
//  - kTorchtitan: eager SwiGLU, silu(w1 x) * (w3 x) (torchtitan/models/common/moe.py
//    GroupedExperts): w1 out, silu out, w3 out and the product = 4F per row; the combine scores an
//    fp32 copy of the routed output (token_dispatcher.py combine: routed_output_RD.to(float32) *
//    scores) and keeps it.
//  - kMegatronCore (Megatron-Core >= 0.13, the current release): the fused SwiGLU keeps its input,
//    fc1's output (2F), and fc2 its input (F): 3F; the router probabilities are applied inside it
//    (weighted_bias_swiglu_impl, experts.py), so neither the fc2 output nor the combined rows are kept.
//  - kMegatronCoreUnpermuteProbs (before 0.13): the same 3F, but the unpermute after the combine
//    multiplies the probabilities in and keeps the T_r x top_k combined rows (token_dispatcher.py).
enum class SavedTensorRules : uint8_t { kTorchtitan, kMegatronCore, kMegatronCoreUnpermuteProbs };
// kTorchtitan under torchtitan; under megatron by the run's release (run_settings.h
// MegatronProbsInActivation).
SavedTensorRules SavedTensorRulesOf(const TrainingConfig& training, Convention convention);
// Whether the loss is TransformerEngine's fused cross-entropy as Megatron-Core calls it
// (run_settings.h TeCrossEntropy under the megatron convention; never under torchtitan).
bool TeCrossEntropyOf(const TrainingConfig& training, Convention convention);

struct Workload {
  int64_t tokens = 0;              // T: tokens of one micro-batch on a rank = ceil(b * s / cp)
  int64_t routed_tokens = 0;       // T_r: tokens whose routed rows an expert rank computes (RoutedTokens)
  int64_t dispatch_tokens = 0;     // tokens this rank routes and sends into the EP all-to-all: T_r under
                                   // torchtitan, ceil(T / tp) under megatron (before the etp all-gather)
  int64_t received_rows = 0;       // R_max = min(ceil(T_r * top_k * imbalance), ep * T_r * min(top_k, E / ep)); = T_r * top_k when ep = 1
  int64_t mean_received_rows = 0;  // T_r * top_k: the balanced mean
  int64_t act_bytes = 2;           // bytes per activation element (param dtype)
  int64_t tp_shards = 1;           // t: divisor of sequence-parallel activations (tp)
  int64_t expert_f_local = 0;      // F / expert TP degree (etp, or tp with EP off)
  // --precision fp8 (precision.h) under Fp8KeepsQuantizedTensors: the inputs of FP8 linear layers
  // are saved for backward in FP8, with blockwise scaling plus their 1x128 tile scales, with MXFP8
  // plus their 1 B scale per 32 elements
  // (LayerActivations).
  bool fp8_saved_inputs = false;
  Fp8Scaling fp8_scaling = Fp8Scaling::kNone;  // precision.h Fp8ScalingOf
  SavedTensorRules saved = SavedTensorRules::kTorchtitan;  // SavedTensorRulesOf
  // The loss is TransformerEngine's fused cross-entropy (megatron only, run_settings.h
  // TeCrossEntropy): the logits kept in their own dtype (memory.h LossBytesPerLogit).
  bool te_cross_entropy = false;
  // Megatron-Core clamps the routed experts' activation input with eager ops
  // (planner/model/expert_eager.h ExpertEagerOpsOf): unless the activation is recomputed, each
  // received row keeps a second [2F] copy, the cat the fused activation saves (memory.cc).
  bool eager_expert_clamp = false;
};

// Whether FP8 GEMMs keep quantized tensors between forward and backward: the FP8 weight copies
// (precision.h Fp8WeightCopyBytesPerElement) and the FP8-saved inputs of the linear layers.
//  - megatron: TransformerEngine keeps both (transformer_engine/pytorch/module/linear.py).
//  - torchtitan: torchao's Float8Linear casts weight and input inside each GEMM and saves the
//    high-precision ones for backward (torchao/float8/float8_linear.py,
//    matmul_with_hp_or_float8_args: ctx.save_for_backward(input_hp, weight_hp_t)): no FP8 copy
//    outlives a GEMM, and activations stay in param_dtype.
bool Fp8KeepsQuantizedTensors(const TrainingConfig& training, Convention convention);

// Bytes per element of the training dtypes (resolved once; the memory and communication rules
// read them per stage and per collective).
struct TrainingBytes {
  int64_t param = 2;    // param_dtype: compute and all-gather copies, activations
  int64_t grad = 4;     // grad_dtype: gradients and their reductions
  int64_t moments = 8;  // AdamW exp_avg + exp_avg_sq in fp32; 0 for SGD; under Muon, its scalar Adam's
  int64_t master = 4;   // fp32 master copy, 0 when params are fp32
  // Muon (muon.h): the momentum buffer of each element of a Muon group (MuonManagedGroup), in the
  // optimizer-state dtype; -1 without Muon. memory.h GroupStaticBytesOf applies it.
  int64_t muon_momentum = -1;
};
// Throws dockyard::Error for an unknown dtype.
TrainingBytes TrainingBytesOf(const TrainingConfig& training);

// Whether the FP8 GEMM weights (precision.h Fp8GemmGroup) are themselves the model parameters,
// kept in FP8 with no param_dtype copy: --fp8-param-gather under the distributed optimizer
// (dp_sharding zero1; precision.h, Megatron fp8_model_init). Not under fsdp: FSDP keeps its fp32
// shard and casts each all-gather (the memory of the FSDP rule does not move).
bool Fp8ModelParams(const TrainingConfig& training);
// The bytes per element of such weights under zero1 (memory.h StaticBytesOf): param 0 -- the
// parameter is the row-wise FP8 copy that precision.h Fp8WeightCopyBytesPerElement already counts
// (TransformerEngine's Float8Tensor holds its data and its transpose) -- and an fp32 master
// always (the distributed optimizer's shard_fp32_from_float8, even with float32 param_dtype);
// grads and moments as `bytes`.
TrainingBytes Fp8ModelParamBytes(const TrainingBytes& bytes);

// T_r, by convention:
//  - torchtitan: with tp > 1, EP on and etp == 1, ReordererSequenceParallel splits the
//    TP-replicated tokens over the tp ranks (T_r = ceil(T / tp)); otherwise every rank of a TP
//    group routes the whole T (T_r = T), with ETP / TP sharding the expert F instead.
//  - megatron: Megatron-Core's MoEAlltoAllTokenDispatcher starts from the ceil(T / tp) tokens
//    sequence parallelism leaves on a rank, permutes them, runs the EP all-to-all, then
//    all-gathers over the expert-TP group (gather_from_sequence_parallel_region on the etp group),
//    so an expert rank computes the rows of etp ranks: T_r = ceil(T / tp) * etp, and the rank
//    dispatches ceil(T / tp) tokens (Workload::dispatch_tokens). This equals torchtitan's rule
//    for etp == 1 < ep; it differs for ep == 1 with tp > 1 and etp == 1 (T / tp, not T), for
//    1 < etp < tp and for etp > tp (tp 1, etp 2: 2T).
Workload ComputeWorkload(const Plan& plan);
// T_r alone from the tokens of a rank T and the degrees (the rule above).
int64_t RoutedTokens(int64_t tokens, int64_t tp, int64_t ep, int64_t etp, Convention convention);
// The tokens a rank dispatches (Workload::dispatch_tokens, the rule above).
int64_t DispatchTokens(int64_t tokens, int64_t tp, int64_t ep, int64_t etp, Convention convention);
// The same from the plan's parts: `training` resolved as in a Plan (num_microbatches may be unset).
Workload ComputeWorkload(const ModelSpec& model, const ParallelDims& dims, const TrainingConfig& training);

// The deredundency dispatcher's outer EP size: the --oep given, else the number of nodes one EP
// group spans, ceil(ep / gpus_per_node), rounded up to a divisor of ep (ep = oep x iep);
// gpus_per_node is the machine's (machine.h, Plan::machine).
int64_t DeredundencyOep(const Plan& plan);
int64_t DeredundencyOep(const TrainingConfig& training, const Machine& machine, int64_t ep);
// The outer EP size the plan's dispatcher uses: DeredundencyOep with the deredundency
// dispatcher and ep > 1, else 1 (every routing sample and the dispatch buffers are keyed by it).
int64_t DispatchOep(const Plan& plan);
int64_t DispatchOep(const TrainingConfig& training, const Machine& machine, int64_t ep);

// Micro-batches of activations stage `stage` keeps in flight, in whole stages rounded up
// (pipeline_schedule.h ScheduleInFlightMicrobatches; 1F1B: min(pp - stage, M)): the report's figure.
int64_t InFlightMicrobatches(const Plan& plan, int64_t stage);
int64_t InFlightMicrobatches(const ParallelDims& dims, const TrainingConfig& training, int64_t stage);
// Chunk forwards stage `stage` keeps in flight (pipeline_schedule.h ScheduleInFlightChunks): what
// its activations are sized by, each a ChunksPerMicrobatch-th of the stage's layers.
int64_t InFlightChunks(const ParallelDims& dims, const TrainingConfig& training, int64_t stage);
// Layers held beyond the chunks (pipeline_schedule.h ScheduleExtraLayers: EP overlap).
int64_t ExtraLayersInFlight(const ParallelDims& dims, const TrainingConfig& training, int64_t stage);
// Model chunks per stage a micro-batch passes through: vpp (1 under DualPipe and plain 1F1B).
int64_t ChunksPerMicrobatch(const TrainingConfig& training);

}  // namespace dockyard
