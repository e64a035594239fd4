// RunConfig from plans (config.h): experts, intermediate slices, groups and token sources come
// from the plan's placements; unsupported layouts are rejected before anything runs.
#include "runtime/config.h"

#include <doctest/doctest.h>

#include "planner/base/error.h"
#include "runtime/test_layouts.h"

using namespace dockyard;
using namespace dockyard::runtime;
using namespace dockyard::runtime::testing;
using V = std::vector<int64_t>;

TEST_CASE("EP: each rank holds E / ep contiguous experts, all of F, and its EP group is the sparse mesh's ep axis") {
  // world 8, ep 4: dp_shard 8, efsdp 2; sparse mesh (pp, dp_replicate, efsdp 2, ep 4), so rank
  // 5 = efsdp 1 * 4 + ep 1: EP group [4 5 6 7], experts [2, 4) (8 experts / 4).
  const RunConfig c = MakeRunConfig(MakePlan(TinyMoe(), 8, 4), {});
  REQUIRE(c.ranks.size() == 8);
  const RankConfig& r = c.ranks[5];
  CHECK(r.ep_group == V{4, 5, 6, 7});
  CHECK(r.ep_index == 1);
  CHECK(r.first_expert == 2);
  CHECK(r.num_local_experts == 2);
  CHECK(r.f_begin == 0);
  CHECK(r.f_end == 32);
  CHECK(r.expert_tp_group == V{5});
  CHECK(r.source == 5);  // every rank its own tokens
  CHECK(c.sources.size() == 8);
  CHECK(c.ep == 4);
  CHECK(c.expert_tp == 1);
  CHECK(c.layer == 0);  // the first MoE layer
}

TEST_CASE("TP experts with EP off: colwise gate/up and rowwise down cut F, and the tp group shares tokens") {
  // world 2, tp 2, ep 1: experts on the dense mesh, Shard on F over tp: rank r holds
  // F [16 r, 16 r + 16) of every expert (gate | up sections cut separately).
  const RunConfig c = MakeRunConfig(MakePlan(TinyMoe(), 2, 1, 2), {});
  REQUIRE(c.ranks.size() == 2);
  CHECK(c.ranks[1].f_begin == 16);
  CHECK(c.ranks[1].f_end == 32);
  CHECK(c.ranks[1].first_expert == 0);
  CHECK(c.ranks[1].num_local_experts == 8);
  CHECK(c.ranks[1].expert_tp_group == V{0, 1});
  CHECK(c.ranks[1].ep_group == V{1});
  CHECK(c.sources == V{0});  // both ranks hold rank 0's tokens
  CHECK(c.expert_tp == 2);
}

TEST_CASE("ETP: experts sharded by ep and their F by etp, FSDP steps skipped") {
  // world 8, tp 2, ep 2, etp 2: dp_shard 4, efsdp 4*2/(2*2) = 2; sparse mesh (pp, dp_replicate,
  // efsdp 2, ep 2, etp 2): rank 3 = ep 1 * 2 + etp 1. EP group [1 3], experts [4, 8),
  // F [16, 32), etp group [2 3] holding rank 2's tokens.
  const RunConfig c = MakeRunConfig(MakePlan(TinyMoe(), 8, 2, 2, 2), {});
  const RankConfig& r = c.ranks[3];
  CHECK(r.ep_group == V{1, 3});
  CHECK(r.first_expert == 4);
  CHECK(r.num_local_experts == 4);
  CHECK(r.f_begin == 16);
  CHECK(r.f_end == 32);
  CHECK(r.expert_tp_group == V{2, 3});
  CHECK(r.source == 2);
  CHECK(c.sources == V{0, 2, 4, 6});
}

TEST_CASE("Shared experts join the expert-TP all-reduce when their tp group is the etp group") {
  const RunConfig c = MakeRunConfig(MakePlan(TinyDeepSeek(), 4, 2, 2, 2), {});
  CHECK(c.ranks[1].shared_mode == SharedMode::kPartial);
  CHECK(c.ranks[1].shared_f_begin == 24);  // F 48 over tp 2
  CHECK(c.ranks[1].shared_f_end == 48);
}

