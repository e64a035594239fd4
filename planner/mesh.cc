// Device meshes over flat ranks (see mesh.h).
#include "planner/mesh.h"

#include <fmt/format.h>

#include "planner/error.h"

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

Meshes BuildMeshes(const ParallelDims& d) {
  Meshes m;
  const bool megatron = d.convention == Convention::kMegatron;
  if (megatron) {
    m.dense = Mesh("dense", {"pp", "dp", "cp", "tp"}, {d.pp, d.dp_replicate * d.dp_shard, d.cp, d.tp});
  } else {
    m.dense = Mesh("dense", {"pp", "dp_replicate", "dp_shard", "cp", "tp"}, {d.pp, d.dp_replicate, d.dp_shard, d.cp, d.tp});
  }
  std::vector<std::string> names = megatron ? std::vector<std::string>{"pp", "edp", "ep"}
                                            : std::vector<std::string>{"pp", "dp_replicate", "efsdp", "ep"};
  std::vector<int64_t> sizes = megatron ? std::vector<int64_t>{d.pp, d.edp(), d.ep}
                                        : std::vector<int64_t>{d.pp, d.dp_replicate, d.efsdp, d.ep};
  if (d.etp > 1) {
    names.push_back("etp");
    sizes.push_back(d.etp);
  }
  m.sparse = Mesh(megatron ? "expert" : "sparse", names, sizes);
  if (m.dense.size() != d.world_size || m.sparse.size() != d.world_size) {
    throw Error(fmt::format("internal: mesh sizes dense {} / sparse {} differ from world_size {}", m.dense.size(),
                            m.sparse.size(), d.world_size));
  }
  return m;
}

}  // namespace dockyard
