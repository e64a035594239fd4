// Layout search (see search.h).
#include "planner/model/muon.h"
#include "planner/model/precision.h"
#include "planner/search/search.h"

#include <algorithm>
#include <cmath>
#include <chrono>
#include <exception>
#include <limits>
#include <optional>
#include <set>
#include <thread>
#include <sstream>
#include <string_view>
#include <tuple>

#include <fmt/format.h>

#include "planner/cost/attention_support.h"
#include "planner/base/error.h"
#include "planner/cost/ep_overlap.h"
#include "planner/model/flex_backend_limits.h"
#include "planner/model/global_batch.h"
#include "planner/model/pipeline_schedule.h"
#include "planner/model/seq_len.h"
#include "planner/accounting/memory.h"
#include "planner/search/layout_eval.h"
#include "planner/search/pareto.h"
#include "planner/search/search_pins.h"
#include "planner/cost/network.h"

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

// One (degrees, dispatcher, dp sharding) of the search: its settings are expanded by
// ForEachSetting. Static memory is the same for all of them (the pruning bound).
struct LayoutGroup {
  ParallelDimsOptions dims;
  Dispatcher dispatcher = Dispatcher::kAllToAll;
  std::optional<DpSharding> dp_sharding;
};

bool PinHolds(int64_t pin, int64_t value) {
  return pin == 0 || pin == value;
}

std::vector<LayoutGroup> EnumerateGroups(const ModelSpec& model, const SearchOptions& o) {
  if (o.world_size < 1 || o.world_size > kMaxWorldSize) {
    throw Error(fmt::format("search: world_size must be in [1, {}], got {}", kMaxWorldSize, o.world_size));
  }
  std::vector<LayoutGroup> out;
  const DegreePins& pin = o.pins;
  const int64_t E = model.moe.num_experts;
  std::vector<std::optional<DpSharding>> shardings;
  for (DpSharding s : o.dp_shardings) shardings.push_back(s);
  if (shardings.empty()) shardings.push_back(std::nullopt);
  for (int64_t pp : Divisors(o.world_size)) {
    if (pp > std::min(model.num_hidden_layers, o.max_pp) || !PinHolds(pin.pp, pp)) continue;
    const int64_t stage = o.world_size / pp;
    for (int64_t dpr : Divisors(stage)) {
      if (!PinHolds(pin.dp_replicate, dpr)) continue;
      for (int64_t cp : Divisors(stage / dpr)) {
        if (!PinHolds(pin.cp, cp)) continue;
        for (int64_t tp : Divisors(stage / dpr / cp)) {
          if (tp > o.cluster.gpus_per_node || !PinHolds(pin.tp, tp)) continue;
          const int64_t dps = stage / dpr / cp / tp;
          if (!PinHolds(pin.dp_shard, dps)) continue;
          const int64_t region = dps * cp * tp;
          for (int64_t ep : Divisors(E)) {
            if (region % ep || !PinHolds(pin.ep, ep)) continue;
            // etp in {1, tp}; tp only where the convention has expert TP (CheckEtpForConvention:
            // torchtitan removed it, PR #3167). A pinned etp is the user's, refused by the same rule.
            std::vector<int64_t> etps = tp == 1 || !CheckEtpForConvention(o.convention, tp, nullptr) ? std::vector<int64_t>{1}
                                                                                                    : std::vector<int64_t>{1, tp};
            if (pin.etp != 0) etps = {pin.etp};
            for (int64_t etp : etps) {
              if (o.convention == Convention::kMegatron && dpr > 1) continue;
              const ParallelDimsOptions dims{o.world_size, dpr, dps, cp, tp, ep, etp, pp, o.convention};
              std::vector<Dispatcher> dispatchers = o.dispatchers;
              if (dispatchers.empty()) {
                dispatchers.push_back(Dispatcher::kAllToAll);
                // The deredundency dispatcher only differs when an EP group spans nodes.
                if (o.include_deredundency && ep * etp > o.cluster.gpus_per_node) dispatchers.push_back(Dispatcher::kDeredundency);
                // deepep and allgather: any EP group of 2 or more ranks (Megatron's flex and
                // allgather dispatchers need expert parallelism to dispatch over).
                if (o.include_deepep && ep > 1) dispatchers.push_back(Dispatcher::kDeepEp);
                if (o.include_allgather && ep > 1) dispatchers.push_back(Dispatcher::kAllGather);
              }
              for (Dispatcher dispatcher : dispatchers) {
                for (const auto& sharding : shardings) out.push_back({dims, dispatcher, sharding});
              }
            }
          }
        }
      }
    }
  }
  return out;
}

