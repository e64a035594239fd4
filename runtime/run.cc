// Run, validate, time, report (run.h).
#include "runtime/run.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "planner/routing/replica_routing.h"
#include "planner/report/report.h"
#include "runtime/pipeline.h"
#include "runtime/reference.h"

namespace dockyard::runtime {

namespace {

double Seconds(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void Compare(const RunConfig& c, const RankResult& got, const std::vector<float>& ref, RankReport& r, std::vector<Mismatch>& mismatches) {
  const double atol = c.options.atol, rtol = c.options.rtol;
  r.checked = static_cast<int64_t>(got.output.size());
  if (got.output.size() != ref.size()) {
    r.wrong = std::max<int64_t>(1, static_cast<int64_t>(std::max(got.output.size(), ref.size())));
    r.max_abs_error = r.max_rel_error = INFINITY;
    return;
  }
  for (size_t i = 0; i < ref.size(); ++i) {
    const double o = got.output[i], e = ref[i];
    const double err = std::fabs(o - e);
    const bool bad = !std::isfinite(o) || err > atol + rtol * std::fabs(e);
    if (std::isfinite(err)) {
      r.max_abs_error = std::max(r.max_abs_error, err);
      r.max_rel_error = std::max(r.max_rel_error, err / std::max(std::fabs(e), std::max(atol, 1e-30)));
    } else {
      r.max_abs_error = r.max_rel_error = INFINITY;
    }
    if (bad) {
      ++r.wrong;
      if (static_cast<int>(mismatches.size()) < kMaxMismatches) {
        mismatches.push_back({r.rank, static_cast<int64_t>(i) / c.hidden, static_cast<int64_t>(i) % c.hidden, o, e});
      }
    }
  }
}

// Why --overlap-shared-experts did not apply ("" when it did or was not asked for).
std::string OverlapNotApplied(const RunConfig& c) {
  if (!c.options.overlap_shared_experts) return "";
  const SharedMode m = c.ranks.empty() ? SharedMode::kNone : c.ranks.front().shared_mode;
  if (c.dispatcher != Dispatcher::kAllToAll) return "the deredundency dispatcher's combine is a reduce-scatter";
  if (m == SharedMode::kNone) return "the model has no shared experts";
  if (m == SharedMode::kSequenceParallel) return "sequence-parallel shared experts communicate over tp";
  return "";
}

std::string Sci(double v) {
  return std::isfinite(v) ? fmt::format("{:.3e}", v) : std::string("inf");
}

}  // namespace

namespace {

// The planner's matrices of this layer beside the measured rows (RunReport::predicted_replica_routing).
void CompareReplicaRows(const RunConfig& c, RunReport& report) {
  const bool comparable =
      c.routing_model != nullptr && static_cast<int64_t>(c.ranks.size()) == c.ep && c.options.tokens_per_source.empty() &&
      std::all_of(c.ranks.begin(), c.ranks.end(), [](const RankConfig& r) { return r.source == r.ep_index && r.rank == r.source; });
  if (!comparable) return;
  report.predicted_replica_routing =
      SampleReplicatedLayer(*c.routing_model, c.routing_layer, *c.placement, c.options.tokens_per_rank, c.options.redundant->choice);
  const LayerRouting& L = *report.predicted_replica_routing;
  const int64_t slots = c.placement->SlotsPerRank();
  report.replica_rows_mismatches = 0;
  for (const RankReport& r : report.ranks) {
    const std::vector<int64_t> want(L.rows_per_local_expert.begin() + r.ep_index * slots,
                                    L.rows_per_local_expert.begin() + (r.ep_index + 1) * slots);
    if (r.rows_per_local_expert != want || r.received_rows != L.received[static_cast<size_t>(r.ep_index)]) {
      ++report.replica_rows_mismatches;
    }
  }
}

}  // namespace

RunReport RunMoeLayer(const Plan& plan, const RunOptions& options, Backend& backend) {
  return RunMoeLayer(MakeRunConfig(plan, options), backend);
}

RunReport RunMoeLayer(const RunConfig& c, Backend& backend) {
  RunReport report;
  report.config = c;
  report.backend = backend.name();  // set again after the run: the GEMM path that ran
  std::vector<RankResult> results(c.ranks.size());
  const int64_t first_rank = c.ranks.empty() ? 0 : c.ranks.front().rank;
  const auto t0 = std::chrono::steady_clock::now();
  backend.RunRanks(RankSpecs(c), [&](RankContext& ctx) {
    const size_t i = static_cast<size_t>(ctx.rank() - first_rank);
    RunRank(ctx, c, c.ranks[i], results[i]);
  });
  report.run_seconds = Seconds(t0);
  report.backend = backend.name();

  const auto t1 = std::chrono::steady_clock::now();
  const ReferenceOutput ref = ComputeReference(c, c.options.reference_threads);
  report.reference_seconds = Seconds(t1);
  report.tokens_per_expert = ref.tokens_per_expert;

  for (size_t i = 0; i < results.size(); ++i) {
    // A multi-process launch checks and reports the ranks this process ran.
    if (!backend.RunsRankIndex(i, results.size())) continue;
    const RankResult& got = results[i];
    RankReport r;
    r.rank = got.rank;
    r.source = got.source;
    r.tokens = got.tokens;
    r.routed_rows = got.routed_rows;
    r.sent_rows = got.sent_rows;
    r.received_rows = got.received_rows;
    r.phase_us = got.phase_us;
    r.ep_index = c.ranks[i].ep_index;
    r.rows_per_local_expert = got.tokens_per_local_expert;
    r.flex_network_rows = got.flex_network_rows;
    r.flex_nvlink_rows = got.flex_nvlink_rows;
    r.gathered_rows = got.gathered_rows;
    const size_t s = static_cast<size_t>(std::lower_bound(ref.sources.begin(), ref.sources.end(), got.source) - ref.sources.begin());
    Compare(c, got, ref.outputs[s], r, report.first_mismatches);
    report.max_abs_error = std::max(report.max_abs_error, r.max_abs_error);
    report.max_rel_error = std::max(report.max_rel_error, r.max_rel_error);
    report.wrong += r.wrong;
    report.checked += r.checked;
    report.ranks.push_back(std::move(r));
    if (c.options.record_collectives) report.collectives.push_back(got.collectives);
  }
  if (c.placement) CompareReplicaRows(c, report);
  const auto& names = PhaseNames();
  for (size_t p = 0; p < names.size(); ++p) {
    PhaseReport ph;
    ph.name = names[p];
    double sum = 0;
    for (const RankReport& r : report.ranks) {
      const double us = r.phase_us.empty() ? 0.0 : r.phase_us[p];
      ph.per_rank_us.push_back(us);
      sum += us;
      if (ph.slowest_rank < 0 || us > ph.time_us) {
        ph.time_us = us;
        ph.slowest_rank = r.rank;
      }
    }
    ph.mean_us = report.ranks.empty() ? 0.0 : sum / static_cast<double>(report.ranks.size());
    report.phases.push_back(std::move(ph));
  }
  return report;
}

namespace {

Json FiniteOrNull(double v) {
  return std::isfinite(v) ? Json(v) : Json(nullptr);
}

// One row per rank: tokens, rows, errors and phase times (deepep's link rows, allgather's gathered rows).
Json PerRankJson(const RunReport& rep) {
  const RunConfig& c = rep.config;
  Json per_rank = Json::array();
  for (const RankReport& r : rep.ranks) {
    Json phases = Json::object();
    for (size_t p = 0; p < PhaseNames().size() && p < r.phase_us.size(); ++p) phases[PhaseNames()[p]] = r.phase_us[p];
    per_rank.push_back({{"rank", r.rank},
                        {"source", r.source},
                        {"tokens", r.tokens},
                        {"routed_rows", r.routed_rows},
                        {"sent_rows", r.sent_rows},
                        {"received_rows", r.received_rows},
                        {"max_abs_error", FiniteOrNull(r.max_abs_error)},
                        {"max_rel_error", FiniteOrNull(r.max_rel_error)},
                        {"wrong", r.wrong},
                        {"checked", r.checked},
                        {"phases_us", phases}});
    if (!r.flex_network_rows.empty()) {  // deepep: tokens sent per EP member and link level
      per_rank.back()["network_rows"] = r.flex_network_rows;
      per_rank.back()["nvlink_rows"] = r.flex_nvlink_rows;
    }
    if (c.dispatcher == Dispatcher::kAllGather) per_rank.back()["gathered_rows"] = r.gathered_rows;
  }
  return per_rank;
}

// The measured phases in the planner's phase schema (slowest rank, mean, per-rank times).
Json PhasesJson(const RunReport& rep) {
  Json phases = Json::array();
  for (const PhaseReport& p : rep.phases) {
    phases.push_back({{"name", p.name},
                      {"layer_kind", "moe"},
                      {"direction", "forward"},
                      {"time_us", p.time_us},
                      {"mean_us", p.mean_us},
                      {"slowest_rank", p.slowest_rank},
                      {"per_rank_us", p.per_rank_us}});
  }
  return phases;
}

// The validation block: pass/fail, errors, and the first mismatches.
Json ValidationJson(const RunReport& rep) {
  Json mismatches = Json::array();
  for (const Mismatch& m : rep.first_mismatches) {
    mismatches.push_back({{"rank", m.rank}, {"token", m.token}, {"dim", m.dim}, {"got", FiniteOrNull(m.got)}, {"expected", m.expected}});
  }
  return {{"passed", rep.passed()},
          {"max_abs_error", FiniteOrNull(rep.max_abs_error)},
          {"max_rel_error", FiniteOrNull(rep.max_rel_error)},
          {"wrong", rep.wrong},
          {"checked", rep.checked},
          {"first_mismatches", mismatches}};
}

// The layer that ran: its sizes and router settings.
Json ModelJson(const RunConfig& c, const std::string& model_source) {
  return {{"source", model_source},
          {"name", c.model_name},
          {"family", c.family},
          {"layer", c.layer},
          {"hidden_size", c.hidden},
          {"moe_intermediate_size", c.moe_intermediate},
          {"num_experts", c.num_experts},
          {"top_k", c.top_k},
          {"score_func", c.sigmoid_scores ? "sigmoid" : "softmax"},
          {"score_correction_bias", c.score_correction_bias},
          {"norm_topk_prob", c.norm_topk_prob},
          {"routed_scaling_factor", c.routed_scaling_factor},
          {"shared_expert_intermediate_size", c.shared_intermediate}};
}

// The stage's ranks, degrees and dispatcher.
Json LayoutJson(const RunConfig& c) {
  return {{"world_size", c.world_size},
          {"stage", c.stage},
          {"ranks", static_cast<int64_t>(c.ranks.size())},
          {"ep", c.ep},
          {"expert_tp", c.expert_tp},
          {"dispatcher", DispatcherName(c.dispatcher)},
          {"oep", c.oep},
          {"iep", c.iep},
          {"shared_experts", c.ranks.empty() ? "none" : SharedModeName(c.ranks.front().shared_mode)}};
}

// The run's settings: backend, tokens, routing, iterations, tolerances, overlap.
Json RunSettingsJson(const RunReport& rep) {
  const RunConfig& c = rep.config;
  return {{"backend", rep.backend},
          {"tokens_per_rank", c.options.tokens_per_rank},
          {"token_sources", static_cast<int64_t>(c.sources.size())},
          {"seed", c.options.seed},
          {"routing", c.options.routing ? RoutingSpecText(*c.options.routing) : std::string("router")},
          {"iters", c.options.iters},
          {"warmup", c.options.warmup},
          {"atol", c.options.atol},
          {"rtol", c.options.rtol},
          {"overlap_shared_experts",
           {{"requested", c.options.overlap_shared_experts},
            {"applied", c.options.overlap_shared_experts && OverlapNotApplied(c).empty()},
            {"why_not", OverlapNotApplied(c)}}}};
}

// The redundant-expert placement and the rows each slot measured (and predicted).
Json RedundantExpertsJson(const RunReport& rep) {
  const RunConfig& c = rep.config;
  const ExpertPlacement& p = *c.placement;
  Json rows = Json::array();
  for (const RankReport& r : rep.ranks) rows.push_back(r.rows_per_local_expert);
  Json block = {{"redundant_experts", p.num_physical - p.num_experts},
                {"policy", c.options.placement_file.empty() ? EplbPolicyName(p.policy) : "file"},
                {"placement_file", c.options.placement_file},
                {"replica_choice", ReplicaChoiceName(c.options.redundant->choice)},
                {"physical_to_logical", p.physical_to_logical},
                {"replica_count", p.replica_count},
                {"measured_rows_per_local_slot", rows},
                {"rows_mismatched_ranks", rep.replica_rows_mismatches}};
  if (rep.predicted_replica_routing) {
    block["predicted_rows_per_slot"] = rep.predicted_replica_routing->rows_per_local_expert;
    block["predicted_received"] = rep.predicted_replica_routing->received;
    block["predicted_imbalance"] = rep.predicted_replica_routing->imbalance;
  }
  return block;
}

}  // namespace

Json RunReportToJson(const RunReport& rep, const std::string& model_source) {
  const RunConfig& c = rep.config;
  Json j = {
      {"schema_version", kReportSchemaVersion},
      {"kind", "dockyard_run"},
      {"dockyard_version", kDockyardVersion},
      {"model", ModelJson(c, model_source)},
      {"layout", LayoutJson(c)},
      {"run", RunSettingsJson(rep)},
      {"validation", ValidationJson(rep)},
      {"per_rank", PerRankJson(rep)},
      {"tokens_per_expert", rep.tokens_per_expert},
      {"measured", {{"kind", "measured"}, {"phases", PhasesJson(rep)}}},
      {"timing", {{"run_seconds", rep.run_seconds}, {"reference_seconds", rep.reference_seconds}}},
  };
  if (c.placement) j["redundant_experts"] = RedundantExpertsJson(rep);
  return j;
}

std::string RunReportToText(const RunReport& rep, const std::string& model_source) {
  const RunConfig& c = rep.config;
  std::ostringstream out;
  out << fmt::format("Model      {} ({}), layer {}: hidden {}, moe_intermediate {}, {} experts, top-{}, {}{}{}\n", model_source, c.family,
                     c.layer, c.hidden, c.moe_intermediate, c.num_experts, c.top_k, c.sigmoid_scores ? "sigmoid" : "softmax",
                     c.score_correction_bias ? " + score bias" : "",
                     c.shared_intermediate > 0 ? fmt::format(", shared {}", c.shared_intermediate) : "");
  out << fmt::format(
      "Layout     {} ranks (stage {} of world {}), ep {}, expert tp {}, dispatcher {}{}, shared experts {}; "
      "backend {}\n",
      c.ranks.size(), c.stage, c.world_size, c.ep, c.expert_tp, DispatcherName(c.dispatcher),
      c.dispatcher == Dispatcher::kDeredundency ? fmt::format(" (oep {} x iep {})", c.oep, c.iep) : "",
      c.ranks.empty() ? "none" : SharedModeName(c.ranks.front().shared_mode), rep.backend);
  out << fmt::format("Tokens     {} per rank ({} sources), seed {}, routing {}; {} warm-up + {} timed iterations\n",
                     c.options.tokens_per_rank, c.sources.size(), c.options.seed,
                     c.options.routing ? RoutingSpecText(*c.options.routing) : std::string("router top-k"), c.options.warmup,
                     c.options.iters);
  if (c.options.overlap_shared_experts) {
    const std::string why = OverlapNotApplied(c);
    out << (why.empty() ? std::string("Overlap    shared experts run while the combine is in flight (combine = its exposed time)\n")
                        : fmt::format("Overlap    requested but not applied: {}\n", why));
  }
  out << fmt::format("\n{:>6} {:>7} {:>8} {:>8} {:>9} {:>12} {:>12} {:>8}\n", "rank", "tokens", "routed", "sent", "received", "max_abs_err",
                     "max_rel_err", "#wrong");
  for (const RankReport& r : rep.ranks) {
    out << fmt::format("{:>6} {:>7} {:>8} {:>8} {:>9} {:>12} {:>12} {:>8}\n", r.rank, r.tokens, r.routed_rows, r.sent_rows, r.received_rows,
                       Sci(r.max_abs_error), Sci(r.max_rel_error), r.wrong);
  }
  if (c.placement) {
    const ExpertPlacement& p = *c.placement;
    out << fmt::format(
        "\nRedundant experts  R = {} ({} policy, {} replica choice): {} slots, {} per EP rank; physical->logical [{}]\n",
        p.num_physical - p.num_experts, c.options.placement_file.empty() ? EplbPolicyName(p.policy) : c.options.placement_file.c_str(),
        ReplicaChoiceName(c.options.redundant->choice), p.num_physical, p.SlotsPerRank(), fmt::join(p.physical_to_logical, " "));
    if (rep.predicted_replica_routing) {
      const LayerRouting& L = *rep.predicted_replica_routing;
      out << fmt::format("{:>6} {:>9} {:>10}   {}\n", "rank", "received", "predicted", "rows per local slot (measured)");
      for (const RankReport& r : rep.ranks) {
        out << fmt::format("{:>6} {:>9} {:>10}   [{}]\n", r.rank, r.received_rows, L.received[static_cast<size_t>(r.ep_index)],
                           fmt::join(r.rows_per_local_expert, " "));
      }
      out << fmt::format("Rows per rank and slot: {} (planner imbalance {:.3f})\n",
                         rep.replica_rows_mismatches == 0
                             ? std::string("equal to the planner's matrices")
                             : fmt::format("{} rank(s) differ from the planner's matrices", rep.replica_rows_mismatches),
                         L.imbalance);
    } else {
      out << "Rows per rank: not compared (the planner's matrices need --routing and ep ranks that are their own token "
             "sources)\n";
    }
  }
  out << fmt::format("\n{:<16} {:>12} {:>12} {:>13}\n", "phase", "time(us)", "mean(us)", "slowest rank");
  for (const PhaseReport& p : rep.phases) {
    out << fmt::format("{:<16} {:>12.1f} {:>12.1f} {:>13}\n", p.name, p.time_us, p.mean_us, p.slowest_rank);
  }
  // The layer: per rank the sum of its phases (weight generation excluded), the slowest rank's.
  double layer_us = 0;
  for (const RankReport& r : rep.ranks) {
    double sum = 0;
    for (size_t i = 0; i < r.phase_us.size() && i < PhaseNames().size(); ++i) {
      if (PhaseNames()[i] != "weight_gen") sum += r.phase_us[i];
    }
    layer_us = std::max(layer_us, sum);
  }
  out << fmt::format("{:<16} {:>12.1f}   (slowest rank's sum of phases, weight_gen excluded)\n", "layer forward", layer_us);
  out << "\n";
  if (rep.passed()) {
    out << fmt::format("Validation OK: 0 wrong of {} elements (atol {:g}, rtol {:g}), max abs error {}, max rel error {}\n", rep.checked,
                       c.options.atol, c.options.rtol, Sci(rep.max_abs_error), Sci(rep.max_rel_error));
  } else {
    out << fmt::format("Validation FAILED: {} wrong of {} elements (atol {:g}, rtol {:g}), max abs error {}\n", rep.wrong, rep.checked,
                       c.options.atol, c.options.rtol, Sci(rep.max_abs_error));
    for (const Mismatch& m : rep.first_mismatches) {
      out << fmt::format("  rank {} token {} dim {}: got {:.7g}, expected {:.7g}\n", m.rank, m.token, m.dim, m.got, m.expected);
    }
  }
  out << fmt::format("Wall time  run {:.2f} s, reference {:.2f} s\n", rep.run_seconds, rep.reference_seconds);
  return out.str();
}

}  // namespace dockyard::runtime
