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
  bool allgather = false;         // ep > 1 and the allgather dispatcher
  // Allows the all-to-all times of the plain dispatcher from integer block sums where they are
  // provably the same doubles (every partial sum an integer below 2^53; moe_phases.cc BlockAllToAll):
  // O(ep x node block) instead of O(ep^2). The layout search sets it; SimulateStep does not, and
  // search_test compares the two for every candidate.
  bool integer_sums = false;
  GemmPrecision gemm_precision;  // the grouped GEMMs' precision (FP8 GEMMs, gemm_efficiency.h)
};

// The shape of `model`'s MoE layers under workload `w` and training `t` at EP degree `ep`: its
// dispatcher (deredundency, deepep, allgather; the plain all-to-all otherwise or with ep 1), FP8
// dispatch bytes (precision.h DispatchBytesPerElement) and GEMM precision; integer_sums off, the
// logical experts (a caller with replicas sets num_experts to the physical slots).
MoePhaseShape MoePhaseShapeOf(const ModelSpec& model, const Workload& w, const TrainingConfig& t, int64_t ep);

}  // namespace dockyard
