// Grouped GEMM through cuBLAS (grouped_gemm.h).
#include "kernels/grouped_gemm.h"

#include <fmt/format.h>

#include "kernels/moe_kernels.h"
#include "planner/base/error.h"

namespace dockyard::kernels {
namespace {

int64_t ElementBytes(cudaDataType_t t) {
  return t == CUDA_R_16BF ? 2 : 4;
}

}  // namespace

const char* PrecisionName(GemmPrecision p) {
  switch (p) {
    case GemmPrecision::kFp32:
      return "fp32";
    case GemmPrecision::kTf32:
      return "tf32";
    case GemmPrecision::kBf16:
      return "bf16";
  }
  return "?";
}

const char* PathName(GroupedGemmPath p) {
  return p == GroupedGemmPath::kGrouped ? "cublas_grouped" : p == GroupedGemmPath::kLoop ? "cublas_loop" : "auto";
}

GemmPrecision ParsePrecision(const std::string& value, const std::string& flag) {
  if (value == "fp32") return GemmPrecision::kFp32;
  if (value == "tf32") return GemmPrecision::kTf32;
  if (value == "bf16") return GemmPrecision::kBf16;
  throw Error(fmt::format("{}: must be fp32, tf32 or bf16, got '{}'", flag, value));
}

void CheckCublas(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS) {
    throw Error(fmt::format("cublas: {}: {} ({})", what, cublasGetStatusName(status), cublasGetStatusString(status)));
  }
}

CublasGemm::CublasGemm(cudaStream_t stream) : stream_(stream) {
  CheckCublas(cublasCreate(&handle_), "cublasCreate");
  CheckCublas(cublasSetStream(handle_, stream_), "cublasSetStream");
  CheckCuda(cudaEventCreateWithFlags(&uploaded_, cudaEventDisableTiming), "cudaEventCreate");
}

CublasGemm::~CublasGemm() {
  if (handle_ != nullptr) cublasDestroy(handle_);
  if (uploaded_ != nullptr) {
    cudaEventSynchronize(uploaded_);
    cudaEventDestroy(uploaded_);
  }
  if (host_pointers_ != nullptr) cudaFreeHost(host_pointers_);
  for (void* p : {pointers_, a16_, b16_, c16_}) {
    if (p != nullptr) cudaFree(p);
  }
}

