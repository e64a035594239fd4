// CUDA kernels of one MoE layer (moe_kernels.h). Compiled by nvcc with -fmad=false.
#include "kernels/moe_kernels.h"

#include <cuda_bf16.h>

#include <algorithm>
#include <string>

#include "planner/base/error.h"
#include "planner/model/group_select.h"
#include "runtime/data.h"

namespace dockyard::kernels {
namespace {

constexpr int kThreads = 256;
// Grid-stride loops cover any size with at most this many blocks per launch.
constexpr int64_t kMaxBlocks = 65535;

int Blocks(int64_t work, int64_t per_block = kThreads) {
  const int64_t b = (work + per_block - 1) / per_block;
  return static_cast<int>(std::max<int64_t>(1, std::min(b, kMaxBlocks)));
}

void CheckLaunch(const char* what) {
  CheckCuda(cudaGetLastError(), what);
}

__global__ void GatherRowsKernel(const float* __restrict__ src, const int64_t* __restrict__ indices, int64_t num_rows, int64_t row_elems,
                                 float* __restrict__ dst) {
  for (int64_t r = blockIdx.x; r < num_rows; r += gridDim.x) {
    const float* s = src + indices[r] * row_elems;
    float* d = dst + r * row_elems;
    for (int64_t i = threadIdx.x; i < row_elems; i += blockDim.x) d[i] = s[i];
  }
}

__global__ void GatherRowsKernel4(const float4* __restrict__ src, const int64_t* __restrict__ indices, int64_t num_rows, int64_t row_vecs,
                                  float4* __restrict__ dst) {
  for (int64_t r = blockIdx.x; r < num_rows; r += gridDim.x) {
    const float4* s = src + indices[r] * row_vecs;
    float4* d = dst + r * row_vecs;
    for (int64_t i = threadIdx.x; i < row_vecs; i += blockDim.x) d[i] = s[i];
  }
}

__global__ void ScatterRowsKernel(const float* __restrict__ src, const int64_t* __restrict__ indices, int64_t num_rows, int64_t row_elems,
                                  float* __restrict__ dst) {
  for (int64_t r = blockIdx.x; r < num_rows; r += gridDim.x) {
    const float* s = src + r * row_elems;
    float* d = dst + indices[r] * row_elems;
    for (int64_t i = threadIdx.x; i < row_elems; i += blockDim.x) d[i] = s[i];
  }
}

__global__ void ScatterRowsKernel4(const float4* __restrict__ src, const int64_t* __restrict__ indices, int64_t num_rows, int64_t row_vecs,
                                   float4* __restrict__ dst) {
  for (int64_t r = blockIdx.x; r < num_rows; r += gridDim.x) {
    const float4* s = src + r * row_vecs;
    float4* d = dst + indices[r] * row_vecs;
    for (int64_t i = threadIdx.x; i < row_vecs; i += blockDim.x) d[i] = s[i];
  }
}

__global__ void SwiGluKernel(const float* gate, const float* up, float* out, int64_t count) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float g = gate[i];
    out[i] = (g / (1.0f + expf(-g))) * up[i];
  }
}

__global__ void SoftmaxKernel(float* x, int64_t rows, int64_t cols) {
  for (int64_t r = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; r < rows;
       r += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float* row = x + r * cols;
    float mx = -INFINITY;
    for (int64_t c = 0; c < cols; ++c) mx = fmaxf(mx, row[c]);
    float sum = 0.0f;
    for (int64_t c = 0; c < cols; ++c) {
      row[c] = expf(row[c] - mx);
      sum += row[c];
    }
    for (int64_t c = 0; c < cols; ++c) row[c] /= sum;
  }
}

__global__ void SigmoidKernel(float* x, int64_t count) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    x[i] = 1.0f / (1.0f + expf(-x[i]));
  }
}

__global__ void AddRowBiasKernel(const float* x, const float* bias, int64_t rows, int64_t cols, float* out) {
  const int64_t n = rows * cols;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n; i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    out[i] = x[i] + bias[i % cols];
  }
}

