// BuildPlan: expert ownership, pipeline stages and parameter bytes per rank, by hand.
#include "planner/layout/plan.h"

#include <utility>
#include <vector>

#include <doctest/doctest.h>

#include "planner/base/error.h"
#include "planner/model/model_file.h"
#include "tests/test_models.h"

using dockyard::BuildPlan;
using dockyard::ParallelDimsOptions;
using dockyard::ParamBytesPerRank;
using dockyard::Plan;
using dockyard::StageSummary;
using dockyard::SummarizeStages;

TEST_CASE("EvenLayerSplit gives the first L % pp stages one extra layer") {
  // 61 layers over 4 stages: 16, 15, 15, 15.
  auto s = dockyard::EvenLayerSplit(61, 4);
  CHECK(s[15] == 0);
  CHECK(s[16] == 1);
  CHECK(s[30] == 1);
  CHECK(s[31] == 2);
  CHECK(s[60] == 3);
}

TEST_CASE("Expert ownership is contiguous per EP rank") {
  ParallelDimsOptions o;
  o.world_size = 4;
  o.ep = 4;
  Plan plan = BuildPlan(dockyard::testing::TinyMixtral(), o);
  CHECK(plan.experts.num_local_experts == 2);  // 8 / 4
  CHECK(plan.experts.FirstExpert(2) == 4);     // ep rank 2 holds experts 4, 5
  CHECK(plan.experts.OwnerOf(7) == 3);
  // Every expert owned exactly once.
  std::vector<int> owned(8, 0);
  for (int64_t r = 0; r < 4; ++r) {
    for (int64_t e = 0; e < plan.experts.num_local_experts; ++e) owned[plan.experts.FirstExpert(r) + e]++;
  }
  CHECK(owned == std::vector<int>(8, 1));
}

TEST_CASE("Parameter bytes per rank for the tiny model on 4 ranks with ep 4") {
  // Elements (bf16, 2 bytes each); world 4: dp_shard 4, ep 4, efsdp 1.
  //   embedding [1000, 64] / 4 rows = 16000; lm_head the same; final norm [64] / 4 = 16.
  //   per layer: norms 2 x 16; q [64,64]/4 = 1024; k, v [32,64]/4 = 512 each; o 1024;
  //   router [8,64]/4 = 128; gate_up [8,64,64] / ep 4 = 8192; down [8,64,32] / 4 = 4096 -> 15520.
  //   total = 16000 + 16000 + 16 + 2 * 15520 = 63056 elements = 126112 bytes on every rank.
  ParallelDimsOptions o;
  o.world_size = 4;
  o.ep = 4;
  Plan plan = BuildPlan(dockyard::testing::TinyMixtral(), o);
  const std::vector<int64_t> param_bytes_per_rank = ParamBytesPerRank(plan);
  const std::vector<StageSummary> stages = SummarizeStages(plan, param_bytes_per_rank);
  for (int64_t b : param_bytes_per_rank) CHECK(b == 126112);
  REQUIRE(stages.size() == 1);
  CHECK(stages[0].max_param_bytes == 126112);
  // Whole model: 2 * 64000 + 64 + 2 * 62080 = 252224 elements = 4 ranks x 63056.
  CHECK(plan.inventory.totals.total_params == 252224);
}

TEST_CASE("Pipeline stages hold their own layers; embedding first, lm_head last") {
  ParallelDimsOptions o;
  o.world_size = 2;
  o.pp = 2;
  Plan plan = BuildPlan(dockyard::testing::TinyMixtral(), o);
  const std::vector<int64_t> param_bytes_per_rank = ParamBytesPerRank(plan);
  const std::vector<StageSummary> stages = SummarizeStages(plan, param_bytes_per_rank);
  // Stage 0: embedding 64000 + layer 0 (62080) = 126080 elements; stage 1: layer 1 + norm 64
  // + lm_head 64000 = 126144 elements.
  CHECK(param_bytes_per_rank[0] == 2 * 126080);
  CHECK(param_bytes_per_rank[1] == 2 * 126144);
  CHECK(stages[1].first_layer == 1);
  CHECK(stages[1].last_layer == 1);
}

