// dockyard-run's library entry: run one MoE layer of a plan on a backend, check every rank's
// output against the single-process reference, time each phase, and report (text and JSON).
//
// Validation (nccl-tests style): an element is wrong when it is not finite or
// |out - ref| > atol + rtol * |ref|; per rank and in total the report gives max_abs_error,
// max_rel_error (|out - ref| / max(|ref|, atol)) and #wrong, plus the first mismatches. A run
// with any wrong element has failed (dockyard-run exits 3).
// Timing: warm-up iterations are excluded; a phase's time is the mean over the timed iterations
// on each rank, and the phase's reported time is the slowest rank's (as planner/cost/cost.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "planner/base/json_util.h"
#include "planner/layout/plan.h"
#include "runtime/backend.h"
#include "runtime/config.h"

namespace dockyard::runtime {

struct RankReport {
  int64_t rank = 0, source = 0, tokens = 0;
  int64_t routed_rows = 0, sent_rows = 0, received_rows = 0;
  double max_abs_error = 0, max_rel_error = 0;
  int64_t wrong = 0, checked = 0;
  std::vector<double> phase_us;  // aligned with PhaseNames()
  int64_t ep_index = 0;
  std::vector<int64_t> rows_per_local_expert;  // rows each local expert (physical slot with replicas) computed
  // deepep dispatcher: tokens sent to each EP member over the network (to rail peers) and over
  // NVLink (inside the node): the rows of the planner's FlexDispatchBytes in tokens. Else empty.
  std::vector<int64_t> flex_network_rows, flex_nvlink_rows;
  // allgather dispatcher: token rows the EP all-gather delivered (ep x tokens: the planner's
  // AllGatherDispatchBytes in rows). Else 0.
  int64_t gathered_rows = 0;
};

struct PhaseReport {
  std::string name;
  double time_us = 0;  // the slowest rank's mean
  double mean_us = 0;  // mean over ranks
  int64_t slowest_rank = -1;
  std::vector<double> per_rank_us;  // aligned with RunReport::ranks
};

struct Mismatch {
  int64_t rank = 0, token = 0, dim = 0;
  double got = 0, expected = 0;
};

struct RunReport {
  RunConfig config;
  std::string backend;
  std::vector<RankReport> ranks;
  double max_abs_error = 0, max_rel_error = 0;
  int64_t wrong = 0, checked = 0;
  std::vector<PhaseReport> phases;
  std::vector<Mismatch> first_mismatches;  // at most kMaxMismatches, in rank then element order
  std::vector<int64_t> tokens_per_expert;  // [num_experts], from the reference
  double run_seconds = 0;                  // every rank's setup and iterations (wall)
  double reference_seconds = 0;
  std::vector<std::vector<CollectiveRecord>> collectives;  // per rank, when recorded
  // Redundant experts (config.placement): the planner's routing of this layer over the same
  // placement (SampleReplicatedLayer), when it describes this run: every EP rank present, each
  // rank its own token source with EP index = source and tokens_per_rank tokens. Then
  // replica_rows_mismatches counts the ranks whose measured rows per slot or received rows differ
  // from it (0 when the runtime executed exactly the planner's matrices); -1 when not comparable.
  std::optional<LayerRouting> predicted_replica_routing;
  int64_t replica_rows_mismatches = -1;
  bool passed() const { return wrong == 0; }
};

constexpr int kMaxMismatches = 10;

RunReport RunMoeLayer(const RunConfig& config, Backend& backend);
RunReport RunMoeLayer(const Plan& plan, const RunOptions& options, Backend& backend);

// JSON (docs/runtime.md lists every field); `model_source` is the model file.
Json RunReportToJson(const RunReport& report, const std::string& model_source);
std::string RunReportToText(const RunReport& report, const std::string& model_source);

}  // namespace dockyard::runtime
