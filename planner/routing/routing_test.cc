// Tests for the routing model: expected values come from hand arithmetic, or from statistics
// with the standard deviation stated next to the check (every check sits at >= 5 sd, and the
// seeds are fixed, so a pass is deterministic).
#include "planner/routing/routing.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "planner/base/error.h"

using dockyard::Error;
using dockyard::ParseRoutingSpec;
using dockyard::RoutingKind;
using dockyard::RoutingResult;
using dockyard::RoutingSpec;
using dockyard::SampleRouting;

namespace {

RoutingSpec Spec(const std::string& text, uint64_t seed = 1) {
  RoutingSpec s = ParseRoutingSpec(text);
  s.seed = seed;
  return s;
}

// doctest::Contains of a std::string (doctest::String copies the text).
doctest::Contains Has(const std::string& text) {
  return doctest::Contains(text.c_str());
}

int64_t Sum(const std::vector<int64_t>& v) {
  return std::accumulate(v.begin(), v.end(), int64_t{0});
}

std::string TempFile(const std::string& name, const std::string& content) {
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string path = std::string(dir ? dir : "/tmp") + "/" + name;
  std::ofstream(path) << content;
  return path;
}

// Counts the experts SampleTokenExperts picks into a dispatch row; checks each token's picks
// are distinct and in range.
std::vector<int64_t> CountedRow(const dockyard::RoutingModel& model, int64_t layer, int64_t rank, int64_t tokens, int64_t ep) {
  const std::vector<int32_t> picks = dockyard::SampleTokenExperts(model, layer, rank, tokens);
  REQUIRE(static_cast<int64_t>(picks.size()) == tokens * model.top_k);
  std::vector<int64_t> row(static_cast<size_t>(ep), 0);
  const int64_t local = model.num_experts / ep;
  bool distinct = true, in_range = true;
  for (int64_t t = 0; t < tokens; ++t) {
    std::set<int32_t> seen;
    for (int64_t i = 0; i < model.top_k; ++i) {
      const int32_t e = picks[static_cast<size_t>(t * model.top_k + i)];
      in_range = in_range && e >= 0 && e < model.num_experts;
      distinct = distinct && seen.insert(e).second;
      if (e >= 0 && e < model.num_experts) ++row[static_cast<size_t>(e / local)];
    }
  }
  CHECK(distinct);
  CHECK(in_range);
  return row;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Random numbers.

TEST_CASE("splitmix64 and xoshiro256** match their published reference outputs") {
  uint64_t state = 0;
  CHECK(dockyard::SplitMix64(state) == 0xe220a8397b1dcdafULL);
  // xoshiro256** from state {1, 2, 3, 4}: rotl(2 * 5, 7) * 9 = 1280 * 9 = 11520; then s[1] becomes
  // 2 ^ 2 = 0, so the second output is 0; the third is rotl(262149 * 5, 7) * 9 = 1509978240.
  dockyard::Xoshiro256ss rng(1, 2, 3, 4);
  CHECK(rng.Next() == 11520);
  CHECK(rng.Next() == 0);
  CHECK(rng.Next() == 1509978240);
}

TEST_CASE("Streams of different layers and ranks differ, the same stream repeats") {
  auto first = [](uint64_t seed, uint64_t layer, uint64_t rank) { return dockyard::Xoshiro256ss::ForStream(seed, layer, rank).Next(); };
  CHECK(first(5, 0, 0) == first(5, 0, 0));
  CHECK(first(5, 0, 0) != first(5, 0, 1));
  CHECK(first(5, 0, 0) != first(5, 1, 0));
  CHECK(first(5, 1, 0) != first(5, 0, 1));  // (layer, rank) is not symmetric
  CHECK(first(5, 0, 0) != first(6, 0, 0));
}

// ---------------------------------------------------------------------------------------------
// Spec text.

TEST_CASE("ParseRoutingSpec reads every form and RoutingSpecText writes it back") {
  CHECK(ParseRoutingSpec("uniform").kind == RoutingKind::kUniform);
  RoutingSpec z = ParseRoutingSpec("zipf:1.2");
  CHECK(z.kind == RoutingKind::kZipf);
  CHECK(z.zipf_s == 1.2);
  CHECK(z.zipf_shuffle);
  CHECK_FALSE(ParseRoutingSpec("zipf:0:noshuffle").zipf_shuffle);
  RoutingSpec h = ParseRoutingSpec("hot:4:0.5");
  CHECK(h.kind == RoutingKind::kHot);
  CHECK(h.hot_experts == 4);
  CHECK(h.hot_fraction == 0.5);
  RoutingSpec t = ParseRoutingSpec("trace:/data/run:7/trace.json");  // the path may contain ':'
  CHECK(t.kind == RoutingKind::kTrace);
  CHECK(t.trace_path == "/data/run:7/trace.json");
  for (const char* text : {"uniform", "zipf:1.2", "zipf:0.5:noshuffle", "hot:4:0.5", "trace:a/b.csv"}) {
    CHECK(dockyard::RoutingSpecText(ParseRoutingSpec(text)) == text);
  }
}

TEST_CASE("ParseRoutingSpec rejects an empty text") {
  CHECK_THROWS_WITH_AS(ParseRoutingSpec(""), doctest::Contains("routing spec is empty"), Error);
}

TEST_CASE("ParseRoutingSpec rejects an unknown kind and suggests the closest") {
  CHECK_THROWS_WITH_AS(ParseRoutingSpec("zipff:1"),
                       doctest::Contains("routing spec 'zipff:1': unknown kind 'zipff'; expected uniform, zipf:S, hot:H:F or "
                                         "trace:PATH; did you mean 'zipf'?"),
                       Error);
}

TEST_CASE("ParseRoutingSpec rejects a Zipf exponent that is not a number") {
  CHECK_THROWS_WITH_AS(ParseRoutingSpec("zipf:abc"),
                       doctest::Contains("routing spec 'zipf:abc': Zipf exponent 'abc' is not a finite number"), Error);
}

TEST_CASE("ParseRoutingSpec rejects an infinite or NaN Zipf exponent") {
  CHECK_THROWS_AS(ParseRoutingSpec("zipf:inf"), Error);
  CHECK_THROWS_AS(ParseRoutingSpec("zipf:nan"), Error);
  CHECK_THROWS_WITH_AS(ParseRoutingSpec("zipf:1e999"), doctest::Contains("Zipf exponent '1e999' is not a finite number"), Error);
}

TEST_CASE("ParseRoutingSpec rejects a negative Zipf exponent") {
  CHECK_THROWS_WITH_AS(ParseRoutingSpec("zipf:-0.5"), doctest::Contains("routing spec 'zipf:-0.5': Zipf exponent must be >= 0, got -0.5"),
                       Error);
}

TEST_CASE("ParseRoutingSpec rejects an unknown Zipf option") {
  CHECK_THROWS_WITH_AS(ParseRoutingSpec("zipf:1:sorted"), doctest::Contains("unknown Zipf option 'sorted' (expected shuffle or noshuffle)"),
                       Error);
}

TEST_CASE("ParseRoutingSpec rejects hot without a fraction") {
  CHECK_THROWS_WITH_AS(ParseRoutingSpec("hot:4"), doctest::Contains("routing spec 'hot:4': expected hot:H:F"), Error);
}

TEST_CASE("ParseRoutingSpec rejects a hot expert count that is not an integer") {
  CHECK_THROWS_WITH_AS(ParseRoutingSpec("hot:2.5:0.5"), doctest::Contains("hot expert count '2.5' is not an integer"), Error);
}

TEST_CASE("ParseRoutingSpec rejects a hot fraction outside [0, 1]") {
  CHECK_THROWS_WITH_AS(ParseRoutingSpec("hot:4:1.5"),
                       doctest::Contains("routing spec 'hot:4:1.5': hot fraction must be in [0, 1], got 1.5"), Error);
}

TEST_CASE("ParseRoutingSpec rejects a trace without a path") {
  CHECK_THROWS_WITH_AS(ParseRoutingSpec("trace:"), doctest::Contains("routing spec 'trace:': the trace path is empty"), Error);
}

TEST_CASE("ParseRoutingSpec rejects parameters on uniform") {
  CHECK_THROWS_WITH_AS(ParseRoutingSpec("uniform:2"), doctest::Contains("uniform takes no parameters"), Error);
}

// ---------------------------------------------------------------------------------------------
// Uniform routing.

TEST_CASE("Uniform routing gives balanced dispatch matrices within sampling error") {
  // E = 64, top_k 4, ep 8 (8 experts per rank), T = 20000 tokens per rank.
  // A cell src -> dst counts, over T tokens, how many of the token's 4 distinct experts sit on
  // dst: hypergeometric (64 experts, 8 on dst, 4 drawn), mean 4 * 8/64 = 0.5, variance
  // 4 * (1/8) * (7/8) * (60/63) = 0.41667. Cell: mean 10000, sd sqrt(20000 * 0.41667) = 91.3
  // (the binomial approximation sqrt(80000 * 1/8 * 7/8) = 93.5). Checked at 5 sd: +-460.
  // Received: 8 independent cells, sd sqrt(8) * 91.3 = 258; at 5 sd +-1300 around 80000, so the
  // imbalance is below 81300 / 80000 = 1.0163.
  // Per expert: inclusion 4/64 per token over 8 * 20000 tokens, mean 10000, sd
  // sqrt(160000 * 1/16 * 15/16) = 96.8; at 5 sd +-490.
  const RoutingResult r = SampleRouting(Spec("uniform"), 64, 4, 8, 20000, 1);
  REQUIRE(r.layers.size() == 1);
  const auto& L = r.layers[0];
  for (int64_t cell : L.dispatch) CHECK(std::abs(cell - 10000) < 460);
  for (int64_t recv : L.received) CHECK(std::abs(recv - 80000) < 1300);
  for (int64_t count : L.tokens_per_expert) CHECK(std::abs(count - 10000) < 490);
  CHECK(L.mean_received == 80000.0);
  CHECK(L.imbalance >= 1.0);
  CHECK(L.imbalance < 1.0163);
  CHECK(r.max_imbalance == L.imbalance);
  for (double share : L.expected_share) CHECK(share == doctest::Approx(1.0 / 64));
}

TEST_CASE("Every token gets top_k distinct experts and the totals add up") {
  const int64_t T = 3000, ep = 4, k = 6, E = 32;
  const RoutingResult r = SampleRouting(Spec("uniform"), E, k, ep, T, 2);
  CHECK(r.assignments == T * ep * k * 2);
  for (const auto& L : r.layers) {
    CHECK(Sum(L.tokens_per_expert) == T * ep * k);
    CHECK(Sum(L.dispatch) == T * ep * k);
    CHECK(Sum(L.received) == T * ep * k);
    CHECK(L.rows_per_local_expert == L.tokens_per_expert);  // contiguous ownership
    for (int64_t src = 0; src < ep; ++src) {                // each source sends its T * k assignments
      int64_t row = 0;
      for (int64_t dst = 0; dst < ep; ++dst) row += L.dispatch[static_cast<size_t>(src * ep + dst)];
      CHECK(row == T * k);
    }
    // Distinct experts: no expert can take more than one assignment per token.
    for (int64_t count : L.tokens_per_expert) CHECK(count <= T * ep);
  }
  // Token by token, for every draw method: uniform with rejection (2k <= E), uniform partial
  // Fisher-Yates (2k > E), weighted alias draws, and forced experts plus weighted draws.
  for (const auto& item : std::vector<std::pair<std::string, int64_t>>{
           {"uniform", 6}, {"uniform", 27}, {"zipf:0.8", 6}, {"zipf:2:noshuffle", 6}, {"hot:3:0.6", 5}}) {
    const std::string text = item.first;
    const int64_t topk = item.second;
    CAPTURE(text);
    const dockyard::RoutingModel model = dockyard::PrepareRouting(Spec(text), E, topk, 2);
    const RoutingResult sampled = SampleRouting(model, ep, 500, 1);
    for (int64_t layer = 0; layer < 2; ++layer) {
      for (int64_t rank = 0; rank < ep; ++rank) {
        // SampleTokenExperts draws the same stream as SampleRouting: its counts are the row.
        const std::vector<int64_t> row = CountedRow(model, layer, rank, 500, ep);
        const auto& d = sampled.layers[static_cast<size_t>(layer)].dispatch;
        CHECK(std::vector<int64_t>(d.begin() + rank * ep, d.begin() + (rank + 1) * ep) == row);
      }
    }
  }
}

TEST_CASE("top_k = num_experts picks every expert once per token without per-token work") {
  // Every expert is forced, so nothing is drawn: 10^9 tokens per rank cost O(E) per rank. Each
  // expert gets T from each of the 8 sources; each cell T * 8 local experts; imbalance exactly 1.
  const int64_t T = 1000000000;
  const RoutingResult r = SampleRouting(Spec("uniform"), 64, 64, 8, T, 3);
  for (const auto& L : r.layers) {
    for (int64_t count : L.tokens_per_expert) CHECK(count == 8 * T);
    for (int64_t cell : L.dispatch) CHECK(cell == 8 * T);
    CHECK(L.max_received == 64 * T);
    CHECK(L.imbalance == 1.0);
  }
  CHECK(r.assignments == T * 8 * 64 * 3);
  CHECK(r.max_imbalance == 1.0);
}

TEST_CASE("top_k = num_experts - 1 uses Fisher-Yates draws: every expert misses 1/E of the tokens") {
  // Inclusion 63/64 per token over 4 * 10000 tokens: mean 39375, sd sqrt(40000 * 63/64 * 1/64)
  // = 24.8; at 5 sd +-125.
  const RoutingResult r = SampleRouting(Spec("uniform"), 64, 63, 4, 10000, 1);
  for (int64_t count : r.layers[0].tokens_per_expert) CHECK(std::abs(count - 39375) < 125);
  const dockyard::RoutingModel model = dockyard::PrepareRouting(Spec("uniform"), 64, 63, 1);
  CountedRow(model, 0, 0, 2000, 4);
}

// ---------------------------------------------------------------------------------------------
// Zipf.

TEST_CASE("Zipf without shuffle: expert 0's share over expert 1's share is 2^s") {
  // E = 64, top_k 2, 4 ranks of 50000 tokens: 200000 tokens, 400000 assignments.
  // s = 1: shares 1/(e+1) / H_64 with H_64 = 4.743891: expert 0 0.210797 (inclusion 0.4216 < 1,
  // not capped), expert 1 0.105399. Counts ~84319 (sd sqrt(200000 * 0.4216 * 0.5784) = 221,
  // 0.26%) and ~42160 (sd 182, 0.43%): the ratio has sd ~0.5%; checked at 2.5%.
  // s = 1.5: zeta_64(1.5) = 2.363348, expert 0 0.423129 (inclusion 0.846), expert 1 0.149599;
  // ratio 2^1.5 = 2.828, sd ~0.4%; checked at 2.5%.
  for (double s : {1.0, 1.5}) {
    CAPTURE(s);
    RoutingSpec spec = Spec("zipf:1:noshuffle");
    spec.zipf_s = s;
    const RoutingResult r = SampleRouting(spec, 64, 2, 4, 50000, 1);
    const auto& L = r.layers[0];
    const double ratio = static_cast<double>(L.tokens_per_expert[0]) / static_cast<double>(L.tokens_per_expert[1]);
    CHECK(ratio == doctest::Approx(std::pow(2.0, s)).epsilon(0.025));
    CHECK(L.expected_share[0] / L.expected_share[1] == doctest::Approx(std::pow(2.0, s)));
    CHECK(L.expected_share[0] == doctest::Approx(s == 1.0 ? 0.210797 : 0.423129).epsilon(1e-5));
    // Every expert within 5 sd of its expected count (binomial over 200000 tokens).
    for (size_t e = 0; e < 64; ++e) {
      const double inclusion = 2 * L.expected_share[e];
      const double mean = 200000 * inclusion, sd = std::sqrt(200000 * inclusion * (1 - inclusion));
      CHECK(std::fabs(static_cast<double>(L.tokens_per_expert[e]) - mean) < 5 * sd + 1);
    }
  }
}

TEST_CASE("Zipf with exponent 0 is uniform in expectation") {
  // Shares exactly 1/32; per expert: inclusion 4/32 over 4 * 20000 tokens, mean 10000, sd
  // sqrt(80000 * 1/8 * 7/8) = 93.5; at 5 sd +-470.
  const RoutingResult r = SampleRouting(Spec("zipf:0"), 32, 4, 4, 20000, 1);
  for (double share : r.layers[0].expected_share) CHECK(share == 1.0 / 32);
  for (int64_t count : r.layers[0].tokens_per_expert) CHECK(std::abs(count - 10000) < 470);
}

TEST_CASE("An expert whose Zipf share exceeds one pick per token is picked by every token") {
  // E = 16, top_k 4, s = 3, no shuffle. zeta_16(3) = 1.200222. Expert 0 would need
  // 4 / 1.200222 = 3.33 picks per token: capped at 1; the other 3 picks spread as c/(e+1)^3 with
  // c = 3 / 0.200222 = 14.98, so expert 1 would need 14.98 / 8 = 1.87: capped too; then
  // c = 2 / (0.200222 - 0.125) = 26.588, expert 2 gets 26.588 / 27 = 0.9847 < 1 (not capped) and
  // expert 3 26.588 / 64 = 0.4154.
  const int64_t T = 20000, ep = 4;
  const RoutingResult r = SampleRouting(Spec("zipf:3:noshuffle"), 16, 4, ep, T, 1);
  const auto& L = r.layers[0];
  CHECK(L.tokens_per_expert[0] == T * ep);
  CHECK(L.tokens_per_expert[1] == T * ep);
  CHECK(L.expected_share[0] == 0.25);
  CHECK(L.expected_share[2] * 4 == doctest::Approx(0.98474).epsilon(1e-4));
  CHECK(L.expected_share[3] * 4 == doctest::Approx(0.41544).epsilon(1e-4));
  // Expert 2: inclusion 0.98474 over 80000 tokens: mean 78779, sd sqrt(80000 * .98474 * .01526)
  // = 34.7; expert 3: mean 33235, sd 139.4. Checked at 5 sd.
  CHECK(std::abs(L.tokens_per_expert[2] - 78779) < 175);
  CHECK(std::abs(L.tokens_per_expert[3] - 33235) < 700);
  // Experts 0-3 live on rank 0, which therefore receives most of the assignments.
  CHECK(L.imbalance > 2.5);
}

TEST_CASE("Zipf shuffle spreads the hot experts with a per-layer seeded permutation") {
  const RoutingResult plain = SampleRouting(Spec("zipf:1.2:noshuffle"), 64, 4, 8, 200, 3);
  const RoutingResult shuffled = SampleRouting(Spec("zipf:1.2"), 64, 4, 8, 200, 3);
  std::vector<int64_t> hottest;
  for (const auto& L : shuffled.layers) {
    // Same shares, permuted.
    std::vector<double> a = L.expected_share, b = plain.layers[0].expected_share;
    std::sort(a.begin(), a.end());
    std::sort(b.begin(), b.end());
    CHECK(a == b);
    hottest.push_back(std::max_element(L.expected_share.begin(), L.expected_share.end()) - L.expected_share.begin());
  }
  // Three layers, three independent permutations of 64 experts: distinct permutations.
  CHECK(shuffled.layers[0].expected_share != shuffled.layers[1].expected_share);
  CHECK(shuffled.layers[1].expected_share != shuffled.layers[2].expected_share);
  // Without the shuffle expert 0 is the hottest on every layer.
  for (const auto& L : plain.layers) CHECK(std::max_element(L.expected_share.begin(), L.expected_share.end()) == L.expected_share.begin());
  // The permutation depends on the seed only: the same seed gives the same one.
  const RoutingResult again = SampleRouting(Spec("zipf:1.2"), 64, 4, 8, 10, 3);
  for (size_t l = 0; l < 3; ++l) CHECK(again.layers[l].expected_share == shuffled.layers[l].expected_share);
}

// ---------------------------------------------------------------------------------------------
// Hot experts.

TEST_CASE("Hot experts receive fraction F of the assignments") {
  // E = 64, top_k 4, hot:4:0.5: each hot expert 0.125 of the assignments (inclusion 0.5), each
  // cold one 0.5/60. 8 ranks of 10000 tokens: 320000 assignments, 160000 to hot experts. The
  // number of hot picks of one token is a sum of 4 negatively correlated Bernoulli(0.5), so its
  // variance is at most 1: sd of the hot total <= sqrt(80000) = 283 (0.18%); checked at 0.5%.
  // Per hot expert: mean 40000, sd sqrt(80000 * 0.25) = 141; at 5 sd +-710.
  const RoutingResult r = SampleRouting(Spec("hot:4:0.5"), 64, 4, 8, 10000, 1);
  const auto& L = r.layers[0];
  int64_t hot = 0;
  for (int e = 0; e < 4; ++e) {
    hot += L.tokens_per_expert[e];
    CHECK(std::abs(L.tokens_per_expert[e] - 40000) < 710);
    CHECK(L.expected_share[e] == doctest::Approx(0.125));
  }
  CHECK(static_cast<double>(hot) / 320000.0 == doctest::Approx(0.5).epsilon(0.005));
  CHECK(L.expected_share[10] == doctest::Approx(0.5 / 60));
  // The hot experts are 0-3, all on rank 0: it receives ~160000 + 4 * 0.5/60 * 320000 = 170667
  // of the 40000 mean: imbalance ~4.27.
  CHECK(L.imbalance == doctest::Approx(170667.0 / 40000.0).epsilon(0.01));
}

TEST_CASE("A hot fraction beyond one pick per token is capped at every token") {
  // hot:2:0.9 with top_k 4: each hot expert would need 0.45 of the assignments, but one token
  // picks an expert at most once (0.25): both are picked by every token, hot fraction 2/4.
  const RoutingResult r = SampleRouting(Spec("hot:2:0.9"), 16, 4, 2, 5000, 1);
  const auto& L = r.layers[0];
  CHECK(L.tokens_per_expert[0] == 10000);
  CHECK(L.tokens_per_expert[1] == 10000);
  CHECK(L.expected_share[0] == 0.25);
  CHECK(L.expected_share[5] == doctest::Approx(0.5 / 14));
}

// ---------------------------------------------------------------------------------------------
// Traces.

TEST_CASE("A JSON trace reproduces its per-layer proportions") {
  // testdata/routing/tiny_trace.json: layer 0 shares .40 .20 .10 .10 .08 .06 .04 .02 (of 1000),
  // layer 1 reversed; top_k 2 (no share above 1/2, nothing capped). 4 ranks of 50000 tokens:
  // 400000 assignments; expert e: inclusion 2 * share over 200000 tokens, checked at 5 sd.
  const RoutingResult r = SampleRouting(Spec("trace:testdata/routing/tiny_trace.json"), 8, 2, 4, 50000, 2);
  const std::vector<double> shares = {.40, .20, .10, .10, .08, .06, .04, .02};
  for (size_t l = 0; l < 2; ++l) {
    for (size_t e = 0; e < 8; ++e) {
      const double share = l == 0 ? shares[e] : shares[7 - e];
      CHECK(r.layers[l].expected_share[e] == doctest::Approx(share));
      const double inclusion = 2 * share, sd = std::sqrt(200000 * inclusion * (1 - inclusion));
      CHECK(std::fabs(static_cast<double>(r.layers[l].tokens_per_expert[e]) - 400000 * share) < 5 * sd);
    }
  }
}

TEST_CASE("A CSV trace routes exactly like the same JSON trace") {
  // tiny_trace.csv holds the rows of tiny_trace.json in shuffled order.
  const RoutingResult a = SampleRouting(Spec("trace:testdata/routing/tiny_trace.json"), 8, 2, 4, 1000, 2);
  const RoutingResult b = SampleRouting(Spec("trace:testdata/routing/tiny_trace.csv"), 8, 2, 4, 1000, 2);
  for (size_t l = 0; l < 2; ++l) {
    CHECK(a.layers[l].tokens_per_expert == b.layers[l].tokens_per_expert);
    CHECK(a.layers[l].dispatch == b.layers[l].dispatch);
  }
  const dockyard::RoutingTrace trace = dockyard::LoadRoutingTrace("testdata/routing/tiny_trace.csv");
  CHECK(trace.num_experts == 8);
  CHECK(trace.layers == std::vector<std::vector<int64_t>>{{400, 200, 100, 100, 80, 60, 40, 20}, {20, 40, 60, 80, 100, 100, 200, 400}});
}

TEST_CASE("A one-layer trace is broadcast to every MoE layer") {
  // broadcast_trace.json: experts 0 and 1 each 250 of 1000 assignments.
  const RoutingResult r = SampleRouting(Spec("trace:testdata/routing/broadcast_trace.json"), 8, 2, 2, 2000, 3);
  REQUIRE(r.layers.size() == 3);
  for (const auto& L : r.layers) CHECK(L.expected_share == r.layers[0].expected_share);
  CHECK(r.layers[0].expected_share[0] == doctest::Approx(0.25));
  CHECK(r.layers[0].tokens_per_expert != r.layers[1].tokens_per_expert);  // independent streams per layer
}

TEST_CASE("A trace with another expert count than the model is an error") {
  CHECK_THROWS_WITH_AS(SampleRouting(Spec("trace:testdata/routing/tiny_trace.json"), 16, 2, 4, 10, 2),
                       doctest::Contains("testdata/routing/tiny_trace.json: the trace has 8 experts, the model has 16 (num_experts)"),
                       Error);
}

TEST_CASE("A trace with fewer layers than MoE layers (and not one) is an error") {
  CHECK_THROWS_WITH_AS(SampleRouting(Spec("trace:testdata/routing/tiny_trace.json"), 8, 2, 4, 10, 3),
                       doctest::Contains("the trace has 2 layers; expected 3 (one per MoE layer) or 1 (broadcast to all layers)"), Error);
}

TEST_CASE("A negative token count in a JSON trace names its pointer") {
  CHECK_THROWS_WITH_AS(dockyard::LoadRoutingTrace("testdata/routing/invalid_negative_count.json"),
                       doctest::Contains("testdata/routing/invalid_negative_count.json: /layers/1/3: token count must be >= 0, got -5"),
                       Error);
}

TEST_CASE("A fractional token count in a JSON trace is an error") {
  const std::string path = TempFile("fractional.json", R"({"num_experts": 4, "layers": [[1, 2, 2.5, 1]]})");
  CHECK_THROWS_WITH_AS(dockyard::LoadRoutingTrace(path), Has(path + ": /layers/0/2: token count must be an integer >= 0, got 2.5"), Error);
}

TEST_CASE("A JSON trace layer of the wrong length is an error") {
  const std::string path = TempFile("short.json", R"({"num_experts": 4, "layers": [[1, 2, 3, 4], [1, 2, 3]]})");
  CHECK_THROWS_WITH_AS(dockyard::LoadRoutingTrace(path), Has(path + ": /layers/1: has 3 token counts, num_experts is 4"), Error);
}

TEST_CASE("A JSON trace layer with no tokens is an error") {
  const std::string path = TempFile("zero.json", R"({"num_experts": 2, "layers": [[0, 0]]})");
  CHECK_THROWS_WITH_AS(dockyard::LoadRoutingTrace(path), Has(path + ": /layers/0: all token counts are 0; a layer needs a positive total"),
                       Error);
}

TEST_CASE("A JSON trace with a misspelled key is an error with a suggestion") {
  const std::string path = TempFile("typo.json", R"({"num_expert": 2, "layers": [[1, 1]]})");
  CHECK_THROWS_WITH_AS(dockyard::LoadRoutingTrace(path), Has(path + ": /num_expert: unknown key; did you mean 'num_experts'?"), Error);
}

TEST_CASE("A JSON trace without layers is an error") {
  const std::string path = TempFile("nolayers.json", R"({"num_experts": 2, "layers": []})");
  CHECK_THROWS_WITH_AS(dockyard::LoadRoutingTrace(path), Has(path + ": /layers: must be a non-empty array of layers"), Error);
}

TEST_CASE("A CSV trace with a wrong header is an error") {
  const std::string path = TempFile("header.csv", "layer,expert,count\n0,0,1\n");
  CHECK_THROWS_WITH_AS(dockyard::LoadRoutingTrace(path),
                       Has(path + ": line 1: the header must be 'layer,expert,tokens', got 'layer,expert,count'"), Error);
}

TEST_CASE("A CSV trace with a value that is not an integer names the line") {
  const std::string path = TempFile("value.csv", "layer,expert,tokens\n0,0,1\n0,1,x7\n");
  CHECK_THROWS_WITH_AS(dockyard::LoadRoutingTrace(path), Has(path + ": line 3: tokens must be an integer >= 0, got 'x7'"), Error);
}

TEST_CASE("A CSV trace with a negative value names the line") {
  const std::string path = TempFile("negative.csv", "layer,expert,tokens\n0,0,1\n0,1,-2\n");
  CHECK_THROWS_WITH_AS(dockyard::LoadRoutingTrace(path), Has(path + ": line 3: tokens must be >= 0, got -2"), Error);
}

TEST_CASE("A CSV trace line with a missing field is an error") {
  const std::string path = TempFile("fields.csv", "layer,expert,tokens\n0,0\n");
  CHECK_THROWS_WITH_AS(dockyard::LoadRoutingTrace(path),
                       Has(path + ": line 2: expected 3 comma-separated fields (layer,expert,tokens), got 2"), Error);
}

TEST_CASE("A CSV trace that repeats a (layer, expert) pair names both lines") {
  CHECK_THROWS_WITH_AS(dockyard::LoadRoutingTrace("testdata/routing/invalid_duplicate.csv"),
                       doctest::Contains("invalid_duplicate.csv: line 5: layer 0 expert 1 is already given on line 3"), Error);
}

TEST_CASE("A CSV trace that misses an expert of a layer is an error") {
  CHECK_THROWS_WITH_AS(
      dockyard::LoadRoutingTrace("testdata/routing/invalid_missing_expert.csv"),
      doctest::Contains("invalid_missing_expert.csv: layer 1 has no line for expert 1 (every layer must list experts 0..2)"), Error);
}

TEST_CASE("A CSV trace with a far-out expert index fails on the gap, before sizing anything by it") {
  const std::string path = TempFile("far.csv", "layer,expert,tokens\n0,0,1\n0,2000000000,1\n");
  CHECK_THROWS_WITH_AS(dockyard::LoadRoutingTrace(path),
                       Has(path + ": layer 0 has no line for expert 1 (every layer must list experts 0..2000000000)"), Error);
}

TEST_CASE("A CSV trace that skips a layer is an error") {
  const std::string path = TempFile("gap.csv", "layer,expert,tokens\n0,0,1\n0,1,1\n2,0,1\n2,1,1\n");
  CHECK_THROWS_WITH_AS(dockyard::LoadRoutingTrace(path), Has(path + ": no lines for layer 1 (layers must be numbered 0..2 without gaps)"),
                       Error);
}

TEST_CASE("A missing trace file is an error naming it") {
  CHECK_THROWS_WITH_AS(SampleRouting(Spec("trace:/nonexistent/trace.json"), 8, 2, 4, 10, 1),
                       doctest::Contains("/nonexistent/trace.json: cannot open routing trace: no such file"), Error);
}

TEST_CASE("A trace file that is empty is an error") {
  const std::string path = TempFile("empty.csv", "\n");
  CHECK_THROWS_WITH_AS(dockyard::LoadRoutingTrace(path), Has(path + ": file is empty"), Error);
}

// ---------------------------------------------------------------------------------------------
// Skewed weights.

TEST_CASE("Extremely skewed weights fall back to exact draws instead of looping") {
  // Expert 0 has 20999700 tokens, the 63 others 1000000 each, top_k 4: expert 0 needs inclusion
  // 4 * 20999700 / 83999700 = 0.9999893 (just below forced, 1 - 1e-6). Its calibrated draw
  // weight is ~0.94, so once it is picked rejection needs ~16 draws per pick; where the left
  // mass drops below 2/n the sampler scans exactly instead. Expert 0 misses 1.07e-5 of the
  // 400000 tokens: mean 4.3 misses, sd 2.1 (Poisson); checked below 4.3 + 5 sd = 15.
  std::string counts = "20999700";
  for (int i = 1; i < 64; ++i) counts += ",1000000";
  const std::string path = TempFile("skewed.json", R"({"num_experts": 64, "layers": [[)" + counts + "]]}");
  const int64_t T = 50000, ep = 8;
  const RoutingResult r = SampleRouting(Spec("trace:" + path), 64, 4, ep, T, 1);
  const auto& L = r.layers[0];
  CHECK(L.expected_share[0] * 4 == doctest::Approx(4.0 * 20999700 / 83999700).epsilon(1e-12));
  CHECK(L.expected_share[0] * 4 < 1.0);  // drawn, not forced
  CHECK(T * ep - L.tokens_per_expert[0] < 15);
  CHECK(Sum(L.tokens_per_expert) == T * ep * 4);
  const dockyard::RoutingModel model = dockyard::PrepareRouting(Spec("trace:" + path), 64, 4, 1);
  CountedRow(model, 0, 0, 2000, ep);
  // Zipf with a steep exponent and top_k close to E: forced experts and a skewed tail.
  const dockyard::RoutingModel steep = dockyard::PrepareRouting(Spec("zipf:4:noshuffle"), 64, 63, 1);
  CountedRow(steep, 0, 0, 2000, 8);
  const dockyard::RoutingModel steep2 = dockyard::PrepareRouting(Spec("zipf:0.5:noshuffle"), 64, 60, 1);
  CountedRow(steep2, 0, 0, 2000, 8);
}

// ---------------------------------------------------------------------------------------------
// Determinism.

TEST_CASE("The same seed gives the same routing, another seed another") {
  for (const char* text : {"uniform", "zipf:1.2", "hot:2:0.3"}) {
    CAPTURE(text);
    const RoutingResult a = SampleRouting(Spec(text, 7), 64, 4, 8, 1000, 2);
    const RoutingResult b = SampleRouting(Spec(text, 7), 64, 4, 8, 1000, 2);
    const RoutingResult c = SampleRouting(Spec(text, 8), 64, 4, 8, 1000, 2);
    for (size_t l = 0; l < 2; ++l) {
      CHECK(a.layers[l].dispatch == b.layers[l].dispatch);
      CHECK(a.layers[l].tokens_per_expert == b.layers[l].tokens_per_expert);
      CHECK(a.layers[l].tokens_per_expert != c.layers[l].tokens_per_expert);
    }
  }
}

TEST_CASE("A layer's routing does not depend on how many layers are sampled") {
  const RoutingResult two = SampleRouting(Spec("zipf:1"), 32, 4, 4, 500, 2);
  const RoutingResult five = SampleRouting(Spec("zipf:1"), 32, 4, 4, 500, 5);
  for (size_t l = 0; l < 2; ++l) CHECK(two.layers[l].dispatch == five.layers[l].dispatch);
}

TEST_CASE("Pinned routing: the sampled stream is the same on every platform") {
  // E = 8, top_k 2, ep 2, T = 8, seed 42. Pinned from this implementation: it changes only if
  // the generator, the stream derivation or the draw order changes, all of which would silently
  // change every simulation, so they must be deliberate. (2026-12-02: uniform draws over a
  // power-of-two range take whole bits, Xoshiro256ss::Bits; the uniform values were re-pinned.)
  const RoutingResult u = SampleRouting(Spec("uniform", 42), 8, 2, 2, 8, 1);
  const RoutingResult z = SampleRouting(Spec("zipf:1:noshuffle", 42), 8, 2, 2, 8, 1);
  // 8 tokens x 2 ranks x 2 picks = 32 assignments in each vector.
  CHECK(u.layers[0].tokens_per_expert == std::vector<int64_t>{5, 2, 5, 2, 3, 4, 6, 5});
  CHECK(u.layers[0].dispatch == std::vector<int64_t>{7, 9, 7, 9});
  CHECK(z.layers[0].tokens_per_expert == std::vector<int64_t>{11, 8, 1, 4, 2, 1, 2, 3});
  CHECK(z.layers[0].dispatch == std::vector<int64_t>{13, 3, 11, 5});
}

// ---------------------------------------------------------------------------------------------
// Statistics over ranks.

TEST_CASE("p99 is the nearest-rank 99th percentile of the received assignments") {
  // E = 200 experts on 200 ranks (one each), T = 10. hot:H:1 with top_k = H: the H hot experts
  // (ranks 0..H-1) are picked by every token and nothing else is: they receive 200 * 10 = 2000
  // each, the other ranks 0. Mean T * k = 10 H; nearest rank: sorted[ceil(0.99 * 200) - 1] =
  // sorted[197], the third largest.
  const RoutingResult two = SampleRouting(Spec("hot:2:1"), 200, 2, 200, 10, 1);
  CHECK(two.layers[0].max_received == 2000);
  CHECK(two.layers[0].p99_received == 0);
  CHECK(two.layers[0].mean_received == 20.0);
  CHECK(two.layers[0].imbalance == 100.0);
  const RoutingResult three = SampleRouting(Spec("hot:3:1"), 200, 3, 200, 10, 1);
  CHECK(three.layers[0].p99_received == 2000);
  CHECK(three.layers[0].imbalance == doctest::Approx(2000.0 / 30.0));
}

TEST_CASE("No tokens: empty matrices and imbalance 1") {
  const RoutingResult r = SampleRouting(Spec("zipf:1"), 16, 2, 4, 0, 2);
  for (const auto& L : r.layers) {
    CHECK(Sum(L.dispatch) == 0);
    CHECK(L.imbalance == 1.0);
  }
  CHECK(r.assignments == 0);
  CHECK(r.max_imbalance == 1.0);
}

// ---------------------------------------------------------------------------------------------
// Deredundency dispatcher.

TEST_CASE("Deredundency matrices by hand when every token picks every expert") {
  // E = 16, top_k 16, ep 4 (4 local experts), oep 2 x iep 2, T = 10: every dispatch cell is
  // T * 4 = 40. Rank (o, i) gathers the rows of (0, i) and (1, i) and sends to (o, j) their
  // assignments to (o, j)'s experts: 2 sources * 40 = 80 per cell; a row sums to 160 = the 2
  // sources' assignments to the 8 experts of outer group o; the total 4 * 2 * 80 = 640 is every
  // assignment, T * ep * top_k.
  const RoutingResult r = SampleRouting(Spec("uniform"), 16, 16, 4, 10, 1, 2);
  const auto& L = r.layers[0];
  CHECK(L.iep_dispatch == std::vector<int64_t>(8, 80));
  CHECK(Sum(L.iep_dispatch) == 640);
}

TEST_CASE("Deredundency matrices sum consistently with the dispatch matrix") {
  const int64_t ep = 8, oep = 2, iep = 4, T = 3000, k = 4;
  const RoutingResult r = SampleRouting(Spec("zipf:1.1"), 64, k, ep, T, 2, oep);
  for (const auto& L : r.layers) {
    REQUIRE(L.iep_dispatch.size() == static_cast<size_t>(ep * iep));
    for (int64_t o = 0; o < oep; ++o) {
      for (int64_t i = 0; i < iep; ++i) {
        const int64_t rank = o * iep + i;
        int64_t row = 0, sent_by_sources = 0;
        for (int64_t j = 0; j < iep; ++j) {
          int64_t cell = 0;
          for (int64_t o2 = 0; o2 < oep; ++o2) cell += L.dispatch[static_cast<size_t>((o2 * iep + i) * ep + o * iep + j)];
          CHECK(L.iep_dispatch[static_cast<size_t>(rank * iep + j)] == cell);
          row += L.iep_dispatch[static_cast<size_t>(rank * iep + j)];
        }
        // The row: what the gathered sources (o', i) send to outer group o's experts.
        for (int64_t o2 = 0; o2 < oep; ++o2) {
          for (int64_t d = o * iep; d < (o + 1) * iep; ++d) sent_by_sources += L.dispatch[static_cast<size_t>((o2 * iep + i) * ep + d)];
        }
        CHECK(row == sent_by_sources);
      }
    }
    CHECK(Sum(L.iep_dispatch) == T * ep * k);
    // Column j of the iep matrix inside group o is what (o, j) receives.
    for (int64_t o = 0; o < oep; ++o) {
      for (int64_t j = 0; j < iep; ++j) {
        int64_t col = 0;
        for (int64_t i = 0; i < iep; ++i) col += L.iep_dispatch[static_cast<size_t>((o * iep + i) * iep + j)];
        CHECK(col == L.received[static_cast<size_t>(o * iep + j)]);
      }
    }
  }
  // oep = 1: the trivial one is the dispatch matrix, not copied (IepDispatchOf reads dispatch);
  // oep = ep (iep = 1): each rank's one cell is what it receives.
  const RoutingResult one = SampleRouting(Spec("zipf:1.1"), 64, k, ep, T, 1, 1);
  CHECK(one.layers[0].iep_dispatch.empty());
  CHECK(&dockyard::IepDispatchOf(one.layers[0]) == &one.layers[0].dispatch);
  const RoutingResult all = SampleRouting(Spec("zipf:1.1"), 64, k, ep, T, 1, ep);
  CHECK(all.layers[0].iep_dispatch == all.layers[0].received);
}

// ---------------------------------------------------------------------------------------------
// Validation, one rule per test.

TEST_CASE("top_k 0 is an error") {
  CHECK_THROWS_WITH_AS(SampleRouting(Spec("uniform"), 8, 0, 2, 10, 1), doctest::Contains("top_k (0) must be in [1, num_experts (8)]"),
                       Error);
}

TEST_CASE("top_k above num_experts is an error") {
  CHECK_THROWS_WITH_AS(SampleRouting(Spec("uniform"), 8, 9, 2, 10, 1), doctest::Contains("top_k (9) must be in [1, num_experts (8)]"),
                       Error);
}

TEST_CASE("num_experts 0 is an error") {
  CHECK_THROWS_WITH_AS(dockyard::PrepareRouting(Spec("uniform"), 0, 1, 1), doctest::Contains("num_experts must be >= 1, got 0"), Error);
}

TEST_CASE("ep that does not divide num_experts is an error") {
  CHECK_THROWS_WITH_AS(SampleRouting(Spec("uniform"), 8, 2, 3, 10, 1), doctest::Contains("ep (3) must divide num_experts (8)"), Error);
}

TEST_CASE("ep 0 is an error") {
  CHECK_THROWS_WITH_AS(SampleRouting(Spec("uniform"), 8, 2, 0, 10, 1), doctest::Contains("ep must be >= 1, got 0"), Error);
}

TEST_CASE("oep that does not divide ep is an error") {
  CHECK_THROWS_WITH_AS(SampleRouting(Spec("uniform"), 8, 2, 4, 10, 1, 3),
                       doctest::Contains("oep (3) must divide ep (4) for the deredundency dispatcher"), Error);
}

TEST_CASE("Negative tokens per rank is an error") {
  CHECK_THROWS_WITH_AS(SampleRouting(Spec("uniform"), 8, 2, 4, -1, 1), doctest::Contains("tokens_per_rank must be >= 0, got -1"), Error);
}

TEST_CASE("Negative num_layers is an error") {
  CHECK_THROWS_WITH_AS(SampleRouting(Spec("uniform"), 8, 2, 4, 10, -1), doctest::Contains("num_layers (MoE layers) must be >= 0, got -1"),
                       Error);
}

TEST_CASE("Assignment counts that overflow int64 are an error") {
  CHECK_THROWS_WITH_AS(SampleRouting(Spec("uniform"), 8, 2, 4, int64_t{1} << 62, 1),
                       doctest::Contains("routing tokens (tokens_per_rank * ep): 4611686018427387904 * 4 overflows"), Error);
}

TEST_CASE("Dispatch matrices beyond the size bound are an error") {
  // ep 2^15: 2^30 entries per layer, above the 2^28 bound (2 GiB of counts).
  CHECK_THROWS_WITH_AS(SampleRouting(Spec("uniform"), int64_t{1} << 15, 1, int64_t{1} << 15, 0, 1),
                       doctest::Contains("dispatch matrices would hold ep * ep * num_layers = 1073741824 entries"), Error);
}

TEST_CASE("A negative Zipf exponent set in code is an error") {
  RoutingSpec s;
  s.kind = RoutingKind::kZipf;
  s.zipf_s = -1;
  CHECK_THROWS_WITH_AS(SampleRouting(s, 8, 2, 2, 10, 1), doctest::Contains("Zipf exponent (zipf_s) must be a finite number >= 0, got -1"),
                       Error);
}

TEST_CASE("A NaN Zipf exponent set in code is an error") {
  RoutingSpec s;
  s.kind = RoutingKind::kZipf;
  s.zipf_s = std::nan("");
  CHECK_THROWS_WITH_AS(SampleRouting(s, 8, 2, 2, 10, 1), doctest::Contains("Zipf exponent (zipf_s) must be a finite number >= 0"), Error);
}

TEST_CASE("More hot experts than experts is an error") {
  CHECK_THROWS_WITH_AS(SampleRouting(Spec("hot:9:0.5"), 8, 2, 2, 10, 1),
                       doctest::Contains("hot expert count (9) must be in [0, num_experts (8)]"), Error);
}

TEST_CASE("A hot fraction above 1 set in code is an error") {
  RoutingSpec s;
  s.kind = RoutingKind::kHot;
  s.hot_experts = 2;
  s.hot_fraction = 1.25;
  CHECK_THROWS_WITH_AS(SampleRouting(s, 8, 2, 2, 10, 1), doctest::Contains("hot fraction must be in [0, 1], got 1.25"), Error);
}

TEST_CASE("A hot fraction without hot experts is an error") {
  CHECK_THROWS_WITH_AS(SampleRouting(Spec("hot:0:0.5"), 8, 2, 2, 10, 1),
                       doctest::Contains("hot fraction 0.5 needs at least one hot expert, got 0 hot experts"), Error);
}

TEST_CASE("All experts hot with a fraction below 1 is an error") {
  CHECK_THROWS_WITH_AS(SampleRouting(Spec("hot:8:0.5"), 8, 2, 2, 10, 1),
                       doctest::Contains("with all 8 experts hot the hot fraction must be 1, got 0.5"), Error);
}

TEST_CASE("A trace spec without a path set in code is an error") {
  RoutingSpec s;
  s.kind = RoutingKind::kTrace;
  CHECK_THROWS_WITH_AS(SampleRouting(s, 8, 2, 2, 10, 1), doctest::Contains("routing trace path (trace_path) is empty"), Error);
}

TEST_CASE("SampleTokenExperts rejects a layer out of range") {
  const dockyard::RoutingModel model = dockyard::PrepareRouting(Spec("uniform"), 8, 2, 2);
  CHECK_THROWS_WITH_AS(dockyard::SampleTokenExperts(model, 2, 0, 10), doctest::Contains("layer must be in [0, 2), got 2"), Error);
}

TEST_CASE("RoutingSampler gives SampleRouting's result field for field, in any request order") {
  auto same = [](const RoutingResult& a, const RoutingResult& b) {
    REQUIRE(a.layers.size() == b.layers.size());
    CHECK(a.num_experts == b.num_experts);
    CHECK(a.top_k == b.top_k);
    CHECK(a.ep == b.ep);
    CHECK(a.tokens_per_rank == b.tokens_per_rank);
    CHECK(a.oep == b.oep);
    CHECK(a.max_imbalance == b.max_imbalance);
    CHECK(a.assignments == b.assignments);
    for (size_t l = 0; l < a.layers.size(); ++l) {
      const auto& x = a.layers[l];
      const auto& y = b.layers[l];
      CHECK(x.tokens_per_expert == y.tokens_per_expert);
      CHECK(x.dispatch == y.dispatch);
      CHECK(x.received == y.received);
      CHECK(x.rows_per_local_expert == y.rows_per_local_expert);
      CHECK(x.max_received == y.max_received);
      CHECK(x.mean_received == y.mean_received);
      CHECK(x.p99_received == y.p99_received);
      CHECK(x.imbalance == y.imbalance);
      CHECK(x.iep_dispatch == y.iep_dispatch);
      CHECK(x.expected_share == y.expected_share);
    }
  };
  for (const char* text : {"uniform", "zipf:1.1", "hot:3:0.6"}) {
    CAPTURE(text);
    const auto model = dockyard::PrepareRouting(Spec(text, 7), 64, 6, 2);
    dockyard::RoutingSampler sampler(model);
    // Small ep first (ranks drawn on demand), then larger ep and other token counts, repeats.
    const int64_t requests[][3] = {{4, 300, 1}, {16, 300, 1}, {16, 300, 4}, {64, 300, 8}, {2, 77, 1},
                                   {64, 77, 1}, {8, 300, 2},  {1, 300, 1},  {32, 0, 4},   {16, 300, 1}};
    for (const auto& q : requests) {
      CAPTURE(q[0]);
      CAPTURE(q[1]);
      CAPTURE(q[2]);
      const RoutingResult direct = SampleRouting(model, q[0], q[1], q[2]);
      same(sampler.Sample(q[0], q[1], q[2]), direct);
      CHECK(direct.assignments == q[0] * q[1] * 6 * 2);
    }
  }
  // The same errors as SampleRouting.
  dockyard::RoutingSampler sampler(dockyard::PrepareRouting(Spec("uniform"), 64, 6, 1));
  CHECK_THROWS_WITH_AS(sampler.Sample(3, 10), doctest::Contains("ep (3) must divide num_experts (64)"), Error);
  CHECK_THROWS_WITH_AS(sampler.Sample(8, 10, 3), doctest::Contains("oep (3) must divide ep (8)"), Error);
}

TEST_CASE("RoutingSampler with expected token counts: prefixes of one draw equal separate draws") {
  for (const char* text : {"uniform", "zipf:0.8", "hot:2:0.9"}) {
    CAPTURE(text);
    const auto model = dockyard::PrepareRouting(Spec(text, 3), 32, 4, 2);
    dockyard::RoutingSampler sampler(model);
    sampler.ExpectTokenCounts({1000, 500, 250, 125, 63, 0, 4000});  // 4000 never asked for
    const int64_t requests[][3] = {{8, 1000, 1}, {8, 125, 1}, {32, 250, 4}, {32, 1000, 8}, {4, 63, 1}, {16, 500, 2}, {2, 7, 1}};
    for (const auto& q : requests) {
      CAPTURE(q[0]);
      CAPTURE(q[1]);
      const RoutingResult direct = SampleRouting(model, q[0], q[1], q[2]);
      const RoutingResult shared = sampler.Sample(q[0], q[1], q[2]);
      REQUIRE(shared.layers.size() == direct.layers.size());
      for (size_t l = 0; l < direct.layers.size(); ++l) {
        CHECK(shared.layers[l].dispatch == direct.layers[l].dispatch);
        CHECK(shared.layers[l].tokens_per_expert == direct.layers[l].tokens_per_expert);
        CHECK(shared.layers[l].iep_dispatch == direct.layers[l].iep_dispatch);
        CHECK(shared.layers[l].imbalance == direct.layers[l].imbalance);
      }
      CHECK(shared.max_imbalance == direct.max_imbalance);
    }
  }
}

TEST_CASE("received are the column sums of dispatch and iep_dispatch sums dispatch over outer sources") {
  const auto model = dockyard::PrepareRouting(Spec("zipf:1.0", 11), 48, 4, 2);
  for (int64_t ep : {1, 2, 6, 12, 48}) {
    for (int64_t oep : {1, 2, 3}) {
      if (ep % oep) continue;
      CAPTURE(ep);
      CAPTURE(oep);
      const RoutingResult r = SampleRouting(model, ep, 200, oep);
      const int64_t iep = ep / oep;
      for (const auto& L : r.layers) {
        int64_t total = 0;
        for (int64_t dst = 0; dst < ep; ++dst) {
          int64_t column = 0;
          for (int64_t src = 0; src < ep; ++src) column += L.dispatch[src * ep + dst];
          CHECK(L.received[dst] == column);
          total += column;
        }
        CHECK(total == 200 * ep * 4);
        for (int64_t o = 0; o < oep; ++o) {
          for (int64_t i = 0; i < iep; ++i) {
            for (int64_t j = 0; j < iep; ++j) {
              int64_t sum = 0;
              for (int64_t o2 = 0; o2 < oep; ++o2) sum += L.dispatch[(o2 * iep + i) * ep + o * iep + j];
              CHECK(dockyard::IepDispatchOf(L)[(o * iep + i) * iep + j] == sum);
            }
          }
        }
      }
    }
  }
}

TEST_CASE("Xoshiro256ss::Bits takes whole bits from the top of one output, then the next") {
  dockyard::Xoshiro256ss a(1, 2, 3, 4), b(1, 2, 3, 4);
  // First output 11520 = 0x2D00 (splitmix test above): its top 7 bits are 0, and so are the next
  // 7; the ninth 7-bit draw takes bits 1..7 from the bottom: (11520 >> 1) & 127 = 5760 & 127 = 0.
  const uint64_t first = b.Next();
  for (int i = 0; i < 9; ++i) CHECK(a.Bits(7) == ((first >> (57 - 7 * i)) & 127));
  // One bit is left (63 used): a tenth 7-bit draw takes the second output's top bits (0).
  const uint64_t second = b.Next();
  CHECK(a.Bits(7) == second >> 57);
  // A 64-bit draw takes a whole output (the 57 left over are dropped); 0 bits draw nothing.
  CHECK(a.Bits(0) == 0);
  CHECK(a.Bits(64) == b.Next());
  CHECK(a.Next() == b.Next());
  CHECK(dockyard::Log2IfPow2(1) == 0);
  CHECK(dockyard::Log2IfPow2(128) == 7);
  CHECK(dockyard::Log2IfPow2(96) == -1);
  CHECK(dockyard::Log2IfPow2(0) == -1);
}

TEST_CASE("An alias table gives each item its probability") {
  // P(i) = sum over columns c of (1/n) * (keep share of c if c = i) + (1/n) * (1 - keep share of
  // c if alias[c] = i), keep share = threshold / 2^64. For {0.5, 0.25, 0.125, 0.125}: n = 4,
  // scaled 2, 1, 0.5, 0.5: the two 0.5 columns alias to column 0, which keeps 2 - 0.5 - 0.5 = 1.
  const std::vector<double> prob = {0.5, 0.25, 0.125, 0.125};
  std::vector<uint64_t> threshold(4);
  std::vector<uint32_t> alias(4);
  dockyard::routing_detail::BuildAliasTable(prob.data(), 4, threshold.data(), alias.data());
  std::vector<double> got(4, 0.0);
  for (size_t c = 0; c < 4; ++c) {
    const double keep = static_cast<double>(threshold[c]) / 18446744073709551616.0;
    got[c] += keep / 4;
    got[alias[c]] += (1 - keep) / 4;
  }
  for (size_t i = 0; i < 4; ++i) CHECK(got[i] == doctest::Approx(prob[i]).epsilon(1e-15));
  // AliasPick: x = 0 lands in column 0 and keeps it; x just under 2^64 * 3/4 is column 2, whose
  // keep share is 0.5: the low word of x * 4 is then just under 2^64, past the threshold: alias.
  CHECK(dockyard::routing_detail::AliasPick(threshold.data(), alias.data(), 4, 0) == 0);
  CHECK(dockyard::routing_detail::AliasPick(threshold.data(), alias.data(), 4, 0xBFFFFFFFFFFFFFFFULL) == alias[2]);
}
