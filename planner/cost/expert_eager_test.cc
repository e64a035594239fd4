// Megatron-Core's eager ops around the routed experts' grouped GEMMs (kernels_model.h
// ExpertEagerKernels): gpt-oss's activation clamp and the second linear's probability-scaled bias,
// which TEGroupedMLP runs as PyTorch ops unless TransformerEngine's op fuser is on. Hand arithmetic
// in each case.
#include <doctest/doctest.h>

#include "planner/accounting/memory.h"
#include "planner/accounting/workload.h"
#include "planner/cost/cluster.h"
#include "planner/cost/cost.h"
#include "planner/cost/kernels_model.h"
#include "planner/cost/network.h"
#include "planner/model/model_file.h"
#include "planner/routing/plan_routing.h"
#include "tests/test_models.h"
#include "tests/moe_phase.h"

namespace dockyard {
namespace {

using testing::MoePhaseUs;

// gpt-oss-120b as Megatron-Bridge 26.04 ran it on 64 GB200 (run G04 of testdata/fidelity): EP 64,
// micro-batches of 4 x 4,096 tokens, 5 per step.
TrainingConfig G04Training() {
  TrainingConfig t;
  t.seq_len = 4096;
  t.micro_batch_size = 4;
  t.num_microbatches = 5;
  t.recompute = Recompute::kSelective;
  t.recompute_modules = {"layernorm", "moe_act"};
  t.dispatcher = Dispatcher::kDeepEp;
  t.moe_flex_dispatcher_backend = FlexBackend::kHybridEp;
  return t;
}

struct GroupedGemmDelta {
  double forward = 0, backward = 0, imbalance = 1;
};
// The grouped GEMM phase of `t` with the op fuser off minus on (gb200-nvl72, uniform routing).
GroupedGemmDelta EagerDelta(const ModelSpec& m, TrainingConfig t, Convention convention = Convention::kMegatron) {
  ParallelDimsOptions d;
  d.world_size = 64;
  d.ep = 64;
  d.convention = convention;
  const ClusterSpec c = ClusterPreset("gb200-nvl72");
  const Machine machine = MachineOf(c, 0);  // 72 GPUs per node: one NVLink domain
  const Plan eager = BuildPlan(m, d, t, machine);
  t.run.use_transformer_engine_op_fuser = true;
  const Plan fused = BuildPlan(m, d, t, machine);
  const RoutingResult routing = SampleRoutingForPlan(eager, RoutingSpec{}, 4);
  const CostBreakdown a = SimulateStep(eager, c, routing), b = SimulateStep(fused, c, routing);
  CHECK(a.routing_imbalance == b.routing_imbalance);
  return {MoePhaseUs(a, "grouped_gemm", "forward") - MoePhaseUs(b, "grouped_gemm", "forward"),
          MoePhaseUs(a, "grouped_gemm", "backward") - MoePhaseUs(b, "grouped_gemm", "backward"), a.routing_imbalance};
}

}  // namespace

TEST_CASE("ExpertEagerKernels: bytes of the clamp and of the probability-scaled bias, per pass and probability dtype") {
  // 256 rows, F 32, D 64, BF16 activations.
  ExpertEagerShape s;
  s.rows = 256, s.f = 32, s.hidden = 64, s.act_bytes = 2, s.probs_bytes = 4, s.clamp = true, s.fc2_bias = true;
  auto bytes = [](const std::vector<KernelBytes>& k, const char* name) {
    for (const KernelBytes& x : k)
      if (x.name == name) return x.bytes;
    return 0.0;
  };
  const auto fwd = ExpertEagerKernels(s, false), bwd = ExpertEagerKernels(s, true);
  // Clamp forward: two clamps (2 F x 2 bytes each) and the cat (4 F x 2): 16 bytes x F per row:
  // 256 x 32 x 16 = 131,072.
  CHECK(bytes(fwd, "expert_act_clamp") == 131072);
  // Clamp backward: gate half 3 x 2 + 2 = 8, up half 4 x 2 + 6 = 14, the chunk's cat 4 x 2 = 8:
  // 30 bytes x F per row: 256 x 32 x 30 = 245,760.
  CHECK(bytes(bwd, "expert_act_clamp") == 245760);
  // Bias with fp32 probabilities: forward b*p 4 + add 2+4+4 + cat 8 + cast 4+2 = 28 bytes x D per
  // row: 256 x 64 x 28 = 458,752; backward cast 2+4 + add's cast 4+2 + split's cat 4 + two
  // gradients 2 x 12 = 40: 256 x 64 x 40 = 655,360.
  CHECK(bytes(fwd, "expert_fc2_bias") == 458752);
  CHECK(bytes(bwd, "expert_fc2_bias") == 655360);
  // BF16 probabilities (the all_to_all dispatcher, Megatron's default router dtype): no casts;
  // forward 2 + 2+2+2 + 4 = 12, backward 4 + 2 x 6 = 16 bytes x D per row.
  s.probs_bytes = 2;
  CHECK(bytes(ExpertEagerKernels(s, false), "expert_fc2_bias") == 256 * 64 * 12);
  CHECK(bytes(ExpertEagerKernels(s, true), "expert_fc2_bias") == 256 * 64 * 16);
  s.rows = 0;
  CHECK(ExpertEagerKernels(s, false).empty());
}

TEST_CASE("ExpertEagerShapeOf: Megatron without the op fuser, from the model's clamp and expert biases") {
  const ModelSpec oss = LoadModel("testdata/hf/gpt-oss-120b.json");
  CHECK(oss.moe.swiglu_limit == 7.0);
  CHECK(oss.moe.expert_bias);
  TrainingConfig t;  // all_to_all
  ExpertEagerShape s = ExpertEagerShapeOf(oss, t, true, 2880, 2);
  CHECK(s.clamp);
  CHECK(s.fc2_bias);
  CHECK(s.probs_bytes == 2);
  t.dispatcher = Dispatcher::kDeepEp;  // the flex dispatcher casts the probabilities to fp32
  CHECK(ExpertEagerShapeOf(oss, t, true, 2880, 2).probs_bytes == 4);
  // torchtitan, or Megatron with the TransformerEngine op fuser: none.
  s = ExpertEagerShapeOf(oss, t, false, 2880, 2);
  CHECK((!s.clamp && !s.fc2_bias));
  t.run.use_transformer_engine_op_fuser = true;
  s = ExpertEagerShapeOf(oss, t, true, 2880, 2);
  CHECK((!s.clamp && !s.fc2_bias));
  // A model without either (Mixtral): none.
  s = ExpertEagerShapeOf(testing::TinyMixtral(), TrainingConfig{}, true, 32, 2);
  CHECK((!s.clamp && !s.fc2_bias));
}

TEST_CASE("gpt-oss-120b on 64 GB200 (G04's layout): the eager ops in the grouped GEMM phase, the clamp recomputed under moe_act") {
  const ModelSpec oss = LoadModel("testdata/hf/gpt-oss-120b.json");
  const GroupedGemmDelta d = EagerDelta(oss, G04Training());
  // Rows on the slowest rank: 4 x 4,096 tokens x top-4 = 65,536, times the sample's imbalance; F =
  // D = 2,880; gb200-nvl72's HBM 8,000 GB/s at 0.666 = 5,328 bytes per us.
  const double rows = 65536.0 * d.imbalance, bw = 8000.0 * 0.666 * 1e3;
  // Forward: clamp 16 + bias 28 (fp32 probabilities after HybridEP) = 44 bytes x 2,880 per row:
  // 65,536 x 126,720 / 5.328e6 = 1,558.7 us x imbalance.
  CHECK(d.forward == doctest::Approx(rows * 2880.0 * 44.0 / bw).epsilon(1e-9));
  CHECK(d.forward / d.imbalance == doctest::Approx(1558.7).epsilon(1e-4));
  // Backward: clamp 30 + bias 40, and moe_act's recomputed clamp 16: 86 bytes x 2,880 per row,
  // 3,046.5 us x imbalance.
  CHECK(d.backward == doctest::Approx(rows * 2880.0 * 86.0 / bw).epsilon(1e-9));
  // Without recomputation the backward is its own 70 bytes x 2,880 per row.
  TrainingConfig none = G04Training();
  none.recompute = Recompute::kNone;
  none.recompute_modules.clear();
  const GroupedGemmDelta n = EagerDelta(oss, none);
  CHECK(n.backward == doctest::Approx(65536.0 * n.imbalance * 2880.0 * 70.0 / bw).epsilon(1e-9));
  // Full recomputation re-runs the whole forward, bias included: 70 + 44 = 114.
  TrainingConfig full = none;
  full.recompute = Recompute::kFull;
  const GroupedGemmDelta f = EagerDelta(oss, full);
  CHECK(f.backward == doctest::Approx(65536.0 * f.imbalance * 2880.0 * 114.0 / bw).epsilon(1e-9));
  // The all_to_all dispatcher keeps the router's BF16 probabilities: bias 12 forward.
  TrainingConfig a2a = G04Training();
  a2a.dispatcher = Dispatcher::kAllToAll;
  a2a.moe_flex_dispatcher_backend.reset();
  const GroupedGemmDelta b = EagerDelta(oss, a2a);
  CHECK(b.forward == doctest::Approx(65536.0 * b.imbalance * 2880.0 * (16.0 + 12.0) / bw).epsilon(1e-9));
}

TEST_CASE("the eager clamp's saved copy: 2F more per received row without moe_act recomputation, none with it or the op fuser") {
  const ModelSpec oss = LoadModel("testdata/hf/gpt-oss-120b.json");
  ParallelDimsOptions d;
  d.world_size = 64;
  d.ep = 64;
  d.convention = Convention::kMegatron;
  const Machine machine = MachineOf(ClusterPreset("gb200-nvl72"), 0);
  auto routed = [&](TrainingConfig t) {
    const Plan plan = BuildPlan(oss, d, t, machine);
    const Workload w = ComputeWorkload(plan);
    CHECK(w.eager_expert_clamp == !t.run.use_transformer_engine_op_fuser);
    return LayerActivations(plan.model, RecomputeSetOf(t), w, true).routed_experts;
  };
  TrainingConfig none = G04Training();
  none.recompute = Recompute::kNone;
  none.recompute_modules.clear();
  TrainingConfig fused = none;
  fused.run.use_transformer_engine_op_fuser = true;
  // The received rows R_max (the memory bound: 4 x 4,096 x top-4 x the imbalance) x 2 x 2,880 x 2 B:
  // the cat of the clamped halves, which the fused activation saves beside fc1's output.
  const Workload w = ComputeWorkload(BuildPlan(oss, d, none, machine));
  CHECK(routed(none) - routed(fused) == w.received_rows * 2 * 2880 * 2);
  CHECK(w.received_rows >= 65536);
  // moe_act recomputes the activation: its checkpoint keeps fc1's output only, with or without the clamp.
  TrainingConfig act = G04Training();
  TrainingConfig act_fused = act;
  act_fused.run.use_transformer_engine_op_fuser = true;
  CHECK(routed(act) == routed(act_fused));
}

}  // namespace dockyard

