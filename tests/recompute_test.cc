// Selective recomputation by module: memory deltas per module by hand, the default set, validation,
// and the backward time each module adds.
#include "planner/model/recompute.h"

#include <doctest/doctest.h>

#include "planner/cost/cost.h"
#include "planner/base/error.h"
#include "planner/accounting/memory.h"
#include "planner/model/training_json.h"
#include "tests/test_models.h"
#include "tests/tiny_plan.h"

using dockyard::RecomputeSet;
using doctest::Approx;

namespace {

// TinyMixtral (D 64, 4 heads of 16, 2 KV heads, 8 experts top-2, F 32) with one shared expert of
// F 64 and a dense width of 96; 128 tokens, tp 1, bf16, 256 received rows.
dockyard::ModelSpec Tiny() {
  auto m = dockyard::testing::TinyMixtral();
  m.moe.num_shared_experts = 1;
  m.moe.shared_expert_intermediate_size = 64;
  m.intermediate_size = 96;
  return m;
}
dockyard::Workload Work() {
  dockyard::Workload w;
  w.tokens = w.routed_tokens = w.dispatch_tokens = 128;
  w.received_rows = w.mean_received_rows = 256;
  w.act_bytes = 2;
  w.tp_shards = 1;
  w.expert_f_local = 32;
  return w;
}
dockyard::LayerActivationBytes Moe(const RecomputeSet& s) {
  return dockyard::LayerActivations(Tiny(), s, Work(), true);
}
dockyard::LayerActivationBytes Dense(const RecomputeSet& s) {
  return dockyard::LayerActivations(Tiny(), s, Work(), false);
}

}  // namespace

TEST_CASE("Nothing recomputed: the layer's activations by hand") {
  const auto g = Moe({});
  // Attention: norm in + out 2 x 128 x 64, qkv 128 x 128, core out 128 x 64, all bf16, + logsumexp
  // 128 x 4 heads x 4 B: (16,384 + 16,384 + 8,192) x 2 + 2,048 = 83,968 B.
  CHECK(g.attention == 83968);
  CHECK(g.norm == 32768);  // post-attention norm in + out
  // Router: 128 x 8 x 8 (fp32 logits, scores) + 128 x 2 x 12 (weights, indices) = 11,264 B.
  CHECK(g.router == 11264);
  // Routed: 256 rows in and out (2 x 64), 4 x 32 intermediates, 256 combined rows of 64: 163,840 B.
  CHECK(g.routed_experts == 163840);
  CHECK(g.shared_experts == 128 * 64 * 4 * 2);
  CHECK(Dense({}).dense_mlp == 128 * 96 * 4 * 2);
}

TEST_CASE("Memory delta of each Megatron module, by hand") {
  const auto none = Moe({});
  RecomputeSet s;
  s.layernorm = true;  // norm outputs: 128 x 64 x 2 B in the attention block and in the MLP block
  CHECK(none.attention - Moe(s).attention == 16384);
  CHECK(none.norm - Moe(s).norm == 16384);
  s = {};
  s.core_attn = true;  // core output 128 x 64 x 2 + logsumexp 2,048
  CHECK(none.attention - Moe(s).attention == 18432);
  s = {};
  s.moe_act = true;  // silu(gate) and the product: 256 x 32 x 2 x 2 B
  CHECK(none.routed_experts - Moe(s).routed_experts == 32768);
  CHECK(Moe(s).shared_experts == none.shared_experts);
  s = {};
  s.shared_experts = true;
  CHECK(Moe(s).shared_experts == 0);
  s = {};
  s.moe = true;  // the whole block after its input
  CHECK(Moe(s).router == 0);
  CHECK(Moe(s).routed_experts == 0);
  CHECK(Moe(s).shared_experts == 0);
  CHECK(Moe(s).attention == none.attention);
  s = {};
  s.mlp = true;
  CHECK(Dense(s).dense_mlp == 0);
  // The default set: norms and every SwiGLU activation, as "selective" always was.
  const auto d = Moe(dockyard::DefaultSelectiveSet());
  CHECK(d.attention == none.attention - 16384);
  CHECK(d.routed_experts == none.routed_experts - 32768);
  CHECK(d.shared_experts == none.shared_experts - 128 * 64 * 2 * 2);
  CHECK(Dense(dockyard::DefaultSelectiveSet()).dense_mlp == 128 * 96 * 2 * 2);
  CHECK(dockyard::LayerActivations(Tiny(), dockyard::Recompute::kSelective, Work(), true).attention == d.attention);
}

