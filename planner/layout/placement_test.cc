// Placements per role and stored layout, torchtitan's Shard(1) rule, torch.chunk local shapes.
#include "planner/layout/placement.h"

#include <doctest/doctest.h>

#include "planner/base/error.h"
#include "planner/layout/plan.h"
#include "tests/test_models.h"

using dockyard::BuildPlan;
using dockyard::ParallelDimsOptions;
using dockyard::Plan;

namespace {

// Placement strings and largest local shape of the first parameter whose FQN ends with `suffix`.
struct Found {
  std::string mesh;
  std::vector<std::string> placements;
  std::vector<int64_t> local;
  size_t num_shapes = 0;
};

Found Find(const Plan& plan, const std::string& suffix) {
  for (size_t i = 0; i < plan.inventory.params.size(); ++i) {
    const auto& fqn = plan.inventory.params[i].fqn;
    if (fqn.size() >= suffix.size() && fqn.compare(fqn.size() - suffix.size(), suffix.size(), suffix) == 0) {
      Found f;
      f.mesh = plan.placements[i].sparse_mesh ? "sparse" : "dense";
      for (const auto& p : plan.placements[i].placements) f.placements.push_back(p.ToString());
      f.local = plan.placements[i].local_shapes.front().shape;
      f.num_shapes = plan.placements[i].local_shapes.size();
      return f;
    }
  }
  FAIL("no parameter ends with " << suffix);
  return {};
}

ParallelDimsOptions Dims(int64_t world, int64_t tp = 1, int64_t ep = 1, int64_t etp = 1) {
  ParallelDimsOptions o;
  o.world_size = world;
  o.tp = tp;
  o.ep = ep;
  o.etp = etp;
  // ep < tp and etp = tp: torchtitan before PR #3167 / #4794 (torchtitan as it is refuses them).
  o.convention = dockyard::Convention::kTorchtitan2026_03;
  return o;
}

using S = std::vector<std::string>;
using V = std::vector<int64_t>;

}  // namespace

TEST_CASE("ChunkSize follows torch.chunk") {
  // 5 split into 4: chunk size ceil(5/4) = 2 -> 2, 2, 1, 0.
  CHECK(dockyard::ChunkSize(5, 4, 0) == 2);
  CHECK(dockyard::ChunkSize(5, 4, 2) == 1);
  CHECK(dockyard::ChunkSize(5, 4, 3) == 0);
  // 1000 split into 3: 334, 334, 332.
  CHECK(dockyard::ChunkSize(1000, 3, 2) == 332);
}

TEST_CASE("Routed experts with EP on: Shard(0) on ep and on efsdp") {
  // Tiny Mixtral, world 8, ep 4: dp_shard 8, efsdp = 8/4 = 2; efsdp*ep = 8 = num_experts -> Shard(0).
  Plan plan = BuildPlan(dockyard::testing::TinyMixtral(), Dims(8, 1, 4));
  Found f = Find(plan, "layers.0.mlp.experts.gate_up_proj");
  CHECK(f.mesh == "sparse");
  CHECK(f.placements == S{"Replicate()", "Shard(0)", "Shard(0)"});  // dp_replicate, efsdp, ep
  CHECK(f.local == V{1, 64, 64});                                   // 8 experts / ep 4 = 2, / efsdp 2 = 1; [E, 2F=64, D=64]
}

TEST_CASE("Routed experts switch FSDP to Shard(1) when efsdp * ep > num_experts (torchtitan)") {
  // world 16, ep 4: efsdp = 4, efsdp*ep = 16 > 8 experts.
  Plan plan = BuildPlan(dockyard::testing::TinyMixtral(), Dims(16, 1, 4));
  Found up = Find(plan, "layers.0.mlp.experts.gate_up_proj");
  CHECK(up.placements == S{"Replicate()", "Shard(1)", "Shard(0)"});
  CHECK(up.local == V{2, 16, 64});  // 8/4 = 2 experts; 2F = 64 / 4 = 16
  Found down = Find(plan, "layers.0.mlp.experts.down_proj");
  CHECK(down.local == V{2, 16, 32});  // [E, D=64, F=32]: D 64 / 4 = 16
}

