// The time of one MoE-layer phase in a simulated step, for the cost tests (hand arithmetic on a
// phase's forward or backward row).
#pragma once

#include <string>

#include <doctest/doctest.h>

#include "planner/cost/cost.h"

namespace dockyard::testing {

// The `direction` ("forward" / "backward") time, us per layer and micro-batch, of MoE-layer phase
// `name` ("router", "grouped_gemm", ...) in `cost`; fails the test when there is none.
inline double MoePhaseUs(const CostBreakdown& cost, const char* name, const char* direction) {
  for (const PhaseCost& p : cost.phases) {
    if (PhaseName(p.phase) == std::string(name) && p.layer_kind == LayerKind::kMoe && DirectionName(p.direction) == std::string(direction)) {
      return p.time_us;
    }
  }
  FAIL("no phase ", name, " ", direction);
  return 0;
}

}  // namespace dockyard::testing
