// The SwiGLU expert MLP with generated weights (expert_ffn.h).
#include "runtime/expert_ffn.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include <fmt/format.h>

#include "planner/base/error.h"
#include "runtime/data.h"

namespace dockyard::runtime {

namespace {

FfnArgs LayerFfnArgs(const RunConfig& c, int64_t intermediate, int64_t gate, int64_t up, int64_t down, std::vector<int64_t> experts,
                     std::vector<int64_t> offsets, int64_t f_begin, int64_t f_end) {
  FfnArgs a;
  a.seed = c.options.seed;
  a.layer = c.layer;
  a.hidden = c.hidden;
  a.intermediate = intermediate;
  a.matrix_gate = gate;
  a.matrix_up = up;
  a.matrix_down = down;
  a.experts = std::move(experts);
  a.offsets = std::move(offsets);
  a.f_begin = f_begin;
  a.f_end = f_end;
  return a;
}

}  // namespace

FfnArgs RoutedFfnArgs(const RunConfig& c, std::vector<int64_t> experts, std::vector<int64_t> offsets, int64_t f_begin, int64_t f_end) {
  return LayerFfnArgs(c, c.moe_intermediate, kMatrixGate, kMatrixUp, kMatrixDown, std::move(experts), std::move(offsets), f_begin, f_end);
}

FfnArgs SharedFfnArgs(const RunConfig& c, std::vector<int64_t> offsets, int64_t f_begin, int64_t f_end) {
  return LayerFfnArgs(c, c.shared_intermediate, kMatrixSharedGate, kMatrixSharedUp, kMatrixSharedDown, {0}, std::move(offsets), f_begin,
                      f_end);
}

int64_t FfnBlockRows(int64_t f_count, int64_t hidden, int64_t rows, int64_t block_bytes) {
  if (f_count <= 0) return 1;
  const int64_t per_f_weights = 3 * hidden * 4;                   // gate, up and down rows of one f
  const int64_t per_f_acts = 2 * std::max<int64_t>(1, rows) * 4;  // h_gate, h_up columns of one f
  const int64_t bf = std::min(block_bytes / per_f_weights, block_bytes / per_f_acts);
  return std::clamp<int64_t>(bf, 1, f_count);
}

namespace {

// One chunk of consecutive expert groups [g0, g1) whose generated weight blocks fit the budget
// together: rows [row0, row0 + rows) of x, offsets relative to row0, `active` groups with rows, bf
// rows of f per expert and block.
struct FfnChunk {
  int64_t g0, g1, active, row0, rows, bf;
  std::vector<int64_t> offsets;
};

// The chunk starting at the first group with rows at or after g0; g0 == groups when none is left.
FfnChunk NextChunk(const FfnArgs& a, int64_t g0, int64_t f_count, int64_t block_rows_cap) {
  const int64_t groups = static_cast<int64_t>(a.experts.size());
  FfnChunk c{};
  while (g0 < groups && a.offsets[static_cast<size_t>(g0 + 1)] == a.offsets[static_cast<size_t>(g0)]) ++g0;
  c.g0 = c.g1 = g0;
  if (g0 == groups) return c;
  const int64_t per_expert_bytes = 3 * block_rows_cap * a.hidden * 4;
  const int64_t max_active = std::max<int64_t>(1, a.block_bytes / per_expert_bytes);
  while (c.g1 < groups && c.active < max_active) {
    if (a.offsets[static_cast<size_t>(c.g1 + 1)] > a.offsets[static_cast<size_t>(c.g1)]) ++c.active;
    ++c.g1;
  }
  c.row0 = a.offsets[static_cast<size_t>(g0)];
  c.rows = a.offsets[static_cast<size_t>(c.g1)] - c.row0;
  c.bf = std::min(block_rows_cap, FfnBlockRows(f_count, a.hidden, c.rows, a.block_bytes));
  for (int64_t g = g0; g <= c.g1; ++g) c.offsets.push_back(a.offsets[static_cast<size_t>(g)] - c.row0);
  return c;
}

// Per group of the chunk: its gate, up and down rows [f0, f0 + nb) in the workspace (nullptr for a
// group without rows).
struct WeightBlock {
  std::vector<const float*> gate, up, down;
};

// Generates rows [f0, f0 + nb) of every chunk group's gate, up and down matrices (down generated
// [f, d], i.e. down[d, f] transposed) into ws.w_*.
WeightBlock GenerateWeights(ComputeOps& ops, const FfnArgs& a, const FfnChunk& c, int64_t f0, int64_t nb, FfnWorkspace& ws) {
  const int64_t d = a.hidden;
  const float gate_scale = GateUpScale(d), down_scale = DownScale(a.intermediate);
  WeightBlock b;
  b.gate.assign(static_cast<size_t>(c.g1 - c.g0), nullptr);
  b.up = b.down = b.gate;
  int64_t i = 0;
  for (int64_t g = c.g0; g < c.g1; ++g) {
    const size_t k = static_cast<size_t>(g - c.g0);
    if (c.offsets[k + 1] == c.offsets[k]) continue;
    WeightRowsArgs w;
    w.seed = a.seed;
    w.layer = a.layer;
    w.expert = a.experts[static_cast<size_t>(g)];
    w.row_begin = f0;
    w.row_end = f0 + nb;
    w.col_begin = 0;
    w.col_end = d;
    w.matrix = a.matrix_gate;
    w.scale = gate_scale;
    w.out = ws.w_gate.data() + i * c.bf * d;
    ops.FillWeightRows(w);
    w.matrix = a.matrix_up;
    w.out = ws.w_up.data() + i * c.bf * d;
    ops.FillWeightRows(w);
    w.matrix = a.matrix_down;
    w.scale = down_scale;
    w.out = ws.w_down.data() + i * c.bf * d;
    ops.FillWeightRows(w);
    b.gate[k] = ws.w_gate.data() + i * c.bf * d;
    b.up[k] = ws.w_up.data() + i * c.bf * d;
    b.down[k] = ws.w_down.data() + i * c.bf * d;
    ++i;
  }
  return b;
}

// out[chunk rows, d] += SwiGLU(x . gate^T, x . up^T) . down^T over the nb columns of f in the block.
void BlockGemms(ComputeOps& ops, const FfnArgs& a, const FfnChunk& c, int64_t nb, WeightBlock& b, FfnWorkspace& ws) {
  const int64_t d = a.hidden;
  GroupedGemmArgs gg;
  gg.num_groups = c.g1 - c.g0;
  gg.offsets = c.offsets.data();
  gg.n = nb;
  gg.k = d;
  gg.a = a.x + c.row0 * d;
  gg.lda = d;
  gg.b = b.gate.data();
  gg.ldb = d;
  gg.trans_b = true;
  gg.c = ws.h_gate.data();
  gg.ldc = nb;
  ops.GroupedGemm(gg);  // h_gate [rows, nb] = x . gate^T
  gg.b = b.up.data();
  gg.c = ws.h_up.data();
  ops.GroupedGemm(gg);  // h_up [rows, nb] = x . up^T
  ops.SwiGlu(ws.h_gate.data(), ws.h_up.data(), ws.h_gate.data(), c.rows * nb);
  GroupedGemmArgs dn;
  dn.num_groups = c.g1 - c.g0;
  dn.offsets = c.offsets.data();
  dn.n = d;
  dn.k = nb;
  dn.a = ws.h_gate.data();
  dn.lda = nb;
  dn.b = b.down.data();
  dn.ldb = d;
  dn.trans_b = false;
  dn.c = a.out + c.row0 * d;
  dn.ldc = d;
  dn.accumulate = true;
  ops.GroupedGemm(dn);  // out [rows, d] += h [rows, nb] . down^T [nb, d]
}

}  // namespace

double RunSwiGluFfn(ComputeOps& ops, Device& device, const FfnArgs& a, FfnWorkspace& ws) {
  const int64_t groups = static_cast<int64_t>(a.experts.size());
  if (static_cast<int64_t>(a.offsets.size()) != groups + 1 || a.offsets.front() != 0) {
    throw Error(fmt::format("expert mlp: {} offsets for {} groups", a.offsets.size(), groups));
  }
  const int64_t rows = a.offsets.back(), d = a.hidden;
  if (rows == 0) return 0.0;
  ops.Fill(a.out, 0.0f, rows * d);
  const int64_t f_count = a.f_end - a.f_begin;
  if (f_count <= 0) return 0.0;  // an empty TP chunk contributes nothing
  double gen_seconds = 0.0;
  // Chunks of consecutive groups whose blocks of generated weights fit the budget together:
  // bf rows of f per expert, as many experts with rows as fit in block_bytes (at least one).
  const int64_t block_rows_cap = FfnBlockRows(f_count, d, 1, a.block_bytes);
  for (FfnChunk c = NextChunk(a, 0, f_count, block_rows_cap); c.g0 < groups; c = NextChunk(a, c.g1, f_count, block_rows_cap)) {
    ws.w_gate.Resize(c.active * c.bf * d);
    ws.w_up.Resize(c.active * c.bf * d);
    ws.w_down.Resize(c.active * c.bf * d);
    ws.h_gate.Resize(c.rows * c.bf);
    ws.h_up.Resize(c.rows * c.bf);
    for (int64_t f0 = a.f_begin; f0 < a.f_end; f0 += c.bf) {
      const int64_t nb = std::min(c.bf, a.f_end - f0);
      device.Synchronize();
      const auto t0 = std::chrono::steady_clock::now();
      WeightBlock b = GenerateWeights(ops, a, c, f0, nb, ws);
      device.Synchronize();
      gen_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      BlockGemms(ops, a, c, nb, b, ws);
    }
  }
  return gen_seconds;
}

}  // namespace dockyard::runtime
