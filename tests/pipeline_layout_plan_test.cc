// Megatron pipeline layouts through a plan (pipeline_layout.h, plan.h ResolvePipelineStages): the
// layers per stage they give drive the parameters, activations and time of each stage, and where
// the embedding, the loss and the MTP modules sit. Hand arithmetic in each case.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "planner/accounting/memory.h"
#include "planner/base/error.h"
#include "planner/model/pipeline_layout.h"
#include "planner/cost/cost.h"
#include "planner/routing/plan_routing.h"
#include "tests/test_models.h"
#include "tests/tiny_plan.h"

using dockyard::BuildPlan;
using dockyard::DpSharding;
using dockyard::Plan;
using dockyard::TrainingConfig;
using doctest::Approx;

using dockyard::testing::PipelineDims;
using dockyard::testing::TinyMixtralLayers;
using dockyard::testing::Zero1Training;

TEST_CASE("account-for-embedding / loss move layers between stages; the time and memory per stage follow") {
  // 5 layers over pp 2: the even split is 3 + 2. With the embedding counted, 6 units = 3 per
  // rank: rank 0 builds E + 2 layers, rank 1 3 layers (Megatron get_num_layers_to_build). With
  // the loss counted the split is 3 + (2 + L), the even split's.
  TrainingConfig t = Zero1Training(4);
  const Plan even = BuildPlan(TinyMixtralLayers(5), PipelineDims(2, 2), t);
  CHECK(even.layer_stage == std::vector<int64_t>{0, 0, 0, 1, 1});
  t.run.account_for_loss = true;
  CHECK(BuildPlan(TinyMixtralLayers(5), PipelineDims(2, 2), t).layer_stage == even.layer_stage);
  t.run.account_for_loss = false;
  t.run.account_for_embedding = true;
  const Plan emb = BuildPlan(TinyMixtralLayers(5), PipelineDims(2, 2), t);
  CHECK(emb.layer_stage == std::vector<int64_t>{0, 0, 1, 1, 1});
  CHECK(emb.embedding_stage == 0);
  CHECK(emb.loss_stage == 1);

  const dockyard::ClusterSpec c = dockyard::ClusterPreset("h100-sxm");
  const auto step_even = dockyard::SimulateStep(even, c, dockyard::SampleRoutingForPlan(even, {}, 2));
  const auto step_emb = dockyard::SimulateStep(emb, c, dockyard::SampleRoutingForPlan(emb, {}, 2));
  // Stage times (L a MoE layer's forward + backward, P = 2 sends of ceil(256 / 1) x 64 x 2 B =
  // 32768 B inside the node, 3 + 32768 / 370e3 us each): even 3 L + P | 2 L + lm_head + P;
  // embedding counted 2 L + P | 3 L + lm_head + P. The tiny model's lm_head is shorter than a
  // layer (the layer's fixed all-to-all latencies dominate), so the even split's stage 0 is the
  // slowest, and counting the embedding makes stage 1 slower by exactly lm_head.
  // Stage 0 also runs the embedding's backward (E, kernels_model.h EmbeddingBackwardKernels).
  const double L = step_even.moe_layer_us, P = 2 * (3.0 + 32768.0 / 370e3), E = step_even.embedding_bwd_us;
  CHECK(step_even.stage_microbatch_us == Approx(3 * L + P + E));
  const double lm_head = step_emb.stage_microbatch_us - 3 * L - P;
  CHECK(lm_head > 0);
  CHECK(lm_head < L);
  // Activations: one layer's worth moves from stage 0 to stage 1 (1F1B in flight: 2 on stage 0, 1 on stage 1).
  const auto mem_even = dockyard::ComputeMemory(even), mem_emb = dockyard::ComputeMemory(emb);
  const int64_t per_layer_stage1 = mem_emb.stages[1].worst.activations_bytes - mem_even.stages[1].worst.activations_bytes;
  CHECK(per_layer_stage1 > 0);
  CHECK(mem_even.stages[0].worst.activations_bytes - mem_emb.stages[0].worst.activations_bytes == 2 * per_layer_stage1);
  // Parameters: one MoE layer's bytes move from rank 0 to rank 1.
  const auto bytes_even = dockyard::ParamBytesPerRank(even), bytes_emb = dockyard::ParamBytesPerRank(emb);
  CHECK(bytes_even[0] - bytes_emb[0] == bytes_emb[1] - bytes_even[1]);
  CHECK(bytes_even[0] - bytes_emb[0] > 0);
}

