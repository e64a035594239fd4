// Plan: everything dockyard-plan decides for one model and one set of parallel degrees —
// validated degrees, meshes and rank groups, every parameter's placements and local shapes,
// pipeline stages and expert ownership. Built by BuildPlan, which checks every invariant; the
// runtime reads a Plan and never re-decides a placement. Per-rank tables for reports (parameter
// bytes of every rank, stage summaries) are computed from a plan on demand (ParamBytesPerRank,
// SummarizeStages), so a Plan has no part left empty.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "planner/model/inventory.h"
#include "planner/layout/megatron_split.h"
#include "planner/layout/mesh.h"
#include "planner/model/model_spec.h"
#include "planner/model/pipeline_layout.h"
#include "planner/layout/parallel_dims.h"
#include "planner/layout/placement.h"
#include "planner/model/training.h"

namespace dockyard {

// Which routed experts each EP rank holds: EP rank r holds the contiguous global ids
// [r * num_local_experts, (r + 1) * num_local_experts) (torchtitan / Megatron Shard(0) on ep).
struct ExpertOwnership {
  int64_t num_experts = 0;
  int64_t ep = 1;
  int64_t num_local_experts = 0;

  int64_t FirstExpert(int64_t ep_rank) const { return ep_rank * num_local_experts; }
  // The EP rank that owns a global expert id.
  int64_t OwnerOf(int64_t expert_idx) const { return expert_idx / num_local_experts; }
};

struct StageSummary {
  int64_t stage = 0;
  int64_t first_layer = 0;  // its smallest and largest decoder layer; both -1 when the stage has none (a layout's)
  int64_t last_layer = 0;
  // Its decoder layers as runs of consecutive layers, [first, last] each, in order: one run
  // without interleaving, up to vpp with it (rank 0 of pp 3, vpp 3, 27 layers: [0,2] [9,11] [18,20]).
  std::vector<std::pair<int64_t, int64_t>> layer_runs;
  int64_t max_param_bytes = 0;  // parameter bytes on the most loaded rank of the stage
  int64_t min_param_bytes = 0;
  int64_t worst_rank = 0;  // a rank with max_param_bytes
};

struct Plan {
  // As given, without its training block (model.training is empty), and with vocab_size the padded
  // vocabulary the framework builds (model/vocab_padding.h: Megatron-LM pads it to a multiple of
  // --make-vocab-size-divisible-by x tp), so the inventory, the logits and the cost see its rows.
  ModelSpec model;
  int64_t unpadded_vocab_size = 0;  // the model's own vocab_size (the tokenizer's), before padding
  // The one training config: resolved, dp_sharding, num_microbatches and run.overlap_shared_experts
  // always set (the convention's defaults: convention.h ApplyConventionDefaults).
  TrainingConfig training;
  // Which of the convention's defaults the plan took for settings not given (reports' "Defaults").
  DefaultsApplied defaults_applied;
  Machine machine;          // the one node size and memory budget (machine.h; model.machine is the default)
  ParamInventory inventory;
  ParallelDims dims;
  Meshes meshes;
  std::vector<ParamPlacement> placements;  // aligned with inventory.params
  ExpertOwnership experts;
  std::vector<int64_t> layer_stage;  // [num_hidden_layers]: pp stage of each layer
  // [num_hidden_layers]: the model chunk on its rank of each layer, from a
  // --pipeline-model-parallel-layout only (pipeline_layout.h); empty otherwise, when the
  // activations count each chunk at the stage's mean layers (memory.h StageLayers::chunk_copies).
  std::vector<int64_t> layer_chunk;
  // Pipeline ranks of the word embedding, of the final norm + lm_head + loss, and of the MTP
  // modules: 0, pp - 1 and pp - 1 unless a Megatron layout (--pipeline-model-parallel-layout)
  // places them elsewhere (ResolvePipelineStages).
  int64_t embedding_stage = 0, loss_stage = 0, mtp_stage = 0;

