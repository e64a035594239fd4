// Tests for group-limited routing: the sampler's bound on groups per token, its agreement with the
// dispatch matrices, and the router's group selection worked by hand.
#include "planner/routing/group_routing.h"
#include "planner/routing/routing.h"

#include <array>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "planner/base/error.h"

using dockyard::Error;
using dockyard::GroupLimit;
using dockyard::GroupLimitedSelectRow;
using dockyard::GroupLimitProblem;
using dockyard::ParseRoutingSpec;
using dockyard::PrepareRouting;
using dockyard::RoutingModel;
using dockyard::RoutingSpec;
using dockyard::SampleRouting;
using dockyard::SampleTokenExperts;

namespace {

RoutingSpec Spec(const std::string& text, uint64_t seed = 7) {
  RoutingSpec s = ParseRoutingSpec(text);
  s.seed = seed;
  return s;
}

std::string TempFile(const std::string& name, const std::string& content) {
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string path = std::string(dir ? dir : "/tmp") + "/" + name;
  std::ofstream(path) << content;
  return path;
}

// A 256-expert trace skewed toward the last groups: expert e has e + 1 tokens.
std::string SkewedTrace() {
  std::string counts;
  for (int e = 0; e < 256; ++e) counts += (e ? "," : "") + std::to_string(e + 1);
  return TempFile("group_trace.json", "{\"num_experts\": 256, \"layers\": [[" + counts + "]]}");
}

// The most groups any token of `tokens` tokens of `rank` reaches, checking each token's experts
// are distinct.
int64_t MaxGroupsPerToken(const RoutingModel& model, int64_t rank, int64_t tokens, int64_t group_size, bool* distinct) {
  const std::vector<int32_t> picks = SampleTokenExperts(model, 0, rank, tokens);
  int64_t worst = 0;
  for (int64_t t = 0; t < tokens; ++t) {
    std::set<int32_t> experts, groups;
    for (int64_t j = 0; j < model.top_k; ++j) {
      const int32_t e = picks[static_cast<size_t>(t * model.top_k + j)];
      *distinct = *distinct && experts.insert(e).second;
      groups.insert(e / static_cast<int32_t>(group_size));
    }
    worst = std::max<int64_t>(worst, static_cast<int64_t>(groups.size()));
  }
  return worst;
}

}  // namespace

TEST_CASE("group-limited sampling: no token reaches more than topk_group groups over 10^6 tokens") {
  // DeepSeek-V3 (HF config.json): 256 experts, top-8, n_group 8, topk_group 4 -> groups of 32.
  const GroupLimit limit{8, 4, true};
  for (const std::string text : {"uniform", "zipf:1.2", "hot:16:0.9", "trace"}) {
    CAPTURE(text);
    const RoutingSpec spec = text == "trace" ? Spec("trace:" + SkewedTrace()) : Spec(text);
    const RoutingModel model = PrepareRouting(spec, 256, 8, 1, limit);
    bool distinct = true;
    int64_t worst = 0;
    for (int64_t rank = 0; rank < 4; ++rank) worst = std::max(worst, MaxGroupsPerToken(model, rank, 250000, 32, &distinct));
    CHECK(distinct);
    CHECK(worst == 4);  // some token does use 4 groups (8 picks), none more
    // Without the limit tokens do reach more than 4 groups: the test can fail.
    const RoutingModel free_model = PrepareRouting(spec, 256, 8, 1);
    bool free_distinct = true;
    CHECK(MaxGroupsPerToken(free_model, 0, 10000, 32, &free_distinct) > 4);
  }
}

TEST_CASE("group-limited sampling: the matrices count the same draws as SampleTokenExperts") {
  const RoutingModel model = PrepareRouting(Spec("zipf:1.0"), 64, 6, 2, GroupLimit{8, 3, true});
  const int64_t ep = 4, T = 500;
  const auto result = SampleRouting(model, ep, T);
  for (int64_t layer = 0; layer < 2; ++layer) {
    for (int64_t r = 0; r < ep; ++r) {
      const std::vector<int32_t> picks = SampleTokenExperts(model, layer, r, T);
      std::vector<int64_t> row(ep, 0);
      for (int32_t e : picks) ++row[static_cast<size_t>(e / 16)];
      for (int64_t d = 0; d < ep; ++d) CHECK(result.layers[layer].dispatch[r * ep + d] == row[d]);
    }
    // Every row holds T * top_k = 3000 assignments.
    int64_t total = 0;
    for (int64_t v : result.layers[layer].dispatch) total += v;
    CHECK(total == ep * T * 6);
  }
}

