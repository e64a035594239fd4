// RunConfig: what dockyard-run executes, as plain values read from a planner Plan. CUDA-free and
// testable on any machine.
//
// The run is one MoE layer's forward on the ranks of the pipeline stage that holds the layer.
// Nothing here re-decides a placement: expert ownership, the intermediate-dim slices and the
// communication groups all come from the plan's shard steps (plan.placements) on its meshes
// (plan.meshes), cross-checked against plan.experts:
//   - the EP step (Shard(0) over the `ep` axis) gives each rank's experts and its EP group;
//   - the TP step on the expert's tp dim (over `etp` with EP on, `tp` with EP off) gives the
//     rank's slice [f_begin, f_end) of the logical F (fused gate|up sections cut per section)
//     and the expert-TP group whose partial sums are all-reduced;
//   - steps over data-parallel axes (FSDP over dp_shard x cp or efsdp, edp) are skipped: FSDP
//     all-gathers a parameter before its forward, so the forward sees the pre-FSDP shard.
// Tokens. Every rank holds `tokens` tokens of hidden size D. Ranks of one expert-TP group hold
// the same tokens (tensor parallelism replicates activations; their outputs are partial sums),
// generated from (seed, source) with source = the lowest rank of the group; otherwise each rank
// is its own source (EP borrows data-parallel ranks, each with its own tokens).
// Shared experts (dense mesh, TP on `tp`): with tp = 1 each rank computes them whole (kLocal);
// when the shared tp group is the expert-TP group their partial sums join the routed partial
// sums in one all-reduce (kPartial); when the tokens are not replicated over tp (ep > 1 with
// etp = 1 and tp > 1) they run sequence-parallel: all-gather the tokens over tp, compute the
// local F slice, reduce-scatter (kSequenceParallel).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "planner/layout/eplb.h"
#include "planner/layout/plan.h"
#include "planner/model/dispatcher.h"
#include "planner/cost/redundant_experts.h"
#include "planner/routing/routing.h"
#include "runtime/backend.h"

