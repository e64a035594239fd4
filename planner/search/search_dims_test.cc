// The search beyond the degrees: a fixed global batch, micro-batch size, recompute, vpp, dp
// sharding, EP overlap and dispatcher as dimensions; pins; exact pruning; threads; explain.
// On a small world the search equals a brute force over every dimension evaluated through the
// plan path that simulate runs (BuildPlan + ComputeMemory + SimulateStep).
#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <tuple>

#include <doctest/doctest.h>
#include <fmt/format.h>

#include "planner/accounting/memory.h"
#include "planner/base/error.h"
#include "planner/layout/plan.h"
#include "planner/model/global_batch.h"
#include "planner/search/explain.h"
#include "planner/search/search.h"
#include "planner/routing/plan_routing.h"
#include "planner/model/model_file.h"
#include "tests/test_models.h"

namespace dockyard {
namespace {

// degrees, dispatcher, dp sharding, mbs, recompute, vpp, EP overlap
using RowKey =
    std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, Dispatcher, std::string, int64_t, std::string, int64_t, bool>;

RowKey KeyOf(const RankedLayout& x) {
  const auto& d = x.layout.dims;
  return {d.pp,        d.dp_replicate, d.dp_shard,           d.cp,          d.tp,
          d.ep,        EtpOf(d),          x.layout.dispatcher,  x.dp_sharding, x.micro_batch_size,
          x.recompute, x.vpp,          x.overlap_moe_ep_comm};
}

// TinyMixtral with 4 MoE layers (pp up to 4, vpp 2 at pp 2), 8 GPUs on 2 nodes of 4 (EP groups of
// 8 span nodes: the deredundency dispatcher is searched too).
ModelSpec FourLayerTiny() {
  ModelSpec m = testing::TinyMixtral();
  m.num_hidden_layers = 4;
  m.moe_layers = {true, true, true, true};
  return m;
}

SearchOptions EveryDimension(Convention convention) {
  SearchOptions o;
  o.world_size = 8;
  o.convention = convention;
  o.cluster.gpus_per_node = 4;
  o.training.seq_len = 256;
  o.routing_layers = 1;
  o.top = 1 << 30;
  o.keep_all = true;
  o.global_batch_size = 8;  // 8 sequences: dp 8 at micro-batch 2 does not divide it
  o.micro_batch_sizes = {1, 2, 4};
  o.recomputes = {Recompute::kNone, Recompute::kSelective, Recompute::kFull};
  o.vpps = {1, 2};
  o.dp_shardings = convention == Convention::kMegatron ? std::vector<DpSharding>{DpSharding::kZero1, DpSharding::kDdp}
                                                       : std::vector<DpSharding>{DpSharding::kFsdp, DpSharding::kDdp};
  o.ep_overlaps = convention == Convention::kMegatron ? std::vector<bool>{false, true} : std::vector<bool>{false};
  return o;
}

struct Brute {
  std::map<RowKey, std::pair<double, int64_t>> ranked;  // step time, peak bytes
  int64_t over_budget = 0;
};

// Every combination, each through the plan path simulate runs; the global batch resolved by
// ResolveGlobalBatch from the built degrees.
Brute BruteForce(const ModelSpec& model, const SearchOptions& o) {
  Brute out;
  const double budget = o.gpu_memory_gib * 1073741824.0;
  const bool megatron = o.convention == Convention::kMegatron;
  for (int64_t pp = 1; pp <= 8; ++pp)
    for (int64_t dpr = 1; dpr <= 8; ++dpr)
      for (int64_t cp = 1; cp <= 8; ++cp)
        for (int64_t tp = 1; tp <= 8; ++tp)
          for (int64_t ep = 1; ep <= 8; ++ep)
            for (int64_t etp = 1; etp <= 8; ++etp) {
              // The search space's bounds (search.h): no replicate axis under Megatron, TP inside a
              // node, etp 1 or tp.
              if (megatron && dpr > 1) continue;
              if (tp > o.cluster.gpus_per_node || (etp != 1 && etp != tp)) continue;
              const ParallelDimsOptions dims{8, dpr, -1, cp, tp, ep, etp, pp, o.convention};
              ParallelDims built;
              try {
                built = ParallelDims::Build(dims);
              } catch (const Error&) {
                continue;
              }
              std::vector<Dispatcher> dispatchers = {Dispatcher::kAllToAll};
              if (ep * etp > o.cluster.gpus_per_node) dispatchers.push_back(Dispatcher::kDeredundency);
              for (Dispatcher dispatcher : dispatchers)
                for (DpSharding sharding : o.dp_shardings)
                  for (int64_t mbs : o.micro_batch_sizes)
                    for (Recompute recompute : o.recomputes)
                      for (int64_t vpp : o.vpps)
                        for (bool overlap : o.ep_overlaps) {
                          if (vpp > 1 && pp == 1) continue;  // not a setting of a one-stage layout
                          if (overlap && ep == 1) continue;  // nor EP overlap without EP
                          const int64_t dp = built.dp_replicate * built.dp_shard;
                          if (GlobalBatchMismatch(o.global_batch_size, dp, mbs, pp, megatron, std::nullopt)) continue;
                          const GlobalBatchSchedule g = ResolveGlobalBatch(o.global_batch_size, dp, mbs, pp, megatron, std::nullopt);
                          TrainingConfig t = o.training;
                          t.dispatcher = dispatcher;
                          t.dp_sharding = sharding;
                          t.micro_batch_size = mbs;
                          t.recompute = recompute;
                          t.run.vpp = vpp;
                          t.run.overlap_moe_ep_comm = overlap;
                          t.num_microbatches = g.num_microbatches;
                          t.run.grad_accumulation_steps = g.grad_accumulation_steps;
                          Machine machine;
                          machine.gpus_per_node = o.cluster.gpus_per_node;
                          machine.gpu_memory_gib = o.gpu_memory_gib;
                          Plan plan;
                          try {
                            plan = BuildPlan(model, dims, t, machine);
                          } catch (const Error&) {
                            continue;
                          }
                          const MemoryReport memory = ComputeMemory(plan);
                          if (static_cast<double>(memory.worst_peak_bytes) > budget) {
                            ++out.over_budget;
                            continue;
                          }
                          const CostBreakdown cost = SimulateStep(plan, o.cluster, SampleRoutingForPlan(plan, o.routing, 1), o.compute_model);
                          out.ranked[{pp, dpr, plan.dims.dp_shard, cp, tp, ep, etp, dispatcher, DpShardingName(sharding), mbs,
                                      RecomputeName(recompute), vpp, overlap}] = {cost.step_time_us, memory.worst_peak_bytes};
                        }
            }
  return out;
}

void CheckSearchEqualsBruteForce(Convention convention, bool every_vpp = false) {
  const ModelSpec model = FourLayerTiny();
  SearchOptions o = EveryDimension(convention);
  if (every_vpp) {
    // The search takes vpp 1..MaxVpp(pp, 4 layers): 1..3 at pp 2, 1 at pp 4 and 8 ((4 + 2) / pp).
    // The brute force tries 1..3 at every pp; the plan path refuses pp x vpp > 6 chunks.
    o.every_vpp = true;
    o.vpps = {1, 2, 3};
  }
  // A budget that drops some layouts: the median peak of an unbounded search.
  o.gpu_memory_gib = 1000;
  const SearchResult unbounded = SearchLayouts(model, o);
  REQUIRE(unbounded.ranked > 10);
  std::vector<int64_t> peaks;
  for (const auto& x : unbounded.all) peaks.push_back(x.peak_bytes);
  std::sort(peaks.begin(), peaks.end());
  o.gpu_memory_gib = static_cast<double>(peaks[peaks.size() / 2]) / 1073741824.0;
  const SearchResult result = SearchLayouts(model, o);
  const Brute brute = BruteForce(model, o);
  CHECK(result.over_budget > 0);
  CHECK(result.not_divisible > 0);  // dp 8 x micro-batch 2 does not divide 8 sequences
  CHECK(result.over_budget == brute.over_budget);
  {
    std::set<RowKey> searched;
    for (const auto& x : result.all) searched.insert(KeyOf(x));
    int shown = 0;
    for (const auto& [k, v] : brute.ranked) {
      if (searched.count(k) || shown++ > 5) continue;
      MESSAGE(fmt::format("missing pp {} dpr {} dps {} cp {} tp {} ep {} etp {} {} {} mbs {} {} vpp {} ov {}", std::get<0>(k),
                          std::get<1>(k), std::get<2>(k), std::get<3>(k), std::get<4>(k), std::get<5>(k), std::get<6>(k),
                          DispatcherName(std::get<7>(k)), std::get<8>(k), std::get<9>(k), std::get<10>(k), std::get<11>(k),
                          std::get<12>(k)));
    }
  }
  REQUIRE(result.ranked == static_cast<int64_t>(brute.ranked.size()));
  std::set<std::string> recomputes;
  std::set<int64_t> vpps, mbs;
  std::set<bool> overlaps;
  for (const auto& x : result.all) {
    const auto it = brute.ranked.find(KeyOf(x));
    REQUIRE(it != brute.ranked.end());
    // The fast path and simulate's path agree to the bit.
    CHECK(x.step_time_us == it->second.first);
    CHECK(x.peak_bytes == it->second.second);
    recomputes.insert(x.recompute);
    vpps.insert(x.vpp);
    mbs.insert(x.micro_batch_size);
    overlaps.insert(x.overlap_moe_ep_comm);
  }
  // Every searched value of every dimension appears among the ranked layouts.
  CHECK(recomputes.size() == 3);
  CHECK(vpps.size() == o.vpps.size());  // {1, 2}; every_vpp: {1, 2, 3}
  CHECK(mbs.size() == 3);
  CHECK(overlaps.size() == o.ep_overlaps.size());
  // The winner is the brute force's fastest layout.
  double best = 1e300;
  for (const auto& [key, v] : brute.ranked) best = std::min(best, v.first);
  CHECK(result.top.front().step_time_us == best);
}

// Every key of --explain for `x`: it matches `x` alone.
std::string QueryOf(const RankedLayout& x) {
  const auto& d = x.layout.dims;
  return fmt::format("pp={},dpr={},dps={},cp={},tp={},ep={},etp={},vpp={},mbs={},recompute={},dispatcher={},dp_sharding={},overlap={}",
                     d.pp, d.dp_replicate, d.dp_shard, d.cp, d.tp, d.ep, EtpOf(d), x.vpp, x.micro_batch_size, x.recompute,
                     DispatcherName(x.layout.dispatcher), x.dp_sharding, x.overlap_moe_ep_comm ? "on" : "off");
}

}  // namespace

TEST_CASE("On 8 GPUs the search over every dimension equals a brute force through the plan path (torchtitan)") {
  CheckSearchEqualsBruteForce(Convention::kTorchtitan);
}

TEST_CASE("On 8 GPUs the search over every dimension equals a brute force through the plan path (megatron, EP overlap)") {
  CheckSearchEqualsBruteForce(Convention::kMegatron);
}

TEST_CASE("On 8 GPUs the search over every vpp the chunk rule allows equals a brute force through the plan path") {
  CheckSearchEqualsBruteForce(Convention::kTorchtitan, /*every_vpp=*/true);
}

TEST_CASE("Every ranked layout processes exactly the global batch asked for") {
  const ModelSpec model = FourLayerTiny();
  SearchOptions o = EveryDimension(Convention::kTorchtitan);
  o.gpu_memory_gib = 1000;
  o.global_batch_size = 16;
  const SearchResult result = SearchLayouts(model, o);
  REQUIRE(result.ranked > 0);
  bool accumulates = false;
  for (const auto& x : result.all) {
    const auto& d = x.layout.dims;
    // dp x micro-batch size x micro-batches per schedule x schedules = 16 sequences.
    CHECK(d.dp_replicate * d.dp_shard * x.micro_batch_size * x.num_microbatches * x.grad_accumulation_steps == 16);
    CHECK(x.sequences_per_step == 16);
    accumulates = accumulates || x.grad_accumulation_steps > 1;
    // tokens/s per GPU x step = the global batch's tokens / GPUs: 16 x 256 / 8 = 512 tokens per GPU.
    CHECK(x.tokens_per_s_per_gpu * x.step_time_us * 1e-6 == doctest::Approx(512.0));
  }
  CHECK_FALSE(accumulates);  // torchtitan's default: local_batch_size = 16 / dp, one schedule of every micro-batch
  // --num-microbatches 2 sets torchtitan's schedule: e.g. pp 2, dp 1, mbs 1: 16 micro-batches = 8 schedules of 2.
  o.training.num_microbatches = 2;
  const SearchResult pinned = SearchLayouts(model, o);
  REQUIRE(pinned.ranked > 0);
  for (const auto& x : pinned.all) {
    const auto& d = x.layout.dims;
    CHECK(d.dp_replicate * d.dp_shard * x.micro_batch_size * x.num_microbatches * x.grad_accumulation_steps == 16);
    if (d.pp > 1) CHECK(x.num_microbatches == 2);
    accumulates = accumulates || x.grad_accumulation_steps > 1;
  }
  CHECK(accumulates);
}

TEST_CASE("Pinned degrees and settings hold in every row") {
  const ModelSpec model = FourLayerTiny();
  SearchOptions o = EveryDimension(Convention::kMegatron);
  o.gpu_memory_gib = 1000;
  o.pins.tp = 2;
  o.pins.pp = 2;
  o.recomputes = {Recompute::kSelective};
  o.dispatchers = {Dispatcher::kAllToAll};
  o.vpps = {2};
  o.micro_batch_sizes = {1};
  o.ep_overlaps = {true};
  const SearchResult result = SearchLayouts(model, o);
  REQUIRE(result.ranked > 0);
  for (const auto& x : result.all) {
    CHECK(x.layout.dims.tp == 2);
    CHECK(x.layout.dims.pp == 2);
    CHECK(x.recompute == "selective");
    CHECK(x.layout.dispatcher == Dispatcher::kAllToAll);
    CHECK(x.vpp == 2);
    CHECK(x.micro_batch_size == 1);
    CHECK(x.overlap_moe_ep_comm);
    CHECK(x.layout.dims.ep > 1);  // EP overlap needs ep > 1
  }
}

TEST_CASE("Pruning by the static-memory bound and threads change no count and no row") {
  const auto model = LoadModel("testdata/hf/qwen3-30b-a3b.json");
  SearchOptions o;
  o.world_size = 16;
  o.gpu_memory_gib = 60;  // ep 1 keeps 28.99B expert parameters 16 ways: static memory alone is over
  o.routing_layers = 1;
  o.top = 1 << 30;
  o.keep_all = true;
  o.global_batch_size = 32;
  o.micro_batch_sizes = {1, 2};
  o.recomputes = {Recompute::kSelective, Recompute::kFull};
  o.vpps = {1, 2};
  o.prune = false;
  const SearchResult full = SearchLayouts(model, o);
  o.prune = true;
  const SearchResult pruned = SearchLayouts(model, o);
  o.threads = 3;
  const SearchResult threaded = SearchLayouts(model, o);
  CHECK(full.pruned == 0);
  CHECK(pruned.pruned > 0);
  CHECK(threaded.pruned == pruned.pruned);
  for (const SearchResult* r : {&pruned, &threaded}) {
    CHECK(r->enumerated == full.enumerated);
    CHECK(r->invalid == full.invalid);
    CHECK(r->over_budget == full.over_budget);
    CHECK(r->not_divisible == full.not_divisible);
    REQUIRE(r->all.size() == full.all.size());
    for (size_t i = 0; i < full.all.size(); ++i) {
      CHECK(KeyOf(r->all[i]) == KeyOf(full.all[i]));
      CHECK(r->all[i].step_time_us == full.all[i].step_time_us);
    }
    REQUIRE(r->pareto.size() == full.pareto.size());
  }
  CHECK(full.enumerated == full.invalid + full.over_budget + full.not_divisible + full.ranked);
}

TEST_CASE("Without keep_all the search keeps only the best rows and the front, and they equal those of the whole ranking") {
  // DeepSeek-V3 on 256 GPUs over micro-batch size, recompute, vpp, dp sharding and the allgather
  // dispatcher beside all_to_all and deredundency: over 12,288
  // layouts fit, so each thread's rows are cut to the best `top` and the Pareto front several
  // times (at 4,096 rows, then whenever they double). The top 25 and the front must be those of the
  // full ranking (keep_all sorts every ranked row), row for row, and the counts unchanged.
  const auto model = LoadModel("testdata/hf/deepseek-v3.json");
  SearchOptions o;
  o.world_size = 256;
  o.convention = Convention::kTorchtitan2026_03;  // expert TP and ep < tp too: enough rows to compact
  o.routing_layers = 1;
  o.top = 25;
  o.global_batch_size = 512;
  o.micro_batch_sizes = {1, 2, 4};
  o.recomputes = {Recompute::kNone, Recompute::kSelective, Recompute::kFull};
  o.vpps = {1, 2, 4};
  o.dp_shardings = {DpSharding::kFsdp, DpSharding::kDdp};
  o.include_allgather = true;
  o.keep_all = true;
  const SearchResult all = SearchLayouts(model, o);
  REQUIRE(all.ranked > 3 * 4096);  // compaction runs more than once
  o.keep_all = false;
  for (int threads : {1, 2}) {
    o.threads = threads;
    const SearchResult kept = SearchLayouts(model, o);
    CHECK(kept.all.empty());
    CHECK(kept.ranked == all.ranked);
    CHECK(kept.over_budget == all.over_budget);
    CHECK(kept.invalid == all.invalid);
    REQUIRE(kept.top.size() == all.top.size());
    for (size_t i = 0; i < all.top.size(); ++i) {
      CHECK(KeyOf(kept.top[i]) == KeyOf(all.top[i]));
      CHECK(kept.top[i].step_time_us == all.top[i].step_time_us);
    }
    REQUIRE(kept.pareto.size() == all.pareto.size());
    for (size_t i = 0; i < all.pareto.size(); ++i) {
      CHECK(KeyOf(kept.pareto[i]) == KeyOf(all.pareto[i]));
      CHECK(kept.pareto[i].peak_bytes == all.pareto[i].peak_bytes);
    }
  }
  CHECK(all.pareto.size() >= 3);
}

TEST_CASE("Two threads share the routing samples and give the rows and counts of one, under all four dispatchers") {
  // Qwen3-30B-A3B on 32 GPUs of 4-GPU nodes with deepep and allgather searched: each (ep, routed
  // tokens, oep) routing sample is drawn once for the whole search, whichever thread asks first,
  // so both runs draw the same number of samples and every row is the same to the bit.
  const auto model = LoadModel("testdata/hf/qwen3-30b-a3b.json");
  SearchOptions o;
  o.world_size = 32;
  o.cluster.gpus_per_node = 4;
  o.training.seq_len = 512;
  o.routing_layers = 1;
  o.top = 1 << 30;
  o.keep_all = true;
  o.global_batch_size = 64;
  o.micro_batch_sizes = {1, 2};
  o.recomputes = {Recompute::kSelective, Recompute::kFull};
  o.include_deepep = true;
  o.include_allgather = true;
  const SearchResult one = SearchLayouts(model, o);
  o.threads = 2;
  const SearchResult two = SearchLayouts(model, o);
  CHECK(one.routing_samples > 1);
  CHECK(two.routing_samples == one.routing_samples);  // not drawn again by the second thread
  CHECK(two.enumerated == one.enumerated);
  CHECK(two.invalid == one.invalid);
  CHECK(two.over_budget == one.over_budget);
  CHECK(two.pruned == one.pruned);
  CHECK(two.not_divisible == one.not_divisible);
  REQUIRE(two.all.size() == one.all.size());
  std::set<Dispatcher> dispatchers;
  for (size_t i = 0; i < one.all.size(); ++i) {
    CHECK(KeyOf(two.all[i]) == KeyOf(one.all[i]));
    CHECK(two.all[i].step_time_us == one.all[i].step_time_us);
    CHECK(two.all[i].peak_bytes == one.all[i].peak_bytes);
    dispatchers.insert(one.all[i].layout.dispatcher);
  }
  CHECK(dispatchers == std::set<Dispatcher>{Dispatcher::kAllToAll, Dispatcher::kAllGather, Dispatcher::kDeepEp, Dispatcher::kDeredundency});
}

TEST_CASE("A global batch that divides no layout ranks nothing and counts every candidate as not divisible") {
  const ModelSpec model = FourLayerTiny();
  SearchOptions o = EveryDimension(Convention::kTorchtitan);
  o.global_batch_size = 3;  // 3 sequences at micro-batch 2: never a whole number of micro-batches
  o.micro_batch_sizes = {2};
  const SearchResult result = SearchLayouts(model, o);
  CHECK(result.ranked == 0);
  CHECK(result.enumerated > 0);
  CHECK(result.not_divisible == result.enumerated);
}

// The explain tests' search: every dimension of the four-layer model, every layout in budget.
struct ExplainSearch {
  ModelSpec model = FourLayerTiny();
  SearchOptions o = [] {
    SearchOptions x = EveryDimension(Convention::kTorchtitan);
    x.gpu_memory_gib = 1000;
    return x;
  }();
  SearchResult result = SearchLayouts(model, o);
};

TEST_CASE("Explain: no line of the breakdown is negative; overlapped time is its own line, and the diffs add up") {
  // FSDP's all-gathers run under the layer's compute, so a layer's phase shares can add up to more
  // than the step: the excess is the "overlapped" line (subtracted), not a negative "other".
  const ExplainSearch s;
  const ModelSpec& model = s.model;
  const SearchOptions& o = s.o;
  const SearchResult& result = s.result;
  REQUIRE(result.ranked > 2);
  bool saw_overlapped = false;
  for (size_t i = 0; i < result.all.size(); i += std::max<size_t>(1, result.all.size() / 40)) {
    const ExplainResult e = ExplainLayout(model, o, result, ParseLayoutQuery(QueryOf(result.all[i])));
    double sum = 0;
    for (const auto& d : e.differences) {
      CAPTURE(d.phase);
      CHECK(d.winner_us >= 0);
      CHECK(d.layout_us >= 0);
      sum += d.difference_us();
      saw_overlapped |= d.phase == "overlapped" && (d.winner_us > 0 || d.layout_us > 0);
    }
    CHECK(sum == doctest::Approx(e.layout->step_time_us - e.winner->step_time_us).epsilon(1e-9));
  }
  CHECK(saw_overlapped);
}

TEST_CASE("Explain: the winner is rank 1; another layout shows the phases that make the difference") {
  const ExplainSearch s;
  const ModelSpec& model = s.model;
  const SearchOptions& o = s.o;
  const SearchResult& result = s.result;
  REQUIRE(result.ranked > 2);
  const std::string winner = QueryOf(result.all.front());
  const ExplainResult e = ExplainLayout(model, o, result, ParseLayoutQuery(winner));
  CHECK(e.rank == 1);
  CHECK(ExplainToText(e).find("rank 1 of") != std::string::npos);
  // The slowest ranked layout: its rank is the last, and its step is slower by the difference shown.
  const RankedLayout& last = result.all.back();
  const std::string query = QueryOf(last);
  const ExplainResult slow = ExplainLayout(model, o, result, ParseLayoutQuery(query));
  CHECK(slow.rank >= 2);
  CHECK(slow.layout->step_time_us == last.step_time_us);
  CHECK(slow.layout->step_time_us > slow.winner->step_time_us);
  // Whether the difference is larger than the error of a difference (prediction_error.h): said in
  // the text and the JSON, as the row's vs_best says.
  const bool apart = !slow.layout->vs_best.tied;
  CHECK(ExplainToJson(slow).at("difference_larger_than_error").get<bool>() == apart);
  CHECK(ExplainToText(slow).find(apart ? "larger than its error -- the winner is faster" : "not larger than its error") !=
        std::string::npos);
  CHECK(ExplainToJson(e).at("difference_larger_than_error").get<bool>() == false);  // the winner against itself
  REQUIRE_FALSE(slow.differences.empty());
  CHECK(std::fabs(slow.differences.front().difference_us()) > 0);
  // With "other" (the step time no phase's share covers) the differences add up to the step's.
  double sum = 0;
  for (const auto& d : slow.differences) sum += d.difference_us();
  CHECK(sum == doctest::Approx(slow.layout->step_time_us - slow.winner->step_time_us).epsilon(1e-9));
  // A layout that is never ranked: said, with the outcome of the candidates matching it (dp 8 at
  // micro-batch 4: 8 sequences / (8 x 4) is not whole, so every match is not divisible).
  const ExplainResult none = ExplainLayout(model, o, result, ParseLayoutQuery("dps=8,dpr=1,mbs=4"));
  CHECK(none.rank == 0);
  CHECK(none.matching > 0);
  CHECK(none.matching_not_divisible == none.matching);
  // A layout no candidate of the search can be: an error naming the key and the rule.
  CHECK_THROWS_WITH_AS(ExplainLayout(model, o, result, ParseLayoutQuery("tp=3")),
                       "--explain \"tp=3\": tp=3 does not divide the world size 8 (every degree is a factor of it)", Error);
  CHECK_THROWS_WITH_AS(ParseLayoutQuery("dispatch=deepep"), doctest::Contains("did you mean 'dispatcher'?"), Error);
  CHECK_THROWS_WITH_AS(ParseLayoutQuery("tp=two"), doctest::Contains("tp=two: expected a whole number"), Error);
}

}  // namespace dockyard