TEST_CASE("Routed experts with EP off are TP-sharded: gate_up colwise, down rowwise") {
  // world 2, tp 2, ep 1. Layout [E, 2F, D]: colwise shards dim 1; down [E, D, F]: rowwise shards dim 2.
  Plan plan = BuildPlan(dockyard::testing::TinyMixtral(), Dims(2, 2));
  Found up = Find(plan, "layers.0.mlp.experts.gate_up_proj");
  CHECK(up.mesh == "dense");
  CHECK(up.placements == S{"Replicate()", "Replicate()", "Replicate()", "Shard(1)"});  // dp_replicate, dp_shard, cp, tp
  CHECK(up.local == V{8, 32, 64});
  Found down = Find(plan, "layers.0.mlp.experts.down_proj");
  CHECK(down.placements == S{"Replicate()", "Replicate()", "Replicate()", "Shard(2)"});
  CHECK(down.local == V{8, 64, 16});
}

TEST_CASE("Routed experts with ETP are sharded on ep and etp") {
  // world 8, tp 2, ep 2, etp 2: dp_shard 4, efsdp = 4*2/(2*2) = 2; efsdp*ep = 4 <= 8 -> Shard(0).
  auto m = dockyard::testing::TinyMixtral();
  Plan plan = BuildPlan(m, Dims(8, 2, 2, 2));
  Found up = Find(plan, "layers.1.mlp.experts.gate_up_proj");
  CHECK(up.placements == S{"Replicate()", "Shard(0)", "Shard(0)", "Shard(1)"});  // dp_replicate, efsdp, ep, etp
  CHECK(up.local == V{2, 32, 64});                                               // 8/2/2 experts; 2F 64 / etp 2
  Found down = Find(plan, "layers.1.mlp.experts.down_proj");
  CHECK(down.placements == S{"Replicate()", "Shard(0)", "Shard(0)", "Shard(2)"});
  CHECK(down.local == V{2, 64, 16});
}

TEST_CASE("Attention, norms, router and embeddings follow the dense TP plan") {
  Plan plan = BuildPlan(dockyard::testing::TinyMixtral(), Dims(2, 2));
  CHECK(Find(plan, "layers.0.self_attn.q_proj.weight").placements.back() == "Shard(0)");  // colwise
  CHECK(Find(plan, "layers.0.self_attn.q_proj.weight").local == V{32, 64});
  CHECK(Find(plan, "layers.0.self_attn.k_proj.weight").local == V{16, 64});               // [2*16, 64] / 2
  CHECK(Find(plan, "layers.0.self_attn.o_proj.weight").placements.back() == "Shard(1)");  // rowwise
  CHECK(Find(plan, "layers.0.self_attn.o_proj.weight").local == V{64, 32});
  CHECK(Find(plan, "layers.0.input_layernorm.weight").placements.back() == "Replicate()");
  CHECK(Find(plan, "layers.0.mlp.gate.weight").placements.back() == "Replicate()");  // router gate
  CHECK(Find(plan, "model.embed_tokens.weight").placements.back() == "Shard(0)");    // vocab-parallel
  CHECK(Find(plan, "model.embed_tokens.weight").local == V{500, 64});
  CHECK(Find(plan, "lm_head.weight").local == V{500, 64});
}

