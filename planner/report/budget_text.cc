// Budget verdict and global-batch lines (see budget_text.h).
#include "planner/report/budget_text.h"

#include <fmt/format.h>

#include "planner/model/global_batch.h"

namespace dockyard {

// "0-127, 256-383" style list of ranks.
std::string RankList(const std::vector<int64_t>& ranks) {
  std::string out;
  size_t i = 0;
  while (i < ranks.size()) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    out += (out.empty() ? "" : ", ") + (i == j ? std::to_string(ranks[i]) : fmt::format("{}-{}", ranks[i], ranks[j]));
    i = j + 1;
  }
  return out;
}

std::string OverBudgetText(const Plan& plan, const MemoryReport& memory, const std::string& prefix) {
  std::string out;
  for (const auto& s : RanksOverBudget(plan, memory)) {
    out += fmt::format(
        "{}: stage {}: {} of {} ranks exceed the {:.2f} GiB budget less the {:.2f} GiB reserve ({:.2f} GiB); "
        "worst rank {} needs {:.2f} GiB (over by {:.2f} GiB); ranks over: {}\n",
        prefix, s.stage, s.ranks_over.size(), s.stage_size, memory.budget_gib, memory.reserve_gib, memory.budget_gib - memory.reserve_gib,
        s.worst_rank, s.peak_gib, s.peak_gib - (memory.budget_gib - memory.reserve_gib), RankList(s.ranks_over));
  }
  return out;
}

std::string BudgetFitsText(const MemoryReport& memory) {
  return fmt::format("check: every rank fits in {:.2f} GiB ({:.2f} GiB budget less the {:.2f} GiB reserve)\n",
                     memory.budget_gib - memory.reserve_gib, memory.budget_gib, memory.reserve_gib);
}

std::string GlobalBatchText(const GlobalBatchSchedule& schedule, const Plan& plan) {
  const int64_t sequences = schedule.microbatches_per_step * plan.training.micro_batch_size * plan.dims.dp_replicate * plan.dims.dp_shard;
  // With pp = 1 there is no pipeline schedule to split them into (MicroBatchesText).
  const std::string schedules =
      plan.dims.pp > 1 ? fmt::format(" = {} schedule(s) of {}", schedule.grad_accumulation_steps, schedule.num_microbatches) : "";
  return fmt::format("Global batch {} sequences ({} tokens): {} micro-batches of {} per data-parallel rank{}\n", sequences,
                     sequences * plan.training.seq_len, schedule.microbatches_per_step, plan.training.micro_batch_size, schedules);
}

}  // namespace dockyard