TEST_CASE("MLA up-projection outputs") {
  const auto m = dockyard::testing::WithTinyMla(Tiny());
  RecomputeSet s;
  s.mla_up_proj = true;
  // q_b out 128 x 4 x (16 + 8) and kv_b out 128 x 4 x (16 + 16), bf16: (12,288 + 16,384) x 2 = 57,344 B.
  CHECK(dockyard::LayerActivations(m, {}, Work(), true).attention - dockyard::LayerActivations(m, s, Work(), true).attention == 57344);
}

TEST_CASE("Module lists: names, defaults and errors") {
  dockyard::TrainingConfig t;
  t.recompute = dockyard::Recompute::kSelective;
  CHECK(dockyard::RecomputeSetOf(t).layernorm);
  CHECK(dockyard::RecomputeSetOf(t).mlp_act);
  t.recompute_modules = {"moe", "layernorm"};
  const RecomputeSet s = dockyard::RecomputeSetOf(t);
  CHECK(s.moe);
  CHECK(s.layernorm);
  CHECK_FALSE(s.moe_act);
  CHECK_FALSE(s.mlp_act);
  t.recompute_modules = {"moe", "moe_actt"};
  CHECK_THROWS_WITH_AS(dockyard::ValidateTraining(t, "--"), doctest::Contains("--recompute-modules: unknown module \"moe_actt\""),
                       dockyard::Error);
  t.recompute_modules = {"moe", "moe"};
  CHECK_THROWS_WITH_AS(dockyard::ValidateTraining(t, "--"), doctest::Contains("given twice"), dockyard::Error);
  t.recompute_modules = {"moe"};
  t.recompute = dockyard::Recompute::kFull;
  CHECK_THROWS_WITH_AS(dockyard::ValidateTraining(t, "--"), doctest::Contains("only recomputed with recompute selective"), dockyard::Error);
  CHECK(dockyard::RecomputeSetOf(t).moe == false);  // full: no selective set
}

TEST_CASE("Backward time: each module re-runs its forward (--compute-model gemm)") {
  const auto routing = dockyard::testing::TinyEp4Routing();
  const dockyard::ClusterSpec c = dockyard::ClusterPreset("h100-sxm");
  const dockyard::ComputeModel gemm = dockyard::ComputeModel::kGemm;  // the older model's fixed efficiencies, which the figures below use
  auto run = [&](dockyard::Recompute rc, std::vector<std::string> modules) {
    dockyard::TrainingConfig t;
    t.recompute = rc;
    t.recompute_modules = modules;
    return dockyard::SimulateStep(dockyard::testing::TinyEp4Plan(t), c, routing, gemm);
  };
  auto phase = [](const dockyard::CostBreakdown& cb, const char* name, const char* dir) {
    for (const auto& p : cb.phases)
      if (PhaseName(p.phase) == std::string(name) && DirectionName(p.direction) == std::string(dir)) return p.time_us;
    return -1.0;
  };
  const auto none = run(dockyard::Recompute::kNone, {});
  // Norms and SwiGLU cost nothing under --compute-model gemm (their kernels are not modelled).
  CHECK(run(dockyard::Recompute::kSelective, {"layernorm", "moe_act"}).step_time_us == none.step_time_us);
  // core_attn: the flash forward again, 2 x 1024 x 512 x 4 heads x 32 FLOP at 50 % of 989 TFLOP/s.
  const auto core = run(dockyard::Recompute::kSelective, {"core_attn"});
  CHECK(phase(core, "attention", "backward") - phase(none, "attention", "backward") == Approx(2.0 * 1024 * 512 * 4 * 32 / (989e6 * 0.5)));
  // moe: the whole block again, its dispatch and combine included.
  const auto moe = run(dockyard::Recompute::kSelective, {"moe"});
  CHECK(phase(moe, "dispatch", "backward") == Approx(2 * phase(none, "dispatch", "forward")));
  CHECK(phase(moe, "grouped_gemm", "backward") == Approx(3 * phase(none, "grouped_gemm", "forward")));
  CHECK(phase(moe, "router", "backward") == Approx(3 * phase(none, "router", "forward")));
  CHECK(phase(moe, "attention", "backward") == phase(none, "attention", "backward"));
}
