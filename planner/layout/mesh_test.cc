// Meshes and rank groups derived by hand for small worlds (row-major, last axis fastest).
#include "planner/layout/mesh.h"

#include <doctest/doctest.h>

using dockyard::BuildMeshes;
using dockyard::Convention;
using dockyard::Mesh;
using dockyard::ParallelDims;
using dockyard::ParallelDimsOptions;
using Groups = std::vector<std::vector<int64_t>>;

TEST_CASE("Dense mesh of 16 ranks: pp 2 x dp_shard 2 x tp 4") {
  ParallelDimsOptions o;
  o.world_size = 16;
  o.pp = 2;
  o.tp = 4;
  auto m = BuildMeshes(ParallelDims::Build(o));
  // strides: pp 8, dp_replicate 8, dp_shard 4, cp 4, tp 1.
  const Mesh& d = m.dense;
  CHECK(d.axis_names() == std::vector<std::string>{"pp", "dp_replicate", "dp_shard", "cp", "tp"});
  CHECK(d.Groups(d.AxisIndex("tp")) == Groups{{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9, 10, 11}, {12, 13, 14, 15}});
  CHECK(d.Groups(d.AxisIndex("dp_shard")) == Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}, {8, 12}, {9, 13}, {10, 14}, {11, 15}});
  CHECK(d.Groups(d.AxisIndex("pp")) == Groups{{0, 8}, {1, 9}, {2, 10}, {3, 11}, {4, 12}, {5, 13}, {6, 14}, {7, 15}});
  // rank 13 = 1*8 + 1*4 + 1: pp 1, dp_shard 1, tp 1.
  CHECK(d.Coords(13) == std::vector<int64_t>{1, 0, 1, 0, 1});
}

TEST_CASE("Sparse mesh with ep 4, etp 1 borrows tp and dp_shard ranks") {
  ParallelDimsOptions o;
  o.world_size = 16;
  o.tp = 2;
  o.ep = 4;  // dp_shard 8, efsdp = 8*2/4 = 4
  auto m = BuildMeshes(ParallelDims::Build(o));
  const Mesh& s = m.sparse;
  CHECK(s.axis_names() == std::vector<std::string>{"pp", "dp_replicate", "efsdp", "ep"});
  CHECK(s.sizes() == std::vector<int64_t>{1, 1, 4, 4});
  // ep is the fastest axis: consecutive ranks; efsdp strides by 4.
  CHECK(s.Groups(s.AxisIndex("ep")) == Groups{{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9, 10, 11}, {12, 13, 14, 15}});
  CHECK(s.Groups(s.AxisIndex("efsdp")) == Groups{{0, 4, 8, 12}, {1, 5, 9, 13}, {2, 6, 10, 14}, {3, 7, 11, 15}});
}

TEST_CASE("Sparse mesh with etp = tp keeps the TP groups as etp groups") {
  ParallelDimsOptions o;
  o.world_size = 16;
  o.tp = 2;
  o.ep = 4;
  o.etp = 2;  // efsdp = 8*2 / (4*2) = 2
  o.convention = Convention::kTorchtitan2026_03;  // etp = tp: torchtitan before PR #3167
  auto m = BuildMeshes(ParallelDims::Build(o));
  const Mesh& s = m.sparse;
  CHECK(s.sizes() == std::vector<int64_t>{1, 1, 2, 4, 2});
  CHECK(s.Groups(s.AxisIndex("etp")) == m.dense.Groups(m.dense.AxisIndex("tp")));
  // ep strides by etp = 2: {0,2,4,6}, {1,3,5,7}, {8,...}, ...
  CHECK(s.Groups(s.AxisIndex("ep"))[0] == std::vector<int64_t>{0, 2, 4, 6});
  CHECK(s.Groups(s.AxisIndex("ep"))[1] == std::vector<int64_t>{1, 3, 5, 7});
  CHECK(s.Groups(s.AxisIndex("efsdp"))[0] == std::vector<int64_t>{0, 8});
}

TEST_CASE("HSDP: dp_replicate is outer to dp_shard") {
  ParallelDimsOptions o;
  o.world_size = 8;
  o.dp_replicate = 2;
  o.ep = 2;  // dp_shard 4, efsdp 2
  auto m = BuildMeshes(ParallelDims::Build(o));
  const Mesh& d = m.dense;
  CHECK(d.Groups(d.AxisIndex("dp_replicate")) == Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}});
  CHECK(d.Groups(d.AxisIndex("dp_shard")) == Groups{{0, 1, 2, 3}, {4, 5, 6, 7}});
  const Mesh& s = m.sparse;
  CHECK(s.Groups(s.AxisIndex("ep")) == Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}});
  CHECK(s.Groups(s.AxisIndex("efsdp")) == Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}});
}

