#include "planner/search/pareto.h"

#include <algorithm>
#include <stdexcept>

namespace dockyard {

std::vector<bool> ParetoFront(const std::vector<int64_t>& peak_bytes, const std::vector<double>& tokens_per_s) {
  if (peak_bytes.size() != tokens_per_s.size()) throw std::invalid_argument("ParetoFront: peak_bytes and tokens_per_s differ in length");
  const size_t n = peak_bytes.size();
  std::vector<size_t> by_peak(n);
  for (size_t i = 0; i < n; ++i) by_peak[i] = i;
  std::stable_sort(by_peak.begin(), by_peak.end(), [&](size_t a, size_t b) { return peak_bytes[a] < peak_bytes[b]; });
  std::vector<bool> front(n, false);
  double best_before = -1;
  for (size_t g = 0; g < n;) {
    size_t h = g;
    double group_best = -1;
    while (h < n && peak_bytes[by_peak[h]] == peak_bytes[by_peak[g]]) group_best = std::max(group_best, tokens_per_s[by_peak[h++]]);
    // On the front: the group's best, and strictly faster than every row of lower peak (a row
    // of lower peak and equal throughput dominates it).
    for (size_t k = g; k < h; ++k) front[by_peak[k]] = tokens_per_s[by_peak[k]] >= group_best && tokens_per_s[by_peak[k]] > best_before;
    best_before = std::max(best_before, group_best);
    g = h;
  }
  return front;
}

}  // namespace dockyard