TEST_CASE("FSDP2 shards dense parameters over dp_shard into equal padded chunks") {
  // world 3, dp_shard 3: embedding [1000, 64]. torch.chunk would give 334, 334, 332 rows; FSDP2
  // (torch fully_shard) pads every shard to ceil(1000 / 3) = 334 rows, so all 3 ranks hold 334.
  Plan plan = BuildPlan(dockyard::testing::TinyMixtral(), Dims(3));
  bool seen = false;
  for (size_t i = 0; i < plan.inventory.params.size(); ++i) {
    if (plan.inventory.params[i].fqn != "model.embed_tokens.weight") continue;
    seen = true;
    const auto& shapes = plan.placements[i].local_shapes;
    REQUIRE(shapes.size() == 1);
    CHECK(shapes[0].shape == V{334, 64});
    CHECK(shapes[0].num_ranks == 3);
    CHECK(dockyard::LocalShapeOnRank(plan.inventory.params[i], plan.placements[i], plan.meshes.dense, 2) == V{334, 64});
    // The all-gather output: 3 padded shards of 334 rows = 1002 rows x 64 = 64128 elements.
    CHECK(dockyard::GatheredNumelOnRank(plan.inventory.params[i], plan.placements[i], plan.meshes.dense, 2) == 64128);
    CHECK(dockyard::ModelParallelNumel(plan, i, 0) == 64128);
  }
  CHECK(seen);
  // Router [8, 64] over 3: ceil(8/3) = 3 rows on every rank (torch.chunk: 3, 3, 2).
  CHECK(Find(plan, "layers.0.mlp.gate.weight").local == V{3, 64});
  CHECK(Find(plan, "layers.0.mlp.gate.weight").num_shapes == 1);
}

TEST_CASE("FSDP2 pads routed experts on dim 0: 48 experts over 32 ranks are 2 on every rank (verl PR #6974)") {
  // ep 1, world 32: experts on the dense mesh, FSDP over dp_shard 32 <= 48 experts -> Shard(0).
  // torch.chunk: 24 chunks of 2 experts and 8 empty ones; FSDP2: ceil(48/32) = 2 on all 32 ranks.
  auto m = dockyard::testing::TinyMixtral();
  m.moe.num_experts = 48;
  Plan plan = BuildPlan(m, Dims(32));
  for (size_t i = 0; i < plan.inventory.params.size(); ++i) {
    if (plan.inventory.params[i].fqn != "model.layers.0.mlp.experts.gate_up_proj") continue;
    const auto& pl = plan.placements[i];
    REQUIRE(pl.local_shapes.size() == 1);
    CHECK(pl.local_shapes[0].shape == V{2, 64, 64});
    CHECK(pl.local_shapes[0].num_ranks == 32);
    CHECK(dockyard::LocalNumelOnRank(plan.inventory.params[i], pl, plan.meshes.dense, 31) == 2 * 64 * 64);
    // All-gathered: 32 x 2 = 64 expert slots of 64 x 64 (48 real + 16 padding) = 262144 elements,
    // not 48 x 4096 = 196608.
    CHECK(dockyard::ModelParallelNumel(plan, i, 0) == 262144);
  }
}

TEST_CASE("FSDP2 shards routed experts on dim 1 when it divides, with no padding") {
  // ep 1, world 16 > 8 experts -> Shard(1): gate_up [8, 2F = 64, 64], 64 / 16 = 4 on every rank.
  Plan plan = BuildPlan(dockyard::testing::TinyMixtral(), Dims(16));
  Found up = Find(plan, "layers.0.mlp.experts.gate_up_proj");
  CHECK(up.local == V{8, 4, 64});
  CHECK(up.num_shapes == 1);
}

TEST_CASE("BuildPlan rejects an uneven FSDP2 cut of dim 1, naming the tensor, dim, size and degree") {
  // ep 1, world 16 > 8 experts -> Shard(1) over dp_shard 16; moe_intermediate_size 20 makes
  // gate_up [8, 40, 64]: 40 % 16 = 8, which FSDP2 refuses ("FSDP does not support uneven
  // sharding on dim 1").
  auto m = dockyard::testing::TinyMixtral();
  m.moe.moe_intermediate_size = 20;
  CHECK_THROWS_WITH_AS(BuildPlan(m, Dims(16)),
                       "model.layers.0.mlp.experts.gate_up_proj: FSDP2 does not support uneven sharding on dim 1: size 40 "
                       "over dp_shard (16) (torch fully_shard shards dims other than 0 only when the FSDP degree divides "
                       "them)",
                       dockyard::Error);
  // The same model without FSDP (ZeRO-1) has no FSDP cut and plans.
  dockyard::TrainingConfig t;
  t.dp_sharding = dockyard::DpSharding::kZero1;
  CHECK_NOTHROW(BuildPlan(m, Dims(16), t));
}

