// torchtitan's per-op selective activation checkpointing (selective_ac_option "op"): which linears
// the policy saves, the bytes a layer keeps, the backward's re-run, the setting's rules -- by hand
// on tiny models.
#include <doctest/doctest.h>

#include "planner/accounting/memory.h"
#include "planner/base/error.h"
#include "planner/model/recompute.h"
#include "planner/cost/cost.h"
#include "planner/model/training_json.h"
#include "tests/test_models.h"
#include "tests/tiny_plan.h"

using dockyard::OpSacLinear;
using dockyard::Recompute;
using dockyard::TrainingConfig;

namespace {

// TinyMixtral with `layers` MoE layers (tests/tiny_plan.h).
dockyard::ModelSpec Tiny(int64_t layers) {
  return dockyard::testing::TinyMixtralLayers(layers);
}

// The same with MLA attention: q_lora_rank 24, kv_lora_rank 16, nope 8 + rope 8, v 16.
dockyard::ModelSpec TinyMla(int64_t q_lora_rank) {
  auto m = Tiny(2);
  auto& a = m.attention;
  a.kind = dockyard::AttentionKind::kMla;
  a.num_key_value_heads = a.head_dim = 0;
  a.q_lora_rank = q_lora_rank;
  a.kv_lora_rank = 16;
  a.qk_nope_head_dim = 8;
  a.qk_rope_head_dim = 8;
  a.v_head_dim = 16;
  return m;
}

TrainingConfig Op() {
  TrainingConfig t;
  t.recompute = Recompute::kSelective;
  t.selective_ac_option = "op";
  return t;
}

// The linears in order, each followed by '+' (saved) or '-' (re-run in backward).
std::string Order(const std::vector<OpSacLinear>& ls) {
  std::string s;
  for (const OpSacLinear& l : ls) s += std::string(l.name) + (l.saved ? "+ " : "- ");
  return s;
}

// A hand-set workload: T tokens per rank, tp shards, bf16; the MoE rows as given.
dockyard::Workload Work(int64_t tokens, int64_t tp, int64_t received = 32, int64_t mean_received = 32) {
  dockyard::Workload w;
  w.tokens = tokens;
  w.tp_shards = tp;
  w.act_bytes = 2;
  w.dispatch_tokens = tokens;
  w.received_rows = received;
  w.mean_received_rows = mean_received;
  return w;
}

dockyard::Plan OneGpu(TrainingConfig t, int64_t layers = 4) {
  dockyard::ParallelDimsOptions d;
  d.world_size = 1;
  t.seq_len = 16;
  return dockyard::BuildPlan(Tiny(layers), d, t);
}

}  // namespace

TEST_CASE("The mm counter saves the odd-numbered linears of a block, in torchtitan's forward order") {
  // GQA (models/common/attention.py: wq, wk, wv, wo) then feed_forward.py w1, w3, w2: counts 1..7.
  auto dense = Tiny(2);
  dense.moe_layers = {false, false};
  dense.intermediate_size = 32;
  CHECK(Order(dockyard::OpSacLinears(dense, false)) == "wq+ wk- wv+ wo- w1+ w3- w2+ ");
  // An MoE layer without shared experts: attention only (the gate is force-recomputed, the routed
  // experts' _grouped_mm is not an mm).
  CHECK(Order(dockyard::OpSacLinears(Tiny(2), true)) == "wq+ wk- wv+ wo- ");
  // Shared experts run after the routed ones (moe.py) and continue the count.
  auto shared = Tiny(2);
  shared.moe.num_shared_experts = 1;
  shared.moe.shared_expert_intermediate_size = 32;
  CHECK(Order(dockyard::OpSacLinears(shared, true)) == "wq+ wk- wv+ wo- w1+ w3- w2+ ");
  // MLA (deepseek_v3/model.py: wq_a, wq_b, wkv_a, wkv_b, wo): 5 mms, so the MLP's parity flips.
  auto mla = TinyMla(24);
  mla.moe.num_shared_experts = 1;
  mla.moe.shared_expert_intermediate_size = 32;
  CHECK(Order(dockyard::OpSacLinears(mla, true)) == "wq_a+ wq_b- wkv_a+ wkv_b- wo+ w1- w3+ w2- ");
  // DeepSeek-V2-Lite style (no q compression): wq, wkv_a, wkv_b, wo.
  CHECK(Order(dockyard::OpSacLinears(TinyMla(0), true)) == "wq+ wkv_a- wkv_b+ wo- ");
  // DBRX's fused Wqkv is one mm.
  auto fused = dense;
  fused.attention.fused_qkv = true;
  CHECK(Order(dockyard::OpSacLinears(fused, false)) == "wqkv+ wo- w1+ w3- w2+ ");
}

