// Block counts: a hand-counted source, and groups assembled from them equal SampleFlexCounts
// (AddFlexTokens over the same draws) for several groups, node sizes, token counts and routings.
#include "planner/routing/flex_blocks.h"

#include <doctest/doctest.h>

#include <map>
#include <string>
#include <vector>

#include "planner/base/error.h"
#include "planner/routing/flex_counts.h"

using namespace dockyard;

namespace {

// The EP group of rank 0 with expert TP etp: {0, etp, 2 etp, ...}.
std::vector<int64_t> Group(int64_t ep, int64_t etp) {
  std::vector<int64_t> g;
  for (int64_t i = 0; i < ep; ++i) g.push_back(i * etp);
  return g;
}

// Per-source block counts of `layer`, computed once each (as the search cache does).
struct Sources {
  const RoutingModel& model;
  const FlexBlockLayout& layout;
  int64_t layer;
  std::map<int64_t, std::vector<int32_t>> counts;
  const std::vector<int32_t>& operator()(int64_t s) {
    auto it = counts.find(s);
    if (it == counts.end()) it = counts.emplace(s, CountSourceBlocks(model, layout, layer, s)).first;
    return it->second;
  }
};

}  // namespace

TEST_CASE("block counts of one source are its tokens with >= 1 expert per block, read at each token count") {
  const RoutingModel model = PrepareRouting(RoutingSpec{}, 8, 2, 1);
  const FlexBlockLayout layout = MakeFlexBlockLayout(8, {3, 1, 3}, {{4, 6}, {1, 6}, {2, 6}});
  REQUIRE(layout.token_counts == std::vector<int64_t>{1, 3});
  REQUIRE(layout.block_sizes == std::vector<int64_t>{1, 2, 4});
  CHECK(layout.row == 8 + 4 + 2);  // E / R for R = 1, 2, 4
  const std::vector<int32_t> experts = SampleTokenExperts(model, 0, 5, 3);
  const std::vector<int32_t> c = CountSourceBlocks(model, layout, 0, 5);
  REQUIRE(c.size() == 2 * 14);
  // Hand count from the drawn experts: token t has experts experts[2t], experts[2t+1] (distinct).
  for (int ti = 0; ti < 2; ++ti) {
    const int tokens = ti == 0 ? 1 : 3;
    for (int64_t r : {1, 2, 4}) {
      std::vector<int32_t> want(static_cast<size_t>(8 / r), 0);
      for (int t = 0; t < tokens; ++t) {
        const int32_t a = experts[2 * t] / r, b = experts[2 * t + 1] / r;
        ++want[static_cast<size_t>(a)];
        if (b != a) ++want[static_cast<size_t>(b)];
      }
      const size_t at = static_cast<size_t>(ti * 14 + layout.offset[static_cast<size_t>(layout.BlockIndex(r))]);
      CHECK(std::vector<int32_t>(c.begin() + at, c.begin() + at + want.size()) == want);
    }
  }
  // R = 1: every expert is its own block, so each token adds top_k = 2: 3 tokens -> 6 in all.
  int32_t total = 0;
  for (int e = 0; e < 8; ++e) total += c[14 + e];
  CHECK(total == 6);
  // A block size read by groups of 4 members only is not counted for source 5: zeros.
  const FlexBlockLayout some = MakeFlexBlockLayout(8, {3}, {{1, 6}, {2, 4}});
  const std::vector<int32_t> c5 = CountSourceBlocks(model, some, 0, 5);
  REQUIRE(c5.size() == 8 + 4);
  CHECK(std::vector<int32_t>(c5.begin(), c5.begin() + 8) == std::vector<int32_t>(c.begin() + 14, c.begin() + 22));  // R = 1 as above
  CHECK(std::vector<int32_t>(c5.begin() + 8, c5.end()) == std::vector<int32_t>(4, 0));
  CHECK_THROWS_WITH_AS(MakeFlexBlockLayout(8, {3}, {{1, 0}}), "flex block counts: a group must have >= 1 member, got 0", Error);
}

namespace {

// Tokens among the first `tokens` of `experts` (top_k picks each) with >= 1 pick in each block of
// R contiguous experts, counted pick by pick.
std::vector<int32_t> HandCount(const std::vector<int32_t>& experts, int64_t k, int64_t tokens, int64_t R, int64_t E) {
  std::vector<int32_t> want(static_cast<size_t>(E / R), 0);
  for (int64_t t = 0; t < tokens; ++t) {
    std::vector<bool> hit(static_cast<size_t>(E / R), false);
    for (int64_t j = 0; j < k; ++j) hit[static_cast<size_t>(experts[static_cast<size_t>(t * k + j)] / R)] = true;
    for (size_t b = 0; b < hit.size(); ++b) want[b] += hit[b];
  }
  return want;
}

}  // namespace

