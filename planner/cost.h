// Cost model: predicted time of every phase of a training step (docs/cost-model.md derives
// each formula). Predicted (here) and measured (dockyard-run) figures share one schema: a list
// of phases, each with a name, the layer kind, the direction and a time in microseconds, and per
// EP rank where the phase depends on routing.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "planner/cluster.h"
#include "planner/json_util.h"
#include "planner/plan.h"
#include "planner/routing.h"

namespace dockyard {

struct CostOptions {
  bool overlap_shared_experts = true;  // shared-expert forward overlaps the combine all-to-all
  // Grouped-GEMM efficiency curve eff(M) = max_eff * M / (M + half_rows), M = rows of one expert.
  double gemm_max_efficiency = 0.80;
  double gemm_half_rows = 128.0;
  double dense_efficiency = 0.70;      // large dense GEMMs (attention projections, dense MLP)
  double attention_efficiency = 0.50;  // flash-attention core
  double memory_floor_us = 5.0;        // fixed cost of a memory-bound kernel (permute, top-k)
};

struct PhaseCost {
  std::string name;        // "attention", "router", "permute", "dispatch", "grouped_gemm", "unpermute",
                           // "combine", "shared_experts", "dense_mlp", "tp_comm", "fsdp_comm"
  std::string layer_kind;  // "moe" or "dense"
  std::string direction;   // "forward" or "backward"
  double time_us = 0;      // per layer and micro-batch: the mean over sampled layers of each layer's slowest rank
  int64_t slowest_ep_rank = -1;
  std::vector<double> per_ep_rank_us;  // routing-dependent phases: each EP rank's mean over the sampled layers
};

struct CostBreakdown {
  std::vector<PhaseCost> phases;        // per layer kind and direction
  double moe_layer_us = 0;              // one MoE layer, forward + backward, one micro-batch
  double dense_layer_us = 0;
  double stage_microbatch_us = 0;       // the slowest stage, one micro-batch, forward + backward
  double pipeline_bubble_us = 0;
  double dp_step_comm_us = 0;           // exposed data-parallel communication at the step's end
  double optimizer_us = 0;
  double step_time_us = 0;
  double tokens_per_s_per_gpu = 0;
  double mfu = 0;
  // Contributors to the step, largest share first: layer phases (time x layers of the slowest
  // stage x (M + pp - 1)), "lm_head", "dp_step_comm", "optimizer".
  std::vector<std::string> critical_path;
  std::string dominant_phase;              // critical_path.front()
  double routing_imbalance = 1.0;          // max / mean received rows over the sampled layers
};

// Grouped-GEMM efficiency for an expert with `rows` rows.
double GroupedGemmEfficiency(double rows, const CostOptions& options);

// Time of one all-to-all over an EP group given a [n x n] matrix of bytes (row = sender), the
// ranks of the group (to tell intra- from inter-node pairs) and the cluster. Returns per-rank
// times; the phase takes the maximum.
std::vector<double> AllToAllTimesUs(const std::vector<double>& bytes, const std::vector<int64_t>& group,
                                    const ClusterSpec& cluster);

// Ring collective time (all-gather or reduce-scatter) of `bytes` (the full buffer) over `group`.
double RingCollectiveUs(double bytes, const std::vector<int64_t>& group, const ClusterSpec& cluster);

// Predicts one training step of `plan` on `cluster` with `routing` sampled for its EP degree
// (tokens_per_rank = the workload's routed tokens). Throws dockyard::Error on mismatched routing.
CostBreakdown SimulateStep(const Plan& plan, const ClusterSpec& cluster, const RoutingResult& routing,
                           const CostOptions& options = {});

Json CostToJson(const CostBreakdown& cost);
std::string CostToText(const CostBreakdown& cost);

}  // namespace dockyard