TEST_CASE("Parameter bytes per rank count the MTP modules on their stage and DualPipe's mirror stage, by hand") {
  ParallelDimsOptions o;
  o.world_size = 2;
  o.pp = 2;
  dockyard::TrainingConfig t;
  t.mtp_layers = 1;
  const Plan plan = BuildPlan(dockyard::testing::TinyMixtral(), o, t);
  // Stage 1 as above (126144 elements) plus one MTP module: the last layer (62080), enorm, hnorm
  // and its final norm (3 x 64), eh_proj (64 x 128 = 8192) and, at pp 2, its word embedding
  // (1000 x 64 = 64000): 134464 elements. BF16: 2 x (126144 + 134464) B.
  const std::vector<int64_t> bytes = ParamBytesPerRank(plan);
  CHECK(bytes[0] == 2 * 126080);
  CHECK(bytes[1] == 2 * (126144 + 134464));
  CHECK(SummarizeStages(plan, bytes)[1].max_param_bytes == 2 * (126144 + 134464));
  // DualPipe at pp 2 (Megatron's schedule): each rank holds its stage and the mirror one (pp - 1 -
  // stage), so both hold both stages and layers 0-1. Megatron pads the vocabulary to 1024 (a
  // multiple of 128): embedding and lm_head 1024 x 64 = 65536 each, so stage 0 = 65536 + 62080 =
  // 127616 and stage 1 = 62080 + 64 + 65536 = 127680 elements: 2 x (127616 + 127680) B.
  t.mtp_layers = 0;
  t.run.schedule = "dualpipe";
  t.num_microbatches = 4;
  o.convention = dockyard::Convention::kMegatron;
  t.dp_sharding = dockyard::DpSharding::kZero1;
  const Plan dual = BuildPlan(dockyard::testing::TinyMixtral(), o, t);
  const std::vector<int64_t> dual_bytes = ParamBytesPerRank(dual);
  CHECK(dual_bytes[0] == 2 * (127616 + 127680));
  CHECK(dual_bytes[1] == 2 * (127616 + 127680));
  const std::vector<StageSummary> stages = SummarizeStages(dual, dual_bytes);
  CHECK(stages[0].layer_runs == std::vector<std::pair<int64_t, int64_t>>{{0, 1}});
  CHECK(stages[1].first_layer == 0);
  CHECK(stages[1].last_layer == 1);
}

TEST_CASE("Under --vpp a stage's layers are its model chunks, interleaved") {
  // Tiny Mixtral with 9 layers, pp 3, vpp 3: one layer per chunk; virtual stage v x 3 + p is
  // rank p's chunk v, so stage 0 holds layers 0, 3 and 6 and stage 2 holds 2, 5 and 8.
  dockyard::ModelSpec m = dockyard::testing::TinyMixtral();
  m.num_hidden_layers = 9;
  m.moe_layers.assign(9, true);
  ParallelDimsOptions o;
  o.world_size = 3;
  o.pp = 3;
  dockyard::TrainingConfig t;
  t.run.vpp = 3;
  t.num_microbatches = 3;
  const Plan plan = BuildPlan(m, o, t);
  CHECK(plan.layer_stage == std::vector<int64_t>{0, 1, 2, 0, 1, 2, 0, 1, 2});
  CHECK(plan.layer_chunk == std::vector<int64_t>{0, 0, 0, 1, 1, 1, 2, 2, 2});
  const std::vector<StageSummary> stages = SummarizeStages(plan, ParamBytesPerRank(plan));
  CHECK(stages[0].first_layer == 0);
  CHECK(stages[0].last_layer == 6);
  CHECK(stages[0].layer_runs == std::vector<std::pair<int64_t, int64_t>>{{0, 0}, {3, 3}, {6, 6}});
  CHECK(stages[2].layer_runs == std::vector<std::pair<int64_t, int64_t>>{{2, 2}, {5, 5}, {8, 8}});
  // vpp 1: one run per stage (layers 0-2, 3-5, 6-8).
  t.run.vpp = 1;
  const std::vector<StageSummary> plain = SummarizeStages(BuildPlan(m, o, t), ParamBytesPerRank(BuildPlan(m, o, t)));
  CHECK(plain[1].layer_runs == std::vector<std::pair<int64_t, int64_t>>{{3, 5}});
}