TEST_CASE("a layout string places layers, embedding, loss and MTP; a stage may hold only the embedding") {
  TrainingConfig t = Zero1Training(4);
  // "E|tttttL" on pp 2: rank 0 holds only the embedding: 1000 x 64 elements in bfloat16 = 128,000 B.
  t.run.pipeline_layout = "E|tttttL";
  const Plan p = BuildPlan(TinyMixtralLayers(5), PipelineDims(2, 2), t);
  CHECK(p.layer_stage == std::vector<int64_t>(5, 1));
  CHECK(dockyard::ParamBytesPerRank(p)[0] == 128000);
  const auto stages = dockyard::SummarizeStages(p, dockyard::ParamBytesPerRank(p));
  CHECK(stages[0].first_layer == -1);
  CHECK(stages[1].first_layer == 0);
  CHECK(stages[1].last_layer == 4);
  // Time: stage 1 = 5 L + lm_head + P; "Ett|tttL" (the account-for-embedding split as a string)
  // has 3 L + lm_head + P there: 2 L less.
  const dockyard::ClusterSpec c = dockyard::ClusterPreset("h100-sxm");
  TrainingConfig u = Zero1Training(4);
  u.run.pipeline_layout = "Ett|tttL";
  const Plan q = BuildPlan(TinyMixtralLayers(5), PipelineDims(2, 2), u);
  CHECK(q.layer_stage == std::vector<int64_t>{0, 0, 1, 1, 1});
  const auto a = dockyard::SimulateStep(p, c, dockyard::SampleRoutingForPlan(p, {}, 2));
  const auto b = dockyard::SimulateStep(q, c, dockyard::SampleRoutingForPlan(q, {}, 2));
  CHECK(a.stage_microbatch_us - b.stage_microbatch_us == Approx(2 * b.moe_layer_us));

  // With VPP: "Et|tt|t|tL" over pp 2 is vpp 2 (4 stages); virtual stage k on rank k % 2:
  // layers 0 | 1, 2 | 3 | 4 -> ranks 0, 1, 1, 0, 1.
  t.run.pipeline_layout = "Et|tt|t|tL";
  const Plan v = BuildPlan(TinyMixtralLayers(5), PipelineDims(2, 2), t);
  CHECK(v.training.run.vpp == 2);
  CHECK(v.layer_stage == std::vector<int64_t>{0, 1, 1, 0, 1});
  t.run.vpp = 4;
  CHECK_THROWS_WITH_AS(BuildPlan(TinyMixtralLayers(5), PipelineDims(2, 2), t), doctest::Contains("is vpp 2, but --vpp is 4"),
                       dockyard::Error);
  t.run.vpp = 1;

  // A standalone MTP stage: "Ett|ttt|m|L" on pp 4 puts the MTP module's parameters on rank 2,
  // none on rank 3 (the loss).
  t.mtp_layers = 1;
  t.run.pipeline_layout = "Ett|ttt|m|L";
  const Plan m = BuildPlan(TinyMixtralLayers(5), PipelineDims(4, 4), t);
  CHECK(m.mtp_stage == 2);
  CHECK(m.loss_stage == 3);
  CHECK(dockyard::StaticMemoryOnRank(m, 2).params_by_role.count("mtp") == 1);
  CHECK(dockyard::StaticMemoryOnRank(m, 3).params_by_role.count("mtp") == 0);
  // The default places MTP with the loss on the last stage.
  t.run.pipeline_layout.clear();
  const Plan d = BuildPlan(TinyMixtralLayers(5), PipelineDims(4, 4), t);
  CHECK(d.mtp_stage == 3);
  CHECK(dockyard::StaticMemoryOnRank(d, 3).params_by_role.count("mtp") == 1);
}