TEST_CASE("Shared experts run sequence-parallel when EP borrows the tp ranks (etp 1, tp 2)") {
  // world 4, tp 2, ep 2, etp 1: every rank has its own tokens, shared experts are cut over tp.
  const RunConfig c = MakeRunConfig(MakePlan(TinyDeepSeek(), 4, 2, 2, 1), {});
  CHECK(c.ranks[1].shared_mode == SharedMode::kSequenceParallel);
  CHECK(c.ranks[1].shared_tp_group == V{0, 1});
  CHECK(c.ranks[1].expert_tp_group == V{1});
  CHECK(c.ranks[1].f_end == 32);  // routed experts unsharded
}

TEST_CASE("Without tp the shared experts are local") {
  const RunConfig c = MakeRunConfig(MakePlan(TinyDeepSeek(), 4, 4), {});
  CHECK(c.ranks[0].shared_mode == SharedMode::kLocal);
  CHECK(c.ranks[0].shared_f_end == 48);
}

TEST_CASE("Deredundency splits the EP group into oep x iep with the inner index fastest") {
  RunOptions o;
  o.dispatcher = Dispatcher::kDeredundency;
  o.oep = 2;
  const RunConfig c = MakeRunConfig(MakePlan(TinyMoe(), 8, 8), o);
  // EP index 5 = o 1 * iep 4 + i 1.
  CHECK(c.oep == 2);
  CHECK(c.iep == 4);
  CHECK(c.ranks[5].oep_group == V{1, 5});
  CHECK(c.ranks[5].iep_group == V{4, 5, 6, 7});
}

TEST_CASE("RankSpecs labels a rank's groups by RankGroupName: ep and expert_tp, oep and iep with deredundency, shared_tp") {
  RunOptions o;
  o.dispatcher = Dispatcher::kDeredundency;
  o.oep = 2;
  // TinyDeepSeek has shared experts; world 8, ep 8, tp 1: rank 5 is EP index 5 = o 1 * iep 4 + i 1,
  // its expert-TP and shared tp groups are itself (the shared experts run locally).
  const RunConfig c = MakeRunConfig(MakePlan(TinyDeepSeek(), 8, 8), o);
  const RankSpec spec = RankSpecs(c)[5];
  REQUIRE(spec.groups.size() == 5);
  CHECK(spec.groups[0].label == "ep");
  CHECK(spec.groups[0].ranks == V{0, 1, 2, 3, 4, 5, 6, 7});
  CHECK(spec.groups[1].label == "expert_tp");
  CHECK(spec.groups[1].ranks == V{5});
  CHECK(spec.groups[2].label == "oep");
  CHECK(spec.groups[2].ranks == V{1, 5});
  CHECK(spec.groups[3].label == "iep");
  CHECK(spec.groups[3].ranks == V{4, 5, 6, 7});
  CHECK(spec.groups[4].label == "shared_tp");
  CHECK(spec.groups[4].ranks == V{5});
  // all_to_all without shared experts: the EP and expert-TP groups only.
  const RunConfig plain = MakeRunConfig(MakePlan(TinyMoe(), 8, 8), {});
  CHECK(GroupsOfRank(plain, plain.ranks[5]) == std::vector<RankGroup>{RankGroup::kEp, RankGroup::kExpertTp});
}

TEST_CASE("Deredundency rejects an oep that does not divide ep") {
  RunOptions o;
  o.dispatcher = Dispatcher::kDeredundency;
  o.oep = 3;  // ep 8 = oep x iep needs oep | 8
  CHECK_THROWS_WITH_AS(MakeRunConfig(MakePlan(TinyMoe(), 8, 8), o), doctest::Contains("oep (3) must divide ep (8)"), Error);
}

TEST_CASE("The ranks of the stage holding the layer run") {
  // 2 layers over pp 2: layer 1 lives on stage 1, ranks [2, 3] of 4.
  RunOptions o;
  o.layer = 1;
  const RunConfig c = MakeRunConfig(MakePlan(TinyMoe(), 4, 2, 1, 1, 2), o);
  CHECK(c.stage == 1);
  REQUIRE(c.ranks.size() == 2);
  CHECK(c.ranks[0].rank == 2);
  CHECK(c.ranks[0].ep_group == V{2, 3});
}

