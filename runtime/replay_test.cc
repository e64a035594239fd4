// Single-GPU replay (replay.h), run here on the CPU backend: the rows each rank receives, the
// validation, the cost-model phases, and that a wrong expert GEMM is caught.
#include "runtime/replay.h"

#include <algorithm>

#include <doctest/doctest.h>

#include "planner/cost/cost.h"
#include "planner/base/error.h"
#include "planner/accounting/workload.h"
#include "planner/routing/plan_routing.h"
#include "runtime/cpu/cpu_backend.h"
#include "runtime/reference.h"
#include "runtime/test_layouts.h"

namespace dockyard::runtime {
namespace {

Plan SmallPlan(int64_t world, int64_t ep, int64_t tp = 1, int64_t etp = 1, int64_t pp = 1) {
  ModelSpec m = testing::TinyDeepSeek();  // 16 experts, top-4, hidden 64, F 32, a shared expert of F 48
  ParallelDimsOptions o;
  o.world_size = world;
  o.ep = ep;
  o.tp = tp;
  o.etp = etp;
  o.pp = pp;
  o.convention = dockyard::Convention::kTorchtitan2026_03;  // etp = tp: torchtitan before PR #3167
  TrainingConfig t;
  t.seq_len = 64;  // T = 64 tokens per rank (micro-batch 1, cp 1)
  return BuildPlan(m, o, t);
}

ReplayOptions Options(int64_t rank) {
  ReplayOptions o;
  o.rank = rank;
  o.iters = 1;
  o.warmup = 0;
  o.cluster = ClusterPreset("h200-sxm");
  return o;
}

TEST_CASE("every EP rank's replay receives its column of the routing matrix; together they receive every row") {
  const Plan plan = SmallPlan(4, 4);
  const Workload w = ComputeWorkload(plan);
  REQUIRE(w.routed_tokens == 64);
  const RoutingResult sampled = SampleRouting(RoutingSpec{}, 16, 4, 4, 64, 1);
  cpu::CpuBackend backend;
  int64_t total = 0;
  for (int64_t rank = 0; rank < 4; ++rank) {
    const ReplayReport r = ReplayRank(plan, Options(rank), backend);
    CAPTURE(rank);
    CHECK(r.ep == 4);
    CHECK(r.ep_rank == rank);         // ep = world: EP rank = global rank
    CHECK(r.num_local_experts == 4);  // 16 experts / ep 4
    CHECK(r.first_expert == 4 * rank);
    CHECK(r.tokens == 64);
    CHECK(r.received_rows == sampled.layers[0].received[static_cast<size_t>(rank)]);
    CHECK(r.passed());
    CHECK(r.checked > 0);
    total += r.received_rows;
  }
  CHECK(total == 4 * 64 * 4);  // ep sources x T tokens x top_k: every routed row lands on exactly one rank
}

TEST_CASE("replay checks 2 rows at each end of every expert, and the permutation exactly") {
  const Plan plan = SmallPlan(2, 2);
  ReplayOptions o = Options(1);
  o.check_rows = 2;
  cpu::CpuBackend backend;
  const ReplayReport r = ReplayRank(plan, o, backend);
  int64_t rows_checked = 0;
  for (int64_t n : r.rows_per_local_expert) rows_checked += std::min<int64_t>(n, 4);
  CHECK(r.checked == rows_checked * 64);  // hidden 64 elements per row
  CHECK(r.wrong == 0);
  CHECK(r.max_abs_error <= 1e-6);  // the same CPU kernels: equal up to the block split
}

TEST_CASE("dispatch and combine come from the cost model for the rank's EP index; the rest is measured") {
  const Plan plan = SmallPlan(4, 4);
  cpu::CpuBackend backend;
  const ReplayReport r = ReplayRank(plan, Options(2), backend);
  const CostBreakdown cost = SimulateStep(plan, ClusterPreset("h200-sxm"), SampleRouting(RoutingSpec{}, 16, 4, 4, 64, 1));
  int found = 0;
  for (const ReplayPhase& p : r.phases) {
    if (p.name != "dispatch" && p.name != "combine") {
      CHECK(p.source.rfind("measured", 0) == 0);
      continue;
    }
    CHECK(p.source == "cost model");
    for (const PhaseCost& c : cost.phases) {
      if (PhaseName(c.phase) == std::string(p.name) && c.layer_kind == LayerKind::kMoe && c.direction == Direction::kForward) {
        REQUIRE(c.per_ep_rank_us.size() == 4);
        CHECK(p.time_us == c.per_ep_rank_us[2]);
        ++found;
      }
    }
  }
  CHECK(found == 2);
  // shared experts are measured (TinyDeepSeek has one).
  bool shared = false;
  for (const ReplayPhase& p : r.phases) shared = shared || p.name == "shared_experts";
  CHECK(shared);
}

TEST_CASE("replay of a deepep plan samples routing as simulate does: dispatch and combine from the cost model") {
  // ep 16 over 2 nodes of 8 GPUs (h200-sxm's NVLink domain): the deepep cost needs the per-token
  // node counts that SampleRoutingForPlan adds for deepep; the replay's phases equal simulate's
  // for EP index 11 (rank 11, node 1).
  ModelSpec m = testing::TinyDeepSeek();
  ParallelDimsOptions d;
  d.world_size = 16;
  d.ep = 16;
  TrainingConfig t;
  t.seq_len = 64;
  t.dispatcher = Dispatcher::kDeepEp;
  for (const bool fp8 : {false, true}) {
    CAPTURE(fp8);
    t.fp8_dispatch = fp8;
    const Plan plan = BuildPlan(m, d, t);
    cpu::CpuBackend backend;
    const ReplayReport r = ReplayRank(plan, Options(11), backend);
    CHECK(r.passed());
    const CostBreakdown cost = SimulateStep(plan, ClusterPreset("h200-sxm"), SampleRoutingForPlan(plan, RoutingSpec{}, 1));
    int found = 0;
    for (const ReplayPhase& p : r.phases) {
      if (p.name != "dispatch" && p.name != "combine") continue;
      CHECK(p.source == "cost model");
      CHECK(p.time_us > 0);  // 2 nodes: some rows cross the network
      for (const PhaseCost& c : cost.phases) {
        if (PhaseName(c.phase) == std::string(p.name) && c.layer_kind == LayerKind::kMoe && c.direction == Direction::kForward) {
          REQUIRE(c.per_ep_rank_us.size() == 16);
          CHECK(p.time_us == c.per_ep_rank_us[11]);
          ++found;
        }
      }
    }
    CHECK(found == 2);
  }
}

TEST_CASE("replay with TP-sharded experts computes the rank's slice of the intermediate dim") {
  const Plan plan = SmallPlan(4, 2, /*tp=*/2, /*etp=*/2);
  cpu::CpuBackend backend;
  const ReplayReport r = ReplayRank(plan, Options(1), backend);
  CHECK(r.f_end - r.f_begin == 16);  // F 32 over etp 2
  CHECK(r.passed());
}

// A backend whose expert GEMM is wrong by 1% on every output: validation must catch it.
class WrongGemmOps : public ComputeOps {
 public:
  explicit WrongGemmOps(ComputeOps& inner) : in_(inner) {}
  void Gemm(const GemmArgs& a) override { in_.Gemm(a); }
  void GroupedGemm(const GroupedGemmArgs& a) override {
    in_.GroupedGemm(a);
    if (a.n == 64 && a.accumulate) {  // the down projection (n = hidden)
      const int64_t rows = a.offsets[a.num_groups];
      for (int64_t i = 0; i < rows * a.n; ++i) a.c[i] *= 1.01f;
    }
  }
  void GatherRows(const float* s, const int64_t* i, int64_t n, int64_t e, float* d) override { in_.GatherRows(s, i, n, e, d); }
  void ScatterRows(const float* s, const int64_t* i, int64_t n, int64_t e, float* d) override { in_.ScatterRows(s, i, n, e, d); }
  void CopyRowBlocks(const float* s, float* d, const std::vector<RowBlock>& b, int64_t e) override { in_.CopyRowBlocks(s, d, b, e); }
  void SwiGlu(const float* g, const float* u, float* o, int64_t n) override { in_.SwiGlu(g, u, o, n); }
  void Softmax(float* x, int64_t r, int64_t c) override { in_.Softmax(x, r, c); }
  void Sigmoid(float* x, int64_t n) override { in_.Sigmoid(x, n); }
  void AddRowBias(const float* x, const float* b, int64_t r, int64_t c, float* o) override { in_.AddRowBias(x, b, r, c, o); }
  void GroupSelect(float* x, int64_t r, int64_t c, int64_t g, int64_t kg, bool t) override { in_.GroupSelect(x, r, c, g, kg, t); }
  void TopK(const float* x, int64_t r, int64_t c, int64_t k, int64_t* i) override { in_.TopK(x, r, c, k, i); }
  void RouterWeights(const float* s, const int64_t* i, int64_t r, int64_t c, int64_t k, bool n, float sc, float* w) override {
    in_.RouterWeights(s, i, r, c, k, n, sc, w);
  }
  void WeightedCombine(const float* r, const int64_t* s, const float* w, int64_t t, int64_t k, int64_t e, float* o) override {
    in_.WeightedCombine(r, s, w, t, k, e, o);
  }
  void Add(const float* x, float* y, int64_t n) override { in_.Add(x, y, n); }
  void ScaleRows(float* x, const float* s, int64_t r, int64_t e) override { in_.ScaleRows(x, s, r, e); }
  void Fill(float* x, float v, int64_t n) override { in_.Fill(x, v, n); }
  void FillTokens(uint64_t s, int64_t src, int64_t f, int64_t n, int64_t h, float* o) override { in_.FillTokens(s, src, f, n, h, o); }
  void FillWeightRows(const WeightRowsArgs& a) override { in_.FillWeightRows(a); }