TEST_CASE("Megatron convention: tp-cp-ep-dp-pp order gives the groups Megatron-Core builds") {
  // Megatron-Core, world 16, tp 2, cp 2, pp 2 -> dp 2. Order tp-cp-ep-dp-pp, tp fastest:
  //   tp groups {0,1},{2,3},...; cp groups {0,2},{1,3},{4,6},...; dp groups {0,4},{1,5},{2,6},{3,7},{8,12},...;
  //   pp groups {0,8},{1,9},...
  // Expert side with ep 2, etp 1: edp = 16 / (1*2*2) = 4; order etp-ep-edp-pp: ep groups {0,1},{2,3},...
  ParallelDimsOptions o;
  o.world_size = 16;
  o.tp = 2;
  o.cp = 2;
  o.pp = 2;
  o.ep = 2;
  o.etp = 1;  // given: left unset, Megatron-LM's default would be etp = tp = 2 (arguments.py)
  o.convention = Convention::kMegatron;
  auto m = BuildMeshes(ParallelDims::Build(o));
  const Mesh& d = m.dense;
  CHECK(d.axis_names() == std::vector<std::string>{"pp", "dp", "cp", "tp"});
  CHECK(d.Groups(d.AxisIndex("tp"))[1] == std::vector<int64_t>{2, 3});
  CHECK(d.Groups(d.AxisIndex("cp"))[1] == std::vector<int64_t>{1, 3});
  CHECK(d.Groups(d.AxisIndex("cp"))[2] == std::vector<int64_t>{4, 6});
  CHECK(d.Groups(d.AxisIndex("dp")) == Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}, {8, 12}, {9, 13}, {10, 14}, {11, 15}});
  CHECK(d.Groups(d.AxisIndex("pp"))[0] == std::vector<int64_t>{0, 8});
  const Mesh& e = m.sparse;
  CHECK(e.name() == "expert");
  CHECK(e.axis_names() == std::vector<std::string>{"pp", "edp", "ep"});
  CHECK(e.Groups(e.AxisIndex("ep"))[1] == std::vector<int64_t>{2, 3});
  // edp groups: stride 2 within a stage: {0,2,4,6}, {1,3,5,7}, {8,10,12,14}, ...
  CHECK(e.Groups(e.AxisIndex("edp")) == Groups{{0, 2, 4, 6}, {1, 3, 5, 7}, {8, 10, 12, 14}, {9, 11, 13, 15}});
}

TEST_CASE("Both conventions build the same groups for the same degrees") {
  ParallelDimsOptions o;
  o.world_size = 32;
  o.tp = 2;
  o.pp = 2;
  o.ep = 4;
  o.etp = 1;  // both: megatron's default would be etp = tp (arguments.py), torchtitan's 1
  auto tt = BuildMeshes(ParallelDims::Build(o));
  o.convention = Convention::kMegatron;
  auto mg = BuildMeshes(ParallelDims::Build(o));
  CHECK(tt.dense.Groups(tt.dense.AxisIndex("tp")) == mg.dense.Groups(mg.dense.AxisIndex("tp")));
  CHECK(tt.dense.Groups(tt.dense.AxisIndex("dp_shard")) == mg.dense.Groups(mg.dense.AxisIndex("dp")));
  CHECK(tt.sparse.Groups(tt.sparse.AxisIndex("ep")) == mg.sparse.Groups(mg.sparse.AxisIndex("ep")));
  CHECK(tt.sparse.Groups(tt.sparse.AxisIndex("efsdp")) == mg.sparse.Groups(mg.sparse.AxisIndex("edp")));
}

TEST_CASE("GroupOf agrees with Groups for every rank") {
  Mesh mesh("m", {"a", "b", "c"}, {3, 2, 5});
  for (int axis = 0; axis < 3; ++axis) {
    for (const auto& g : mesh.Groups(axis)) {
      for (int64_t r : g) CHECK(mesh.GroupOf(r, axis) == g);
    }
  }
  CHECK(mesh.Groups(1).size() == 15u);  // 30 ranks / 2
}