// Calls fn(candidate) for every setting of `g`: micro-batch size, recompute, vpp (pp > 1), EP
// overlap (ep > 1), with the global batch's schedule (global_batch.h) or batch_divides false.
template <typename Fn>
void ForEachSetting(const LayoutGroup& g, const SearchOptions& o, int64_t num_layers, Fn&& fn) {
  const std::vector<int64_t> mbs_list = o.micro_batch_sizes.empty() ? std::vector<int64_t>{0} : o.micro_batch_sizes;
  std::vector<std::optional<Recompute>> recomputes;
  for (Recompute r : o.recomputes) recomputes.push_back(r);
  if (recomputes.empty()) recomputes.push_back(std::nullopt);
  std::vector<int64_t> vpps = {0};
  if (o.every_vpp) {
    vpps.clear();
    for (int64_t v = 1; v <= MaxVpp(g.dims.pp, num_layers); ++v) vpps.push_back(v);  // the chunk rule's values
  } else if (!o.vpps.empty()) {
    vpps.clear();
    for (int64_t v : o.vpps) {
      if (v == 1 || g.dims.pp > 1) vpps.push_back(v);  // vpp > 1 needs pp > 1
    }
  }
  std::vector<std::optional<bool>> overlaps;
  for (bool b : o.ep_overlaps) {
    if (!b || g.dims.ep > 1) overlaps.push_back(b);  // EP overlap needs ep > 1
  }
  if (o.ep_overlaps.empty()) overlaps.push_back(std::nullopt);
  const bool megatron = o.convention == Convention::kMegatron;
  const int64_t dp = g.dims.dp_replicate * g.dims.dp_shard;
  LayoutCandidate c;
  c.dims = g.dims;
  c.dispatcher = g.dispatcher;
  c.settings.dp_sharding = g.dp_sharding;
  c.setting_index = 0;
  for (int64_t mbs : mbs_list) {
    c.settings.micro_batch_size = mbs;
    c.batch_divides = true;
    c.batch_reason.clear();
    c.settings.num_microbatches = 0;
    c.settings.grad_accumulation_steps = 0;
    if (o.global_batch_size > 0) {
      const int64_t m = mbs > 0 ? mbs : o.training.micro_batch_size;
      const auto why = GlobalBatchMismatch(o.global_batch_size, dp, m, g.dims.pp, megatron, o.training.num_microbatches);
      if (why) {
        c.batch_divides = false;
        c.batch_reason = *why;
      } else {
        const GlobalBatchSchedule sched = ResolveGlobalBatch(o.global_batch_size, dp, m, g.dims.pp, megatron, o.training.num_microbatches);
        c.settings.num_microbatches = sched.num_microbatches;
        c.settings.grad_accumulation_steps = sched.grad_accumulation_steps;
      }
    }
    for (const auto& rc : recomputes) {
      c.settings.recompute = rc;
      for (int64_t v : vpps) {
        c.settings.vpp = v;
        for (const auto& ov : overlaps) {
          c.settings.overlap_moe_ep_comm = ov;
          fn(c);
          ++c.setting_index;
        }
      }
    }
  }
}

// The total order of ranked layouts: time per token (equivalently step time at a fixed global
// batch), then memory, then every degree and setting (ties in a fixed order whatever the threads).
bool RankedBefore(const RankedLayout& a, const RankedLayout& b) {
  if (a.tokens_per_s_per_gpu != b.tokens_per_s_per_gpu) return a.tokens_per_s_per_gpu > b.tokens_per_s_per_gpu;
  // The dispatcher by its name (the order the rows have always had); the rest by reference: no
  // string copies per comparison.
  const auto key = [](const RankedLayout& x, const std::string_view& dispatcher) {
    const auto& d = x.layout.dims;
    return std::tie(x.peak_bytes, d.pp, d.dp_replicate, d.dp_shard, d.cp, d.tp, d.ep, d.etp, dispatcher, x.dp_sharding, x.micro_batch_size,
                    x.num_microbatches, x.grad_accumulation_steps, x.vpp, x.recompute, x.overlap_moe_ep_comm);
  };
  const std::string_view name_a = DispatcherName(a.layout.dispatcher), name_b = DispatcherName(b.layout.dispatcher);
  return key(a, name_a) < key(b, name_b);
}

