// Grouped GEMM of the routed experts through cuBLAS: one GEMM per expert (group) over that
// expert's consecutive rows, row-major, as runtime/backend.h's GroupedGemmArgs:
//   C[rows_g, n] (+)= A[rows_g, k] . op(B_g),  op(B_g) = B_g^T for B_g [n, k] (nn.Linear's
//   out x in), else B_g [k, n].
// Sizes are on the host (the split sizes are on the host after the count exchange), so
// cublasGemmGroupedBatchedEx (cuBLAS >= 12.5) takes them directly; each expert is its own
// cuBLAS group (rows differ per expert) with group_size 1. The per-expert cublasGemmEx loop is
// the other path: used when asked, when `kAuto` picks it (from 128 rows per expert on, where it
// is faster: kernels/grouped_gemm_path.h has the H100 measurements), and automatically
// (remembered per context) when the grouped call reports the type combination unsupported. A device-sized grouped GEMM (sizes read on
// the GPU, no host round trip) would slot in as a third path.
//
// Precision: kFp32 computes in fp32 (CUBLAS_COMPUTE_32F, the CPU backend's arithmetic up to
// summation order); kTf32 lets cuBLAS use TF32 tensor cores; kBf16 rounds A and B to bf16
// (round to nearest even), accumulates in fp32 and writes a bf16 result (the combination the
// grouped call documents: bf16 A, B and C with CUBLAS_COMPUTE_32F), which a kernel widens into
// (or adds to) the fp32 C: what BF16 training does. The fp32 -> bf16 conversions of A and the
// B_g run inside RunFloat and are part of its time (dockyard-run keeps fp32 weights; a bf16
// model would store them converted once).
// Row-major C = A . op(B) is computed as column-major C^T = op(B)^T . A^T, so no transposes
// are materialized.
// Errors: cuBLAS and CUDA failures throw dockyard::Error naming the call and the status.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "kernels/grouped_gemm_path.h"

namespace dockyard::kernels {

enum class GemmPrecision { kFp32, kTf32, kBf16 };

const char* PrecisionName(GemmPrecision p);  // "fp32", "tf32", "bf16"
const char* PathName(GroupedGemmPath p);     // "cublas_grouped", "cublas_loop", "auto"
// Parses "fp32" | "tf32" | "bf16"; throws dockyard::Error naming `flag` otherwise.
GemmPrecision ParsePrecision(const std::string& value, const std::string& flag);

// Typed operands (device pointers) of a grouped GEMM. `b` is a host array of num_groups device
// pointers (a group with no rows may have a null one); offsets a host array of num_groups + 1.
struct GroupedGemmDesc {
  int64_t num_groups = 0;
  const int64_t* offsets = nullptr;
  int64_t n = 0, k = 0;
  const void* a = nullptr;
  int64_t lda = 0;
  const void* const* b = nullptr;
  int64_t ldb = 0;
  bool trans_b = true;
  void* c = nullptr;
  int64_t ldc = 0;
  bool accumulate = false;
  cudaDataType_t ab_type = CUDA_R_32F;  // CUDA_R_32F or CUDA_R_16BF
  cudaDataType_t c_type = CUDA_R_32F;   // CUDA_R_32F (or CUDA_R_16BF with bf16 A/B)
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
};

// One cuBLAS handle on one stream plus scratch (device pointer arrays, bf16 copies). Not
// thread-safe: one per rank.
class CublasGemm {
 public:
  explicit CublasGemm(cudaStream_t stream);
  ~CublasGemm();
  CublasGemm(const CublasGemm&) = delete;
  CublasGemm& operator=(const CublasGemm&) = delete;

  // Typed grouped GEMM; returns the path that ran (kAuto resolves per call by
  // ResolveGroupedGemmPath; kGrouped falls back to kLoop once cuBLAS says the grouped call does
  // not support the operands).
  GroupedGemmPath Run(const GroupedGemmDesc& desc, GroupedGemmPath preferred);
  // fp32 operands at `precision` (bf16: A and the B_g converted into scratch first).
  GroupedGemmPath RunFloat(int64_t num_groups, const int64_t* offsets, int64_t n, int64_t k, const float* a, int64_t lda,
                           const float* const* b, int64_t ldb, bool trans_b, float* c, int64_t ldc, bool accumulate,
                           GemmPrecision precision, GroupedGemmPath preferred);
  // One dense GEMM, row-major C[m, n] (+)= A[m, k] . op(B) with typed operands.
  void Dense(int64_t m, int64_t n, int64_t k, const void* a, int64_t lda, const void* b, int64_t ldb, bool trans_b, void* c, int64_t ldc,
             bool accumulate, cudaDataType_t ab_type, cudaDataType_t c_type, cublasComputeType_t compute);

  bool grouped_unsupported() const { return grouped_unsupported_; }
  // The last path that ran (kGrouped until a grouped call was refused).
  GroupedGemmPath last_path() const { return last_path_; }

 private:
  void EnsureScratch(void** ptr, int64_t* capacity, int64_t bytes);

  cudaStream_t stream_;
  cublasHandle_t handle_ = nullptr;
  bool grouped_unsupported_ = false;
  GroupedGemmPath last_path_ = GroupedGemmPath::kGrouped;
  void* pointers_ = nullptr;  // device [3 * groups] pointers
  int64_t pointers_bytes_ = 0;
  void* host_pointers_ = nullptr;  // pinned staging of the pointer arrays (async upload)
  int64_t host_pointers_bytes_ = 0;
  cudaEvent_t uploaded_ = nullptr;  // the last upload from host_pointers_ has been read
  void* c16_ = nullptr;             // bf16 result before widening
  int64_t c16_bytes_ = 0;
  void* a16_ = nullptr;  // bf16 copy of A
  int64_t a16_bytes_ = 0;
  void* b16_ = nullptr;  // bf16 copies of the B_g
  int64_t b16_bytes_ = 0;
};

// Throws dockyard::Error naming `what` unless `status` is CUBLAS_STATUS_SUCCESS.
void CheckCublas(cublasStatus_t status, const char* what);

}  // namespace dockyard::kernels