TEST_CASE("Kept bytes per layer: saved linear outputs, attention output, top-k, all-to-all outputs") {
  // Tiny GQA MoE layer, T = 16, bf16, tp 1: wq out 16 x 64 x 2 = 2048, wv out 16 x 32 x 2 = 1024,
  // attention output 16 x 4 heads x 16 x 2 = 2048, logsumexp 16 x 4 x 4 = 256 -> 5376; router
  // top-k 16 x 2 x (4 + 8) = 384; norms 0; no all-to-all without EP.
  auto g = dockyard::OpSacSavedActivations(Tiny(2), Work(16, 1), true, false);
  CHECK(g.attention == 5376);
  CHECK(g.norm == 0);
  CHECK(g.router == 384);
  CHECK(g.routed_experts == 0);
  // With EP the dispatch's 32 received rows and the combine's 16 x 2 returned rows: 64 x 64 x 2.
  CHECK(dockyard::OpSacSavedActivations(Tiny(2), Work(16, 1), true, true).routed_experts == 8192);
  // Dense layer (F 32): w1 out 16 x 32 x 2 = 1024 and w2's 16 x 64 x 2 = 2048.
  auto dense = Tiny(2);
  dense.intermediate_size = 32;
  CHECK(dockyard::OpSacSavedActivations(dense, Work(16, 1), false, false).dense_mlp == 3072);
  // tp 2: colwise outputs halve (wq 1024, wv 512), attention 2 local heads (1024 + 128), and each
  // block's output reduce-scatter 8 x 64 x 2 = 1024 is saved.
  CHECK(dockyard::OpSacSavedActivations(dense, Work(16, 2), false, false).attention == 1024 + 512 + 1024 + 128 + 1024);
  // w1 16 x 16 x 2 = 512, w2 its 16 x 64 partial sum 2048, reduce-scatter 1024.
  CHECK(dockyard::OpSacSavedActivations(dense, Work(16, 2), false, false).dense_mlp == 512 + 2048 + 1024);
  // MLA with shared experts (F 32): wq_a 16 x 24 x 2 = 768, wkv_a 16 x 24 x 2 = 768, wo 16 x 64 x 2
  // = 2048, attention output 16 x 4 x 16 x 2 = 2048 + 256; shared w3 16 x 32 x 2 = 1024.
  auto mla = TinyMla(24);
  mla.moe.num_shared_experts = 1;
  mla.moe.shared_expert_intermediate_size = 32;
  auto gm = dockyard::OpSacSavedActivations(mla, Work(16, 1), true, false);
  CHECK(gm.attention == 768 + 768 + 2048 + 2048 + 256);
  CHECK(gm.shared_experts == 1024);
  CHECK(gm.shared_experts_present);
}