// The ranked rows one thread keeps. With keep_all, every row. Otherwise only rows that can still
// be among the best `top` or on the Pareto front (pareto.h); exact, because a row left out has
// `top` kept rows ranked before it (RankedBefore orders by throughput first) and a kept row that
// dominates it (peak <= and throughput >), and both relations are transitive. Rows are gathered
// and compacted (sorted, cut to the best `top` and the front) when their count doubles.
class RowKeeper {
 public:
  RowKeeper(int64_t top, bool keep_all) : top_(std::max<int64_t>(0, top)), keep_all_(keep_all) {}

  // False when a row of this throughput and peak is neither among the best `top` nor on the front
  // of the rows kept at the last compaction (then it need not be formed).
  bool Wanted(double tokens_per_s, int64_t peak_bytes) const {
    if (keep_all_ || tokens_per_s >= cutoff_) return true;
    const auto it = std::upper_bound(front_peak_.begin(), front_peak_.end(), peak_bytes);  // front points of peak <= this one
    return it == front_peak_.begin() || front_best_[static_cast<size_t>(it - front_peak_.begin()) - 1] <= tokens_per_s;
  }
  void Add(RankedLayout&& row) {
    rows_.push_back(std::move(row));
    if (!keep_all_ && rows_.size() >= limit_) Compact();
  }
  std::vector<RankedLayout>& rows() { return rows_; }

 private:
  void Compact() {
    std::sort(rows_.begin(), rows_.end(), RankedBefore);
    const std::vector<bool> front = ParetoFrontOf(rows_);
    if (top_ == 0) {
      cutoff_ = std::numeric_limits<double>::infinity();
    } else if (static_cast<int64_t>(rows_.size()) >= top_) {
      cutoff_ = rows_[static_cast<size_t>(top_ - 1)].tokens_per_s_per_gpu;
    }
    std::vector<RankedLayout> kept;
    std::vector<std::pair<int64_t, double>> points;
    for (size_t i = 0; i < rows_.size(); ++i) {
      if (static_cast<int64_t>(i) < top_ || front[i]) kept.push_back(std::move(rows_[i]));
      if (front[i]) points.push_back({kept.back().peak_bytes, kept.back().tokens_per_s_per_gpu});
    }
    rows_ = std::move(kept);
    std::sort(points.begin(), points.end());
    front_peak_.clear();
    front_best_.clear();
    for (const auto& [peak, t] : points) {
      front_peak_.push_back(peak);
      front_best_.push_back(front_best_.empty() ? t : std::max(front_best_.back(), t));
    }
    limit_ = std::max<size_t>(kMinLimit, 2 * rows_.size());
  }

  static constexpr size_t kMinLimit = 4096;
  int64_t top_;
  bool keep_all_;
  std::vector<RankedLayout> rows_;
  size_t limit_ = kMinLimit;
  double cutoff_ = -std::numeric_limits<double>::infinity();  // the top-th best throughput kept (rows below it are not top)
  std::vector<int64_t> front_peak_;                           // the kept front by peak ascending
  std::vector<double> front_best_;                            // the best throughput at or below each of those peaks
};

// What one thread found.
struct Partial {
  Partial(int64_t top, bool keep_all) : kept(top, keep_all) {}
  int64_t enumerated = 0, invalid = 0, over_budget = 0, not_divisible = 0, pruned = 0, ranked = 0;
  std::map<std::string, int64_t> invalid_reasons, not_divisible_reasons;  // SearchResult's
  double routing_seconds = 0, prefill_seconds = 0;                        // prefill: PrefillSources' share (several threads)
  RowKeeper kept;
};

