// CpuOps (cpu_ops.h).
#include "runtime/cpu/cpu_ops.h"

#include <cmath>
#include <cstring>

#include <fmt/format.h>

#include "planner/base/error.h"
#include "planner/model/group_select.h"
#include "runtime/data.h"

namespace dockyard::runtime::cpu {

namespace {

void CheckGemm(int64_t m, int64_t n, int64_t k, const char* what) {
  if (m < 0 || n < 0 || k < 0) throw Error(fmt::format("{}: sizes must be >= 0, got m {} n {} k {}", what, m, n, k));
}

}  // namespace

void CpuOps::Gemm(const GemmArgs& g) {
  CheckGemm(g.m, g.n, g.k, "gemm");
  if (g.m == 0 || g.n == 0) return;
  if (g.trans_b) {
    kernels_.gemm_nt(g.m, g.n, g.k, g.a, g.lda, g.b, g.ldb, g.c, g.ldc, g.accumulate);
  } else {
    kernels_.gemm_nn(g.m, g.n, g.k, g.a, g.lda, g.b, g.ldb, g.c, g.ldc, g.accumulate);
  }
}

void CpuOps::GroupedGemm(const GroupedGemmArgs& g) {
  CheckGemm(0, g.n, g.k, "grouped_gemm");
  if (g.num_groups < 0 || g.offsets == nullptr || g.offsets[0] != 0) {
    throw Error(fmt::format("grouped_gemm: needs num_groups >= 0 and offsets starting at 0"));
  }
  for (int64_t i = 0; i < g.num_groups; ++i) {
    const int64_t begin = g.offsets[i], rows = g.offsets[i + 1] - begin;
    if (rows < 0) throw Error(fmt::format("grouped_gemm: offsets must not decrease (group {}: {} -> {})", i, begin, begin + rows));
    if (rows == 0) continue;
    GemmArgs one;
    one.m = rows;
    one.n = g.n;
    one.k = g.k;
    one.a = g.a + begin * g.lda;
    one.lda = g.lda;
    one.b = g.b[i];
    one.ldb = g.ldb;
    one.trans_b = g.trans_b;
    one.c = g.c + begin * g.ldc;
    one.ldc = g.ldc;
    one.accumulate = g.accumulate;
    Gemm(one);
  }
}

void CpuOps::GatherRows(const float* src, const int64_t* indices, int64_t num_rows, int64_t row_elems, float* dst) {
  const size_t bytes = static_cast<size_t>(row_elems) * sizeof(float);
  for (int64_t i = 0; i < num_rows; ++i) std::memcpy(dst + i * row_elems, src + indices[i] * row_elems, bytes);
}

void CpuOps::ScatterRows(const float* src, const int64_t* indices, int64_t num_rows, int64_t row_elems, float* dst) {
  const size_t bytes = static_cast<size_t>(row_elems) * sizeof(float);
  for (int64_t i = 0; i < num_rows; ++i) std::memcpy(dst + indices[i] * row_elems, src + i * row_elems, bytes);
}

void CpuOps::CopyRowBlocks(const float* src, float* dst, const std::vector<RowBlock>& blocks, int64_t row_elems) {
  for (const RowBlock& b : blocks) {
    if (b.rows <= 0) continue;
    std::memcpy(dst + b.dst_row * row_elems, src + b.src_row * row_elems,
                static_cast<size_t>(b.rows) * static_cast<size_t>(row_elems) * sizeof(float));
  }
}

void CpuOps::SwiGlu(const float* gate, const float* up, float* out, int64_t count) {
  for (int64_t i = 0; i < count; ++i) {
    const float g = gate[i];
    out[i] = (g / (1.0f + std::exp(-g))) * up[i];
  }
}

void CpuOps::Softmax(float* x, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    float* row = x + r * cols;
    float mx = -INFINITY;
    for (int64_t c = 0; c < cols; ++c) mx = std::max(mx, row[c]);
    float sum = 0.0f;
    for (int64_t c = 0; c < cols; ++c) {
      row[c] = std::exp(row[c] - mx);
      sum += row[c];
    }
    for (int64_t c = 0; c < cols; ++c) row[c] /= sum;
  }
}

void CpuOps::Sigmoid(float* x, int64_t count) {
  for (int64_t i = 0; i < count; ++i) x[i] = 1.0f / (1.0f + std::exp(-x[i]));
}

void CpuOps::AddRowBias(const float* x, const float* bias, int64_t rows, int64_t cols, float* out) {
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) out[r * cols + c] = x[r * cols + c] + bias[c];
  }
}

