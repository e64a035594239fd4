// The predicted step as a report: its JSON block and its terminal table (see cost.h).
#include "planner/cost/cost.h"
#include "planner/base/error.h"
#include "planner/cost/prediction_error.h"

#include <cmath>
#include <map>
#include <sstream>

#include <fmt/format.h>

namespace dockyard {

Json CostToJson(const CostBreakdown& cost) {
  Json phases = Json::array();
  for (const auto& p : cost.phases) {
    Json j = {{"name", PhaseName(p.phase)}, {"layer_kind", LayerKindName(p.layer_kind)}, {"direction", DirectionName(p.direction)}, {"time_us", p.time_us}};
    if (!p.per_ep_rank_us.empty()) {
      j["slowest_ep_rank"] = p.slowest_ep_rank;
      j["per_ep_rank_us"] = p.per_ep_rank_us;
    }
    phases.push_back(std::move(j));
  }
  Json j{{"kind", "predicted"},
         {"phases", phases},
         {"moe_layer_us", cost.moe_layer_us},
         {"dense_layer_us", cost.dense_layer_us},
         {"stage_microbatch_us", cost.stage_microbatch_us},
         {"pipeline_bubble_us", cost.pipeline_bubble_us},
         {"dp_step_comm_us", cost.dp_step_comm_us},
         {"optimizer_us", cost.optimizer_us},
         {"host_overhead_us", cost.host_overhead_us},
         {"step_time_us", cost.step_time_us},
         {"step_time_interval80_us", {StepInterval80(cost.step_time_us).first, StepInterval80(cost.step_time_us).second}},
         {"tokens_per_s_per_gpu", cost.tokens_per_s_per_gpu},
         {"mfu", cost.mfu},
         {"model_flops_per_token", cost.model_flops_per_token},
         {"routing_imbalance", cost.routing_imbalance},
         {"critical_path", cost.critical_path},
         {"dominant_phase", cost.dominant_phase}};
  j["moe_sync_idle_us"] = cost.moe_sync_idle_us;
  if (cost.ep_overlap.on) {  // opt-in keys only
    const EpOverlapDetail& e = cost.ep_overlap;
    j["ep_overlap"] = {{"paired_share", e.paired_share},
                       {"a2a_alone_us", e.a2a_alone_us},
                       {"a2a_added_us", e.a2a_added_us},
                       {"sync_idle_alone_us", e.sync_idle_alone_us},
                       {"sync_idle_exposed_us", e.sync_idle_exposed_us},
                       {"saved_us", e.SavedUs()}};
    if (e.delay_wgrad) j["ep_overlap"]["delay_wgrad_saved_us"] = e.delay_wgrad_saved_us;
  }
  if (cost.layer_sac_every > 0) {  // opt-in keys only
    j["layer_sac_every"] = cost.layer_sac_every;
    j["checkpointed_moe_layer_us"] = cost.checkpointed_moe_layer_us;
    j["checkpointed_dense_layer_us"] = cost.checkpointed_dense_layer_us;
  }
  return j;
}

std::string EpOverlapText(const EpOverlapDetail& e) {
  return fmt::format(
      "EP overlap (combined 1F1B; {:.0f} % of the forwards run beside another micro-batch's backward, the rest alone{}): per MoE layer and "
      "micro-batch, the dispatch and combine all-to-alls take {:.1f} us alone and add {:.1f} us with it (what stays exposed plus the "
      "compute slowed beside them: the dispatch and combine phases, split by their time); the dispatcher's host synchronization "
      "{:.1f} us alone, {:.1f} us left (in router forward); {}",
      100.0 * e.paired_share, e.paired_share > 0 ? "" : ": one micro-batch per pipeline rank leaves nothing to pair, so the overlap changes nothing",
      e.a2a_alone_us, e.a2a_added_us, e.sync_idle_alone_us, e.sync_idle_exposed_us,
      std::abs(e.SavedUs()) < 0.05 ? std::string("net nothing: the overlap changes this layer's time by less than 0.1 us")
      : e.SavedUs() > 0            ? fmt::format("net {:.1f} us saved", e.SavedUs())
                                   : fmt::format("net {:.1f} us LOST: the overlap costs this layer more than it hides", -e.SavedUs())) +
         (!e.delay_wgrad ? std::string()
          : e.delay_wgrad_saved_us > 0.05
              ? fmt::format("; the delayed weight gradients {:.1f} us of it", e.delay_wgrad_saved_us)
              : std::string("; the delayed weight gradients save nothing here: the backward dispatch's wait for the weight gradient is "
                            "on no pair's critical path (they help where the MLP backward, not the all-to-alls or the compute beside "
                            "them, holds that dispatch back, and under CUDA_DEVICE_MAX_CONNECTIONS=1)"));
}

EpOverlapDetail EpOverlapFromJson(const Json& j) {
  auto number = [&](const char* key) {
    if (!j.is_object() || !j.contains(key) || !j.at(key).is_number()) {
      throw Error(fmt::format("predicted.ep_overlap.{}: missing or not a number (CostToJson writes every key)", key));
    }
    return j.at(key).get<double>();
  };
  EpOverlapDetail e;
  e.on = true;
  e.paired_share = number("paired_share");
  e.a2a_alone_us = number("a2a_alone_us");
  e.a2a_added_us = number("a2a_added_us");
  e.sync_idle_alone_us = number("sync_idle_alone_us");
  e.sync_idle_exposed_us = number("sync_idle_exposed_us");
  e.delay_wgrad = j.contains("delay_wgrad_saved_us");
  if (e.delay_wgrad) e.delay_wgrad_saved_us = number("delay_wgrad_saved_us");
  return e;
}

std::string CostToText(const CostBreakdown& cost) {
  std::ostringstream out;
  out << fmt::format("Predicted  step {:.1f} ms, {:.0f} tokens/s per GPU, MFU {:.1f}%, dominant phase: {} (routing imbalance {:.2f})\n",
                     cost.step_time_us / 1e3, cost.tokens_per_s_per_gpu, 100.0 * cost.mfu, cost.dominant_phase, cost.routing_imbalance);
  const auto [low, high] = StepInterval80(cost.step_time_us);
  out << fmt::format(
      "  80 % interval of the step {:.1f} .. {:.1f} ms (the model against measured runs, docs/fidelity.md); two layouts of one model "
      "on one cluster differ by less than a factor {:.3f} within their error (search's vs best)\n",
      low / 1e3, high / 1e3, std::exp(kZ80 * kPairLogErrorSd));
  out << fmt::format("  per layer and micro-batch, slowest rank (us)\n  {:<16} {:<6} {:>12} {:>12}\n", "phase", "layer", "forward",
                     "backward");
  std::map<std::pair<LayerKind, Phase>, std::pair<double, double>> rows;
  std::vector<std::pair<LayerKind, Phase>> order;
  for (const auto& p : cost.phases) {
    auto key = std::make_pair(p.layer_kind, p.phase);
    if (!rows.count(key)) order.push_back(key);
    (p.direction == Direction::kForward ? rows[key].first : rows[key].second) = p.time_us;
  }
  for (const auto& key : order) {
    out << fmt::format("  {:<16} {:<6} {:>12.1f} {:>12.1f}\n", PhaseName(key.second), LayerKindName(key.first), rows[key].first, rows[key].second);
  }
  out << fmt::format(
      "  MoE layer {:.1f} us, dense layer {:.1f} us (fwd+bwd); slowest stage {:.1f} us per micro-batch; "
      "bubble {:.1f} us; step-end DP comm {:.1f} us; optimizer {:.1f} us; host {:.1f} us\n",
      cost.moe_layer_us, cost.dense_layer_us, cost.stage_microbatch_us, cost.pipeline_bubble_us, cost.dp_step_comm_us, cost.optimizer_us,
      cost.host_overhead_us);
  if (cost.ep_overlap.on) {
    out << "  " << EpOverlapText(cost.ep_overlap) << "\n";
  } else if (cost.moe_sync_idle_us > 0) {
    out << fmt::format(
        "  router rows: {:.1f} us of them per MoE layer and micro-batch is GPU idle while the dispatcher waits on the host for the "
        "token counts (knobs host.moe_sync_idle_us; none under --full-iteration-cuda-graph or --moe-pad-expert-input-to-capacity)\n",
        cost.moe_sync_idle_us);
  }
  if (cost.layer_sac_every > 0) {
    out << fmt::format(
        "  per-layer selective checkpointing: one layer in {} of each stage checkpointed (MoE layer {:.1f} us, dense layer "
        "{:.1f} us fwd+bwd); the phases above are the other layers'\n",
        cost.layer_sac_every, cost.checkpointed_moe_layer_us, cost.checkpointed_dense_layer_us);
  }
  return out.str();
}

}  // namespace dockyard