TEST_CASE("Memory: none >= op >= full, by hand on four tiny MoE layers") {
  // Per MoE layer at 16 tokens (memory_test.cc): 36,480 B under none; layer input 2,048 B; kept
  // under op 5,376 + 384 = 5,760 B; embedding output 2,048 B; fp32 logits 64,000 B.
  auto act = [](const dockyard::Plan& p) { return dockyard::ComputeMemory(p).stages[0].worst.activations_bytes; };
  TrainingConfig full;
  full.recompute = Recompute::kFull;
  const int64_t none_b = act(OneGpu({})), op_b = act(OneGpu(Op())), full_b = act(OneGpu(full));
  CHECK(none_b == 4 * 36480 + 2048 + 64000);
  // Op: 4 inputs and 4 x the kept bytes, one layer rebuilt at a time (as under full).
  CHECK(op_b == 4 * (2048 + 5760) + 36480 + 2048 + 64000);
  CHECK(op_b - full_b == 4 * 5760);
  CHECK(none_b - op_b == 4 * 36480 - 4 * (2048 + 5760) - 36480);
  CHECK(none_b > op_b);
  CHECK(op_b > full_b);
  const auto roles = dockyard::ComputeMemory(OneGpu(Op())).stages[0].worst.activations_by_role;
  CHECK(roles.at("checkpoints") == 4 * 2048);
  CHECK(roles.at("router") == 4 * 384 + 1408);  // kept top-k + the rebuilt layer's router (memory_test.cc)
  // Not a Megatron module set on top, not a layer frequency.
  CHECK_FALSE(dockyard::RecomputeSetOf(Op()).layernorm);
  CHECK(dockyard::LayerSacEvery(Op()) == 0);
  CHECK(dockyard::OpSac(Op()));
}

TEST_CASE("Time: op re-runs router, permutes, grouped GEMM and the even linears, not attention's core or the all-to-alls") {
  // World 4, EP 4, DDP, 1024-token sequences, uniform routing (layer_sac_test.cc).
  const dockyard::ClusterSpec c = dockyard::ClusterPreset("h100-sxm");
  const auto routing = dockyard::SampleRouting({}, 8, 2, 4, 1024, 2);
  // The gemm compute model by default here: linears at dense_efficiency, so the re-run linears are
  // one product by hand (the kernels model adds the attention block's memory-bound kernels).
  const dockyard::ComputeModel gemm = dockyard::ComputeModel::kGemm;
  auto run = [&](TrainingConfig t, dockyard::ComputeModel model) {
    dockyard::ParallelDimsOptions d;
    d.world_size = 4;
    d.ep = 4;
    t.seq_len = 1024;
    t.dp_sharding = dockyard::DpSharding::kDdp;
    return dockyard::SimulateStep(dockyard::BuildPlan(Tiny(4), d, t), c, routing, model);
  };
  TrainingConfig full_t;
  full_t.recompute = Recompute::kFull;
  const auto none = run({}, gemm), op = run(Op(), gemm), full = run(full_t, gemm);
  auto phase = [](const dockyard::CostBreakdown& b, const std::string& name, const std::string& dir) {
    for (const auto& p : b.phases)
      if (PhaseName(p.phase) == std::string(name) && DirectionName(p.direction) == std::string(dir) && p.layer_kind == dockyard::LayerKind::kMoe) return p.time_us;
    return -1.0;
  };
  // wk (64 -> 32) and wo (64 -> 64) re-run: 2 x 1024 x (2048 + 4096) FLOP at 0.70 of the dense peak.
  const double linears = 2.0 * 1024 * (2048 + 4096) / (c.dense_bf16_tflops * 1e6 * 0.70);
  CHECK(phase(op, "attention", "backward") - phase(none, "attention", "backward") == doctest::Approx(linears));
  for (const char* p : {"router", "permute", "grouped_gemm", "unpermute"}) {
    CAPTURE(p);
    CHECK(phase(op, p, "backward") - phase(none, p, "backward") == doctest::Approx(phase(none, p, "forward")));
  }
  for (const char* p : {"dispatch", "combine", "tp_comm"}) {
    CAPTURE(p);
    CHECK(phase(op, p, "backward") == phase(none, p, "backward"));
  }
  const double extra = linears + phase(none, "router", "forward") + phase(none, "permute", "forward") +
                       phase(none, "grouped_gemm", "forward") + phase(none, "unpermute", "forward");
  CHECK(op.moe_layer_us - none.moe_layer_us == doctest::Approx(extra));
  // Recompute time: none < op < full (full also re-runs attention's core and the all-to-alls).
  CHECK(none.moe_layer_us < op.moe_layer_us);
  CHECK(op.moe_layer_us < full.moe_layer_us);
  CHECK(none.step_time_us < op.step_time_us);
  CHECK(op.step_time_us < full.step_time_us);
  // The same order under the default (kernels) compute model.
  const dockyard::ComputeModel kernels = dockyard::ComputeModel::kKernels;  // the default
  CHECK(run({}, kernels).step_time_us < run(Op(), kernels).step_time_us);
  CHECK(run(Op(), kernels).step_time_us < run(full_t, kernels).step_time_us);
  // No per-layer keys in the report.
  CHECK_FALSE(dockyard::CostToJson(op).contains("layer_sac_every"));
}

