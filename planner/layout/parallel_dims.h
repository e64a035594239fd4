// ParallelDims: the parallel degrees of a training job, validated where they are built.
//
// Terms follow torchtitan's ParallelDims (dp_replicate, dp_shard, cp, tp, pp, ep, etp) and, with
// Convention::kMegatron, Megatron-Core's parallel_state (tp, cp, ep, dp, pp; expert side
// etp x ep x edp x pp with edp = world / (etp * ep * pp)).
//
// Every error message names each operand and its value, e.g.
//   "Invalid parallel dims: dp_replicate(1) * dp_shard(32) * cp(1) * tp(8) * pp(1) != world_size(512)".
#pragma once

#include <cstdint>
#include <string>

#include "planner/model/model_spec.h"

namespace dockyard {

enum class Convention { kTorchtitan, kMegatron };
const char* ConventionName(Convention c);

// Degrees as given by the user. dp_shard = -1 means "infer from the others" (torchtitan).
struct ParallelDimsOptions {
  int64_t world_size = 0;
  int64_t dp_replicate = 1;
  int64_t dp_shard = -1;
  int64_t cp = 1;
  int64_t tp = 1;
  int64_t ep = 1;
  int64_t etp = 1;
  int64_t pp = 1;
  Convention convention = Convention::kTorchtitan;
};

// Largest world this planner accepts (rank lists are materialized).
constexpr int64_t kMaxWorldSize = int64_t{1} << 20;

// The EP degree of dockyard-plan's embedded default (DeepSeek-V3, trained at EP 64): `preferred`
// where the ranks of one (pp, dp_replicate) slice allow it, else gcd(preferred, those ranks).
// Degrees out of range give 1 (ParallelDims::Build then reports them).
int64_t DefaultEp(const ParallelDimsOptions& options, int64_t preferred);

struct ParallelDims {
  int64_t world_size = 1;
  int64_t dp_replicate = 1;
  int64_t dp_shard = 1;
  int64_t cp = 1;
  int64_t tp = 1;
  int64_t ep = 1;
  int64_t etp = 1;
  int64_t pp = 1;
  // Expert FSDP degree: dp_shard * cp * tp / (ep * etp) (torchtitan's sparse mesh).
  int64_t efsdp = 1;
  Convention convention = Convention::kTorchtitan;

  // Megatron's expert data-parallel degree: world / (etp * ep * pp) = dp_replicate * efsdp.
  int64_t edp() const { return dp_replicate * efsdp; }
  // Ranks of one pipeline stage.
  int64_t stage_size() const { return world_size / pp; }

  // Validates the degrees on their own and resolves dp_shard = -1. Throws dockyard::Error.
  static ParallelDims Build(const ParallelDimsOptions& options);
};

// Checks the degrees against a model: ep | num_experts, heads and KV heads against tp, the
// logical expert intermediate size (never the fused 2F) against the TP degree that shards
// experts (torchtitan: tp when ep == 1, else etp; Megatron: etp), dense / shared intermediate sizes against tp,
// pp <= num_hidden_layers, and no tied embeddings with pp > 1 under torchtitan (its
// pipeline_llm raises NotImplementedError("Weight tying is not supported with Pipeline
// Parallel.")). Throws dockyard::Error.
void ValidateDimsForModel(const ParallelDims& dims, const ModelSpec& model);

// The same rules without an exception, for callers that only count broken layouts (the layout
// search): return false on the first rule broken and, when `error` is not null, write there the
// message Build / ValidateDimsForModel would throw (formatted only then). TryBuildParallelDims
// fills `*dims` (when not null) on success. Both still throw dockyard::Error where the degrees'
// product overflows int64 (impossible for divisors of one world size).
bool TryBuildParallelDims(const ParallelDimsOptions& options, ParallelDims* dims, std::string* error);
bool CheckDimsForModel(const ParallelDims& dims, const ModelSpec& model, std::string* error);

}  // namespace dockyard
