// --fp8-param-gather under Megatron's distributed optimizer (dp_sharding zero1): the step's
// parameter all-gather sends the FP8 GEMM weights in 1 B, the parameters of those weights are
// kept in FP8 only (no param_dtype copy), and the time follows the bytes.
#include <doctest/doctest.h>

#include "planner/accounting/comm.h"
#include "planner/accounting/memory.h"
#include "planner/accounting/workload.h"
#include "planner/base/error.h"
#include "planner/model/precision.h"
#include "planner/cost/cost.h"
#include "planner/cost/network.h"
#include "tests/test_models.h"
#include "tests/tiny_plan.h"

using doctest::Approx;

namespace {

// The tiny model (hidden 64, 2 MoE layers of 8 experts, vocab 1000) under --convention megatron on
// `world` GPUs with EP 4: dp = world, edp = world / 4, zero1 (megatron's default).
dockyard::Plan MegatronPlan(dockyard::TrainingConfig t, int64_t world) {
  dockyard::ParallelDimsOptions d;
  d.world_size = world;
  d.ep = 4;
  d.convention = dockyard::Convention::kMegatron;
  t.seq_len = 1024;
  return dockyard::BuildPlan(dockyard::testing::TinyMixtral(), d, t);
}

dockyard::TrainingConfig Fp8(bool gather) {
  dockyard::TrainingConfig t;
  t.precision = "fp8";
  t.fp8_param_gather = gather;
  return t;
}

// bytes_per_call of rank 0's zero1_all_gather_params on the dense / sparse mesh.
int64_t Zero1Gather(const dockyard::Plan& plan, bool sparse) {
  for (const auto& e : dockyard::ComputeComm(plan, 0).entries)
    if (e.purpose == "zero1_all_gather_params" && (e.mesh == "sparse") == sparse) return e.bytes_per_call;
  return -1;
}

}  // namespace

TEST_CASE("zero1 FP8 parameter all-gather: the FP8 GEMM weights travel in 1 B, the rest in param_dtype") {
  const auto base = MegatronPlan(Fp8(false), 8), gather = MegatronPlan(Fp8(true), 8);
  REQUIRE(*gather.training.dp_sharding == dockyard::DpSharding::kZero1);
  // Dense elements of a rank (tp 1): embedding 65,536 + lm_head 65,536 (vocab 1000 padded by
  // Megatron-LM to 1024 = 8 x 128, vocab_padding.h: 1024 x 64) + final norm 64 + 2 layers x
  // (attention 64x64 + 2 x 64x32 + 64x64 = 12,288, 2 norms 128, router 8x64 = 512) = 156,992;
  // 2 B each = 313,984 B. With the flag the 2 x 12,288 = 24,576 attention elements are 1 B:
  // 132,416 x 2 + 24,576 x 1 = 289,408 B.
  CHECK(Zero1Gather(base, false) == 313984);
  CHECK(Zero1Gather(gather, false) == 289408);
  // Sparse: 2 local experts x 3 x 64x32 x 2 layers = 24,576 elements over edp 2: 49,152 B -> 24,576 B.
  CHECK(Zero1Gather(base, true) == 49152);
  CHECK(Zero1Gather(gather, true) == 24576);
  // The gradients' reduce-scatters do not move (main grads stay in grad_dtype).
  for (const auto& e : dockyard::ComputeComm(gather, 0).entries)
    if (e.purpose == "zero1_reduce_scatter_grads") CHECK(e.bytes_per_call == (e.mesh == "sparse" ? 24576 * 4 : 156992 * 4));
  // Blockwise adds one fp32 scale per 128x128 block: ceil(24,576 x (1 + 4 / 16,384)) = 24,582 B.
  auto blockwise = Fp8(true);
  blockwise.fp8_recipe = "blockwise";
  CHECK(Zero1Gather(MegatronPlan(blockwise, 8), true) == 24582);
}

