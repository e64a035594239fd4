// The Pareto front of throughput against peak memory: the layouts no other layout beats on both.
#pragma once

#include <cstdint>
#include <vector>

namespace dockyard {

// front[i] is true when no row j dominates row i: peak_bytes[j] <= peak_bytes[i] and
// tokens_per_s[j] >= tokens_per_s[i], one of them strictly (bytes compared exactly; rows of equal
// peak and equal throughput are all on it, or all off). Rows are visited by peak ascending: a row
// is on the front when it has its peak's best throughput and beats every row of lower peak.
// O(n log n). The two vectors have the same length (else
// std::invalid_argument).
std::vector<bool> ParetoFront(const std::vector<int64_t>& peak_bytes, const std::vector<double>& tokens_per_s);

}  // namespace dockyard