TEST_CASE("A dense layer is rejected") {
  ModelSpec m = TinyMoe();
  m.intermediate_size = 128;
  m.moe_layers = {false, true};  // layer 0 is dense
  RunOptions o;
  o.layer = 0;
  CHECK_THROWS_WITH_AS(MakeRunConfig(MakePlan(m, 2, 2), o), doctest::Contains("layer 0 of tiny is a dense layer"), Error);
  o.layer = -1;
  CHECK(MakeRunConfig(MakePlan(m, 2, 2), o).layer == 1);  // the first MoE layer
}

TEST_CASE("Experts with biases (gpt-oss's clamped SwiGLU) are rejected as not supported yet") {
  ModelSpec m = TinyMoe();
  m.moe.expert_bias = true;
  CHECK_THROWS_WITH_AS(MakeRunConfig(MakePlan(m, 2, 2), {}), doctest::Contains("not supported yet"), Error);
}

TEST_CASE("Shared experts over tp 2 with tokens replicated over etp 4 are rejected (megatron)") {
  // Megatron allows etp 4 with tp 2; the shared experts' tp groups then differ from the etp groups.
  CHECK_THROWS_WITH_AS(MakeRunConfig(MakePlan(TinyDeepSeek(), 8, 2, 2, 4, 1, Convention::kMegatron), {}),
                       doctest::Contains("etp = 1 or etp = tp only"), Error);
}

TEST_CASE("Options out of range are rejected with the field and value") {
  RunOptions o;
  o.tokens_per_rank = -1;
  CHECK_THROWS_WITH_AS(MakeRunConfig(MakePlan(TinyMoe(), 2, 2), o),
                       doctest::Contains("--tokens-per-rank -1: tokens per rank must be in [1, 2^24]"), Error);
  o = {};
  o.iters = 0;
  CHECK_THROWS_WITH_AS(MakeRunConfig(MakePlan(TinyMoe(), 2, 2), o), doctest::Contains("iters must be in [1, 10^6], got 0"), Error);
}

TEST_CASE("Zero tokens per rank is rejected: nothing would be routed, dispatched or compared") {
  RunOptions o;
  o.tokens_per_rank = 0;
  CHECK_THROWS_WITH_AS(MakeRunConfig(MakePlan(TinyMoe(), 2, 2), o),
                       doctest::Contains("--tokens-per-rank 0: tokens per rank must be in [1, 2^24]; with 0 tokens no row is routed"),
                       Error);
  // Per-source counts may hold zeros (a source that sends nothing) while the others send rows.
  o.tokens_per_source = {0, 4};
  CHECK_NOTHROW(MakeRunConfig(MakePlan(TinyMoe(), 2, 2), o));
}

TEST_CASE("A run whose worst-case buffers exceed the memory bound is rejected before allocating") {
  RunOptions o;
  o.tokens_per_rank = 1 << 24;  // 2^24 tokens x top-2 x hidden 64 x (8 + 2 + 3*8 rows) x 8 ranks
  CHECK_THROWS_WITH_AS(MakeRunConfig(MakePlan(TinyMoe(), 8, 8), o), doctest::Contains("GiB of buffers"), Error);
}

TEST_CASE("ForwardSliceOnRank cuts each fused gate|up section, not the fused dim") {
  // gate_up_proj [E, 2F, D] = [8, 64, 64] with sections {32, 32}, tp 2: rank 1 holds rows
  // [16, 32) of each section, reported as the section slice [16, 32).
  const Plan plan = MakePlan(TinyMoe(), 2, 1, 2);
  for (size_t i = 0; i < plan.inventory.params.size(); ++i) {
    const ParamInfo& p = plan.inventory.params[i];
    if (p.role != Role::kExpertGateUp || p.layer != 0) continue;
    const auto s = ForwardSliceOnRank(p, plan.placements[i], plan.MeshOf(i), 1);
    CHECK(s[1].begin == 16);
    CHECK(s[1].size == 16);
    CHECK(s[0].size == 8);  // FSDP over dp_shard would cut dim 0; it is skipped (dp_shard = 1 here anyway)
  }
}
