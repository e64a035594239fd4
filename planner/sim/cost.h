// Cost model: predicted time of every phase of a training step (docs/cost-model.md derives
// each formula). Predicted (here) and measured (dockyard-run) figures share one schema: a list
// of phases, each with a name, the layer kind, the direction and a time in microseconds, and per
// EP rank where the phase depends on routing.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "planner/sim/cluster.h"
#include "planner/base/json_util.h"
#include "planner/layout/plan.h"
#include "planner/sim/routing.h"
#include "planner/accounting/workload.h"

namespace dockyard {

struct CostOptions {
  bool overlap_shared_experts = true;  // shared-expert forward overlaps the combine all-to-all
  // Grouped-GEMM efficiency curve eff(M) = max_eff * M / (M + half_rows), M = rows of one expert.
  double gemm_max_efficiency = 0.80;
  double gemm_half_rows = 128.0;
  double dense_efficiency = 0.70;      // large dense GEMMs (attention projections, dense MLP)
  double attention_efficiency = 0.50;  // flash-attention core
  double memory_floor_us = 5.0;        // fixed cost of a memory-bound kernel (permute, top-k)
  // deepep dispatcher (planner/sim/deepep.h): the fraction of intra_node_gbps / network_gbps its
  // SM-limited kernels reach. DeepEP issue #493 (2 x 8 H200, CX7 400G, normal kernels, BF16
  // dispatch): 133.78 GB/s NVLink = 0.362 x 370; 40.89 GB/s RDMA = 0.852 x 48.
  double flex_nvlink_efficiency = 0.362;
  double flex_network_efficiency = 0.852;
  // The kernel-level compute model (planner/sim/kernels_model.h, gemm_efficiency.h, docs/cost-model.md
  // §3.11-3.12): the default (compute_model.h kDefaultComputeModel); false is `--compute-model gemm`,
  // the older model of GEMMs at fixed efficiencies.
  bool kernel_compute = true;        // --compute-model kernels (default) | gemm
  bool cuda_graphs = false;          // --cuda-graphs (Megatron --enable-cuda-graph / --cuda-graph-impl)
  bool fused_cross_entropy = false;  // --cross-entropy fused (Megatron --cross-entropy-loss-fusion)
  double hbm_efficiency = 0.70;      // fraction of hbm_gbps a memory-bound kernel moves
  double kernel_launch_us = 2.0;     // exposed host gap per kernel launch (eager)
  double graph_launch_us = 0.5;      // the same inside a CUDA graph
  // GEMM and flash-attention efficiency by shape (planner/sim/gemm_efficiency.h), --compute-model kernels.
  double gemm_shape_efficiency = 0.72;  // ceiling of eff(M, N, K); M's half-fill is gemm_half_rows
  double gemm_half_nk = 34.0;           // N or K at which its factor is one half
  double gemm_tile_rows = 128.0;        // rows of a grouped-GEMM tile (each expert padded to whole tiles)
  double flash_max_efficiency = 0.69;   // flash-attention forward ceiling
  double flash_half_head_dim = 10.0;    // head dim at which its factor is one half
  double flash_half_seq = 240.0;        // attended keys at which their factor is one half
  double flash_bwd_ratio = 0.70;        // backward efficiency / forward efficiency
  // FP8 GEMMs (planner/model/precision.h): set by SimulateStep / the search from the training config.
  bool fp8_gemms = false, fp8_blockwise = false;
  double fp8_efficiency_ratio = 0.87;  // FP8 GEMM efficiency / BF16 efficiency of the same shape
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
  std::vector<PhaseCost> phases;  // per layer kind and direction
  double moe_layer_us = 0;        // one MoE layer, forward + backward, one micro-batch
  double dense_layer_us = 0;
  // torchtitan's per-layer selective checkpointing (recompute.h LayerSacEvery; 0 = off): the
  // frequency, and one checkpointed MoE / dense layer, forward + backward (the layer under
  // recompute full); moe_layer_us / dense_layer_us and the phases are then the other layers'.
  int64_t layer_sac_every = 0;
  double checkpointed_moe_layer_us = 0, checkpointed_dense_layer_us = 0;
  double stage_microbatch_us = 0;  // the slowest stage, one micro-batch, forward + backward
  double pipeline_bubble_us = 0;
  double dp_step_comm_us = 0;  // exposed data-parallel communication at the step's end
  double optimizer_us = 0;
  double step_time_us = 0;
  double tokens_per_s_per_gpu = 0;
  double mfu = 0;                    // model FLOPs (model_flops.h) / (step time x GPUs x dense BF16 peak)
  double model_flops_per_token = 0;  // Megatron's model FLOPs of one token, forward + backward
  // Contributors to the step, largest share first: layer phases (time x layers of the slowest
  // stage x (M + pp - 1)), "lm_head", "dp_step_comm", "optimizer".
  std::vector<std::string> critical_path;
  std::vector<double> critical_path_us;  // each contributor's share of the step (us), as critical_path; detail only
  std::string dominant_phase;            // critical_path.front()
  double routing_imbalance = 1.0;        // max / mean received rows over the sampled layers
};

// Grouped-GEMM efficiency for an expert with `rows` rows.
double GroupedGemmEfficiency(double rows, const CostOptions& options);

// Time of one all-to-all over an EP group given a [n x n] matrix of bytes (row = sender), the
// ranks of the group (to tell intra- from inter-node pairs) and the cluster. Returns per-rank
// times; the phase takes the maximum.
std::vector<double> AllToAllTimesUs(const std::vector<double>& bytes, const std::vector<int64_t>& group, const ClusterSpec& cluster);

// Ring collective time (all-gather or reduce-scatter) of `bytes` (the full buffer) over `group`.
double RingCollectiveUs(double bytes, const std::vector<int64_t>& group, const ClusterSpec& cluster);
// The same for a group of `group_size` ranks that spans NVLink domains or not, with
// `members_per_domain` members in each domain (network.h RingTimeUs: a ring over domains runs
// one NCCL ring per rail, so its bandwidth grows with the members per domain, capped by NVLink).
double RingCollectiveUs(double bytes, int64_t group_size, bool spans_nodes, const ClusterSpec& cluster, int64_t members_per_domain = 1);

// Time of one step-end data-parallel collective (not overlapped with compute) from its CommEntry
// figures: wire_bytes / bandwidth + (group_size - 1) latencies, both of the network when any
// byte crosses nodes, else of NVLink.
double StepCommUs(int64_t wire_bytes, int64_t cross_node_bytes, int64_t group_size, const ClusterSpec& cluster);

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
  // provably the same doubles (every partial sum an integer below 2^53; cost.cc BlockAllToAll):
  // O(ep x node block) instead of O(ep^2). The layout search sets it; SimulateStep does not, and
  // search_test compares the two for every candidate.
  bool integer_sums = false;
};