  const Mesh& MeshOf(size_t param_index) const { return placements[param_index].sparse_mesh ? meshes.sparse : meshes.dense; }
};

// Elements of parameter `param_index` on `rank` after model-parallel sharding only (tp / ep /
// etp, no data-parallel axis): what an FSDP all-gather rebuilds (GatheredNumelOnRank: the FSDP
// dim padded to a multiple of the FSDP degree, as FSDP2 gathers padded shards), and what ZeRO-1 /
// DDP keep.
int64_t ModelParallelNumel(const Plan& plan, size_t param_index, int64_t rank);

// The pipeline stage of each of `num_layers` decoder layers: `training.pp_layer_split` when
// given (pp entries, each >= 1 layer, summing to num_layers), else EvenLayerSplit. Throws
// dockyard::Error naming the rule a given split breaks.
std::vector<int64_t> ResolveLayerSplit(const TrainingConfig& training, int64_t num_layers, int64_t pp);

// Every pipeline placement of a plan: with a Megatron layout (training.run.pipeline_layout,
// pipeline_layout.h ParsePipelineLayout / ResolvePipelineLayout) or the account-for-embedding /
// loss split (AccountForLayout) the layers, embedding, loss and MTP modules where those put them
// and vpp = the layout's stages / pp; otherwise ResolveLayerSplit's layers per rank, interleaved
// over training.run.vpp model chunks when it is above 1 (megatron_split.h InterleavedLayerSplit),
// the embedding on stage 0, the loss and MTP on stage pp - 1. A layout with neither --vpp nor a matching
// --vpp sets the vpp. Throws dockyard::Error naming the flag and rule: a layout together with the
// account-for flags or with pp_layer_split (Megatron: "pipeline_model_parallel_layout cannot be
// set with other pipeline layout arguments"), the account-for flags with pp_layer_split, a --vpp
// that differs from the layout's. With `megatron`, an even split Megatron refuses at vpp > 1
// (megatron_split.h MegatronEvenSplitFlag) is placed as the layout that reproduces it: its layers,
// and each layer's model chunk (layer_chunk), where that layout puts them.
PipelineStages ResolvePipelineStages(const TrainingConfig& training, int64_t num_layers, int64_t pp, bool megatron);

// Calls f(param, placement, mesh) for each tensor of one MTP module (planner/model/mtp.h): the last
// decoder layer's, as placed, and MtpExtraParams, placed by the one placement policy (PlaceParam).
// A rank of plan.mtp_stage holds training.mtp_layers such modules.
void ForEachMtpParam(const Plan& plan, const std::function<void(const ParamInfo&, const ParamPlacement&, const Mesh&)>& f);

// Parameter bytes of every rank: each parameter adds its local bytes to every rank of its stage,
// the MTP modules (ForEachMtpParam x mtp_layers) to the ranks of plan.mtp_stage, and under DualPipe
// a rank adds its mirror stage's rank (pipeline_schedule.h DualPipeMirrorStage: it holds both
// stages): [world_size]. O(world_size x parameters). Throws dockyard::Error on int64 overflow.
std::vector<int64_t> ParamBytesPerRank(const Plan& plan);

// Per stage: its layers (under DualPipe its mirror stage's too: the rank holds both) and the most
// and least loaded ranks of `param_bytes_per_rank` (ParamBytesPerRank of the same plan).
std::vector<StageSummary> SummarizeStages(const Plan& plan, const std::vector<int64_t>& param_bytes_per_rank);

// The deredundency dispatcher's rule (ep = oep x iep): its message when training.oep does not
// divide ep, empty otherwise (and for other dispatchers). BuildPlan throws it; the search counts it.
std::string DeredundencyOepError(const TrainingConfig& training, int64_t ep);

// Validates the degrees (ParallelDims::Build, ValidateDimsForModel), the training settings and the
// machine (ValidateMachine, "training." as the plan report spells them), gives the settings left
// unset the convention's defaults (ApplyConventionDefaults), checks the schedule's rules
// (pipeline_schedule.h: ValidateSchedule, ValidateSingleStageMicrobatches,
// ValidateInterleavedMicrobatches, ValidateEpOverlap, ValidateSharedExpertOverlap, ...), and builds the plan. The
// machine's node size and budget are the caller's (flags, the cluster: network.h MachineOf, or the
// spec's training block: ModelSpec::machine); the default is 8 GPUs per node and no budget.
// Throws dockyard::Error naming the rule an input breaks.
Plan BuildPlan(const ModelSpec& model, const ParallelDimsOptions& options, const TrainingConfig& training = {},
               const Machine& machine = {});
// The same with a prebuilt inventory of `model` (BuildInventory), for callers that plan one model
// many times (the layout search).
Plan BuildPlan(const ModelSpec& model, const ParamInventory& inventory, const ParallelDimsOptions& options, const TrainingConfig& training,
               const Machine& machine);

}  // namespace dockyard
