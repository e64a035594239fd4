// Tokens per rank (see workload.h).
#include "planner/workload.h"

#include <algorithm>
#include <cmath>

#include "planner/checked_math.h"
#include "planner/error.h"

namespace dockyard {

Workload ComputeWorkload(const Plan& plan) {
  const auto& d = plan.dims;
  const auto& t = plan.training;
  Workload w;
  const int64_t seq_tokens = CheckedMul(t.micro_batch_size, t.seq_len, "tokens per micro-batch");
  w.tokens = (seq_tokens + d.cp - 1) / d.cp;
  const bool experts_use_tp = d.ep == 1 && d.convention == Convention::kTorchtitan;
  const int64_t expert_tp = experts_use_tp ? d.tp : d.etp;
  const bool split_over_tp = d.tp > 1 && d.ep > 1 && d.etp == 1;
  w.routed_tokens = split_over_tp ? (w.tokens + d.tp - 1) / d.tp : w.tokens;
  w.mean_received_rows = CheckedMul(w.routed_tokens, plan.model.moe.top_k, "routed rows");
  const double rows = std::ceil(static_cast<double>(w.mean_received_rows) * t.imbalance);
  if (!(rows < 9.0e15)) throw Error("received rows (routed tokens * top_k * imbalance) exceed 9e15");
  w.received_rows = static_cast<int64_t>(rows);
  w.act_bytes = DtypeBytes(t.param_dtype, "param_dtype");
  w.tp_shards = d.tp;
  w.expert_f_local = plan.model.moe.moe_intermediate_size / expert_tp;
  w.in_flight_first = InFlightMicrobatches(plan, 0);
  return w;
}

int64_t InFlightMicrobatches(const Plan& plan, int64_t stage) {
  return std::min<int64_t>(plan.dims.pp - stage, plan.training.num_microbatches.value_or(plan.dims.pp));
}

}  // namespace dockyard
