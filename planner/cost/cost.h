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

#include "planner/base/phase.h"
#include "planner/cost/cluster.h"
#include "planner/base/json_util.h"
#include "planner/layout/plan.h"
#include "planner/cost/compute_model.h"
#include "planner/cost/moe_phases.h"
#include "planner/routing/routing.h"
#include "planner/accounting/workload.h"

namespace dockyard {

struct PhaseCost {
  Phase phase = Phase::kAttention;           // reports name it with PhaseName ("attention", "router", ...)
  LayerKind layer_kind = LayerKind::kMoe;    // LayerKindName: "moe" or "dense"
  Direction direction = Direction::kForward;  // DirectionName: "forward" or "backward"
  double time_us = 0;      // per layer and micro-batch: the mean over sampled layers of each layer's slowest rank
  int64_t slowest_ep_rank = -1;
  std::vector<double> per_ep_rank_us;  // routing-dependent phases: each EP rank's mean over the sampled layers
};

// What EP overlap (Megatron's --overlap-moe-expert-parallel-comm, DualPipe; layer_phases.cc
// OverlapEpComm) does to one MoE layer and micro-batch, the mean over the stage's micro-batches
// (us): the dispatch and combine all-to-alls of both passes alone; what they add to the layer with
// the overlap -- their exposed remainder plus the compute slowed beside them (the communication
// kernels' SMs) and their own slowdown beside the compute, so it can exceed the time alone -- the
// dispatch and combine phases' sum; and the dispatcher's host synchronization alone and what stays
// of it (the paired micro-batches hide it). `on` false: no overlap (every figure 0).
struct EpOverlapDetail {
  bool on = false;
  double paired_share = 0;  // of the stage's micro-batch forwards, those run beside a backward (ep_overlap.h PairedChunkShare)
  double a2a_alone_us = 0, a2a_added_us = 0;
  double sync_idle_alone_us = 0, sync_idle_exposed_us = 0;
  // With the experts' weight gradients delayed (pipeline_schedule.h WgradDelayed; Megatron
  // --delay-wgrad-compute, DualPipe's W): what that saves the layer against the same pairing
  // without it (us, the paired share's; 0 where the compute stream, not the backward dispatch, sets
  // every pair's end). `delay_wgrad` false: not delayed (the figure is 0).
  bool delay_wgrad = false;
  double delay_wgrad_saved_us = 0;
  // The overlap's net effect on the layer: alone (a2a + idle) less with it (added + idle left);
  // negative where it costs more than it hides.
  double SavedUs() const { return a2a_alone_us + sync_idle_alone_us - a2a_added_us - sync_idle_exposed_us; }
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
  double embedding_bwd_us = 0;     // the first stage's embedding backward per micro-batch (in its stage time)
  double pipeline_bubble_us = 0;
  double dp_step_comm_us = 0;  // exposed data-parallel communication at the step's end
  double optimizer_us = 0;
  double host_overhead_us = 0;  // the host's per-step work (knobs.h HostKnobs::step_overhead_us)
  double step_time_us = 0;
  double tokens_per_s_per_gpu = 0;
  double mfu = 0;                    // model FLOPs (model_flops.h) / (step time x GPUs x dense BF16 peak)
  double model_flops_per_token = 0;  // Megatron's model FLOPs of one token, forward + backward
  // Contributors to the step, largest share first: layer phases (time x layers of the slowest
  // stage x (M + pp - 1)), "lm_head", "embedding", "dp_step_comm", "optimizer".
  std::vector<std::string> critical_path;
  std::vector<double> critical_path_us;  // each contributor's share of the step (us), as critical_path; detail only
  std::string dominant_phase;            // critical_path.front()
  double routing_imbalance = 1.0;        // max / mean received rows over the sampled layers
  EpOverlapDetail ep_overlap;            // the MoE layer's, with EP overlap
  // The GPU idle the dispatcher's host synchronization leaves in one MoE layer and micro-batch,
  // forward + backward (recomputed forwards wait again), inside the router rows of `phases`
  // (kernels_model.h MoeSyncIdleUs; 0 under a full-iteration CUDA graph, capacity padding or
  // --compute-model gemm). With EP overlap, ep_overlap says how much of it the pairing hides.
  double moe_sync_idle_us = 0;
};

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
// seq_len, FP8 GEMMs, CUDA graphs, fused cross-entropy), and the model FLOPs per token
// (model_flops.h): SimulateStepFromInputs looks them up instead of recomputing them when
// StepInputs::kernel_memo is set, with the same numbers. One memo serves one (model, cluster with
// its knobs) -- the first call's, checked by address on every later one (dockyard::Error
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
  CollectiveGroup etp_group;               // rank 0's expert-TP group (megatron's dispatcher gathers the routed rows over it)
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
  // [num_hidden_layers]: the model chunk of each layer on its stage (Plan::layer_chunk; vpp > 1).
  // Null or empty: vpp equal chunks. The pipeline's fill and flush hop by the largest chunk of the
  // rank with the most layers (pipeline_schedule.h ChunkSlotShare).
  const std::vector<int64_t>* layer_chunk = nullptr;
  // Optional: StageLayerRunsOf(model.moe_layers, *layer_stage, none, pp), made once for many steps
  // (the search keeps one per split); null = made per step. Ignored under per-layer selective
  // checkpointing (the runs then carry the checkpointed layers).
  const StageLayerRuns* stage_runs = nullptr;
  double dp_step_comm_us = 0;          // sum of StepCollectiveUs over rank 0's "step" CommEntry list, in order
  // The part of it from "zero1_all_gather_params" by mesh (dense, sparse: the expert buffer), the distributed optimizer's / DDP's
  // gradient reduce ("zero1_reduce_scatter_grads", "ddp_all_reduce_grads") likewise, and rank 0's
  // model-parallel elements on each mesh (CommReport dense_elems / sparse_elems): param_gather.h's
  // inputs. The rest of dp_step_comm_us (the embedding group's and the router bias's all-reduces,
  // FSDP's replica all-reduces) runs after the backward, exposed.
  double param_gather_dense_us = 0, param_gather_sparse_us = 0;
  double grad_reduce_dense_us = 0, grad_reduce_sparse_us = 0;
  double dense_elems_rank0 = 0, sparse_elems_rank0 = 0;
  // Rank 0's gradient bytes and the elements its optimizer steps (StaticMemoryOnRank grads_bytes,
  // optimizer_elems): the step-end passes (kernels_model.h StepEndKernels).
  int64_t grad_bytes_rank0 = 0, optimizer_elems_rank0 = 0;
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
                                     ComputeModel compute_model, bool detail);