TEST_CASE("pipeline layout arguments conflict as Megatron says") {
  TrainingConfig t = Zero1Training(4);
  t.run.pipeline_layout = "Ettt|ttL";
  t.run.account_for_loss = true;
  CHECK_THROWS_WITH_AS(BuildPlan(TinyMixtralLayers(5), PipelineDims(2, 2), t),
                       doctest::Contains("cannot be set with other pipeline layout arguments"), dockyard::Error);
  t.run.account_for_loss = false;
  t.pp_layer_split = {3, 2};
  CHECK_THROWS_WITH_AS(BuildPlan(TinyMixtralLayers(5), PipelineDims(2, 2), t),
                       doctest::Contains("cannot be set with training.pp_layer_split"), dockyard::Error);
  t.pp_layer_split.clear();
  // The layout's stage count must be a multiple of pp; a layout's vpp still needs pp > 1.
  t.run.pipeline_layout = "Ett|tt|tL";
  CHECK_THROWS_WITH_AS(BuildPlan(TinyMixtralLayers(5), PipelineDims(2, 2), t), doctest::Contains("3 stages is not a multiple of pp (2)"),
                       dockyard::Error);
  t.run.pipeline_layout = "Ettt|ttL";
  CHECK_THROWS_WITH_AS(BuildPlan(TinyMixtralLayers(5), PipelineDims(1, 1), t), doctest::Contains("needs pp > 1"), dockyard::Error);
}

TEST_CASE("torchtitan: every middle model chunk holds a layer; an even split that leaves one empty takes torchtitan's own split") {
  // 2 layers, pp 2, vpp 2 (4 virtual stages): the even split gives each rank one layer in chunk 0
  // and an empty chunk 1, virtual stage 2 of 4 among them, which torchtitan cannot run (an
  // optimizer per chunk, none for a chunk without parameters). torchtitan's own split at its
  // default weights: 2 + 1 + 1 = 4 effective layers, 1 a stage, the first and last less one:
  // {0, 1, 1, 0}. Layer 0 is virtual stage 1 (rank 1, chunk 0), layer 1 virtual stage 2 (rank 0, chunk 1).
  TrainingConfig t = Zero1Training(4);
  t.dp_sharding = DpSharding::kFsdp;
  t.run.vpp = 2;
  const Plan tt = BuildPlan(TinyMixtralLayers(2), PipelineDims(4, 2), t);
  CHECK(tt.layer_stage == std::vector<int64_t>{1, 0});
  CHECK(tt.layer_chunk == std::vector<int64_t>{0, 1});
  // 4 layers fill every chunk evenly: the even split stands (ranks 0, 1, 0, 1; chunks 0, 0, 1, 1).
  const Plan even = BuildPlan(TinyMixtralLayers(4), PipelineDims(4, 2), t);
  CHECK(even.layer_stage == std::vector<int64_t>{0, 1, 0, 1});
  CHECK(even.layer_chunk == std::vector<int64_t>{0, 0, 1, 1});
  // A split given per virtual stage that leaves a middle one empty is refused, naming it.
  t.pp_layer_split = {1, 1, 0, 0};
  CHECK_THROWS_WITH_AS(BuildPlan(TinyMixtralLayers(2), PipelineDims(4, 2), t),
                       doctest::Contains("training.pp_layer_split [1,1,0,0]: pipeline rank 0's model chunk 1 (virtual stage 2 of 4) holds no "
                                         "decoder layer, and torchtitan refuses a model chunk without parameters"),
                       dockyard::Error);
  t.pp_layer_split = {0, 1, 1, 0};  // the embedding alone first, the norm and output alone last: torchtitan runs it
  CHECK_NOTHROW(BuildPlan(TinyMixtralLayers(2), PipelineDims(4, 2), t));
  // Megatron's distributed optimizer spans the chunks: the even split stands there, one layer a
  // rank in chunk 0 (layers 0, 1 on ranks 0, 1), chunk 1 empty.
  t.pp_layer_split.clear();
  dockyard::ParallelDimsOptions m = PipelineDims(4, 2);
  m.convention = dockyard::Convention::kMegatron;
  t.dp_sharding = DpSharding::kZero1;
  const Plan megatron = BuildPlan(TinyMixtralLayers(2), m, t);
  CHECK(megatron.layer_stage == std::vector<int64_t>{0, 1});
  CHECK(megatron.layer_chunk == std::vector<int64_t>{0, 0});
}
