// ParallelDims: one invalid input per test case; messages name each operand and its value.
#include "planner/layout/parallel_dims.h"

#include <doctest/doctest.h>

#include "planner/base/error.h"
#include "tests/test_models.h"

using dockyard::Convention;
using dockyard::Error;
using dockyard::ParallelDims;
using dockyard::ParallelDimsOptions;

static ParallelDimsOptions World(int64_t n) {
  ParallelDimsOptions o;
  o.world_size = n;
  return o;
}

TEST_CASE("ParallelDims infers dp_shard from the other degrees") {
  ParallelDimsOptions o = World(64);
  o.tp = 4;
  o.pp = 2;
  o.ep = 8;
  ParallelDims d = ParallelDims::Build(o);
  CHECK(d.dp_shard == 8);  // 64 / (dp_replicate 1 * cp 1 * tp 4 * pp 2)
  CHECK(d.efsdp == 4);     // dp_shard 8 * cp 1 * tp 4 / (ep 8 * etp 1) = 32 / 8
  CHECK(d.edp() == 4);
}

TEST_CASE("ParallelDims rejects degrees whose product is not the world size") {
  ParallelDimsOptions o = World(512);
  o.dp_shard = 32;
  o.tp = 8;  // 32 * 8 = 256 != 512
  CHECK_THROWS_WITH_AS(ParallelDims::Build(o),
                       doctest::Contains("dp_replicate(1) * dp_shard(32) * cp(1) * tp(8) * pp(1) = 256 != world_size(512)"), Error);
}

TEST_CASE("ParallelDims rejects dp_shard = -1 when the world is not divisible") {
  ParallelDimsOptions o = World(10);
  o.tp = 4;  // 10 % 4 != 0
  CHECK_THROWS_WITH_AS(ParallelDims::Build(o), doctest::Contains("= 4 must divide world_size (10) to infer dp_shard"), Error);
}

TEST_CASE("ParallelDims rejects a degree below 1") {
  ParallelDimsOptions o = World(8);
  o.ep = 0;
  CHECK_THROWS_WITH_AS(ParallelDims::Build(o), doctest::Contains("ep must be >= 1, got 0"), Error);
  ParallelDimsOptions z = World(8);
  z.dp_shard = 0;  // only -1 or >= 1
  CHECK_THROWS_WITH_AS(ParallelDims::Build(z), doctest::Contains("dp_shard must be -1 (infer) or >= 1, got 0"), Error);
}

TEST_CASE("ParallelDims rejects a world size of zero") {
  CHECK_THROWS_WITH_AS(ParallelDims::Build(World(0)), doctest::Contains("world_size must be >= 1, got 0"), Error);
}

TEST_CASE("ParallelDims rejects etp that is neither 1 nor tp (torchtitan)") {
  ParallelDimsOptions o = World(16);
  o.tp = 4;
  o.ep = 2;
  o.etp = 2;
  CHECK_THROWS_WITH_AS(ParallelDims::Build(o), doctest::Contains("etp (2) must be 1 or equal to tp (4)"), Error);
}

TEST_CASE("ParallelDims accepts any etp dividing the stage with the megatron convention") {
  ParallelDimsOptions o = World(16);
  o.tp = 4;
  o.ep = 2;
  o.etp = 2;
  o.convention = Convention::kMegatron;
  ParallelDims d = ParallelDims::Build(o);
  CHECK(d.edp() == 4);  // 16 / (etp 2 * ep 2 * pp 1)
}

TEST_CASE("ParallelDims rejects ep that does not divide dp_shard*cp*tp") {
  ParallelDimsOptions o = World(24);
  o.ep = 16;  // dp_shard = 24, 24 % 16 != 0
  CHECK_THROWS_WITH_AS(ParallelDims::Build(o), doctest::Contains("ep (16) * etp (1) = 16 must divide dp_shard(24) * cp(1) * tp(1) = 24"),
                       Error);
}

TEST_CASE("ParallelDims rejects dp_replicate > 1 with the megatron convention") {
  ParallelDimsOptions o = World(8);
  o.dp_replicate = 2;
  o.convention = Convention::kMegatron;
  CHECK_THROWS_WITH_AS(ParallelDims::Build(o), doctest::Contains("dp_replicate (2) must be 1 with the megatron convention"), Error);
}

TEST_CASE("ParallelDims rejects a world beyond the supported size") {
  CHECK_THROWS_WITH_AS(ParallelDims::Build(World(dockyard::kMaxWorldSize + 1)), doctest::Contains("exceeds the largest"), Error);
}

TEST_CASE("ValidateDimsForModel rejects ep that does not divide num_experts") {
  auto m = dockyard::testing::TinyMixtral();  // 8 experts
  m.moe.num_experts = 6;
  ParallelDimsOptions o = World(4);
  o.ep = 4;
  CHECK_THROWS_WITH_AS(dockyard::ValidateDimsForModel(ParallelDims::Build(o), m), doctest::Contains("ep (4) must divide num_experts (6)"),
                       Error);
}

