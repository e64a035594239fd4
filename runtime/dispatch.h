// Host-side index arithmetic of token dispatch: the local sort of routed (token, slot) pairs by
// expert, split sizes, and the permutations of hyper_parallel expert_parallel.py (AllToAllTokenDispatcher's
// _generate_permute_indices, DeredundencyTokenDispatcher's _generate_deredundency_dispatch_indices)
// expressed as row blocks (backend.h RowBlock) instead of one index per token: O(ranks x
// experts) entries, int64 offsets, and the same order as the seed's index tensors
// (ExpandToRowIndices gives those back).
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/backend.h"

namespace dockyard::runtime {

// The routed buffer of one rank: its T * top_k (token, slot) pairs sorted by expert, stable in
// slot order (torchtitan's token reorderer; a counting sort).
struct RouteOrder {
  std::vector<int64_t> tokens_per_expert;  // [num_experts]
  std::vector<int64_t> token_of_row;       // [T * top_k]: routed row -> token (a GatherRows index)
  std::vector<int64_t> row_of_slot;        // [T * top_k]: slot t * top_k + j -> routed row
};
// expert_of_slot [T * top_k], every entry in [0, num_experts) (throws dockyard::Error otherwise).
RouteOrder SortByExpert(const std::vector<int64_t>& expert_of_slot, int64_t num_experts, int64_t top_k);

// out[p] = sum of counts[p * chunk, (p + 1) * chunk) for p < peers: rows per peer when each peer
// owns `chunk` consecutive experts (input / output splits of the all-to-all).
std::vector<int64_t> SumChunks(const std::vector<int64_t>& counts, int64_t peers, int64_t chunk);

// Rank-major -> expert-major (hyper_parallel _generate_permute_indices). counts [num_ranks *
// experts_per_rank]: entry r * experts_per_rank + e is the number of rows received from rank r
// for local expert e, laid out rank-major in the receive buffer. Blocks copy the receive buffer
// (src) into expert-major order (dst), one block per (e, r) in that order.
struct PermutePlan {
  std::vector<RowBlock> blocks;
  std::vector<int64_t> tokens_per_local_expert;  // [experts_per_rank]
  std::vector<int64_t> expert_offsets;           // [experts_per_rank + 1]: exclusive prefix sums
  int64_t total_rows = 0;
};
PermutePlan RankMajorToExpertMajor(const std::vector<int64_t>& counts, int64_t num_ranks, int64_t experts_per_rank);

// The blocks with source and destination swapped (unpermute).
std::vector<RowBlock> InverseBlocks(const std::vector<RowBlock>& blocks);

// One index per destination row: indices[dst] = src (the seed's permuted_indices; for tests and
// for backends that gather by index).
std::vector<int64_t> ExpandToRowIndices(const std::vector<RowBlock>& blocks);

// Deredundency dispatch (hyper_parallel _generate_deredundency_dispatch_indices). gathered_counts
// [oep * num_experts] holds every oep source's tokens per expert; the gathered buffer is the
// sources' expert-sorted routed buffers, concatenated in source order. This rank (outer index o)
// serves the experts [expert_start, expert_start + iep * experts_per_rank). Blocks copy the rows
// of those experts from the gathered buffer into an outer buffer ordered
// [iep destination, local expert, oep source].
struct DeredundencyPlan {
  std::vector<RowBlock> blocks;
  std::vector<int64_t> counts_by_destination_expert;  // [iep * experts_per_rank]
  std::vector<int64_t> source_totals;                 // [oep]: rows each source contributed
  int64_t total_rows = 0;
};
DeredundencyPlan DeredundencyDispatchBlocks(const std::vector<int64_t>& gathered_counts, int64_t oep, int64_t num_experts,
                                            int64_t expert_start, int64_t iep, int64_t experts_per_rank);

}  // namespace dockyard::runtime
