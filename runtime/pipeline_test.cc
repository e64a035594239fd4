// One MoE layer on the CPU backend against the single-process reference (run.h): the cases that
// must be right — empty ranks and experts, skewed and degenerate routing, odd token counts,
// every layout (EP, TP experts, ETP, sequence-parallel shared experts) and both dispatchers —
// and the proof that validation catches an ownership mistake.
#include "runtime/run.h"

#include <chrono>

#include <doctest/doctest.h>

#include "planner/base/error.h"
#include "runtime/cpu/cpu_backend.h"
#include "runtime/pipeline.h"
#include "runtime/test_layouts.h"

using namespace dockyard;
using namespace dockyard::runtime;
using namespace dockyard::runtime::testing;

namespace {

RunOptions Options(int64_t tokens, const std::string& dispatcher = "all_to_all", int64_t oep = 1) {
  RunOptions o;
  o.tokens_per_rank = tokens;
  o.dispatcher = dockyard::ParseDispatcher(dispatcher, "dispatcher");
  o.oep = oep;
  o.iters = 1;
  o.warmup = 0;
  return o;
}

RoutingSpec Routing(const std::string& text) {
  return ParseRoutingSpec(text);
}

RunReport Run(const Plan& plan, const RunOptions& o) {
  cpu::CpuBackend backend;
  RunReport r = RunMoeLayer(plan, o, backend);
  for (const Mismatch& m : r.first_mismatches) {
    MESSAGE("rank " << m.rank << " token " << m.token << " dim " << m.dim << ": got " << m.got << " expected " << m.expected);
  }
  return r;
}

void CheckPassed(const RunReport& r) {
  CHECK(r.passed());
  CHECK(r.wrong == 0);
  CHECK(r.checked > 0);
  CHECK(r.max_abs_error < 1e-4);
}

// (op, group, dtype) of every collective, in order.
std::vector<std::string> Sequence(const std::vector<CollectiveRecord>& log) {
  std::vector<std::string> out;
  for (const auto& c : log) out.push_back(c.op + "/" + c.group + "/" + c.dtype);
  return out;
}

}  // namespace

TEST_CASE("EP all-to-all on 8 ranks matches the reference") {
  const RunReport r = Run(MakePlan(TinyMoe(), 8, 8), Options(32));
  CheckPassed(r);
  CHECK(r.checked == 8 * 32 * 64);  // every element of every rank's [32, 64] output
  int64_t routed = 0, received = 0;
  for (const RankReport& k : r.ranks) {
    routed += k.routed_rows;
    received += k.received_rows;
  }
  CHECK(routed == 8 * 32 * 2);
  CHECK(received == routed);  // every routed row is computed exactly once
}

TEST_CASE("Ranks that receive zero tokens and experts that receive none") {
  // hot:2:1.0 gives experts 0 and 1 all the weight; with top_k 2 every token picks both, and
  // both live on EP rank 0 (8 experts / ep 4 = 2 per rank). Ranks 1-3 receive nothing, experts
  // 2-7 get no token.
  RunOptions o = Options(16);
  o.routing = Routing("hot:2:1.0");
  for (const std::string d : {"all_to_all", "deredundency"}) {
    CAPTURE(d);
    o.dispatcher = dockyard::ParseDispatcher(d, "dispatcher");
    o.oep = 2;
    const RunReport r = Run(MakePlan(TinyMoe(), 4, 4), o);
    CheckPassed(r);
    CHECK(r.ranks[0].received_rows == 4 * 16 * 2);
    for (int i = 1; i < 4; ++i) CHECK(r.ranks[static_cast<size_t>(i)].received_rows == 0);
    CHECK(r.tokens_per_expert[0] == 64);
    CHECK(r.tokens_per_expert[1] == 64);
    for (int e = 2; e < 8; ++e) CHECK(r.tokens_per_expert[static_cast<size_t>(e)] == 0);
  }
}

TEST_CASE("Every token routed to one expert") {
  RunOptions o = Options(24);
  o.routing = Routing("hot:1:1.0");
  const RunReport r = Run(MakePlan(TinyMoe(8, 1), 4, 4), o);
  CheckPassed(r);
  CHECK(r.tokens_per_expert[0] == 4 * 24);
}

TEST_CASE("top_k equal to num_experts sends every token to every expert") {
  const RunReport r = Run(MakePlan(TinyMoe(4, 4), 4, 2), Options(10));
  CheckPassed(r);
  for (int64_t n : r.tokens_per_expert) CHECK(n == 4 * 10);
}

TEST_CASE("Token counts not divisible by anything, and a rank with no tokens of its own") {
  // 13 tokens (prime), top_k 5, 12 experts over ep 6 (2 per rank); then per-rank counts
  // 13, 7, 0, 11, 1, 5.
  const Plan plan = MakePlan(TinyMoe(12, 5), 6, 6);
  CheckPassed(Run(plan, Options(13)));
  RunOptions o = Options(13);
  o.tokens_per_source = {13, 7, 0, 11, 1, 5};
  const RunReport r = Run(plan, o);
  CheckPassed(r);
  CHECK(r.ranks[2].tokens == 0);
  CHECK(r.ranks[2].routed_rows == 0);
}

