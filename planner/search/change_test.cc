// The change test: this binary builds the planner's placement, plan, memory, communication, cost
// and search sources with ONE rule altered in its home -- ShardCutsOf (placement.cc) no longer
// cuts routed experts by etp (DOCKYARD_CHANGE_TEST_NO_EXPERT_TP_CUT, set in planner/BUILD) -- and
// checks that the plan, the memory report, simulate and the layout search all follow it, by hand
// arithmetic. Were a second copy of the rule left anywhere, one of them would keep the old value.
#include <doctest/doctest.h>

#include "planner/cost/cluster.h"
#include "planner/accounting/comm.h"
#include "planner/cost/cost.h"
#include "planner/search/layout_eval.h"
#include "planner/accounting/memory.h"
#include "planner/layout/plan.h"
#include "planner/search/search.h"
#include "planner/accounting/workload.h"
#include "tests/test_models.h"

namespace {

using dockyard::ParallelDimsOptions;

// TinyMixtral (vocab 1000, hidden 64, 2 MoE layers, 8 experts, moe_intermediate_size 32) on 4
// GPUs with tp 2, ep 2, etp 2 (torchtitan): dp_shard 2, efsdp = dp_shard * tp / (ep * etp) = 1.
ParallelDimsOptions Degrees() {
  ParallelDimsOptions o;
  o.world_size = 4;
  o.tp = 2;
  o.ep = 2;
  o.etp = 2;
  o.convention = dockyard::Convention::kTorchtitan2026_03;  // etp = tp: torchtitan before PR #3167
  return o;
}

// Routed-expert elements on rank 0 per MoE layer with the rule altered: gate_up [8, 64, 64] cut by
// ep 2 on dim 0 only -> [4, 64, 64] = 16384; down [8, 64, 32] -> [4, 64, 32] = 8192; no FSDP cut
// (efsdp 1). 24576 per layer, 49152 for the two layers (the unaltered rule halves both: etp 2).
constexpr int64_t kExpertElems = 2 * (16384 + 8192);
// FSDP keeps each element as an fp32 shard (4 B), an fp32 gradient (4 B) and two fp32 AdamW moments (8 B).
constexpr int64_t kExpertParamBytes = kExpertElems * 4;    // 196,608
constexpr int64_t kExpertStaticBytes = kExpertElems * 16;  // 786,432

}  // namespace

TEST_CASE("Altered in placement.cc alone, the expert-TP rule changes the plan, memory, simulate and search alike") {
  const auto model = dockyard::testing::TinyMixtral();
  const dockyard::Plan plan = dockyard::BuildPlan(model, Degrees());

  // Plan: the experts' local shapes and placements follow the altered rule.
  int checked = 0;
  for (size_t i = 0; i < plan.inventory.params.size(); ++i) {
    const auto& p = plan.inventory.params[i];
    if (!p.routed_expert || p.layer != 0) continue;
    const auto& pl = plan.placements[i];
    CHECK(pl.sparse_mesh);
    const std::vector<int64_t> expected = {4, p.shape[1], p.shape[2]};  // ep 2 on dim 0, nothing on the TP dim
    CHECK(pl.local_shapes.front().shape == expected);
    const int etp_axis = plan.meshes.sparse.AxisIndex(dockyard::MeshAxis::kEtp);
    REQUIRE(etp_axis >= 1);
    CHECK(pl.placements[etp_axis - 1].ToString() == "Replicate()");
    ++checked;
  }
  CHECK(checked == 2);  // gate_up and down

  // Memory: the static bytes of the routed experts on rank 0, and the same in the memory report.
  const auto rank0 = dockyard::StaticMemoryOnRank(plan, 0);
  CHECK(rank0.params_by_role.at("routed_experts") == kExpertParamBytes);
  const auto memory = dockyard::ComputeMemory(plan);
  CHECK(memory.stages[0].worst.params_by_role.at("routed_experts") == kExpertParamBytes);
  const auto& w = memory.stages[0].worst;
  CHECK(w.params_by_role.at("routed_experts") + w.grads_by_role.at("routed_experts") + w.optimizer_by_role.at("routed_experts") ==
        kExpertStaticBytes);

  // Search: the class evaluation of the same layout gives the plan path's peak and step time.
  dockyard::SearchOptions options;
  options.world_size = 4;
  options.convention = dockyard::Convention::kTorchtitan2026_03;
  options.cluster = dockyard::ClusterPreset("h100-sxm");
  options.training.seq_len = 256;
  options.top = 1000;  // every ranked layout
  dockyard::LayoutEvaluator evaluator(model, options);
  dockyard::LayoutCandidate candidate;
  candidate.dims = Degrees();
  const auto fast = evaluator.Evaluate(candidate, /*simulate_over_budget=*/true);
  const auto reference = evaluator.EvaluateReference(candidate, /*simulate_over_budget=*/true);
  REQUIRE(fast.status == dockyard::LayoutEvaluation::Status::kRanked);
  CHECK(fast.peak_bytes == reference.peak_bytes);
  CHECK(fast.step_time_us == reference.step_time_us);

  // And the peak the search ranks holds the altered expert bytes: the same plan with the
  // search's training settings, through ComputeMemory.
  dockyard::TrainingConfig t = options.training;
  dockyard::Machine machine;
  machine.gpus_per_node = options.cluster.gpus_per_node;
  const auto searched_plan = dockyard::BuildPlan(model, Degrees(), t, machine);
  const auto searched_memory = dockyard::ComputeMemory(searched_plan);
  CHECK(searched_memory.worst_peak_bytes == fast.peak_bytes);
  CHECK(searched_memory.stages[0].worst.params_by_role.at("routed_experts") == kExpertParamBytes);
  const auto result = dockyard::SearchLayouts(model, options);
  bool found = false;
  for (const auto& row : result.top) {
    const auto& d = row.layout.dims;
    if (d.tp == 2 && d.ep == 2 && d.etp == 2 && d.dp_replicate == 1 && d.pp == 1 && d.cp == 1 &&
        row.layout.dispatcher == dockyard::Dispatcher::kAllToAll) {
      found = true;
      CHECK(row.peak_bytes == fast.peak_bytes);
    }
  }
  CHECK(found);
}