TEST_CASE("group-limited sampling: uniform stays uniform over experts") {
  // 64 experts, top-4, 4 groups of 16, keep 2: by symmetry every expert gets 1/64 of the
  // assignments. 200000 tokens x 4 = 800000 assignments; per expert mean 12500, sd ~ sqrt(12500)
  // ~ 112 (less: without replacement); 6 sd = 670.
  const RoutingModel model = PrepareRouting(Spec("uniform"), 64, 4, 1, GroupLimit{4, 2, true});
  const auto result = SampleRouting(model, 1, 200000);
  for (int64_t count : result.layers[0].tokens_per_expert) CHECK(std::abs(count - 12500) < 670);
}

TEST_CASE("group-limited sampling: an inactive limit is the plain model") {
  const RoutingModel a = PrepareRouting(Spec("zipf:1.1"), 32, 4, 1, GroupLimit{1, 1, true});
  const RoutingModel b = PrepareRouting(Spec("zipf:1.1"), 32, 4, 1);
  CHECK(SampleTokenExperts(a, 0, 3, 100) == SampleTokenExperts(b, 0, 3, 100));
}

TEST_CASE("group limit validation names the field and the rule") {
  CHECK(GroupLimitProblem(256, 8, 8, 4).empty());
  CHECK(GroupLimitProblem(256, 8, 1, 1).empty());
  CHECK(GroupLimitProblem(256, 8, 7, 4).find("n_group (7) must be >= 1 and divide num_experts (256)") != std::string::npos);
  CHECK(GroupLimitProblem(256, 8, 8, 9).find("topk_group (9) must be in [1, n_group (8)]") != std::string::npos);
  // 1 kept group of 256/64 = 4 experts cannot hold top-8.
  CHECK(GroupLimitProblem(256, 8, 64, 1).find("hold fewer than top_k (8)") != std::string::npos);
  CHECK_THROWS_AS(PrepareRouting(Spec("uniform"), 256, 8, 1, GroupLimit{64, 1, true}), Error);
}

TEST_CASE("router group selection by hand") {
  const float inf = std::numeric_limits<float>::infinity();
  // 8 experts in 4 groups of 2, keep 2 groups.
  //   group 0: 0.9, 0.1 -> top-2 sum 1.0, max 0.9
  //   group 1: 0.5, 0.6 -> 1.1, 0.6
  //   group 2: 0.3, 0.2 -> 0.5, 0.3
  //   group 3: 0.8, 0.25 -> 1.05, 0.8
  // Top-2 sum (noaux_tc): keep groups 1 (1.1) and 3 (1.05); expert 0 (0.9, the best single
  // score) is masked. Max (group_limited_greedy): keep groups 0 (0.9) and 3 (0.8).
  const std::vector<float> row = {0.9f, 0.1f, 0.5f, 0.6f, 0.3f, 0.2f, 0.8f, 0.25f};
  std::vector<float> scratch(4);
  std::vector<float> sum_rule = row;
  GroupLimitedSelectRow(sum_rule.data(), 8, GroupLimit{4, 2, true}, scratch.data());
  CHECK(sum_rule == std::vector<float>{-inf, -inf, 0.5f, 0.6f, -inf, -inf, 0.8f, 0.25f});
  std::vector<float> max_rule = row;
  GroupLimitedSelectRow(max_rule.data(), 8, GroupLimit{4, 2, false}, scratch.data());
  CHECK(max_rule == std::vector<float>{0.9f, 0.1f, -inf, -inf, -inf, -inf, 0.8f, 0.25f});
  // Ties go to the lower group: groups 0 and 1 both sum to 1.0, keep 1 group -> group 0.
  std::vector<float> tie = {0.5f, 0.5f, 0.4f, 0.6f};
  GroupLimitedSelectRow(tie.data(), 4, GroupLimit{2, 1, true}, scratch.data());
  CHECK(tie == std::vector<float>{0.5f, 0.5f, -inf, -inf});
}