namespace dockyard::runtime {

// The dispatcher vocabulary is the planner's (planner/model/dispatcher.h: Dispatcher, DispatcherName).

enum class SharedMode { kNone, kLocal, kPartial, kSequenceParallel };
const char* SharedModeName(SharedMode m);

// The communication groups of a rank, by the label RankSpecs gives them and RankContext::group
// finds them by: the EP group, the expert-TP group (whose partial sums are all-reduced), the
// deredundency dispatcher's outer and inner EP groups (ep = oep x iep), the shared experts' TP group.
enum class RankGroup { kEp, kExpertTp, kOep, kIep, kSharedTp };
const char* RankGroupName(RankGroup g);  // "ep", "expert_tp", "oep", "iep", "shared_tp"

// Deliberate mistakes, to prove that validation catches them (tests and `--inject-fault`).
enum class Fault {
  kNone,
  kWrongExpertOwner,  // every rank computes its experts with the weights of expert + 1
};

struct RunOptions {
  // Unset: the plan's training.dispatcher.
  std::optional<Dispatcher> dispatcher;
  // Deredundency outer EP size; unset: the plan's (training.oep, else the nodes an EP group spans).
  std::optional<int64_t> oep;
  int64_t tokens_per_rank = 64;
  // Tests: tokens per source rank, [world_size] (entries of non-source ranks are ignored);
  // empty = tokens_per_rank everywhere.
  std::vector<int64_t> tokens_per_source;
  uint64_t seed = 0;
  int64_t layer = -1;  // decoder layer; -1 = the first MoE layer
  // Unset: the router's own top-k over the gate GEMM of the generated tokens. Set: each token's
  // experts are drawn from the planner's routing model (routing.h SampleTokenExperts, stream =
  // the token source), and the router's scores at those experts give the weights.
  std::optional<RoutingSpec> routing;
  // Redundant experts (planner/cost/redundant_experts.h): unset = none. Set (requires `routing` and
  // the all_to_all dispatcher): the layer's experts are E + R physical slots, P/ep per EP rank,
  // placed by PlaceExperts from the routing model's expected load of this layer with the plan's
  // EplbOptionsFor; every replica holds its logical expert's weights (generated from the logical
  // index) and each assignment goes to the replica ChooseReplicas picks (source = the EP index).
  std::optional<RedundantExpertsOptions> redundant;
  // A placement file (planner ReadPlacementFile) instead of a computed placement: the layer's
  // physical->logical map is read from it (R = its slots - E; the EPLB policy options are
  // unused, the replica choice of `redundant` applies, local when unset). Empty = none.
  std::string placement_file;
  int64_t iters = 3;
  int64_t warmup = 1;
  double atol = 1e-4;  // wrong when |out - ref| > atol + rtol * |ref|
  double rtol = 1e-3;
  bool record_collectives = false;  // keep each rank's collective log in the report
  Fault fault = Fault::kNone;
  // Scratch per rank for one block of generated weights (the intermediate dim is processed in
  // blocks that fit, sized for a core's L2; see docs/runtime.md).
  int64_t weight_block_bytes = int64_t{1} << 20;
  // The ranks' block (0 = weight_block_bytes): the CUDA backend uses 1 GiB, so that the grouped
  // GEMMs see whole experts; the single-process CPU reference keeps weight_block_bytes.
  int64_t rank_weight_block_bytes = 0;
  int reference_threads = 0;  // 0: std::thread::hardware_concurrency()
  // all_to_all dispatcher with local (not sequence-parallel) shared experts: start the combine
  // all-to-all, run the shared experts meanwhile, then wait (hyper_parallel combine_start /
  // combine_wait). The combine phase then reports the exposed part: the overlapped region's
  // time minus the shared experts' own.
  bool overlap_shared_experts = false;
  // Reject runs whose worst-case buffers over all ranks of the stage exceed 64 GiB (the whole
  // stage runs in this process). The single-GPU replay, which runs one rank and allocates only
  // the rows routing actually sends it, turns this off.
  bool check_buffer_bound = true;
  // false: the caller runs no dispatch (the single-GPU replay, whose dispatch and combine come
  // from the cost model with the plan's settings), so the plan's FP8 dispatch is not refused.
  bool runs_dispatch = true;
};

struct RankConfig {
  int64_t rank = 0;    // global rank
  int64_t source = 0;  // whose tokens this rank holds
  int64_t tokens = 0;
  // Routed experts.
  std::vector<int64_t> ep_group;  // global ranks in ep-coordinate order
  int64_t ep_index = 0;
  int64_t first_expert = 0;
  int64_t num_local_experts = 0;
  int64_t f_begin = 0, f_end = 0;        // slice of the logical moe_intermediate_size
  std::vector<int64_t> expert_tp_group;  // {rank} when experts are not TP-sharded
  // Deredundency: ep = oep x iep, EP index = o * iep + i.
  std::vector<int64_t> oep_group, iep_group;
  int64_t oep_index = 0, iep_index = 0;
  // Shared experts.
  SharedMode shared_mode = SharedMode::kNone;
  int64_t shared_f_begin = 0, shared_f_end = 0;
  std::vector<int64_t> shared_tp_group;
};

struct RunConfig {
  // The layer.
  std::string model_name;
  std::string family;
  int64_t layer = 0;
  int64_t hidden = 0;
  int64_t moe_intermediate = 0;
  int64_t num_experts = 0;
  int64_t top_k = 0;
  bool sigmoid_scores = false;  // ModelSpec.moe.score_func
  bool score_correction_bias = false;
  bool norm_topk_prob = false;
  double routed_scaling_factor = 1.0;
  GroupLimit group_limit;           // ModelSpec.moe n_group / topk_group (GroupLimitOf)
  int64_t shared_intermediate = 0;  // 0 = no shared experts
  bool shared_expert_gate = false;
  // The layout.
  int64_t world_size = 0;
  int64_t stage = 0;  // pipeline stage holding the layer; its ranks run
  int64_t ep = 1;
  int64_t expert_tp = 1;  // size of the expert-TP group
  int64_t oep = 1, iep = 1;
  Dispatcher dispatcher = Dispatcher::kAllToAll;
  int64_t gpus_per_node = 8;  // the plan's machine.gpus_per_node: the deepep dispatcher's nodes
  // The plan's training.fp8_dispatch (--fp8-dispatch). MakeRunConfig refuses it when the run
  // dispatches (RunOptions::runs_dispatch): no dispatcher of the runtime sends FP8 rows yet.
  bool fp8_dispatch = false;
  RunOptions options;
  // Built from options.routing (one layer), or null for the router's own top-k.
  std::shared_ptr<const RoutingModel> routing_model;
  int64_t routing_layer = 0;  // index of `layer` among the MoE layers (the routing model's layer)
  // With options.redundant: the layer's placement; RankConfig::first_expert / num_local_experts
  // are then the rank's first physical slot and its P/ep slots.
  std::shared_ptr<const ExpertPlacement> placement;
  std::vector<RankConfig> ranks;          // the stage's ranks, increasing
  std::vector<int64_t> sources;           // distinct token sources, increasing
  std::vector<int64_t> tokens_of_source;  // aligned with sources
};

// Builds the run of `options` on `plan`. Throws dockyard::Error naming the rule an input breaks
// or the feature the runtime does not support yet (checked before anything is allocated).
RunConfig MakeRunConfig(const Plan& plan, const RunOptions& options);

// The groups `rank` communicates in, in this order: ep and expert_tp always, oep and iep with the
// deredundency dispatcher, shared_tp with shared experts.
std::vector<RankGroup> GroupsOfRank(const RunConfig& config, const RankConfig& rank);
// The global ranks of `group` as `rank` sees it, in group order.
const std::vector<int64_t>& GroupMembers(const RankConfig& rank, RankGroup group);

// The groups every rank communicates in (GroupsOfRank, labelled by RankGroupName), for
// Backend::RunRanks.
std::vector<RankSpec> RankSpecs(const RunConfig& config);

// The slice of every dim of a parameter that a rank computes with (TP and EP steps, fused sections
// cut per section): planner/layout/placement.h ForwardSliceOnRank, beside the planner's local shapes.
using dockyard::ForwardSliceOnRank;

}  // namespace dockyard::runtime
