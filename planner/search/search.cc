// Layout search (see search.h).
#include "planner/search/search.h"

#include <algorithm>
#include <chrono>
#include <sstream>
#include <tuple>

#include <fmt/format.h>

#include "planner/sim/attention_support.h"
#include "planner/base/error.h"
#include "planner/search/layout_eval.h"

namespace dockyard {
namespace {

std::vector<int64_t> Divisors(int64_t n) {
  std::vector<int64_t> out;
  for (int64_t d = 1; d * d <= n; ++d) {
    if (n % d) continue;
    out.push_back(d);
    if (d != n / d) out.push_back(n / d);
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

std::vector<LayoutCandidate> EnumerateLayouts(const ModelSpec& model, const SearchOptions& o) {
  if (o.world_size < 1 || o.world_size > kMaxWorldSize) {
    throw Error(fmt::format("search: world_size must be in [1, {}], got {}", kMaxWorldSize, o.world_size));
  }
  std::vector<LayoutCandidate> out;
  const int64_t E = model.moe.num_experts;
  for (int64_t pp : Divisors(o.world_size)) {
    if (pp > std::min(model.num_hidden_layers, o.max_pp)) continue;
    const int64_t stage = o.world_size / pp;
    for (int64_t dpr : Divisors(stage)) {
      for (int64_t cp : Divisors(stage / dpr)) {
        for (int64_t tp : Divisors(stage / dpr / cp)) {
          if (tp > o.cluster.gpus_per_node) continue;
          const int64_t dps = stage / dpr / cp / tp;
          const int64_t region = dps * cp * tp;
          for (int64_t ep : Divisors(E)) {
            if (region % ep) continue;
            for (int64_t etp : tp == 1 ? std::vector<int64_t>{1} : std::vector<int64_t>{1, tp}) {
              if (o.convention == Convention::kMegatron && dpr > 1) continue;
              LayoutCandidate c;
              c.dims = {o.world_size, dpr, dps, cp, tp, ep, etp, pp, o.convention};
              out.push_back(c);
              // The deredundency dispatcher only differs when an EP group spans nodes.
              if (o.include_deredundency && ep * etp > o.cluster.gpus_per_node) {
                c.dispatcher = "deredundency";
                out.push_back(c);
              }
              // deepep and allgather: any EP group of 2 or more ranks (Megatron's flex and
              // allgather dispatchers need expert parallelism to dispatch over).
              if (o.include_deepep && ep > 1) {
                c.dispatcher = "deepep";
                out.push_back(c);
              }
              if (o.include_allgather && ep > 1) {
                c.dispatcher = "allgather";
                out.push_back(c);
              }
            }
          }
        }
      }
    }
  }
  return out;
}

SearchResult SearchLayouts(const ModelSpec& model, const SearchOptions& o) {
  // Ranking needs the step time of every layout that fits: refuse before enumerating what the
  // cost model cannot price (even when no layout would fit).
  CheckCostModelCoversAttention(model);
  const auto start = std::chrono::steady_clock::now();
  SearchResult result;
  const auto candidates = EnumerateLayouts(model, o);
  result.enumerated = static_cast<int64_t>(candidates.size());
  result.budget_gib = o.training.gpu_memory_gib > 0 ? o.training.gpu_memory_gib : o.cluster.memory_gib;
  // Per-class evaluation, bit-identical to BuildPlan + ComputeMemory + SimulateStep
  // (layout_eval.h); routing is sampled once per (ep, routed tokens, oep).
  LayoutEvaluator evaluator(model, o);
  evaluator.ExpectCandidates(candidates);
  std::vector<RankedLayout> ranked;
  for (size_t i = 0; i < candidates.size(); ++i) {
    if (o.progress && (i % 64 == 0 || i + 1 == candidates.size())) o.progress(static_cast<int64_t>(i + 1), result.enumerated);
    const auto& c = candidates[i];
    const LayoutEvaluation e = evaluator.Evaluate(c);
    if (e.status == LayoutEvaluation::Status::kInvalid) {
      ++result.invalid;
      continue;
    }
    if (e.status == LayoutEvaluation::Status::kOverBudget) {
      ++result.over_budget;
      continue;
    }
    RankedLayout r;
    r.layout = c;
    r.layout.dims.dp_shard = e.dims.dp_shard;
    r.efsdp = e.dims.efsdp;
    r.step_time_us = e.step_time_us;
    r.tokens_per_s_per_gpu = e.tokens_per_s_per_gpu;
    r.mfu = e.mfu;
    r.peak_bytes = e.peak_bytes;
    r.dominant_phase = e.dominant_phase;
    ranked.push_back(std::move(r));
  }
  result.ranked = static_cast<int64_t>(ranked.size());
  // Rank by time per token (layouts differ in tokens per step when dp differs), ties by memory.
  // Ties (equal tokens/s and memory) in a fixed order: the degrees, pp first, then the dispatcher.
  const auto key = [](const RankedLayout& x) {
    const auto& d = x.layout.dims;
    return std::make_tuple(-x.tokens_per_s_per_gpu, x.peak_bytes, d.pp, d.dp_replicate, d.dp_shard, d.cp, d.tp, d.ep, d.etp,
                           x.layout.dispatcher);
  };
  std::sort(ranked.begin(), ranked.end(), [&](const RankedLayout& a, const RankedLayout& b) { return key(a) < key(b); });
  if (static_cast<int64_t>(ranked.size()) > o.top) ranked.resize(o.top);
  result.top = std::move(ranked);
  result.routing_samples = evaluator.routing_samples();
  result.routing_seconds = evaluator.cache_fill_seconds();
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

Json SearchResultToJson(const SearchResult& r) {
  Json top = Json::array();
  for (const auto& x : r.top) {
    const auto& d = x.layout.dims;
    top.push_back({{"pp", d.pp},
                   {"dp_replicate", d.dp_replicate},
                   {"dp_shard", d.dp_shard},
                   {"cp", d.cp},
                   {"tp", d.tp},
                   {"ep", d.ep},
                   {"etp", d.etp},
                   {"efsdp", x.efsdp},
                   {"dispatcher", x.layout.dispatcher},
                   {"step_time_us", x.step_time_us},
                   {"tokens_per_s_per_gpu", x.tokens_per_s_per_gpu},
                   {"mfu", x.mfu},
                   {"peak_bytes", x.peak_bytes},
                   {"dominant_phase", x.dominant_phase}});
  }
  return Json{{"enumerated", r.enumerated},
              {"invalid", r.invalid},
              {"over_budget", r.over_budget},
              {"ranked", r.ranked},
              {"budget_gib", r.budget_gib},
              {"seconds", r.seconds},
              {"top", top}};
}

std::string SearchResultToText(const SearchResult& r) {
  std::ostringstream out;
  out << fmt::format(
      "Search     {} layouts enumerated: {} invalid, {} over the {:.1f} GiB budget, {} ranked ({:.2f} s, {:.0f} layouts/s)\n", r.enumerated,
      r.invalid, r.over_budget, r.budget_gib, r.ranked, r.seconds, r.seconds > 0 ? r.enumerated / r.seconds : 0.0);
  out << fmt::format("  {:>4} {:>3} {:>4} {:>6} {:>3} {:>3} {:>4} {:>4} {:>6} {:<13} {:>10} {:>12} {:>6} {:>9}  {}\n", "rank", "pp", "dpr",
                     "dps", "cp", "tp", "ep", "etp", "efsdp", "dispatcher", "step (ms)", "tok/s/GPU", "MFU", "peak GiB", "dominant phase");
  for (size_t i = 0; i < r.top.size(); ++i) {
    const auto& x = r.top[i];
    const auto& d = x.layout.dims;
    out << fmt::format("  {:>4} {:>3} {:>4} {:>6} {:>3} {:>3} {:>4} {:>4} {:>6} {:<13} {:>10.1f} {:>12.0f} {:>5.1f}% {:>9.2f}  {}\n", i + 1,
                       d.pp, d.dp_replicate, d.dp_shard, d.cp, d.tp, d.ep, d.etp, x.efsdp, x.layout.dispatcher, x.step_time_us / 1e3,
                       x.tokens_per_s_per_gpu, 100 * x.mfu, x.peak_bytes / 1073741824.0, x.dominant_phase);
  }
  return out.str();
}

}  // namespace dockyard
