// The router's group selection of group-limited routing (group_limit.h has the rule and its
// sources), one row at a time, header-only so that the CPU backend, the reference and the CUDA
// kernel (kernels/moe_kernels.cu) run the same code in the same arithmetic order.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define DOCKYARD_HOST_DEVICE __host__ __device__
#else
#define DOCKYARD_HOST_DEVICE
#endif

namespace dockyard {

// select [cols] (biased scores) in place: the n_group contiguous groups of cols / n_group are
// scored (the sum of the two highest values when top2_sum and a group has >= 2 entries, else the
// highest), the topk_group best kept (ties to the lower group), every entry of the other groups
// set to -inf. scratch holds n_group floats. Nothing happens unless 1 < n_group and topk_group <
// n_group; n_group must divide cols and topk_group be >= 1 (GroupLimitProblem).
DOCKYARD_HOST_DEVICE inline void GroupSelectRow(float* select, int64_t cols, int64_t n_group, int64_t topk_group, bool top2_sum,
                                                float* scratch) {
  if (!(n_group > 1 && topk_group < n_group)) return;
  const float neg_inf = -__builtin_huge_valf();
  const float pos_inf = __builtin_huge_valf();
  const int64_t size = cols / n_group;
  for (int64_t g = 0; g < n_group; ++g) {
    // The group's highest and second highest value (equal values: the first seen stays first).
    float first = neg_inf, second = neg_inf;
    for (int64_t j = 0; j < size; ++j) {
      const float v = select[g * size + j];
      if (v > first) {
        second = first;
        first = v;
      } else if (v > second) {
        second = v;
      }
    }
    scratch[g] = top2_sum && size >= 2 ? first + second : first;
  }
  // Keep the best group topk_group times (ties to the lower group), marking it +inf.
  for (int64_t i = 0; i < topk_group; ++i) {
    int64_t best = -1;
    for (int64_t g = 0; g < n_group; ++g) {
      if (scratch[g] == pos_inf) continue;
      if (best < 0 || scratch[g] > scratch[best]) best = g;
    }
    scratch[best] = pos_inf;
  }
  for (int64_t g = 0; g < n_group; ++g) {
    if (scratch[g] == pos_inf) continue;
    for (int64_t j = 0; j < size; ++j) select[g * size + j] = neg_inf;
  }
}

}  // namespace dockyard