// One thread per row: the CPU's GroupSelectRow itself (planner/model/group_select.h, host and device).
__global__ void GroupSelectKernel(float* x, int64_t rows, int64_t cols, int64_t n_group, int64_t topk_group, bool top2_sum) {
  for (int64_t r = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; r < rows;
       r += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float scratch[kMaxGroups];
    GroupSelectRow(x + r * cols, cols, n_group, topk_group, top2_sum, scratch);
  }
}

// The CPU's insertion into a list sorted by value (decreasing); equal values keep the lower column first.
__global__ void TopKKernel(const float* x, int64_t rows, int64_t cols, int64_t k, int64_t* indices) {
  for (int64_t r = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; r < rows;
       r += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float best_v[kMaxTopK];
    int64_t best_i[kMaxTopK];
    const float* row = x + r * cols;
    int64_t n = 0;
    for (int64_t c = 0; c < cols; ++c) {
      const float v = row[c];
      if (n == k && !(v > best_v[k - 1])) continue;
      int64_t pos = n < k ? n : k - 1;
      while (pos > 0 && v > best_v[pos - 1]) {
        if (pos < k) {
          best_v[pos] = best_v[pos - 1];
          best_i[pos] = best_i[pos - 1];
        }
        --pos;
      }
      best_v[pos] = v;
      best_i[pos] = c;
      if (n < k) ++n;
    }
    for (int64_t j = 0; j < k; ++j) indices[r * k + j] = best_i[j];
  }
}

__global__ void RouterWeightsKernel(const float* scores, const int64_t* indices, int64_t rows, int64_t cols, int64_t k, bool normalize,
                                    float scale, float* weights) {
  for (int64_t r = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; r < rows;
       r += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float sum = 0.0f;
    for (int64_t j = 0; j < k; ++j) {
      const float w = scores[r * cols + indices[r * k + j]];
      weights[r * k + j] = w;
      sum += w;
    }
    for (int64_t j = 0; j < k; ++j) {
      float w = weights[r * k + j];
      if (normalize) w = w / (sum + 1e-20f);
      weights[r * k + j] = w * scale;
    }
  }
}

__global__ void WeightedCombineKernel(const float* rows, const int64_t* row_of_slot, const float* weights, int64_t tokens, int64_t top_k,
                                      int64_t row_elems, float* out) {
  for (int64_t t = blockIdx.x; t < tokens; t += gridDim.x) {
    for (int64_t d = threadIdx.x; d < row_elems; d += blockDim.x) {
      float o = 0.0f;
      for (int64_t j = 0; j < top_k; ++j) {
        const float w = weights[t * top_k + j];
        o = o + w * rows[row_of_slot[t * top_k + j] * row_elems + d];
      }
      out[t * row_elems + d] = o;
    }
  }
}

__global__ void AddKernel(const float* x, float* y, int64_t count) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    y[i] = y[i] + x[i];
  }
}

__global__ void ScaleRowsKernel(float* x, const float* s, int64_t rows, int64_t row_elems) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float f = s[r];
    for (int64_t d = threadIdx.x; d < row_elems; d += blockDim.x) x[r * row_elems + d] *= f;
  }
}

__global__ void FillKernel(float* x, float value, int64_t count) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    x[i] = value;
  }
}

__global__ void CountPerExpertKernel(const int64_t* expert_of_slot, int64_t num_slots, int64_t num_experts, unsigned long long* counts) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < num_slots;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t e = expert_of_slot[i];
    if (e >= 0 && e < num_experts) atomicAdd(counts + e, 1ULL);
  }
}

__global__ void FillTokensKernel(uint64_t key, int64_t base, int64_t count, float* out) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    out[i] = runtime::TokenValueAt(key, base + i);
  }
}

__global__ void FillWeightRowsKernel(uint64_t seed, int64_t layer, int64_t matrix, int64_t expert, int64_t row_begin, int64_t rows,
                                     int64_t col_begin, int64_t cols, float scale, float* out) {
  __shared__ runtime::RowStream stream;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    __syncthreads();  // the previous row's readers are done with `stream`
    if (threadIdx.x == 0) stream = runtime::MakeRowStream(seed, layer, matrix, expert, row_begin + r);
    __syncthreads();
    const runtime::RowStream s = stream;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
      out[r * cols + c] = (runtime::BitsToUnit(runtime::RowBits(s, col_begin + c))) * scale;
    }
  }
}

