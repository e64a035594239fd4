// The budget verdict and global-batch lines of check / simulate.
#include "planner/report/budget_text.h"

#include <doctest/doctest.h>

#include "tests/test_models.h"

namespace {

// TinyMixtral on 4 ranks, tp 2 (dp_shard = 4 / 2 = 2), one stage.
dockyard::Plan TinyPlan(double budget_gib) {
  dockyard::ParallelDimsOptions o;
  o.world_size = 4;
  o.tp = 2;
  o.convention = dockyard::Convention::kTorchtitan2026_03;  // tp 2 with ep 1: torchtitan before PR #4794
  dockyard::TrainingConfig t;
  dockyard::Machine machine;
  machine.gpu_memory_gib = budget_gib;
  t.memory_reserve_gib = 0.0;
  return dockyard::BuildPlan(dockyard::testing::TinyMixtral(), o, t, machine);
}

}  // namespace

TEST_CASE("RankList writes runs of consecutive ranks as ranges") {
  CHECK(dockyard::RankList({}) == "");
  CHECK(dockyard::RankList({3}) == "3");
  CHECK(dockyard::RankList({0, 1, 2, 5, 7, 8}) == "0-2, 5, 7-8");
}

TEST_CASE("OverBudgetText lists each stage over the budget, and nothing when every rank fits") {
  // 0.01 GiB (10 MiB) is far below a rank's peak: 4096 tokens x hidden 64 activations alone are
  // MiBs per layer, so every rank of the one stage is over.
  const dockyard::Plan over = TinyPlan(0.01);
  const dockyard::MemoryReport memory = dockyard::ComputeMemory(over);
  const std::string text = dockyard::OverBudgetText(over, memory, "dockyard-plan check");
  CHECK(text.rfind(
            "dockyard-plan check: stage 0: 4 of 4 ranks exceed the 0.01 GiB budget less the 0.00 GiB reserve (0.01 GiB); worst rank ", 0) ==
        0);
  CHECK(text.find("ranks over: 0-3\n") == text.size() - 16);
  CHECK(text.find('\n') == text.size() - 1);  // one stage, one line

  const dockyard::Plan fits = TinyPlan(1000);
  CHECK(dockyard::OverBudgetText(fits, dockyard::ComputeMemory(fits), "dockyard-plan check").empty());
}

TEST_CASE("BudgetFitsText states the usable budget: 80 GiB less a 4 GiB reserve is 76 GiB") {
  dockyard::MemoryReport m;
  m.budget_gib = 80;
  m.reserve_gib = 4;
  CHECK(dockyard::BudgetFitsText(m) == "check: every rank fits in 76.00 GiB (80.00 GiB budget less the 4.00 GiB reserve)\n");
}

TEST_CASE("GlobalBatchText: 8 micro-batches of 1 on each of 2 dp ranks are 16 sequences, 16 x 4096 = 65536 tokens") {
  const dockyard::Plan plan = TinyPlan(0);
  REQUIRE(plan.dims.dp_shard == 2);
  REQUIRE(plan.dims.pp == 1);
  REQUIRE(plan.training.seq_len == 4096);
  dockyard::GlobalBatchSchedule s;
  s.microbatches_per_step = 8;
  s.num_microbatches = 4;
  s.grad_accumulation_steps = 2;
  // pp 1: no pipeline schedule to split the 8 into (2 x 4 is only how --num-microbatches groups them).
  CHECK(dockyard::GlobalBatchText(s, plan) == "Global batch 16 sequences (65536 tokens): 8 micro-batches of 1 per data-parallel rank\n");
  // pp 2 (world 4 = tp 2 x pp 2, dp 1): 8 micro-batches = 2 schedules of 4, 8 x 1 x 1 = 8 sequences.
  dockyard::ParallelDimsOptions o;
  o.world_size = 4;
  o.tp = 2;
  o.convention = dockyard::Convention::kTorchtitan2026_03;  // tp 2 with ep 1: torchtitan before PR #4794
  o.pp = 2;
  const dockyard::Plan piped = dockyard::BuildPlan(dockyard::testing::TinyMixtral(), o, dockyard::TrainingConfig{});
  CHECK(dockyard::GlobalBatchText(s, piped) ==
        "Global batch 8 sequences (32768 tokens): 8 micro-batches of 1 per data-parallel rank = 2 schedule(s) of 4\n");
}
