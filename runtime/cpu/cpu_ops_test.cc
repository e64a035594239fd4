// The CPU compute ops (cpu_ops.h): hand arithmetic, and the batch-independence of the GEMM that
// the router relies on.
#include "runtime/cpu/cpu_ops.h"

#include <cmath>
#include <cstring>
#include <vector>

#include <doctest/doctest.h>
#include <sys/mman.h>

#include "runtime/data.h"

using namespace dockyard::runtime;
using dockyard::runtime::cpu::CpuOps;

namespace {

std::vector<const cpu::KernelTable*> Tables() {
  std::vector<const cpu::KernelTable*> t = {&cpu::GenericKernels()};
  if (cpu::Avx2Kernels() != nullptr && __builtin_cpu_supports("avx2")) t.push_back(cpu::Avx2Kernels());
  return t;
}

std::vector<float> Random(int64_t n, int64_t source) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = TokenValueAt(TokenKey(99, source), i);
  return v;
}

}  // namespace

TEST_CASE("Gemm with B transposed multiplies a 2x2 by hand") {
  for (const auto* t : Tables()) {
    CpuOps ops(*t);
    // [[1 2] [3 4]] . [[5 6] [7 8]]^T = [[1*5+2*6, 1*7+2*8], [3*5+4*6, 3*7+4*8]] = [[17 23] [39 53]]
    const float a[] = {1, 2, 3, 4}, b[] = {5, 6, 7, 8};
    float c[4] = {};
    GemmArgs g;
    g.m = 2;
    g.n = 2;
    g.k = 2;
    g.a = a;
    g.lda = 2;
    g.b = b;
    g.ldb = 2;
    g.c = c;
    g.ldc = 2;
    ops.Gemm(g);
    CHECK(c[0] == 17);
    CHECK(c[1] == 23);
    CHECK(c[2] == 39);
    CHECK(c[3] == 53);
    g.accumulate = true;  // C += A . B^T doubles it
    ops.Gemm(g);
    CHECK(c[3] == 106);
  }
}

TEST_CASE("Gemm without transposition multiplies a 1x2 by a 2x3 by hand") {
  for (const auto* t : Tables()) {
    CpuOps ops(*t);
    // [1 2] . [[1 2 3] [4 5 6]] = [1+8, 2+10, 3+12] = [9 12 15]
    const float a[] = {1, 2}, b[] = {1, 2, 3, 4, 5, 6};
    float c[3] = {-1, -1, -1};
    GemmArgs g;
    g.m = 1;
    g.n = 3;
    g.k = 2;
    g.a = a;
    g.lda = 2;
    g.b = b;
    g.ldb = 3;
    g.trans_b = false;
    g.c = c;
    g.ldc = 3;
    ops.Gemm(g);
    CHECK(c[0] == 9);
    CHECK(c[1] == 12);
    CHECK(c[2] == 15);
  }
}

TEST_CASE("Gemm gives a row the same bits whatever batch and position it is computed in, in every kernel build") {
  // K = 37 exercises the 8-lane loop and the scalar tail; 11 columns the 2-wide and 1-wide tiles.
  const int64_t m = 50, n = 11, k = 37;
  const std::vector<float> a = Random(m * k, 1), b = Random(n * k, 2);
  std::vector<float> first;
  for (const auto* t : Tables()) {
    CAPTURE(t->isa);
    CpuOps ops(*t);
    std::vector<float> all(static_cast<size_t>(m * n));
    GemmArgs g;
    g.m = m;
    g.n = n;
    g.k = k;
    g.a = a.data();
    g.lda = k;
    g.b = b.data();
    g.ldb = k;
    g.c = all.data();
    g.ldc = n;
    ops.Gemm(g);
    for (int64_t row : {0, 3, 4, 47, 49}) {
      std::vector<float> one(static_cast<size_t>(n));
      g.m = 1;
      g.a = a.data() + row * k;
      g.c = one.data();
      ops.Gemm(g);
      CHECK(std::memcmp(one.data(), all.data() + row * n, sizeof(float) * static_cast<size_t>(n)) == 0);
    }
    // A double-precision dot product agrees to fp32 rounding.
    double dot = 0;
    for (int64_t p = 0; p < k; ++p) dot += static_cast<double>(a[static_cast<size_t>(5 * k + p)]) * b[static_cast<size_t>(7 * k + p)];
    CHECK(all[static_cast<size_t>(5 * n + 7)] == doctest::Approx(dot).epsilon(1e-5));
    if (first.empty()) {
      first = all;
    } else {
      CHECK(std::memcmp(first.data(), all.data(), sizeof(float) * first.size()) == 0);  // generic == avx2
    }
  }
}

TEST_CASE("GroupedGemm uses each group's weight and skips an empty group with no weight") {
  CpuOps ops;
  // Rows: group 0 = rows [0, 1), group 1 = none (null weight), group 2 = rows [1, 3).
  const float x[] = {1, 1, 2, 3, 4, 5};      // [3, 2]
  const float w0[] = {1, 0}, w2[] = {0, 1};  // [1, 2]: pick column 0 / column 1
  const float* weights[] = {w0, nullptr, w2};
  const int64_t offsets[] = {0, 1, 1, 3};
  float y[3] = {};
  GroupedGemmArgs g;
  g.num_groups = 3;
  g.offsets = offsets;
  g.n = 1;
  g.k = 2;
  g.a = x;
  g.lda = 2;
  g.b = weights;
  g.ldb = 2;
  g.c = y;
  g.ldc = 1;
  ops.GroupedGemm(g);
  CHECK(y[0] == 1);  // row 0 . [1 0]
  CHECK(y[1] == 3);  // row 1 . [0 1]
  CHECK(y[2] == 5);  // row 2 . [0 1]
}

