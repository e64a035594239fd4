// The SwiGLU expert MLP with generated weights (expert_ffn.h).
#include "runtime/expert_ffn.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include <fmt/format.h>

#include "planner/error.h"
#include "runtime/data.h"

namespace dockyard::runtime {

namespace {

FfnArgs LayerFfnArgs(const RunConfig& c, int64_t intermediate, int64_t gate, int64_t up, int64_t down,
                     std::vector<int64_t> experts, std::vector<int64_t> offsets, int64_t f_begin, int64_t f_end) {
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

FfnArgs RoutedFfnArgs(const RunConfig& c, std::vector<int64_t> experts, std::vector<int64_t> offsets, int64_t f_begin,
                      int64_t f_end) {
  return LayerFfnArgs(c, c.moe_intermediate, kMatrixGate, kMatrixUp, kMatrixDown, std::move(experts), std::move(offsets),
                      f_begin, f_end);
}

FfnArgs SharedFfnArgs(const RunConfig& c, std::vector<int64_t> offsets, int64_t f_begin, int64_t f_end) {
  return LayerFfnArgs(c, c.shared_intermediate, kMatrixSharedGate, kMatrixSharedUp, kMatrixSharedDown, {0},
                      std::move(offsets), f_begin, f_end);
}

int64_t FfnBlockRows(int64_t f_count, int64_t hidden, int64_t rows, int64_t block_bytes) {
  if (f_count <= 0) return 1;
  const int64_t per_f_weights = 3 * hidden * 4;              // gate, up and down rows of one f
  const int64_t per_f_acts = 2 * std::max<int64_t>(1, rows) * 4;  // h_gate, h_up columns of one f
  const int64_t bf = std::min(block_bytes / per_f_weights, block_bytes / per_f_acts);
  return std::clamp<int64_t>(bf, 1, f_count);
}

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
  const float gate_scale = GateUpScale(d), down_scale = DownScale(a.intermediate);
  double gen_seconds = 0.0;
  // Chunks of consecutive groups whose blocks of generated weights fit the budget together:
  // bf rows of f per expert, as many experts with rows as fit in block_bytes (at least one).
  const int64_t block_rows_cap = FfnBlockRows(f_count, d, 1, a.block_bytes);
  int64_t g0 = 0;
  while (g0 < groups) {
    while (g0 < groups && a.offsets[static_cast<size_t>(g0 + 1)] == a.offsets[static_cast<size_t>(g0)]) ++g0;
    if (g0 == groups) break;
    const int64_t per_expert_bytes = 3 * block_rows_cap * d * 4;
    const int64_t max_active = std::max<int64_t>(1, a.block_bytes / per_expert_bytes);
    int64_t g1 = g0, active = 0;
    while (g1 < groups && active < max_active) {
      if (a.offsets[static_cast<size_t>(g1 + 1)] > a.offsets[static_cast<size_t>(g1)]) ++active;
      ++g1;
    }
    const int64_t row0 = a.offsets[static_cast<size_t>(g0)];
    const int64_t chunk_rows = a.offsets[static_cast<size_t>(g1)] - row0;
    const int64_t bf = std::min(block_rows_cap, FfnBlockRows(f_count, d, chunk_rows, a.block_bytes));
    std::vector<int64_t> offsets;
    for (int64_t g = g0; g <= g1; ++g) offsets.push_back(a.offsets[static_cast<size_t>(g)] - row0);
    ws.w_gate.Resize(active * bf * d);
    ws.w_up.Resize(active * bf * d);
    ws.w_down.Resize(active * bf * d);
    ws.h_gate.Resize(chunk_rows * bf);
    ws.h_up.Resize(chunk_rows * bf);
    std::vector<const float*> wg(static_cast<size_t>(g1 - g0), nullptr), wu(wg), wd(wg);
    for (int64_t f0 = a.f_begin; f0 < a.f_end; f0 += bf) {
      const int64_t nb = std::min(bf, a.f_end - f0);
      device.Synchronize();
      const auto t0 = std::chrono::steady_clock::now();
      int64_t i = 0;
      for (int64_t g = g0; g < g1; ++g) {
        if (offsets[static_cast<size_t>(g - g0 + 1)] == offsets[static_cast<size_t>(g - g0)]) continue;
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
        w.out = ws.w_gate.data() + i * bf * d;
        ops.FillWeightRows(w);
        w.matrix = a.matrix_up;
        w.out = ws.w_up.data() + i * bf * d;
        ops.FillWeightRows(w);
        w.matrix = a.matrix_down;  // generated [f, d]: down[d, f] transposed
        w.scale = down_scale;
        w.out = ws.w_down.data() + i * bf * d;
        ops.FillWeightRows(w);
        wg[static_cast<size_t>(g - g0)] = ws.w_gate.data() + i * bf * d;
        wu[static_cast<size_t>(g - g0)] = ws.w_up.data() + i * bf * d;
        wd[static_cast<size_t>(g - g0)] = ws.w_down.data() + i * bf * d;
        ++i;
      }
      device.Synchronize();
      gen_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

      GroupedGemmArgs gg;
      gg.num_groups = g1 - g0;
      gg.offsets = offsets.data();
      gg.n = nb;
      gg.k = d;
      gg.a = a.x + row0 * d;
      gg.lda = d;
      gg.b = wg.data();
      gg.ldb = d;
      gg.trans_b = true;
      gg.c = ws.h_gate.data();
      gg.ldc = nb;
      ops.GroupedGemm(gg);  // h_gate [rows, nb] = x . gate^T
      gg.b = wu.data();
      gg.c = ws.h_up.data();
      ops.GroupedGemm(gg);  // h_up [rows, nb] = x . up^T
      ops.SwiGlu(ws.h_gate.data(), ws.h_up.data(), ws.h_gate.data(), chunk_rows * nb);
      GroupedGemmArgs dn;
      dn.num_groups = g1 - g0;
      dn.offsets = offsets.data();
      dn.n = d;
      dn.k = nb;
      dn.a = ws.h_gate.data();
      dn.lda = nb;
      dn.b = wd.data();
      dn.ldb = d;
      dn.trans_b = false;
      dn.c = a.out + row0 * d;
      dn.ldc = d;
      dn.accumulate = true;
      ops.GroupedGemm(dn);  // out [rows, d] += h [rows, nb] . down^T [nb, d]
    }
    g0 = g1;
  }
  return gen_seconds;
}

}  // namespace dockyard::runtime