TEST_CASE("zero1 FP8 parameter all-gather: the step's parameter all-gather time follows the FP8 bytes") {
  const auto base = MegatronPlan(Fp8(false), 8), gather = MegatronPlan(Fp8(true), 8);
  const dockyard::ClusterSpec c = dockyard::ClusterPreset("h100-sxm");
  const auto routing = dockyard::testing::TinyEp4Routing();
  const auto t0 = dockyard::SimulateStep(base, c, routing), t1 = dockyard::SimulateStep(gather, c, routing);
  // One node: the dense group is ranks 0..7 (stride 1), the sparse (edp) group {0, 4}; an
  // all-gather's wire bytes are bytes x (n - 1) / n. Nothing else of the step moves.
  auto us = [&](double bytes, int64_t n, int64_t stride) {
    return dockyard::StepCollectiveUs(bytes * (n - 1) / n, n, dockyard::MembersPerDomainStrided(n, stride, 8), false, c);
  };
  const double saved = us(307840, 8, 1) - us(283264, 8, 1) + us(49152, 2, 4) - us(24576, 2, 4);
  CHECK(saved > 0);
  CHECK(t0.dp_step_comm_us - t1.dp_step_comm_us == Approx(saved));
  CHECK(t0.moe_layer_us == Approx(t1.moe_layer_us));
  // The step-end passes (kernels_model.h StepEndKernels) read and write the same gradient buffer
  // and the same fp32 shard either way (the FP8 weights' fp32 master replaces the bf16 params'),
  // and the written-back copy is counted at param_dtype: the optimizer does not move.
  CHECK(t0.optimizer_us == Approx(t1.optimizer_us));
  CHECK(t0.step_time_us - t1.step_time_us == Approx(saved));
}

TEST_CASE("zero1 FP8 parameter all-gather: the FP8 GEMM weights are kept in FP8 only") {
  // World 4, EP 4: dp 4, edp 1. FP8 GEMM weight elements of a rank: attention 2 x 12,288 = 24,576
  // (dense) + routed experts 2 layers x 2 local x 6,144 = 24,576 (sparse).
  const auto base = dockyard::StaticMemoryOnRank(MegatronPlan(Fp8(false), 4), 0);
  const auto gather = dockyard::StaticMemoryOnRank(MegatronPlan(Fp8(true), 4), 0);
  // Without the flag each keeps its bf16 parameter (2 B) beside the FP8 copies (2 B); with it the
  // parameter is the row-wise FP8 copy: (24,576 + 24,576) x 2 B = 98,304 B less, copies unchanged.
  CHECK(base.params_by_role.at("attention") == 49152);
  CHECK(gather.params_by_role.at("attention") == 0);
  CHECK(gather.params_by_role.at("routed_experts") == 0);
  CHECK(gather.params_by_role.at("fp8_weights") == base.params_by_role.at("fp8_weights"));
  CHECK(gather.params_by_role.at("fp8_weights") == 98304);
  CHECK(base.params_bytes - gather.params_bytes == 98304);
  CHECK(gather.params_by_role.at("router") == base.params_by_role.at("router"));
  // Gradients (grad_dtype) and the fp32 master + moments do not move.
  CHECK(gather.grads_bytes == base.grads_bytes);
  CHECK(gather.optimizer_bytes == base.optimizer_bytes);
  CHECK(dockyard::ComputeMemory(MegatronPlan(Fp8(false), 4)).worst_peak_bytes -
            dockyard::ComputeMemory(MegatronPlan(Fp8(true), 4)).worst_peak_bytes ==
        98304);
}