TEST_CASE("block counts equal a pick-by-pick count for nested and for non-nested block sizes") {
  // Nested sizes (each divides the next: 64 experts, 1 ... 64, with and without size 1) and
  // non-nested ones (12 experts: 2, 3, 4, 6, 12): the hand count of every source at every token
  // count, zeros where a size is read by fewer sources. The counts are taken 64 tokens at a time
  // (bit-sliced) and at each token count read: the last two cases read token counts at, just
  // before and just after batch ends (63, 64, 65, 128), inside a later batch (200) and past
  // several (1000).
  struct Case {
    int64_t E, k;
    std::vector<FlexBlockNeed> needs;
    std::vector<int64_t> tokens = {0, 1, 7, 50};
  };
  const std::vector<int64_t> batches = {0, 63, 64, 65, 128, 200, 1000};
  const std::vector<Case> cases = {
      {64, 6, {{1, 8}, {2, 8}, {4, 6}, {8, 4}, {16, 3}, {32, 2}, {64, 1}}},
      {64, 6, {{4, 8}, {16, 8}}},  // nested, no block size 1
      {12, 3, {{2, 6}, {3, 4}, {4, 3}, {6, 2}, {12, 1}}},
      {12, 3, {{1, 6}, {3, 6}, {4, 6}}},
      {64, 8, {{1, 4}, {2, 4}, {8, 4}, {32, 2}}, batches},
      {12, 3, {{1, 3}, {4, 3}, {6, 3}, {2, 2}}, batches},
  };
  for (const Case& c : cases) {
    for (const char* text : {"uniform", "zipf:1.2"}) {
      CAPTURE(c.E);
      CAPTURE(text);
      const RoutingModel model = PrepareRouting(ParseRoutingSpec(text), c.E, c.k, 1);
      const FlexBlockLayout layout = MakeFlexBlockLayout(c.E, c.tokens, c.needs);
      for (int64_t s = 0; s < 8; ++s) {
        CAPTURE(s);
        const std::vector<int32_t> got = CountSourceBlocks(model, layout, 0, s);
        const std::vector<int32_t> experts = SampleTokenExperts(model, 0, s, c.tokens.back());
        for (size_t ti = 0; ti < layout.token_counts.size(); ++ti) {
          for (size_t b = 0; b < layout.block_sizes.size(); ++b) {
            const int64_t R = layout.block_sizes[b];
            CAPTURE(R);
            CAPTURE(layout.token_counts[ti]);
            const size_t at = ti * static_cast<size_t>(layout.row) + static_cast<size_t>(layout.offset[b]);
            const std::vector<int32_t> want = s < layout.sources[b] ? HandCount(experts, c.k, layout.token_counts[ti], R, c.E)
                                                                    : std::vector<int32_t>(static_cast<size_t>(c.E / R), 0);
            CHECK(std::vector<int32_t>(got.begin() + static_cast<std::ptrdiff_t>(at),
                                       got.begin() + static_cast<std::ptrdiff_t>(at + want.size())) == want);
          }
        }
      }
    }
  }
}

