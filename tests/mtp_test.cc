// MTP modules: parameters against DeepSeek-V3's published count, memory and time on the last stage.
#include "planner/model/mtp.h"

#include <doctest/doctest.h>

#include "planner/cost/cost.h"
#include "planner/cost/gemm_efficiency.h"
#include "planner/model/hf_config.h"
#include "planner/model/inventory.h"
#include "planner/accounting/memory.h"
#include "planner/model/model_file.h"
#include "tests/test_models.h"
#include "tests/tiny_plan.h"

using doctest::Approx;

TEST_CASE("DeepSeek-V3 with its MTP module: 685B parameters (671B + 14B, HF model card)") {
  const auto m = dockyard::LoadModel("testdata/hf/deepseek-v3.json");
  CHECK(m.num_nextn_predict_layers == 1);
  const double main = static_cast<double>(dockyard::BuildInventory(m).totals.total_params);
  const double mtp = static_cast<double>(dockyard::MtpModuleParams(m));
  CHECK(main / 1e9 == Approx(671).epsilon(0.002));
  CHECK(mtp / 1e9 == Approx(14).epsilon(0.05));
  CHECK((main + mtp) / 1e9 == Approx(685).epsilon(0.002));
}

TEST_CASE("MTP on the last stage: parameters, activations and time, only with --mtp-layers") {
  const auto base = dockyard::StaticMemoryOnRank(dockyard::testing::TinyMtpPlan(0), 0);
  CHECK(base.params_by_role.count("mtp") == 0);
  const auto with = dockyard::StaticMemoryOnRank(dockyard::testing::TinyMtpPlan(1), 0);
  // Last layer on rank 0 (tp 1, ep 4): attention 12,288 + 2 norms 128 + router 512 + 2 local
  // experts 12,288; eh_proj 2 x 64 x 64 = 8,192 and 3 norms 192 (pp 1: no embedding copy):
  // 33,600 elements of bf16 = 67,200 B.
  CHECK(with.params_by_role.at("mtp") == 67200);
  CHECK(with.params_bytes == base.params_bytes + 67200);
  // Activations: one more MoE layer and one more loss's logits (1024 tokens x 1024 x (4 B fp32
  // softmax + 2 B bf16 logits), memory.h LossBytesPerLogit: the megatron plan's vocab 1000 padded
  // to 1024, vocab_padding.h).
  const auto mem0 = dockyard::ComputeMemory(dockyard::testing::TinyMtpPlan(0));
  const auto mem1 = dockyard::ComputeMemory(dockyard::testing::TinyMtpPlan(1));
  const auto layer = dockyard::ActivationBytesPerMicrobatch(dockyard::testing::TinyMtpPlan(0), dockyard::ComputeWorkload(dockyard::testing::TinyMtpPlan(0)), 0);
  int64_t one_layer = 0;
  for (const auto& [k, v] : layer) one_layer += k == "embedding" ? 0 : v;  // two MoE layers (+ the first stage's embedding)
  CHECK(mem1.stages[0].worst.activations_bytes - mem0.stages[0].worst.activations_bytes == one_layer / 2 + 1024 * 1024 * 6);
  // Time: the last stage also runs one MoE layer, one lm_head and eh_proj (planner/cost/mtp_time_test).
  const auto routing = dockyard::testing::TinyEp4Routing();
  const dockyard::ClusterSpec c = dockyard::ClusterPreset("h100-sxm");
  const auto t0 = dockyard::SimulateStep(dockyard::testing::TinyMtpPlan(0), c, routing);
  const auto t1 = dockyard::SimulateStep(dockyard::testing::TinyMtpPlan(1), c, routing);
  const double lm_head = t0.stage_microbatch_us - 2 * t0.moe_layer_us - t0.embedding_bwd_us;  // and the embedding's backward
  const double eh_proj = dockyard::LinearUs(1024, 64, 128, false, 989, dockyard::ComputeKnobs{}) +
                         dockyard::LinearUs(1024, 64, 128, true, 989, dockyard::ComputeKnobs{});
  CHECK(t1.stage_microbatch_us == Approx(t0.stage_microbatch_us + t0.moe_layer_us + lm_head + eh_proj));
  CHECK(t1.model_flops_per_token > t0.model_flops_per_token);
}

