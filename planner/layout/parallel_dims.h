// ParallelDims: the parallel degrees of a training job, validated where they are built.
//
// Terms follow torchtitan's ParallelDims (dp_replicate, dp_shard, cp, tp, pp, ep, etp) and, with
// Convention::kMegatron, Megatron-Core's parallel_state (tp, cp, ep, dp, pp; expert side
// etp x ep x edp x pp with edp = world / (etp * ep * pp)). Which torchtitan release's rules apply
// is the convention's (convention.h): torchtitan (no expert TP, ep >= tp for MoE models) or
// torchtitan-2026-03 (etp 1 or tp).
//
// Every error message names each operand and its value, e.g.
//   "Invalid parallel dims: dp_replicate(1) * dp_shard(32) * cp(1) * tp(8) * pp(1) != world_size(512)".
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "planner/layout/convention.h"
#include "planner/model/model_spec.h"

namespace dockyard {

// Degrees as given by the user. dp_shard = -1 means "infer from the others" (torchtitan).
struct ParallelDimsOptions {
  int64_t world_size = 0;
  int64_t dp_replicate = 1;
  int64_t dp_shard = -1;
  int64_t cp = 1;
  int64_t tp = 1;
  int64_t ep = 1;
  // Unset (--etp not given): the convention's default, DefaultEtp (megatron: tp; torchtitan: 1).
  std::optional<int64_t> etp;
  int64_t pp = 1;
  Convention convention = Convention::kTorchtitan;
};

// The expert TP degree the options give: etp, or the convention's default when unset (DefaultEtp:
// megatron tp, torchtitan 1). The layout search always sets etp; its rows read it through this.
int64_t EtpOf(const ParallelDimsOptions& options);

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
  // etp is the convention's default (ParallelDimsOptions::etp unset), for the reports' "Defaults".
  bool etp_default = false;

  // Megatron's expert data-parallel degree: world / (etp * ep * pp) = dp_replicate * efsdp.
  int64_t edp() const { return dp_replicate * efsdp; }
  // Ranks of one pipeline stage.
  int64_t stage_size() const { return world_size / pp; }

  // Validates the degrees on their own, resolves dp_shard = -1 and an unset etp (DefaultEtp).
  // Expert rules by convention: torchtitan etp must be 1 (PR #3167 removed expert tensor
  // parallelism); torchtitan-2026-03 etp 1 or tp ("Currently we only support ETP=TP or ETP=1");
  // megatron any etp with etp x ep x pp dividing the world and ep x etp one stage. Throws
  // dockyard::Error naming the degree, its value (and, for a defaulted etp, where it came from)
  // and the rule.
  static ParallelDims Build(const ParallelDimsOptions& options);
};

// Checks the degrees against a model: ep | num_experts, ep >= tp under Convention::kTorchtitan
// (torchtitan requires EP >= TP for MoE models, pytorch/torchtitan PR #4794), heads and KV heads against tp, the
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

// The two rules of torchtitan as it is (Convention::kTorchtitan; true under the other conventions),
// the one home Build / CheckDimsForModel, the layout search's enumeration (search.cc: no etp > 1
// under torchtitan) and its pins (search_pins.cc) call. Each returns false on the broken rule and
// writes, when `error` is not null, the message naming the degrees, their values, the rule and the
// torchtitan PR:
//  - CheckEtpForConvention: etp must be 1. pytorch/torchtitan PR #3167 ("[MoE][4/n] deprecate
//    expert tensor parallel (ETP)", 2026-04-30) removed the etp mesh axis and
//    parallelism.expert_tensor_parallel_degree. (torchtitan-2026-03's "ETP=TP or ETP=1" is Build's.)
//  - CheckEpAtLeastTp: for a model with MoE layers, ep >= tp (pytorch/torchtitan PR #4794, 2026-09:
//    torchtitan requires EP >= TP for MoE models).
bool CheckEtpForConvention(Convention convention, int64_t etp, std::string* error);
bool CheckEpAtLeastTp(Convention convention, int64_t ep, int64_t tp, const ModelSpec& model, std::string* error);

}  // namespace dockyard
