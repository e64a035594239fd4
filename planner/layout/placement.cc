// Placement policy and local shapes (see placement.h).
#include "planner/layout/placement.h"

#include <algorithm>
#include <initializer_list>
#include <map>

#include <fmt/format.h>

#include "planner/base/checked_math.h"
#include "planner/base/error.h"

namespace dockyard {

std::string Placement::ToString() const {
  switch (kind) {
    case Kind::kShard:
      return fmt::format("Shard({})", dim);
    case Kind::kPartial:
      return "Partial()";
    case Kind::kReplicate:
      break;
  }
  return "Replicate()";
}

int64_t ChunkSize(int64_t n, int64_t k, int64_t index) {
  const int64_t c = (n + k - 1) / k;
  return std::clamp<int64_t>(n - index * c, 0, c);
}

int64_t ChunkBegin(int64_t n, int64_t k, int64_t index) {
  return std::min(n, index * ((n + k - 1) / k));
}

std::vector<DimSlice> ModelParallelSliceOnRank(const ParamInfo& p, const ParamPlacement& pl, const Mesh& mesh, int64_t rank) {
  std::vector<DimSlice> out;
  for (int64_t size : p.shape) out.push_back({0, size});
  for (const ShardStep& s : pl.steps) {
    if (s.kind == ShardKind::kData) continue;
    int64_t index = 0;
    for (int a : s.axes) index = index * mesh.axis_size(a) + mesh.Coord(rank, a);
    DimSlice& d = out[static_cast<size_t>(s.dim)];
    d.begin += ChunkBegin(d.size, s.num_chunks, index);
    d.size = ChunkSize(d.size, s.num_chunks, index);
  }
  return out;
}

ForwardShards ForwardShardsOnRank(const ParamInfo& p, const ParamPlacement& pl, const Mesh& mesh, int64_t rank) {
  ForwardShards out;
  if (!p.fused_sections.empty() && p.tp_dim >= 0) {
    // Fused gate | up: TP shards each section alike, so the runtime slices one section.
    for (int64_t s : p.fused_sections) {
      if (s != p.fused_sections.front()) {
        throw Error(fmt::format("{}: fused sections of different sizes are not supported by the runtime", p.fqn));
      }
    }
    ParamInfo section = p;
    section.shape[static_cast<size_t>(p.tp_dim)] = p.fused_sections.front();
    out.slices = ModelParallelSliceOnRank(section, pl, mesh, rank);
  } else {
    out.slices = ModelParallelSliceOnRank(p, pl, mesh, rank);
  }
  for (const ShardStep& step : pl.steps) {
    if (step.kind == ShardKind::kData) continue;  // FSDP: all-gathered before the forward
    if (step.axes.size() != 1) {
      throw Error(fmt::format("{}: a TP or EP shard step over several mesh axes is not supported by the runtime", p.fqn));
    }
    (step.kind == ShardKind::kTensor ? out.tp_axis : out.ep_axis) = step.axes.front();
  }
  return out;
}

std::vector<DimSlice> ForwardSliceOnRank(const ParamInfo& param, const ParamPlacement& placement, const Mesh& mesh, int64_t rank) {
  return ForwardShardsOnRank(param, placement, mesh, rank).slices;
}

int64_t StepChunkSize(int64_t n, const ShardStep& step, int64_t index) {
  return step.kind == ShardKind::kData ? (n + step.num_chunks - 1) / step.num_chunks : ChunkSize(n, step.num_chunks, index);
}

UnevenFsdpCut FindUnevenFsdpCut(const std::vector<int64_t>& shape, const ShardCuts& cuts) {
  UnevenFsdpCut out;
  for (int i = 0; i < cuts.size; ++i) {
    const ShardCut& c = cuts.cuts[i];
    if (!c.data_parallel() || c.dim == 0 || c.dim >= static_cast<int>(shape.size())) continue;
    int64_t n = shape[c.dim];
    for (int j = 0; j < i; ++j) {
      if (cuts.cuts[j].dim == c.dim) n = (n + cuts.cuts[j].num_chunks - 1) / cuts.cuts[j].num_chunks;
    }
    if (n % c.num_chunks != 0) {
      out.cut = i;
      out.size = n;
      return out;
    }
  }
  return out;
}

std::string UnevenFsdpMessage(const std::string& fqn, const ShardCut& cut, int64_t size) {
  std::string axes;
  for (int j = 0; j < cut.num_axes; ++j) axes += (j ? "*" : "") + std::string(MeshAxisName(cut.axes[j]));
  return fmt::format(
      "{}: FSDP2 does not support uneven sharding on dim {}: size {} over {} ({}) (torch fully_shard "
      "shards dims other than 0 only when the FSDP degree divides them)",
      fqn, cut.dim, size, axes, cut.num_chunks);
}

ShardCuts ShardCutsOf(bool routed_expert, int tp_dim, const ParallelDims& d, int64_t num_experts, bool shard_data_parallel) {
  ShardCuts out;
  auto add = [&](int dim, std::initializer_list<MeshAxis> axes, ShardKind kind) {
    ShardCut c;
    c.dim = dim;
    c.kind = kind;
    for (MeshAxis a : axes) {
      const int64_t n = MeshAxisSize(d, a);
      if (n == 1) continue;
      c.axes[c.num_axes++] = a;
      c.num_chunks *= n;
    }
    if (c.num_chunks > 1) out.cuts[out.size++] = c;
  };
  const bool megatron = d.convention == Convention::kMegatron;
  // Megatron-Core always places routed experts on its expert mesh (etp x ep x edp), even with
  // ep == 1; torchtitan uses the sparse mesh only when EP is on.
  out.sparse_mesh = routed_expert && (d.ep > 1 || megatron);
  if (out.sparse_mesh) {
#ifdef DOCKYARD_CHANGE_TEST_NO_EXPERT_TP_CUT
    // planner/search/change_test.cc builds the planner with this one rule altered (routed experts not
    // cut by etp) and checks that plan, memory, simulate and search all follow.
    constexpr bool kExpertTpCut = false;
#else
    constexpr bool kExpertTpCut = true;
#endif
    if (tp_dim >= 0 && kExpertTpCut) add(tp_dim, {MeshAxis::kEtp}, ShardKind::kTensor);
    add(0, {MeshAxis::kEp}, ShardKind::kExpert);
    if (shard_data_parallel) {
      // torchtitan apply_fsdp: Shard(1) when efsdp * ep > num_experts (dim 0 would run out).
      const int fsdp_dim = d.efsdp * d.ep > num_experts ? 1 : 0;
      add(fsdp_dim, {megatron ? MeshAxis::kEdp : MeshAxis::kEfsdp}, ShardKind::kData);
    }
    return out;
  }
  if (tp_dim >= 0) add(tp_dim, {MeshAxis::kTp}, ShardKind::kTensor);
  if (shard_data_parallel) {
    const int fsdp_dim = routed_expert && d.dp_shard * d.cp > num_experts ? 1 : 0;
    add(fsdp_dim, {megatron ? MeshAxis::kDp : MeshAxis::kDpShard, MeshAxis::kCp}, ShardKind::kData);
  }
  return out;
}

ParamPlacement PlaceParam(const ParamInfo& p, const ParallelDims& d, const Meshes& meshes, int64_t num_experts, bool shard_data_parallel) {
  const ShardCuts cuts = ShardCutsOf(p.routed_expert, p.tp_dim, d, num_experts, shard_data_parallel);
  ParamPlacement out;
  out.sparse_mesh = cuts.sparse_mesh;
  const Mesh& mesh = out.sparse_mesh ? meshes.sparse : meshes.dense;
  out.placements.assign(mesh.num_axes() - 1, Placement::Replicate());
  for (int i = 0; i < cuts.size; ++i) {
    const ShardCut& c = cuts.cuts[i];
    ShardStep step;
    step.dim = c.dim;
    step.num_chunks = c.num_chunks;
    step.kind = c.kind;
    for (int j = 0; j < c.num_axes; ++j) {
      const int axis = mesh.AxisIndex(c.axes[j]);
      if (axis < 1) {
        throw Error(fmt::format("internal: mesh '{}' has no axis '{}' for {}", mesh.name(), MeshAxisName(c.axes[j]), p.fqn));
      }
      out.placements[axis - 1] = Placement::Shard(c.dim);
      step.axes.push_back(axis);
    }
    out.steps.push_back(std::move(step));
  }
  return out;
}

namespace {

// Distinct chunk sizes (size -> number of chunk-index combinations) of `n` cut by `ks` in order.
// `padded[i]`: cut i is an FSDP2 step (every chunk ceil(n / k)).
std::map<int64_t, int64_t> DistinctSizes(int64_t n, const std::vector<int64_t>& ks, const std::vector<bool>& padded, size_t i = 0) {
  if (i == ks.size()) return {{n, 1}};
  const int64_t k = ks[i];
  if (padded[i]) {
    std::map<int64_t, int64_t> out;
    for (const auto& [sub, sub_times] : DistinctSizes((n + k - 1) / k, ks, padded, i + 1)) out[sub] += k * sub_times;
    return out;
  }
  // Chunk sizes take at most three values: c (full), one partial r, and 0.
  std::map<int64_t, int64_t> counts;
  const int64_t c = (n + k - 1) / k;
  const int64_t full = c == 0 ? 0 : n / c;
  const int64_t rem = c == 0 ? 0 : n - full * c;
  if (full > 0) counts[c] += std::min(full, k);
  if (rem > 0 && full < k) counts[rem] += 1;
  const int64_t used = std::min(full, k) + ((rem > 0 && full < k) ? 1 : 0);
  if (k - used > 0) counts[0] += k - used;
  std::map<int64_t, int64_t> out;
  for (const auto& [size, times] : counts) {
    for (const auto& [sub, sub_times] : DistinctSizes(size, ks, padded, i + 1)) out[sub] += times * sub_times;
  }
  return out;
}

}  // namespace

void ComputeLocalShapes(const ParamInfo& p, const Mesh& mesh, ParamPlacement& pl) {
  const int64_t stage_ranks = mesh.size() / mesh.axis_size(0);
  // Per dim: the distinct sizes with the number of shard-index combinations producing them.
  std::vector<std::map<int64_t, int64_t>> per_dim(p.shape.size());
  int64_t sharded_ranks = 1;
  for (size_t dim = 0; dim < p.shape.size(); ++dim) {
    std::vector<int64_t> ks;
    std::vector<bool> padded;
    for (const auto& s : pl.steps) {
      if (s.dim == static_cast<int>(dim)) {
        ks.push_back(s.num_chunks);
        padded.push_back(s.kind == ShardKind::kData);
      }
    }
    per_dim[dim] = DistinctSizes(p.shape[dim], ks, padded);
  }
  for (const auto& s : pl.steps) sharded_ranks *= s.num_chunks;
  const int64_t replicas = stage_ranks / sharded_ranks;
  // Cross product over dims.
  std::vector<LocalShape> shapes = {{{}, replicas}};
  for (const auto& sizes : per_dim) {
    std::vector<LocalShape> next;
    for (const auto& base : shapes) {
      for (const auto& [size, times] : sizes) {
        LocalShape s = base;
        s.shape.push_back(size);
        s.num_ranks *= times;
        next.push_back(std::move(s));
      }
    }
    shapes = std::move(next);
  }
  auto numel = [](const std::vector<int64_t>& shape) {
    int64_t n = 1;
    for (int64_t v : shape) n *= v;
    return n;
  };
  std::stable_sort(shapes.begin(), shapes.end(), [&](const LocalShape& a, const LocalShape& b) { return numel(a.shape) > numel(b.shape); });
  pl.local_shapes = std::move(shapes);
  pl.max_local_numel = pl.local_shapes.empty() ? 0 : numel(pl.local_shapes.front().shape);
}

std::vector<int64_t> LocalShapeOnRank(const ParamInfo& p, const ParamPlacement& pl, const Mesh& mesh, int64_t rank) {
  if (mesh.Coord(rank, 0) != pl.stage) {
    throw Error(fmt::format("rank {} is on pp stage {}, but {} lives on stage {}", rank, mesh.Coord(rank, 0), p.fqn, pl.stage));
  }
  std::vector<int64_t> shape = p.shape;
  for (const auto& s : pl.steps) {
    int64_t index = 0;
    for (int a : s.axes) index = index * mesh.axis_size(a) + mesh.Coord(rank, a);
    shape[s.dim] = StepChunkSize(shape[s.dim], s, index);
  }
  return shape;
}

int64_t LocalNumelOnRank(const ParamInfo& p, const ParamPlacement& pl, const Mesh& mesh, int64_t rank) {
  constexpr size_t kMaxRank = 8;
  if (p.shape.size() > kMaxRank) {
    int64_t n = 1;
    for (int64_t v : LocalShapeOnRank(p, pl, mesh, rank)) n *= v;
    return n;
  }
  int64_t shape[kMaxRank];
  for (size_t i = 0; i < p.shape.size(); ++i) shape[i] = p.shape[i];
  for (const auto& s : pl.steps) {
    int64_t index = 0;
    for (int a : s.axes) index = index * mesh.axis_size(a) + mesh.Coord(rank, a);
    shape[s.dim] = StepChunkSize(shape[s.dim], s, index);
  }
  // Local sizes never exceed the global ones, whose product was checked in BuildInventory.
  int64_t n = 1;
  for (size_t i = 0; i < p.shape.size(); ++i) n *= shape[i];
  return n;
}

int64_t GatheredNumelOnRank(const ParamInfo& p, const ParamPlacement& pl, const Mesh& mesh, int64_t rank) {
  std::vector<int64_t> shape = p.shape;
  for (const auto& s : pl.steps) {
    if (s.kind == ShardKind::kData) {
      shape[s.dim] = (shape[s.dim] + s.num_chunks - 1) / s.num_chunks * s.num_chunks;
      continue;
    }
    int64_t index = 0;
    for (int a : s.axes) index = index * mesh.axis_size(a) + mesh.Coord(rank, a);
    shape[s.dim] = ChunkSize(shape[s.dim], s.num_chunks, index);
  }
  // Each padded dim is below n + num_chunks <= 2n; the product is checked all the same.
  int64_t n = 1;
  for (int64_t v : shape) n = CheckedMul(n, v, p.fqn);
  return n;
}

}  // namespace dockyard
