// The header every dockyard-plan report opens with (plan, check, simulate, search; text and
// JSON): model, degrees, cluster, calibration, routing and provenance, built by one function so
// that CI finds the same fields at the same place (`/header` in JSON, the first lines of text).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "planner/base/json_util.h"
#include "planner/layout/parallel_dims.h"
#include "planner/model/machine.h"

namespace dockyard {

struct ReportHeaderInputs {
  std::string command;                   // "plan", "check", "simulate" or "search"
  std::string model_name, model_source;  // ModelSpec::name; the file it came from (or "<embedded ...>")
  // The layout's degrees; unset for search, which ranks many (only world_size and convention).
  std::optional<ParallelDims> dims;
  // search: the dimensions it holds fixed (search_pins.h SearchPinsToJson), at "degrees"/"pinned";
  // null = none given (plan, check, simulate).
  Json pinned;
  int64_t world_size = 0;
  Convention convention = Convention::kTorchtitan;
  // The convention's defaults the report's plan (or, for search, every layout) took for settings
  // not given, one line each (convention.h DefaultsAppliedLines); empty = none.
  std::vector<std::string> defaults_applied;
  std::string cluster;  // preset or cluster file name; empty = none (plan, check)
  std::string cluster_compute;  // ClusterSpec::compute_source of that cluster (with it only)
  Json calibration;     // CalibrationRefToJson, or null for the built-in knobs / none
  // Routing: the spec text as given, its seed and the MoE layers sampled; unset = none sampled
  // (plan; check without --routing), memory then uses `imbalance`.
  std::optional<std::string> routing;
  uint64_t seed = 0;
  int64_t routing_layers = 0;
  double imbalance = 1.0;  // the imbalance memory is sized with
  // search --routing: each layout's memory is sized by its own sample (SearchOptions::
  // routing_sizes_memory), so no single imbalance applies; the header says so.
  bool imbalance_per_layout = false;
  Json provenance;  // Provenance (provenance.h)
  // The compute model a predicted time used (simulate, search): ComputeModelToJson
  // (planner/cost/compute_model.h); null = no time predicted (plan, check), and then no key.
  Json compute;
  // The node size and per-GPU budget the memory and traffic figures used (machine.h; check and
  // simulate: the plan's, search: network.h MachineOf with search.h SearchBudgetGib); unset (plan)
  // = no "machine" key and no "Machine" line, so plan reports stay as they were.
  std::optional<Machine> machine;
};

// A layout's degrees as JSON: {"convention", "world_size", "pp", "dp_replicate", "dp_shard", "cp",
// "tp", "ep", "etp", "efsdp"} (the header's "degrees", the plan report's "parallel").
Json DegreesToJson(const ParallelDims& dims);
// The header as JSON:
//   {"command", "model": {"name", "source"}, "degrees": {"world_size", "convention", and with a
//    layout "pp", "dp_replicate", "dp_shard", "cp", "tp", "ep", "etp", "efsdp"}, "rules": which
//    framework release's rules the convention applies (convention.h ConventionRulesText),
//    "defaults_applied": [the convention's defaults taken, one line each], "cluster": name
//    or null, "calibration": object or null, "routing": {"spec", "seed", "layers_sampled"} or
//    null, "imbalance", "provenance"}, and for simulate and search "compute": {"model",
//    "cuda_graphs", "cross_entropy"}; with imbalance_per_layout also "imbalance_per_layout": true
//    ("imbalance" is then the --imbalance default that no layout uses); with a machine
//    "machine": {"gpus_per_node", "gpu_memory_gib"} (0 = no budget).
Json ReportHeader(const ReportHeaderInputs& inputs);
// The same header as the opening text lines ("Report", "Model", "Degrees", "Rules", "Defaults" (one
// per default applied), "Cluster",
// "Calibration", "Routing", "Compute" and "Machine" where set, "Command"), read from ReportHeader's JSON.
std::string ReportHeaderToText(const Json& header);

}  // namespace dockyard
