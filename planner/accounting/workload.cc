// Tokens per rank (see workload.h).
#include "planner/accounting/workload.h"

#include <algorithm>
#include <cmath>

#include "planner/base/checked_math.h"
#include "planner/base/error.h"
#include "planner/model/expert_eager.h"
#include "planner/model/precision.h"
#include "planner/model/pipeline_schedule.h"

namespace dockyard {

Workload ComputeWorkload(const Plan& plan) {
  return ComputeWorkload(plan.model, plan.dims, plan.training);
}

TrainingBytes TrainingBytesOf(const TrainingConfig& t) {
  TrainingBytes b;
  b.param = DtypeBytes(t.param_dtype, "param_dtype");
  b.grad = DtypeBytes(t.grad_dtype, "grad_dtype");
  // exp_avg + exp_avg_sq, fp32 (bf16 with optimizer_states_dtype bfloat16, Megatron-Bridge recipes)
  // Muon's scalar parameters take Adam (--muon-scalar-optimizer adam), its matrices one momentum.
  const bool adam = t.optimizer == Optimizer::kAdamW || t.optimizer == Optimizer::kMuon;
  b.moments = adam ? (t.optimizer_states_dtype == "bfloat16" ? 4 : 8) : 0;
  if (t.optimizer == Optimizer::kMuon) b.muon_momentum = t.optimizer_states_dtype == "bfloat16" ? 2 : 4;
  b.master = b.param == 4 ? 0 : 4;  // fp32 master copy
  return b;
}

bool Fp8ModelParams(const TrainingConfig& t) {
  return t.fp8_param_gather && Fp8Gemms(t) && t.dp_sharding == DpSharding::kZero1;
}

TrainingBytes Fp8ModelParamBytes(const TrainingBytes& bytes) {
  TrainingBytes b = bytes;
  b.param = 0;
  b.master = 4;
  return b;
}

int64_t DispatchTokens(int64_t tokens, int64_t tp, int64_t ep, int64_t etp, Convention convention) {
  if (convention == Convention::kMegatron) return (tokens + tp - 1) / tp;  // the sequence-parallel shard
  const bool split_over_tp = tp > 1 && ep > 1 && etp == 1;
  return split_over_tp ? (tokens + tp - 1) / tp : tokens;
}

int64_t RoutedTokens(int64_t tokens, int64_t tp, int64_t ep, int64_t etp, Convention convention) {
  const int64_t dispatched = DispatchTokens(tokens, tp, ep, etp, convention);
  // Megatron all-gathers the dispatched rows over the expert-TP group (etp <= 2^20, tokens <= 2^31).
  return convention == Convention::kMegatron ? CheckedMul(dispatched, etp, "routed tokens (ceil(T / tp) * etp)") : dispatched;
}

Workload ComputeWorkload(const ModelSpec& model, const ParallelDims& d, const TrainingConfig& t) {
  Workload w;
  const int64_t seq_tokens = CheckedMul(t.micro_batch_size, t.seq_len, "tokens per micro-batch");
  w.tokens = (seq_tokens + d.cp - 1) / d.cp;
  const bool experts_use_tp = d.ep == 1 && IsTorchtitan(d.convention);
  const int64_t expert_tp = experts_use_tp ? d.tp : d.etp;
  w.routed_tokens = RoutedTokens(w.tokens, d.tp, d.ep, d.etp, d.convention);
  w.dispatch_tokens = DispatchTokens(w.tokens, d.tp, d.ep, d.etp, d.convention);
  w.mean_received_rows = CheckedMul(w.routed_tokens, model.moe.top_k, "routed rows");
  // The most loaded rank receives imbalance x the mean, but never more than every token of its EP
  // group sending it min(top_k, local experts) rows; with one EP rank, max = mean.
  const int64_t local_experts = model.moe.num_experts / d.ep;
  const double cap = static_cast<double>(d.ep) * static_cast<double>(w.routed_tokens) *
                     static_cast<double>(std::min<int64_t>(model.moe.top_k, local_experts));
  const double rows = d.ep == 1 ? static_cast<double>(w.mean_received_rows)
                                : std::min(std::ceil(static_cast<double>(w.mean_received_rows) * t.imbalance), cap);
  if (!(rows < 9.0e15)) throw Error("received rows (routed tokens * top_k * imbalance) exceed 9e15");
  w.received_rows = static_cast<int64_t>(rows);
  w.act_bytes = DtypeBytes(t.param_dtype, "param_dtype");
  w.tp_shards = d.tp;
  w.expert_f_local = model.moe.moe_intermediate_size / expert_tp;
  w.fp8_saved_inputs = Fp8KeepsQuantizedTensors(t, d.convention);
  w.fp8_scaling = Fp8ScalingOf(t);
  w.saved = SavedTensorRulesOf(t, d.convention);
  w.te_cross_entropy = TeCrossEntropyOf(t, d.convention);
  w.eager_expert_clamp = ExpertEagerOpsOf(model, t, d.convention == Convention::kMegatron).clamp;
  return w;
}

bool TeCrossEntropyOf(const TrainingConfig& t, Convention convention) {
  return convention == Convention::kMegatron && TeCrossEntropy(t.run);
}

SavedTensorRules SavedTensorRulesOf(const TrainingConfig& t, Convention convention) {
  if (convention != Convention::kMegatron) return SavedTensorRules::kTorchtitan;
  return MegatronProbsInActivation(t.run) ? SavedTensorRules::kMegatronCore : SavedTensorRules::kMegatronCoreUnpermuteProbs;
}

bool Fp8KeepsQuantizedTensors(const TrainingConfig& t, Convention convention) {
  return Fp8Gemms(t) && convention == Convention::kMegatron;
}

int64_t DispatchOep(const Plan& plan) {
  return DispatchOep(plan.training, plan.machine, plan.dims.ep);
}

int64_t DispatchOep(const TrainingConfig& training, const Machine& machine, int64_t ep) {
  return training.dispatcher == Dispatcher::kDeredundency && ep > 1 ? DeredundencyOep(training, machine, ep) : 1;
}

int64_t DeredundencyOep(const Plan& plan) {
  return DeredundencyOep(plan.training, plan.machine, plan.dims.ep);
}

int64_t DeredundencyOep(const TrainingConfig& training, const Machine& machine, int64_t ep) {
  if (training.oep) return *training.oep;
  // The nodes an EP group spans, ceil(ep / gpus_per_node), rounded up to a divisor of ep (the
  // dispatcher needs ep = oep x iep): ep 60 on 8-GPU nodes spans 8 nodes, oep 10 x iep 6.
  const int64_t gpn = std::max<int64_t>(1, machine.gpus_per_node);
  int64_t oep = std::max<int64_t>(1, (ep + gpn - 1) / gpn);
  while (oep < ep && ep % oep != 0) ++oep;
  return std::min(oep, std::max<int64_t>(1, ep));
}

int64_t InFlightMicrobatches(const Plan& plan, int64_t stage) {
  return InFlightMicrobatches(plan.dims, plan.training, stage);
}

int64_t InFlightMicrobatches(const ParallelDims& dims, const TrainingConfig& training, int64_t stage) {
  return ScheduleInFlightMicrobatches(training.run, dims.pp, training.num_microbatches.value_or(dims.pp), stage);
}

int64_t InFlightChunks(const ParallelDims& dims, const TrainingConfig& training, int64_t stage) {
  return ScheduleInFlightChunks(training.run, dims.pp, training.num_microbatches.value_or(dims.pp), stage);
}

int64_t ExtraLayersInFlight(const ParallelDims& dims, const TrainingConfig& training, int64_t stage) {
  return ScheduleExtraLayers(training.run, dims.pp, training.num_microbatches.value_or(dims.pp), stage);
}

int64_t ChunksPerMicrobatch(const TrainingConfig& training) {
  return IsDualPipe(training.run) ? 1 : std::max<int64_t>(1, training.run.vpp);
}

}  // namespace dockyard