// One thread per C element (see moe_kernels.h for the order of operations).
__global__ void GemmExactNTKernel(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
                                  int64_t ldc, bool acc) {
  const int64_t total = m * n;
  const int64_t k8 = k & ~int64_t{7};
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = e / n, j = e % n;
    const float* ar = a + i * lda;
    const float* br = b + j * ldb;
    float s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int64_t p = 0; p < k8; p += 8) {
#pragma unroll
      for (int l = 0; l < 8; ++l) s[l] = s[l] + ar[p + l] * br[p + l];
    }
    float r = ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]));
    for (int64_t p = k8; p < k; ++p) r += ar[p] * br[p];
    float* out = c + i * ldc + j;
    *out = acc ? *out + r : r;
  }
}

__global__ void GemmExactNNKernel(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
                                  int64_t ldc, bool acc) {
  const int64_t total = m * n;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = e / n, j = e % n;
    float v = acc ? c[i * ldc + j] : 0.0f;
    for (int64_t p = 0; p < k; ++p) v = v + a[i * lda + p] * b[p * ldb + j];
    c[i * ldc + j] = v;
  }
}

__global__ void FloatToBf16Kernel(const float* src, int64_t ld, int64_t rows, int64_t cols, __nv_bfloat16* dst) {
  const int64_t total = rows * cols;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = e / cols, c = e % cols;
    dst[e] = __float2bfloat16_rn(src[r * ld + c]);
  }
}

__global__ void AddBf16RowsKernel(const __nv_bfloat16* src, int64_t rows, int64_t cols, float* dst, int64_t ld, bool accumulate) {
  const int64_t total = rows * cols;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = e / cols, c = e % cols;
    const float v = __bfloat162float(src[e]);
    float* d = dst + r * ld + c;
    *d = accumulate ? *d + v : v;
  }
}

bool Aligned16(const void* p) {
  return (reinterpret_cast<uintptr_t>(p) & 15u) == 0;
}

}  // namespace

void CheckCuda(cudaError_t status, const char* what) {
  if (status != cudaSuccess) {
    throw Error(std::string("cuda: ") + what + ": " + cudaGetErrorName(status) + " (" + cudaGetErrorString(status) + ")");
  }
}

void GatherRows(const float* src, const int64_t* indices, int64_t num_rows, int64_t row_elems, float* dst, cudaStream_t stream) {
  if (num_rows <= 0 || row_elems <= 0) return;
  if (row_elems % 4 == 0 && Aligned16(src) && Aligned16(dst)) {
    GatherRowsKernel4<<<Blocks(num_rows, 1), kThreads, 0, stream>>>(reinterpret_cast<const float4*>(src), indices, num_rows, row_elems / 4,
                                                                    reinterpret_cast<float4*>(dst));
  } else {
    GatherRowsKernel<<<Blocks(num_rows, 1), kThreads, 0, stream>>>(src, indices, num_rows, row_elems, dst);
  }
  CheckLaunch("gather_rows");
}

void ScatterRows(const float* src, const int64_t* indices, int64_t num_rows, int64_t row_elems, float* dst, cudaStream_t stream) {
  if (num_rows <= 0 || row_elems <= 0) return;
  if (row_elems % 4 == 0 && Aligned16(src) && Aligned16(dst)) {
    ScatterRowsKernel4<<<Blocks(num_rows, 1), kThreads, 0, stream>>>(reinterpret_cast<const float4*>(src), indices, num_rows, row_elems / 4,
                                                                     reinterpret_cast<float4*>(dst));
  } else {
    ScatterRowsKernel<<<Blocks(num_rows, 1), kThreads, 0, stream>>>(src, indices, num_rows, row_elems, dst);
  }
  CheckLaunch("scatter_rows");
}

