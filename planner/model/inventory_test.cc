// Parameter inventory: names, shapes, roles and totals for models built in code.
#include "planner/model/inventory.h"

#include <doctest/doctest.h>

#include "planner/base/error.h"
#include "tests/test_models.h"

using dockyard::BuildInventory;
using dockyard::ParamInfo;
using dockyard::Role;
using V = std::vector<int64_t>;

static const ParamInfo& Get(const dockyard::ParamInventory& inv, const std::string& fqn) {
  for (const auto& p : inv.params) {
    if (p.fqn == fqn) return p;
  }
  FAIL("missing " << fqn);
  return inv.params.front();
}

TEST_CASE("Tiny Mixtral inventory lists every tensor with HF names and shapes") {
  auto inv = BuildInventory(dockyard::testing::TinyMixtral());
  // embedding + 2 layers x (2 norms, q, k, v, o, router, gate_up, down) + final norm + lm_head.
  CHECK(inv.params.size() == 1 + 2 * 9 + 2);
  CHECK(Get(inv, "model.embed_tokens.weight").shape == V{1000, 64});
  CHECK(Get(inv, "model.layers.1.self_attn.k_proj.weight").shape == V{32, 64});  // 2 KV heads x 16
  const auto& up = Get(inv, "model.layers.1.mlp.experts.gate_up_proj");
  CHECK(up.shape == V{8, 64, 64});  // [E, 2F, D]
  CHECK(up.routed_expert);
  CHECK(up.tp_dim == 1);
  CHECK(up.fused_sections == V{32, 32});  // gate | up halves of F = 32
  CHECK(up.layer == 1);
  CHECK(up.moe_layer);
  CHECK(Get(inv, "model.layers.0.mlp.experts.down_proj").shape == V{8, 64, 32});  // [E, D, F]
  CHECK(Get(inv, "model.layers.0.mlp.gate.weight").role == Role::kRouterGate);
  CHECK(std::string(dockyard::RoleName(Role::kExpertGateUp)) == "experts.gate_up");
  CHECK(std::string(dockyard::RoleGroup(Role::kSharedExpertDown)) == "shared_experts");
}

TEST_CASE("Totals: active counts top_k / num_experts of the routed experts") {
  auto inv = BuildInventory(dockyard::testing::TinyMixtral());
  // Routed: 2 layers x (8*64*64 + 8*64*32) = 98304; active share 2/8 = 24576.
  CHECK(inv.totals.routed_expert_params == 98304);
  CHECK(inv.totals.active_params == inv.totals.total_params - 98304 + 24576);
  CHECK(inv.totals.embedding_params == 64000);
  CHECK(inv.totals.active_params_excluding_embedding == inv.totals.active_params - 64000);
}

TEST_CASE("A parameter count past 2^63 names the tensor and the sizes that made it") {
  auto m = dockyard::testing::TinyMixtral();
  // Each size within its own 2^40 bound, each tensor within int64; the sum is not: the embedding
  // and the lm_head are 2^22 x 2^40 = 2^62 elements each, 2^63 together.
  m.hidden_size = int64_t{1} << 40;
  m.vocab_size = int64_t{1} << 22;
  CHECK_THROWS_WITH_AS(BuildInventory(m),
                       doctest::Contains("overflows a signed 64-bit integer, at lm_head.weight: the model's sizes are too large "
                                         "(/hidden_size 1099511627776, /num_hidden_layers 2, /vocab_size 4194304"),
                       dockyard::Error);
}

TEST_CASE("Tied embeddings: no lm_head tensor, and the embedding stays in the active count") {
  auto m = dockyard::testing::TinyMixtral();
  m.tie_word_embeddings = true;
  auto inv = BuildInventory(m);
  for (const auto& p : inv.params) CHECK(p.fqn != "lm_head.weight");
  CHECK(inv.totals.active_params_excluding_embedding == inv.totals.active_params);
}

TEST_CASE("MLA with q_lora lists q_a / q_b / kv_a / kv_b with DeepSeek shapes") {
  auto m = dockyard::testing::TinyMixtral();
  m.family = "deepseek_v3";
  auto& a = m.attention;
  a.kind = dockyard::AttentionKind::kMla;
  a.q_lora_rank = 24;
  a.kv_lora_rank = 16;
  a.qk_nope_head_dim = 8;
  a.qk_rope_head_dim = 4;
  a.v_head_dim = 8;
  auto inv = BuildInventory(m);
  CHECK(Get(inv, "model.layers.0.self_attn.q_a_proj.weight").shape == V{24, 64});
  CHECK(Get(inv, "model.layers.0.self_attn.q_b_proj.weight").shape == V{4 * 12, 24});        // heads x (8 + 4)
  CHECK(Get(inv, "model.layers.0.self_attn.kv_a_proj_with_mqa.weight").shape == V{20, 64});  // 16 + 4
  CHECK(Get(inv, "model.layers.0.self_attn.kv_b_proj.weight").shape == V{4 * 16, 16});       // heads x (8 + 8)
  CHECK(Get(inv, "model.layers.0.self_attn.o_proj.weight").shape == V{64, 32});              // heads x v 8
  CHECK(Get(inv, "model.layers.0.self_attn.q_a_proj.weight").tp_dim == -1);                  // replicated under TP
}

TEST_CASE("Expert biases follow the expert_bias flag") {
  auto m = dockyard::testing::TinyMixtral();
  m.moe.expert_bias = true;
  auto inv = BuildInventory(m);
  CHECK(Get(inv, "model.layers.0.mlp.experts.gate_up_proj_bias").shape == V{8, 64});
  CHECK(Get(inv, "model.layers.0.mlp.experts.down_proj_bias").shape == V{8, 64});
}

TEST_CASE("Shared experts and their sigmoid gate (Qwen2-MoE naming)") {
  auto m = dockyard::testing::TinyMixtral();
  m.family = "qwen2_moe";
  m.moe.num_shared_experts = 1;
  m.moe.shared_expert_intermediate_size = 48;
  m.moe.shared_expert_gate = true;
  auto inv = BuildInventory(m);
  CHECK(Get(inv, "model.layers.0.mlp.shared_expert.gate_proj.weight").shape == V{48, 64});
  CHECK(Get(inv, "model.layers.0.mlp.shared_expert.down_proj.weight").tp_dim == 1);
  CHECK(Get(inv, "model.layers.0.mlp.shared_expert_gate.weight").shape == V{1, 64});
  // 2 layers x (3 x 48 x 64 + 64) = 18560 shared-expert parameters, all active.
  CHECK(inv.totals.shared_expert_params == 18560);
}