TEST_CASE("ep 1: every rank computes every expert on its own tokens") {
  const RunReport r = Run(MakePlan(TinyMoe(), 4, 1), Options(20));
  CheckPassed(r);
  CHECK(r.config.ep == 1);
  CHECK(r.ranks[3].received_rows == 20 * 2);
  CHECK(r.ranks[3].sent_rows == 0);
}

TEST_CASE("A world of one rank") {
  const RunReport r = Run(MakePlan(TinyDeepSeek(), 1, 1), Options(9));
  CheckPassed(r);
  CHECK(r.ranks.size() == 1);
}

TEST_CASE("Both dispatchers, every oep, validate the same layer") {
  const Plan plan = MakePlan(TinyDeepSeek(), 8, 8);
  CheckPassed(Run(plan, Options(24, "all_to_all")));
  for (int64_t oep : {1, 2, 4, 8}) {
    CAPTURE(oep);
    const RunReport r = Run(plan, Options(24, "deredundency", oep));
    CheckPassed(r);
    CHECK(r.config.oep == oep);
  }
}

TEST_CASE("Every rank issues the same collectives in the same order whatever it receives") {
  // Skewed routing (zipf 1.5) gives the ranks very different receive sizes; the sequence of
  // (op, group, dtype) must still be identical on every rank, for each dispatcher and layout.
  struct Case {
    std::string name;
    Plan plan;
    std::string dispatcher;
    int64_t oep;
  };
  std::vector<Case> cases;
  cases.push_back({"EP all_to_all", MakePlan(TinyDeepSeek(), 8, 8), "all_to_all", 1});
  cases.push_back({"EP deredundency", MakePlan(TinyDeepSeek(), 8, 8), "deredundency", 2});
  cases.push_back({"ETP deredundency", MakePlan(TinyDeepSeek(), 8, 4, 2, 2), "deredundency", 2});
  cases.push_back({"SP shared experts", MakePlan(TinyDeepSeek(), 8, 4, 2, 1), "all_to_all", 1});
  for (const Case& c : cases) {
    CAPTURE(c.name);
    RunOptions o = Options(16, c.dispatcher, c.oep);
    o.routing = Routing("zipf:1.5");
    o.record_collectives = true;
    o.iters = 2;  // the log is of the last iteration
    const RunReport r = Run(c.plan, o);
    CheckPassed(r);
    REQUIRE(r.collectives.size() == r.ranks.size());
    const std::vector<std::string> first = Sequence(r.collectives[0]);
    CHECK(!first.empty());
    bool sizes_differ = false;
    for (size_t i = 1; i < r.collectives.size(); ++i) {
      CHECK(Sequence(r.collectives[i]) == first);
      for (size_t j = 0; j < r.collectives[i].size() && j < r.collectives[0].size(); ++j) {
        sizes_differ = sizes_differ || r.collectives[i][j].recv_elems != r.collectives[0][j].recv_elems;
      }
    }
    CHECK(sizes_differ);  // the ranks did receive different amounts
  }
}

TEST_CASE("TP-sharded experts with EP off: colwise gate/up, rowwise down, partial sums all-reduced") {
  const RunReport r = Run(MakePlan(TinyMoe(), 4, 1, 4), Options(16));
  CheckPassed(r);
  CHECK(r.config.expert_tp == 4);
  CHECK(r.config.sources.size() == 1);  // the tp group shares one set of tokens
}

TEST_CASE("ETP: experts over ep, their intermediate dim over etp") {
  CheckPassed(Run(MakePlan(TinyDeepSeek(), 8, 2, 2, 2), Options(16)));
  CheckPassed(Run(MakePlan(TinyDeepSeek(), 16, 8, 2, 2), Options(8, "deredundency", 2)));
}

TEST_CASE("Shared experts: sequence-parallel, partial with the routed sum, and local") {
  CheckPassed(Run(MakePlan(TinyDeepSeek(), 4, 2, 2, 1), Options(12)));  // sequence-parallel
  CheckPassed(Run(MakePlan(TinyDeepSeek(), 4, 1, 2), Options(12)));     // partial (tp group = expert tp group)
  CheckPassed(Run(MakePlan(TinyDeepSeek(), 4, 4), Options(12)));        // local
}