TEST_CASE("BuildPlan reports the first rule the degrees break") {
  ParallelDimsOptions o;
  o.world_size = 6;
  o.ep = 3;  // 8 experts
  CHECK_THROWS_WITH_AS(BuildPlan(dockyard::testing::TinyMixtral(), o), doctest::Contains("ep (3) must divide num_experts (8)"),
                       dockyard::Error);
}

TEST_CASE("DeepSeek-V3 on 256 ranks with ep 64: 4 local experts, efsdp 4, about 4.9 GiB of parameters per rank") {
  auto model = dockyard::LoadModel("testdata/hf/deepseek-v3.json");
  ParallelDimsOptions o;
  o.world_size = 256;
  o.ep = 64;
  Plan plan = BuildPlan(model, o);
  const std::vector<int64_t> param_bytes_per_rank = ParamBytesPerRank(plan);
  const std::vector<StageSummary> stages = SummarizeStages(plan, param_bytes_per_rank);
  CHECK(plan.experts.num_local_experts == 4);
  CHECK(plan.dims.efsdp == 4);
  // Routed experts: 58 MoE layers x 256 experts x 3 x 7168 x 2048 = 653,908,770,816 elements,
  // split exactly over 256 ranks (ep 64 x efsdp 4 over 256 experts); the other
  // 17,117,648,384 elements are FSDP-sharded over 256 (uneven rows round up per rank).
  CHECK(plan.inventory.totals.routed_expert_params == 653908770816);
  // Lower bound 671,026,419,200 / 256 * 2 bytes = 5,242,393,900 bytes; the worst rank is within
  // a few MiB above it.
  CHECK(stages[0].max_param_bytes >= 5242393900);
  CHECK(stages[0].max_param_bytes < 5242393900 + 8 * 1024 * 1024);
}

TEST_CASE("torchtitan refuses tied embeddings with pipeline parallelism") {
  // torchtitan pipeline_llm: NotImplementedError("Weight tying is not supported with Pipeline Parallel.")
  auto m = dockyard::testing::TinyMixtral();
  m.tie_word_embeddings = true;
  ParallelDimsOptions o;
  o.world_size = 2;
  o.pp = 2;
  CHECK_THROWS_WITH_AS(BuildPlan(m, o),
                       "tie_word_embeddings (true) with pp (2) > 1: torchtitan refuses weight tying with pipeline "
                       "parallelism (NotImplementedError: Weight tying is not supported with Pipeline Parallel.); use "
                       "pp 1 or --convention megatron (its embedding group all-reduces the tied gradient)",
                       dockyard::Error);
  o.pp = 1;
  CHECK_NOTHROW(BuildPlan(m, o));  // one stage: the embedding is the lm_head
}

TEST_CASE("Tied embeddings with pipeline stages put an lm_head copy on the last stage (megatron)") {
  auto m = dockyard::testing::TinyMixtral();
  m.tie_word_embeddings = true;
  ParallelDimsOptions o;
  o.world_size = 2;
  o.pp = 2;
  o.convention = dockyard::Convention::kMegatron;
  Plan plan = BuildPlan(m, o);
  const std::vector<int64_t> param_bytes_per_rank = ParamBytesPerRank(plan);
  // Stage 1: layer 1 (62080) + final norm (64) + the lm_head copy [1024, 64] (vocab 1000 padded
  // by Megatron-LM to a multiple of 128 x tp 1: 65536) = 127680 elements, as with untied weights;
  // the model totals count the matrix once: 65536 + 64 + 2*62080.
  CHECK(param_bytes_per_rank[1] == 2 * 127680);
  CHECK(plan.inventory.totals.total_params == 189760);
  CHECK(plan.inventory.params.back().tied_to == "model.embed_tokens.weight");
}

