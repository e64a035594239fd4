// Fast evaluation of layout-search candidates (see layout_eval.h): construction (the parameter
// classes and layer kinds), Evaluate in its three steps -- the rules before memory
// (layout_eval_rules.cc), the worst peak (layout_eval_memory.cc), the step inputs and the cost
// model (layout_eval_step.cc) -- and the plan path it is held to.
#include "planner/search/layout_eval.h"

#include <algorithm>
#include <optional>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include "planner/accounting/memory.h"
#include "planner/accounting/workload.h"
#include "planner/base/checked_math.h"
#include "planner/base/error.h"
#include "planner/layout/convention.h"
#include "planner/layout/plan.h"
#include "planner/model/recompute.h"
#include "planner/model/vocab_padding.h"
#include "planner/search/layout_eval_internal.h"
#include "planner/cost/deepep.h"
#include "planner/routing/flex_blocks.h"
#include "planner/routing/received_rows.h"
#include "planner/routing/flex_counts.h"

namespace dockyard {

using layout_eval_detail::AddToClasses;
using layout_eval_detail::CommVolumesNearLimit;
using layout_eval_detail::GroupIndex;
using layout_eval_detail::LayerClasses;
using layout_eval_detail::PreMemoryRuleBroken;
using layout_eval_detail::Wide;
using layout_eval_detail::WorstPeak;

std::shared_ptr<SearchEvalCache> LayoutEvaluator::MakeCache(const ModelSpec& model, const SearchOptions& options) {
  int64_t layers = std::min<int64_t>(options.routing_layers, model.NumMoeLayers());
  if (options.routing.kind == RoutingKind::kTrace) layers = model.NumMoeLayers();
  return std::make_shared<SearchEvalCache>(
      PrepareRouting(options.routing, model.moe.num_experts, model.moe.top_k, layers, GroupLimitOf(model.moe)));
}

LayoutEvaluator::LayoutEvaluator(const ModelSpec& model, const SearchOptions& options, std::shared_ptr<SearchEvalCache> cache)
    : model_(model), options_(options), cache_(std::move(cache)), impl_(std::make_unique<Impl>()) {
  inventory_ = BuildInventory(model_);
  if (!cache_) cache_ = MakeCache(model_, options_);
  budget_bytes_ = UsableBudgetBytes(SearchBudgetGib(options_), options_.training.memory_reserve_gib.value_or(0));

  Impl& im = *impl_;
  im.machine = SearchPlanMachine(options_);
  // The splits count each stage's checkpointed layers at torchtitan's per-layer frequency of the
  // options (selective_ac_option N under recompute selective, the only recompute it goes with; a
  // bare selective takes the convention's, convention.h DefaultSelectiveAcOption);
  // an option the rules refuse (ValidateSelectiveAcOption) leaves every candidate invalid.
  try {
    TrainingConfig selective = options_.training;
    selective.recompute = Recompute::kSelective;
    ApplyConventionDefaults(options_.convention, &selective);
    ValidateSelectiveAcOption(selective, "selective_ac_option");
    im.sac_every = LayerSacEvery(selective);
  } catch (const Error&) {
    im.sac_every = 0;
  }
  const int64_t L = model_.num_hidden_layers;
  if (static_cast<int64_t>(model_.moe_layers.size()) != L) {
    throw Error(fmt::format("internal: moe_layers has {} entries for {} layers", model_.moe_layers.size(), L));
  }
  // Classes per layer, then layers with equal class lists merged into kinds.
  std::vector<LayerClasses> per_layer(L);
  for (int64_t l = 0; l < L; ++l) per_layer[l].moe = model_.moe_layers[l];
  for (const auto& p : inventory_.params) {
    im.all_params += p.Numel();
    if (p.layer >= 0) {
      AddToClasses(per_layer[p.layer].classes, p);
    } else {
      AddToClasses(p.role == Role::kEmbedding ? im.embedding : im.root, p);
    }
    if (p.layer == 0 && RoleGroup(p.role) == std::string("attention")) im.attention_params += static_cast<double>(p.Numel());
  }
  if (!inventory_.params.empty()) {
    const ParamInfo& e = inventory_.params.front();
    im.tied_copy = {e.shape, e.tp_dim, e.routed_expert,  GroupIndex(Role::kLmHead),
                    1,       -1,       "lm_head.weight", false};  // BuildPlan names it so
    im.all_params += e.Numel();
  }
  auto same = [](const LayerClasses& a, const LayerClasses& b) {
    if (a.moe != b.moe || a.classes.size() != b.classes.size()) return false;
    for (size_t i = 0; i < a.classes.size(); ++i) {
      const auto& x = a.classes[i];
      const auto& y = b.classes[i];
      if (x.shape != y.shape || x.tp_dim != y.tp_dim || x.routed != y.routed || x.group != y.group || x.count != y.count) return false;
    }
    return true;
  };
  im.layer_kind.assign(L, -1);
  for (int64_t l = 0; l < L; ++l) {
    int kind = -1;
    for (size_t k = 0; k < im.kinds.size() && kind < 0; ++k) {
      if (same(im.kinds[k], per_layer[l])) kind = static_cast<int>(k);
    }
    if (kind < 0) {
      kind = static_cast<int>(im.kinds.size());
      im.kinds.push_back(std::move(per_layer[l]));
    }
    im.layer_kind[l] = kind;
    const int which = model_.moe_layers[l] ? 0 : 1;
    if (im.first_kind[which] < 0) im.first_kind[which] = kind;
    if (model_.moe_layers[l]) ++im.num_moe_layers;
  }
  for (auto& kind : im.kinds) {
    for (auto& pc : kind.classes) pc.combo = im.ComboOf(pc.routed, pc.tp_dim);
  }
  for (auto* unit : {&im.embedding, &im.root}) {
    for (auto& pc : *unit) pc.combo = im.ComboOf(pc.routed, pc.tp_dim);
  }
  if (!inventory_.params.empty()) im.tied_copy.combo = im.ComboOf(im.tied_copy.routed, im.tied_copy.tp_dim);
  im.cuts.resize(im.combos.size());
}

LayoutEvaluator::~LayoutEvaluator() = default;

int64_t LayoutEvaluator::num_layer_kinds() const {
  return static_cast<int64_t>(impl_->kinds.size());
}

int64_t LayoutEvaluator::num_classes() const {
  size_t n = impl_->embedding.size() + impl_->root.size();
  for (const auto& k : impl_->kinds) n += k.classes.size();
  return static_cast<int64_t>(n);
}

void LayoutEvaluator::ExpectCandidates(const std::vector<LayoutCandidate>& candidates) {
  const TrainingConfig& t = options_.training;
  const std::vector<Dispatcher>& pinned = options_.dispatchers;
  const bool deepep = options_.include_deepep || std::find(pinned.begin(), pinned.end(), Dispatcher::kDeepEp) != pinned.end();
  std::vector<int64_t> tokens;
  std::vector<FlexBlockNeed> block_needs;
  int64_t max_ep = 1;
  std::set<std::pair<int64_t, int64_t>> flex_groups;  // (ep, etp) of the candidates deepep may dispatch
  for (const auto& c : candidates) {
    const auto& d = c.dims;
    const int64_t mbs = c.settings.micro_batch_size > 0 ? c.settings.micro_batch_size : t.micro_batch_size;
    if (mbs < 1 || t.seq_len < 1 || mbs > (int64_t{1} << 31) / t.seq_len) continue;
    const int64_t seq_tokens = mbs * t.seq_len;
    if (d.cp < 1 || d.tp < 1) continue;
    tokens.push_back(RoutedTokens((seq_tokens + d.cp - 1) / d.cp, d.tp, d.ep, EtpOf(d), d.convention));
    // The deepep counts of rank 0's EP group (Evaluate's ep_group), read from block counts.
    if (deepep && d.ep > 1 && EtpOf(d) >= 1 && model_.moe.num_experts % d.ep == 0) flex_groups.insert({d.ep, EtpOf(d)});
    if (d.ep >= 1 && model_.moe.num_experts % d.ep == 0) max_ep = std::max(max_ep, d.ep);
  }
  for (const auto& [ep, etp] : flex_groups) {
    std::vector<int64_t> ep_group(static_cast<size_t>(ep));
    for (int64_t i = 0; i < ep; ++i) ep_group[static_cast<size_t>(i)] = i * etp;
    for (const FlexBlockNeed& need : FlexBlockSizes(model_.moe.num_experts, MakeFlexCounts(ep_group, impl_->machine.gpus_per_node))) {
      block_needs.push_back(need);
    }
  }
  std::sort(tokens.begin(), tokens.end());
  tokens.erase(std::unique(tokens.begin(), tokens.end()), tokens.end());
  cache_->ExpectTokenCounts(tokens);
  if (flex_groups.empty()) return;
  // Block size 1 for every rank of every EP size: the routing samples' per-expert counts come from
  // the same draws (SearchEvalCache::Routing).
  block_needs.push_back({1, max_ep});
  cache_->ExpectFlexGroups(tokens, block_needs);
}

int64_t LayoutEvaluator::flex_from_blocks() const {
  return cache_->flex_from_blocks();
}

int64_t LayoutEvaluator::routing_from_blocks() const {
  return cache_->routing_from_blocks();
}

int64_t LayoutEvaluator::fallbacks() const {
  int64_t n = fallbacks_;
  for (const auto& [vocab, e] : padded_vocab_) n += e->fallbacks();
  return n;
}

int64_t LayoutEvaluator::handed_to_reference() const {
  int64_t n = handed_to_reference_;
  for (const auto& [vocab, e] : padded_vocab_) n += e->handed_to_reference();
  return n;
}

double LayoutEvaluator::cache_fill_seconds() const {
  double s = cache_fill_seconds_;
  for (const auto& [vocab, e] : padded_vocab_) s += e->cache_fill_seconds();
  return s;
}

LayoutEvaluator* LayoutEvaluator::PaddedVocabEvaluator(const LayoutCandidate& c) {
  if (c.dims.tp < 1) return nullptr;  // the degrees' rules refuse it
  int64_t padded = 0;
  try {
    padded = PaddedVocabSize(model_.vocab_size, VocabDivisor(options_.training, c.dims.convention == Convention::kMegatron), c.dims.tp);
  } catch (const Error&) {
    return nullptr;  // the rules refuse the candidate with the same message (TrainingEntryOf)
  }
  if (padded == model_.vocab_size) return nullptr;
  std::unique_ptr<LayoutEvaluator>& e = padded_vocab_[padded];
  if (!e) {
    ModelSpec padded_model = model_;
    padded_model.vocab_size = padded;  // padding it again leaves it as it is (a multiple of divisor x tp)
    e = std::make_unique<LayoutEvaluator>(padded_model, options_, cache_);
  }
  return e.get();
}

LayoutEvaluation LayoutEvaluator::HandToReference(const LayoutCandidate& c, bool simulate_over_budget, CostBreakdown* detail) {
  ++handed_to_reference_;
  return EvaluateReference(c, simulate_over_budget, detail);
}

CostBreakdown LayoutEvaluator::Breakdown(const LayoutCandidate& c) {
  CostBreakdown cost;
  const LayoutEvaluation e = Evaluate(c, true, &cost);
  if (!e.simulated) throw Error("internal: Breakdown of a layout the plan path rejects");
  return cost;
}

LayoutEvaluation LayoutEvaluator::EvaluateReference(const LayoutCandidate& c, bool simulate_over_budget, CostBreakdown* detail) {
  try {
    return EvaluatePlanPath(c, simulate_over_budget, detail);
  } catch (const OverflowError&) {
    LayoutEvaluation r;
    r.status = LayoutEvaluation::Status::kInvalid;
    r.reason = kOverflowReason;
    return r;
  }
}

LayoutEvaluation LayoutEvaluator::EvaluatePlanPath(const LayoutCandidate& c, bool simulate_over_budget, CostBreakdown* detail) {
  LayoutEvaluation r;
  TrainingConfig t = CandidateTraining(options_.training, c);
  Plan plan;
  try {
    plan = BuildPlan(model_, inventory_, c.dims, t, impl_->machine);
  } catch (const OverflowError&) {
    throw;  // EvaluateReference's one reason
  } catch (const Error& e) {
    r.status = LayoutEvaluation::Status::kInvalid;
    r.reason = e.what();
    return r;
  }
  r.dims = plan.dims;
  // The routing sample of this layout (SampleRouting, as simulate draws it), looked up or drawn
  // on first use; the cache holds one per key.
  const RoutingResult* sampled = nullptr;
  auto sample = [&]() -> const RoutingResult& {
    if (sampled) return *sampled;
    const int64_t routed_tokens = ComputeWorkload(plan).routed_tokens, oep = DispatchOep(plan);
    const auto key = std::make_tuple(plan.dims.ep, routed_tokens, oep);
    auto it = reference_routing_cache_.find(key);
    if (it == reference_routing_cache_.end()) {
      it = reference_routing_cache_.emplace(key, SampleRouting(cache_->model(), plan.dims.ep, routed_tokens, oep)).first;
    }
    sampled = &it->second;
    return *sampled;
  };
  // With --routing, the sample sizes the received rows (plan_command.cc: check and simulate).
  if (options_.routing_sizes_memory) plan.training.imbalance = AnalyzeReceivedRows(cache_->model(), sample(), std::nullopt).imbalance;
  const MemoryReport memory = ComputeMemory(plan);
  r.peak_bytes = memory.worst_peak_bytes;
  for (const auto& st : memory.stages) {
    r.static_peak_bytes = std::max(r.static_peak_bytes, st.worst.params_bytes + st.worst.grads_bytes + st.worst.optimizer_bytes);
  }
  const bool over = static_cast<double>(memory.worst_peak_bytes) > budget_bytes_;
  r.status = over ? LayoutEvaluation::Status::kOverBudget : LayoutEvaluation::Status::kRanked;
  if (over && !simulate_over_budget) return r;
  const RoutingResult& routing = sample();
  // deepep: the per-token node counts of this layout's EP group (its members' nodes), not cached.
  std::optional<RoutingResult> flex;
  if (plan.dims.ep > 1 && plan.training.dispatcher == Dispatcher::kDeepEp) {
    flex = routing;
    AddFlexCounts(cache_->model(), plan.meshes.sparse.GroupOf(0, plan.meshes.sparse.AxisIndex("ep")), plan.machine.gpus_per_node, *flex);
  }
  const CostBreakdown cost = SimulateStep(plan, options_.cluster, flex ? *flex : routing, options_.compute_model);
  if (detail) *detail = cost;
  r.simulated = true;
  r.step_time_us = cost.step_time_us;
  r.tokens_per_s_per_gpu = cost.tokens_per_s_per_gpu;
  r.mfu = cost.mfu;
  r.dominant_phase = cost.dominant_phase;
  return r;
}

LayoutEvaluation LayoutEvaluator::Evaluate(const LayoutCandidate& c, bool simulate_over_budget, CostBreakdown* detail) {
  if (LayoutEvaluator* padded = PaddedVocabEvaluator(c)) return padded->Evaluate(c, simulate_over_budget, detail);
  Impl& im = *impl_;
  const ModelSpec& m = model_;
  LayoutEvaluation r;
  r.status = LayoutEvaluation::Status::kInvalid;

  // --- Validation (BuildPlan's rules). Each broken rule's message goes to r.reason (the search
  // counts candidates per reason).
  auto invalid = [&r](const std::string& reason) -> LayoutEvaluation& {
    r.reason = reason;
    return r;
  };
  Impl::TrainingEntry* entry_ptr = nullptr;
  const Impl::DimsCheck* dims = nullptr;
  if (const std::string* broken = PreMemoryRuleBroken(im, options_, m, c, &entry_ptr, &dims)) return invalid(*broken);
  Impl::TrainingEntry& entry = *entry_ptr;
  const ParallelDims& d = dims->d;
  const GroupStatics& g = im.StaticsFor(m, options_.cluster, d, entry.t, entry.bytes);
  if (!g.valid) return invalid(g.error);
  r.dims = d;
  // With --routing, the candidate's own routing sample sizes its received rows (as simulate does).
  // (Only then a copy: a TrainingConfig holds strings.)
  std::optional<TrainingConfig> sized;
  if (options_.routing_sizes_memory) {
    sized = entry.t;
    const int64_t routed_tokens = ComputeWorkload(m, d, *sized).routed_tokens;
    sized->imbalance = cache_->SampleImbalance(d.ep, routed_tokens, DispatchOep(*sized, im.machine, d.ep));
  }
  const TrainingConfig& t = sized ? *sized : entry.t;

  // --- Memory (ComputeMemory's worst peak): the group's static bytes, then the activations and
  // communication buffers of this candidate's settings.
  const Workload w = ComputeWorkload(m, d, t);
  bool fallback = g.overflow;
  const Wide worst_peak = fallback ? 0 : WorstPeak(im, m, g, entry, w, d, t, &fallback);
  if (!fallback) fallback = CommVolumesNearLimit(im, m, w, d, t);
  if (fallback) {
    ++fallbacks_;
    return HandToReference(c, simulate_over_budget, detail);
  }
  r.peak_bytes = static_cast<int64_t>(worst_peak);
  r.static_peak_bytes = static_cast<int64_t>(g.static_worst);
  const bool over = static_cast<double>(r.peak_bytes) > budget_bytes_;
  r.status = over ? LayoutEvaluation::Status::kOverBudget : LayoutEvaluation::Status::kRanked;
  if (over && !simulate_over_budget) return r;

  // --- The cost model (what SimulateStep gathers from a plan).
  StepInputs in;
  if (!FillStepInputs(g, w, d, t, &in)) {
    ++fallbacks_;
    return HandToReference(c, simulate_over_budget, detail);
  }
  CostBreakdown cost = SimulateStepFromInputs(m, inventory_.totals, d, t, options_.cluster, in, options_.compute_model, detail != nullptr);
  r.simulated = true;
  r.step_time_us = cost.step_time_us;
  r.tokens_per_s_per_gpu = cost.tokens_per_s_per_gpu;
  r.mfu = cost.mfu;
  r.dominant_phase = cost.dominant_phase;
  if (detail) *detail = std::move(cost);
  return r;
}

}  // namespace dockyard
