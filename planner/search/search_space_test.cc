// The search request's rules: searched settings, opt-in dispatchers, refused run settings, routing
// layers and the empty-search message.
#include "planner/search/search_space.h"

#include <map>
#include <set>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "planner/base/error.h"
#include "planner/model/model_file.h"
#include "planner/model/pipeline_schedule.h"
#include "planner/search/search.h"
#include "tests/test_models.h"

using dockyard::DpSharding;
using dockyard::Error;
using dockyard::Recompute;

TEST_CASE("Unpinned settings are searched, by convention; pinned ones are left to the training") {
  dockyard::SearchOptions s;
  dockyard::ApplySearchedSettings({}, &s);
  CHECK(s.micro_batch_sizes == std::vector<int64_t>{1, 2, 4});
  // vpp: every value the chunk rule allows each layout (issue 31: published recipes use 3, 7, 8).
  CHECK(s.every_vpp);
  CHECK(s.vpps.empty());
  CHECK(s.recomputes == std::vector<Recompute>{Recompute::kNone, Recompute::kSelective, Recompute::kFull});
  // torchtitan applies FSDP2 / HSDP only (its MoE parallelize.py): fsdp, dp_shard 1 being replicate-only.
  CHECK(s.dp_shardings == std::vector<DpSharding>{DpSharding::kFsdp});
  CHECK(s.ep_overlaps.empty());  // a Megatron flag: off under torchtitan
  CHECK(s.dispatchers.empty());

  dockyard::SearchOptions m;
  m.convention = dockyard::Convention::kMegatron;
  dockyard::ApplySearchedSettings({}, &m);
  CHECK(m.dp_shardings == std::vector<DpSharding>{DpSharding::kZero1, DpSharding::kDdp});
  CHECK(m.ep_overlaps == std::vector<bool>{false, true});

  dockyard::SearchOptions p;
  p.convention = dockyard::Convention::kMegatron;
  dockyard::SearchSettingsPinned all{true, true, true, true, true, dockyard::Dispatcher::kDeepEp};
  dockyard::ApplySearchedSettings(all, &p);
  CHECK(p.micro_batch_sizes.empty());
  CHECK(p.recomputes.empty());
  CHECK(p.vpps.empty());
  CHECK_FALSE(p.every_vpp);
  CHECK(p.dp_shardings.empty());
  CHECK(p.ep_overlaps.empty());
  CHECK(p.dispatchers == std::vector<dockyard::Dispatcher>{dockyard::Dispatcher::kDeepEp});

  dockyard::SearchOptions sac;
  sac.training.selective_ac_option = "2";  // torchtitan's per-layer checkpointing: selective only
  dockyard::ApplySearchedSettings({}, &sac);
  CHECK(sac.recomputes == std::vector<Recompute>{Recompute::kSelective});
}

TEST_CASE("--search-dispatchers adds deepep and allgather, and names an unknown one") {
  dockyard::SearchOptions s;
  dockyard::ParseSearchDispatchers("", &s);
  CHECK_FALSE(s.include_deepep);
  CHECK_FALSE(s.include_allgather);
  dockyard::ParseSearchDispatchers("allgather,deepep", &s);
  CHECK(s.include_deepep);
  CHECK(s.include_allgather);
  CHECK_THROWS_WITH_AS(dockyard::ParseSearchDispatchers("deepep,nccl", &s), doctest::Contains("unknown dispatcher 'nccl'"), Error);
  CHECK_THROWS_WITH_AS(dockyard::ParseSearchDispatchers("deepep,", &s), doctest::Contains("unknown dispatcher ''"), Error);
}

TEST_CASE("--search-dispatchers all_to_all / deredundency: always searched, said so") {
  dockyard::SearchOptions s;
  CHECK_THROWS_WITH_AS(dockyard::ParseSearchDispatchers("all_to_all", &s),
                       "--search-dispatchers: 'all_to_all' is always searched (all_to_all for every layout, deredundency where an EP "
                       "group spans nodes); the list adds only the opt-in dispatchers deepep and allgather, comma-separated",
                       Error);
  CHECK_THROWS_WITH_AS(dockyard::ParseSearchDispatchers("deepep,deredundency", &s), doctest::Contains("'deredundency' is always searched"),
                       Error);
}

