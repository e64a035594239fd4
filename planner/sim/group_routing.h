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
// In the routing sampler (routing.h) a group-limited model draws each token in two stages from
// the distribution's expert shares w (uniform, zipf, hot or trace, capped as routing.h says):
// topk_group distinct groups by successive sampling in proportion to their summed share, then
// top_k distinct experts inside the kept groups by successive sampling in proportion to w.
// Uniform routing stays uniform (symmetry); for skewed shares the inclusion frequencies are those
// of this two-stage draw, not exactly the capped shares (no calibration is done for it).
//
// topk_group bounds the number of NODES a token reaches only when each group's experts live on
// one node (DeepSeek-V3 training: 8 groups on 8 nodes, EP 64); with another layout a group can
// span nodes, or a node hold parts of several groups.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "planner/sim/group_select.h"
#include "planner/sim/routing.h"

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

// PrepareRouting (routing.h) for a group-limited model: every layer draws its tokens in the two
// stages above from the layer's capped shares. With an inactive limit it equals PrepareRouting.
// Throws dockyard::Error naming n_group / topk_group and the rule (GroupLimitProblem).
RoutingModel PrepareRouting(const RoutingSpec& spec, int64_t num_experts, int64_t top_k, int64_t num_layers,
                            const GroupLimit& limit);

namespace routing_detail {

// The two-stage draw of a group-limited layer over all E experts (ids 0..E-1).
struct GroupSampler {
  int64_t num_experts = 0, top_k = 0, group_size = 0;
  GroupLimit limit;
  std::vector<double> weight;        // [E] the expert shares
  std::vector<double> group_weight;  // [n_group] their sums per group

  // Draws `tokens` tokens: sink.BeginToken() then top_k sink.Pick(expert) per token.
  template <class Sink>
  void Draw(Xoshiro256ss& rng, int64_t tokens, Sink& sink) const;

 private:
  // Successive sampling of one item among `n` with weights w[] (skipping taken[] ones):
  // returns its index; uniform over the untaken ones when their total weight is 0.
  static int64_t Pick(const double* w, const uint8_t* taken, int64_t n, Xoshiro256ss& rng);
};

GroupSampler BuildGroupSampler(const std::vector<double>& share, int64_t top_k, const GroupLimit& limit);

template <class Sink>
void GroupSampler::Draw(Xoshiro256ss& rng, int64_t tokens, Sink& sink) const {
  const int64_t G = limit.n_group, kg = limit.topk_group, S = group_size;
  std::vector<uint8_t> group_taken(static_cast<size_t>(G));
  std::vector<int64_t> kept(static_cast<size_t>(kg));
  std::vector<double> kept_mass(static_cast<size_t>(kg));  // untaken weight left in kept group i
  std::vector<double> kept_left(static_cast<size_t>(kg));  // untaken experts left in kept group i
  std::vector<uint8_t> taken(static_cast<size_t>(kg * S));
  const std::vector<uint8_t> none(static_cast<size_t>(kg), 0);
  for (int64_t t = 0; t < tokens; ++t) {
    sink.BeginToken();
    std::fill(group_taken.begin(), group_taken.end(), uint8_t{0});
    for (int64_t i = 0; i < kg; ++i) {
      const int64_t g = Pick(group_weight.data(), group_taken.data(), G, rng);
      group_taken[static_cast<size_t>(g)] = 1;
      kept[static_cast<size_t>(i)] = g;
      kept_mass[static_cast<size_t>(i)] = group_weight[static_cast<size_t>(g)];
      kept_left[static_cast<size_t>(i)] = static_cast<double>(S);
    }
    std::fill(taken.begin(), taken.end(), uint8_t{0});
    // Each pick: a kept group in proportion to its untaken weight (in proportion to its untaken
    // experts once no weight is left), then an expert inside it in proportion to its weight --
    // together a draw in proportion to weight over the untaken experts of the kept groups.
    for (int64_t j = 0; j < top_k; ++j) {
      bool any_mass = false;
      for (int64_t i = 0; i < kg; ++i) any_mass = any_mass || (kept_mass[static_cast<size_t>(i)] > 0 && kept_left[static_cast<size_t>(i)] > 0);
      if (any_mass) {
        for (int64_t i = 0; i < kg; ++i) {
          if (kept_left[static_cast<size_t>(i)] == 0) kept_mass[static_cast<size_t>(i)] = 0;  // rounding residue
        }
      }
      const std::vector<double>& by = any_mass ? kept_mass : kept_left;
      const int64_t i = Pick(by.data(), none.data(), kg, rng);
      const int64_t g = kept[static_cast<size_t>(i)];
      uint8_t* group_taken_experts = taken.data() + i * S;
      const int64_t x = Pick(weight.data() + g * S, group_taken_experts, S, rng);
      group_taken_experts[x] = 1;
      kept_mass[static_cast<size_t>(i)] = std::max(0.0, kept_mass[static_cast<size_t>(i)] - weight[static_cast<size_t>(g * S + x)]);
      kept_left[static_cast<size_t>(i)] -= 1;
      sink.Pick(static_cast<uint32_t>(g * S + x));
    }
  }
}

}  // namespace routing_detail

}  // namespace dockyard
