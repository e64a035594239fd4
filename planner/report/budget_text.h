// The budget verdict of `dockyard-plan check` and `simulate` as text (stderr for ranks over the
// budget, stdout when every rank fits), and the line that states a global batch's schedule.
// The budget rule itself is accounting/memory.h's (OverBudget, RanksOverBudget).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "planner/accounting/memory.h"
#include "planner/layout/plan.h"
#include "planner/model/global_batch.h"

namespace dockyard {

// Ranks as ranges, increasing input: {0,1,2,5} -> "0-2, 5".
std::string RankList(const std::vector<int64_t>& ranks);

// One line per stage with a rank over the budget (RanksOverBudget(plan, memory)), each opened by
// `prefix` (e.g. "dockyard-plan check"): the ranks over, the budget less the reserve (GiB), the
// worst rank, its peak and by how much it is over. Empty when no rank is over.
std::string OverBudgetText(const Plan& plan, const MemoryReport& memory, const std::string& prefix);

// "check: every rank fits in U GiB (B GiB budget less the R GiB reserve)", U = B - R.
std::string BudgetFitsText(const MemoryReport& memory);

// The global batch's schedule (global_batch.h ResolveGlobalBatch): N micro-batches of
// micro_batch_size per data-parallel rank (dp = dp_replicate x dp_shard) are
// N x micro_batch_size x dp sequences and that times seq_len tokens, run as A schedules of M.
std::string GlobalBatchText(const GlobalBatchSchedule& schedule, const Plan& plan);

}  // namespace dockyard
