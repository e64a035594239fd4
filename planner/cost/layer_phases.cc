// One layer of one micro-batch, phase by phase: attention, context-parallel exchange, tensor
// parallel traffic, the MoE layer's routed phases and shared experts (with Megatron's EP overlap),
// the dense MLP, FSDP's collectives under them (see step_internal.h, docs/cost-model.md).
#include "planner/cost/step_internal.h"

#include <algorithm>
#include <array>
#include <cmath>
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
#include "planner/cost/ep_overlap.h"
#include "planner/cost/gemm_efficiency.h"
#include "planner/cost/kernels_model.h"
#include "planner/cost/model_flops.h"
#include "planner/cost/network.h"
#include "planner/cost/op_sac_time.h"
#include "planner/cost/units.h"
#include "planner/model/flex_backend_limits.h"
#include "planner/model/pipeline_schedule.h"
#include "planner/model/precision.h"
#include "planner/model/recompute.h"

namespace dockyard {
namespace cost_detail {
namespace {

// A recomputation time (us) in `pass`: recomputation runs in the backward only.
double BackwardOnly(double extra, int pass) {
  return pass == 1 ? extra : 0.0;
}

// The attention phase of one layer, forward [0] and backward [1] (us): projections and core, the
// kernel model's extras and what recomputation re-runs (context parallelism's exchange is the
// cp_comm phase, AddCpComm).
std::array<double, 2> AttentionPhaseUs(const LayerTerms& L, const RecomputeExtraUs& rx) {
  std::array<double, 2> us;
  for (int pass = 0; pass < 2; ++pass) {
    us[pass] =
        L.Compute(L.attention_us, L.sc.attention, pass, L.ComputeMult(pass)) + L.kx.attention[pass] + BackwardOnly(rx.attention, pass);
  }
  return us;
}

// Records the cp_comm phase of a layer in `pass` when context parallelism is on (cp > 1; no row
// otherwise) and returns its time (us; 0 with cp 1): the K/V exchange, CpExchangePerLayerUs, the
// backward's after the forward's again under full recomputation. It runs beside the attention
// core and is added right after the attention phase, so the layer's sum is the same sum of the
// same terms in the same order as when it was part of that phase.
double AddCpComm(const LayerTerms& L, bool moe, int pass, PhaseRecords& records) {
  if (L.d.cp <= 1) return 0.0;
  return records.Add(kCpComm, moe, pass, pass == 0 ? L.cp.forward : L.cp.backward + (L.full_recompute ? L.cp.forward : 0.0));
}

// The tensor-parallel communication of one layer, forward [0] and backward [1] (us): its
// sequence-parallel blocks (accounting/comm.h SequenceParallelBlocks: the attention block, then
// the dense MLP's, or a MoE layer's by convention) as the framework exposes them (tp_overlap.h),
// the backward after the forward's again under full recomputation, and what selective
// recomputation re-runs.
std::array<double, 2> TpCommPhaseUs(const LayerTerms& L, const RecomputeExtraUs& rx, bool moe) {
  std::array<double, 2> us{0.0, BackwardOnly(rx.tp_comm, 1)};
  const int64_t blocks = SequenceParallelBlocks(L.m, L.d, moe);
  if (blocks == 0) return us;
  const bool ub = TpCommOverlapped(L.t.run, L.d.tp);
  double fwd = 0, bwd = 0;
  for (int64_t b = 0; b < blocks; ++b) {
    const TpBlockGemmsUs& g = b == 0 ? L.tp_attention : moe ? L.tp_shared_experts : L.tp_dense_mlp;
    const TpBlockExposureUs e = TpBlockExposedUs(L.tp_collective, g, L.d.tp, L.d.convention, ub, L.kn.tp_overlap.sm_share);
    fwd += e.forward;
    bwd += e.backward;
  }
  us[0] = fwd;
  us[1] += bwd + (L.full_recompute ? fwd : 0.0);
  return us;
}

// Per direction of the MoE layer (us): its phases' sum, its EP all-to-alls, the rest of it, and
// the records of its dispatch and combine phases (for --overlap-moe-expert-parallel-comm).
struct MoePassSums {
  double sum[2] = {0, 0}, a2a[2] = {0, 0}, rest[2] = {0, 0};
  int a2a_record[2][2] = {{-1, -1}, {-1, -1}};
  int router_record[2] = {-1, -1};  // the router's record, which carries the host synchronization's idle
  EpOverlapLayer parts;  // the same time split as the combined 1F1B schedule runs it (ep_overlap.h)
};

// Records the MoE layer's phases, forward then backward (us per layer and micro-batch; the
// routing-dependent ones per EP rank from `mp`, the backward dispatch from `dispatch_bwd_ranks`,
// which must outlive `records`), and returns each direction's sums.
MoePassSums AddMoeLayerPhases(const LayerTerms& L, const MoePhaseTimes& mp, const RecomputeExtraUs& rx,
                              const std::vector<double>& dispatch_bwd_ranks, const FsdpSchedule& fsdp, PhaseRecords& records) {
  MoePassSums s;
  const std::array<double, 2> attention = AttentionPhaseUs(L, rx), tp_comm = TpCommPhaseUs(L, rx, true);
  // The dispatch per pass: the forward's (FP8 rows with --fp8-dispatch); the backward's in BF16
  // (dispatch_bwd), after the forward's again under full recomputation.
  // Megatron's expert-TP all-gather after the dispatch and reduce-scatter before the combine (etp >
  // 1; the backward mirrors them) ride with the all-to-alls: the per-rank figures are the
  // all-to-alls' alone.
  const double etp = L.etp_collective;
  const double dispatch_us[2] = {mp.dispatch_max + etp, mp.dispatch_bwd_max + etp + (L.full_recompute ? mp.dispatch_max + etp : 0.0)};
  const double combine_us = mp.combine_max + etp;
  // The routed experts' eager ops (kernels_model.h ExpertEagerKernels): the backward's own, after
  // the forward's again under full recomputation.
  const double eager_fwd = ExpertEagerUs(L, mp, false);
  const double eager[2] = {eager_fwd, ExpertEagerUs(L, mp, true) + (L.full_recompute ? eager_fwd : 0.0)};
  for (int pass = 0; pass < 2; ++pass) {
    const double mult = L.ComputeMult(pass);
    const double cmult = L.CommMult(pass);
    double pre = 0;
    pre += records.Add(kAttention, true, pass, attention[pass]);
    pre += AddCpComm(L, true, pass, records);
    pre += records.Add(kTpComm, true, pass, tp_comm[pass]);
    // The router's phase carries the dispatcher's host synchronization (MoeSyncIdleUs): idle GPU
    // time, which the EP overlap's pairing does not see as compute (it is outside s.parts).
    const double idle = L.moe_sync_idle_us[pass];
    s.router_record[pass] = records.size;
    pre += records.Add(kRouter, true, pass,
                       L.Compute(L.router_us, L.sc.router, pass, mult) + L.kx.router[pass] + BackwardOnly(rx.router, pass) + idle) -
           idle;
    pre += records.Add(kPermute, true, pass, mp.permute_max * cmult + BackwardOnly(rx.permute, pass), &mp.permute, cmult);
    s.a2a_record[pass][0] = records.size;
    const double disp = records.Add(kDispatch, true, pass, dispatch_us[pass] + BackwardOnly(rx.dispatch, pass),
                                    pass == 0 ? &mp.dispatch : &dispatch_bwd_ranks);
    double mlp = 0;
    mlp += records.Add(kGroupedGemm, true, pass,
                       mp.gemm_max * mult + L.kx.grouped_gemm[pass] + eager[pass] + BackwardOnly(rx.grouped_gemm, pass) +
                           BackwardOnly(L.grouped_wgrad_accumulate_us, pass),
                       &mp.gemm, mult);
    mlp += records.Add(kUnpermute, true, pass, mp.permute_max * cmult + BackwardOnly(rx.unpermute, pass), &mp.permute, cmult);
    s.a2a_record[pass][1] = records.size;
    const double comb = records.Add(kCombine, true, pass, combine_us * cmult + BackwardOnly(rx.combine, pass), &mp.combine, cmult);
    const double shared = records.Add(
        kSharedExperts, true, pass,
        L.Compute(L.shared_us, L.sc.shared_experts, pass, mult) + L.kx.shared_experts[pass] + BackwardOnly(rx.shared_experts, pass));
    double sum = pre + disp + mlp;
    sum += SharedExpertsOverlapped(L.t.run) && !EpCommOverlapped(L.t.run) ? std::max(comb, shared) : comb + shared;
    s.parts.pre[pass] = pre;
    s.parts.mlp[pass] = mlp + shared;
    s.parts.dispatch[pass] = disp;
    s.parts.combine[pass] = comb;
    records.Add(kFsdpComm, true, pass, fsdp.MeanUs(0, pass));
    s.sum[pass] = sum + idle;
    s.a2a[pass] = dispatch_us[pass] + combine_us * cmult + BackwardOnly(rx.dispatch, pass) + BackwardOnly(rx.combine, pass);
    s.rest[pass] = s.sum[pass] - s.a2a[pass];
  }
  return s;
}

// How the EP all-to-all kernels of the run's dispatcher backend and the compute beside them slow
// each other (knobs.h EpOverlapKnobs): deepep by its flex backend, NCCL otherwise.
EpOverlapContention EpOverlapContentionOf(const LayerTerms& L) {
  const EpOverlapKnobs& k = L.c.knobs.dispatchers.ep_overlap;
  const EpOverlapContention nccl{k.all_to_all_sm_share, k.all_to_all_comm_rate};
  if (L.t.dispatcher != Dispatcher::kDeepEp) return nccl;
  EpOverlapContention flex = nccl;
  switch (FlexBackendOf(L.t)) {
    case FlexBackend::kDeepEp:
      flex = {k.deepep_sm_share, k.deepep_comm_rate};
      break;
    case FlexBackend::kHybridEp:
      flex = {k.hybridep_sm_share, k.hybridep_comm_rate};
      break;
    case FlexBackend::kNcclEp:
      break;
  }
  // Megatron's --moe-flex-dispatcher-num-sms: the kernels hold the SMs the run gives them, every backend.
  if (L.t.run.moe_flex_dispatcher_num_sms > 0) {
    flex.sm_share = FlexDispatcherSmShare(L.t.run.moe_flex_dispatcher_num_sms, L.c.sm_count, L.c.name);
  }
  return flex;
}

// Megatron's --overlap-moe-expert-parallel-comm (and DualPipe): of the stage's chunk forwards, the
// paired share (PairedChunkShare) runs beside another micro-batch's backward on two streams
// (PairedLayerUs, ep_overlap.h), the warm-up and cool-down ones alone. What the all-to-alls add to
// the layer beyond its compute -- the exposed remainder, the compute slowed by the communication
// kernels' SMs and the communication slowed beside the compute -- is split over the directions by
// their all-to-all time; the dispatch and combine records are scaled to it and each direction's
// sum becomes the rest plus that (us).
void OverlapEpComm(const LayerTerms& L, MoePassSums& s, PhaseRecords& records) {
  const int64_t pp = L.d.pp, vpp = ChunksPerMicrobatch(L.t);
  // A chunk's MoE layers, the mean rounded (at least one).
  const int64_t chunk_layers = std::max<int64_t>(1, std::llround(static_cast<double>(L.in.num_moe_layers) / static_cast<double>(pp * vpp)));
  const bool delayed = WgradDelayed(L.t.run), one_queue = L.t.run.cuda_device_max_connections == 1;
  const EpOverlapContention contention = EpOverlapContentionOf(L);
  const double paired = PairedLayerUs(s.parts, chunk_layers, contention, delayed, one_queue);
  const double share = PairedChunkShare(L.t.num_microbatches.value_or(pp), pp, vpp);
  // The host synchronization's idle (LayerTerms::moe_sync_idle_us) is outside the pairing: the
  // paired micro-batches hide it (the other one's queued work runs while the host waits), the
  // unpaired ones do not.
  const double idle = L.moe_sync_idle_us[0] + L.moe_sync_idle_us[1];
  const double plain = s.sum[0] + s.sum[1] - idle, rest = s.rest[0] + s.rest[1] - idle, a2a = s.a2a[0] + s.a2a[1];
  const double added = std::max(0.0, share * paired + (1 - share) * plain - rest);
  const double exposed[2] = {a2a > 0 ? added * s.a2a[0] / a2a : 0.0, a2a > 0 ? added * s.a2a[1] / a2a : 0.0};
  records.ep_overlap = {true, share, a2a, added, idle, (1 - share) * idle};
  if (delayed) {
    // The same pairing with the weight gradient inside the MLP backward: what delaying it saves.
    records.ep_overlap.delay_wgrad = true;
    const double saved = share * (PairedLayerUs(s.parts, chunk_layers, contention, /*delay_wgrad=*/false, one_queue) - paired);
    records.ep_overlap.delay_wgrad_saved_us = saved > 1e-6 ? saved : 0.0;  // rounding of equal sums is no saving
  }
  for (int pass = 0; pass < 2; ++pass) {
    const double f = s.a2a[pass] > 0 ? exposed[pass] / s.a2a[pass] : 0.0;
    for (int which = 0; which < 2; ++which) {
      Record& r = records.at[s.a2a_record[pass][which]];
      r.us *= f;
      r.scale *= f;
    }
    const double hidden_idle = share * L.moe_sync_idle_us[pass];
    records.at[s.router_record[pass]].us -= hidden_idle;
    s.rest[pass] -= hidden_idle;
    s.sum[pass] = s.rest[pass] + exposed[pass];
  }
}

}  // namespace

// The backward dispatch per EP rank (us): BF16 rows (dispatch_bwd), after the forward's again under
// full recomputation.
std::vector<double> BackwardDispatchRanks(const MoePhaseTimes& mp, bool full_recompute) {
  std::vector<double> dispatch_bwd_ranks = mp.dispatch_bwd;
  for (size_t r = 0; r < dispatch_bwd_ranks.size() && full_recompute; ++r) dispatch_bwd_ranks[r] += mp.dispatch[r];
  return dispatch_bwd_ranks;
}

// The MoE layer of one micro-batch, forward and backward (us), its phases recorded (AddMoeLayerPhases),
// the EP all-to-alls overlapped where the run says so, and FSDP's collectives overlapped with it.
LayerUs MoeLayerUs(const LayerTerms& L, const MoePhaseTimes& mp, const RecomputeExtraUs& rx, const std::vector<double>& dispatch_bwd_ranks,
                   const FsdpSchedule& fsdp, PhaseRecords& records) {
  MoePassSums s = AddMoeLayerPhases(L, mp, rx, dispatch_bwd_ranks, fsdp, records);
  if (EpCommOverlapped(L.t.run) && L.d.ep > 1) OverlapEpComm(L, s, records);
  LayerUs u;
  for (int pass = 0; pass < 2; ++pass) {
    // FSDP's rings and the EP all-to-alls share the NICs when both cross NVLink domains (network.h).
    (pass == 0 ? u.fwd : u.bwd) = fsdp.LayerUs(0, pass, s.sum[pass], s.a2a[pass], mp.spans_domains);
  }
  return u;
}

// The dense layer of one micro-batch, forward and backward (us; zero when the model has none): its
// attention, tp communication and dense MLP recorded, FSDP's collectives overlapped with them.
LayerUs DenseLayerUs(const LayerTerms& L, const RecomputeExtraUs& rx, const FsdpSchedule& fsdp, PhaseRecords& records) {
  LayerUs u;
  if (!(L.in.num_moe_layers < L.m.num_hidden_layers)) return u;
  const std::array<double, 2> attention = AttentionPhaseUs(L, rx), tp_comm = TpCommPhaseUs(L, rx, false);
  for (int pass = 0; pass < 2; ++pass) {
    const double mult = L.ComputeMult(pass);
    double sum =
        records.Add(kAttention, false, pass, attention[pass]) + AddCpComm(L, false, pass, records) +
        records.Add(kTpComm, false, pass, tp_comm[pass]) +
        records.Add(kDenseMlp, false, pass,
                    L.Compute(L.dense_mlp_us, L.sc.dense_mlp, pass, mult) + L.kx.dense_mlp[pass] + BackwardOnly(rx.dense_mlp, pass));
    records.Add(kFsdpComm, false, pass, fsdp.MeanUs(1, pass));
    (pass == 0 ? u.fwd : u.bwd) = fsdp.LayerUs(1, pass, sum, 0.0, false);
  }
  return u;
}

}  // namespace cost_detail
}  // namespace dockyard