TEST_CASE("group-limited sampling: every set of kept groups is tabled once for uniform routing") {
  // C(8, 4) = 8*7*6*5 / 4! = 70 sets (DeepSeek-V3); C(64, 2) = 64*63/2 = 2016; each mask has
  // topk_group bits inside the n_group low bits, the masks strictly increase.
  for (const auto& [G, kg, count] : std::vector<std::array<int64_t, 3>>{{8, 4, 70}, {8, 3, 56}, {64, 2, 2016}, {4, 1, 4}}) {
    CAPTURE(G);
    CAPTURE(kg);
    const auto s =
        dockyard::routing_detail::BuildGroupSampler(std::vector<double>(static_cast<size_t>(G * 2), 1.0), 2, GroupLimit{G, kg, true});
    REQUIRE(static_cast<int64_t>(s.kept_sets.size()) == count);
    for (size_t i = 0; i < s.kept_sets.size(); ++i) {
      CHECK(__builtin_popcountll(s.kept_sets[i]) == kg);
      if (G < 64) CHECK((s.kept_sets[i] >> G) == 0u);
      if (i > 0) CHECK(s.kept_sets[i] > s.kept_sets[i - 1]);
    }
  }
  // The slot table of C(8, 4) over groups of 2: set 0 = groups {0, 1, 2, 3} -> experts 0..7;
  // set 69 = {4, 5, 6, 7} -> experts 8..15; set 1 = {0, 1, 2, 4} -> 0..5, 8, 9.
  const auto deepseek = dockyard::routing_detail::BuildGroupSampler(std::vector<double>(16, 1.0), 2, GroupLimit{8, 4, true});
  REQUIRE(deepseek.kept_experts.size() == 70 * 8);
  CHECK(std::vector<int32_t>(deepseek.kept_experts.begin(), deepseek.kept_experts.begin() + 8) ==
        std::vector<int32_t>{0, 1, 2, 3, 4, 5, 6, 7});
  CHECK(std::vector<int32_t>(deepseek.kept_experts.begin() + 8, deepseek.kept_experts.begin() + 16) ==
        std::vector<int32_t>{0, 1, 2, 3, 4, 5, 8, 9});
  CHECK(std::vector<int32_t>(deepseek.kept_experts.end() - 8, deepseek.kept_experts.end()) ==
        std::vector<int32_t>{8, 9, 10, 11, 12, 13, 14, 15});
  // C(32, 16) = 601080390 passes the table limit (2^16): no table, the groups are drawn one by
  // one. Weighted shares never table.
  CHECK(dockyard::routing_detail::BuildGroupSampler(std::vector<double>(64, 1.0), 4, GroupLimit{32, 16, true}).kept_sets.empty());
  CHECK(dockyard::routing_detail::BuildGroupSampler({1, 2, 3, 4, 5, 6, 7, 8}, 2, GroupLimit{4, 2, true}).kept_sets.empty());
}

TEST_CASE("group-limited sampling: uniform stays uniform without the kept-set table") {
  // 64 experts in 32 groups of 2, keep 16 (C(32, 16) is past the table: one group at a time),
  // top-4: by symmetry each expert gets 1/64 of 200000 x 4 assignments, mean 12500, 6 sd ~ 670.
  const RoutingModel model = PrepareRouting(Spec("uniform"), 64, 4, 1, GroupLimit{32, 16, true});
  const auto result = SampleRouting(model, 1, 200000);
  for (int64_t count : result.layers[0].tokens_per_expert) CHECK(std::abs(count - 12500) < 670);
  // 256 experts in 16 groups of 16, keep 8: C(16, 8) = 12870 sets are tabled as masks, but their
  // slot table (12870 x 8 x 16 = 1647360 entries) is past kMaxSlotTable: the groups come from the
  // mask. Top-8: each expert gets 1/256 of 100000 x 8 assignments, mean 3125, 6 sd ~ 335.
  const auto s = dockyard::routing_detail::BuildGroupSampler(std::vector<double>(256, 1.0), 8, GroupLimit{16, 8, true});
  CHECK(s.kept_sets.size() == 12870);
  CHECK(s.kept_experts.empty());
  const RoutingModel masks = PrepareRouting(Spec("uniform"), 256, 8, 1, GroupLimit{16, 8, true});
  const auto from_masks = SampleRouting(masks, 1, 100000);
  for (int64_t count : from_masks.layers[0].tokens_per_expert) CHECK(std::abs(count - 3125) < 335);
}

TEST_CASE("group-limited sampling: weighted draws follow the two-stage law") {
  // Trace shares 0.1, 0.3, 0.2, 0.4 over 4 experts in 2 groups of 2, keep 1 group, top-1: the
  // group comes with its summed share (0.4, 0.6), then an expert with its share inside it
  // (0.1 / 0.4 = 0.25 ...), so each expert comes out with its share: 0.1, 0.3, 0.2, 0.4 of
  // 400000 tokens. sd <= sqrt(400000 * 0.25) ~ 316; 6 sd ~ 1900.
  const std::string trace = TempFile("law_trace.json", "{\"num_experts\": 4, \"layers\": [[1, 3, 2, 4]]}");
  const RoutingModel model = PrepareRouting(Spec("trace:" + trace), 4, 1, 1, GroupLimit{2, 1, true});
  const auto result = SampleRouting(model, 1, 400000);
  const std::vector<double> share = {0.1, 0.3, 0.2, 0.4};
  for (size_t e = 0; e < 4; ++e) CHECK(std::abs(static_cast<double>(result.layers[0].tokens_per_expert[e]) - 400000 * share[e]) < 1900);
}

