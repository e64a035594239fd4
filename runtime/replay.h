// Single-GPU replay: one rank's local share of a large plan on one device, to time the compute
// phases of an MoE layer where only one GPU exists. Communication is not run: dispatch and combine come from the cost model
// (planner/cost/cost.h) for the same routing sample, so the report is a full forward of the layer
// for that rank with each phase marked "measured" or "cost model".
//
// What runs for global rank R of the plan (its EP index e, local experts [e*L, (e+1)*L), its
// slice of the expert intermediate dim under ETP, its shared-expert slice):
//   router         x [T, D] . W_router^T (through ComputeOps::GroupedGemm with one group, i.e.
//                  cuBLAS on a GPU), scores (softmax | sigmoid), the model's expert choice
//                  (runtime/router.h SelectExperts: score bias, group limit, top-k)
//   permute        its own T * top_k routed rows gathered expert-sorted (GatherRows), and the
//                  received rows rank-major -> expert-major (CopyRowBlocks)
//   grouped_gemm   SwiGLU of the L local experts over exactly the rows the routing sends this
//                  rank (weight generation timed apart as weight_gen)
//   unpermute      expert-major -> rank-major (CopyRowBlocks) and the weighted sum of its own
//                  tokens' T * top_k returned rows (WeightedCombine)
//   shared_experts the shared experts over its T tokens (its TP slice of the intermediate dim)
//   dispatch, combine   the cost model's time for EP rank e (per_ep_rank_us), not measured
// Rows: the planner's routing model sampled for the plan's workload (T = routed tokens per rank,
// planner/accounting/workload.h); the rows from source EP rank s to local expert j are counted from
// SampleTokenExperts(s), the same stream SampleRouting's matrices count, so the replay
// receives exactly the rows the simulated rank receives.
// Validation: for every local expert with rows, its first and last `check_rows` rows are
// recomputed on the CPU (runtime/expert_ffn.h with CpuOps) and compared (|out - ref| <=
// atol + rtol |ref|).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "planner/cost/cluster.h"
#include "planner/base/json_util.h"
#include "planner/layout/plan.h"
#include "planner/routing/routing.h"
#include "runtime/backend.h"

namespace dockyard::runtime {

struct ReplayOptions {
  int64_t rank = 0;     // global rank of the plan whose share runs
  int64_t layer = -1;   // decoder layer (-1: the first MoE layer); its pipeline stage must hold `rank`
  RoutingSpec routing;  // default uniform; seed = routing.seed
  int64_t tokens = 0;   // T; 0 = the plan's routed tokens per rank (ComputeWorkload)
  uint64_t seed = 0;    // tokens and weights (runtime/data.h)
  int64_t iters = 3;
  int64_t warmup = 1;
  int64_t weight_block_bytes = int64_t{1} << 30;  // one block of generated expert weights
  int64_t check_rows = 2;                         // rows checked at each end of every local expert's block
  double atol = 1e-4, rtol = 1e-3;
  ClusterSpec cluster;             // for the cost model's dispatch and combine
  std::string precision = "fp32";  // recorded in the report (the backend applies it)
  // Tests and tools: when set, receives the router's expert choice of the last iteration,
  // [tokens, top_k] row-major (router.h SelectExperts: bias and group limit included).
  std::vector<int64_t>* router_experts = nullptr;
};

struct ReplayPhase {
  std::string name;
  double time_us = 0;        // mean per timed iteration (measured) or predicted (cost model)
  std::string source;        // "measured" or "cost model"
  double predicted_us = -1;  // the cost model's time for the same phase and EP rank (-1: none)
};

struct ReplayReport {
  std::string backend, model_name;
  int64_t layer = 0, routing_layer = 0;  // decoder layer, and its index among the MoE layers
  std::string cluster, routing, precision;
  uint64_t seed = 0;
  double atol = 0, rtol = 0;
  int64_t rank = 0, ep = 1, ep_rank = 0, first_expert = 0, num_local_experts = 0;
  int64_t f_begin = 0, f_end = 0;
  int64_t tokens = 0, top_k = 0, received_rows = 0;
  std::vector<int64_t> rows_per_local_expert;
  double imbalance = 1.0;  // this rank's received rows / the mean T * top_k
  std::vector<ReplayPhase> phases;
  double layer_forward_us = 0;  // sum of the phases
  int64_t checked = 0, wrong = 0;
  double max_abs_error = 0;
  bool passed() const { return wrong == 0; }
};

// Runs the replay on `backend` (one rank, no communication). Throws dockyard::Error for a rank
// outside the stage of the layer, a model the runtime does not support (runtime/config.h), or
// bad options (iters < 1, warmup < 0, check_rows < 0, atol/rtol not finite >= 0), and when the
// host or device cannot hold the rank's buffers (the message gives their size).
//
// JSON (ReplayReportToJson): {"schema_version": 1, "kind": "replay", "replay": {backend, model,
// layer, routing_layer, rank, ep, ep_rank, first_expert, num_local_experts, f_begin, f_end,
// tokens, top_k, received_rows, rows_per_local_expert, imbalance, cluster, routing, seed,
// precision, phases: [{name, time_us, source, predicted_us}], layer_forward_us,
// validation: {checked, wrong, max_abs_error, atol, rtol}}} (docs/cuda.md).
ReplayReport ReplayRank(const Plan& plan, const ReplayOptions& options, Backend& backend);

Json ReplayReportToJson(const ReplayReport& report);
std::string ReplayReportToText(const ReplayReport& report);

}  // namespace dockyard::runtime