TEST_CASE("groups assembled from block counts equal SampleFlexCounts, for every group, node size and token count") {
  for (const char* text : {"uniform", "zipf:1.2", "hot:4:0.5"}) {
    RoutingSpec spec = ParseRoutingSpec(text);
    spec.seed = 7;
    const RoutingModel model = PrepareRouting(spec, 64, 6, 2);
    const std::vector<int64_t> tokens = {0, 5, 40, 96};
    std::vector<std::pair<std::vector<int64_t>, int64_t>> groups;  // (ep group, gpus per node)
    std::vector<FlexBlockNeed> needs;
    for (int64_t ep : {2, 4, 8, 16, 32}) {
      for (int64_t etp : {1, 2, 4}) {
        for (int64_t node : {4, 8}) {
          const FlexCounts nodes = MakeFlexCounts(Group(ep, etp), node);
          const std::vector<FlexBlockNeed> s = FlexBlockSizes(64, nodes);
          REQUIRE(s.size() == 2);  // rank 0's groups on nodes of a multiple of etp GPUs qualify
          needs.insert(needs.end(), s.begin(), s.end());
          groups.push_back({Group(ep, etp), node});
        }
      }
    }
    const FlexBlockLayout layout = MakeFlexBlockLayout(64, tokens, needs);
    for (int64_t layer : {0, 1}) {
      Sources sources{model, layout, layer, {}};
      for (const auto& [group, node] : groups) {
        for (int64_t t : tokens) {
          CAPTURE(text);
          CAPTURE(group.size());
          CAPTURE(node);
          CAPTURE(t);
          const FlexCounts want = SampleFlexCounts(model, layer, group, node, t);
          // Every entry of the group's counts, read where GroupCountsAt says.
          const FlexCounts nodes = MakeFlexCounts(group, node);
          const FlexGroupCountsAt at = GroupCountsAt(layout, nodes, t);
          const int64_t n = static_cast<int64_t>(group.size());
          std::vector<int64_t> rank_tokens, node_tokens;
          for (int64_t s = 0; s < n; ++s) {
            const std::vector<int32_t>& c = sources(s);
            for (int64_t d = 0; d < n; ++d) rank_tokens.push_back(c[at.rank + static_cast<size_t>(d)]);
            for (int64_t j = 0; j < nodes.num_nodes; ++j) node_tokens.push_back(c[at.node + static_cast<size_t>(j)]);
          }
          CHECK(rank_tokens == want.rank_tokens);
          CHECK(node_tokens == want.node_tokens);
          // The links summed straight from the blocks equal those of the sampled counts.
          const FlexLinks links = FlexLinksFromBlocks(layout, MakeFlexCounts(group, node), t, std::ref(sources));
          const FlexLinks want_links = FlexLinksOf(want);
          CHECK(links.node_of == want_links.node_of);
          CHECK(links.gpus_per_node == want_links.gpus_per_node);
          CHECK(links.rows.nvlink_send == want_links.rows.nvlink_send);
          CHECK(links.rows.nvlink_recv == want_links.rows.nvlink_recv);
          CHECK(links.rows.network_send == want_links.rows.network_send);
          CHECK(links.rows.network_recv == want_links.rows.network_recv);
        }
      }
    }
  }
}

TEST_CASE("groups whose nodes do not hold consecutive members, and unknown token counts, are not served") {
  // Members on nodes 0, 1, 0, 1 (ranks 0, 8, 1, 9 on 8-GPU nodes): node 0 holds members 0 and 2.
  const FlexCounts interleaved = MakeFlexCounts({0, 8, 1, 9}, 8);
  CHECK(ConsecutiveMembersPerNode(interleaved) == 0);
  CHECK(FlexBlockSizes(64, interleaved).empty());
  // Ranks 0, 3, 6, 9 on 8-GPU nodes: 3 members on node 0, 1 on node 1 (unequal).
  CHECK(ConsecutiveMembersPerNode(MakeFlexCounts({0, 3, 6, 9}, 8)) == 0);
  // 4 members, 2 per node: blocks of 64 / 4 = 16 experts per member, 32 per node.
  const FlexCounts two = MakeFlexCounts({0, 1, 8, 9}, 8);
  CHECK(ConsecutiveMembersPerNode(two) == 2);
  const std::vector<FlexBlockNeed> needs = FlexBlockSizes(64, two);
  REQUIRE(needs.size() == 2);
  CHECK(needs[0].block_size == 16);
  CHECK(needs[1].block_size == 32);
  CHECK(needs[0].members == 4);
  const FlexBlockLayout layout = MakeFlexBlockLayout(64, {10}, needs);
  CHECK(FlexBlocksServe(layout, two, 10));
  CHECK_FALSE(FlexBlocksServe(layout, two, 11));
  CHECK_FALSE(FlexBlocksServe(layout, interleaved, 10));
  // Counts kept for the sources of a 2-member group only do not serve a 4-member group.
  CHECK_FALSE(FlexBlocksServe(MakeFlexBlockLayout(64, {10}, {{16, 2}, {32, 2}}), two, 10));
  CHECK_THROWS_WITH_AS(GroupCountsAt(layout, two, 11), "flex block counts: no counts for 11 tokens over this group of 4 members", Error);
  CHECK_THROWS_WITH_AS(FlexLinksFromBlocks(layout, two, 11, [](int64_t) -> const std::vector<int32_t>& { throw Error("unused"); }),
                       "flex block counts: no counts for 11 tokens over this group of 4 members", Error);
  CHECK_THROWS_WITH_AS(MakeFlexBlockLayout(64, {1}, {{3, 1}}), "flex block counts: block size 3 must divide num_experts (64)", Error);
  CHECK_THROWS_WITH_AS(MakeFlexBlockLayout(64, {-1}, {{1, 1}}), "flex block counts: a token count must be in [0, 2^31 - 1], got -1", Error);
}

