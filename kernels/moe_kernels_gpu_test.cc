// Every CUDA kernel against the CPU backend's op of the same name (runtime/cpu/cpu_ops.h), and
// the cuBLAS grouped GEMM against the CPU grouped GEMM. Bit-exact where moe_kernels.h says the
// kernel does the CPU's operations in the CPU's order; otherwise within the stated ulp/rtol.
// Without a GPU every case is skipped (reported as skipped by doctest and tools/run_tests.sh).
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include <doctest/doctest.h>

#include "kernels/gpu_test_util.h"
#include "kernels/grouped_gemm.h"
#include "kernels/moe_kernels.h"
#include "runtime/cpu/cpu_ops.h"
#include "runtime/data.h"

namespace dockyard::kernels {
namespace {

using testing::Buffer;

std::vector<float> RandomFloats(int64_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = dist(gen);
  return v;
}

uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// Exact equality, element by element (bits, so -0 vs +0 and NaN payloads also count).
void CheckBitExact(const std::vector<float>& got, const std::vector<float>& want) {
  REQUIRE(got.size() == want.size());
  int64_t diff = 0;
  for (size_t i = 0; i < got.size(); ++i) diff += Bits(got[i]) != Bits(want[i]) ? 1 : 0;
  CHECK(diff == 0);
}

// |got - want| <= rtol * |want| + atol everywhere.
void CheckClose(const std::vector<float>& got, const std::vector<float>& want, double rtol, double atol) {
  REQUIRE(got.size() == want.size());
  int64_t bad = 0;
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double err = std::fabs(static_cast<double>(got[i]) - want[i]);
    worst = std::max(worst, err);
    if (!(err <= rtol * std::fabs(want[i]) + atol)) ++bad;
  }
  INFO("max abs error " << worst);
  CHECK(bad == 0);
}

runtime::cpu::CpuOps& Cpu() {
  static runtime::cpu::CpuOps ops;
  return ops;
}

DOCKYARD_GPU_TEST("gather and scatter rows match the CPU, incl. a float4 and a scalar row width") {
  for (int64_t row_elems : {int64_t{7168}, int64_t{13}}) {
    const int64_t src_rows = 300, n = 517;
    const std::vector<float> src = RandomFloats(src_rows * row_elems, 1);
    std::vector<int64_t> idx(n);
    std::mt19937 gen(2);
    for (auto& i : idx) i = static_cast<int64_t>(gen() % src_rows);
    std::vector<float> want(static_cast<size_t>(n * row_elems));
    Cpu().GatherRows(src.data(), idx.data(), n, row_elems, want.data());
    Buffer<float> d_src(src), d_dst(n * row_elems);
    Buffer<int64_t> d_idx(idx);
    GatherRows(d_src.get(), d_idx.get(), n, row_elems, d_dst.get(), nullptr);
    CheckBitExact(d_dst.ToHost(), want);

    // Scatter with a permutation (distinct destinations).
    std::vector<int64_t> perm(static_cast<size_t>(src_rows));
    for (int64_t i = 0; i < src_rows; ++i) perm[i] = (i * 7 + 3) % src_rows;  // 7 is coprime with 300
    std::vector<float> want2(src.size(), 0.0f);
    Cpu().ScatterRows(src.data(), perm.data(), src_rows, row_elems, want2.data());
    Buffer<float> d_out(std::vector<float>(src.size(), 0.0f));
    Buffer<int64_t> d_perm(perm);
    ScatterRows(d_src.get(), d_perm.get(), src_rows, row_elems, d_out.get(), nullptr);
    CheckBitExact(d_out.ToHost(), want2);
  }
}

DOCKYARD_GPU_TEST("gather rows with source offsets past 2^31 elements (64-bit offsets)") {
  // 600,000 rows x 4096 = 2,457,600,000 floats (9.8 GB): row 599,999 starts at element
  // 2,457,595,904 > 2^31 = 2,147,483,648. Each row is filled with its own index.
  const int64_t rows = 600000, row_elems = 4096;
  float* src = nullptr;
  CheckCuda(cudaMalloc(reinterpret_cast<void**>(&src), static_cast<size_t>(rows * row_elems) * sizeof(float)), "cudaMalloc 9.8 GB");
  for (int64_t r : {int64_t{0}, int64_t{524288}, int64_t{599999}}) {
    Fill(src + r * row_elems, static_cast<float>(r), row_elems, nullptr);
  }
  const std::vector<int64_t> idx = {599999, 0, 524288};
  Buffer<int64_t> d_idx(idx);
  Buffer<float> d_dst(3 * row_elems);
  GatherRows(src, d_idx.get(), 3, row_elems, d_dst.get(), nullptr);
  const std::vector<float> got = d_dst.ToHost();
  cudaFree(src);
  CHECK(got[0] == 599999.0f);
  CHECK(got[row_elems - 1] == 599999.0f);
  CHECK(got[row_elems] == 0.0f);
  CHECK(got[2 * row_elems + 5] == 524288.0f);
}

DOCKYARD_GPU_TEST("elementwise kernels: swiglu, sigmoid, softmax within expf's ulps; add, scale, bias, fill exact") {
  const int64_t n = 100003;
  const std::vector<float> g = RandomFloats(n, 3, -8.0f, 8.0f), u = RandomFloats(n, 4);
  std::vector<float> want(n);
  Cpu().SwiGlu(g.data(), u.data(), want.data(), n);
  Buffer<float> dg(g), du(u), dout(n);
  SwiGlu(dg.get(), du.get(), dout.get(), n, nullptr);
  CheckClose(dout.ToHost(), want, 1e-6, 1e-30);  // expf: <= 2 ulp (CUDA) vs <= 1 ulp (glibc)

  std::vector<float> sig = g;
  Cpu().Sigmoid(sig.data(), n);
  Buffer<float> dsig(g);
  Sigmoid(dsig.get(), n, nullptr);
  CheckClose(dsig.ToHost(), sig, 1e-6, 1e-30);

  const int64_t rows = 257, cols = 256;
  std::vector<float> sm = RandomFloats(rows * cols, 5, -4.0f, 4.0f);
  Buffer<float> dsm(sm);
  Cpu().Softmax(sm.data(), rows, cols);
  Softmax(dsm.get(), rows, cols, nullptr);
  CheckClose(dsm.ToHost(), sm, 1e-5, 1e-30);

  std::vector<float> y = RandomFloats(n, 6);
  Buffer<float> dy(y);
  Cpu().Add(u.data(), y.data(), n);
  Add(du.get(), dy.get(), n, nullptr);
  CheckBitExact(dy.ToHost(), y);

  const std::vector<float> s = RandomFloats(rows, 7);
  std::vector<float> x = RandomFloats(rows * cols, 8);
  Buffer<float> dx(x), ds(s);
  Cpu().ScaleRows(x.data(), s.data(), rows, cols);
  ScaleRows(dx.get(), ds.get(), rows, cols, nullptr);
  CheckBitExact(dx.ToHost(), x);

  const std::vector<float> bias = RandomFloats(cols, 9);
  std::vector<float> biased(rows * cols);
  Cpu().AddRowBias(x.data(), bias.data(), rows, cols, biased.data());
  Buffer<float> dxb(x), dbias(bias), dbiased(rows * cols);
  AddRowBias(dxb.get(), dbias.get(), rows, cols, dbiased.get(), nullptr);
  CheckBitExact(dbiased.ToHost(), biased);

  Buffer<float> dfill(1000);
  Fill(dfill.get(), 0.25f, 1000, nullptr);
  CheckBitExact(dfill.ToHost(), std::vector<float>(1000, 0.25f));
}

DOCKYARD_GPU_TEST("router top-k (ties to the lower column), weights and weighted combine are bit-exact") {
  const int64_t rows = 1000, cols = 256, k = 8;
  std::vector<float> scores = RandomFloats(rows * cols, 10, 0.0f, 1.0f);
  // Ties: row 0 has every value equal (top-k must be columns 0..7), row 1 ties at the boundary.
  for (int64_t c = 0; c < cols; ++c) scores[c] = 0.5f;
  for (int64_t c = 0; c < cols; ++c) scores[cols + c] = c % 2 ? 0.75f : 0.25f;
  std::vector<int64_t> want_idx(rows * k);
  Cpu().TopK(scores.data(), rows, cols, k, want_idx.data());
  CHECK(want_idx[0] == 0);
  CHECK(want_idx[7] == 7);
  CHECK(want_idx[k] == 1);  // row 1: columns 1, 3, 5, ... carry 0.75
  Buffer<float> ds(scores);
  Buffer<int64_t> didx(rows * k);
  TopK(ds.get(), rows, cols, k, didx.get(), nullptr);
  CHECK(didx.ToHost() == want_idx);

  std::vector<float> want_w(rows * k);
  Cpu().RouterWeights(scores.data(), want_idx.data(), rows, cols, k, true, 2.5f, want_w.data());
  Buffer<float> dw(rows * k);
  RouterWeights(ds.get(), didx.get(), rows, cols, k, true, 2.5f, dw.get(), nullptr);
  CheckBitExact(dw.ToHost(), want_w);

  const int64_t tokens = rows, hidden = 96, slots = tokens * k;
  const std::vector<float> expert_rows = RandomFloats(slots * hidden, 11);
  std::vector<int64_t> row_of_slot(slots);
  for (int64_t i = 0; i < slots; ++i) row_of_slot[i] = (i * 37) % slots;
  std::vector<float> want_out(tokens * hidden);
  Cpu().WeightedCombine(expert_rows.data(), row_of_slot.data(), want_w.data(), tokens, k, hidden, want_out.data());
  Buffer<float> drows(expert_rows), dout(tokens * hidden);
  Buffer<int64_t> dslot(row_of_slot);
  WeightedCombine(drows.get(), dslot.get(), dw.get(), tokens, k, hidden, dout.get(), nullptr);
  CheckBitExact(dout.ToHost(), want_out);
}

DOCKYARD_GPU_TEST("token counting per expert matches a host count; ids out of range are ignored") {
  const int64_t slots = 123457, experts = 160;
  std::vector<int64_t> ids(slots);
  std::mt19937 gen(12);
  for (auto& e : ids) e = static_cast<int64_t>(gen() % (experts + 3)) - 1;  // includes -1 and 160, 161
  std::vector<int64_t> want(experts, 0);
  for (int64_t e : ids) {
    if (e >= 0 && e < experts) ++want[e];
  }
  Buffer<int64_t> dids(ids), dcounts(experts);
  CountPerExpert(dids.get(), slots, experts, dcounts.get(), nullptr);
  CHECK(dcounts.ToHost() == want);
}

DOCKYARD_GPU_TEST("token and weight generators give the host's bits") {
  const int64_t tokens = 33, hidden = 7168;
  std::vector<float> want(tokens * hidden);
  Cpu().FillTokens(42, 3, 1000, tokens, hidden, want.data());
  Buffer<float> d(tokens * hidden);
  FillTokens(42, 3, 1000, tokens, hidden, d.get(), nullptr);
  CheckBitExact(d.ToHost(), want);

  runtime::WeightRowsArgs w;
  w.seed = 42;
  w.layer = 5;
  w.matrix = runtime::kMatrixGate;
  w.expert = 255;
  w.row_begin = 100;
  w.row_end = 164;
  w.col_begin = 3;
  w.col_end = 7168;
  w.scale = runtime::GateUpScale(7168);
  std::vector<float> wt((w.row_end - w.row_begin) * (w.col_end - w.col_begin));
  w.out = wt.data();
  Cpu().FillWeightRows(w);
  Buffer<float> dw(static_cast<int64_t>(wt.size()));
  FillWeightRows(w.seed, w.layer, w.matrix, w.expert, w.row_begin, w.row_end, w.col_begin, w.col_end, w.scale, dw.get(), nullptr);
  CheckBitExact(dw.ToHost(), wt);
}

DOCKYARD_GPU_TEST("GemmExact reproduces the CPU GEMM bit for bit (router), NT and NN, k not a multiple of 8") {
  for (bool trans_b : {true, false}) {
    for (bool acc : {false, true}) {
      const int64_t m = 37, n = 256, k = 7171;
      const std::vector<float> a = RandomFloats(m * k, 13), b = RandomFloats(n * k, 14);
      std::vector<float> c = RandomFloats(m * n, 15);
      Buffer<float> da(a), db(b), dc(c);
      runtime::GemmArgs g;
      g.m = m;
      g.n = n;
      g.k = k;
      g.a = a.data();
      g.lda = k;
      g.b = b.data();
      g.ldb = trans_b ? k : n;
      g.trans_b = trans_b;
      g.c = c.data();
      g.ldc = n;
      g.accumulate = acc;
      Cpu().Gemm(g);
      GemmExact(m, n, k, da.get(), k, db.get(), trans_b ? k : n, trans_b, dc.get(), n, acc, nullptr);
      CAPTURE(trans_b);
      CAPTURE(acc);
      CheckBitExact(dc.ToHost(), c);
    }
  }
}

DOCKYARD_GPU_TEST("bf16 conversion rounds to nearest even") {
  // 1 + 2^-8 lies halfway between bf16 1.0 (0x3f80) and 1 + 2^-7 (0x3f81): even -> 0x3f80;
  // 1 + 3 * 2^-8 lies halfway between 0x3f81 and 0x3f82: even -> 0x3f82.
  const std::vector<float> x = {1.0f, 1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, -2.0f};
  Buffer<float> dx(x);
  Buffer<uint16_t> d16(4);
  FloatToBf16(dx.get(), d16.get(), 4, nullptr);
  CHECK(d16.ToHost() == std::vector<uint16_t>{0x3f80, 0x3f80, 0x3f82, 0xc000});
}

void GroupedCase(GemmPrecision precision, GroupedGemmPath path, bool trans_b, bool accumulate, double rtol, double atol) {
  // Rows per expert as routing gives them: empty groups, a single row, uneven sizes.
  const std::vector<int64_t> rows = {5, 0, 130, 1, 0, 77, 256};
  const int64_t n = 192, k = 320, groups = static_cast<int64_t>(rows.size());
  std::vector<int64_t> offsets = {0};
  for (int64_t r : rows) offsets.push_back(offsets.back() + r);
  const int64_t total = offsets.back();
  const std::vector<float> a = RandomFloats(total * k, 16);
  std::vector<std::vector<float>> b;
  for (int64_t g = 0; g < groups; ++g) b.push_back(RandomFloats(n * k, 100 + static_cast<uint32_t>(g)));
  std::vector<float> c = RandomFloats(total * n, 17);

  std::vector<const float*> hb;
  for (auto& w : b) hb.push_back(w.data());
  runtime::GroupedGemmArgs g;
  g.num_groups = groups;
  g.offsets = offsets.data();
  g.n = n;
  g.k = k;
  g.a = a.data();
  g.lda = k;
  g.b = hb.data();
  g.ldb = trans_b ? k : n;
  g.trans_b = trans_b;
  g.ldc = n;
  g.accumulate = accumulate;
  std::vector<float> want = c;
  g.c = want.data();
  Cpu().GroupedGemm(g);

  Buffer<float> da(a), dc(c);
  std::vector<std::unique_ptr<Buffer<float>>> db;
  std::vector<const float*> dbp;
  for (int64_t i = 0; i < groups; ++i) {
    db.push_back(std::make_unique<Buffer<float>>(b[i]));
    dbp.push_back(rows[i] == 0 ? nullptr : db.back()->get());  // an empty group may have a null weight
  }
  CublasGemm gemm(nullptr);
  const GroupedGemmPath ran = gemm.RunFloat(groups, offsets.data(), n, k, da.get(), k, dbp.data(), trans_b ? k : n, trans_b, dc.get(), n,
                                            accumulate, precision, path);
  // The documented type combinations (fp32; bf16 A, B and C) must run grouped, not fall back.
  CHECK_MESSAGE(ran == path, "asked for ", PathName(path), ", ran ", PathName(ran));
  CheckClose(dc.ToHost(), want, rtol, atol);
}

DOCKYARD_GPU_TEST("cuBLAS grouped GEMM (grouped and loop paths) against the CPU grouped GEMM") {
  for (bool trans_b : {true, false}) {
    for (bool acc : {false, true}) {
      CAPTURE(trans_b);
      CAPTURE(acc);
      // fp32: |sum of 320 products of U(-1,1)| ~ 10; fp32 summation-order error ~ k * eps * 10.
      GroupedCase(GemmPrecision::kFp32, GroupedGemmPath::kGrouped, trans_b, acc, 1e-5, 1e-4);
      GroupedCase(GemmPrecision::kFp32, GroupedGemmPath::kLoop, trans_b, acc, 1e-5, 1e-4);
      // bf16 inputs (8-bit mantissa: relative rounding 2^-9 per operand) with fp32 accumulation:
      // error ~ sqrt(k) * 2 * 2^-9 * E|ab| ~ 18 * 0.004 * 0.33 = 0.023 absolute, plus the bf16
      // result's own rounding, 2^-9 relative (|C| ~ sqrt(320) * 0.33 ~ 6: 0.012).
      GroupedCase(GemmPrecision::kBf16, GroupedGemmPath::kGrouped, trans_b, acc, 2e-2, 0.1);
      GroupedCase(GemmPrecision::kBf16, GroupedGemmPath::kLoop, trans_b, acc, 2e-2, 0.1);
    }
  }
}

}  // namespace
}  // namespace dockyard::kernels
