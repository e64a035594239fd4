// search with --fp8-param-gather under --convention megatron: the distributed optimizer's layouts
// (zero1) are ranked, priced by the fast path at the plan path's figures (layout_eval.h), and the
// plain data-parallel ones (ddp) are invalid, as Megatron refuses them.
#include <doctest/doctest.h>

#include "planner/layout/plan.h"
#include "planner/search/layout_eval.h"
#include "planner/search/search.h"
#include "planner/routing/plan_routing.h"
#include "tests/test_models.h"

namespace {

dockyard::SearchOptions Fp8Search(bool gather) {
  dockyard::SearchOptions o;
  o.world_size = 8;
  o.convention = dockyard::Convention::kMegatron;
  o.training.seq_len = 256;
  o.gpu_memory_gib = 1000;  // everything fits
  o.training.precision = "fp8";
  o.training.fp8_param_gather = gather;
  o.dp_shardings = {dockyard::DpSharding::kZero1, dockyard::DpSharding::kDdp};
  o.top = 100000;
  o.routing_layers = 1;
  return o;
}

}  // namespace

TEST_CASE("search --fp8-param-gather (megatron): zero1 layouts ranked at the plan path's time, ddp invalid") {
  using Status = dockyard::LayoutEvaluation::Status;
  const auto model = dockyard::testing::TinyMixtral();
  const auto o = Fp8Search(true), plain = Fp8Search(false);
  dockyard::LayoutEvaluator gather(model, o), bf16_gather(model, plain);
  int64_t zero1 = 0, ddp = 0, evaluated = 0, faster = 0;
  for (const auto& c : dockyard::EnumerateLayouts(model, o)) {
    if (!c.batch_divides) continue;
    CAPTURE(c.dims.pp);
    CAPTURE(c.dims.tp);
    CAPTURE(c.dims.ep);
    CAPTURE(c.dims.etp);
    CAPTURE(c.dims.cp);
    CAPTURE(c.settings.micro_batch_size);
    const std::string dispatcher = dockyard::DispatcherName(c.dispatcher);
    CAPTURE(dispatcher);
    const auto r = gather.Evaluate(c, /*simulate_over_budget=*/true);
    ++evaluated;
    if (c.settings.dp_sharding == dockyard::DpSharding::kDdp) {
      CHECK(r.status == Status::kInvalid);
      ++ddp;
      continue;
    }
    if (r.status == Status::kInvalid) continue;  // another rule
    ++zero1;
    // The plan path: BuildPlan + SampleRoutingForPlan + SimulateStep.
    const dockyard::Plan plan = dockyard::BuildPlan(model, c.dims, dockyard::CandidateTraining(o.training, c));
    const auto cost = dockyard::SimulateStep(plan, o.cluster, dockyard::SampleRoutingForPlan(plan, o.routing, 1), o.compute_model);
    CHECK(r.step_time_us == cost.step_time_us);
    // The same layout without the flag (by the plan path: the fast path leaves out the FP8 weight
    // copies) all-gathers and keeps bf16 weights: never faster, more memory.
    const auto without = bf16_gather.EvaluateReference(c, /*simulate_over_budget=*/true);
    REQUIRE(without.status != Status::kInvalid);
    CHECK(r.step_time_us <= without.step_time_us);
    CHECK(r.peak_bytes < without.peak_bytes);  // no bf16 copy of the FP8 GEMM weights
    faster += r.step_time_us < without.step_time_us;
  }
  CHECK(zero1 > 0);
  CHECK(ddp > 0);
  CHECK(faster == zero1);  // every one steps fewer static bytes (and with dp > 1 gathers fewer)
  CHECK(evaluated > 0);
  CHECK(gather.handed_to_reference() == 0);  // the fast path prices the flag (it once handed every candidate over)
}
