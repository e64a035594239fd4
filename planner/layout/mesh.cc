// Device meshes over flat ranks (see mesh.h).
#include "planner/layout/mesh.h"

#include <initializer_list>

#include <fmt/format.h>

#include "planner/base/error.h"

namespace dockyard {

Mesh::Mesh(std::string name, std::vector<std::string> axis_names, std::vector<int64_t> sizes)
    : name_(std::move(name)), axis_names_(std::move(axis_names)), sizes_(std::move(sizes)) {
  strides_.assign(sizes_.size(), 1);
  for (int i = static_cast<int>(sizes_.size()) - 2; i >= 0; --i) strides_[i] = strides_[i + 1] * sizes_[i + 1];
  for (int64_t s : sizes_) size_ *= s;
}

int Mesh::AxisIndex(std::string_view axis_name) const {
  for (int i = 0; i < num_axes(); ++i) {
    if (axis_names_[i] == axis_name) return i;
  }
  return -1;
}

std::vector<int64_t> Mesh::Coords(int64_t rank) const {
  std::vector<int64_t> out(sizes_.size());
  for (int i = 0; i < num_axes(); ++i) out[i] = Coord(rank, i);
  return out;
}

std::vector<int64_t> Mesh::GroupOf(int64_t rank, int axis) const {
  const int64_t base = rank - Coord(rank, axis) * strides_[axis];
  std::vector<int64_t> group(sizes_[axis]);
  for (int64_t c = 0; c < sizes_[axis]; ++c) group[c] = base + c * strides_[axis];
  return group;
}

std::vector<std::vector<int64_t>> Mesh::Groups(int axis) const {
  std::vector<std::vector<int64_t>> groups;
  groups.reserve(size_ / sizes_[axis]);
  for (int64_t r = 0; r < size_; ++r) {
    if (Coord(r, axis) == 0) groups.push_back(GroupOf(r, axis));
  }
  return groups;
}

const char* MeshAxisName(MeshAxis axis) {
  switch (axis) {
    case MeshAxis::kPp:
      return "pp";
    case MeshAxis::kDpReplicate:
      return "dp_replicate";
    case MeshAxis::kDpShard:
      return "dp_shard";
    case MeshAxis::kCp:
      return "cp";
    case MeshAxis::kTp:
      return "tp";
    case MeshAxis::kDp:
      return "dp";
    case MeshAxis::kEfsdp:
      return "efsdp";
    case MeshAxis::kEdp:
      return "edp";
    case MeshAxis::kEp:
      return "ep";
    case MeshAxis::kEtp:
      return "etp";
  }
  return "?";
}

int64_t MeshAxisSize(const ParallelDims& d, MeshAxis axis) {
  switch (axis) {
    case MeshAxis::kPp:
      return d.pp;
    case MeshAxis::kDpReplicate:
      return d.dp_replicate;
    case MeshAxis::kDpShard:
      return d.dp_shard;
    case MeshAxis::kCp:
      return d.cp;
    case MeshAxis::kTp:
      return d.tp;
    case MeshAxis::kDp:
      return d.dp_replicate * d.dp_shard;  // Megatron's data-parallel group
    case MeshAxis::kEfsdp:
      return d.efsdp;
    case MeshAxis::kEdp:
      return d.edp();
    case MeshAxis::kEp:
      return d.ep;
    case MeshAxis::kEtp:
      return d.etp;
  }
  return 1;
}

namespace {

Mesh MeshOf(const std::string& name, const ParallelDims& d, std::initializer_list<MeshAxis> axes) {
  std::vector<std::string> names;
  std::vector<int64_t> sizes;
  for (MeshAxis a : axes) {
    // The etp axis exists only when expert TP is on.
    if (a == MeshAxis::kEtp && d.etp == 1) continue;
    names.push_back(MeshAxisName(a));
    sizes.push_back(MeshAxisSize(d, a));
  }
  return Mesh(name, std::move(names), std::move(sizes));
}

}  // namespace

Meshes BuildMeshes(const ParallelDims& d) {
  Meshes m;
  using A = MeshAxis;
  if (d.convention == Convention::kMegatron) {
    m.dense = MeshOf("dense", d, {A::kPp, A::kDp, A::kCp, A::kTp});
    m.sparse = MeshOf("expert", d, {A::kPp, A::kEdp, A::kEp, A::kEtp});
  } else {
    m.dense = MeshOf("dense", d, {A::kPp, A::kDpReplicate, A::kDpShard, A::kCp, A::kTp});
    m.sparse = MeshOf("sparse", d, {A::kPp, A::kDpReplicate, A::kEfsdp, A::kEp, A::kEtp});
  }
  if (m.dense.size() != d.world_size || m.sparse.size() != d.world_size) {
    throw Error(
        fmt::format("internal: mesh sizes dense {} / sparse {} differ from world_size {}", m.dense.size(), m.sparse.size(), d.world_size));
  }
  return m;
}

}  // namespace dockyard
