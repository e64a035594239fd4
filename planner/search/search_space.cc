// The search request's rules (see search_space.h).
#include "planner/search/search_space.h"

#include <algorithm>
#include <vector>

#include <fmt/format.h>

#include "planner/base/error.h"
#include "planner/model/machine.h"
#include "planner/search/rejection_reasons.h"
#include "planner/cost/cost.h"
#include "planner/routing/plan_routing.h"

namespace dockyard {

void ApplySearchedSettings(const SearchSettingsPinned& pinned, SearchOptions* s) {
  const bool megatron = s->convention == Convention::kMegatron;
  if (!pinned.micro_batch_size) s->micro_batch_sizes = {1, 2, 4};
  if (!pinned.recompute) s->recomputes = {Recompute::kNone, Recompute::kSelective, Recompute::kFull};
  if (!pinned.vpp) s->every_vpp = true;  // 1..MaxVpp(pp, num_hidden_layers) per layout (pipeline_schedule.h)
  if (!pinned.dp_sharding) {
    // torchtitan shards with FSDP2 only: its MoE models' parallelize.py applies fully_shard over
    // (dp_replicate, fsdp) in every case (the replicate-only layout is the fsdp candidate with
    // dp_shard 1), and its TOML era ran DDP only without FSDP and EP; --emit torchtitan writes fsdp.
    s->dp_shardings = megatron ? std::vector<DpSharding>{DpSharding::kZero1, DpSharding::kDdp} : std::vector<DpSharding>{DpSharding::kFsdp};
  }
  if (!pinned.ep_overlap && megatron) s->ep_overlaps = {false, true};
  if (pinned.dispatcher) s->dispatchers = {*pinned.dispatcher};
  // torchtitan's per-layer checkpointing is a form of selective recompute: it pins that dimension.
  if (!s->training.selective_ac_option.empty() && !pinned.recompute) s->recomputes = {Recompute::kSelective};
}

void ParseSearchDispatchers(const std::string& list, SearchOptions* s) {
  std::vector<std::string> names;
  for (size_t start = 0; !list.empty() && start <= list.size();) {
    const size_t comma = std::min(list.find(',', start), list.size());
    names.push_back(list.substr(start, comma - start));
    start = comma + 1;
  }
  for (size_t i = 0; i < names.size(); ++i) {
    const std::string& name = names[i];
    if (std::find(names.begin(), names.begin() + static_cast<std::ptrdiff_t>(i), name) != names.begin() + static_cast<std::ptrdiff_t>(i)) {
      throw Error(fmt::format("--search-dispatchers {}: '{}' is given twice (list each dispatcher once)", list, name));
    }
    if (name == DispatcherName(Dispatcher::kDeepEp)) {
      s->include_deepep = true;
    } else if (name == DispatcherName(Dispatcher::kAllGather)) {
      s->include_allgather = true;
    } else if (name == DispatcherName(Dispatcher::kAllToAll) || name == DispatcherName(Dispatcher::kDeredundency)) {
      throw Error(fmt::format(
          "--search-dispatchers: '{}' is always searched (all_to_all for every layout, deredundency where an EP group spans nodes); "
          "the list adds only the opt-in dispatchers deepep and allgather, comma-separated",
          name));
    } else {
      throw Error(fmt::format("--search-dispatchers: unknown dispatcher '{}' (expected deepep or allgather, comma-separated)", name));
    }
  }
}

void ValidateSearchBudgetFlag(std::optional<double> gpu_memory_gib) {
  if (!gpu_memory_gib) return;
  Machine budget;
  budget.gpu_memory_gib = *gpu_memory_gib;
  ValidateMachine(budget, "--");  // the range (exit 1), worded as plan, check and simulate word it
  if (!(*gpu_memory_gib > 0)) {
    throw Error(fmt::format("--gpu-memory-gib: must be > 0 in search, got {} (omit it to hold layouts to the cluster's memory_gib)",
                            *gpu_memory_gib));
  }
}

void RejectUnsearchableRunSettings(const std::string& pipeline_layout, const std::string& pipeline_schedule) {
  if (!pipeline_layout.empty()) {
    throw Error(
        fmt::format("--pipeline-model-parallel-layout \"{}\": a layout fixes pp x vpp stages; search varies pp (use plan / "
                    "simulate for a layout, or --account-for-embedding-in-pipeline-split / --account-for-loss-in-pipeline-split)",
                    pipeline_layout));
  }
  if (pipeline_schedule == "dualpipe") {
    throw Error(
        "--pipeline-schedule dualpipe: the layout search's memory rules do not hold DualPipe's second model chunk per rank "
        "(use plan / simulate for DualPipe)");
  }
}

int64_t SearchRoutingLayers(const ModelSpec& model, const RoutingSpec& routing, std::optional<int64_t> requested) {
  // (A trace samples every MoE layer; the sampler reads all of them whatever routing_layers says.)
  if (routing.kind == RoutingKind::kTrace) return requested.value_or(std::min<int64_t>(model.NumMoeLayers(), kDefaultRoutingLayers));
  return RoutingLayersToSample(model, routing, requested, kDefaultRoutingLayers, "--routing-layers");
}

int64_t HeaderRoutingLayers(const ModelSpec& model, const SearchOptions& s) {
  return s.routing.kind == RoutingKind::kTrace ? model.NumMoeLayers() : s.routing_layers;
}

std::string PinnedLayerSplitNote(const TrainingConfig& training) {
  if (training.pp_layer_split.empty()) return "";
  return fmt::format(
      "dockyard-plan search: note: the model's training block fixes pp_layer_split ({} stages): only "
      "pp = {} can be valid\n",
      training.pp_layer_split.size(), training.pp_layer_split.size());
}

std::string EmptySearchText(const SearchResult& result) {
  std::string out = SearchCountsText(result);
  if (result.enumerated == 0) {
    out += "dockyard-plan search: no layout of this world size matches the pinned degrees\n";
  } else if (result.over_budget == 0 && result.invalid == 0 && result.num_microbatches) {
    // The pinned schedule, not dp x micro_batch_size, is what no layout meets (global_batch.h GlobalBatchMismatch).
    out += fmt::format("dockyard-plan search: --num-microbatches {} meets the global batch ({} sequences) in no layout: {}\n",
                       *result.num_microbatches, result.global_batch_size,
                       result.megatron
                           ? "Megatron runs every micro-batch of a step in one schedule, so num_microbatches must equal global batch / "
                             "(dp x micro_batch_size) (dp = dp_replicate x dp_shard); omit --num-microbatches to derive it"
                           : "torchtitan accumulates whole schedules, so global batch / (dp x micro_batch_size) (dp = dp_replicate x "
                             "dp_shard) must be a multiple of num_microbatches; omit --num-microbatches for one schedule per step");
  } else if (result.over_budget == 0 && result.invalid == 0) {
    out += fmt::format(
        "dockyard-plan search: the global batch ({} sequences) divides no layout: it must be a multiple of dp x "
        "micro_batch_size (dp = dp_replicate x dp_shard) of some layout\n",
        result.global_batch_size);
  } else if (result.over_budget == 0) {
    out += "dockyard-plan search: no valid layout (every candidate breaks a rule or the global batch; counts above)\n";
  } else {
    out += "dockyard-plan search: no valid layout fits the budget\n";
  }
  // Nothing over the budget: every candidate was rejected by a rule or the global batch; say which.
  if (result.enumerated > 0 && result.over_budget == 0) out += RejectionReasonsText(result);
  return out;
}

}  // namespace dockyard
