// The per-expert refit map: what an RL trainer needs to push weights from a sharded trainer into
// an inference engine (cf. NeMo-RL prepare_refit_info). For every fused routed-expert tensor of
// the inventory ([E, ...], the family's stored layout), it lists the per-expert tensors the
// engine expects — name as in HF per-expert checkpoints, shape, dtype — together with where each
// one is cut from (source FQN, range on one dim of the [expert] slice, transpose) and the EP rank
// that holds the expert (plan.experts).
//
// Layouts, per expert slice (dim 0 of the fused tensor removed):
//   [2F, D] gate_up (transformers v5): gate = rows [0, F), up = rows [F, 2F); down [D, F] whole.
//   [D, 2F] gate_up (Llama-4): gate = cols [0, F), up = cols [F, 2F), each transposed to [F, D];
//                              down [F, D] transposed to [D, F].
//   gpt-oss: gate/up interleaved on the last dim, so gate_up_proj [D, 2F] stays fused, as stored
//            (with gate_up_proj_bias [2F]); down_proj [F, D] as stored.
//   DBRX:    w1 / v1 [F, D] whole; w2 [F, D] (in x out) kept as stored.
// F, D and the layout come from the inventory entries (shape, tp_dim, fused_sections), the names
// from the family.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "planner/base/json_util.h"
#include "planner/layout/plan.h"

namespace dockyard {

struct RefitEntry {
  std::string name;            // per-expert name the inference engine expects
  std::vector<int64_t> shape;  // as the engine expects it (nn.Linear weight = [out, in])
  std::string dtype;           // the refit dtype
  int64_t layer = -1;
  int64_t expert_idx = -1;
  int64_t ep_rank = -1;    // the EP rank that holds the expert (plan.experts.OwnerOf)
  std::string source_fqn;  // the fused tensor it is cut from
  // Range [slice_begin, slice_end) on dim slice_dim of the fused tensor's [expert] slice (dim 0
  // removed); -1 / 0 / 0 = the whole slice.
  int slice_dim = -1;
  int64_t slice_begin = 0;
  int64_t slice_end = 0;
  bool transpose = false;  // the slice is [in, out] and must be transposed to [out, in]
};

struct RefitMap {
  std::string dtype;
  int64_t num_experts = 0;
  int64_t ep = 1;
  // Layers in order; within a layer experts 0..E-1; within an expert gate, up, down weights,
  // then their biases (gpt-oss: gate_up_proj, gate_up_proj_bias, down_proj, down_proj_bias).
  std::vector<RefitEntry> entries;
};

// The refit map of a plan. `refit_dtype` empty = plan.training.refit_dtype, and when that is
// empty too, plan.training.param_dtype. The dtype is validated with DtypeBytes; the plan's expert
// ownership with CheckExpertCoverage. Throws dockyard::Error.
RefitMap BuildRefitMap(const Plan& plan, const std::string& refit_dtype);

// Throws dockyard::Error unless the per-EP-rank expert lists cover exactly {0..num_experts-1},
// each id once: "refit: expert X is held by EP ranks A and B", "refit: expert X is held by no
// EP rank", "refit: expert X on EP rank R is out of range [0, N)".
void CheckExpertCoverage(const std::vector<std::vector<int64_t>>& experts_per_ep_rank, int64_t num_experts);

// {"dtype", "num_experts", "ep", "entries": [{"name", "shape", "dtype", "layer", "expert_idx",
// "ep_rank", "source_fqn", "slice": {"dim", "begin", "end"} or null, "transpose"}]}
Json RefitMapToJson(const RefitMap& map);

}  // namespace dockyard
