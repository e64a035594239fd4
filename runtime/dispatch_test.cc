// Dispatch index arithmetic (dispatch.h) against hand-worked examples of hyper_parallel expert_parallel.py's
// _generate_permute_indices and _generate_deredundency_dispatch_indices.
#include "runtime/dispatch.h"

#include <vector>

#include <doctest/doctest.h>

#include "planner/base/error.h"

using namespace dockyard::runtime;
using V = std::vector<int64_t>;

TEST_CASE("SortByExpert groups the (token, slot) pairs by expert, stable in slot order") {
  // 3 tokens, top_k 2: token 0 -> experts (2, 0), token 1 -> (1, 2), token 2 -> (0, 1).
  const RouteOrder o = SortByExpert({2, 0, 1, 2, 0, 1}, 3, 2);
  CHECK(o.tokens_per_expert == V{2, 2, 2});
  // Expert 0: slots 1 and 4 (tokens 0, 2); expert 1: slots 2, 5 (tokens 1, 2); expert 2: slots 0, 3.
  CHECK(o.token_of_row == V{0, 2, 1, 2, 0, 1});
  CHECK(o.row_of_slot == V{4, 0, 2, 5, 1, 3});
}

TEST_CASE("SortByExpert rejects an expert id outside [0, num_experts)") {
  CHECK_THROWS_WITH_AS(SortByExpert({0, 3}, 3, 1), doctest::Contains("picks expert 3, outside [0, 3)"), dockyard::Error);
}

TEST_CASE("SumChunks gives the rows per peer when each peer owns consecutive experts") {
  CHECK(SumChunks({1, 2, 3, 0, 0, 4}, 3, 2) == V{3, 3, 4});
  CHECK(SumChunks({}, 0, 0) == V{});
}

TEST_CASE("RankMajorToExpertMajor reproduces _generate_permute_indices") {
  // 2 ranks x 2 local experts, counts [r0e0 1, r0e1 2, r1e0 3, r1e1 0]. Rank-major buffer:
  // r0e0 = row 0, r0e1 = rows 1-2, r1e0 = rows 3-5. Expert-major: e0 = rows 0, 3, 4, 5; e1 = 1, 2.
  const PermutePlan p = RankMajorToExpertMajor({1, 2, 3, 0}, 2, 2);
  CHECK(ExpandToRowIndices(p.blocks) == V{0, 3, 4, 5, 1, 2});
  CHECK(p.tokens_per_local_expert == V{4, 2});
  CHECK(p.expert_offsets == V{0, 4, 6});
  CHECK(p.total_rows == 6);
  // Unpermute: the inverse blocks put every row back.
  const std::vector<RowBlock> inv = InverseBlocks(p.blocks);
  std::vector<int64_t> back(6, -1);
  const V fwd = ExpandToRowIndices(p.blocks);
  for (const RowBlock& b : inv) {
    for (int64_t i = 0; i < b.rows; ++i) back[static_cast<size_t>(b.dst_row + i)] = fwd[static_cast<size_t>(b.src_row + i)];
  }
  CHECK(back == V{0, 1, 2, 3, 4, 5});
}

TEST_CASE("RankMajorToExpertMajor of a rank that receives nothing is empty") {
  const PermutePlan p = RankMajorToExpertMajor({0, 0, 0, 0, 0, 0}, 3, 2);
  CHECK(p.blocks.empty());
  CHECK(p.total_rows == 0);
  CHECK(p.expert_offsets == V{0, 0, 0});
}

TEST_CASE("Permutation offsets are 64-bit: 2^30 rows per block cross 2^31 rows and 2^44 elements") {
  // Nothing is allocated: the blocks are computed from counts alone.
  const int64_t g = int64_t{1} << 30;
  const PermutePlan p = RankMajorToExpertMajor({g, g, g, g}, 2, 2);
  REQUIRE(p.blocks.size() == 4);
  // Order (e0 r0), (e0 r1), (e1 r0), (e1 r1); rank-major sources 0, 2g (r1e0), g (r0e1), 3g.
  CHECK(p.blocks[1].src_row == 2 * g);
  CHECK(p.blocks[1].dst_row == g);
  CHECK(p.blocks[2].src_row == g);
  CHECK(p.blocks[2].dst_row == 2 * g);
  CHECK(p.blocks[3].src_row == 3 * g);
  CHECK(p.total_rows == 4 * g);  // 2^32 rows
  // Element offset of the last block at DeepSeek-V3's hidden size: 3 * 2^30 * 7168 > 2^44.
  CHECK(p.blocks[3].dst_row * 7168 == int64_t{23089744183296});
  CHECK(p.expert_offsets[2] == 4 * g);
}

TEST_CASE("DeredundencyDispatchBlocks reproduces _generate_deredundency_dispatch_indices") {
  // oep 2 sources, 4 experts, iep 2, 1 local expert. Source 0 routes [1, 0, 2, 1] rows to
  // experts 0..3 (gathered rows 0..3: e0 = 0, e2 = 1-2, e3 = 3); source 1 routes [0, 2, 1, 1]
  // (rows 4..7: e1 = 4-5, e2 = 6, e3 = 7).
  const V counts = {1, 0, 2, 1, 0, 2, 1, 1};
  // Outer index 1 serves experts 2, 3: order [dest j, local expert, source] = e2 s0, e2 s1, e3 s0, e3 s1.
  const DeredundencyPlan p1 = DeredundencyDispatchBlocks(counts, 2, 4, 2, 2, 1);
  CHECK(ExpandToRowIndices(p1.blocks) == V{1, 2, 6, 3, 7});
  CHECK(p1.counts_by_destination_expert == V{3, 2});
  CHECK(p1.source_totals == V{4, 4});
  // Outer index 0 serves experts 0, 1: e0 s0 = row 0, e1 s1 = rows 4-5.
  const DeredundencyPlan p0 = DeredundencyDispatchBlocks(counts, 2, 4, 0, 2, 1);
  CHECK(ExpandToRowIndices(p0.blocks) == V{0, 4, 5});
  CHECK(p0.counts_by_destination_expert == V{1, 2});
}

TEST_CASE("DeredundencyDispatchBlocks with oep 1 is the plain all-to-all send order") {
  // One source, 4 experts, iep 4: every expert's rows in expert order.
  const DeredundencyPlan p = DeredundencyDispatchBlocks({2, 0, 1, 3}, 1, 4, 0, 4, 1);
  CHECK(ExpandToRowIndices(p.blocks) == V{0, 1, 2, 3, 4, 5});
  CHECK(p.counts_by_destination_expert == V{2, 0, 1, 3});
}

TEST_CASE("DeredundencyDispatchBlocks rejects an outer range beyond num_experts") {
  CHECK_THROWS_AS(DeredundencyDispatchBlocks({1, 1, 1, 1}, 1, 4, 2, 2, 2), dockyard::Error);
}
