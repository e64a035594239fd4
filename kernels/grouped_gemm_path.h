// Which cuBLAS path runs a grouped GEMM of the routed experts (kernels/grouped_gemm.h), without
// CUDA: the rule `--grouped-gemm auto` (dockyard-run's default) applies per call.
//
// Measured on one H100 80GB HBM3 (tools/gpu_check.sh, kernels/bench_gpu: 8 experts, C[M, 4096] =
// A[M, 7168] . W_e^T, BF16, TFLOP/s grouped / loop): 16 rows per expert 46.2 / 36.8, 64 rows
// 179.5 / 138.5, 128 rows 285.2 / 299.3, 256 rows 318.5 / 499.9, 512 rows 329.1 / 720.4, 1,024 rows
// 305.0 / 749.7, 4,096 rows 287.4 / 727.4 (a dense GEMM of the same FLOPs 739-799). cuBLAS's grouped
// call (cublasGemmGroupedBatchedEx, group size 1 per expert) wins only while each expert's GEMM is
// too small to fill the GPU; from 128 rows per expert on, one cublasGemmEx per expert is faster,
// 2.5x at 1,024 rows.
#pragma once

#include <cstdint>

namespace dockyard::kernels {

enum class GroupedGemmPath { kGrouped, kLoop, kAuto };

// The mean rows per non-empty expert from which `kAuto` runs the loop (the H100 crossover above).
inline constexpr int64_t kLoopMinMeanRows = 128;

// The path that runs: `preferred` unless it is kAuto, which picks kLoop when the `rows` over
// `nonempty_groups` (experts with rows) average at least kLoopMinMeanRows, else kGrouped (also
// for no rows).
inline GroupedGemmPath ResolveGroupedGemmPath(GroupedGemmPath preferred, int64_t rows, int64_t nonempty_groups) {
  if (preferred != GroupedGemmPath::kAuto) return preferred;
  if (nonempty_groups <= 0 || rows <= 0) return GroupedGemmPath::kGrouped;
  return rows >= kLoopMinMeanRows * nonempty_groups ? GroupedGemmPath::kLoop : GroupedGemmPath::kGrouped;
}

}  // namespace dockyard::kernels
