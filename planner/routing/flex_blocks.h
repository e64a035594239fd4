// The deepep dispatcher's token counts (deepep.h FlexCounts) for many EP groups and token counts
// at once, as a layout search asks for them.
//
// FlexCounts::rank_tokens[s][d] counts the tokens of source s with >= 1 expert among member d's
// E / n contiguous experts; node_tokens[s][j] those with >= 1 expert on node j. When every node
// holds m consecutive members (the EP group of rank 0, {0, etp, 2 etp, ...}, on nodes of a
// multiple of etp GPUs), node j's experts are the contiguous block [j m E/n, (j+1) m E/n). Both
// are then "tokens with >= 1 expert in each block of R contiguous experts", for R = E / n and
// R = m E / n. Those block counts depend on the source's own draws (SampleTokenExperts, stream
// (seed, layer, source)) and not on the group, and the first T tokens of a longer draw are a draw
// of T tokens; so each source is drawn once per layer, for the largest token count expected, and
// its block counts read at every expected token count and block size. A group's counts assembled
// from them equal SampleFlexCounts's (AddFlexTokens over the same draws) entry for entry.
//
// Cost per (layer, source): T_max * top_k draws and bit sets, then per 64 tokens one OR and one
// popcount per block of every size (bit-sliced counting, flex_blocks.cc), instead of T * top_k
// draws and lookups per (group, T) that asks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "planner/routing/flex_counts.h"
#include "planner/routing/routing.h"

namespace dockyard {

// Which token counts and block sizes the per-source counts hold.
struct FlexBlockLayout {
  int64_t num_experts = 0;
  std::vector<int64_t> token_counts;  // ascending, unique, each >= 0
  std::vector<int64_t> block_sizes;   // ascending, unique, each divides num_experts
  std::vector<int64_t> sources;       // [block_sizes] sources 0..sources[b]-1 hold size b's counts (the largest group reading it)
  std::vector<int64_t> offset;        // [block_sizes] start of size R's E / R counts within one token count's row
  int64_t row = 0;                    // sum over block sizes of E / R: the counts of one token count
  // Index of `tokens` in token_counts, -1 when absent.
  int TokenIndex(int64_t tokens) const;
  // Index of `block_size` in block_sizes, -1 when absent.
  int BlockIndex(int64_t block_size) const;
};

// One block size a group reads (FlexBlockSizes) and the group's member count.
struct FlexBlockNeed {
  int64_t block_size = 0, members = 0;
};

// Sorts and deduplicates the token counts and block sizes; a block size is counted for the sources
// of the largest group that reads it. Throws dockyard::Error for num_experts < 1, a token count < 0
// or above 2^31 - 1, a block size that does not divide num_experts, or members < 1.
FlexBlockLayout MakeFlexBlockLayout(int64_t num_experts, std::vector<int64_t> token_counts, const std::vector<FlexBlockNeed>& needs);

// The block counts of `source` in `layer`: [token_counts.size() * row], token count i's counts at
// [i * row + offset[b] + block] (block in [0, E / block_sizes[b]); zero for the sizes with
// sources[b] <= source, which no group reads). Draws
// SampleTokenExperts(model, layer, source, largest token count). Throws dockyard::Error where
// SampleTokenExperts does, or when the layout's num_experts is not the model's.
std::vector<int32_t> CountSourceBlocks(const RoutingModel& model, const FlexBlockLayout& layout, int64_t layer, int64_t source);

// m when every node of `nodes` (MakeFlexCounts) holds the same number m of consecutive members
// (node_index[i] == i / m); 0 otherwise (block counts cannot serve that group).
int64_t ConsecutiveMembersPerNode(const FlexCounts& nodes);

// Block sizes a group of n members over nodes (MakeFlexCounts) reads: {E / n, m E / n}, each with
// n members; empty when n does not divide E or ConsecutiveMembersPerNode is 0.
std::vector<FlexBlockNeed> FlexBlockSizes(int64_t num_experts, const FlexCounts& nodes);

// Whether `layout` holds the counts of the group over `nodes` of `tokens` tokens (GroupCountsAt).
bool FlexBlocksServe(const FlexBlockLayout& layout, const FlexCounts& nodes, int64_t tokens);

// Where a source's per-expert counts (block size 1) of `tokens` tokens sit within its
// CountSourceBlocks, when the layout holds them for sources 0..sources-1; -1 otherwise. They are the
// routing sample's per-rank counts (AssembleRoutingFromCounts), from the same draws.
int64_t ExpertCountsAt(const FlexBlockLayout& layout, int64_t tokens, int64_t sources);

// Where the counts of the group over `nodes` (MakeFlexCounts: node_of, node_index) of `tokens`
// tokens sit in each source's CountSourceBlocks: member d's count of source s (its
// FlexCounts::rank_tokens[s][d]) at [rank + d], node j's (node_tokens[s][j]) at [node + j].
// Throws dockyard::Error unless FlexBlocksServe.
struct FlexGroupCountsAt {
  size_t rank = 0, node = 0;
};
FlexGroupCountsAt GroupCountsAt(const FlexBlockLayout& layout, const FlexCounts& nodes, int64_t tokens);

// FlexLinksOf the group's counts (GroupCountsAt in source_counts(s), CountSourceBlocks of member
// s in the layer wanted) without forming its n x n FlexCounts: the rows per link summed straight
// from the block counts. Throws dockyard::Error unless FlexBlocksServe.
FlexLinks FlexLinksFromBlocks(const FlexBlockLayout& layout, const FlexCounts& nodes, int64_t tokens,
                              const std::function<const std::vector<int32_t>&(int64_t source)>& source_counts);

namespace flex_blocks_detail {
// One step of CountSourceBlocks' bit-sliced counting: words[w] = OR of src[w * fold .. w * fold +
// fold), counts[w] += its set bits, for w < n. The implementations this CPU runs (the portable
// one first, then popcnt and AVX-512 VPOPCNTDQ where present; CountSourceBlocks takes the last,
// chosen once at static initialization): a test checks they agree.
struct FoldCountImpl {
  const char* name;
  void (*fn)(const uint64_t* src, size_t fold, size_t n, uint64_t* words, int32_t* counts);
};
std::vector<FoldCountImpl> FoldCountImpls();
}  // namespace flex_blocks_detail

}  // namespace dockyard
