// Plan: everything dockyard-plan decides for one model and one set of parallel degrees —
// validated degrees, meshes and rank groups, every parameter's placements and local shapes,
// pipeline stages, expert ownership and parameter bytes per rank. Built by BuildPlan, which
// checks every invariant; the runtime reads a Plan and never re-decides a placement.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "planner/inventory.h"
#include "planner/mesh.h"
#include "planner/model_spec.h"
#include "planner/parallel_dims.h"
#include "planner/placement.h"
#include "planner/training.h"

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
  int64_t first_layer = 0;      // decoder layers [first_layer, last_layer]
  int64_t last_layer = 0;
  int64_t max_param_bytes = 0;  // parameter bytes on the most loaded rank of the stage
  int64_t min_param_bytes = 0;
  int64_t worst_rank = 0;       // a rank with max_param_bytes
};

struct Plan {
  ModelSpec model;
  TrainingConfig training;  // resolved: dp_sharding and num_microbatches always set
  ParamInventory inventory;
  ParallelDims dims;
  Meshes meshes;
  std::vector<ParamPlacement> placements;  // aligned with inventory.params
  ExpertOwnership experts;
  std::vector<int64_t> layer_stage;        // [num_hidden_layers]: pp stage of each layer
  std::vector<StageSummary> stages;
  std::vector<int64_t> param_bytes_per_rank;  // [world_size]

  const Mesh& MeshOf(size_t param_index) const {
    return placements[param_index].sparse_mesh ? meshes.sparse : meshes.dense;
  }
};

// Elements of parameter `param_index` on `rank` after model-parallel sharding only (tp / ep /
// etp, no data-parallel axis): what an FSDP all-gather rebuilds, and what ZeRO-1 / DDP keep.
int64_t ModelParallelNumel(const Plan& plan, size_t param_index, int64_t rank);

// Pipeline split: layers spread evenly, the first (L % pp) stages taking one extra layer;
// embedding on the first stage, final norm and lm_head on the last.
std::vector<int64_t> EvenLayerSplit(int64_t num_layers, int64_t pp);

// Validates the degrees (ParallelDims::Build, ValidateDimsForModel) and the training settings,
// and builds the plan. Throws dockyard::Error naming the rule an input breaks.
Plan BuildPlan(const ModelSpec& model, const ParallelDimsOptions& options, const TrainingConfig& training = {});

// For layout search: reuses a prebuilt inventory of `model` and, with `lite`, skips what only
// reports need (distinct local shapes per parameter and parameter bytes of every rank); memory
// and cost need neither.
Plan BuildPlan(const ModelSpec& model, const ParamInventory& inventory, const ParallelDimsOptions& options,
               const TrainingConfig& training, bool lite);

}  // namespace dockyard
