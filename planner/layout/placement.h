// DTensor placements of every parameter and its local shapes.
//
// Policy (torchtitan parallelize_* and moe_sharding.py, the expert sharding placement policy):
//  - routed experts, EP on (ep > 1): sparse mesh; Shard(0) on ep; with ETP also TP on etp
//    (gate/up colwise, down rowwise: Shard(1) or Shard(2) by stored layout); FSDP Shard(0) on
//    efsdp, Shard(1) instead when efsdp * ep > num_experts (torchtitan apply_fsdp).
//  - routed experts, EP off: dense mesh; TP on tp (same colwise/rowwise dims); FSDP over
//    dp_shard*cp, Shard(1) when that size exceeds num_experts.
//  - everything else: dense mesh; attention q/k/v (MLA q_b, kv_b) colwise Shard(0), o rowwise
//    Shard(1); dense MLP and shared experts gate/up colwise, down rowwise; embedding and lm_head
//    vocab-parallel Shard(0); norms, router gate and biases, MLA q_a/kv_a Replicate() on tp;
//    FSDP Shard(0) over dp_shard*cp (one flattened axis, as torchtitan's "fsdp" mesh).
//  - dp_replicate is always Replicate() (HSDP replicas).
//  - dp_sharding zero1 / ddp (Megatron's default: DDP with the distributed optimizer shards
//    optimizer state, not parameters): data-parallel axes are Replicate(). FSDP under the
//    megatron convention shards over (dp, cp) and edp.
//  - An axis of size 1 is always Replicate().
// Placements are listed per axis of the parameter's mesh, pipeline axis excluded (a parameter
// lives on one pp stage, see stage).
//
// Local shapes use torch.chunk semantics per model-parallel shard step (DTensor Shard): chunk
// size c = ceil(n / k), chunk i holds clamp(n - i*c, 0, c). FSDP steps follow FSDP2
// (torch fully_shard, _fsdp_param.py): the dim is cut into k equal padded chunks, so every rank
// holds (and all-gathers) c = ceil(n / k) rows, the last ones padding (48 local experts over
// efsdp 32: 2 on every rank, verl PR #6974), and the all-gather output is k * c rows. FSDP2
// refuses an uneven cut of any dim other than 0 ("FSDP does not support uneven sharding on
// dim 1"): FindUnevenFsdpCut finds it and BuildPlan rejects it. Steps apply in the order the
// frameworks apply them: TP (tp/etp), then EP, then FSDP over the flattened data-parallel axes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "planner/model/inventory.h"
#include "planner/layout/mesh.h"
#include "planner/layout/parallel_dims.h"

namespace dockyard {

struct Placement {
  enum class Kind { kReplicate, kShard, kPartial };
  Kind kind = Kind::kReplicate;
  int dim = -1;  // tensor dim for kShard