RankedLayout RowOf(const LayoutCandidate& c, LayoutEvaluation&& e, const SearchOptions& o, double budget_bytes) {
  RankedLayout r;
  r.layout = c;
  r.layout.dims.dp_shard = e.dims.dp_shard;
  r.efsdp = e.dims.efsdp;
  r.step_time_us = e.step_time_us;
  r.tokens_per_s_per_gpu = e.tokens_per_s_per_gpu;
  r.mfu = e.mfu;
  r.peak_bytes = e.peak_bytes;
  r.dominant_phase = std::move(e.dominant_phase);
  const ResolvedSettings t = ResolveSettings(o.training, c.settings);
  r.micro_batch_size = t.micro_batch_size;
  r.num_microbatches = t.num_microbatches.value_or(e.dims.pp);
  r.grad_accumulation_steps = t.grad_accumulation_steps;
  r.vpp = t.vpp;
  r.recompute = RecomputeName(t.recompute);
  r.dp_sharding = DpShardingName(t.dp_sharding.value_or(DefaultDpSharding(o.convention)));
  r.overlap_moe_ep_comm = t.overlap_moe_ep_comm;
  if (c.dispatcher == Dispatcher::kDeepEp) r.flex_backend = FlexBackendName(FlexBackendOf(CandidateTraining(o.training, c)));
  r.sequences_per_step = e.dims.dp_replicate * e.dims.dp_shard * r.micro_batch_size * r.num_microbatches * r.grad_accumulation_steps;
  r.headroom_gib = (budget_bytes - static_cast<double>(e.peak_bytes)) / 1073741824.0;
  return r;
}

// The routed-token counts the search will meet (each source rank drawn once for all).
void ExpectGroups(const std::vector<LayoutGroup>& groups, const SearchOptions& o, LayoutEvaluator* evaluator) {
  std::vector<LayoutCandidate> expect;
  const std::vector<int64_t> mbs_list = o.micro_batch_sizes.empty() ? std::vector<int64_t>{0} : o.micro_batch_sizes;
  for (const LayoutGroup& g : groups) {
    for (int64_t mbs : mbs_list) {
      LayoutCandidate c;
      c.dims = g.dims;
      c.settings.micro_batch_size = mbs;
      expect.push_back(std::move(c));
    }
  }
  evaluator->ExpectCandidates(expect);
}

