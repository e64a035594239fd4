// Whether a plan file's predicted side describes the run it is put beside: dockyard-run compares
// the predicted phases of a `simulate --json` plan with the phases it measures, which only means
// something when both are for the same hardware and the same token count.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "planner/layout/plan.h"
#include "planner/report/plan_file.h"

namespace dockyard {

// One warning per mismatch (empty when the file has no prediction or nothing differs):
//  - the prediction was costed for a cluster (GPUs: file.cluster) and the run measures the CPU
//    backend (`backend` "cpu");
//  - the prediction was costed for T_r routed tokens per rank (ComputeWorkload(plan).routed_tokens:
//    seq_len x micro_batch_size / cp, split over tp where torchtitan's sequence-parallel reorderer
//    does) and the run routes `tokens_per_rank` (dockyard-run --tokens-per-rank).
// `plan` is the plan rebuilt from the file (CheckPlacementsMatch passed).
std::vector<std::string> PredictedRunMismatches(const PlanFile& file, const Plan& plan, const std::string& backend,
                                                int64_t tokens_per_rank);

}  // namespace dockyard