 private:
  ComputeOps& in_;
};

class WrongGemmBackend : public Backend {
 public:
  std::string name() const override { return "cpu (wrong gemm)"; }
  void RunRanks(const std::vector<RankSpec>& ranks, const RankBody& body) override {
    inner_.RunRanks(ranks, [&](RankContext& ctx) {
      struct Ctx : RankContext {
        RankContext& in;
        WrongGemmOps wrong;
        explicit Ctx(RankContext& c) : in(c), wrong(c.ops()) {}
        int64_t rank() const override { return in.rank(); }
        Device& device() override { return in.device(); }
        ComputeOps& ops() override { return wrong; }
        Communicator& group(const std::string& l) override { return in.group(l); }
      } wrapped(ctx);
      body(wrapped);
    });
  }

 private:
  cpu::CpuBackend inner_;
};

TEST_CASE("a 1% error in the expert GEMM fails the replay's validation") {
  const Plan plan = SmallPlan(2, 2);
  WrongGemmBackend backend;
  const ReplayReport r = ReplayRank(plan, Options(0), backend);
  CHECK(r.wrong > 0);
  CHECK_FALSE(r.passed());
}

TEST_CASE("replay of layer 1 with pp 2 runs a stage-1 rank; a per-layer trace gives that layer's rows") {
  // TinyMoe: 8 experts, top-2, 2 MoE layers; pp 2 puts layer 1 on ranks 2..3 of a 4-rank world.
  ModelSpec m = testing::TinyMoe();
  ParallelDimsOptions d;
  d.world_size = 4;
  d.ep = 2;
  d.pp = 2;
  TrainingConfig t;
  t.seq_len = 1000;  // 1000 tokens x top-2 = 2000 assignments per source EP rank
  const Plan plan = BuildPlan(m, d, t);
  cpu::CpuBackend backend;
  ReplayOptions o = Options(3);
  o.layer = 1;
  o.routing = ParseRoutingSpec("trace:testdata/routing/tiny_trace.json");
  const ReplayReport r = ReplayRank(plan, o, backend);
  CHECK(r.layer == 1);
  CHECK(r.routing_layer == 1);
  CHECK(r.ep_rank == 1);  // rank 3 = stage 1's second rank
  CHECK(r.first_expert == 4);
  CHECK(r.passed());
  // Layer 1 of the trace sends 20+40+60+80 = 200 of each 1000 to experts 0..3 and 800 to 4..7
  // (the other layer is the reverse): rank 3, owning 4..7, receives about 80% of the 2 x 2000
  // assignments of the two sources. Top-2 distinct experts per token flatten the skew a little.
  CHECK(r.received_rows > 2 * 2000 * 0.7);
  CHECK(r.received_rows < 2 * 2000 * 0.9);
  o.layer = 0;  // layer 0 lives on stage 0: rank 3 is not in it
  CHECK_THROWS_WITH_AS(ReplayRank(plan, o, backend), doctest::Contains("not a rank of pipeline stage 0"), Error);
}

TEST_CASE("replay routes with the model's router: the score bias and the group limit, as the runtime's reference does") {
  // TinyDeepSeek: 16 experts, top-4, sigmoid + score bias. In 4 groups of 4 with one group kept,
  // a token's 4 experts can only be the 4 of its group {4g, ..., 4g + 3}; a plain top-4 over the
  // 16 scores picks across groups.
  ModelSpec m = testing::TinyDeepSeek();
  m.moe.n_group = 4;
  m.moe.topk_group = 1;
  ParallelDimsOptions d;
  d.world_size = 4;
  d.ep = 4;
  TrainingConfig t;
  t.seq_len = 64;  // T = 64 tokens per rank
  const Plan plan = BuildPlan(m, d, t);
  cpu::CpuBackend backend;
  std::vector<int64_t> per_expert(16, 0);
  for (int64_t rank = 0; rank < 4; ++rank) {
    std::vector<int64_t> experts;
    ReplayOptions o = Options(rank);
    o.router_experts = &experts;
    const ReplayReport r = ReplayRank(plan, o, backend);
    CHECK(r.passed());
    REQUIRE(experts.size() == 64 * 4);
    for (int64_t tok = 0; tok < 64; ++tok) {
      std::vector<int64_t> e(experts.begin() + tok * 4, experts.begin() + tok * 4 + 4);
      std::sort(e.begin(), e.end());
      const int64_t g = e[0] / 4;
      CAPTURE(rank);
      CAPTURE(tok);
      CHECK(e == std::vector<int64_t>{4 * g, 4 * g + 1, 4 * g + 2, 4 * g + 3});
      for (int64_t x : e) ++per_expert[static_cast<size_t>(x)];
    }
  }
  // The multi-rank runtime's reference routes the same tokens (seed 0, sources 0..3, 64 each)
  // with the same bias: the same tokens per expert.
  RunOptions ro;
  ro.tokens_per_rank = 64;
  CHECK(per_expert == ComputeReference(MakeRunConfig(plan, ro), 1).tokens_per_expert);
}

TEST_CASE("replay errors: a rank outside the layer's stage, bad iteration counts") {
  cpu::CpuBackend backend;
  const Plan pp2 = SmallPlan(4, 2, 1, 1, /*pp=*/2);  // layer 0 lives in stage 0: ranks 0..1
  CHECK_THROWS_WITH_AS(ReplayRank(pp2, Options(3), backend), doctest::Contains("--replay-rank 3: not a rank of pipeline stage 0"), Error);
  ReplayOptions o = Options(0);
  o.iters = 0;
  CHECK_THROWS_WITH_AS(ReplayRank(SmallPlan(2, 2), o, backend), "replay: iters must be >= 1, got 0", Error);
  o = Options(0);
  o.atol = -1;
  CHECK_THROWS_WITH_AS(ReplayRank(SmallPlan(2, 2), o, backend), "atol must be a finite number >= 0, got -1", Error);
}

}  // namespace
}  // namespace dockyard::runtime