TEST_CASE("Shared experts overlapped with the combine give the same bits and the same collectives") {
  // Local (ep 4) and partial (tp 2) shared experts overlap; sequence-parallel ones (ep 2 tp 2)
  // do not (their tp collectives would interleave with the pending exchange) and run as before.
  for (const Plan& plan : {MakePlan(TinyDeepSeek(), 4, 4), MakePlan(TinyDeepSeek(), 4, 1, 2), MakePlan(TinyQwen2(), 2, 2),
                           MakePlan(TinyDeepSeek(), 4, 2, 2, 1)}) {
    RunOptions off = Options(12);
    off.record_collectives = true;
    RunOptions on = off;
    on.overlap_shared_experts = true;
    const RunReport a = Run(plan, off), b = Run(plan, on);
    CheckPassed(b);
    REQUIRE(a.ranks.size() == b.ranks.size());
    CHECK(a.max_abs_error == b.max_abs_error);  // the same sums in the same order: identical outputs
    for (size_t i = 0; i < a.collectives.size(); ++i) CHECK(Sequence(a.collectives[i]) == Sequence(b.collectives[i]));
    for (const PhaseReport& p : b.phases) CHECK(p.time_us >= 0.0);
  }
}

TEST_CASE("Qwen2-MoE's sigmoid-gated shared expert, whole and TP-sharded") {
  CheckPassed(Run(MakePlan(TinyQwen2(), 2, 2), Options(12)));
  CheckPassed(Run(MakePlan(TinyQwen2(), 2, 1, 2), Options(12)));
}

TEST_CASE("Megatron convention and a pipeline stage other than the first") {
  CheckPassed(Run(MakePlan(TinyMoe(), 8, 2, 2, 2, 1, Convention::kMegatron), Options(8)));
  RunOptions o = Options(8);
  o.layer = 1;  // stage 1 of pp 2: ranks 2 and 3
  const RunReport r = Run(MakePlan(TinyMoe(), 4, 2, 1, 1, 2), o);
  CheckPassed(r);
  REQUIRE(r.ranks.size() == 2);
  CHECK(r.ranks[0].rank == 2);
}

TEST_CASE("16 ranks with thousands of tokens, both dispatchers, in seconds") {
  // 64 experts of hidden 128 and F 64, top-4; 256 tokens per rank = 4096 tokens.
  const Plan plan = MakePlan(TinyMoe(64, 4, 128, 64), 16, 16);
  for (const std::string d : {"all_to_all", "deredundency"}) {
    CAPTURE(d);
    const auto t0 = std::chrono::steady_clock::now();
    const RunReport r = Run(plan, Options(256, d, 4));
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    MESSAGE(d << ": 16 ranks x 256 tokens in " << s << " s (run " << r.run_seconds << " s, reference " << r.reference_seconds << " s)");
    CheckPassed(r);
    CHECK(r.checked == 16 * 256 * 128);
  }
}

TEST_CASE("An ownership mistake (each rank using its neighbour's expert weights) fails validation") {
  RunOptions o = Options(16);
  o.fault = Fault::kWrongExpertOwner;
  cpu::CpuBackend backend;
  const RunReport r = RunMoeLayer(MakePlan(TinyMoe(), 4, 4), o, backend);
  CHECK_FALSE(r.passed());
  CHECK(r.wrong > r.checked / 2);
  CHECK(r.first_mismatches.size() == kMaxMismatches);
  CHECK(RunReportToText(r, "tiny").find("Validation FAILED") != std::string::npos);
}

TEST_CASE("The deredundency dispatcher rejects unequal routed token counts within an oep group") {
  // oep 2 over ep 8: oep groups are EP ranks {i, 4 + i}. Rank 4 holds 5 tokens, rank 0 holds 8,
  // so the all-gather of the routed rows (T x top_k) of group {0, 4} cannot line up.
  RunOptions o = Options(8, "deredundency", 2);
  o.tokens_per_source = {8, 8, 8, 8, 5, 8, 8, 8};
  CHECK_THROWS_WITH_AS(Run(MakePlan(TinyMoe(), 8, 8), o), doctest::Contains("equal routed token counts within each oep group"), Error);
  o.dispatcher = Dispatcher::kAllToAll;  // the all-to-all dispatcher has no such precondition
  CheckPassed(Run(MakePlan(TinyMoe(), 8, 8), o));
}

TEST_CASE("Phases carry planner/cost/cost.h's names and exclude the warm-up") {
  const std::vector<std::string>& names = PhaseNames();
  for (const char* n : {"router", "permute", "dispatch", "grouped_gemm", "unpermute", "combine", "shared_experts"}) {
    CHECK(std::find(names.begin(), names.end(), n) != names.end());
  }
  RunOptions o = Options(16);
  o.iters = 2;
  o.warmup = 1;
  const RunReport r = Run(MakePlan(TinyDeepSeek(), 4, 4), o);
  CheckPassed(r);
  REQUIRE(r.phases.size() == names.size());
  for (const PhaseReport& p : r.phases) {
    CAPTURE(p.name);
    CHECK(p.per_rank_us.size() == 4);
    CHECK(p.time_us >= p.mean_us);
    CHECK(p.mean_us >= 0);
  }
  CHECK(r.phases[0].name == "router");
  CHECK(r.phases[0].time_us > 0);
  const Json j = RunReportToJson(r, "tiny");
  CHECK(j["validation"]["wrong"] == 0);
  CHECK(j["per_rank"].size() == 4);
  CHECK(j["measured"]["phases"][3]["name"] == "grouped_gemm");
}