void SwiGlu(const float* gate, const float* up, float* out, int64_t count, cudaStream_t stream) {
  if (count <= 0) return;
  SwiGluKernel<<<Blocks(count), kThreads, 0, stream>>>(gate, up, out, count);
  CheckLaunch("swiglu");
}

void Softmax(float* x, int64_t rows, int64_t cols, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return;
  SoftmaxKernel<<<Blocks(rows, 64), 64, 0, stream>>>(x, rows, cols);
  CheckLaunch("softmax");
}

void Sigmoid(float* x, int64_t count, cudaStream_t stream) {
  if (count <= 0) return;
  SigmoidKernel<<<Blocks(count), kThreads, 0, stream>>>(x, count);
  CheckLaunch("sigmoid");
}

void AddRowBias(const float* x, const float* bias, int64_t rows, int64_t cols, float* out, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return;
  AddRowBiasKernel<<<Blocks(rows * cols), kThreads, 0, stream>>>(x, bias, rows, cols, out);
  CheckLaunch("add_row_bias");
}

void GroupSelect(float* x, int64_t rows, int64_t cols, int64_t n_group, int64_t topk_group, bool top2_sum, cudaStream_t stream) {
  if (n_group < 1 || n_group > kMaxGroups || cols % n_group != 0 || topk_group < 1) {
    throw Error("group_select: n_group (" + std::to_string(n_group) + ") must be in [1, " + std::to_string(kMaxGroups) +
                "] and divide the " + std::to_string(cols) + " experts, topk_group (" + std::to_string(topk_group) +
                ") >= 1, on the cuda backend");
  }
  if (rows <= 0 || !(n_group > 1 && topk_group < n_group)) return;
  GroupSelectKernel<<<Blocks(rows, 64), 64, 0, stream>>>(x, rows, cols, n_group, topk_group, top2_sum);
  CheckLaunch("group_select");
}

void TopK(const float* x, int64_t rows, int64_t cols, int64_t k, int64_t* indices, cudaStream_t stream) {
  if (k < 0 || k > cols || k > kMaxTopK) {
    throw Error("top_k: k (" + std::to_string(k) + ") must be in [0, min(" + std::to_string(cols) + ", " + std::to_string(kMaxTopK) +
                ")] on the cuda backend");
  }
  if (rows <= 0 || k == 0) return;
  TopKKernel<<<Blocks(rows, 64), 64, 0, stream>>>(x, rows, cols, k, indices);
  CheckLaunch("top_k");
}

void RouterWeights(const float* scores, const int64_t* indices, int64_t rows, int64_t cols, int64_t k, bool normalize, float scale,
                   float* weights, cudaStream_t stream) {
  if (rows <= 0 || k <= 0) return;
  RouterWeightsKernel<<<Blocks(rows, 64), 64, 0, stream>>>(scores, indices, rows, cols, k, normalize, scale, weights);
  CheckLaunch("router_weights");
}

void WeightedCombine(const float* rows, const int64_t* row_of_slot, const float* weights, int64_t tokens, int64_t top_k, int64_t row_elems,
                     float* out, cudaStream_t stream) {
  if (tokens <= 0 || row_elems <= 0) return;
  WeightedCombineKernel<<<Blocks(tokens, 1), kThreads, 0, stream>>>(rows, row_of_slot, weights, tokens, top_k, row_elems, out);
  CheckLaunch("weighted_combine");
}

void Add(const float* x, float* y, int64_t count, cudaStream_t stream) {
  if (count <= 0) return;
  AddKernel<<<Blocks(count), kThreads, 0, stream>>>(x, y, count);
  CheckLaunch("add");
}

void ScaleRows(float* x, const float* s, int64_t rows, int64_t row_elems, cudaStream_t stream) {
  if (rows <= 0 || row_elems <= 0) return;
  ScaleRowsKernel<<<Blocks(rows, 1), kThreads, 0, stream>>>(x, s, rows, row_elems);
  CheckLaunch("scale_rows");
}