TEST_CASE("MTP under FSDP: the module's eh_proj, norms and embedding copy are sharded like the rest of the stage") {
  // torchtitan convention (FSDP over dp_shard 4), tp 1, ep 4 (efsdp 1), pp 1.
  dockyard::TrainingConfig t;
  t.mtp_layers = 1;
  const auto plan = dockyard::testing::TinyEp4Plan(t);
  REQUIRE(*plan.training.dp_sharding == dockyard::DpSharding::kFsdp);
  REQUIRE(plan.dims.dp_shard == 4);
  const auto mem = dockyard::StaticMemoryOnRank(plan, 0);
  // Last-layer copy: attention (q 64x64 + k 32x64 + v 32x64 + o 64x64 = 12,288) / 4 = 3,072,
  // 2 norms 64 / 4 = 32, router 8x64 / 4 = 128, 2 local experts 12,288 (efsdp 1: not cut);
  // extras: eh_proj [64, 128] -> [16, 128] = 2,048, 3 norms 64 / 4 = 48 (pp 1: no embedding):
  // 3,072 + 32 + 128 + 12,288 + 2,048 + 48 = 17,616 elements, fp32 FSDP shard = 70,464 B
  // (unsharded extras would give 15,520 + 8,384 = 23,904 elements, 95,616 B).
  CHECK(mem.params_by_role.at("mtp") == 70464);

  // pp 2 (world 8, dp_shard 4): the last stage also keeps the word embedding [1000, 64], cut
  // over dp_shard 4 to [250, 64] = 16,000 elements; the output head is the stage's lm_head (no
  // second copy). Layer copy and extras as above: 17,616 + 16,000 = 33,616 elements x 4 B.
  dockyard::ParallelDimsOptions d;
  d.world_size = 8;
  d.pp = 2;
  d.ep = 4;
  t.seq_len = 1024;
  const auto pp2 = dockyard::BuildPlan(dockyard::testing::TinyMixtral(), d, t);
  REQUIRE(pp2.dims.dp_shard == 4);
  const auto last = dockyard::StaticMemoryOnRank(pp2, 4);  // first rank of stage 1
  CHECK(last.params_by_role.at("mtp") == 134464);
  CHECK(last.params_by_role.at("lm_head") == 16000 * 4);  // the head is counted once, as lm_head
  CHECK(dockyard::StaticMemoryOnRank(pp2, 0).params_by_role.count("mtp") == 0);
}

TEST_CASE("MTP under FSDP is its own unit: the gather and reduce-scatter buffers and the unsharded units count it") {
  // pp 2 (world 8, ep 4, dp_shard 4), torchtitan FSDP. Stage 1's units, model-parallel elements:
  // layer 1 attention 12,288 + norms 128 + router 512 = 12,928 (its 2 local experts, 12,288, a
  // unit of their own on the sparse mesh) and lm_head 64,000 + final norm 64 = 64,064. One MTP
  // module: the layer copy's 12,928 + eh_proj 8,192 + 3 norms 192 + the embedding copy 64,000 =
  // 85,312 (and its experts' 12,288 apart): the largest unit.
  auto plan = [](int64_t mtp) {
    dockyard::TrainingConfig t;
    t.mtp_layers = mtp;
    t.seq_len = 1024;
    dockyard::ParallelDimsOptions d;
    d.world_size = 8;
    d.pp = 2;
    d.ep = 4;
    return dockyard::BuildPlan(dockyard::testing::TinyMixtral(), d, t);
  };
  const auto without = dockyard::ComputeMemory(plan(0)).stages[1].worst.comm_buffers_by_use;
  const auto with = dockyard::ComputeMemory(plan(1)).stages[1].worst.comm_buffers_by_use;
  CHECK(without.at("fsdp_all_gather") == 64064 * 2 * 2);  // two units in bf16
  CHECK(with.at("fsdp_all_gather") == 85312 * 2 * 2);
  CHECK(with.at("fsdp_reduce_scatter") == 85312 * 4);  // fp32 gradients
  // pp > 1 keeps the other units unsharded: 12,928 + 12,288 + 64,064 + 85,312 + 12,288 = 186,880
  // elements, less two of the largest: 16,256 x 2 B; and every unit's gradients, 186,880 x 4 B.
  CHECK(without.at("fsdp_unsharded_params") == 0);
  CHECK(with.at("fsdp_unsharded_params") == 16256 * 2);
  CHECK(without.at("fsdp_unsharded_grads") == 89280 * 4);
  CHECK(with.at("fsdp_unsharded_grads") == 186880 * 4);
  // Stage 0 holds no MTP module: its buffers do not move.
  CHECK(dockyard::ComputeMemory(plan(1)).stages[0].worst.comm_buffers_by_use ==
        dockyard::ComputeMemory(plan(0)).stages[0].worst.comm_buffers_by_use);
}

TEST_CASE("MTP under --precision fp8: its GEMM weights get FP8 copies too") {
  // Megatron convention (ZeRO-1: parameters not sharded), tp 1, ep 4, one module on rank 0: the
  // layer copy's attention 12,288 and 2 local experts 12,288, and eh_proj 8,192 are GEMM weights
  // (norms and router are not): 32,768 elements x 2 copies (row- and column-wise) x 1 B.
  auto fp8 = [](int64_t mtp) {
    dockyard::TrainingConfig t;
    t.mtp_layers = mtp;
    t.precision = "fp8";
    return dockyard::StaticMemoryOnRank(dockyard::testing::TinyEp4Plan(t, dockyard::Convention::kMegatron), 0);
  };
  CHECK(fp8(1).params_by_role.at("fp8_weights") - fp8(0).params_by_role.at("fp8_weights") == 32768 * 2);
  CHECK(fp8(1).params_bytes - fp8(0).params_bytes == 67200 + 32768 * 2);
}
