// The SwiGLU expert MLP of one group of rows per expert, out = w2 . (silu(w1 . x) * (w3 . x)),
// with the weights generated on the fly (runtime/data.h) block by block of the intermediate
// dim f: the experts that received rows are taken in chunks whose blocks fit a budget (1 MiB:
// a core's L2), and per block of f the chunk's gate, up and down rows for [f0, f0 + bf) are
// generated, the grouped GEMMs run, and the output accumulates. Only the f slice [f_begin, f_end) is
// computed: with TP-sharded experts (colwise gate/up, rowwise down) each rank's output is a
// partial sum over its slice, which the caller all-reduces. Nothing but one block of weights
// is ever resident, so real model sizes run in a few MiB per rank (docs/runtime.md).
// Used by the ranks (routed and shared experts) and by the single-process reference.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/backend.h"
#include "runtime/config.h"

namespace dockyard::runtime {

struct FfnArgs {
  uint64_t seed = 0;
  int64_t layer = 0;
  int64_t hidden = 0;
  int64_t intermediate = 0;                                 // the full logical F (sets the down scale)
  int64_t matrix_gate = 0, matrix_up = 0, matrix_down = 0;  // data.h kMatrix*
  std::vector<int64_t> experts;                             // [groups]: the global expert id whose weights group g uses
  std::vector<int64_t> offsets;                             // [groups + 1]: row offsets of the groups in x and out
  int64_t f_begin = 0, f_end = 0;
  const float* x = nullptr;                // [offsets.back(), hidden]
  float* out = nullptr;                    // [offsets.back(), hidden], overwritten
  int64_t block_bytes = int64_t{1} << 20;  // budget for one block of generated weights
};

// The arguments of a layer's routed-expert MLP (global expert ids `experts`, row offsets
// `offsets`, the slice [f_begin, f_end) of moe_intermediate) and of its shared-expert MLP
// (expert 0, the slice of shared_intermediate), with c's seed and layer: the one definition the
// ranks, the reference and the replay use. x, out and block_bytes are the caller's.
FfnArgs RoutedFfnArgs(const RunConfig& c, std::vector<int64_t> experts, std::vector<int64_t> offsets, int64_t f_begin, int64_t f_end);
FfnArgs SharedFfnArgs(const RunConfig& c, std::vector<int64_t> offsets, int64_t f_begin, int64_t f_end);

// Device scratch reused across calls.
struct FfnWorkspace {
  explicit FfnWorkspace(Device* device) : w_gate(device), w_up(device), w_down(device), h_gate(device), h_up(device) {}
  DeviceArray<float> w_gate, w_up, w_down;  // [active groups, bf, hidden]
  DeviceArray<float> h_gate, h_up;          // [rows, bf]
};

// Runs the MLP; returns the seconds spent generating weights (reported as its own phase).
double RunSwiGluFfn(ComputeOps& ops, Device& device, const FfnArgs& args, FfnWorkspace& ws);

// Rows of f per block: one expert's gate, up and down rows (3 x bf x hidden floats) and the
// [rows, bf] activations each within `block_bytes`; at least 1, at most f_count.
int64_t FfnBlockRows(int64_t f_count, int64_t hidden, int64_t rows, int64_t block_bytes);

}  // namespace dockyard::runtime
