// The shape of a model's routing-dependent MoE phases (permute / unpermute, dispatch, grouped GEMM,
// combine) under one workload and EP degree: what they depend on besides the routing sample and
// the EP group (moe_phases.h prices them).
#pragma once

#include <cstdint>

#include "planner/accounting/workload.h"
#include "planner/cost/gemm_efficiency.h"
#include "planner/model/model_spec.h"
#include "planner/model/training.h"

namespace dockyard {

// What the routing-dependent MoE phases (permute / unpermute, dispatch, grouped GEMM, combine)
// depend on besides the routing sample and the EP group.
struct MoePhaseShape {
  int64_t ep = 1;
  int64_t num_experts = 0;
  double routed_tokens = 0;    // T_r (Workload::routed_tokens)
  double dispatch_tokens = 0;  // tokens a rank routes and sends (Workload::dispatch_tokens; megatron: T_r / etp)
  double top_k = 0;
  double hidden = 0;              // D
  double act_bytes = 0;           // bytes per activation element
  double dispatch_act_bytes = 0;  // bytes per element the dispatch sends; 0 = act_bytes (FP8 dispatch: precision.h)
  double f_local = 0;             // F / expert TP degree (Workload::expert_f_local)
  bool deredundency = false;      // ep > 1 and the deredundency dispatcher (oep from the routing sample)
  bool flex = false;              // ep > 1 and the deepep dispatcher (LayerRouting::flex counts, deepep.h)
  bool flex_fp8 = false;          // its dispatch in FP8
  double flex_nvlink_scale = 1;   // its NVLink bandwidth's share on the run's SMs (FlexSmBandwidthScale below)
  bool allgather = false;         // ep > 1 and the allgather dispatcher
  // Allows the all-to-all times of the plain dispatcher from integer block sums where they are
  // provably the same doubles (every partial sum an integer below 2^53; moe_phases.cc BlockAllToAll):
  // O(ep x node block) instead of O(ep^2). The layout search sets it; SimulateStep does not, and
  // search_test compares the two for every candidate.
  bool integer_sums = false;
  GemmPrecision gemm_precision;  // the grouped GEMMs' precision (FP8 GEMMs, gemm_efficiency.h)
};

// The fewest SMs at which each flex backend's NVLink bandwidth was measured at its full rate (the
// knob dispatchers.deepep.nvlink_efficiency): HybridEP 16 (B200, 8 ranks: 535.9 / 530.9 GB/s
// dispatch / combine at 16 SMs against GB200's 545.7 / 568.9 at 32; deepseek-ai/DeepEP
// docs/README_Hybrid-EP.md, docs/cluster.md [B6]); DeepEP 20 (Buffer.num_sms's default, the
// configuration of the Hopper figure, DeepEP issue #493: assumed, the issue gives no SM count).
constexpr int64_t kHybridEpFullRateSms = 16;
constexpr int64_t kDeepEpFullRateSms = 20;

// The share of that bandwidth the flex dispatcher's NVLink copies keep on `num_sms` SMs
// (RunSettings::moe_flex_dispatcher_num_sms; 0 = the backend's default): min(1, num_sms / the
// backend's full-rate SMs) -- the kernels' SMs issue the copies, so below the SMs measured at full
// rate the bandwidth is taken to fall in proportion. 1 for ncclep (NCCL's kernels, priced as the
// NCCL all-to-all) and for num_sms 0. The network (RDMA) term is the NIC's and keeps its rate.
double FlexSmBandwidthScale(FlexBackend backend, int64_t num_sms);

// The shape of `model`'s MoE layers under workload `w` and training `t` at EP degree `ep`: its
// dispatcher (deredundency, deepep, allgather; the plain all-to-all otherwise or with ep 1), FP8
// dispatch bytes (precision.h DispatchBytesPerElement) and GEMM precision; integer_sums off, the
// logical experts (a caller with replicas sets num_experts to the physical slots).
MoePhaseShape MoePhaseShapeOf(const ModelSpec& model, const Workload& w, const TrainingConfig& t, int64_t ep);

}  // namespace dockyard
