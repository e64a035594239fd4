// Received rows of a routing sample (see received_rows.h).
#include "planner/routing/received_rows.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include <fmt/format.h>

#include "planner/base/error.h"

namespace dockyard {

double SampleImbalance(const RoutingResult& sample) {
  int64_t max_rows = 0;
  double mean = 0;
  for (const LayerRouting& L : sample.layers) {
    max_rows = std::max(max_rows, L.max_received);
    mean = L.mean_received;
  }
  if (mean <= 0 || max_rows <= 0) return 1.0;
  double imbalance = std::max(1.0, static_cast<double>(max_rows) / mean);
  // ceil(mean * imbalance) must give back max_rows (workload.h); step down past rounding.
  while (imbalance > 1.0 && std::ceil(mean * imbalance) > static_cast<double>(max_rows)) imbalance = std::nextafter(imbalance, 0.0);
  return imbalance;
}

int64_t ExpertCapacity(int64_t tokens, int64_t top_k, int64_t num_experts, double capacity_factor) {
  if (!std::isfinite(capacity_factor) || capacity_factor <= 0 || capacity_factor > 1e6) {
    throw Error(fmt::format("--capacity-factor must be a finite number in (0, 1e6], got {}", capacity_factor));
  }
  if (num_experts < 1) throw Error(fmt::format("capacity: num_experts must be >= 1, got {}", num_experts));
  const double num_tokens = static_cast<double>(tokens) * static_cast<double>(top_k);
  return static_cast<int64_t>(std::ceil(num_tokens / static_cast<double>(num_experts) * capacity_factor));
}

ReceivedRowsReport AnalyzeReceivedRows(const RoutingModel& model, const RoutingResult& sample, std::optional<double> capacity_factor) {
  if (sample.num_slots != 0) throw Error("received rows: the sample routes to replicated slots; analyze the sample before replicas");
  ReceivedRowsReport r;
  r.ep = sample.ep;
  r.tokens_per_rank = sample.tokens_per_rank;
  r.top_k = sample.top_k;
  r.num_experts = sample.num_experts;
  r.imbalance = SampleImbalance(sample);
  r.capacity_factor = capacity_factor;
  if (capacity_factor) r.capacity = ExpertCapacity(sample.tokens_per_rank, sample.top_k, sample.num_experts, *capacity_factor);
  std::vector<int64_t> counts(static_cast<size_t>(sample.num_experts));
  for (size_t l = 0; l < sample.layers.size(); ++l) {
    const LayerRouting& L = sample.layers[l];
    LayerReceivedRows x;
    x.layer = static_cast<int64_t>(l);
    x.max_received = L.max_received;
    x.mean_received = L.mean_received;
    x.p99_received = L.p99_received;
    x.max_over_mean = L.imbalance;
    r.max_received_rows = std::max(r.max_received_rows, L.max_received);
    if (capacity_factor) {
      for (int64_t src = 0; src < sample.ep; ++src) {
        std::fill(counts.begin(), counts.end(), 0);
        for (const int32_t e : SampleTokenExperts(model, x.layer, src, sample.tokens_per_rank)) ++counts[static_cast<size_t>(e)];
        for (const int64_t c : counts) x.dropped += std::max<int64_t>(0, c - r.capacity);
      }
      r.dropped += x.dropped;
    }
    r.layers.push_back(x);
  }
  r.assignments = sample.tokens_per_rank * sample.top_k * sample.ep * static_cast<int64_t>(sample.layers.size());
  r.drop_fraction = r.assignments > 0 ? static_cast<double>(r.dropped) / static_cast<double>(r.assignments) : 0.0;
  return r;
}

Json ReceivedRowsToJson(const ReceivedRowsReport& r) {
  Json layers = Json::array();
  for (const LayerReceivedRows& x : r.layers) {
    Json j = {{"layer", x.layer},
              {"max_received_rows", x.max_received},
              {"mean_received_rows", x.mean_received},
              {"p99_received_rows", x.p99_received},
              {"max_over_mean", x.max_over_mean}};
    if (r.capacity_factor) j["dropped_assignments"] = x.dropped;
    layers.push_back(std::move(j));
  }
  Json j = {{"ep", r.ep},
            {"tokens_per_rank", r.tokens_per_rank},
            {"top_k", r.top_k},
            {"layers", layers},
            {"imbalance", r.imbalance},
            {"max_received_rows", r.max_received_rows},
            {"sizes_memory", r.sizes_memory}};
  if (r.capacity_factor) {
    j["capacity"] = {{"capacity_factor", *r.capacity_factor},
                     {"capacity_per_expert_per_rank", r.capacity},
                     {"assignments", r.assignments},
                     {"dropped_assignments", r.dropped},
                     {"drop_fraction", r.drop_fraction}};
  }
  return j;
}

std::string ReceivedRowsToText(const ReceivedRowsReport& r) {
  std::ostringstream out;
  out << fmt::format("Received   rows per EP rank and sampled MoE layer (ep {}, {} tokens x top_k {} = {} mean)\n", r.ep, r.tokens_per_rank,
                     r.top_k, r.tokens_per_rank * r.top_k);
  out << fmt::format("  {:>5} {:>10} {:>12} {:>10} {:>9}{}\n", "layer", "max", "mean", "p99", "max/mean",
                     r.capacity_factor ? fmt::format(" {:>14}", "dropped") : "");
  for (const LayerReceivedRows& x : r.layers) {
    const int64_t layer_assignments = r.tokens_per_rank * r.top_k * r.ep;
    out << fmt::format(
        "  {:>5} {:>10} {:>12.1f} {:>10} {:>9.3f}{}\n", x.layer, x.max_received, x.mean_received, x.p99_received, x.max_over_mean,
        r.capacity_factor ? fmt::format(" {:>13.3f}%", layer_assignments > 0 ? 100.0 * x.dropped / layer_assignments : 0.0) : "");
  }
  if (r.sizes_memory) {
    out << fmt::format("  memory sized for {} received rows (imbalance {:.4f}, the largest over the sampled layers)\n", r.max_received_rows,
                       r.imbalance);
  } else {
    out << fmt::format(
        "  the largest is {} received rows (imbalance {:.4f}); memory is sized by --imbalance, not by this sample (give --routing for "
        "that)\n",
        r.max_received_rows, r.imbalance);
  }
  if (r.capacity_factor) {
    out << fmt::format(
        "  capacity factor {}: {} rows per expert per source rank (ceil({} x {} / {} x {})); {} of {} assignments dropped ({:.3f}%)\n",
        *r.capacity_factor, r.capacity, r.tokens_per_rank, r.top_k, r.num_experts, *r.capacity_factor, r.dropped, r.assignments,
        100.0 * r.drop_fraction);
  }
  return out.str();
}

}  // namespace dockyard
