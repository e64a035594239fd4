// Group-limited routing (DeepSeek-V2 "group_limited_greedy", DeepSeek-V3 "noaux_tc"): the
// num_experts experts are split into n_group equal, contiguous groups (group g holds experts
// [g * E/n_group, (g + 1) * E/n_group)); a token first keeps the topk_group best groups, then
// takes its top_k experts inside them only.
//
// The router's rule (deepseek-ai/DeepSeek-V3 inference/model.py, Gate.forward; HF
// modeling_deepseek_v3.py DeepseekV3TopkRouter.get_topk_indices):
//   scores   = sigmoid(logits) (V3) or softmax(logits) (V2)
//   select   = scores + e_score_correction_bias (V3; V2 has no bias: select = scores)
//   group score = the sum of the two highest `select` values of the group when the model has the
//              score-correction bias (V3), else the group's highest value (V2, amax)
//   keep the topk_group groups of highest score (ties to the lower group), set `select` of every
//              expert of the other groups to -inf (DeepSeek's model.py; HF fills 0.0, which could
//              let a masked expert beat a kept one with a negative bias), top_k over `select`
//   weights  = the UNBIASED scores at the picked experts, normalized if norm_topk_prob, times
//              routed_scaling_factor (the bias only picks experts).
// The runtime's CPU and CUDA routers and the reference apply group_select.h GroupSelectRow.
//
// The routing sampler draws group-limited tokens in planner/routing/group_routing.h.
#pragma once

#include <cstdint>
#include <string>

#include "planner/model/group_select.h"

namespace dockyard {

// The limit read from the model config (HF n_group, topk_group). n_group = 1 (or topk_group =
// n_group) means no limit.
struct GroupLimit {
  int64_t n_group = 1;
  int64_t topk_group = 1;
  bool top2_sum = true;  // group score: sum of the top two (noaux_tc) or the max (group_limited_greedy)
  bool active() const { return n_group > 1 && topk_group < n_group; }
};

// Empty when (E, top_k, n_group, topk_group) is valid, else the rule it breaks: n_group >= 1
// divides num_experts, 1 <= topk_group <= n_group, and the kept groups hold at least top_k
// experts (topk_group * E / n_group >= top_k), as DeepSeek's Gate requires.
std::string GroupLimitProblem(int64_t num_experts, int64_t top_k, int64_t n_group, int64_t topk_group);

// Runtime router step, in place on `select` [cols] (one row of biased scores): group_select.h
// GroupSelectRow with this limit (masks every group but the topk_group best with -inf; no-op
// when the limit is not active). group_scratch holds n_group floats.
inline void GroupLimitedSelectRow(float* select, int64_t cols, const GroupLimit& limit, float* group_scratch) {
  GroupSelectRow(select, cols, limit.n_group, limit.topk_group, limit.top2_sum, group_scratch);
}

}  // namespace dockyard