TEST_CASE("Nested shards: an empty chunk appears when a dim runs out") {
  // [5] cut by 4 (torch.chunk: 2, 2, 1, 0) -> three distinct shapes.
  dockyard::ParamInfo p;
  p.fqn = "x";
  p.shape = {5};
  dockyard::Mesh mesh("m", {"pp", "a"}, {1, 4});
  dockyard::ParamPlacement pl;
  pl.steps.push_back({0, {1}, 4});
  dockyard::ComputeLocalShapes(p, mesh, pl);
  REQUIRE(pl.local_shapes.size() == 3);
  CHECK(pl.local_shapes[0].shape == V{2});
  CHECK(pl.local_shapes[0].num_ranks == 2);
  CHECK(pl.local_shapes[2].shape == V{0});
  CHECK(pl.max_local_numel == 2);
}

TEST_CASE("Stored layout decides the TP dim: gpt-oss [E, D, 2F] is Shard(2), its down [E, F, D] Shard(1)") {
  auto m = dockyard::testing::TinyMixtral();
  m.family = "gpt_oss";
  m.attention.sinks = true;
  m.moe.expert_bias = true;
  m.moe.router_bias = true;
  Plan plan = BuildPlan(m, Dims(2, 2));
  CHECK(Find(plan, "experts.gate_up_proj").placements.back() == "Shard(2)");
  CHECK(Find(plan, "experts.gate_up_proj").local == V{8, 64, 32});
  CHECK(Find(plan, "experts.down_proj").placements.back() == "Shard(1)");
  CHECK(Find(plan, "experts.gate_up_proj_bias").local == V{8, 32});                // [E, 2F] colwise bias
  CHECK(Find(plan, "experts.down_proj_bias").placements.back() == "Replicate()");  // added after the reduce
  CHECK(Find(plan, "self_attn.sinks").local == V{2});                              // one sink per head, heads split
}

TEST_CASE("DBRX stores w2 as [E*F, D]: its [E, F, D] view is row-sharded on dim 1") {
  auto m = dockyard::testing::TinyMixtral();
  m.family = "dbrx";
  m.attention.fused_qkv = true;
  Plan plan = BuildPlan(m, Dims(2, 2));
  CHECK(Find(plan, "experts.mlp.w1").placements.back() == "Shard(1)");
  CHECK(Find(plan, "experts.mlp.w2").placements.back() == "Shard(1)");
  CHECK(Find(plan, "experts.mlp.w2").local == V{8, 16, 64});
  CHECK(Find(plan, "attn.Wqkv.weight").local == V{64, 64});  // [(4 + 2*2) * 16, 64] / 2
}

TEST_CASE("Megatron convention keeps parameters replicated on data-parallel axes") {
  ParallelDimsOptions o = Dims(8, 1, 4);
  o.convention = dockyard::Convention::kMegatron;
  Plan plan = BuildPlan(dockyard::testing::TinyMixtral(), o);
  Found up = Find(plan, "layers.0.mlp.experts.gate_up_proj");
  CHECK(up.mesh == "sparse");
  CHECK(up.placements == S{"Replicate()", "Shard(0)"});  // edp, ep
  CHECK(up.local == V{2, 64, 64});
  CHECK(Find(plan, "model.embed_tokens.weight").placements == S{"Replicate()", "Replicate()", "Replicate()"});
}

namespace {

// TinyMixtral on 4 ranks, tp 2, ep 2 (torchtitan): dense mesh (pp, dp_replicate, dp_shard 2, cp, tp 2),
// sparse mesh (pp, dp_replicate, efsdp 2, ep 2) with efsdp = dp_shard * tp / ep = 2.
Plan TinyMixtralTp2Ep2() {
  dockyard::ParallelDimsOptions o;
  o.world_size = 4;
  o.tp = 2;
  o.ep = 2;
  return dockyard::BuildPlan(dockyard::testing::TinyMixtral(), o);
}

}  // namespace

