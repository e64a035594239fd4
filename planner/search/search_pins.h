// Pins that contradict each other or the world size, refused before a search enumerates anything:
// otherwise every candidate would be counted as invalid by rule (or none enumerated) and the user
// would learn only "no layout" instead of which flags conflict.
#pragma once

#include <string>
#include <vector>

#include "planner/base/json_util.h"
#include "planner/search/search_options.h"

namespace dockyard {

// Throws dockyard::Error naming the flags, their values and the rule when:
//  - a pinned degree (--pp, --dp-replicate, --dp-shard, --cp, --tp, --ep, --etp) does not divide
//    --world-size, or the pinned mesh degrees (pp x dp_replicate x dp_shard x cp x tp) multiply to
//    a number that does not divide it (world = pp x dp_replicate x dp_shard x cp x tp);
//  - --pp is above --max-pp;
//  - a vpp (pinned: training.run.vpp, or a searched value) or a searched micro-batch size is < 1;
//    a pinned vpp > 1 with --pp 1 (interleaved 1F1B needs pp > 1);
//  - the EP overlap is pinned on (training.run.overlap_moe_ep_comm with ep_overlaps empty) and the
//    other pins alone break Megatron's rules (ValidateEpOverlap; a dimension not pinned takes a
//    value that passes).
void ValidateSearchPins(const SearchOptions& options);

// The pins the model refuses, before the search: a pinned --ep that does not divide num_experts
// (each EP rank holds num_experts / ep whole experts; the rule of layout/parallel_dims.h
// CheckDimsForModel), which would otherwise enumerate no layout and say only that.
// Throws dockyard::Error naming the flag, both values and the rule.
void ValidateSearchPinsForModel(const SearchOptions& options, const ModelSpec& model);

// The dimensions a search holds fixed, for the report header (header.h "degrees" / "pinned"): the
// pinned degrees ({"pp": 8, "tp": 2, ...}: DegreePins that are set) and the settings searched by
// no list (SearchOptions: micro_batch_sizes, recomputes, vpps, dp_shardings, ep_overlaps empty:
// the training value holds in every row; the EP overlap under torchtitan only when on, as it is
// Megatron's flag) under their row names, and "dispatcher" (a list) when --dispatcher pins them.
// An empty object when every dimension is searched.
Json SearchPinsToJson(const SearchOptions& options);
// The settings a search varies per row (those SearchPinsToJson leaves out), by row name.
std::vector<std::string> SearchedSettings(const SearchOptions& options);

}  // namespace dockyard
