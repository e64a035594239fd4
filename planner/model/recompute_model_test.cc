// The model rules of Megatron's --recompute-modules list: mla_up_proj needs multi-latent
// attention, shared_experts needs shared experts.
#include <doctest/doctest.h>

#include "planner/base/error.h"
#include "planner/model/recompute.h"
#include "tests/test_models.h"
#include "tests/tiny_plan.h"

namespace {

dockyard::TrainingConfig Selective(std::vector<std::string> modules) {
  dockyard::TrainingConfig t;
  t.recompute = dockyard::Recompute::kSelective;
  t.recompute_modules = std::move(modules);
  return t;
}

// The tiny model with MLA attention and one shared expert.
dockyard::ModelSpec TinyMlaShared() {
  auto m = dockyard::testing::WithTinyMla(dockyard::testing::TinyMixtral());
  m.moe.num_shared_experts = 1;
  m.moe.shared_expert_intermediate_size = 32;
  return m;
}

}  // namespace

TEST_CASE("mla_up_proj on a GQA model and shared_experts on a model without them are refused") {
  // The tiny model: GQA attention, no shared experts.
  CHECK_THROWS_WITH_AS(dockyard::testing::TinyEp4Plan(Selective({"layernorm", "mla_up_proj"})),
                       doctest::Contains("recompute_modules (--recompute-modules): \"mla_up_proj\" recomputes multi-latent attention's "
                                         "up-projections, and tiny has GQA attention"),
                       dockyard::Error);
  CHECK_THROWS_WITH_AS(dockyard::testing::TinyEp4Plan(Selective({"mla_up_proj"})),
                       doctest::Contains("Megatron allows mla_up_proj only with multi_latent_attention"), dockyard::Error);
  CHECK_THROWS_WITH_AS(dockyard::testing::TinyEp4Plan(Selective({"shared_experts"})),
                       doctest::Contains("\"shared_experts\" recomputes the shared-expert MLP, and tiny has no shared experts "
                                         "(num_shared_experts 0)"),
                       dockyard::Error);
  // The other modules stay valid on it.
  CHECK_NOTHROW(dockyard::testing::TinyEp4Plan(Selective({"core_attn", "layernorm", "moe_act", "moe", "mlp"})));
}

TEST_CASE("mla_up_proj and shared_experts are accepted where the model has them") {
  const auto m = TinyMlaShared();
  CHECK_NOTHROW(dockyard::ValidateRecomputeModulesForModel(Selective({"mla_up_proj", "shared_experts"}), m));
  auto gqa = m;
  gqa.attention.kind = dockyard::AttentionKind::kGqa;
  CHECK_THROWS_AS(dockyard::ValidateRecomputeModulesForModel(Selective({"shared_experts", "mla_up_proj"}), gqa), dockyard::Error);
  auto no_shared = m;
  no_shared.moe.num_shared_experts = 0;
  CHECK_THROWS_AS(dockyard::ValidateRecomputeModulesForModel(Selective({"mla_up_proj", "shared_experts"}), no_shared), dockyard::Error);
  CHECK_NOTHROW(dockyard::ValidateRecomputeModulesForModel(Selective({"mla_up_proj"}), no_shared));
}