// The shape of `model`'s MoE layers under workload `w` at EP degree `ep` (integer_sums off).
MoePhaseShape MoePhaseShapeOf(const ModelSpec& model, const Workload& w, int64_t ep, bool deredundency);

// Those phases over the sampled layers (docs/cost-model.md sections 3.4 to 3.6 and 4), in us per
// layer and micro-batch, forward, unscaled by recomputation.
struct MoePhaseTimes {
  std::vector<double> permute, dispatch, gemm, combine;  // [ep]: each EP rank's mean over the sampled layers
  // The mean over the sampled layers of each layer's slowest rank.
  double permute_max = 0, dispatch_max = 0, gemm_max = 0, combine_max = 0;
  // The backward pass's dispatch: the same rows in BF16 (act_bytes). Equal to `dispatch` unless
  // the forward dispatch is FP8 (shape.dispatch_act_bytes / flex_fp8): only the forward dispatch
  // sends FP8 rows; the backward moves BF16 gradients (Megatron moe/fused_a2a.py: the backward of
  // the dispatch and of the combine run buffer.combine / buffer.dispatch on the gradient).
  std::vector<double> dispatch_bwd;
  double dispatch_bwd_max = 0;
  double imbalance = 1.0;      // max / mean received rows, the largest over the sampled layers
  bool spans_domains = false;  // the EP group spans NVLink domains (its all-to-alls use the NICs)
};
struct FlexLinks;  // deepep.h
// `ep_group`: the global ranks of rank 0's EP group in EP order (size ep). `flex_layers`
// (optional, one per sampled layer): the deepep dispatcher's rows per link in place of those of
// routing.layers[l].flex (FlexLinksOf), so that a caller holding one sample for several EP groups
// (the layout search's cache, eval_cache.h) need not copy the sample, nor keep its n x n counts,
// per group.
MoePhaseTimes SimulateMoePhases(const RoutingResult& routing, const std::vector<int64_t>& ep_group, const MoePhaseShape& shape,
                                const ClusterSpec& cluster, const CostOptions& options = {},
                                const std::vector<std::shared_ptr<const FlexLinks>>* flex_layers = nullptr);

