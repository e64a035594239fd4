// The settings `dockyard-plan search` varies beside the degrees and the rules that shape a search
// request (docs/search.md): which settings are searched when not pinned, the opt-in dispatchers,
// the run settings a search cannot vary, the MoE layers its routing samples, and why a search that
// ranked nothing ranked nothing.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "planner/model/dispatcher.h"
#include "planner/model/model_spec.h"
#include "planner/model/training.h"
#include "planner/search/search.h"
#include "planner/routing/routing.h"

namespace dockyard {

// Which of the settings searched beside the degrees the command line pins (its value is then in
// SearchOptions::training); `dispatcher` unset = searched.
struct SearchSettingsPinned {
  bool micro_batch_size = false, recompute = false, vpp = false, dp_sharding = false, ep_overlap = false;
  std::optional<Dispatcher> dispatcher;
};

// Fills SearchOptions' searched lists for what is not pinned (s->convention and s->training set):
//  - micro-batch sizes {1, 2, 4}; every vpp the chunk rule allows (pipeline_schedule.h MaxVpp);
//  - recompute none, selective and full; only selective when training.selective_ac_option is set
//    (torchtitan's per-layer checkpointing is a form of selective recompute);
//  - dp sharding fsdp under torchtitan (its MoE models apply FSDP2 / HSDP only), zero1 (the
//    distributed optimizer) and ddp under megatron;
//  - Megatron's EP overlap (--overlap-moe-expert-parallel-comm) off and on under megatron; off
//    under torchtitan (it is a Megatron flag);
//  - the dispatcher, when pinned, the only one.
void ApplySearchedSettings(const SearchSettingsPinned& pinned, SearchOptions* s);

// --search-dispatchers "deepep,allgather": the opt-in dispatchers ranked beside all_to_all and
// deredundency. Empty text = none. Throws dockyard::Error naming an unknown name or one given twice.
void ParseSearchDispatchers(const std::string& list, SearchOptions* s);

// search --gpu-memory-gib G: the budget every layout is held to, in GiB. Not given (nullopt), the
// search uses the cluster's memory_gib; given, it must be in machine.h ValidateMachine's range
// (finite, [0, 1e6]) and > 0 (0 is not "no budget" in a search: every layout has one). Throws
// dockyard::Error naming the flag, its value and the rule.
void ValidateSearchBudgetFlag(std::optional<double> gpu_memory_gib);

// Throws dockyard::Error for run settings a search cannot vary: a Megatron pipeline layout (it fixes
// pp x vpp stages, the search varies pp) and the DualPipe schedule (the search's memory rules do not
// hold its second model chunk per rank). Empty text = not given.
void RejectUnsearchableRunSettings(const std::string& pipeline_layout, const std::string& pipeline_schedule);

// The MoE layers a search samples per (ep, tokens, oep): `requested`, else min(kDefaultRoutingLayers, MoE layers), as simulate
// (RoutingLayersToSample, named --routing-layers). A trace samples every layer whatever this says,
// and is not range-checked here. HeaderRoutingLayers: the layers the report header names (a
// trace: every MoE layer).
int64_t SearchRoutingLayers(const ModelSpec& model, const RoutingSpec& routing, std::optional<int64_t> requested);
int64_t HeaderRoutingLayers(const ModelSpec& model, const SearchOptions& s);

// A note when the model's training block fixes pp_layer_split (only pp = its stage count can be
// valid); empty otherwise. Opens with "dockyard-plan search: note: ".
std::string PinnedLayerSplitNote(const TrainingConfig& training);

// What a search that ranked nothing says on stderr: its counts (SearchCountsText), then why: no
// layout matches the pins (none enumerated), the global batch divides no layout (nothing invalid
// or over budget), every candidate breaks a rule or the batch (nothing over budget), or no valid
// layout fits the budget.
std::string EmptySearchText(const SearchResult& result);

}  // namespace dockyard
