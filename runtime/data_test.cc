// Generated data (data.h): values are pure functions of their coordinates, and the vectorized
// weight generator of the CPU kernels reproduces the closed form exactly.
#include "runtime/data.h"

#include <cmath>
#include <vector>

#include <doctest/doctest.h>

#include "runtime/cpu/cpu_ops.h"
#include "runtime/cpu/kernels.h"

using namespace dockyard::runtime;

TEST_CASE("RowBits is the quadratic Weyl sequence beta + c*alpha + c(c-1)/2*gamma") {
  RowStream s;
  s.alpha = 3;
  s.beta = 10;
  s.gamma = 2;
  // Hand arithmetic: 10, 10+3, 10+6+1*2, 10+9+3*2.
  CHECK(RowBits(s, 0) == 10u);
  CHECK(RowBits(s, 1) == 13u);
  CHECK(RowBits(s, 2) == 18u);
  CHECK(RowBits(s, 3) == 25u);
  // The increment from c to c + 1 is alpha + c * gamma.
  for (int64_t c = 0; c < 100; ++c) CHECK(RowBits(s, c + 1) - RowBits(s, c) == RowDelta(s, c));
}

TEST_CASE("RowBits wraps modulo 2^32") {
  RowStream s;
  s.alpha = 0x80000000u;
  s.beta = 0x80000000u;
  s.gamma = 0;
  CHECK(RowBits(s, 1) == 0u);  // 2^31 + 2^31 = 2^32 = 0 (mod 2^32)
  CHECK(RowBits(s, 2) == 0x80000000u);
}

TEST_CASE("BitsToUnit maps int32 bits onto [-1, 1]") {
  CHECK(BitsToUnit(0u) == 0.0f);
  CHECK(BitsToUnit(0x80000000u) == -1.0f);  // INT32_MIN / 2^31
  CHECK(BitsToUnit(0x40000000u) == 0.5f);   // 2^30 / 2^31
  CHECK(BitsToUnit(0x7fffffffu) == 1.0f);   // 2^31 - 1 rounds to 2^31 in fp32 (24-bit mantissa)
}

TEST_CASE("Token values depend only on (seed, source, token, dim) and lie in [-1, 1]") {
  const float v = TokenValue(7, 3, 5, 11, 64);
  CHECK(v == TokenValue(7, 3, 5, 11, 64));
  CHECK(v == TokenValueAt(TokenKey(7, 3), 5 * 64 + 11));
  CHECK(v != TokenValue(7, 4, 5, 11, 64));  // another source
  CHECK(v != TokenValue(8, 3, 5, 11, 64));  // another seed
  double sum = 0;
  for (int64_t i = 0; i < 10000; ++i) {
    const float x = TokenValueAt(TokenKey(1, 0), i);
    CHECK(x >= -1.0f);
    CHECK(x <= 1.0f);
    sum += x;
  }
  CHECK(std::abs(sum / 10000) < 0.05);  // mean of U(-1, 1) is 0; 3 sigma = 3 * 0.577 / 100
}

TEST_CASE("Every kernel build generates weight rows equal to the closed form, at any column offset") {
  std::vector<const dockyard::runtime::cpu::KernelTable*> tables = {&dockyard::runtime::cpu::GenericKernels()};
  if (dockyard::runtime::cpu::Avx2Kernels() != nullptr && __builtin_cpu_supports("avx2")) {
    tables.push_back(dockyard::runtime::cpu::Avx2Kernels());
  }
  for (const auto* table : tables) {
    CAPTURE(table->isa);
    dockyard::runtime::cpu::CpuOps ops(*table);
    // 3 rows x 45 columns starting at column 1000: the vector loop (40) plus a scalar tail (5).
    std::vector<float> out(3 * 45);
    WeightRowsArgs a;
    a.seed = 42;
    a.layer = 3;
    a.matrix = kMatrixGate;
    a.expert = 17;
    a.row_begin = 7;
    a.row_end = 10;
    a.col_begin = 1000;
    a.col_end = 1045;
    a.scale = 0.25f;
    a.out = out.data();
    ops.FillWeightRows(a);
    for (int64_t r = 0; r < 3; ++r) {
      for (int64_t c = 0; c < 45; ++c) {
        CHECK(out[static_cast<size_t>(r * 45 + c)] == WeightValue(42, 3, kMatrixGate, 17, 7 + r, 1000 + c, 0.25f));
      }
    }
  }
}

TEST_CASE("Different experts, matrices and layers get different weights") {
  const float w = WeightValue(0, 0, kMatrixGate, 5, 0, 0, 1.0f);
  CHECK(w != WeightValue(0, 0, kMatrixGate, 6, 0, 0, 1.0f));
  CHECK(w != WeightValue(0, 0, kMatrixUp, 5, 0, 0, 1.0f));
  CHECK(w != WeightValue(0, 1, kMatrixGate, 5, 0, 0, 1.0f));
}

TEST_CASE("Scales give unit-variance router logits and 1/D gate variance") {
  // Var(U(-s, s)) = s^2 / 3: router 3/sqrt(D) gives 3/D, times D * Var(x) = D / 3 -> 1.
  CHECK(RouterScale(64) == doctest::Approx(3.0 / 8.0));
  CHECK(GateUpScale(3) == doctest::Approx(1.0));  // sqrt(3 / 3)
  CHECK(DownScale(12) == doctest::Approx(0.5));   // sqrt(3 / 12)
}