// Evaluates groups thread, thread + threads, ... with an evaluator over the search's shared cache.
void SearchGroups(const ModelSpec& model, const SearchOptions& o, const std::vector<LayoutGroup>& groups, int thread, int threads,
                  const std::shared_ptr<SearchEvalCache>& cache, Partial* out) {
  LayoutEvaluator evaluator(model, o, cache);
  const double budget = evaluator.budget_bytes();
  // With several threads, the deepep block counts (the largest once-per-key work) are drawn up
  // front, each thread a share; alone, a thread draws them as keys first read them.
  if (threads > 1) {
    const auto start = std::chrono::steady_clock::now();
    cache->PrefillSources(thread, threads);
    out->prefill_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  std::string reason;  // scratch: why a pruned candidate's settings break a rule
  for (size_t i = thread; i < groups.size(); i += threads) {
    if (thread == 0 && o.progress && (i % 64 == 0 || i + threads >= groups.size())) {
      o.progress(static_cast<int64_t>(std::min(groups.size(), i + threads)), static_cast<int64_t>(groups.size()));
    }
    bool pruned = false;  // a valid setting of this group had static memory over the budget
    ForEachSetting(groups[i], o, model.num_hidden_layers, [&](const LayoutCandidate& c) {
      ++out->enumerated;
      if (!c.batch_divides) {
        ++out->not_divisible;
        ++out->not_divisible_reasons[c.batch_reason];
        return;
      }
      if (pruned) {
        // Exact: static bytes do not depend on the settings, so this one is over budget too when
        // its settings are valid; invalid ones are counted as the full evaluation counts them.
        if (evaluator.SettingsHold(c, &reason)) {
          ++out->over_budget;
          ++out->pruned;
        } else {
          ++out->invalid;
          ++out->invalid_reasons[reason];
        }
        return;
      }
      LayoutEvaluation e = evaluator.Evaluate(c);
      if (e.status == LayoutEvaluation::Status::kInvalid) {
        ++out->invalid;
        ++out->invalid_reasons[e.reason];
        return;
      }
      if (e.status == LayoutEvaluation::Status::kOverBudget) {
        ++out->over_budget;
        if (o.prune && static_cast<double>(e.static_peak_bytes) > budget) pruned = true;
        return;
      }
      ++out->ranked;
      if (out->kept.Wanted(e.tokens_per_s_per_gpu, e.peak_bytes)) out->kept.Add(RowOf(c, std::move(e), o, budget));
    });
  }
  out->routing_seconds = evaluator.cache_fill_seconds() + out->prefill_seconds;
}

// Refuses options the search cannot run: what the cost model cannot price (even when no layout
// would fit), bad thread counts and global batches, pins that break a rule, a sequence length the
// model cannot take.
void ValidateSearchOptions(const ModelSpec& model, const SearchOptions& o) {
  CheckCostModelCoversAttention(model);
  if (o.threads < 1 || o.threads > 1024) throw Error(fmt::format("--threads: must be in [1, 1024], got {}", o.threads));
  if (o.global_batch_size < 0) throw Error(fmt::format("--global-batch-size: must be >= 1, got {}", o.global_batch_size));
  ValidateSearchPins(o);
  ValidateSearchPinsForModel(o, model);
  // Settings no layout can run with fail before the search, not as the rule the last layout broke
  // (and the GPU check leaves the per-layout step, SimulateStepFromInputs): Muon outside Megatron
  // (a pinned FSDP too), MXFP8 on a GPU without it.
  ValidateMuon(o.training, o.convention == Convention::kMegatron);
  ValidateFp8RecipeOnGpu(o.training, o.cluster.name, o.cluster.mxfp8_tensor_cores);
  if (const int64_t n = o.training.run.moe_flex_dispatcher_num_sms; n > 0) {
    FlexDispatcherSmShare(n, o.cluster.sm_count, o.cluster.name);
    // The flex dispatcher's setting needs a flex candidate (its other candidates run without it).
    const bool flex = o.dispatchers.empty() ? o.include_deepep
                                            : std::find(o.dispatchers.begin(), o.dispatchers.end(), Dispatcher::kDeepEp) != o.dispatchers.end();
    if (o.convention != Convention::kMegatron || !flex) {
      throw Error(fmt::format("--moe-flex-dispatcher-num-sms {}: the SMs of Megatron's flex dispatcher; this search has no {}: {}", n,
                              o.convention != Convention::kMegatron ? "megatron convention (torchtitan's DeepEP path sets no SM count)"
                                                                    : "deepep candidate",
                              o.convention != Convention::kMegatron ? "use --convention megatron, or drop the flag"
                                                                    : "add --search-dispatchers deepep (or pin --dispatcher deepep), or drop the flag"));
    }
  }
  ValidateSeqLenForModel(o.training.seq_len, model, "--seq-len");
}

// A result with no layout yet: the budget (its reserve checked), the batch and schedule settings.
SearchResult EmptyResult(const SearchOptions& o) {
  SearchResult result;
  result.budget_gib = SearchBudgetGib(o);
  ValidateMemoryReserve(result.budget_gib, o.training.memory_reserve_gib.value_or(0), "gpu_memory_gib (or the cluster's memory_gib)",
                        "memory_reserve_gib");
  result.reserve_gib = o.training.memory_reserve_gib.value_or(0);
  result.num_microbatches = o.training.num_microbatches;
  result.megatron = o.convention == Convention::kMegatron;
  result.memory_rules = MemoryRulesLines(o.training, o.convention);
  result.global_batch_size = o.global_batch_size;
  result.seq_len = o.training.seq_len;
  return result;
}

// Evaluates `groups` on parts->size() threads (SearchGroups, thread t into (*parts)[t]); rethrows
// the first thread's error, whatever the timing.
void SearchInThreads(const ModelSpec& model, const SearchOptions& o, const std::vector<LayoutGroup>& groups,
                     const std::shared_ptr<SearchEvalCache>& cache, std::vector<Partial>* parts) {
  const int threads = static_cast<int>(parts->size());
  if (threads == 1) {
    SearchGroups(model, o, groups, 0, 1, cache, &(*parts)[0]);
    return;
  }
  std::vector<std::thread> pool;
  std::vector<std::exception_ptr> errors(threads);
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      try {
        SearchGroups(model, o, groups, t, threads, cache, &(*parts)[t]);
      } catch (...) {
        errors[t] = std::current_exception();
      }
    });
  }
  for (auto& th : pool) th.join();
  for (const auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
}