void CpuOps::GroupSelect(float* x, int64_t rows, int64_t cols, int64_t n_group, int64_t topk_group, bool top2_sum) {
  std::vector<float> scratch(static_cast<size_t>(n_group > 0 ? n_group : 1));
  for (int64_t r = 0; r < rows; ++r) GroupSelectRow(x + r * cols, cols, n_group, topk_group, top2_sum, scratch.data());
}

void CpuOps::TopK(const float* x, int64_t rows, int64_t cols, int64_t k, int64_t* indices) {
  if (k < 0 || k > cols) throw Error(fmt::format("top_k: k ({}) must be in [0, {}]", k, cols));
  std::vector<float> best_v(static_cast<size_t>(k));
  std::vector<int64_t> best_i(static_cast<size_t>(k));
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = x + r * cols;
    int64_t n = 0;
    // Insertion into a list sorted by value (decreasing); a value equal to one already listed
    // goes after it, so ties keep the lower column first.
    for (int64_t c = 0; c < cols; ++c) {
      const float v = row[c];
      if (n == k && !(v > best_v[static_cast<size_t>(k - 1)])) continue;
      int64_t pos = n < k ? n : k - 1;
      while (pos > 0 && v > best_v[static_cast<size_t>(pos - 1)]) {
        if (pos < k) {
          best_v[static_cast<size_t>(pos)] = best_v[static_cast<size_t>(pos - 1)];
          best_i[static_cast<size_t>(pos)] = best_i[static_cast<size_t>(pos - 1)];
        }
        --pos;
      }
      best_v[static_cast<size_t>(pos)] = v;
      best_i[static_cast<size_t>(pos)] = c;
      if (n < k) ++n;
    }
    for (int64_t j = 0; j < k; ++j) indices[r * k + j] = best_i[static_cast<size_t>(j)];
  }
}

void CpuOps::RouterWeights(const float* scores, const int64_t* indices, int64_t rows, int64_t cols, int64_t k, bool normalize, float scale,
                           float* weights) {
  for (int64_t r = 0; r < rows; ++r) {
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

void CpuOps::WeightedCombine(const float* rows, const int64_t* row_of_slot, const float* weights, int64_t tokens, int64_t top_k,
                             int64_t row_elems, float* out) {
  for (int64_t t = 0; t < tokens; ++t) {
    float* o = out + t * row_elems;
    for (int64_t d = 0; d < row_elems; ++d) o[d] = 0.0f;
    for (int64_t j = 0; j < top_k; ++j) {
      const float w = weights[t * top_k + j];
      const float* src = rows + row_of_slot[t * top_k + j] * row_elems;
      for (int64_t d = 0; d < row_elems; ++d) o[d] = o[d] + w * src[d];
    }
  }
}

void CpuOps::Add(const float* x, float* y, int64_t count) {
  for (int64_t i = 0; i < count; ++i) y[i] = y[i] + x[i];
}

void CpuOps::ScaleRows(float* x, const float* s, int64_t rows, int64_t row_elems) {
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t d = 0; d < row_elems; ++d) x[r * row_elems + d] *= s[r];
  }
}

void CpuOps::Fill(float* x, float value, int64_t count) {
  for (int64_t i = 0; i < count; ++i) x[i] = value;
}

void CpuOps::FillTokens(uint64_t seed, int64_t source, int64_t first_token, int64_t num_tokens, int64_t hidden, float* out) {
  const uint64_t key = TokenKey(seed, source);
  const int64_t base = first_token * hidden;
  for (int64_t i = 0; i < num_tokens * hidden; ++i) out[i] = TokenValueAt(key, base + i);
}

void CpuOps::FillWeightRows(const WeightRowsArgs& a) {
  const int64_t cols = a.col_end - a.col_begin;
  if (a.row_end < a.row_begin || cols < 0) {
    throw Error(fmt::format("fill_weight_rows: empty or reversed range rows [{}, {}) cols [{}, {})", a.row_begin, a.row_end, a.col_begin,
                            a.col_end));
  }
  for (int64_t r = a.row_begin; r < a.row_end; ++r) {
    const RowStream s = MakeRowStream(a.seed, a.layer, a.matrix, a.expert, r);
    kernels_.weight_row(s.alpha, s.beta, s.gamma, a.col_begin, cols, a.scale, a.out + (r - a.row_begin) * cols);
  }
}

}  // namespace dockyard::runtime::cpu
