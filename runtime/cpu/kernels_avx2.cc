// AVX2 build of the CPU kernels (kernels_impl.inc), x86-64 only. Only this file's own
// functions get the AVX2 target: every header is included before the pragma (see the .inc).
#include "runtime/cpu/kernels.h"

#if defined(__x86_64__) && defined(__GNUC__)
// The kernels are internal (static): the AVX-vector ABI note does not apply.
#pragma GCC diagnostic ignored "-Wpsabi"
#pragma GCC push_options
#pragma GCC target("avx2")
namespace dockyard::runtime::cpu {
namespace avx2_kernels {
#include "runtime/cpu/kernels_impl.inc"
}  // namespace avx2_kernels
}  // namespace dockyard::runtime::cpu
#pragma GCC pop_options

namespace dockyard::runtime::cpu {
const KernelTable* Avx2Kernels() {
  static const KernelTable table{"avx2", &avx2_kernels::GemmNT, &avx2_kernels::GemmNN, &avx2_kernels::WeightRow};
  return &table;
}
}  // namespace dockyard::runtime::cpu
#else
namespace dockyard::runtime::cpu {
const KernelTable* Avx2Kernels() {
  return nullptr;
}
}  // namespace dockyard::runtime::cpu
#endif