TEST_CASE("ModelParallelSliceOnRank: the forward ranges after TP and EP, FSDP left out") {
  const auto plan = TinyMixtralTp2Ep2();
  int found = 0;
  for (size_t i = 0; i < plan.inventory.params.size(); ++i) {
    const auto& p = plan.inventory.params[i];
    const auto& pl = plan.placements[i];
    if (p.fqn == "model.layers.0.mlp.experts.gate_up_proj") {
      ++found;
      // [8, 64, 64]: ep cuts dim 0 into 2 chunks of 4, FSDP (efsdp 2) cuts it again; rank 3 has
      // ep coordinate 1 (ep is the fastest axis) -> experts [4, 8), all of dims 1 and 2.
      const auto s = dockyard::ModelParallelSliceOnRank(p, pl, plan.MeshOf(i), 3);
      CHECK(s[0].begin == 4);
      CHECK(s[0].size == 4);
      CHECK(s[1].begin == 0);
      CHECK(s[1].size == 64);
      // The stored shard is smaller: FSDP's chunk of the 4 local experts, 2.
      CHECK(dockyard::LocalShapeOnRank(p, pl, plan.MeshOf(i), 3) == std::vector<int64_t>{2, 64, 64});
    }
    if (p.fqn == "model.layers.0.self_attn.q_proj.weight") {
      ++found;
      // [64, 64] colwise on tp 2: rank 1 (tp coordinate 1) computes rows [32, 64).
      const auto s = dockyard::ModelParallelSliceOnRank(p, pl, plan.MeshOf(i), 1);
      CHECK(s[0].begin == 32);
      CHECK(s[0].size == 32);
      CHECK(s[1].size == 64);
    }
  }
  CHECK(found == 2);
}

TEST_CASE("ForwardShardsOnRank names the TP and EP axes and cuts a fused gate|up dim per section") {
  const auto plan = TinyMixtralTp2Ep2();  // etp 1
  int found = 0;
  for (size_t i = 0; i < plan.inventory.params.size(); ++i) {
    const auto& p = plan.inventory.params[i];
    const auto& pl = plan.placements[i];
    const dockyard::Mesh& mesh = plan.MeshOf(i);
    if (p.fqn == "model.layers.0.mlp.experts.gate_up_proj") {
      ++found;
      // [8, 2F = 64, 64] with sections {32, 32}; no TP step with etp 1, so the slice of dim 1 is one
      // whole section [0, 32), not the fused [0, 64) of ModelParallelSliceOnRank; rank 3 has ep
      // coordinate 1 -> experts [4, 8). Its one model-parallel step is EP, on the sparse "ep" axis.
      const dockyard::ForwardShards s = dockyard::ForwardShardsOnRank(p, pl, mesh, 3);
      CHECK(s.slices[0].begin == 4);
      CHECK(s.slices[0].size == 4);
      CHECK(s.slices[1].begin == 0);
      CHECK(s.slices[1].size == 32);
      CHECK(dockyard::ModelParallelSliceOnRank(p, pl, mesh, 3)[1].size == 64);
      CHECK(s.ep_axis == mesh.AxisIndex("ep"));
      CHECK(s.tp_axis == -1);
    }
    if (p.fqn == "model.layers.0.self_attn.q_proj.weight") {
      ++found;
      // [64, 64] colwise on tp 2: rank 1 computes rows [32, 64); TP on the dense "tp" axis, no EP.
      const dockyard::ForwardShards s = dockyard::ForwardShardsOnRank(p, pl, mesh, 1);
      CHECK(s.slices[0].begin == 32);
      CHECK(s.slices[0].size == 32);
      CHECK(s.tp_axis == mesh.AxisIndex("tp"));
      CHECK(s.ep_axis == -1);
    }
  }
  CHECK(found == 2);
}