TEST_CASE("the per-expert counts at block size 1 give the routing sample SampleRouting draws") {
  RoutingSpec spec = ParseRoutingSpec("zipf:1.2");
  spec.seed = 3;
  const RoutingModel model = PrepareRouting(spec, 32, 4, 2);
  const FlexBlockLayout layout = MakeFlexBlockLayout(32, {12, 50}, {{1, 16}, {4, 8}});
  CHECK(ExpertCountsAt(layout, 12, 16) == 0);                                   // token count 0, block size 1 first
  CHECK(ExpertCountsAt(layout, 50, 16) == layout.row);                          // the second token count's row
  CHECK(ExpertCountsAt(layout, 50, 32) == -1);                                  // counted for 16 sources only
  CHECK(ExpertCountsAt(layout, 13, 8) == -1);                                   // token count not held
  CHECK(ExpertCountsAt(MakeFlexBlockLayout(32, {12}, {{4, 8}}), 12, 8) == -1);  // no block size 1
  for (int64_t ep : {1, 4, 16}) {
    for (int64_t oep : {int64_t{1}, ep >= 4 ? int64_t{2} : int64_t{1}}) {
      for (int64_t tokens : {12, 50}) {
        CAPTURE(ep);
        CAPTURE(oep);
        CAPTURE(tokens);
        std::map<std::pair<int64_t, int64_t>, std::vector<int32_t>> blocks;
        const int64_t at = ExpertCountsAt(layout, tokens, ep);
        REQUIRE(at >= 0);
        const RoutingResult got = AssembleRoutingFromCounts(model, ep, tokens, oep, [&](int64_t layer, int64_t rank) {
          auto it = blocks.find({layer, rank});
          if (it == blocks.end()) it = blocks.emplace(std::make_pair(layer, rank), CountSourceBlocks(model, layout, layer, rank)).first;
          return it->second.data() + at;
        });
        const RoutingResult want = SampleRouting(model, ep, tokens, oep);
        REQUIRE(got.layers.size() == want.layers.size());
        for (size_t l = 0; l < want.layers.size(); ++l) {
          CHECK(got.layers[l].dispatch == want.layers[l].dispatch);
          CHECK(got.layers[l].iep_dispatch == want.layers[l].iep_dispatch);
          CHECK(got.layers[l].tokens_per_expert == want.layers[l].tokens_per_expert);
          CHECK(got.layers[l].max_received == want.layers[l].max_received);
        }
        CHECK(got.max_imbalance == want.max_imbalance);
      }
    }
  }
}

TEST_CASE("The fold-and-count step: every implementation this CPU runs equals the hand rule and the portable one") {
  using flex_blocks_detail::FoldCountImpl;
  const std::vector<FoldCountImpl> impls = flex_blocks_detail::FoldCountImpls();
  REQUIRE(impls.size() >= 1);
  CHECK(std::string(impls[0].name) == "portable");
  // Hand case, fold 2 over 4 words: {0b0011 | 0b0101, 0 | ~0} -> words {0b0111, ~0}, counts += {3, 64}.
  for (const FoldCountImpl& impl : impls) {
    CAPTURE(impl.name);
    const uint64_t src[4] = {0b0011, 0b0101, 0, ~uint64_t{0}};
    uint64_t words[2] = {9, 9};
    int32_t counts[2] = {10, 20};
    impl.fn(src, 2, 2, words, counts);
    CHECK(words[0] == 0b0111);
    CHECK(words[1] == ~uint64_t{0});
    CHECK(counts[0] == 13);
    CHECK(counts[1] == 84);
  }
  // Random words: folds 1, 2 and 4 over lengths around the 8-word vectors (tails included).
  uint64_t state = 12345;
  std::vector<uint64_t> src(4 * 37);
  for (uint64_t& x : src) x = SplitMix64(state) & SplitMix64(state);  // about 16 bits set
  for (size_t fold : {1, 2, 4}) {
    for (size_t n : {0, 1, 7, 8, 9, 16, 23, 37}) {
      CAPTURE(fold);
      CAPTURE(n);
      std::vector<uint64_t> want_words(n);
      std::vector<int32_t> want_counts(n, 5);
      impls[0].fn(src.data(), fold, n, want_words.data(), want_counts.data());
      for (size_t w = 0; w < n; ++w) {
        uint64_t x = 0;
        for (size_t c = 0; c < fold; ++c) x |= src[w * fold + c];
        CHECK(want_words[w] == x);
        CHECK(want_counts[w] == 5 + __builtin_popcountll(x));
      }
      for (const FoldCountImpl& impl : impls) {
        CAPTURE(impl.name);
        std::vector<uint64_t> words(n);
        std::vector<int32_t> counts(n, 5);
        impl.fn(src.data(), fold, n, words.data(), counts.data());
        CHECK(words == want_words);
        CHECK(counts == want_counts);
      }
    }
  }
}
