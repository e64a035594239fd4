// The `--grouped-gemm auto` rule (kernels/grouped_gemm_path.h), against the H100 crossover it encodes.
#include "kernels/grouped_gemm_path.h"

#include <doctest/doctest.h>

namespace dockyard::kernels {

TEST_CASE("auto runs cuBLAS's grouped call below 128 rows per expert and one GEMM per expert from 128 on") {
  // bench_gpu on H100 (grouped / loop TFLOP/s): 64 rows 179.5 / 138.5 -> grouped; 128 rows
  // 285.2 / 299.3 -> loop; 1,024 rows 305.0 / 749.7 -> loop.
  CHECK(ResolveGroupedGemmPath(GroupedGemmPath::kAuto, 8 * 64, 8) == GroupedGemmPath::kGrouped);
  CHECK(ResolveGroupedGemmPath(GroupedGemmPath::kAuto, 8 * 128, 8) == GroupedGemmPath::kLoop);
  CHECK(ResolveGroupedGemmPath(GroupedGemmPath::kAuto, 8 * 1024, 8) == GroupedGemmPath::kLoop);
  // The mean over the experts that have rows: 4 of 8 with 200 rows each -> 200 per expert -> loop;
  // counted over all 8 it would be 100 (grouped).
  CHECK(ResolveGroupedGemmPath(GroupedGemmPath::kAuto, 4 * 200, 4) == GroupedGemmPath::kLoop);
  CHECK(ResolveGroupedGemmPath(GroupedGemmPath::kAuto, 127 * 3, 3) == GroupedGemmPath::kGrouped);
  // No rows: nothing to run; the grouped path (which returns at once).
  CHECK(ResolveGroupedGemmPath(GroupedGemmPath::kAuto, 0, 0) == GroupedGemmPath::kGrouped);
  // An explicit choice is kept.
  CHECK(ResolveGroupedGemmPath(GroupedGemmPath::kGrouped, 8 * 1024, 8) == GroupedGemmPath::kGrouped);
  CHECK(ResolveGroupedGemmPath(GroupedGemmPath::kLoop, 8, 8) == GroupedGemmPath::kLoop);
}

}  // namespace dockyard::kernels