void CublasGemm::EnsureScratch(void** ptr, int64_t* capacity, int64_t bytes) {
  if (bytes <= *capacity) return;
  // The old buffer may still be read by queued work: wait before freeing it.
  CheckCuda(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
  if (*ptr != nullptr) cudaFree(*ptr);
  *ptr = nullptr;
  *capacity = 0;
  CheckCuda(cudaMalloc(ptr, static_cast<size_t>(bytes)), "cudaMalloc (gemm scratch)");
  *capacity = bytes;
}

void CublasGemm::Dense(int64_t m, int64_t n, int64_t k, const void* a, int64_t lda, const void* b, int64_t ldb, bool trans_b, void* c,
                       int64_t ldc, bool accumulate, cudaDataType_t ab_type, cudaDataType_t c_type, cublasComputeType_t compute) {
  if (m <= 0 || n <= 0) return;
  const float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
  // Column-major: C^T [n, m] = op(B)^T [n, k] . A^T [k, m].
  CheckCublas(cublasGemmEx_64(handle_, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &alpha, b, ab_type, ldb, a, ab_type, lda,
                              &beta, c, c_type, ldc, compute, CUBLAS_GEMM_DEFAULT),
              "cublasGemmEx");
}

GroupedGemmPath CublasGemm::Run(const GroupedGemmDesc& d, GroupedGemmPath preferred) {
  if (d.num_groups < 0 || d.offsets == nullptr || d.offsets[0] != 0 || d.n < 0 || d.k < 0) {
    throw Error("grouped_gemm: needs num_groups >= 0, offsets starting at 0 and n, k >= 0");
  }
  std::vector<int64_t> groups;  // the groups with rows
  for (int64_t g = 0; g < d.num_groups; ++g) {
    const int64_t rows = d.offsets[g + 1] - d.offsets[g];
    if (rows < 0) {
      throw Error(fmt::format("grouped_gemm: offsets must not decrease (group {}: {} -> {})", g, d.offsets[g], d.offsets[g + 1]));
    }
    if (rows > 0) groups.push_back(g);
  }
  if (groups.empty() || d.n == 0) return preferred == GroupedGemmPath::kAuto ? GroupedGemmPath::kGrouped : preferred;
  preferred = ResolveGroupedGemmPath(preferred, d.offsets[d.num_groups] - d.offsets[0], static_cast<int64_t>(groups.size()));
  const int64_t ab = ElementBytes(d.ab_type), cb = ElementBytes(d.c_type);
  const auto a_of = [&](int64_t g) { return static_cast<const char*>(d.a) + d.offsets[g] * d.lda * ab; };
  const auto c_of = [&](int64_t g) { return static_cast<char*>(d.c) + d.offsets[g] * d.ldc * cb; };
  if (preferred == GroupedGemmPath::kGrouped && !grouped_unsupported_) {
    const int64_t count = static_cast<int64_t>(groups.size());
    std::vector<cublasOperation_t> ta(count, d.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N), tb(count, CUBLAS_OP_N);
    std::vector<int64_t> m(count, d.n), n(count), k(count, d.k), lda(count, d.ldb), ldb(count, d.lda), ldc(count, d.ldc), size(count, 1);
    std::vector<float> alpha(count, 1.0f), beta(count, d.accumulate ? 1.0f : 0.0f);
    const int64_t ptr_bytes = 3 * count * static_cast<int64_t>(sizeof(void*));
    EnsureScratch(&pointers_, &pointers_bytes_, ptr_bytes);
    // Pinned staging, so the upload is asynchronous; wait until the previous upload from it
    // has been read before overwriting it.
    CheckCuda(cudaEventSynchronize(uploaded_), "cudaEventSynchronize");
    if (ptr_bytes > host_pointers_bytes_) {
      if (host_pointers_ != nullptr) cudaFreeHost(host_pointers_);
      host_pointers_ = nullptr;
      host_pointers_bytes_ = 0;
      CheckCuda(cudaMallocHost(&host_pointers_, static_cast<size_t>(ptr_bytes)), "cudaMallocHost (gemm pointers)");
      host_pointers_bytes_ = ptr_bytes;
    }
    const void** host_ptrs = static_cast<const void**>(host_pointers_);
    for (int64_t i = 0; i < count; ++i) {
      const int64_t g = groups[i];
      n[i] = d.offsets[g + 1] - d.offsets[g];
      host_ptrs[i] = d.b[g];               // cuBLAS A = our B_g
      host_ptrs[count + i] = a_of(g);      // cuBLAS B = our A rows
      host_ptrs[2 * count + i] = c_of(g);  // C rows
    }
    CheckCuda(cudaMemcpyAsync(pointers_, host_pointers_, static_cast<size_t>(ptr_bytes), cudaMemcpyHostToDevice, stream_),
              "cudaMemcpyAsync (gemm pointers)");
    CheckCuda(cudaEventRecord(uploaded_, stream_), "cudaEventRecord");
    const void* const* dev = static_cast<const void* const*>(pointers_);
    const cublasStatus_t status = cublasGemmGroupedBatchedEx_64(
        handle_, ta.data(), tb.data(), m.data(), n.data(), k.data(), alpha.data(), dev, d.ab_type, lda.data(), dev + count, d.ab_type,
        ldb.data(), beta.data(), static_cast<void* const*>(pointers_) + 2 * count, d.c_type, ldc.data(), count, size.data(), d.compute);
    if (status == CUBLAS_STATUS_SUCCESS) return last_path_ = GroupedGemmPath::kGrouped;
    // NOT_SUPPORTED: this cuBLAS lacks the type combination; anything else is a real error.
    if (status != CUBLAS_STATUS_NOT_SUPPORTED) CheckCublas(status, "cublasGemmGroupedBatchedEx");
    grouped_unsupported_ = true;  // fall through to the loop from now on
  }
  for (int64_t g : groups) {
    Dense(d.offsets[g + 1] - d.offsets[g], d.n, d.k, a_of(g), d.lda, d.b[g], d.ldb, d.trans_b, c_of(g), d.ldc, d.accumulate, d.ab_type,
          d.c_type, d.compute);
  }
  return last_path_ = GroupedGemmPath::kLoop;
}

GroupedGemmPath CublasGemm::RunFloat(int64_t num_groups, const int64_t* offsets, int64_t n, int64_t k, const float* a, int64_t lda,
                                     const float* const* b, int64_t ldb, bool trans_b, float* c, int64_t ldc, bool accumulate,
                                     GemmPrecision precision, GroupedGemmPath preferred) {
  GroupedGemmDesc d;
  d.num_groups = num_groups;
  d.offsets = offsets;
  d.n = n;
  d.k = k;
  d.trans_b = trans_b;
  d.c = c;
  d.ldc = ldc;
  d.accumulate = accumulate;
  if (precision != GemmPrecision::kBf16) {
    d.a = a;
    d.lda = lda;
    d.b = reinterpret_cast<const void* const*>(b);
    d.ldb = ldb;
    d.compute = precision == GemmPrecision::kTf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    return Run(d, preferred);
  }
  // bf16: dense copies of A's rows [rows, k] and of each B_g ([n, k] or [k, n]).
  if (num_groups <= 0 || offsets == nullptr) return Run(d, preferred);  // Run reports the bad arguments
  const int64_t rows = offsets[num_groups];
  const int64_t b_elems = n * k;
  int64_t used = 0;
  for (int64_t g = 0; g < num_groups; ++g) used += offsets[g + 1] > offsets[g] ? 1 : 0;
  EnsureScratch(&a16_, &a16_bytes_, std::max<int64_t>(1, rows * k) * 2);
  EnsureScratch(&b16_, &b16_bytes_, std::max<int64_t>(1, used * b_elems) * 2);
  FloatToBf16Rows(a, lda, rows, k, static_cast<uint16_t*>(a16_), stream_);
  std::vector<const void*> b16(static_cast<size_t>(num_groups), nullptr);
  int64_t i = 0;
  for (int64_t g = 0; g < num_groups; ++g) {
    if (offsets[g + 1] == offsets[g]) continue;
    uint16_t* dst = static_cast<uint16_t*>(b16_) + i * b_elems;
    if (trans_b) {
      FloatToBf16Rows(b[g], ldb, n, k, dst, stream_);
    } else {
      FloatToBf16Rows(b[g], ldb, k, n, dst, stream_);
    }
    b16[g] = dst;
    ++i;
  }
  EnsureScratch(&c16_, &c16_bytes_, std::max<int64_t>(1, rows * n) * 2);
  d.a = a16_;
  d.lda = k;
  d.b = b16.data();
  d.ldb = trans_b ? k : n;
  d.ab_type = CUDA_R_16BF;
  d.c = c16_;
  d.ldc = n;
  d.c_type = CUDA_R_16BF;
  d.accumulate = false;
  d.compute = CUBLAS_COMPUTE_32F;
  const GroupedGemmPath path = Run(d, preferred);
  AddBf16Rows(static_cast<const uint16_t*>(c16_), rows, n, c, ldc, accumulate, stream_);
  return path;
}

}  // namespace dockyard::kernels