// Adds each thread's counts to `result` and returns their kept rows (unsorted).
std::vector<RankedLayout> MergeParts(std::vector<Partial>* parts, SearchResult* result) {
  std::vector<RankedLayout> ranked;
  for (Partial& p : *parts) {
    result->enumerated += p.enumerated;
    result->invalid += p.invalid;
    result->over_budget += p.over_budget;
    result->not_divisible += p.not_divisible;
    result->pruned += p.pruned;
    result->routing_seconds += p.routing_seconds;
    result->ranked += p.ranked;
    for (const auto& [why, n] : p.invalid_reasons) result->invalid_reasons[why] += n;
    for (const auto& [why, n] : p.not_divisible_reasons) result->not_divisible_reasons[why] += n;
    std::vector<RankedLayout>& rows = p.kept.rows();
    ranked.insert(ranked.end(), std::make_move_iterator(rows.begin()), std::make_move_iterator(rows.end()));
  }
  return ranked;
}

// The Pareto front of `ranked` (sorted by RankedBefore): one row per point, the best-ranked of the
// layouts with equal peak and throughput, by peak memory ascending (the front's throughput then
// rises).
std::vector<RankedLayout> ParetoRows(const std::vector<RankedLayout>& ranked) {
  const std::vector<bool> front = ParetoFrontOf(ranked);
  std::vector<RankedLayout> pareto;
  std::set<std::pair<int64_t, double>> points;
  for (size_t i = 0; i < ranked.size(); ++i) {
    if (front[i] && points.insert({ranked[i].peak_bytes, ranked[i].tokens_per_s_per_gpu}).second) pareto.push_back(ranked[i]);
  }
  std::stable_sort(pareto.begin(), pareto.end(), [](const RankedLayout& a, const RankedLayout& b) { return a.peak_bytes < b.peak_bytes; });
  return pareto;
}

}  // namespace

std::vector<bool> ParetoFrontOf(const std::vector<RankedLayout>& rows) {
  std::vector<int64_t> peaks(rows.size());
  std::vector<double> tps(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    peaks[i] = rows[i].peak_bytes;
    tps[i] = rows[i].tokens_per_s_per_gpu;
  }
  return ParetoFront(peaks, tps);
}

std::vector<LayoutCandidate> EnumerateLayouts(const ModelSpec& model, const SearchOptions& o) {
  std::vector<LayoutCandidate> out;
  ForEachLayout(model, o, [&](const LayoutCandidate& c) { out.push_back(c); });
  return out;
}

void ForEachLayout(const ModelSpec& model, const SearchOptions& o, const std::function<void(const LayoutCandidate&)>& fn) {
  for (const LayoutGroup& g : EnumerateGroups(model, o)) ForEachSetting(g, o, model.num_hidden_layers, fn);
}

