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

TEST_CASE("ParallelDims rejects etp that is neither 1 nor tp (torchtitan before PR #3167)") {
  ParallelDimsOptions o = World(16);
  o.tp = 4;
  o.ep = 2;
  o.etp = 2;
  o.convention = Convention::kTorchtitan2026_03;
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
  m.attention.linear.num_key_heads = 4;  // 4 | 4 and 4 | 12: accepted (ep 1 < tp 4: torchtitan before PR #4794)
  m.attention.linear.num_value_heads = 12;
  o.convention = Convention::kTorchtitan2026_03;
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
  o.convention = Convention::kTorchtitan2026_03;  // etp = tp and ep 2 < tp 4: torchtitan before PR #3167
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

TEST_CASE("ParallelDims under torchtitan as it is refuses expert TP (pytorch/torchtitan PR #3167)") {
  ParallelDimsOptions o = World(16);
  o.tp = 2;
  o.ep = 4;
  o.etp = 2;  // etp = tp: accepted before PR #3167, refused now
  CHECK_THROWS_WITH_AS(ParallelDims::Build(o),
                       doctest::Contains("etp (2) must be 1 with --convention torchtitan: torchtitan removed expert tensor "
                                         "parallelism (pytorch/torchtitan PR #3167, 2026-04-30"),
                       Error);
  o.convention = Convention::kTorchtitan2026_03;  // "Currently we only support ETP=TP or ETP=1"
  CHECK(ParallelDims::Build(o).efsdp == 2);       // dp_shard 8 * tp 2 / (ep 4 * etp 2)
  o.convention = Convention::kMegatron;
  CHECK(ParallelDims::Build(o).etp == 2);
  o.convention = Convention::kTorchtitan;
  o.etp = 1;
  CHECK(ParallelDims::Build(o).efsdp == 4);  // 8 * 2 / (4 * 1)
}

TEST_CASE("ValidateDimsForModel under torchtitan refuses ep < tp for a MoE model (pytorch/torchtitan PR #4794)") {
  auto m = dockyard::testing::TinyMixtral();  // 4 heads, 2 KV heads, 8 experts, every layer MoE
  ParallelDimsOptions o = World(4);
  o.tp = 2;  // ep 1 < tp 2
  CHECK_THROWS_WITH_AS(dockyard::ValidateDimsForModel(ParallelDims::Build(o), m),
                       doctest::Contains("ep (1) must be >= tp (2) for a MoE model with --convention torchtitan: torchtitan "
                                         "requires EP >= TP for MoE models (pytorch/torchtitan PR #4794"),
                       Error);
  o.ep = 2;  // ep = tp: accepted
  CHECK_NOTHROW(dockyard::ValidateDimsForModel(ParallelDims::Build(o), m));
  o.ep = 1;
  o.convention = Convention::kTorchtitan2026_03;  // before PR #4794
  CHECK_NOTHROW(dockyard::ValidateDimsForModel(ParallelDims::Build(o), m));
  o.convention = Convention::kMegatron;
  CHECK_NOTHROW(dockyard::ValidateDimsForModel(ParallelDims::Build(o), m));
  // A model without MoE layers: the rule is for MoE models only.
  o.convention = Convention::kTorchtitan;
  m.moe_layers.assign(m.num_hidden_layers, false);
  CHECK_NOTHROW(dockyard::ValidateDimsForModel(ParallelDims::Build(o), m));
}

TEST_CASE("Megatron's etp defaults to tp when --etp is not given (Megatron-LM arguments.py); torchtitan's to 1") {
  ParallelDimsOptions o = World(8);
  o.tp = 2;
  o.ep = 4;
  o.convention = Convention::kMegatron;
  ParallelDims d = ParallelDims::Build(o);
  CHECK(d.etp == 2);  // expert_tensor_parallel_size = tensor_model_parallel_size
  CHECK(d.etp_default);
  CHECK(d.edp() == 1);  // 8 / (etp 2 * ep 4 * pp 1)
  o.etp = 1;            // given
  d = ParallelDims::Build(o);
  CHECK(d.etp == 1);
  CHECK_FALSE(d.etp_default);
  CHECK(d.edp() == 2);  // 8 / (1 * 4 * 1)
  o.etp.reset();
  o.convention = Convention::kTorchtitan;
  CHECK(ParallelDims::Build(o).etp == 1);
  // A defaulted etp that breaks a rule says where it came from: world 8, tp 2, ep 8: etp 2 * ep 8 = 16 > 8.
  o.convention = Convention::kMegatron;
  o.ep = 8;
  CHECK_THROWS_WITH_AS(ParallelDims::Build(o), doctest::Contains("etp (2, Megatron's default: tp, as --etp was not given"), Error);
}

TEST_CASE("Conventions by name: torchtitan, megatron, torchtitan-2026-03; an unknown name is refused") {
  CHECK(dockyard::ConventionNames() == std::vector<std::string>{"torchtitan", "megatron", "torchtitan-2026-03"});
  CHECK(dockyard::ParseConvention("torchtitan-2026-03", "--convention") == Convention::kTorchtitan2026_03);
  CHECK(std::string(dockyard::ConventionName(Convention::kTorchtitan2026_03)) == "torchtitan-2026-03");
  CHECK(dockyard::IsTorchtitan(Convention::kTorchtitan2026_03));
  CHECK_FALSE(dockyard::IsTorchtitan(Convention::kMegatron));
  CHECK_THROWS_WITH_AS(dockyard::ParseConvention("deepspeed", "--convention"), doctest::Contains("--convention"), Error);
}

TEST_CASE("ApplyConventionDefaults: Megatron's bare selective recompute is core_attn and its shared-expert overlap off") {
  dockyard::TrainingConfig t;
  t.recompute = dockyard::Recompute::kSelective;
  auto applied = dockyard::ApplyConventionDefaults(Convention::kMegatron, &t);
  // transformer_config.py: "if self.recompute_modules is None: self.recompute_modules = ['core_attn']"
  CHECK(t.recompute_modules == std::vector<std::string>{"core_attn"});
  CHECK(applied.selective_modules);
  CHECK(t.run.overlap_shared_experts == false);  // moe_shared_expert_overlap: False
  CHECK(applied.shared_expert_overlap);
  CHECK(t.dp_sharding == dockyard::DpSharding::kZero1);
  dockyard::TrainingConfig tt;
  tt.recompute = dockyard::Recompute::kSelective;
  applied = dockyard::ApplyConventionDefaults(Convention::kTorchtitan, &tt);
  // torchtitan as it is: SelectiveAC, per-op (activation_checkpoint.py; per-layer removed in 114151ad4).
  CHECK(tt.recompute_modules.empty());
  CHECK(tt.selective_ac_option == "op");
  CHECK_FALSE(applied.selective_modules);
  CHECK(applied.selective_ac_option);
  // torchtitan up to v0.2.2: job_config.py ActivationCheckpoint: selective_ac_option: str = "2".
  dockyard::TrainingConfig old_titan;
  old_titan.recompute = dockyard::Recompute::kSelective;
  CHECK(dockyard::ApplyConventionDefaults(Convention::kTorchtitan2026_03, &old_titan).selective_ac_option);
  CHECK(old_titan.selective_ac_option == "2");
  CHECK(tt.run.overlap_shared_experts == true);
  CHECK(tt.dp_sharding == dockyard::DpSharding::kFsdp);
  dockyard::TrainingConfig given;  // --moe-shared-expert-overlap and --recompute-modules given: kept
  given.recompute = dockyard::Recompute::kSelective;
  given.recompute_modules = {"layernorm"};
  given.run.overlap_shared_experts = true;
  applied = dockyard::ApplyConventionDefaults(Convention::kMegatron, &given);
  CHECK(given.recompute_modules == std::vector<std::string>{"layernorm"});
  CHECK(given.run.overlap_shared_experts == true);
  CHECK_FALSE(applied.shared_expert_overlap);
  CHECK_FALSE(applied.selective_modules);
  CHECK_FALSE(applied.selective_ac_option);
  given.recompute_modules.clear();  // torchtitan, --selective-ac-option op given: kept, no module default
  given.selective_ac_option = "op";
  applied = dockyard::ApplyConventionDefaults(Convention::kTorchtitan, &given);
  CHECK(given.selective_ac_option == "op");
  CHECK(given.recompute_modules.empty());
  CHECK_FALSE(applied.selective_ac_option);
  // torchtitan with --recompute-modules given keeps them (Megatron's modules, priced as listed).
  given.selective_ac_option.clear();
  given.recompute_modules = {"layernorm"};
  applied = dockyard::ApplyConventionDefaults(Convention::kTorchtitan, &given);
  CHECK(given.selective_ac_option.empty());
  CHECK_FALSE(applied.selective_ac_option);
}