TEST_CASE("Megatron places routed experts on the expert mesh and shards them by etp even with ep 1") {
  ParallelDimsOptions o;
  o.world_size = 2;
  o.etp = 2;
  o.convention = dockyard::Convention::kMegatron;
  Plan plan = BuildPlan(dockyard::testing::TinyMixtral(), o);
  for (size_t i = 0; i < plan.inventory.params.size(); ++i) {
    if (plan.inventory.params[i].fqn != "model.layers.0.mlp.experts.gate_up_proj") continue;
    CHECK(plan.placements[i].sparse_mesh);
    // expert mesh (pp, edp 1, ep 1, etp 2): placements over (edp, ep, etp).
    CHECK(plan.placements[i].placements.back().ToString() == "Shard(1)");
    CHECK(plan.placements[i].local_shapes.front().shape == std::vector<int64_t>{8, 32, 64});  // 2F = 64 / 2
  }
}

TEST_CASE("The plan carries its training settings once: plan.training, resolved; the model's block is dropped") {
  auto m = dockyard::testing::TinyMixtral();
  dockyard::TrainingConfig block;
  block.seq_len = 512;  // a spec's training block, the caller's default
  m.training = block;
  ParallelDimsOptions o;
  o.world_size = 2;
  o.pp = 2;
  dockyard::TrainingConfig given = *m.training;  // what a front end resolves from the block and its flags
  Plan plan = BuildPlan(m, o, given);
  CHECK_FALSE(plan.model.training.has_value());
  CHECK(plan.training.seq_len == 512);
  CHECK(plan.training.num_microbatches == 2);  // resolved: pp
  CHECK(plan.training.dp_sharding == dockyard::DpSharding::kFsdp);
}

TEST_CASE("BuildPlan refuses a seq_len that does not split into 2 x cp chunks (check and simulate build through it)") {
  const auto model = dockyard::testing::TinyMixtral();
  ParallelDimsOptions o;
  o.world_size = 8;
  o.cp = 4;
  dockyard::TrainingConfig t;
  t.seq_len = 100;  // 100 = 8 x 12 + 4: not a multiple of 2 x cp = 8 (Megatron get_batch_on_this_cp_rank)
  CHECK_THROWS_WITH_AS(BuildPlan(model, o, t), doctest::Contains("--seq-len 100 must be divisible by 2 x cp = 8 (cp 4)"), dockyard::Error);
  t.seq_len = 104;  // 8 x 13
  CHECK_NOTHROW(BuildPlan(model, o, t));
}