TEST_CASE("zero1 FP8 parameters: an fp32 master is kept even with float32 param_dtype; MTP GEMM weights too") {
  auto fp32 = [](bool gather) {
    auto t = Fp8(gather);
    t.param_dtype = "float32";
    return dockyard::StaticMemoryOnRank(MegatronPlan(t, 4), 0);
  };
  const auto base = fp32(false), gather = fp32(true);
  // float32 params are their own master (no master copy); FP8 parameters need one
  // (distrib_optimizer.py shard_fp32_from_float8): attention 24,576 / dp 4 x 4 B = 24,576 B and
  // experts 24,576 / edp 1 x 4 B = 98,304 B more optimizer state; 49,152 x 4 B fewer parameter bytes.
  CHECK(gather.optimizer_bytes - base.optimizer_bytes == 24576 + 98304);
  CHECK(base.params_bytes - gather.params_bytes == 196608);

  // One MTP module (pp 1: no embedding copy): the last layer's attention 12,288 + local experts
  // 12,288 + eh_proj 64 x 128 = 8,192 FP8 GEMM elements, 32,768 x 2 B = 65,536 B less than without the
  // flag, beyond the decoder layers' 98,304 B.
  auto mtp = [](bool gather) {
    auto t = Fp8(gather);
    t.mtp_layers = 1;
    return dockyard::StaticMemoryOnRank(MegatronPlan(t, 4), 0);
  };
  const auto mtp0 = mtp(false), mtp1 = mtp(true);
  CHECK(mtp0.params_bytes - mtp1.params_bytes == 98304 + 65536);
  CHECK(mtp0.params_by_role.at("mtp") - mtp1.params_by_role.at("mtp") == 65536);
  CHECK(mtp1.optimizer_bytes == mtp0.optimizer_bytes);
}

TEST_CASE("FP8 parameter all-gather: zero1 only under Megatron's distributed optimizer, never ddp") {
  auto t = Fp8(true);
  CHECK_NOTHROW(MegatronPlan(t, 4));  // zero1 (megatron's default)
  t.dp_sharding = dockyard::DpSharding::kFsdp;
  CHECK_NOTHROW(MegatronPlan(t, 4));
  t.dp_sharding = dockyard::DpSharding::kDdp;
  CHECK_THROWS_WITH_AS(MegatronPlan(t, 4),
                       doctest::Contains("fp8_param_gather: the FP8 parameter all-gather is modelled for dp_sharding fsdp "
                                         "and, with convention megatron, zero1"),
                       dockyard::Error);
  CHECK_THROWS_WITH_AS(MegatronPlan(t, 4), doctest::Contains("dp_sharding is \"ddp\""), dockyard::Error);
  t.dp_sharding = dockyard::DpSharding::kZero1;
  CHECK_THROWS_WITH_AS(dockyard::testing::TinyEp4Plan(t, dockyard::Convention::kTorchtitan),
                       doctest::Contains("dp_sharding is \"zero1\" under convention torchtitan"), dockyard::Error);
  CHECK_FALSE(dockyard::Fp8ModelParams(Fp8(false)));
}

TEST_CASE("MXFP8 parameter all-gather under the distributed optimizer moves BF16 into the gradient buffer") {
  auto t = Fp8(true);
  t.fp8_recipe = "mxfp8";
  t.fp8_param_gather = true;
  const auto gather = MegatronPlan(t, 8);
  REQUIRE(*gather.training.dp_sharding == dockyard::DpSharding::kZero1);
  // Megatron gathers the BF16 of the master shard (param_and_grad_buffer.py shared_buffer), so the
  // bytes equal the BF16 all-gather: dense 156,992 x 2 = 313,984 B, sparse 24,576 x 2 = 49,152 B
  // (the first test's figures without the flag; tensorwise sends 289,408 and 24,576).
  CHECK(Zero1Gather(gather, false) == 313984);
  CHECK(Zero1Gather(gather, true) == 49152);
  CHECK(dockyard::Fp8ParamGatherBytesPerElement(t, 2) == 2);
  // No separate parameter buffer: the FP8 GEMM weights are held as their two MXFP8 copies only.
  // Attention 24,576 + routed experts 24,576 elements x 2 B = 98,304 B less, as with tensorwise FP8 parameters.
  const auto without = dockyard::StaticMemoryOnRank(MegatronPlan([] { auto m = Fp8(false); m.fp8_recipe = "mxfp8"; return m; }(), 8), 0);
  const auto with = dockyard::StaticMemoryOnRank(gather, 0);
  CHECK(with.params_by_role.at("attention") == 0);
  CHECK(with.params_by_role.at("fp8_weights") == 101376);  // 49,152 x 2.0625
  CHECK(without.params_bytes - with.params_bytes == 98304);
}