// Muon's Newton-Schulz time on one rank at the step's end, in microseconds (0 unless the run's
// optimizer is Muon, muon.h): MuonNewtonSchulzFullUs (gemm_efficiency.h; by shape under the
// kernel-level model) times the rank's share of the model's Muon matrices -- the `optimizer_elems`
// it steps (MemoryBreakdown::optimizer_elems, all counted as Muon's: embeddings and norms are a
// few percent of an MoE model) over their elements -- times `tp` (each TP rank orthogonalizes the
// whole matrix, --muon-tp-mode duplicated), at most the whole model's time times tp.
double MuonNewtonSchulzUs(const ModelSpec& model, const TrainingConfig& training, const ClusterSpec& cluster, ComputeModel compute_model,
                          double optimizer_elems, double tp);

// Predicts one training step of `plan` on `cluster` with `routing` sampled for its EP degree
// (tokens_per_rank = the workload's routed tokens). Throws dockyard::Error on mismatched routing.
CostBreakdown SimulateStep(const Plan& plan, const ClusterSpec& cluster, const RoutingResult& routing,
                           ComputeModel model = ComputeModel::kKernels);

Json CostToJson(const CostBreakdown& cost);
std::string CostToText(const CostBreakdown& cost);

// The EP-overlap sentence of the report (CostToText's line, the HTML report's phase figure): what
// share of the forwards is paired, the all-to-alls alone and added, the host synchronization alone
// and left, the net saved or LOST (us, per MoE layer and micro-batch). `e.on` must be true.
std::string EpOverlapText(const EpOverlapDetail& e);
// The detail back from CostToJson's `ep_overlap` object (the HTML report reads the JSON report).
// Throws dockyard::Error naming the key when one is missing or not a number.
EpOverlapDetail EpOverlapFromJson(const Json& j);

}  // namespace dockyard