  static Placement Replicate() { return {Kind::kReplicate, -1}; }
  static Placement Shard(int d) { return {Kind::kShard, d}; }
  std::string ToString() const;  // "Shard(0)", "Replicate()", "Partial()"
  bool operator==(const Placement& o) const { return kind == o.kind && dim == o.dim; }
};

// What a shard step is: tensor parallelism (tp or etp), expert parallelism (ep), or data
// parallelism (FSDP over dp_shard*cp, dp*cp, efsdp or edp: all-gathered before the forward).
enum class ShardKind { kTensor, kExpert, kData };

// One sharding step: `dim` is split into `num_chunks` chunks over the flattened `axes`
// (mesh axis indices, outer first).
struct ShardStep {
  int dim = 0;
  std::vector<int> axes;
  int64_t num_chunks = 1;
  // kData: an FSDP2 step, every chunk holds ceil(n / num_chunks) (padding); otherwise torch.chunk
  // sizes (a hand-built step defaults to those).
  ShardKind kind = ShardKind::kTensor;
};

struct LocalShape {
  std::vector<int64_t> shape;
  int64_t num_ranks = 0;  // ranks of the parameter's stage holding this shape
};

struct ParamPlacement {
  bool sparse_mesh = false;              // placed on Meshes::sparse, else Meshes::dense
  std::vector<Placement> placements;     // one per mesh axis after pp
  std::vector<ShardStep> steps;          // how local shapes are cut, in application order
  int64_t stage = 0;                     // pipeline stage holding the parameter
  std::vector<LocalShape> local_shapes;  // distinct shapes, largest first
  int64_t max_local_numel = 0;
};

// torch.chunk size of chunk `index` when `n` is split into `k` chunks.
int64_t ChunkSize(int64_t n, int64_t k, int64_t index);
// Its first element: min(n, index * ceil(n / k)).
int64_t ChunkBegin(int64_t n, int64_t k, int64_t index);

// A half-open range [begin, begin + size) of one tensor dim.
struct DimSlice {
  int64_t begin = 0;
  int64_t size = 0;
};
// The part of `param` that `rank` computes with in the forward: each dim's range of the global
// tensor after the model-parallel (tensor and expert) steps of `placement`; data-parallel steps
// are left out (FSDP all-gathers them before the forward). Same chunks as LocalShapeOnRank.
std::vector<DimSlice> ModelParallelSliceOnRank(const ParamInfo& param, const ParamPlacement& placement, const Mesh& mesh, int64_t rank);
// What `rank` computes with in the forward, as the runtime runs it: ModelParallelSliceOnRank,
// except that on a dim with fused sections (gate | up) TP shards each section alike, so the
// slice is that of one section, relative to the section's start; and the mesh axes of the
// placement's TP and EP steps (-1 when it has none; data-parallel steps are skipped). Throws
// dockyard::Error for fused sections of different sizes and for a TP or EP step over several
// mesh axes (the runtime runs neither).
struct ForwardShards {
  std::vector<DimSlice> slices;  // one per dim of `param`
  int tp_axis = -1;
  int ep_axis = -1;
};
ForwardShards ForwardShardsOnRank(const ParamInfo& param, const ParamPlacement& placement, const Mesh& mesh, int64_t rank);
// Its slices only.
std::vector<DimSlice> ForwardSliceOnRank(const ParamInfo& param, const ParamPlacement& placement, const Mesh& mesh, int64_t rank);
// The size a rank holds along the dim of `step` for chunk `index`: ChunkSize, or ceil(n / k) on
// every rank for a padded (FSDP2) step.
int64_t StepChunkSize(int64_t n, const ShardStep& step, int64_t index);

// One cut of the placement policy above, before it meets a mesh: tensor dim `dim` is split into
// `num_chunks` chunks over the flattened `axes` (outer first; axes of size 1 are left out, and a
// cut of one chunk is no cut). `data_parallel`: an FSDP cut (what an all-gather rebuilds).
struct ShardCut {
  int dim = 0;
  MeshAxis axes[2] = {MeshAxis::kPp, MeshAxis::kPp};
  int num_axes = 0;
  int64_t num_chunks = 1;
  ShardKind kind = ShardKind::kData;
  bool data_parallel() const { return kind == ShardKind::kData; }
};

// The cuts of a parameter, in application order (at most three: TP, EP, FSDP).
struct ShardCuts {
  bool sparse_mesh = false;  // placed on Meshes::sparse, else Meshes::dense
  ShardCut cuts[3];
  int size = 0;
};

// THE placement policy (documented at the top of this file): the cuts of a parameter that is a
// routed expert or not, with TP dim `tp_dim` (-1: none), under `dims` with `num_experts` routed
// experts; `shard_data_parallel`: FSDP. PlaceParam turns the cuts into placements on a mesh; the
// layout search applies them to parameter classes (FirstChunkNumel). No allocation.
ShardCuts ShardCutsOf(bool routed_expert, int tp_dim, const ParallelDims& dims, int64_t num_experts, bool shard_data_parallel);

// Elements of chunk 0 of every cut of `cuts` applied to `shape` (the local size on the first rank
// of a stage, which takes chunk 0 everywhere: a worst rank, as chunk sizes never grow with the
// index): `local` after all cuts (FSDP2's padded shard, ceil(n / k) rows), `model_parallel` what
// an FSDP all-gather rebuilds: the model-parallel chunk with the FSDP dim padded to
// k * ceil(n / k) rows (equal to the model-parallel chunk when there is no FSDP cut).
struct FirstChunkElems {
  int64_t model_parallel = 1, local = 1;
};
// (Always inlined: the layout search calls it for every parameter class of every candidate.)
__attribute__((always_inline)) inline FirstChunkElems FirstChunkNumel(const std::vector<int64_t>& shape, const ShardCuts& cuts) {
  constexpr size_t kMaxDims = 8;
  const size_t rank = shape.size();
  int64_t s[kMaxDims];
  FirstChunkElems out;
  if (rank > kMaxDims) {  // no such tensor in any model family; kept exact all the same
    for (size_t dim = 0; dim < rank; ++dim) {
      int64_t mp = shape[dim], local = shape[dim];
      for (int i = 0; i < cuts.size; ++i) {
        const ShardCut& c = cuts.cuts[i];
        if (c.dim != static_cast<int>(dim)) continue;
        local = (local + c.num_chunks - 1) / c.num_chunks;
        mp = c.data_parallel() ? local * c.num_chunks : local;
      }
      out.model_parallel *= mp;
      out.local *= local;
    }
    return out;
  }
  for (size_t i = 0; i < rank; ++i) s[i] = shape[i];
  auto product = [&] {
    int64_t n = 1;
    for (size_t i = 0; i < rank; ++i) n *= s[i];  // <= the global numel, checked by BuildInventory
    return n;
  };
  // Model-parallel cuts come first and data-parallel (FSDP) cuts last (ShardCutsOf's order).
  int i = 0;
  for (; i < cuts.size && !cuts.cuts[i].data_parallel(); ++i) {
    int64_t& n = s[cuts.cuts[i].dim];
    n = (n + cuts.cuts[i].num_chunks - 1) / cuts.cuts[i].num_chunks;  // torch.chunk: chunk 0 holds ceil(n / k)
  }
  out.model_parallel = product();
  if (i == cuts.size) {
    out.local = out.model_parallel;
    return out;
  }
  // The FSDP cut (ShardCutsOf makes at most one): FSDP2 pads the dim to k equal chunks, so the
  // all-gather rebuilds k * ceil(n / k) rows.
  int64_t padded_chunks = 1;
  for (; i < cuts.size; ++i) {
    int64_t& n = s[cuts.cuts[i].dim];
    n = (n + cuts.cuts[i].num_chunks - 1) / cuts.cuts[i].num_chunks;
    padded_chunks *= cuts.cuts[i].num_chunks;
  }
  out.local = product();
  out.model_parallel = out.local * padded_chunks;
  return out;
}

// FSDP2 (torch fully_shard, _fsdp_param.py _init_sharded_param) shards dim 0 unevenly with
// padding but raises NotImplementedError("FSDP does not support uneven sharding on dim 1") for
// any other dim whose local (model-parallel) size does not divide by the FSDP degree. The FSDP
// cut of `cuts` on `shape` that FSDP2 refuses: `cut` its index in cuts (-1 when none), `size`
// the model-parallel size of its dim on the first rank.
struct UnevenFsdpCut {
  int cut = -1;
  int64_t size = 0;
};
UnevenFsdpCut FindUnevenFsdpCut(const std::vector<int64_t>& shape, const ShardCuts& cuts);
// The message for such a cut of parameter `fqn`: names the tensor, the dim, its size, the FSDP
// degree with its axes and the rule.
std::string UnevenFsdpMessage(const std::string& fqn, const ShardCut& cut, int64_t size);

// Chooses the placements and shard steps of one parameter (local_shapes left empty).
// `shard_data_parallel`: FSDP (parameters sharded over the data-parallel axes) or not.
ParamPlacement PlaceParam(const ParamInfo& param, const ParallelDims& dims, const Meshes& meshes, int64_t num_experts,
                          bool shard_data_parallel);

// Fills local_shapes / max_local_numel of a placement from its steps.
void ComputeLocalShapes(const ParamInfo& param, const Mesh& mesh, ParamPlacement& placement);

// The local shape of `param` on global `rank` (the rank must belong to the param's stage).
std::vector<int64_t> LocalShapeOnRank(const ParamInfo& param, const ParamPlacement& placement, const Mesh& mesh, int64_t rank);

// The element count of `param` on global `rank` (same rules, no allocation; for per-rank sums).
int64_t LocalNumelOnRank(const ParamInfo& param, const ParamPlacement& placement, const Mesh& mesh, int64_t rank);

// What an FSDP all-gather of `param` rebuilds on global `rank`: its model-parallel chunk, the dim
// of each FSDP (padded) step padded to num_chunks * ceil(n / num_chunks) rows (FSDP2 gathers
// every rank's padded shard); the model-parallel chunk itself when the placement has no FSDP step.
int64_t GatheredNumelOnRank(const ParamInfo& param, const ParamPlacement& placement, const Mesh& mesh, int64_t rank);

}  // namespace dockyard
