// Predicted-vs-run mismatches (see run_match.h).
#include "planner/report/run_match.h"

#include <fmt/format.h>

#include "planner/accounting/workload.h"

namespace dockyard {

std::vector<std::string> PredictedRunMismatches(const PlanFile& file, const Plan& plan, const std::string& backend,
                                                int64_t tokens_per_rank) {
  std::vector<std::string> out;
  if (!file.predicted.is_object()) return out;
  if (backend == "cpu" && file.cluster) {
    out.push_back(
        fmt::format("the plan's prediction was costed for cluster \"{}\" ({} TFLOP/s per GPU), the run measures the "
                    "CPU backend: compare the phases' shares, not their times",
                    file.cluster->name, file.cluster->dense_bf16_tflops));
  }
  const int64_t predicted = ComputeWorkload(plan).routed_tokens;
  if (predicted != tokens_per_rank) {
    out.push_back(
        fmt::format("the plan's prediction was costed for {} routed tokens per rank (seq_len {} x micro_batch_size "
                    "{}), the run routes {} (--tokens-per-rank)",
                    predicted, plan.training.seq_len, plan.training.micro_batch_size, tokens_per_rank));
  }
  return out;
}

}  // namespace dockyard
