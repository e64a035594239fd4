// CUDA kernels of one MoE layer (dockyard-run's CUDA backend, runtime/cuda/). Host-callable
// launchers: every pointer is device memory unless documented "host", every size, offset and
// index is int64 (row offsets of T * top_k * hidden cross 2^31 at real shapes), every launch
// goes on `stream` and returns at once (errors of the launch itself throw dockyard::Error via
// CheckCuda; errors of the kernel surface at the next synchronization).
//
// Numerics. Each kernel does, per output element, the same fp32 operations in the same order
// as the CPU backend's op of the same name (runtime/cpu/cpu_ops.cc, runtime/cpu/kernels_impl.inc),
// compiled with -fmad=false so no FMA contraction changes a rounding. Elementwise and
// combine results are therefore bit-identical to the CPU, except where expf() is used
// (SwiGLU, softmax, sigmoid: CUDA's expf is within 2 ulp of the correctly rounded value, glibc's
// within 1), and GemmExact reproduces the CPU GEMM bit for bit (the router relies on it: ranks and
// the CPU reference pick the same top-k). The expert GEMMs are cuBLAS (grouped_gemm.h) and agree
// with the CPU within the run's tolerance only.
// Tests: kernels/moe_kernels_gpu_test.cc checks each launcher against the CPU backend's op.
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

namespace dockyard::kernels {

// The largest top_k TopK/RouterWeights accept (per-thread arrays). Published MoE configs use
// at most 22 (Qwen3-Next uses 10, DeepSeek-V3 8, Kimi-K2 8).
constexpr int64_t kMaxTopK = 32;

// Throws dockyard::Error naming `what` when `status` is not cudaSuccess.
void CheckCuda(cudaError_t status, const char* what);

// dst[i, :] = src[indices[i], :] for i < num_rows. src [*, row_elems], dst [num_rows, row_elems].
void GatherRows(const float* src, const int64_t* indices, int64_t num_rows, int64_t row_elems, float* dst, cudaStream_t stream);
// dst[indices[i], :] = src[i, :]; indices must be distinct (a permutation's inverse).
void ScatterRows(const float* src, const int64_t* indices, int64_t num_rows, int64_t row_elems, float* dst, cudaStream_t stream);
// out[i] = (gate[i] / (1 + exp(-gate[i]))) * up[i]; out may alias gate or up.
void SwiGlu(const float* gate, const float* up, float* out, int64_t count, cudaStream_t stream);
// Row-wise softmax of x [rows, cols] in place (max subtracted; one thread per row, CPU order).
void Softmax(float* x, int64_t rows, int64_t cols, cudaStream_t stream);
void Sigmoid(float* x, int64_t count, cudaStream_t stream);
// out [rows, cols] = x + bias[cols].
void AddRowBias(const float* x, const float* bias, int64_t rows, int64_t cols, float* out, cudaStream_t stream);
// The largest n_group GroupSelect accepts (per-thread array). DeepSeek-V3 and V2 use 8.
constexpr int64_t kMaxGroups = 64;
// Group-limited routing, in place on x [rows, cols]: planner/model/group_select.h GroupSelectRow per
// row (one thread per row). n_group <= kMaxGroups.
void GroupSelect(float* x, int64_t rows, int64_t cols, int64_t n_group, int64_t topk_group, bool top2_sum, cudaStream_t stream);
// indices [rows, k]: the k largest of each row, decreasing, ties to the lower column. k <= kMaxTopK.
void TopK(const float* x, int64_t rows, int64_t cols, int64_t k, int64_t* indices, cudaStream_t stream);
// weights [rows, k] = scores[r, indices[r, j]], normalized by (sum + 1e-20) if asked, times scale.
void RouterWeights(const float* scores, const int64_t* indices, int64_t rows, int64_t cols, int64_t k, bool normalize, float scale,
                   float* weights, cudaStream_t stream);
// out[t, :] = sum over j (in order) of weights[t, j] * rows[row_of_slot[t * top_k + j], :].
void WeightedCombine(const float* rows, const int64_t* row_of_slot, const float* weights, int64_t tokens, int64_t top_k, int64_t row_elems,
                     float* out, cudaStream_t stream);
// y[i] += x[i]
void Add(const float* x, float* y, int64_t count, cudaStream_t stream);
// x[r, :] *= s[r]
void ScaleRows(float* x, const float* s, int64_t rows, int64_t row_elems, cudaStream_t stream);
void Fill(float* x, float value, int64_t count, cudaStream_t stream);
// Token counting: counts[e] (int64, [num_experts], zeroed here) = #i with expert_of_slot[i] == e;
// ids outside [0, num_experts) are not counted.
void CountPerExpert(const int64_t* expert_of_slot, int64_t num_slots, int64_t num_experts, int64_t* counts, cudaStream_t stream);

// Data generators of runtime/data.h (the same bits as the host).
void FillTokens(uint64_t seed, int64_t source, int64_t first_token, int64_t num_tokens, int64_t hidden, float* out, cudaStream_t stream);
// out [row_end - row_begin, col_end - col_begin] = WeightValue(seed, layer, matrix, expert, r, c, scale).
void FillWeightRows(uint64_t seed, int64_t layer, int64_t matrix, int64_t expert, int64_t row_begin, int64_t row_end, int64_t col_begin,
                    int64_t col_end, float scale, float* out, cudaStream_t stream);

// C = A . op(B) (+ C), the CPU backend's GEMM bit for bit (kernels_impl.inc): trans_b: B [n, k],
// each C element = 8 lane partial sums over p = lane (mod 8) below k & ~7, summed
// ((s0+s4)+(s1+s5))+((s2+s6)+(s3+s7)), then the tail in order, then C + r when accumulating;
// !trans_b: B [k, n], terms added to C (or 0) in p order. One thread per C element: for the
// router (tokens x experts x hidden), not for the expert GEMMs.
void GemmExact(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb, bool trans_b, float* c,
               int64_t ldc, bool accumulate, cudaStream_t stream);

// bf16 conversion (round to nearest even) for the BF16 GEMM path; dst holds __nv_bfloat16 bits.
void FloatToBf16(const float* src, uint16_t* dst, int64_t count, cudaStream_t stream);
// Strided 2-D variant: dst [rows, cols] (dense) from src rows of stride ld.
void FloatToBf16Rows(const float* src, int64_t ld, int64_t rows, int64_t cols, uint16_t* dst, cudaStream_t stream);
// dst [rows, cols] (row stride ld) = (accumulate ? dst : 0) + float(src) for src [rows, cols]
// dense bf16 (the bf16 GEMM path's output, widened into the fp32 result).
void AddBf16Rows(const uint16_t* src, int64_t rows, int64_t cols, float* dst, int64_t ld, bool accumulate, cudaStream_t stream);

}  // namespace dockyard::kernels
