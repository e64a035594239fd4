// The single-process fp32 reference of one MoE layer over every token of every source, from
// the same seeds as the ranks (runtime/data.h). It shares no dispatch, ownership or slicing
// logic with the ranks: it routes each source's tokens, groups ALL token-expert pairs by
// global expert, runs each expert over the full intermediate dim, and sums each token's
// top-k outputs in slot order, plus the unsharded shared experts. Only the router arithmetic
// is deliberately the same op sequence as the ranks' (the CPU GEMM gives every element the same
// fp32 operations in any batch), so both pick the same top-k even at near-ties.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/config.h"

namespace dockyard::runtime {

struct ReferenceOutput {
  std::vector<int64_t> sources;             // = config.sources
  std::vector<std::vector<float>> outputs;  // per source [tokens, hidden]
  std::vector<int64_t> tokens_per_expert;   // [num_experts] over all sources
};

// `threads` <= 0: std::thread::hardware_concurrency().
ReferenceOutput ComputeReference(const RunConfig& config, int threads);

}  // namespace dockyard::runtime