// A collective group as the cost model sees it: its size and whether it spans nodes.
struct CollectiveGroup {
  int64_t size = 1;
  bool spans_nodes = false;        // spans NVLink domains (network.h NvlinkDomainGpus)
  int64_t members_per_domain = 1;  // members in rank 0's NVLink domain (network.h MembersPerDomain)
};

// Everything SimulateStep reads from a plan beyond its degrees, training settings and model:
// SimulateStep gathers it from the plan's meshes and placements; the layout search
// (layout_eval.h) derives the same figures from parameter classes without building a plan.
// A memo of the kernel model's shape-dependent times of one layer (--compute-model kernels:
// kernels_model.h KernelExtras, gemm_efficiency.h ShapedCompute), keyed by the shape they read
// (tokens, sequence-parallel tokens, routed tokens, tp, activation bytes, full recompute,
// seq_len, FP8 GEMMs), and the model FLOPs per token (model_flops.h): SimulateStepFromInputs
// looks them up instead of recomputing them when StepInputs::kernel_memo is set, with the same
// numbers. One memo serves one (model, cluster,
// cost options) -- the first call's, checked by address on every later one (dockyard::Error
// otherwise) -- and one thread at a time: the layout search keeps one per evaluator.
class KernelTermsMemo;
struct KernelTermsMemoDeleter {
  void operator()(KernelTermsMemo* memo) const;
};
using KernelTermsMemoPtr = std::unique_ptr<KernelTermsMemo, KernelTermsMemoDeleter>;
KernelTermsMemoPtr MakeKernelTermsMemo();

// The decoder layers of each pipeline stage as runs of one kind, in layer order: what the step's
// stage walk reads of the layer split (layer_stage), read per stage instead of per layer.
// Stage s's runs are runs[stage_begin[s], stage_begin[s + 1]); a run holds `count` >= 1
// consecutive layers of the stage (consecutive among its layers: with vpp > 1 a run may span a
// chunk boundary) that are all MoE or all dense, all checkpointed or none.
struct StageLayerRuns {
  struct Run {
    bool moe = false;           // ModelSpec::moe_layers of its layers
    bool checkpointed = false;  // per-layer selective checkpointing (recompute.h LayerSacCheckpointed)
    int64_t count = 0;
  };
  std::vector<Run> runs;
  std::vector<int64_t> stage_begin;  // [pp + 1]
  // Layers of stage s: MoE / dense, and of those the checkpointed ones.
  struct Counts {
    int64_t moe = 0, dense = 0, moe_checkpointed = 0, dense_checkpointed = 0;
  };
  Counts CountsOf(int64_t stage) const;
};
// The runs of `layer_stage` ([num_hidden_layers]: the stage of each layer, in [0, pp)) for a
// model whose MoE layers are `moe_layers` (same size); `checkpointed` ([num_hidden_layers]) marks
// the checkpointed layers, null or empty = none. Throws dockyard::Error when the sizes differ or a
// stage is outside [0, pp).
StageLayerRuns StageLayerRunsOf(const std::vector<bool>& moe_layers, const std::vector<int64_t>& layer_stage,
                                const std::vector<bool>* checkpointed, int64_t pp);