TEST_CASE("A pipeline layout or DualPipe cannot be searched") {
  CHECK_NOTHROW(dockyard::RejectUnsearchableRunSettings("", ""));
  CHECK_NOTHROW(dockyard::RejectUnsearchableRunSettings("", "1f1b"));
  CHECK_THROWS_WITH_AS(dockyard::RejectUnsearchableRunSettings("Et|tL", ""),
                       doctest::Contains("--pipeline-model-parallel-layout \"Et|tL\": a layout fixes pp x vpp stages"), Error);
  CHECK_THROWS_WITH_AS(dockyard::RejectUnsearchableRunSettings("", "dualpipe"), doctest::Contains("--pipeline-schedule dualpipe"), Error);
}

TEST_CASE("A search samples min(2, MoE layers) unless told; a trace is not range-checked; the header names a trace's every layer") {
  const dockyard::ModelSpec m = dockyard::testing::TinyMixtral();  // 2 MoE layers
  dockyard::RoutingSpec uniform;
  CHECK(dockyard::SearchRoutingLayers(m, uniform, std::nullopt) == 2);
  CHECK(dockyard::SearchRoutingLayers(m, uniform, 1) == 1);
  CHECK_THROWS_WITH_AS(dockyard::SearchRoutingLayers(m, uniform, 3), doctest::Contains("--routing-layers"), Error);
  dockyard::RoutingSpec trace;
  trace.kind = dockyard::RoutingKind::kTrace;
  CHECK(dockyard::SearchRoutingLayers(m, trace, std::nullopt) == 2);
  CHECK(dockyard::SearchRoutingLayers(m, trace, 5) == 5);

  dockyard::SearchOptions s;
  s.routing_layers = 1;
  CHECK(dockyard::HeaderRoutingLayers(m, s) == 1);
  s.routing = trace;
  CHECK(dockyard::HeaderRoutingLayers(m, s) == 2);
}

TEST_CASE("A fixed layer split is noted: only its stage count can be valid") {
  dockyard::TrainingConfig t;
  CHECK(dockyard::PinnedLayerSplitNote(t).empty());
  t.pp_layer_split = {7, 6};
  CHECK(dockyard::PinnedLayerSplitNote(t) ==
        "dockyard-plan search: note: the model's training block fixes pp_layer_split (2 stages): only pp = 2 can be valid\n");
}

TEST_CASE("An empty search says why after its counts") {
  dockyard::SearchResult r;
  const std::string counts = dockyard::SearchCountsText(r);
  CHECK(dockyard::EmptySearchText(r) == counts + "dockyard-plan search: no layout of this world size matches the pinned degrees\n");
  r.enumerated = 5;
  r.not_divisible = 5;
  r.global_batch_size = 6;
  CHECK(dockyard::EmptySearchText(r).find("the global batch (6 sequences) divides no layout") != std::string::npos);
  r.invalid = 3;
  CHECK(dockyard::EmptySearchText(r).find("no valid layout (every candidate breaks a rule") != std::string::npos);
  r.over_budget = 2;
  CHECK(dockyard::EmptySearchText(r) == dockyard::SearchCountsText(r) + "dockyard-plan search: no valid layout fits the budget\n");
}

TEST_CASE("--search-dispatchers lists each dispatcher once; a search's --gpu-memory-gib must be > 0") {
  dockyard::SearchOptions s;
  CHECK_THROWS_WITH_AS(dockyard::ParseSearchDispatchers("deepep,allgather,deepep", &s),
                       "--search-dispatchers deepep,allgather,deepep: 'deepep' is given twice (list each dispatcher once)", Error);
  CHECK_NOTHROW(dockyard::ValidateSearchBudgetFlag(std::nullopt));  // not given: the cluster's memory_gib
  CHECK_NOTHROW(dockyard::ValidateSearchBudgetFlag(80.0));
  CHECK_THROWS_WITH_AS(dockyard::ValidateSearchBudgetFlag(0.0), doctest::Contains("--gpu-memory-gib: must be > 0 in search, got 0"), Error);
  CHECK_THROWS_WITH_AS(dockyard::ValidateSearchBudgetFlag(-1.0), doctest::Contains("got -1"), Error);
}