namespace dockyard {
namespace {

// Whether `x`'s schedule obeys interleaved 1F1B's micro-batch rule, by hand (pipeline_schedule.h):
// Megatron-Core M % pp == 0, torch.distributed.pipelining M % max(1, M / pp) == 0.
bool InterleavedRuleHolds(const RankedLayout& x, bool megatron) {
  const int64_t pp = x.layout.dims.pp, M = x.num_microbatches;
  if (pp < 2 || x.vpp < 2) return true;
  return megatron ? M % pp == 0 : M % std::max<int64_t>(1, M / pp) == 0;
}

TEST_CASE("Every ranked interleaved layout obeys its framework's micro-batch rule; the others count as invalid with its reason") {
  const ModelSpec model = FourLayerTiny();
  // torchtitan, 10 sequences: pp 2, vpp 2 at dp 1, mbs 1 runs M 10 (rounds 5, 10 % 5 = 0: ranked); at
  // dp 2, mbs 1 or dp 1, mbs 2 M 5 (rounds 2, 5 % 2 = 1: invalid).
  // megatron, 6 sequences: pp 2, vpp 2 at dp 1, mbs 1 runs M 6 (6 % 2 = 0: ranked); at dp 2 or mbs 2 M 3 (3 % 2 = 1: invalid).
  for (const auto& [convention, gbs, ok_m, bad_m] : {std::tuple<Convention, int64_t, int64_t, int64_t>{Convention::kTorchtitan, 10, 10, 5},
                                                     std::tuple<Convention, int64_t, int64_t, int64_t>{Convention::kMegatron, 6, 6, 3}}) {
    const bool megatron = convention == Convention::kMegatron;
    CAPTURE(megatron);
    SearchOptions o = EveryDimension(convention);
    o.gpu_memory_gib = 1000;
    o.global_batch_size = gbs;
    o.micro_batch_sizes = {1, 2};
    const SearchResult result = SearchLayouts(model, o);
    REQUIRE(result.ranked > 0);
    bool interleaved_ok = false;
    for (const auto& x : result.all) {
      CHECK(InterleavedRuleHolds(x, megatron));
      interleaved_ok = interleaved_ok || (x.vpp == 2 && x.num_microbatches == ok_m);
      CHECK_FALSE((x.vpp == 2 && x.num_microbatches == bad_m));
    }
    CHECK(interleaved_ok);
    int64_t refused = 0;
    for (const auto& [why, n] : result.invalid_reasons) {
      if (why.find(fmt::format("--num-microbatches {} (micro-batches per pipeline schedule", bad_m)) != std::string::npos) {
        CHECK(why.find(megatron ? "megatron/core/pipeline_parallel/schedules.py" : "torch/distributed/pipelining/schedules.py") !=
              std::string::npos);
        refused += n;
      }
    }
    CHECK(refused > 0);
  }
}

}  // namespace
}  // namespace dockyard