struct StepInputs {
  Workload workload;
  KernelTermsMemo* kernel_memo = nullptr;  // optional (see KernelTermsMemo)
  double attention_params = 0;             // elements of layer 0's attention parameters (summed as doubles)
  CollectiveGroup tp_group;                // rank 0's tp group
  // FSDP only: rank 0's data-parallel groups (dense: dp_shard*cp or dp*cp; sparse: efsdp or edp)
  // and, for the first MoE [0] and the first dense [1] layer, its model-parallel elements on rank 0
  // on the dense and the sparse mesh (summed as doubles in inventory order); with
  // --fp8-param-gather, the part of each that is FP8 GEMM weights (precision.h Fp8GemmGroup),
  // all-gathered in FP8.
  CollectiveGroup dense_dp_group, sparse_dp_group;
  struct FsdpLayer {
    bool present = false;  // the model has a layer of this kind
    double dense_elems = 0, sparse_elems = 0;
    double fp8_dense_elems = 0, fp8_sparse_elems = 0;
  } fsdp_layer[2];
  const MoePhaseTimes* moe_phases = nullptr;  // SimulateMoePhases for the plan's EP group
  int64_t num_moe_layers = 0;
  const std::vector<int64_t>* layer_stage = nullptr;  // [num_hidden_layers]: pp stage of each layer
  // Optional: StageLayerRunsOf(model.moe_layers, *layer_stage, none, pp), made once for many steps
  // (the search keeps one per split); null = made per step. Ignored under per-layer selective
  // checkpointing (the runs then carry the checkpointed layers).
  const StageLayerRuns* stage_runs = nullptr;
  double dp_step_comm_us = 0;          // sum of StepCollectiveUs over rank 0's "step" CommEntry list, in order
  double dp_step_param_gather_us = 0;  // the part of it from "zero1_all_gather_params" (--overlap-param-gather)
  int64_t static_bytes_rank0 = 0;      // parameter + gradient + optimizer bytes of rank 0 (StaticMemoryOnRank)
  // Pipeline ranks of lm_head + loss and of the MTP modules (plan.h Plan::loss_stage / mtp_stage);
  // -1 = the last stage.
  int64_t loss_stage = -1, mtp_stage = -1;
};

// The cost model proper (everything of SimulateStep after gathering its inputs). `training` is
// resolved (dp_sharding set). With `detail` false, only the scalars and dominant_phase are filled
// (no phases, per-rank figures or critical path): the layout search's hot path. Both modes give
// the same numbers and the same dominant phase.
CostBreakdown SimulateStepFromInputs(const ModelSpec& model, const ParamTotals& totals, const ParallelDims& dims,
                                     const TrainingConfig& training, const ClusterSpec& cluster, const StepInputs& inputs,
                                     const CostOptions& options, bool detail);

// Predicts one training step of `plan` on `cluster` with `routing` sampled for its EP degree
// (tokens_per_rank = the workload's routed tokens). Throws dockyard::Error on mismatched routing.
CostBreakdown SimulateStep(const Plan& plan, const ClusterSpec& cluster, const RoutingResult& routing, const CostOptions& options = {});

// MoE layers sampled for routing unless told otherwise (--routing-layers), the same in simulate,
// search (SearchOptions::routing_layers) and the fidelity bench, so that a search row's step
// time is simulate's for the same layout and flags. Each phase is the mean over the sampled
// layers of their slowest ranks; more layers average the sampling noise of the max down.
constexpr int64_t kDefaultRoutingLayers = 4;

// The MoE layers to sample for a plan of `model`: a trace gives every MoE layer its own routing
// (all of them); otherwise `requested`, else min(`default_layers`, MoE layers). Throws
// dockyard::Error naming `flag` when the count is outside [1, MoE layers].
int64_t RoutingLayersToSample(const ModelSpec& model, const RoutingSpec& routing, std::optional<int64_t> requested, int64_t default_layers,
                              const char* flag);

// Routing of `layers` MoE layers sampled for `plan`: its EP degree, its routed tokens per rank
// (ComputeWorkload) and its dispatcher's outer EP size (DispatchOep) -- what SimulateStep reads.
RoutingResult SampleRoutingForPlan(const Plan& plan, const RoutingSpec& routing, int64_t layers);

Json CostToJson(const CostBreakdown& cost);
std::string CostToText(const CostBreakdown& cost);

}  // namespace dockyard
