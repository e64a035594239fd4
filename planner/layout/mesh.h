// Device meshes over flat ranks, laid out row-major like torch's DeviceMesh (last axis fastest):
//   rank = sum_i coord[i] * stride[i], stride[last] = 1.
//
// torchtitan convention: dense (pp, dp_replicate, dp_shard, cp, tp) and sparse
// (pp, dp_replicate, efsdp, ep[, etp]) with efsdp = dp_shard*cp*tp / (ep*etp).
// Megatron-Core convention (order "tp-cp-ep-dp-pp", first = fastest): dense (pp, dp, cp, tp) and
// expert (pp, edp, ep[, etp]). For the same degrees both conventions give the same rank groups;
// they differ in names, in which etp values are allowed and in how data-parallel axes shard
// parameters (placement.h). The etp axis is present only when etp > 1.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "planner/layout/parallel_dims.h"

namespace dockyard {

// The standard mesh axis names (torchtitan ParallelDims, Megatron-Core process groups), one name
// table: MeshAxisName. kDp / kEdp are Megatron's flattened data-parallel axes.
enum class MeshAxis : uint8_t { kPp, kDpReplicate, kDpShard, kCp, kTp, kDp, kEfsdp, kEdp, kEp, kEtp };
const char* MeshAxisName(MeshAxis axis);
// The size of `axis` under `dims` (1 for an axis the convention does not have): the one rule
// BuildMeshes and the placement cuts read.
int64_t MeshAxisSize(const ParallelDims& dims, MeshAxis axis);

class Mesh {
 public:
  Mesh() = default;
  Mesh(std::string name, std::vector<std::string> axis_names, std::vector<int64_t> sizes);

  const std::string& name() const { return name_; }
  const std::vector<std::string>& axis_names() const { return axis_names_; }
  const std::vector<int64_t>& sizes() const { return sizes_; }
  int num_axes() const { return static_cast<int>(sizes_.size()); }
  int64_t size() const { return size_; }
  int64_t axis_size(int axis) const { return sizes_[axis]; }
  // Index of an axis by name, -1 when absent.
  int AxisIndex(std::string_view axis_name) const;
  int AxisIndex(MeshAxis axis) const { return AxisIndex(MeshAxisName(axis)); }

  // Coordinate of `rank` on `axis`.
  int64_t Coord(int64_t rank, int axis) const { return (rank / strides_[axis]) % sizes_[axis]; }
  std::vector<int64_t> Coords(int64_t rank) const;
  // The group of `rank` along `axis`: the ranks that differ from it only on that axis, in
  // increasing coordinate order.
  std::vector<int64_t> GroupOf(int64_t rank, int axis) const;
  // All groups along `axis`, ordered by their first rank (torch DeviceMesh order).
  std::vector<std::vector<int64_t>> Groups(int axis) const;

 private:
  std::string name_;
  std::vector<std::string> axis_names_;
  std::vector<int64_t> sizes_;
  std::vector<int64_t> strides_;
  int64_t size_ = 1;
};

struct Meshes {
  Mesh dense;   // attention, norms, embedding, dense MLPs, shared experts, router
  Mesh sparse;  // routed experts (torchtitan "sparse" mesh; Megatron "expert" mesh)
};

Meshes BuildMeshes(const ParallelDims& dims);

}  // namespace dockyard
