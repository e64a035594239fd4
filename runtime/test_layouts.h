// Small models and plans for the runtime tests (built in code; hand arithmetic in the tests).
#pragma once

#include "planner/model/model_spec.h"
#include "planner/layout/plan.h"
#include "tests/test_models.h"

namespace dockyard::runtime::testing {

// TinyMixtral (hidden 64, F 32, 8 experts, top-2, softmax, renormalized) with other expert
// counts, top_k, sizes; 4 KV heads so that tp can be 4.
inline ModelSpec TinyMoe(int64_t num_experts = 8, int64_t top_k = 2, int64_t hidden = 64, int64_t intermediate = 32) {
  ModelSpec m = dockyard::testing::TinyMixtral();
  m.hidden_size = hidden;
  m.attention.num_key_value_heads = 4;
  m.moe.num_experts = num_experts;
  m.moe.top_k = top_k;
  m.moe.moe_intermediate_size = intermediate;
  return m;
}

// DeepSeek-V3's routing on a tiny model: sigmoid scores, a score-correction bias for the
// selection, renormalized weights times 2.5, one shared expert of F 48.
inline ModelSpec TinyDeepSeek() {
  ModelSpec m = TinyMoe(16, 4);
  m.moe.score_func = "sigmoid";
  m.moe.score_correction_bias = true;
  m.moe.norm_topk_prob = true;
  m.moe.routed_scaling_factor = 2.5;
  m.moe.num_shared_experts = 1;
  m.moe.shared_expert_intermediate_size = 48;
  return m;
}

// Qwen2-MoE's shared expert: F 64 with a sigmoid gate; weights not renormalized.
inline ModelSpec TinyQwen2() {
  ModelSpec m = TinyMoe(8, 2);
  m.moe.norm_topk_prob = false;
  m.moe.num_shared_experts = 1;
  m.moe.shared_expert_intermediate_size = 64;
  m.moe.shared_expert_gate = true;
  return m;
}

// Default convention torchtitan-2026-03: the runtime tests run the design notes' expert-TP styles
// (etp = tp) and ep < tp, which torchtitan as it is refuses (PR #3167, PR #4794).
inline Plan MakePlan(const ModelSpec& m, int64_t world, int64_t ep, int64_t tp = 1, int64_t etp = 1, int64_t pp = 1,
                     Convention convention = Convention::kTorchtitan2026_03) {
  ParallelDimsOptions o;
  o.world_size = world;
  o.ep = ep;
  o.tp = tp;
  o.etp = etp;
  o.pp = pp;
  o.convention = convention;
  return BuildPlan(m, o);
}

}  // namespace dockyard::runtime::testing