void Fill(float* x, float value, int64_t count, cudaStream_t stream) {
  if (count <= 0) return;
  FillKernel<<<Blocks(count), kThreads, 0, stream>>>(x, value, count);
  CheckLaunch("fill");
}

void CountPerExpert(const int64_t* expert_of_slot, int64_t num_slots, int64_t num_experts, int64_t* counts, cudaStream_t stream) {
  if (num_experts <= 0) return;
  CheckCuda(cudaMemsetAsync(counts, 0, static_cast<size_t>(num_experts) * sizeof(int64_t), stream), "count_per_expert");
  if (num_slots <= 0) return;
  static_assert(sizeof(unsigned long long) == sizeof(int64_t), "counts are 64-bit");
  CountPerExpertKernel<<<Blocks(num_slots), kThreads, 0, stream>>>(expert_of_slot, num_slots, num_experts,
                                                                   reinterpret_cast<unsigned long long*>(counts));
  CheckLaunch("count_per_expert");
}

void FillTokens(uint64_t seed, int64_t source, int64_t first_token, int64_t num_tokens, int64_t hidden, float* out, cudaStream_t stream) {
  const int64_t count = num_tokens * hidden;
  if (count <= 0) return;
  FillTokensKernel<<<Blocks(count), kThreads, 0, stream>>>(runtime::TokenKey(seed, source), first_token * hidden, count, out);
  CheckLaunch("fill_tokens");
}

void FillWeightRows(uint64_t seed, int64_t layer, int64_t matrix, int64_t expert, int64_t row_begin, int64_t row_end, int64_t col_begin,
                    int64_t col_end, float scale, float* out, cudaStream_t stream) {
  const int64_t rows = row_end - row_begin, cols = col_end - col_begin;
  if (rows < 0 || cols < 0) {
    throw Error("fill_weight_rows: empty or reversed range rows [" + std::to_string(row_begin) + ", " + std::to_string(row_end) +
                ") cols [" + std::to_string(col_begin) + ", " + std::to_string(col_end) + ")");
  }
  if (rows == 0 || cols == 0) return;
  FillWeightRowsKernel<<<Blocks(rows, 1), kThreads, 0, stream>>>(seed, layer, matrix, expert, row_begin, rows, col_begin, cols, scale, out);
  CheckLaunch("fill_weight_rows");
}

void GemmExact(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb, bool trans_b, float* c,
               int64_t ldc, bool accumulate, cudaStream_t stream) {
  if (m < 0 || n < 0 || k < 0) {
    throw Error("gemm: sizes must be >= 0, got m " + std::to_string(m) + " n " + std::to_string(n) + " k " + std::to_string(k));
  }
  if (m == 0 || n == 0) return;
  if (trans_b) {
    GemmExactNTKernel<<<Blocks(m * n), kThreads, 0, stream>>>(m, n, k, a, lda, b, ldb, c, ldc, accumulate);
  } else {
    GemmExactNNKernel<<<Blocks(m * n), kThreads, 0, stream>>>(m, n, k, a, lda, b, ldb, c, ldc, accumulate);
  }
  CheckLaunch("gemm_exact");
}

void FloatToBf16(const float* src, uint16_t* dst, int64_t count, cudaStream_t stream) {
  FloatToBf16Rows(src, count, count > 0 ? 1 : 0, count, dst, stream);
}

void FloatToBf16Rows(const float* src, int64_t ld, int64_t rows, int64_t cols, uint16_t* dst, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return;
  FloatToBf16Kernel<<<Blocks(rows * cols), kThreads, 0, stream>>>(src, ld, rows, cols, reinterpret_cast<__nv_bfloat16*>(dst));
  CheckLaunch("float_to_bf16");
}

void AddBf16Rows(const uint16_t* src, int64_t rows, int64_t cols, float* dst, int64_t ld, bool accumulate, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return;
  AddBf16RowsKernel<<<Blocks(rows * cols), kThreads, 0, stream>>>(reinterpret_cast<const __nv_bfloat16*>(src), rows, cols, dst, ld,
                                                                  accumulate);
  CheckLaunch("add_bf16_rows");
}

}  // namespace dockyard::kernels
