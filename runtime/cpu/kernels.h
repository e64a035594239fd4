// The CPU backend's hot-loop kernels (kernels_impl.inc), compiled for the baseline ISA and, on
// x86-64, for AVX2; BestKernels() picks the AVX2 table when the CPU has it. Both tables give
// bit-identical results (same operations in the same order, no FMA contraction).
#pragma once

namespace dockyard::runtime::cpu {

struct KernelTable {
  const char* isa;
  // C[m, n] (+)= A[m, k] . B[n, k]^T (row strides lda, ldb, ldc).
  void (*gemm_nt)(long m, long n, long k, const float* a, long lda, const float* b, long ldb, float* c, long ldc, bool accumulate);
  // C[m, n] (+)= A[m, k] . B[k, n].
  void (*gemm_nn)(long m, long n, long k, const float* a, long lda, const float* b, long ldb, float* c, long ldc, bool accumulate);
  // out[i] = scale * int32(bits(c0 + i)) / 2^31 for one weight row (runtime/data.h).
  void (*weight_row)(unsigned alpha, unsigned beta, unsigned gamma, long c0, long count, float scale, float* out);
};

const KernelTable& GenericKernels();
// nullptr where the AVX2 build is not available (not x86-64).
const KernelTable* Avx2Kernels();
// AVX2 when compiled in and supported by the CPU, else generic.
const KernelTable& BestKernels();

}  // namespace dockyard::runtime::cpu
