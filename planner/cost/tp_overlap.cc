#include "planner/cost/tp_overlap.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "planner/base/error.h"

namespace dockyard {

TpBlockExposureUs TpBlockExposedUs(double c, const TpBlockGemmsUs& g, int64_t tp, Convention convention, bool tp_comm_overlap,
                                   double s) {
  if (tp < 2) throw Error(fmt::format("internal: a sequence-parallel block needs tp >= 2, got {}", tp));
  for (double v : {c, g.column, g.row}) {
    if (!(std::isfinite(v) && v >= 0)) throw Error(fmt::format("internal: TP block time {} us is not a finite time >= 0", v));
  }
  if (!(s >= 0 && s < 1)) throw Error(fmt::format("internal: TP-overlap SM share must be in [0, 1), got {}", s));
  TpBlockExposureUs e;
  if (convention != Convention::kMegatron) {
    e.forward = 2 * c;
    e.backward = 2 * c;
    return e;
  }
  if (!tp_comm_overlap) {
    e.forward = 2 * c;
    e.backward = c + 2 * std::max(0.0, c - g.column);
    return e;
  }
  const double n = static_cast<double>(tp);
  auto ring = [&](double gemm) { return (n - 1) * std::max(0.0, c / (n - 1) - gemm / n); };
  auto slowed = [&](double gemm) { return gemm / (1 - s); };
  auto pipe = [&](double gemm) { return c / 4 + 3 * std::max(0.0, c / 4 - slowed(gemm) / 4) + (slowed(gemm) - gemm); };
  auto bulk = [&](double gemm) { return std::max(0.0, c - slowed(gemm)) + (slowed(gemm) - gemm); };
  e.forward = ring(g.column) + pipe(g.row);
  e.backward = ring(g.row) + 2 * bulk(g.column);
  return e;
}

}  // namespace dockyard
