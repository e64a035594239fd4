// Group-limited routing (see group_routing.h).
#include "planner/sim/group_routing.h"

#include <algorithm>

#include <fmt/format.h>

namespace dockyard {

std::string GroupLimitProblem(int64_t num_experts, int64_t top_k, int64_t n_group, int64_t topk_group) {
  if (n_group < 1 || num_experts < 1 || num_experts % n_group != 0) {
    return fmt::format("n_group ({}) must be >= 1 and divide num_experts ({})", n_group, num_experts);
  }
  if (topk_group < 1 || topk_group > n_group) {
    return fmt::format("topk_group ({}) must be in [1, n_group ({})]", topk_group, n_group);
  }
  if (n_group > 1 && topk_group < n_group && topk_group * (num_experts / n_group) < top_k) {
    return fmt::format("the topk_group ({}) kept groups of num_experts / n_group = {} experts hold fewer than top_k ({}) experts",
                       topk_group, num_experts / n_group, top_k);
  }
  return "";
}

namespace routing_detail {

int64_t GroupSampler::Pick(const double* w, const uint8_t* taken, int64_t n, Xoshiro256ss& rng) {
  double total = 0;
  int64_t untaken = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (taken[i]) continue;
    total += w[i];
    ++untaken;
  }
  if (total > 0) {
    double u = rng.Uniform01() * total;
    int64_t last = -1;
    for (int64_t i = 0; i < n; ++i) {
      if (taken[i] || w[i] <= 0) continue;
      last = i;
      u -= w[i];
      if (u < 0) return i;
    }
    return last;  // rounding: the last untaken positive-weight item
  }
  // Only zero-weight items left: uniform among them.
  int64_t r = static_cast<int64_t>(rng.Below(static_cast<uint64_t>(untaken)));
  for (int64_t i = 0; i < n; ++i) {
    if (taken[i]) continue;
    if (r-- == 0) return i;
  }
  return n - 1;  // unreachable: untaken >= 1 whenever Pick is called
}

GroupSampler BuildGroupSampler(const std::vector<double>& share, int64_t top_k, const GroupLimit& limit) {
  GroupSampler s;
  s.num_experts = static_cast<int64_t>(share.size());
  s.top_k = top_k;
  s.limit = limit;
  s.group_size = s.num_experts / limit.n_group;
  s.weight = share;
  s.group_weight.assign(static_cast<size_t>(limit.n_group), 0.0);
  for (int64_t e = 0; e < s.num_experts; ++e) s.group_weight[static_cast<size_t>(e / s.group_size)] += share[static_cast<size_t>(e)];
  s.cum.assign(share.begin(), share.end());
  for (int64_t e = 0; e < s.num_experts; ++e) {
    if (e % s.group_size != 0) s.cum[static_cast<size_t>(e)] += s.cum[static_cast<size_t>(e - 1)];
  }
  s.uniform = !share.empty() && share.front() > 0 && std::all_of(share.begin(), share.end(), [&](double w) { return w == share.front(); });
  s.group_cum = s.group_weight;
  for (size_t g = 1; g < s.group_cum.size(); ++g) s.group_cum[g] += s.group_cum[g - 1];
  return s;
}

}  // namespace routing_detail

}  // namespace dockyard
