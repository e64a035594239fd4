// Group-limited routing (see group_routing.h).
#include "planner/routing/group_routing.h"

#include <algorithm>

#include <fmt/format.h>

namespace dockyard {

namespace routing_detail {

int64_t GroupSampler::Pick(const double* w, const uint8_t* taken, int64_t n, uint64_t x) {
  double total = 0;
  int64_t untaken = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (taken[i]) continue;
    total += w[i];
    ++untaken;
  }
  if (total > 0) {
    double u = Xoshiro256ss::Uniform01Of(x) * total;
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
  int64_t r = static_cast<int64_t>(Xoshiro256ss::BelowOf(x, static_cast<uint64_t>(untaken)));
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
  const size_t G = static_cast<size_t>(limit.n_group), S = static_cast<size_t>(s.group_size);
  for (double w : s.group_weight) s.total_weight += w;
  std::vector<double> prob(std::max(G, S));
  s.group_threshold.resize(G);
  s.group_alias.resize(G);
  for (size_t g = 0; g < G; ++g) prob[g] = s.total_weight > 0 ? s.group_weight[g] / s.total_weight : 0.0;
  BuildAliasTable(prob.data(), G, s.group_threshold.data(), s.group_alias.data());
  s.expert_threshold.resize(share.size());
  s.expert_alias.resize(share.size());
  for (size_t g = 0; g < G; ++g) {
    for (size_t e = 0; e < S; ++e) prob[e] = s.group_weight[g] > 0 ? share[g * S + e] / s.group_weight[g] : 0.0;
    BuildAliasTable(prob.data(), S, s.expert_threshold.data() + g * S, s.expert_alias.data() + g * S);
  }
  s.uniform = !share.empty() && share.front() > 0 && std::all_of(share.begin(), share.end(), [&](double w) { return w == share.front(); });
  if (s.uniform && limit.n_group <= 64) {
    // C(n_group, topk_group) by the product formula (each partial product is a binomial
    // coefficient, so the division is exact), stopping once it passes the table limit.
    const uint64_t groups = static_cast<uint64_t>(limit.n_group), kg = static_cast<uint64_t>(limit.topk_group);
    uint64_t count = 1;
    for (uint64_t i = 1; i <= kg && count <= GroupSampler::kMaxKeptSets; ++i) count = count * (groups - kg + i) / i;
    if (count <= GroupSampler::kMaxKeptSets) {
      s.kept_sets.reserve(static_cast<size_t>(count));
      // Gosper's hack: the next larger mask with the same number of set bits.
      const uint64_t end = groups == 64 ? 0 : uint64_t{1} << groups;
      for (uint64_t m = kg == 64 ? ~uint64_t{0} : (uint64_t{1} << kg) - 1;;) {
        s.kept_sets.push_back(m);
        const uint64_t c = m & (~m + 1), r = m + c;
        if (r == 0 || (end != 0 && r >= end)) break;  // r wrapped past bit 63, or left the n_group bits
        m = (((r ^ m) >> 2) / c) | r;
        if (end != 0 && m >= end) break;
      }
      if (s.kept_sets.size() * kg * S <= GroupSampler::kMaxSlotTable) {
        s.kept_experts.reserve(s.kept_sets.size() * kg * S);
        for (uint64_t m : s.kept_sets) {
          for (; m != 0; m &= m - 1) {
            for (size_t e = 0; e < S; ++e) s.kept_experts.push_back(static_cast<int32_t>(static_cast<size_t>(__builtin_ctzll(m)) * S + e));
          }
        }
      }
    }
  }
  return s;
}

}  // namespace routing_detail

}  // namespace dockyard