TEST_CASE("GatherRows and ScatterRows permute rows by int64 indices and undo each other") {
  CpuOps ops;
  const float src[] = {0, 0, 1, 1, 2, 2};  // [3, 2]
  const int64_t idx[] = {2, 0, 1};
  float gathered[6], back[6];
  ops.GatherRows(src, idx, 3, 2, gathered);
  CHECK(gathered[0] == 2);
  CHECK(gathered[2] == 0);
  CHECK(gathered[4] == 1);
  ops.ScatterRows(gathered, idx, 3, 2, back);
  CHECK(std::memcmp(back, src, sizeof(src)) == 0);
}

TEST_CASE("GatherRows reads a row whose element offset is beyond 2^31 without allocating that much") {
  // Row 2^21 + 5 of rows of 1024 floats starts at element 2^31 + 5120: int32 arithmetic would
  // wrap. The buffer is 8 GiB of address space reserved without backing (MAP_NORESERVE); only
  // the pages of the one row touched are ever allocated.
  const int64_t row_elems = 1024, row = (int64_t{1} << 21) + 5;
  const size_t bytes = static_cast<size_t>(row + 1) * row_elems * sizeof(float);
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  REQUIRE_MESSAGE(p != MAP_FAILED, "could not reserve 8 GiB of address space");
  float* big = static_cast<float*>(p);
  CHECK(row * row_elems > (int64_t{1} << 31));
  for (int64_t d = 0; d < row_elems; ++d) big[row * row_elems + d] = static_cast<float>(d);
  CpuOps ops;
  std::vector<float> out(static_cast<size_t>(row_elems));
  const int64_t idx[] = {row};
  ops.GatherRows(big, idx, 1, row_elems, out.data());
  CHECK(out[0] == 0);
  CHECK(out[1023] == 1023);
  std::vector<RowBlock> blocks = {{0, row, 1}};
  std::vector<float> ones(static_cast<size_t>(row_elems), 1.0f);
  ops.CopyRowBlocks(ones.data(), big, blocks, row_elems);
  CHECK(big[row * row_elems + 7] == 1.0f);
  munmap(p, bytes);
}

TEST_CASE("SwiGlu is silu(gate) * up") {
  CpuOps ops;
  const float gate[] = {0, 1}, up[] = {5, 2};
  float out[2];
  ops.SwiGlu(gate, up, out, 2);
  CHECK(out[0] == 0);                                              // silu(0) = 0
  CHECK(out[1] == doctest::Approx(2.0 / (1.0 + std::exp(-1.0))));  // silu(1) * 2 = 1.4621...
}

TEST_CASE("Softmax of [0, ln 3] is [1/4, 3/4] and Sigmoid(0) is 1/2") {
  CpuOps ops;
  float x[] = {0.0f, std::log(3.0f)};
  ops.Softmax(x, 1, 2);
  CHECK(x[0] == doctest::Approx(0.25));
  CHECK(x[1] == doctest::Approx(0.75));
  float s[] = {0.0f};
  ops.Sigmoid(s, 1);
  CHECK(s[0] == 0.5f);
}

TEST_CASE("TopK lists the largest values first and breaks ties to the lower index") {
  CpuOps ops;
  const float x[] = {1, 3, 3, 2};
  int64_t idx2[2], idx4[4];
  ops.TopK(x, 1, 4, 2, idx2);
  CHECK(idx2[0] == 1);  // 3 at columns 1 and 2: column 1 first
  CHECK(idx2[1] == 2);
  ops.TopK(x, 1, 4, 4, idx4);  // top_k = num_experts: every column, sorted
  CHECK(idx4[0] == 1);
  CHECK(idx4[1] == 2);
  CHECK(idx4[2] == 3);
  CHECK(idx4[3] == 0);
}

TEST_CASE("RouterWeights gathers, normalizes and scales the top-k scores") {
  CpuOps ops;
  const float scores[] = {0.1f, 0.3f, 0.6f};
  const int64_t idx[] = {2, 1};
  float w[2];
  // 0.6 / 0.9 = 2/3 and 0.3 / 0.9 = 1/3, times 2.5.
  ops.RouterWeights(scores, idx, 1, 3, 2, true, 2.5f, w);
  CHECK(w[0] == doctest::Approx(2.5 * 2.0 / 3.0));
  CHECK(w[1] == doctest::Approx(2.5 / 3.0));
  ops.RouterWeights(scores, idx, 1, 3, 2, false, 1.0f, w);
  CHECK(w[0] == doctest::Approx(0.6));
}

TEST_CASE("WeightedCombine sums each token's rows with its weights") {
  CpuOps ops;
  const float rows[] = {1, 1, 2, 2, 3, 3};  // [3, 2]
  const int64_t row_of_slot[] = {2, 0};     // token 0: slot 0 -> row 2, slot 1 -> row 0
  const float w[] = {0.5f, 2.0f};
  float out[2];
  ops.WeightedCombine(rows, row_of_slot, w, 1, 2, 2, out);
  CHECK(out[0] == 3.5f);  // 0.5 * 3 + 2 * 1
  CHECK(out[1] == 3.5f);
}
