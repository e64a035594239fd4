// Random numbers of the routing sampler (see random.h).
#include "planner/routing/random.h"

#include <algorithm>
#include <vector>

namespace dockyard {

namespace {

uint64_t Mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

}  // namespace

Xoshiro256ss Xoshiro256ss::ForStream(uint64_t seed, uint64_t layer, uint64_t rank) {
  const uint64_t key = Mix64(Mix64(Mix64(seed) ^ (layer + 0x243f6a8885a308d3ULL)) ^ (rank + 0x13198a2e03707344ULL));
  return Xoshiro256ss(key);
}

namespace routing_detail {

void BuildAliasTable(const double* prob, size_t n, uint64_t* threshold, uint32_t* alias) {
  std::vector<double> scaled(n);
  std::vector<uint32_t> small, large;
  for (size_t i = 0; i < n; ++i) {
    scaled[i] = prob[i] * static_cast<double>(n);
    (scaled[i] < 1.0 ? small : large).push_back(static_cast<uint32_t>(i));
  }
  auto set = [&](uint32_t col, double keep, uint32_t other) {
    if (keep >= 1.0) {
      threshold[col] = ~uint64_t{0};
      alias[col] = col;
    } else {
      threshold[col] = static_cast<uint64_t>(std::max(0.0, keep) * 18446744073709551616.0);
      alias[col] = other;
    }
  };
  while (!small.empty() && !large.empty()) {
    const uint32_t lo = small.back();
    small.pop_back();
    const uint32_t hi = large.back();
    set(lo, scaled[lo], hi);
    scaled[hi] = (scaled[hi] + scaled[lo]) - 1.0;
    if (scaled[hi] < 1.0) {
      large.pop_back();
      small.push_back(hi);
    }
  }
  for (uint32_t c : large) set(c, 1.0, c);
  for (uint32_t c : small) set(c, 1.0, c);  // rounding leftovers
}

}  // namespace routing_detail

}  // namespace dockyard