TEST_CASE("ValidateDimsForModel rejects tp that does not divide the attention heads") {
  auto m = dockyard::testing::TinyMixtral();  // 4 heads
  m.attention.num_attention_heads = 6;
  m.attention.num_key_value_heads = 6;
  ParallelDimsOptions o = World(4);
  o.tp = 4;
  CHECK_THROWS_WITH_AS(dockyard::ValidateDimsForModel(ParallelDims::Build(o), m),
                       doctest::Contains("tp (4) must divide num_attention_heads (6)"), Error);
}

TEST_CASE("ValidateDimsForModel rejects tp that does not divide the KV heads") {
  auto m = dockyard::testing::TinyMixtral();  // 4 heads, 2 KV heads
  ParallelDimsOptions o = World(4);
  o.tp = 4;
  CHECK_THROWS_WITH_AS(dockyard::ValidateDimsForModel(ParallelDims::Build(o), m),
                       doctest::Contains("tp (4) must divide num_key_value_heads (2)"), Error);
}

TEST_CASE("ValidateDimsForModel rejects tp that does not divide the linear-attention key heads") {
  auto m = dockyard::testing::TinyMixtral();  // 4 heads, 2 KV heads
  m.attention.num_key_value_heads = 4;
  m.attention.linear = {6, 12, 8, 8, 4};  // 6 key heads of 12 value heads: 4 does not divide 6
  m.linear_attention_layers.assign(m.num_hidden_layers, true);
  ParallelDimsOptions o = World(4);
  o.tp = 4;
  CHECK_THROWS_WITH_AS(dockyard::ValidateDimsForModel(ParallelDims::Build(o), m),
                       doctest::Contains("tp (4) must divide the linear-attention key heads (6): Gated DeltaNet is "
                                         "sharded by key-head groups"),
                       Error);
  m.attention.linear.num_key_heads = 4;  // 4 | 4 and 4 | 12: accepted
  m.attention.linear.num_value_heads = 12;
  CHECK_NOTHROW(dockyard::ValidateDimsForModel(ParallelDims::Build(o), m));
}

TEST_CASE("ValidateDimsForModel checks the logical expert intermediate size, not the fused 2F") {
  auto m = dockyard::testing::TinyMixtral();
  m.moe.moe_intermediate_size = 6;  // 2F = 12 is divisible by 4, F = 6 is not
  m.attention.num_key_value_heads = 4;
  ParallelDimsOptions o = World(4);
  o.tp = 4;  // ep 1: tp shards the experts
  CHECK_THROWS_WITH_AS(dockyard::ValidateDimsForModel(ParallelDims::Build(o), m),
                       doctest::Contains("tp (4) must divide moe_intermediate_size (6)"), Error);
}

TEST_CASE("ValidateDimsForModel checks the expert intermediate size against etp when EP is on") {
  auto m = dockyard::testing::TinyMixtral();
  m.moe.moe_intermediate_size = 6;
  m.attention.num_key_value_heads = 4;
  ParallelDimsOptions o = World(8);
  o.tp = 4;
  o.ep = 2;
  o.etp = 4;
  CHECK_THROWS_WITH_AS(dockyard::ValidateDimsForModel(ParallelDims::Build(o), m),
                       doctest::Contains("etp (4) must divide moe_intermediate_size (6)"), Error);
  o.etp = 1;  // with etp 1 the experts are not TP-sharded: fine
  CHECK_NOTHROW(dockyard::ValidateDimsForModel(ParallelDims::Build(o), m));
}

TEST_CASE("ValidateDimsForModel rejects top_k outside [1, num_experts]") {
  auto m = dockyard::testing::TinyMixtral();
  m.moe.top_k = 9;  // 8 experts
  CHECK_THROWS_WITH_AS(dockyard::ValidateDimsForModel(ParallelDims::Build(World(1)), m),
                       doctest::Contains("top_k (9) must satisfy 1 <= top_k <= num_experts (8)"), Error);
}

TEST_CASE("ValidateDimsForModel rejects more pipeline stages than layers") {
  auto m = dockyard::testing::TinyMixtral();  // 2 layers
  ParallelDimsOptions o = World(4);
  o.pp = 4;
  CHECK_THROWS_WITH_AS(dockyard::ValidateDimsForModel(ParallelDims::Build(o), m),
                       doctest::Contains("pp (4) cannot exceed num_hidden_layers (2)"), Error);
}

TEST_CASE("ValidateDimsForModel rejects tp that does not divide the dense MLP or shared expert") {
  auto m = dockyard::testing::TinyMixtral();
  m.attention.num_key_value_heads = 4;
  m.moe_layers = {false, true};
  m.intermediate_size = 30;  // 30 % 4 != 0
  ParallelDimsOptions o = World(4);
  o.tp = 4;
  CHECK_THROWS_WITH_AS(dockyard::ValidateDimsForModel(ParallelDims::Build(o), m),
                       doctest::Contains("tp (4) must divide intermediate_size (30)"), Error);
  m.intermediate_size = 32;
  m.moe.num_shared_experts = 1;
  m.moe.shared_expert_intermediate_size = 10;
  CHECK_THROWS_WITH_AS(dockyard::ValidateDimsForModel(ParallelDims::Build(o), m),
                       doctest::Contains("tp (4) must divide shared_expert_intermediate_size (10)"), Error);
}
