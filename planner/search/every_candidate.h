// Test helper: the fast path (LayoutEvaluator::Evaluate, per parameter class) against the
// reference path (BuildPlan + ComputeMemory + ComputeWorkload + SimulateStep) for EVERY candidate
// of a search: the same validity, degrees, worst peak bytes and, for every valid candidate (over
// budget or not), bit-identical step time, tokens/s per GPU and MFU, the same dominant phase and
// the same breakdown; for every invalid candidate the same reason (the rule's message). Used by layout_eval_test.cc,
// layout_eval_models_test.cc and search_test.cc.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "planner/search/layout_eval.h"
#include "planner/search/search.h"
#include "planner/cost/network.h"

namespace dockyard::testing {

using dockyard::SearchOptions;

// A search on 8 GPUs where everything fits (a 1000 GiB budget): seq_len 256, every ranked layout
// kept (top 100000), one routing layer.
inline SearchOptions SmallSearch() {
  SearchOptions o;
  o.world_size = 8;
  o.training.seq_len = 256;
  o.gpu_memory_gib = 1000;
  o.top = 100000;
  o.routing_layers = 1;
  return o;
}

struct Coverage {
  int64_t candidates = 0, invalid = 0, over_budget = 0, ranked = 0, pp_gt_1 = 0, deredundency = 0, etp_gt_1 = 0, cp_gt_1 = 0;
  int64_t deepep = 0, allgather = 0, spanning_deepep = 0;  // valid candidates; deepep with an EP group over 2+ NVLink domains
  int64_t handed_to_reference = 0;                         // LayoutEvaluator::handed_to_reference
  int64_t flex_from_blocks = 0;                            // deepep groups counted from block counts (flex_blocks.h)
  int64_t routing_from_blocks = 0;                         // routing samples assembled from the same block counts
  std::set<std::string> dominant;
};

inline Coverage CompareEveryCandidate(const dockyard::ModelSpec& model, const SearchOptions& o) {
  using Status = dockyard::LayoutEvaluation::Status;
  dockyard::LayoutEvaluator evaluator(model, o);
  const std::vector<dockyard::LayoutCandidate> candidates = dockyard::EnumerateLayouts(model, o);
  evaluator.ExpectCandidates(candidates);  // as the search does: deepep groups read per-source block counts
  Coverage cov;
  for (const auto& c : candidates) {
    const auto& d = c.dims;
    CAPTURE(d.pp);
    CAPTURE(d.dp_replicate);
    CAPTURE(d.cp);
    CAPTURE(d.tp);
    CAPTURE(d.ep);
    const int64_t etp = dockyard::EtpOf(d);
    CAPTURE(etp);
    const std::string dispatcher = dockyard::DispatcherName(c.dispatcher);
    CAPTURE(dispatcher);
    dockyard::CostBreakdown fast_detail, ref_detail;  // the search's row breakdown (Breakdown) is the fast path's
    const auto fast = evaluator.Evaluate(c, /*simulate_over_budget=*/true, &fast_detail);
    const auto ref = evaluator.EvaluateReference(c, /*simulate_over_budget=*/true, &ref_detail);
    ++cov.candidates;
    REQUIRE(fast.status == ref.status);
    if (ref.status == Status::kInvalid) {
      ++cov.invalid;
      // The search counts it under the plan path's own message (SearchResult::invalid_reasons).
      CHECK(!fast.reason.empty());
      CHECK(fast.reason == ref.reason);
      continue;
    }
    (ref.status == Status::kOverBudget ? cov.over_budget : cov.ranked)++;
    cov.pp_gt_1 += d.pp > 1;
    cov.deredundency += c.dispatcher == dockyard::Dispatcher::kDeredundency;
    cov.deepep += c.dispatcher == dockyard::Dispatcher::kDeepEp;
    cov.allgather += c.dispatcher == dockyard::Dispatcher::kAllGather;
    cov.spanning_deepep += c.dispatcher == dockyard::Dispatcher::kDeepEp && d.ep * dockyard::EtpOf(d) > dockyard::NvlinkDomainGpus(o.cluster);
    cov.etp_gt_1 += dockyard::EtpOf(d) > 1;
    cov.cp_gt_1 += d.cp > 1;
    CHECK(fast.dims.dp_shard == ref.dims.dp_shard);
    CHECK(fast.dims.efsdp == ref.dims.efsdp);
    CHECK(fast.peak_bytes == ref.peak_bytes);
    CHECK(ref.peak_bytes > 0);
    REQUIRE(fast.simulated);
    REQUIRE(ref.simulated);
    // Exact equality of doubles on purpose: the fast path must not change a single bit.
    CHECK(fast.step_time_us == ref.step_time_us);
    CHECK(fast.tokens_per_s_per_gpu == ref.tokens_per_s_per_gpu);
    CHECK(fast.mfu == ref.mfu);
    CHECK(fast.dominant_phase == ref.dominant_phase);
    CHECK(fast_detail.critical_path == ref_detail.critical_path);
    CHECK(fast_detail.critical_path_us == ref_detail.critical_path_us);
    CHECK(fast_detail.pipeline_bubble_us == ref_detail.pipeline_bubble_us);
    CHECK(fast_detail.optimizer_us == ref_detail.optimizer_us);
    REQUIRE(fast_detail.phases.size() == ref_detail.phases.size());
    for (size_t i = 0; i < ref_detail.phases.size(); ++i) {
      CHECK(fast_detail.phases[i].phase == ref_detail.phases[i].phase);
      CHECK(fast_detail.phases[i].layer_kind == ref_detail.phases[i].layer_kind);
      CHECK(fast_detail.phases[i].direction == ref_detail.phases[i].direction);
      CHECK(fast_detail.phases[i].time_us == ref_detail.phases[i].time_us);
      CHECK(fast_detail.phases[i].per_ep_rank_us == ref_detail.phases[i].per_ep_rank_us);
    }
    CHECK(ref.step_time_us > 0);
    CHECK(ref.tokens_per_s_per_gpu > 0);
    CHECK(!ref.dominant_phase.empty());
    cov.dominant.insert(ref.dominant_phase);
  }
  CHECK(evaluator.fallbacks() == 0);  // realistic models never get near the overflow guards
  cov.handed_to_reference = evaluator.handed_to_reference();
  cov.flex_from_blocks = evaluator.flex_from_blocks();
  cov.routing_from_blocks = evaluator.routing_from_blocks();
  return cov;
}

inline SearchOptions FullSearch(int64_t world) {
  SearchOptions o;
  o.world_size = world;
  // torchtitan before PR #3167 / #4794: its layouts include expert TP and ep < tp, so the
  // every-candidate tests cover them; torchtitan as it is has its own subcase
  // (layout_eval_models_test.cc).
  o.convention = dockyard::Convention::kTorchtitan2026_03;
  o.routing_layers = 2;
  o.training.recompute = dockyard::Recompute::kFull;
  return o;
}

}  // namespace dockyard::testing