SearchResult SearchLayouts(const ModelSpec& model, const SearchOptions& o) {
  ValidateSearchOptions(model, o);
  const auto start = std::chrono::steady_clock::now();
  SearchResult result = EmptyResult(o);
  const std::vector<LayoutGroup> groups = EnumerateGroups(model, o);
  const int threads = static_cast<int>(std::min<size_t>(o.threads, std::max<size_t>(1, groups.size())));
  std::vector<Partial> parts(threads, Partial(o.top, o.keep_all));
  // The once-per-key work (routing samples, deepep counts, MoE phases) is shared by the threads:
  // each key is computed once, and its value does not depend on which thread computes it.
  const std::shared_ptr<SearchEvalCache> cache = LayoutEvaluator::MakeCache(model, o);
  {
    LayoutEvaluator expect(model, o, cache);
    ExpectGroups(groups, o, &expect);
  }
  SearchInThreads(model, o, groups, cache, &parts);
  std::vector<RankedLayout> ranked = MergeParts(&parts, &result);
  result.routing_samples = cache->routing_samples();
  std::sort(ranked.begin(), ranked.end(), RankedBefore);
  // Each row against the best, with the error of a difference between two layouts.
  if (!ranked.empty()) {
    const double best = ranked.front().step_time_us;
    for (RankedLayout& x : ranked) x.vs_best = VersusBestOf(best, x.step_time_us);
  }
  result.pareto = ParetoRows(ranked);
  if (o.keep_all) result.all = ranked;
  if (static_cast<int64_t>(ranked.size()) > o.top) ranked.resize(o.top);
  result.top = std::move(ranked);
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

Json RankedLayoutToJson(const RankedLayout& x) {
  const auto& d = x.layout.dims;
  Json j = {{"pp", d.pp},
            {"dp_replicate", d.dp_replicate},
            {"dp_shard", d.dp_shard},
            {"cp", d.cp},
            {"tp", d.tp},
            {"ep", d.ep},
            {"etp", EtpOf(d)},
            {"efsdp", x.efsdp},
            {"vpp", x.vpp},
            {"micro_batch_size", x.micro_batch_size},
            {"num_microbatches", x.num_microbatches},
            {"grad_accumulation_steps", x.grad_accumulation_steps},
            {"microbatches_per_step", x.num_microbatches * x.grad_accumulation_steps},
            {"sequences_per_step", x.sequences_per_step},
            {"recompute", x.recompute},
            {"dp_sharding", x.dp_sharding},
            {"overlap_moe_ep_comm", x.overlap_moe_ep_comm},
            {"dispatcher", DispatcherName(x.layout.dispatcher)},
            {"step_time_us", x.step_time_us},
            {"tokens_per_s_per_gpu", x.tokens_per_s_per_gpu},
            {"mfu", x.mfu},
            {"peak_bytes", x.peak_bytes},
            {"headroom_gib", x.headroom_gib},
            {"dominant_phase", x.dominant_phase},
            {"vs_best", {{"ratio", x.vs_best.ratio}, {"interval80", {x.vs_best.low80, x.vs_best.high80}}, {"tied", x.vs_best.tied}}}};
  if (!x.flex_backend.empty()) j["moe_flex_dispatcher_backend"] = x.flex_backend;  // beside deepep (dispatcher.h)
  if (!x.phase_us.empty()) {
    Json phases = Json::object();
    for (const auto& [name, us] : x.phase_us) phases[name] = us;
    j["phase_breakdown_us"] = phases;
    j["pipeline_bubble_us"] = x.pipeline_bubble_us;
  }
  return j;
}

Json SearchResultToJson(const SearchResult& r) {
  Json top = Json::array(), pareto = Json::array();
  for (const auto& x : r.top) top.push_back(RankedLayoutToJson(x));
  for (const auto& x : r.pareto) pareto.push_back(RankedLayoutToJson(x));
  Json j{{"enumerated", r.enumerated},
         {"invalid", r.invalid},
         {"over_budget", r.over_budget},
         {"not_divisible", r.not_divisible},
         {"pruned", r.pruned},
         {"ranked", r.ranked},
         {"budget_gib", r.budget_gib},
         {"memory_reserve_gib", r.reserve_gib},
         {"seconds", r.seconds},
         {"top", top},
         {"pareto", pareto}};
  if (r.global_batch_size > 0) {
    j["global_batch_size"] = r.global_batch_size;
    j["global_batch_tokens"] = r.global_batch_size * r.seq_len;
  }
  return j;
}

std::string SearchCountsText(const SearchResult& r) {
  // GiB with one decimal, or every digit it takes when one would round it (a 79.59 GiB reserve
  // must not read as the 79.6 GiB budget).
  auto gib = [](double x) {
    const std::string one = fmt::format("{:.1f}", x);
    return std::stod(one) == x ? one : fmt::format("{}", x);
  };
  return fmt::format(
      "Search     {} layouts enumerated: {} invalid by rule, {} global batch not divisible, {} over the {} GiB budget less the {} "
      "GiB "
      "reserve ({} of them pruned by the static-memory bound), {} ranked ({:.2f} s, {:.0f} layouts/s)\n",
      r.enumerated, r.invalid, r.not_divisible, r.over_budget, gib(r.budget_gib), gib(r.reserve_gib), r.pruned, r.ranked, r.seconds,
      r.seconds > 0 ? r.enumerated / r.seconds : 0.0);
}

std::string VersusBestText(const VersusBest& v) {
  if (v.ratio == 1.0) return "best";
  return fmt::format("{:+.1f}%{}", 100 * (v.ratio - 1), v.tied ? " =" : "");
}

std::string RankedLayoutsTable(const std::vector<RankedLayout>& rows, bool numbered) {
  std::ostringstream out;
  out << fmt::format(
      "  {:>4} {:>3} {:>4} {:>5} {:>3} {:>3} {:>4} {:>3} {:>5} {:>3} {:>3} {:>6} {:<9} {:<5} {:<12} {:>10} {:>9} {:>10} {:>6} {:>8} {:>8}  {}\n",
      numbered ? "rank" : "", "pp", "dpr", "dps", "cp", "tp", "ep", "etp", "efsdp", "vpp", "mbs", "mb", "recompute", "dp", "dispatcher",
      "step (ms)", "vs best", "tok/s/GPU", "MFU", "peak GiB", "headroom", "dominant phase");
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto& x = rows[i];
    const auto& d = x.layout.dims;
    // Micro-batches per step: M, or A x M for torchtitan's accumulation loop of A schedules (pp > 1).
    const std::string mb = MicroBatchesText(d.pp, x.grad_accumulation_steps, x.num_microbatches);
    // deepep names its backend: deepep[hybridep] (Megatron moe_flex_dispatcher_backend).
    const std::string dispatcher = DispatcherName(x.layout.dispatcher) + (x.flex_backend.empty() ? "" : "[" + x.flex_backend + "]") +
                                   std::string(x.overlap_moe_ep_comm ? "+ov" : "");
    out << fmt::format(
        "  {:>4} {:>3} {:>4} {:>5} {:>3} {:>3} {:>4} {:>3} {:>5} {:>3} {:>3} {:>6} {:<9} {:<5} {:<12} {:>10.1f} {:>9} {:>10.0f} {:>5.1f}% "
        "{:>8.2f} {:>8.2f}  {}\n",
        numbered ? std::to_string(i + 1) : "", d.pp, d.dp_replicate, d.dp_shard, d.cp, d.tp, d.ep, EtpOf(d), x.efsdp, x.vpp,
        x.micro_batch_size, mb, x.recompute, x.dp_sharding, dispatcher, x.step_time_us / 1e3, VersusBestText(x.vs_best),
        x.tokens_per_s_per_gpu, 100 * x.mfu, x.peak_bytes / 1073741824.0, x.headroom_gib, x.dominant_phase);
  }
  return out.str();
}