TEST_CASE("selective_ac_option op: recompute selective, no module list, torchtitan, bf16, modelled blocks") {
  CHECK_NOTHROW(dockyard::ValidateTraining(Op(), "--"));
  TrainingConfig typo = Op();
  typo.selective_ac_option = "ops";
  CHECK_THROWS_WITH_AS(dockyard::ValidateTraining(typo, "--"),
                       doctest::Contains("--selective-ac-option: \"ops\" is not a layer frequency; torchtitan's per-layer option is "
                                         "a non-negative integer N (every N-th transformer block checkpointed, at most 9 digits), "
                                         "its per-op option is \"op\""),
                       dockyard::Error);
  TrainingConfig full = Op();
  full.recompute = Recompute::kFull;
  CHECK_THROWS_WITH_AS(dockyard::ValidateTraining(full, "/training/"),
                       doctest::Contains("/training/selective_ac_option: op applies with recompute selective"), dockyard::Error);
  TrainingConfig modules = Op();
  modules.recompute_modules = {"moe_act"};
  CHECK_THROWS_WITH_AS(dockyard::ValidateTraining(modules, "--"),
                       doctest::Contains("--selective-ac-option: op chooses the saved tensors op by op (torchtitan); it cannot be "
                                         "combined with the Megatron module list recompute_modules (moe_act)"),
                       dockyard::Error);
  dockyard::ParallelDimsOptions d;
  d.world_size = 1;
  d.convention = dockyard::Convention::kMegatron;
  CHECK_THROWS_WITH_AS(dockyard::BuildPlan(Tiny(2), d, Op()),
                       doctest::Contains("selective_ac_option (op): torchtitan's per-op selective activation checkpointing needs "
                                         "--convention torchtitan"),
                       dockyard::Error);
  d.convention = dockyard::Convention::kTorchtitan;
  TrainingConfig fp8 = Op();
  fp8.precision = "fp8";
  CHECK_THROWS_WITH_AS(dockyard::BuildPlan(Tiny(2), d, fp8), doctest::Contains(") with precision fp8: torchao's float8 linears"),
                       dockyard::Error);
  auto dsa = TinyMla(24);
  dsa.attention.indexer.index_n_heads = 4;
  CHECK_THROWS_WITH_AS(dockyard::ValidateOpSac(Op(), dsa), doctest::Contains("indexer (index_n_heads 4)"), dockyard::Error);
  auto linear = Tiny(2);
  linear.linear_attention_layers = {true, false};
  CHECK_THROWS_WITH_AS(dockyard::ValidateOpSac(Op(), linear), doctest::Contains("has 1 linear-attention layers"), dockyard::Error);
  CHECK_NOTHROW(dockyard::ValidateOpSac(TrainingConfig{}, linear));  // only the op policy is refused
  // JSON round trip.
  const dockyard::Json j = dockyard::TrainingToJson(Op(), dockyard::Machine{});
  CHECK(dockyard::TrainingFromJson(dockyard::JsonView(&j, "spec.json", "/training")).selective_ac_option == "op");
}