TEST_CASE("The count line's budget and reserve keep every digit one decimal would round away") {
  dockyard::SearchResult r;
  r.budget_gib = 79.6;
  r.reserve_gib = 2;
  CHECK(dockyard::SearchCountsText(r).find("over the 79.6 GiB budget less the 2.0 GiB reserve") != std::string::npos);
  r.reserve_gib = 79.59;  // would print 79.6, the budget's figure
  CHECK(dockyard::SearchCountsText(r).find("over the 79.6 GiB budget less the 79.59 GiB reserve") != std::string::npos);
  r.budget_gib = 40;
  r.reserve_gib = 39.999;
  CHECK(dockyard::SearchCountsText(r).find("over the 40.0 GiB budget less the 39.999 GiB reserve") != std::string::npos);
}

TEST_CASE("The searched vpp values are 1..floor((layers + 2) / pp), the chunk rule's") {
  // DeepSeek-V3, 61 layers: (61 + 2) / 8 = 7 at pp 8, 63 / 16 = 3 at pp 16; published recipes run
  // vpp 3, 7 and 8 (8 at pp 4: 63 / 4 = 15).
  CHECK(dockyard::MaxVpp(8, 61) == 7);
  CHECK(dockyard::MaxVpp(16, 61) == 3);
  CHECK(dockyard::MaxVpp(4, 61) == 15);
  CHECK(dockyard::MaxVpp(1, 61) == 1);  // no pipeline, no interleaving
  CHECK_NOTHROW(dockyard::ValidateVppChunks(8, 7, 61));
  CHECK_THROWS_WITH_AS(dockyard::ValidateVppChunks(8, 8, 61), doctest::Contains("pp x vpp = 64 model chunks"), Error);
  // The candidates: Qwen3-30B-A3B (48 layers) on 64 GPUs, every vpp of each pp enumerated once per setting.
  const dockyard::ModelSpec model = dockyard::LoadModel("testdata/hf/qwen3-30b-a3b.json");
  dockyard::SearchOptions o;
  o.world_size = 64;
  dockyard::ApplySearchedSettings({}, &o);
  std::map<int64_t, std::set<int64_t>> vpps;  // pp -> vpp values enumerated
  dockyard::ForEachLayout(model, o, [&](const dockyard::LayoutCandidate& c) { vpps[c.dims.pp].insert(c.settings.vpp); });
  REQUIRE(vpps.count(8) == 1);
  for (const auto& [pp, values] : vpps) {
    const int64_t max = pp == 1 ? 1 : (48 + 2) / pp;  // 25 at pp 2, 12 at pp 4, 6 at pp 8, 3 at pp 16
    CHECK(static_cast<int64_t>(values.size()) == max);
    CHECK(*values.begin() == 1);
    CHECK(*values.rbegin() == max);
  }
  CHECK(*vpps[8].rbegin() == 6);
}

TEST_CASE("--recompute-modules applies to the selective candidates; none and full run without modules") {
  dockyard::TrainingConfig base;
  base.recompute = Recompute::kSelective;  // as the search CLI validates a list given without --recompute
  base.recompute_modules = {"layernorm", "moe_act"};
  dockyard::LayoutCandidate c;
  c.settings.recompute = Recompute::kSelective;
  CHECK(dockyard::CandidateTraining(base, c).recompute_modules == std::vector<std::string>{"layernorm", "moe_act"});
  c.settings.recompute = Recompute::kFull;
  CHECK(dockyard::CandidateTraining(base, c).recompute_modules.empty());
  c.settings.recompute = Recompute::kNone;
  CHECK(dockyard::CandidateTraining(base, c).recompute_modules.empty());
}