TEST_CASE("TokenHitStream: batches of bit-sliced hits are the stream SampleTokenExperts draws, in every draw mode") {
  // (spec, E, top_k, group limit): uniform rejection, Fisher-Yates (top_k = E - 1), zipf alias
  // draws, hot experts forced on every token, and both two-stage group-limited draws.
  struct Case {
    std::string spec;
    int64_t experts, top_k;
    GroupLimit limit;
  };
  const std::vector<Case> cases = {
      {"uniform", 64, 6, GroupLimit{}},   {"uniform", 16, 15, GroupLimit{}},           {"zipf:1.2", 64, 6, GroupLimit{}},
      {"hot:1:0.9", 32, 4, GroupLimit{}}, {"uniform", 256, 8, GroupLimit{8, 4, true}}, {"zipf:1.2", 256, 8, GroupLimit{8, 4, true}},
  };
  for (const Case& c : cases) {
    CAPTURE(c.spec);
    CAPTURE(c.top_k);
    const RoutingModel model = PrepareRouting(Spec(c.spec), c.experts, c.top_k, 2, c.limit);
    const int64_t tokens = 200;
    const std::vector<int32_t> picks = SampleTokenExperts(model, 1, 3, tokens);
    dockyard::TokenHitStream stream(model, 1, 3);
    int64_t t = 0;
    // Batches of 64, 1, 0, 63, 64 and the last 8: bit u of each batch is token t + u.
    for (int64_t batch : {64, 1, 0, 63, 64, 8}) {
      const int64_t n = std::min<int64_t>(batch, tokens - t);
      std::vector<uint64_t> hit(static_cast<size_t>(c.experts), 0);
      stream.Next(n, hit.data());
      std::vector<uint64_t> want(static_cast<size_t>(c.experts), 0);
      for (int64_t u = 0; u < n; ++u) {
        for (int64_t j = 0; j < c.top_k; ++j)
          want[static_cast<size_t>(picks[static_cast<size_t>((t + u) * c.top_k + j)])] |= uint64_t{1} << u;
      }
      CHECK(hit == want);
      t += n;
    }
    CHECK(t == tokens);
  }
  const RoutingModel model = PrepareRouting(Spec("uniform"), 16, 2, 1);
  dockyard::TokenHitStream stream(model, 0, 0);
  std::vector<uint64_t> hit(16);
  CHECK_THROWS_WITH_AS(stream.Next(65, hit.data()), "a batch of token hits holds 0 to 64 tokens, got 65", Error);
  CHECK_THROWS_WITH_AS(dockyard::TokenHitStream(model, 1, 0), "layer must be in [0, 1), got 1", Error);
}

TEST_CASE("group-limited uniform draws: DeepSeek-V3's compiled shape, the slot table and the kept-set masks draw the same experts") {
  // 256 experts in 8 groups of 32, keep 4, top-8 (128 slots of 7 bits): with the slot table the
  // draw runs the loop compiled for this shape; a copy without the table maps slots through the
  // kept-set masks in the loop for any shape. Same generator outputs, so the same experts, token
  // by token, and the same generator state after.
  struct Record {
    std::vector<uint32_t>* out;
    void BeginToken() {}
    void Pick(uint32_t e) { out->push_back(e); }
  };
  const auto table = dockyard::routing_detail::BuildGroupSampler(std::vector<double>(256, 1.0), 8, GroupLimit{8, 4, true});
  REQUIRE(!table.kept_experts.empty());
  auto masks = table;
  masks.kept_experts.clear();
  dockyard::Xoshiro256ss a(7), b(7);
  std::vector<uint32_t> from_table, from_masks;
  Record ra{&from_table}, rb{&from_masks};
  for (int64_t batch : {64, 1, 0, 37}) {
    table.Draw(a, batch, ra);
    masks.Draw(b, batch, rb);
  }
  REQUIRE(from_table.size() == 102 * 8);
  CHECK(from_table == from_masks);
  CHECK(a.Next() == b.Next());
  // Each token's 8 experts are distinct and lie in at most 4 groups of 32.
  for (size_t t = 0; t < 102; ++t) {
    std::set<uint32_t> experts(from_table.begin() + static_cast<std::ptrdiff_t>(8 * t),
                               from_table.begin() + static_cast<std::ptrdiff_t>(8 * t + 8));
    std::set<uint32_t> groups;
    for (uint32_t e : experts) groups.insert(e / 32);
    CHECK(experts.size() == 8);
    CHECK(groups.size() <= 4);
  }
}
