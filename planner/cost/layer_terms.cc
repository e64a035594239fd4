// One layer's terms: unit rates, the micro-batch's shape, each compute phase's forward time, the
// kernel model's shaped terms (memoized), context parallelism's exchange, FSDP's per-layer
// schedule and what selective recomputation re-runs (see step_internal.h, docs/cost-model.md).
#include "planner/cost/step_internal.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <optional>
#include <unordered_map>

#include <fmt/format.h>

#include "planner/accounting/comm.h"
#include "planner/accounting/memory.h"
#include "planner/accounting/workload.h"
#include "planner/base/error.h"
#include "planner/base/phase.h"
#include "planner/cost/attention_support.h"
#include "planner/cost/gemm_efficiency.h"
#include "planner/cost/kernels_model.h"
#include "planner/cost/model_flops.h"
#include "planner/cost/network.h"
#include "planner/cost/op_sac_time.h"
#include "planner/cost/units.h"
#include "planner/model/pipeline_schedule.h"
#include "planner/model/precision.h"
#include "planner/model/recompute.h"

namespace dockyard {

void KernelTermsMemoDeleter::operator()(KernelTermsMemo* memo) const {
  delete memo;
}

KernelTermsMemoPtr MakeKernelTermsMemo() {
  return KernelTermsMemoPtr(new KernelTermsMemo);
}

namespace cost_detail {

CpExchangeUs CpExchangePerLayerUs(const ModelSpec& m, const ParallelDims& d, const TrainingConfig& t, const ClusterSpec& c, double T,
                                  double ab, double heads_local, double d_qk, double d_v, double core_us) {
  CpExchangeUs cp;
  if (d.cp <= 1) return cp;
  const int64_t domain = NvlinkDomainGpus(c);
  const bool cp_spans = (d.cp - 1) * d.tp / domain > 0;  // rank 0's cp group {0, tp, ...}
  if (t.run.cp_comm == "a2a") {
    const double width = 2.0 * heads_local * (d_qk + d_v) + static_cast<double>(CpKvWidth(m, d.tp));  // q, o, k, v
    cp.forward = CpAllToAllUs(T * width * ab, d.cp, cp_spans, c);
    cp.backward = cp.forward;
  } else {
    const double kv_bytes = T * static_cast<double>(CpKvWidth(m, d.tp)) * ab;
    cp.forward = CpRingExposedUs(kv_bytes, core_us, d.cp, cp_spans, c);
    cp.backward = CpRingExposedUs(2.0 * kv_bytes, 2.0 * core_us, d.cp, cp_spans, c);
  }
  return cp;
}

FsdpLayerUs FsdpPerLayerUs(const TrainingConfig& t, const StepInputs& in, const ClusterSpec& c) {
  FsdpLayerUs f;
  if (*t.dp_sharding != DpSharding::kFsdp) return f;
  const int64_t param_b = DtypeBytes(t.param_dtype, "param_dtype"), grad_b = DtypeBytes(t.grad_dtype, "grad_dtype");
  const auto& dn = in.dense_dp_group;
  const auto& sp = in.sparse_dp_group;
  for (int kind = 0; kind < 2; ++kind) {
    if (!in.fsdp_layer[kind].present) continue;
    const double dense_elems = in.fsdp_layer[kind].dense_elems, sparse_elems = in.fsdp_layer[kind].sparse_elems;
    // --fp8-param-gather: the FP8 GEMM weights travel in FP8 (precision.h Fp8ParamGatherBytesPerElement).
    const double fp8_b = Fp8ParamGatherBytesPerElement(t, static_cast<double>(param_b));
    const double fp8_dense = in.fsdp_layer[kind].fp8_dense_elems, fp8_sparse = in.fsdp_layer[kind].fp8_sparse_elems;
    auto gathered = [&](double elems, double fp8) {  // comm.h ParamAllGatherBytes
      return static_cast<double>(
          ParamAllGatherBytes(static_cast<int64_t>(elems), static_cast<int64_t>(fp8), param_b, fp8_b, "FSDP all-gather bytes"));
    };
    f.all_gather[kind] = RingCollectiveUs(gathered(dense_elems, fp8_dense), dn.size, dn.spans_nodes, c, dn.members_per_domain) +
                         RingCollectiveUs(gathered(sparse_elems, fp8_sparse), sp.size, sp.spans_nodes, c, sp.members_per_domain);
    f.reduce_scatter[kind] = RingCollectiveUs(dense_elems * grad_b, dn.size, dn.spans_nodes, c, dn.members_per_domain) +
                             RingCollectiveUs(sparse_elems * grad_b, sp.size, sp.spans_nodes, c, sp.members_per_domain);
  }
  return f;
}

SelectiveKernelsUs SelectiveKernelsOf(const ModelSpec& m, const KernelShape& ks, const MemoryBoundKnobs& o, double hbm_gbps) {
  auto mem = [&](const std::vector<KernelBytes>& k) { return MemoryBoundUs(k, hbm_gbps, o.hbm_efficiency, o.floor_us); };
  SelectiveKernelsUs s;
  std::vector<KernelBytes> norms;
  for (const KernelBytes& k : AttentionBlockKernels(m, ks, false)) {
    if (k.name.find("norm") != std::string::npos && k.name != "qk_norm") norms.push_back(k);
  }
  s.norms = mem(norms);
  if (m.moe.num_shared_experts > 0)
    s.shared_act = mem({SwigluKernel(ks.tokens, m.moe.shared_expert_intermediate_size / ks.tp, ks.act_bytes, false)});
  s.dense_act = mem({SwigluKernel(ks.tokens, m.intermediate_size / ks.tp, ks.act_bytes, false)});
  return s;
}

LayerTerms LayerTermsOf(const ModelSpec& m, const ParallelDims& d, const TrainingConfig& t, const ClusterSpec& c, const StepInputs& in,
                        ComputeModel model) {
  LayerTerms L(m, d, t, c, in, model);
  const ComputeKnobs& kn = L.kn;
  const auto& a = m.attention;
  const Workload& w = in.workload;
  L.peak = c.dense_bf16_tflops * kFlopsPerUsPerTflops;  // FLOP per microsecond
  L.hbm = c.hbm_gbps * kBytesPerUsPerGbps;
  L.T = static_cast<double>(w.tokens);
  L.D = static_cast<double>(m.hidden_size), L.ab = static_cast<double>(w.act_bytes);
  L.tp = static_cast<double>(d.tp);
  L.E = static_cast<double>(m.moe.num_experts);
  const double peak = L.peak, T = L.T, D = L.D, ab = L.ab, tp = L.tp, E = L.E;
  // Attention: projections from the parameter count of one layer, core from the context.
  const double attn_params = in.attention_params;
  L.heads_local = a.num_attention_heads / tp;
  L.d_qk = a.QkHeadDim();
  L.d_v = a.VHeadDim();
  // Causal attention: each of the T local tokens attends on average to half of the sequence, or
  // its sliding window's keys on the model's sliding-window layers (gemm_efficiency.h).
  L.core_flops = AttentionCoreFlops(m, T, static_cast<double>(t.seq_len), L.heads_local);
  // FP8 GEMMs (gemm_efficiency.h Fp8GemmSpeedup) speed up the projections, not the flash core.
  L.fp8x = Fp8GemmSpeedup(kn, L.precision);
  const double flash_x = FlashCoreSpeedup(kn, L.precision, m, static_cast<double>(t.seq_len));  // FP8 attention (gemm_efficiency.h)
  L.fixed_core_us = L.core_flops / (peak * kn.flash.fixed_efficiency * flash_x);  // the core at the fixed efficiency
  L.attention_us = 2.0 * T * attn_params / tp / (peak * kn.gemm.dense_efficiency * L.fp8x) + L.fixed_core_us;
  // Context parallelism's K/V exchange per layer (network.h): the ring's transfers under the
  // attention core's blocks, or the Ulysses all-to-alls of Q, K, V and the output.
  L.cp = CpExchangePerLayerUs(m, d, t, c, T, ab, L.heads_local, L.d_qk, L.d_v, L.fixed_core_us);
  L.tp_collective = RingCollectiveUs(T * D * ab, in.tp_group.size, in.tp_group.spans_nodes, c, in.tp_group.members_per_domain);
  // Megatron-Core's alltoall / flex dispatcher gathers the rows that reached a rank over the
  // expert-TP group (token_dispatcher.py dispatch_postprocess, gather_from_sequence_parallel_region
  // on expt_tp) and reduce-scatters them before the combine: the mean rows, balanced routing.
  if (d.convention == Convention::kMegatron && d.etp > 1 && m.moe.num_experts > 0) {
    L.etp_collective = RingCollectiveUs(static_cast<double>(w.mean_received_rows) * D * ab, in.etp_group.size, in.etp_group.spans_nodes, c,
                                        in.etp_group.members_per_domain);
  }
  if (d.tp > 1) {
    // The linears beside the sequence-parallel collectives (tp_overlap.h), forward: by shape under
    // --compute-model kernels, else at the dense efficiency.
    auto linear = [&](double n, double k) {
      return L.kernels ? LinearUs(T, n, k, false, c.dense_bf16_tflops, kn, L.precision) : 2.0 * T * n * k / (peak * kn.gemm.dense_efficiency * L.fp8x);
    };
    // The block's column- and row-parallel linears (gemm_efficiency.h AttentionLinearShapes,
    // MlpLinearShapes; MLA's replicated down-projections are in neither).
    auto partners = [&](const LinearShapes& shapes) {
      TpBlockGemmsUs g;
      for (int i = 0; i < shapes.size; ++i) {
        const LinearShape& x = shapes.items[i];
        if (x.split == LinearShape::kColumn) g.column += linear(x.n, x.k);
        if (x.split == LinearShape::kRow) g.row += linear(x.n, x.k);
      }
      return g;
    };
    L.tp_attention = partners(AttentionLinearShapes(m, tp));
    auto mlp = [&](double f) { return partners(MlpLinearShapes(D, f, tp)); };
    if (m.intermediate_size > 0) L.tp_dense_mlp = mlp(static_cast<double>(m.intermediate_size));
    if (m.moe.num_shared_experts > 0) L.tp_shared_experts = mlp(static_cast<double>(m.moe.shared_expert_intermediate_size));
  }
  L.router_us = std::max(2.0 * static_cast<double>(w.dispatch_tokens) * D * E / (peak * kn.gemm.dense_efficiency), kn.memory_bound.floor_us);
  L.shared_us =
      m.moe.num_shared_experts > 0 ? 6.0 * T * D * m.moe.shared_expert_intermediate_size / tp / (peak * kn.gemm.dense_efficiency * L.fp8x) : 0.0;
  L.dense_mlp_us = m.intermediate_size > 0 ? 6.0 * T * D * m.intermediate_size / tp / (peak * kn.gemm.dense_efficiency * L.fp8x) : 0.0;
  L.full_recompute = t.recompute == Recompute::kFull;
  L.bwd_compute = L.full_recompute ? 3.0 : 2.0, L.bwd_comm = L.full_recompute ? 2.0 : 1.0;
  // The p2p ring runs the core in cp steps (RingCoreEfficiency); the all-to-all does not.
  const double ring_steps = d.cp > 1 && t.run.cp_comm == "p2p" ? static_cast<double>(d.cp) : 1.0;
  L.ks = KernelShape{T, static_cast<double>((w.tokens + d.tp - 1) / d.tp), static_cast<double>(w.dispatch_tokens), tp, ab, ring_steps,
                     RotaryRunsUnfused(m, d.convention == Convention::kMegatron)};
  if (L.kernels) {
    auto compute = [&] {
      return KernelTermsMemo::Terms{KernelExtras(m, L.ks, kn.memory_bound, t.run, c.hbm_gbps, L.full_recompute),
                                    ShapedCompute(m, T, static_cast<double>(w.dispatch_tokens), tp, static_cast<double>(t.seq_len),
                                                  ring_steps, c.dense_bf16_tflops, kn, L.precision, c.hbm_gbps),
                                    SelectiveKernelsOf(m, L.ks, kn.memory_bound, c.hbm_gbps)};
    };
    const KernelTermsMemo::Terms terms =
        in.kernel_memo ? in.kernel_memo->Get(m, c, L.ks, L.full_recompute, static_cast<double>(t.seq_len), L.precision, t.run, compute)
                       : compute();
    L.kx = terms.kx;
    L.sc = terms.sc;
    L.selective = terms.selective;
    // The routed experts' weight gradients accumulated into their main gradients: the rank's
    // local experts (num_experts / ep) x gate, up and down (D x F / etp each).
    if (m.moe.num_experts > 0 && d.ep > 0) {
      const TrainingBytes tb = TrainingBytesOf(t);
      const double local_elems = static_cast<double>(m.moe.num_experts / d.ep) * 3.0 * D * static_cast<double>(w.expert_f_local);
      L.grouped_wgrad_accumulate_us = GroupedWgradAccumulateUs(
          local_elems,
          MainGradBytesPerElement(d.convention == Convention::kMegatron, t.run.gradient_accumulation_fusion, static_cast<double>(tb.grad),
                                  static_cast<double>(tb.param)),
          c.hbm_gbps, kn.memory_bound);
    }
    L.expert_eager = ExpertEagerShapeOf(m, t, d.convention == Convention::kMegatron, static_cast<double>(w.expert_f_local), ab);
    if (m.moe.num_experts > 0) {
      L.moe_sync_idle_us[0] = MoeSyncIdleUs(t, d.convention == Convention::kMegatron, d.ep, c.knobs.host);
      L.moe_sync_idle_us[1] = L.full_recompute || RecomputeSetOf(t).moe ? L.moe_sync_idle_us[0] : 0.0;
    }
  }
  return L;
}

FsdpSchedule FsdpScheduleOf(const ParallelDims& d, const TrainingConfig& t, const StepInputs& in, const ClusterSpec& c) {
  FsdpSchedule f;
  f.us = FsdpPerLayerUs(t, in, c);
  f.num_mb = t.num_microbatches.value_or(d.pp);
  f.calls = FsdpCallsPerStep(t.run.reshard_after_forward, d.pp, f.num_mb);
  f.spans = in.dense_dp_group.spans_nodes || in.sparse_dp_group.spans_nodes;
  return f;
}

// Selective recomputation by module (recompute.h): the forward time (us) of each piece the backward
// may re-run; the norm and SwiGLU kernels cost time only under --compute-model kernels. All zero
// unless recompute is selective; the dense MLP's is the caller's (after the MoE layer).
RecomputeForwardUs RecomputeForwardOf(const LayerTerms& L, const MoePhaseTimes& mp) {
  RecomputeForwardUs rf;
  const ModelSpec& m = L.m;
  const TrainingConfig& t = L.t;
  const ClusterSpec& c = L.c;
  const ComputeKnobs& kn = L.kn;
  const Workload& w = L.in.workload;
  const auto& a = m.attention;
  const double T = L.T, ab = L.ab, tp = L.tp, peak = L.peak, fp8x = L.fp8x, heads_local = L.heads_local, d_qk = L.d_qk;
  if (t.recompute != Recompute::kSelective) return rf;
  auto mem = [&](const std::vector<KernelBytes>& k) { return MemoryBoundUs(k, c.hbm_gbps, kn.memory_bound.hbm_efficiency, kn.memory_bound.floor_us); };
  if (L.kernels) {
    rf.norms = L.selective.norms;
    // The routed SwiGLU re-runs on the rows the routing sample sends the slowest rank (the
    // forward's, SimulateMoePhases), not on the memory-sizing bound (training.imbalance).
    const double sampled_rows = static_cast<double>(w.mean_received_rows) * mp.imbalance;
    rf.routed_act = MemoryBoundUs(SwigluKernel(sampled_rows, static_cast<double>(w.expert_f_local), ab, false), c.hbm_gbps,
                                  kn.memory_bound.hbm_efficiency, kn.memory_bound.floor_us) +
                    ExpertEagerUs(L, mp, false, true);  // moe_act's checkpoint holds the clamp too (experts.py bias_act_func)
    rf.shared_act = L.selective.shared_act;
    rf.dense_act = L.selective.dense_act;
  }
  rf.attention_core = L.kernels ? FlashCoreUs(m, T, static_cast<double>(t.seq_len), heads_local, L.ks.ring_steps, false, c.dense_bf16_tflops,
                                              kn, L.precision)
                                : L.fixed_core_us;
  if (a.kind == AttentionKind::kMla) {
    const double q_b_n = heads_local * d_qk, kv_b_n = heads_local * (a.qk_nope_head_dim + a.v_head_dim);
    const double q_b_k = a.q_lora_rank > 0 ? static_cast<double>(a.q_lora_rank) : 0.0;
    const double kv_b_k = static_cast<double>(a.kv_lora_rank);
    rf.mla_up_proj = L.kernels ? LinearUs(T, q_b_n, q_b_k, false, c.dense_bf16_tflops, kn, L.precision) +
                                            LinearUs(T, kv_b_n, kv_b_k, false, c.dense_bf16_tflops, kn, L.precision)
                                      : 2.0 * T * (q_b_n * q_b_k + kv_b_n * kv_b_k) / (peak * kn.gemm.dense_efficiency * fp8x);
  }
  rf.router = L.Compute(L.router_us, L.sc.router, 0, 1.0) + L.kx.router[0];
  rf.permute = rf.unpermute = mp.permute_max;
  rf.dispatch = mp.dispatch_max + L.etp_collective;  // with megatron's expert-TP gather (etp > 1)
  rf.combine = mp.combine_max + L.etp_collective;
  rf.grouped_gemm = mp.gemm_max + L.kx.grouped_gemm[0] + ExpertEagerUs(L, mp, false);
  rf.shared_experts = L.Compute(L.shared_us, L.sc.shared_experts, 0, 1.0) + L.kx.shared_experts[0];
  if (OpSac(t))
    OpSacForwardUs(m, T, tp, L.kernels ? mem(AttentionBlockKernels(m, L.ks, false)) : 0.0, L.tp_collective, c, peak, L.kernels ? ComputeModel::kKernels : ComputeModel::kGemm, L.precision, rf);
  return rf;
}

double ExpertEagerUs(const LayerTerms& L, const MoePhaseTimes& mp, bool backward, bool clamp_only) {
  if (!L.kernels || (!L.expert_eager.clamp && !L.expert_eager.fc2_bias)) return 0.0;  // most models: none
  ExpertEagerShape s = L.expert_eager;
  s.rows = static_cast<double>(L.in.workload.mean_received_rows) * mp.imbalance;
  if (clamp_only) s.fc2_bias = false;
  const MemoryBoundKnobs& o = L.kn.memory_bound;
  return MemoryBoundUs(ExpertEagerKernels(s, backward), L.c.hbm_gbps, o.hbm_efficiency, o.floor_us);
}

// What the backward re-runs of each phase (us): per-op checkpointing's set or the module set `rs`.
RecomputeExtraUs RecomputeExtraOf(const TrainingConfig& t, const RecomputeSet& rs, const RecomputeForwardUs& rf) {
  return OpSac(t) ? OpSacRecomputeUs(rf) : SelectiveRecomputeUs(rs, rf);
}

}  // namespace cost_detail
}  // namespace dockyard