std::string SearchResultToText(const SearchResult& r) {
  std::ostringstream out;
  out << SearchCountsText(r);
  for (const std::string& line : r.memory_rules) out << "Memory     " << line << "\n";
  if (r.global_batch_size > 0) {
    out << fmt::format(
        "Global batch {} sequences x {} tokens = {} tokens per step, in every row (mb: micro-batches per step, AxM = A "
        "accumulation steps of M)\n",
        r.global_batch_size, r.seq_len, r.global_batch_size * r.seq_len);
  }
  out << RankedLayoutsTable(r.top, true);
  if (!r.top.empty()) {
    int64_t tied = 0;
    for (const RankedLayout& x : r.top) tied += x.vs_best.tied && x.vs_best.ratio != 1.0 ? 1 : 0;
    out << fmt::format(
        "vs best: step time against the best row; \"=\" marks a tie: the 80 % interval of the difference (a factor {:.3f} either "
        "way: the spread of differences between two measured layouts of one model on one cluster, docs/fidelity.md) reaches the "
        "best. "
        "{} of the rows shown {} tied with the best.\n",
        std::exp(kZ80 * kPairLogErrorSd), tied, tied == 1 ? "is" : "are");
  }
  if (!r.pareto.empty()) {
    out << fmt::format(
        "Pareto front (throughput vs peak memory: no ranked layout is faster at the same or lower peak, or as fast at a lower "
        "peak), {} layouts, "
        "by peak:\n",
        r.pareto.size());
    out << RankedLayoutsTable(r.pareto, false);
  }
  return out.str();
}

void DescribeRows(const ModelSpec& model, const SearchOptions& options, std::vector<RankedLayout>* rows) {
  LayoutEvaluator evaluator(model, options);
  for (RankedLayout& x : *rows) {
    const CostBreakdown cost = evaluator.Breakdown(x.layout);
    x.phase_us.clear();
    for (size_t i = 0; i < cost.critical_path.size(); ++i) x.phase_us.push_back({cost.critical_path[i], cost.critical_path_us[i]});
    x.pipeline_bubble_us = cost.pipeline_bubble_us;
  }
}

}  // namespace dockyard
