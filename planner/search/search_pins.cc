// Pins refused before the search (see search_pins.h).
#include "planner/search/search_pins.h"

#include <algorithm>
#include <string>
#include <utility>
#include <tuple>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "planner/base/error.h"
#include "planner/layout/parallel_dims.h"
#include "planner/model/pipeline_schedule.h"

namespace dockyard {

void ValidateSearchPins(const SearchOptions& o) {
  const DegreePins& p = o.pins;
  const std::tuple<const char*, int64_t, bool> degrees[] = {{"--pp", p.pp, true},
                                                            {"--dp-replicate", p.dp_replicate, true},
                                                            {"--dp-shard", p.dp_shard, true},
                                                            {"--cp", p.cp, true},
                                                            {"--tp", p.tp, true},
                                                            {"--ep", p.ep, false},
                                                            {"--etp", p.etp, false}};
  int64_t product = 1;
  std::string named;
  for (const auto& [flag, pin, mesh] : degrees) {
    if (pin == 0) continue;  // searched
    if (pin < 1 || pin > o.world_size || o.world_size % pin != 0) {
      throw Error(
          fmt::format("{} {} does not divide --world-size {} (every degree is a factor of the world size)", flag, pin, o.world_size));
    }
    if (!mesh) continue;
    product *= pin;
    named += fmt::format("{}{} {}", named.empty() ? "" : " x ", flag, pin);
    if (o.world_size % product != 0) {
      throw Error(fmt::format("{} = {} does not divide --world-size {} (world = pp x dp_replicate x dp_shard x cp x tp)", named, product,
                              o.world_size));
    }
  }
  // torchtitan as it is has no expert TP (parallel_dims.h CheckEtpForConvention, PR #3167).
  if (std::string why; p.etp > 0 && !CheckEtpForConvention(o.convention, p.etp, &why)) throw Error("--etp: " + why);
  if (p.pp > o.max_pp) throw Error(fmt::format("--pp {} is above --max-pp {}", p.pp, o.max_pp));
  for (int64_t mbs : o.micro_batch_sizes) {
    if (mbs < 1) throw Error(fmt::format("--micro-batch-size: must be >= 1, got {}", mbs));
  }
  for (int64_t vpp : o.vpps) ValidateVpp(vpp);  // pipeline_schedule.h
  if (!VppSearched(o)) {
    ValidateVpp(o.training.run.vpp);
    if (o.training.run.vpp > 1 && p.pp == 1) {
      throw Error(fmt::format("--vpp {} needs pp > 1 (interleaved 1F1B runs vpp model chunks per pipeline rank), but --pp pins 1",
                              o.training.run.vpp));
    }
    if (o.training.run.vpp > 1 && o.max_pp == 1) {
      throw Error(fmt::format("--vpp {} needs pp > 1 (interleaved 1F1B runs vpp model chunks per pipeline rank), but --max-pp is 1",
                              o.training.run.vpp));
    }
  }
  // --overlap-param-gather-with-optimizer-step applies to the candidates with vpp > 1
  // (CandidateTraining): some must be able to have it.
  if (o.training.run.overlap_param_gather_with_optimizer_step) {
    const bool interleaved = o.max_pp > 1 && p.pp != 1 &&
                             (VppSearched(o) ? (o.every_vpp || std::any_of(o.vpps.begin(), o.vpps.end(), [](int64_t v) { return v > 1; }))
                                             : o.training.run.vpp > 1);
    if (!interleaved) {
      throw Error(
          "the pins conflict: --overlap-param-gather-with-optimizer-step is the interleaved schedule's (Megatron-LM: \"only "
          "supported with interleaved pipeline parallelism\"), which no candidate of this search runs (--vpp 1, --pp 1 or --max-pp 1): "
          "drop the flag, or let --vpp and --pp vary");
    }
  }
  // A pinned dispatcher: the opt-in ones asked for must be among the pins, and one that is not the
  // all-to-all needs tokens to leave their rank (ep > 1).
  if (!o.dispatchers.empty()) {
    auto pinned = [&](Dispatcher d) { return std::find(o.dispatchers.begin(), o.dispatchers.end(), d) != o.dispatchers.end(); };
    std::vector<std::string> pins;
    for (Dispatcher d : o.dispatchers) pins.push_back(DispatcherName(d));
    for (const auto& [asked, opt_in] :
         {std::pair<bool, Dispatcher>{o.include_deepep, Dispatcher::kDeepEp}, {o.include_allgather, Dispatcher::kAllGather}}) {
      if (asked && !pinned(opt_in)) {
        const char* name = DispatcherName(opt_in);
        throw Error(fmt::format("--search-dispatchers {} and --dispatcher {}: the pin leaves {} unsearched (give one of them)", name,
                                fmt::join(pins, ","), name));
      }
    }
    for (Dispatcher d : o.dispatchers) {
      if (d != Dispatcher::kAllToAll && p.ep == 1) {
        throw Error(fmt::format("--dispatcher {} needs ep > 1 (with ep 1 no token leaves its rank), but --ep pins 1", DispatcherName(d)));
      }
    }
  }
  // The flex backend applies to the deepep candidates: deepep must be searched or pinned.
  if (o.training.moe_flex_dispatcher_backend) {
    const bool deepep = o.dispatchers.empty() ? o.include_deepep
                                              : std::find(o.dispatchers.begin(), o.dispatchers.end(), Dispatcher::kDeepEp) != o.dispatchers.end();
    if (!deepep) {
      throw Error(fmt::format("--moe-flex-dispatcher-backend {} applies to the deepep dispatcher (Megatron's flex dispatcher, "
                              "transformer_config.py), which this search does not search (add --search-dispatchers deepep or pin "
                              "--dispatcher deepep)",
                              FlexBackendName(*o.training.moe_flex_dispatcher_backend)));
    }
  }
  if (o.ep_overlaps.empty() && !o.training.run.overlap_moe_ep_comm && o.training.run.delay_wgrad_compute) {
    throw Error(
        "the pins conflict: --delay-wgrad-compute is the EP overlap's (Megatron-Core: \"overlap_moe_expert_parallel_comm must be "
        "enabled when enabling delay_wgrad_compute\"), which is pinned off here (--no-overlap-moe-expert-parallel-comm): drop one of them");
  }
  if (o.ep_overlaps.empty() && o.training.run.overlap_moe_ep_comm) {
    // Megatron's rules on what is pinned; what is searched takes a value that passes.
    TrainingConfig t = o.training;
    if (VppSearched(o)) t.run.vpp = 2;
    if (!o.recomputes.empty()) t.recompute = Recompute::kNone;
    t.dispatcher = o.dispatchers.size() == 1 ? o.dispatchers.front() : Dispatcher::kAllToAll;
    try {
      ValidateEpOverlap(t, p.pp != 0 ? p.pp : 1, p.ep != 0 ? p.ep : 2);
      ValidateSharedExpertOverlap(t, o.convention == Convention::kMegatron, false);
    } catch (const Error& error) {
      throw Error(fmt::format("the pins conflict: {}", error.what()));
    }
  }
}

void ValidateSearchPinsForModel(const SearchOptions& o, const ModelSpec& model) {
  const int64_t ep = o.pins.ep, experts = model.moe.num_experts;
  if (ep > 0 && experts > 0 && experts % ep != 0) {
    throw Error(
        fmt::format("--ep {}: ep ({}) must divide num_experts ({}): each EP rank holds num_experts / ep whole experts", ep, ep, experts));
  }
  // Both pinned: torchtitan's EP >= TP for MoE models (parallel_dims.h CheckEpAtLeastTp, PR #4794).
  if (std::string why; ep > 0 && o.pins.tp > 0 && !CheckEpAtLeastTp(o.convention, ep, o.pins.tp, model, &why)) {
    throw Error("--ep, --tp: " + why);
  }
}

namespace {

// The settings beside the degrees: each one's row name, whether the search varies it (a list of
// values given; the dispatchers: none pinned) and, when it does not, its value in every row (null:
// no dimension at all, as the EP overlap under torchtitan when off, Megatron's flag).
struct SettingDimension {
  const char* name;
  bool searched;
  Json fixed;
};
std::vector<SettingDimension> SettingDimensions(const SearchOptions& o) {
  const TrainingConfig& t = o.training;
  Json dispatchers = Json::array();
  for (Dispatcher d : o.dispatchers) dispatchers.push_back(DispatcherName(d));
  const bool overlap_is_a_dimension = o.convention == Convention::kMegatron || t.run.overlap_moe_ep_comm;
  return {{"micro_batch_size", !o.micro_batch_sizes.empty(), t.micro_batch_size},
          {"recompute", !o.recomputes.empty(), RecomputeName(t.recompute)},
          {"vpp", VppSearched(o), t.run.vpp},
          {"dp_sharding", !o.dp_shardings.empty(), t.dp_sharding ? Json(DpShardingName(*t.dp_sharding)) : Json(nullptr)},
          {"overlap_moe_ep_comm", !o.ep_overlaps.empty(), overlap_is_a_dimension ? Json(t.run.overlap_moe_ep_comm) : Json(nullptr)},
          {"dispatcher", o.dispatchers.empty(), dispatchers}};
}

}  // namespace

Json SearchPinsToJson(const SearchOptions& o) {
  Json pins = Json::object();
  const DegreePins& p = o.pins;
  for (const auto& [name, pin] :
       {std::make_pair("pp", p.pp), std::make_pair("dp_replicate", p.dp_replicate), std::make_pair("dp_shard", p.dp_shard),
        std::make_pair("cp", p.cp), std::make_pair("tp", p.tp), std::make_pair("ep", p.ep), std::make_pair("etp", p.etp)}) {
    if (pin != 0) pins[name] = pin;
  }
  for (const SettingDimension& s : SettingDimensions(o)) {
    if (!s.searched && !s.fixed.is_null()) pins[s.name] = s.fixed;
  }
  return pins;
}

std::vector<std::string> SearchedSettings(const SearchOptions& o) {
  std::vector<std::string> searched;
  for (const SettingDimension& s : SettingDimensions(o)) {
    if (s.searched) searched.push_back(s.name);
  }
  return searched;
}

}  // namespace dockyard
