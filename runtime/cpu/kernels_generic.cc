// Baseline-ISA build of the CPU kernels (kernels_impl.inc) and the run-time choice of a table.
#include "runtime/cpu/kernels.h"

// The kernels are internal (static): the AVX-vector ABI note does not apply.
#pragma GCC diagnostic ignored "-Wpsabi"
namespace dockyard::runtime::cpu {
namespace generic_kernels {
#include "runtime/cpu/kernels_impl.inc"
}  // namespace generic_kernels

const KernelTable& GenericKernels() {
  static const KernelTable table{"generic", &generic_kernels::GemmNT, &generic_kernels::GemmNN, &generic_kernels::WeightRow};
  return table;
}

const KernelTable& BestKernels() {
  static const KernelTable* best = [] {
#if defined(__x86_64__) && defined(__GNUC__)
    if (Avx2Kernels() != nullptr && __builtin_cpu_supports("avx2")) return Avx2Kernels();
#endif
    return &GenericKernels();
  }();
  return *best;
}

}  // namespace dockyard::runtime::cpu
