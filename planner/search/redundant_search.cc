// Redundant experts in the layout search (see redundant_search.h).
#include "planner/search/redundant_search.h"

#include <algorithm>
#include <sstream>

#include <fmt/format.h>

#include "planner/base/error.h"
#include "planner/accounting/memory.h"
#include "planner/layout/plan.h"
#include "planner/accounting/workload.h"
#include "planner/cost/network.h"
#include "planner/search/layout_eval.h"

namespace dockyard {

std::vector<RedundantCount> ParseRedundantCounts(const std::string& text) {
  std::vector<RedundantCount> out;
  std::string item;
  std::istringstream in(text);
  while (std::getline(in, item, ',')) {
    RedundantCount c;
    std::string digits = item;
    if (item.size() >= 2 && item.compare(item.size() - 2, 2, "ep") == 0) {
      c.per_ep = true;
      digits = item.substr(0, item.size() - 2);
      if (digits.empty()) digits = "1";
    }
    const bool ok =
        !digits.empty() && digits.size() <= 9 && std::all_of(digits.begin(), digits.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
    if (!ok || (c.per_ep && std::stoll(digits) < 1)) {
      throw Error(fmt::format("--redundant-experts '{}': item '{}' is not an integer >= 0 or a multiple of ep ('ep', '2ep')", text, item));
    }
    c.value = std::stoll(digits);
    out.push_back(c);
  }
  if (out.empty()) throw Error(fmt::format("--redundant-experts '{}' lists no value", text));
  return out;
}

std::string RedundantCountText(const RedundantCount& c) {
  if (!c.per_ep) return std::to_string(c.value);
  return c.value == 1 ? std::string("ep") : fmt::format("{}ep", c.value);
}

RedundantSearchResult SearchRedundantExperts(const ModelSpec& model, const SearchOptions& search, const SearchResult& base,
                                             const std::vector<RedundantCount>& counts, const RedundantExpertsOptions& options) {
  RedundantSearchResult out;
  const int64_t E = model.moe.num_experts;
  // The search's routing model and per-layout memory sizing (eval_cache.h): the same MoE layers
  // sampled and, with --routing, the same imbalance per (ep, routed tokens, oep) as its rows.
  const std::shared_ptr<SearchEvalCache> cache = LayoutEvaluator::MakeCache(model, search);
  const RoutingModel& routing = cache->model();
  for (const RankedLayout& ranked : base.top) {
    TrainingConfig t = CandidateTraining(search.training, ranked.layout);
    Plan plan = BuildPlan(model, ranked.layout.dims, t, SearchPlanMachine(search));
    const int64_t routed_tokens = ComputeWorkload(plan).routed_tokens;
    const RoutingResult before = SampleRouting(routing, plan.dims.ep, routed_tokens);
    // With --routing, the layout's own sample sizes its received rows, as the search's rows
    // (SearchOptions::routing_sizes_memory), check and simulate size them.
    if (search.routing_sizes_memory) plan.training.imbalance = cache->SampleImbalance(plan.dims.ep, routed_tokens, DispatchOep(plan));
    const MemoryReport memory = ComputeMemory(plan);
    const bool deredundency = plan.dims.ep > 1 && t.dispatcher == Dispatcher::kDeredundency;
    // deepep: the replicated routing sample AnalyzeRedundantExperts prices (SampleReplicatedRouting)
    // carries no per-token node counts (deepep.h LayerRouting::flex), which SimulateStep needs for
    // that dispatcher (it throws without them), so such a pair cannot be priced: skipped, as
    // deredundency's.
    const bool deepep = plan.dims.ep > 1 && t.dispatcher == Dispatcher::kDeepEp;
    std::optional<CostBreakdown> cost;
    for (const RedundantCount& c : counts) {
      RedundantExpertsOptions o = options;
      o.redundant_experts = c.For(plan.dims.ep);
      if ((E + o.redundant_experts) % plan.dims.ep != 0 || o.redundant_experts > MaxRedundantExperts(E, plan.dims.ep) || deredundency ||
          deepep) {
        ++out.skipped;
        continue;
      }
      // Priced with the search's cost knobs (compute model, CUDA graphs, calibration), as its rows.
      if (!cost) cost = SimulateStep(plan, search.cluster, before, search.compute_model);
      const RedundantExpertsReport rep = AnalyzeRedundantExperts(plan, search.cluster, routing, before, *cost, memory, o, search.compute_model,
                                                                 search.routing_sizes_memory);
      if (OverBudget(static_cast<double>(rep.after.peak_bytes), base.budget_gib, memory.reserve_gib)) {
        ++out.over_budget;
        continue;
      }
      RedundantRankedLayout r;
      r.layout = ranked;
      r.redundant_experts = o.redundant_experts;
      r.policy = EplbPolicyName(rep.policy);
      r.imbalance_before = rep.before.imbalance;
      r.imbalance_after = rep.after.imbalance;
      r.moe_layer_us_before = rep.before.moe_layer_us;
      r.moe_layer_us_after = rep.after.moe_layer_us;
      r.step_time_us = rep.after.step_time_us;
      r.tokens_per_s_per_gpu = rep.after.tokens_per_s_per_gpu;
      r.peak_bytes = rep.after.peak_bytes;
      out.ranked.push_back(std::move(r));
    }
  }
  std::stable_sort(out.ranked.begin(), out.ranked.end(), [](const RedundantRankedLayout& a, const RedundantRankedLayout& b) {
    return a.tokens_per_s_per_gpu > b.tokens_per_s_per_gpu;
  });
  return out;
}

namespace {

std::string LayoutText(const LayoutCandidate& c) {
  const auto& d = c.dims;
  return fmt::format("pp {} dp_rep {} dp_shard {} cp {} tp {} ep {} etp {} {}", d.pp, d.dp_replicate, d.dp_shard, d.cp, d.tp, d.ep, EtpOf(d),
                     DispatcherName(c.dispatcher));
}

}  // namespace

Json RedundantSearchToJson(const RedundantSearchResult& r) {
  Json ranked = Json::array();
  for (const auto& x : r.ranked) {
    const auto& d = x.layout.layout.dims;
    ranked.push_back({{"layout",
                       {{"pp", d.pp},
                        {"dp_replicate", d.dp_replicate},
                        {"dp_shard", d.dp_shard},
                        {"cp", d.cp},
                        {"tp", d.tp},
                        {"ep", d.ep},
                        {"etp", EtpOf(d)},
                        {"dispatcher", DispatcherName(x.layout.layout.dispatcher)}}},
                      {"redundant_experts", x.redundant_experts},
                      {"policy", x.policy},
                      {"imbalance_before", x.imbalance_before},
                      {"imbalance_after", x.imbalance_after},
                      {"moe_layer_us_before", x.moe_layer_us_before},
                      {"moe_layer_us_after", x.moe_layer_us_after},
                      {"tokens_per_s_per_gpu_before", x.layout.tokens_per_s_per_gpu},
                      {"tokens_per_s_per_gpu", x.tokens_per_s_per_gpu},
                      {"step_time_us", x.step_time_us},
                      {"peak_bytes", x.peak_bytes}});
  }
  return {{"ranked", ranked}, {"skipped", r.skipped}, {"over_budget", r.over_budget}};
}

std::string RedundantSearchToText(const RedundantSearchResult& r) {
  std::ostringstream out;
  out << fmt::format(
      "\nRedundant experts: {} (layout, R) pairs ranked, {} skipped (slots not divisible by ep, more replicas than EP ranks, "
      "deredundency or deepep), "
      "{} over budget\n",
      r.ranked.size(), r.skipped, r.over_budget);
  out << fmt::format("  {:>3} {:<52} {:>5} {:>13} {:>9} {:>21} {:>10}\n", "#", "layout", "R", "policy", "imbalance", "tokens/s/GPU",
                     "peak GiB");
  for (size_t i = 0; i < r.ranked.size(); ++i) {
    const auto& x = r.ranked[i];
    out << fmt::format("  {:>3} {:<52} {:>5} {:>13} {:>4.2f}->{:<4.2f} {:>9.0f} -> {:>9.0f} {:>10.2f}\n", i + 1,
                       LayoutText(x.layout.layout), x.redundant_experts, x.policy, x.imbalance_before, x.imbalance_after,
                       x.layout.tokens_per_s_per_gpu, x.tokens_per_s_per_gpu, static_cast<double>(x.peak_bytes) / 1073741824.0);
  }
  return out.str();
}

}  // namespace dockyard