TEST_CASE("Megatron-LM pads the vocabulary to a multiple of 128 x tp: embedding and lm_head shapes") {
  // Qwen3-30B-A3B, vocab_size 151,936, hidden 2,048 (tests/test_models.h / testdata/hf).
  // megatron tp 2: ceil(151,936 / 256) x 256 = 152,064 rows, [76,032, 2,048] on every rank
  // (vocab_size_with_padding); tp 1: 151,936 = 1,187 x 128 stays.
  const dockyard::ModelSpec m = dockyard::LoadModel("testdata/hf/qwen3-30b-a3b.json");
  REQUIRE(m.vocab_size == 151936);
  ParallelDimsOptions o;
  o.world_size = 8;
  o.tp = 2;
  o.ep = 4;
  o.convention = dockyard::Convention::kMegatron;
  dockyard::TrainingConfig t;
  t.seq_len = 1024;
  auto rows = [](const Plan& plan, dockyard::Role role, int64_t rank) {
    for (size_t i = 0; i < plan.inventory.params.size(); ++i) {
      const auto& p = plan.inventory.params[i];
      if (p.role == role) return dockyard::LocalShapeOnRank(p, plan.placements[i], plan.MeshOf(i), rank);
    }
    return std::vector<int64_t>{};
  };
  const Plan tp2 = BuildPlan(m, o, t);
  CHECK(tp2.model.vocab_size == 152064);
  CHECK(tp2.unpadded_vocab_size == 151936);
  for (int64_t rank : {0, 1, 7}) {
    CAPTURE(rank);
    CHECK(rows(tp2, dockyard::Role::kEmbedding, rank) == std::vector<int64_t>{76032, 2048});
    CHECK(rows(tp2, dockyard::Role::kLmHead, rank) == std::vector<int64_t>{76032, 2048});
  }
  o.tp = 1;
  const Plan tp1 = BuildPlan(m, o, t);
  CHECK(tp1.model.vocab_size == 151936);
  CHECK(rows(tp1, dockyard::Role::kEmbedding, 0) == std::vector<int64_t>{151936, 2048});
  // --make-vocab-size-divisible-by 1 (Megatron-Bridge recipes: should_pad_vocab false): tp 2 keeps
  // 151,936, 75,968 rows per rank.
  o.tp = 2;
  t.make_vocab_size_divisible_by = 1;
  CHECK(rows(BuildPlan(m, o, t), dockyard::Role::kEmbedding, 0) == std::vector<int64_t>{75968, 2048});
  // torchtitan does not pad: tp 2 gives 75,968 rows (before FSDP's cut: model-parallel elements).
  t.make_vocab_size_divisible_by.reset();
  o.convention = dockyard::Convention::kTorchtitan;
  const Plan titan = BuildPlan(m, o, t);
  CHECK(titan.model.vocab_size == 151936);
  CHECK(dockyard::ModelParallelNumel(titan, 0, 0) == int64_t{75968} * 2048);
}

TEST_CASE("BuildPlan rejects --make-vocab-size-divisible-by above 1 under torchtitan") {
  // torchtitan has no vocabulary padding: a divisor would silently be ignored.
  const dockyard::ModelSpec m = dockyard::LoadModel("testdata/hf/qwen3-30b-a3b.json");
  ParallelDimsOptions o;
  o.world_size = 8;
  o.ep = 8;
  dockyard::TrainingConfig t;
  t.make_vocab_size_divisible_by = 128;
  CHECK_THROWS_WITH_AS(BuildPlan(m, o, t), doctest::Contains("make-vocab-size-divisible-by (128) is Megatron-LM's vocabulary padding"),
                       dockyard::Error);
}

TEST_CASE("BuildPlan holds the deepep dispatcher to its backend's rank limits (plan, check and simulate alike)") {
  // The tiny model with 256 experts on 256 ranks, ep 256: DeepEP's Buffer takes at most 8 x 20 = 160
  // ranks (DeepEP csrc/legacy/buffer.hpp; planner/model/flex_backend_limits.h).
  dockyard::ModelSpec m = dockyard::testing::TinyMixtral();
  m.moe.num_experts = 256;
  ParallelDimsOptions d;
  d.world_size = 256;
  d.ep = 256;
  dockyard::TrainingConfig t;
  t.dispatcher = dockyard::Dispatcher::kDeepEp;
  CHECK_THROWS_WITH_AS(BuildPlan(m, d, t, dockyard::Machine{}),
                       doctest::Contains("--dispatcher deepep (torchtitan comm_backend deepep) with --ep 256: "
                                         "DeepEP's normal-mode Buffer takes at most 160 ranks"),
                       dockyard::Error);
  // ncclep (Megatron-Core's backend: torchtitan refuses it) has none of DeepEP's limits; the
  // all-to-all dispatcher has no backend.
  t.moe_flex_dispatcher_backend = dockyard::FlexBackend::kNcclEp;
  CHECK_THROWS_WITH_AS(BuildPlan(m, d, t, dockyard::Machine{}), doctest::Contains("ncclep: Megatron-Core's backend"), dockyard::Error);
  d.convention = dockyard::Convention::kMegatron;
  CHECK(BuildPlan(m, d, t, dockyard::Machine{}).dims.ep == 256);
  t.moe_flex_dispatcher_backend.reset();
  t.dispatcher = dockyard::Dispatcher::kAllToAll;
  CHECK(BuildPlan(m, d, t, dockyard::Machine{}).dims.ep == 256);
}
