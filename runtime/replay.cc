// Single-GPU replay of one rank's share of a plan (replay.h).
#include "runtime/replay.h"

#include "planner/base/phase.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <new>
#include <numeric>
#include <utility>
#include <sstream>

#include <fmt/format.h>

#include "planner/sim/cost.h"
#include "planner/base/error.h"
#include "planner/accounting/workload.h"
#include "runtime/config.h"
#include "runtime/cpu/cpu_backend.h"
#include "runtime/cpu/cpu_ops.h"
#include "runtime/data.h"
#include "runtime/dispatch.h"
#include "runtime/expert_ffn.h"
#include "runtime/router.h"

namespace dockyard::runtime {
namespace {

// The phases the replay times (names: planner/base/phase.h).
enum MeasuredIndex { kRouter, kPermute, kGroupedGemm, kWeightGen, kUnpermute, kSharedExperts, kNumMeasured };

const PhaseCost* FindPhase(const CostBreakdown& cost, const std::string& name) {
  for (const PhaseCost& p : cost.phases) {
    if (p.name == name && p.layer_kind == "moe" && p.direction == "forward") return &p;
  }
  return nullptr;
}

double PredictedFor(const CostBreakdown& cost, const std::string& name, int64_t ep_rank) {
  const PhaseCost* p = FindPhase(cost, name);
  if (p == nullptr) return -1;
  if (!p->per_ep_rank_us.empty() && ep_rank < static_cast<int64_t>(p->per_ep_rank_us.size())) {
    return p->per_ep_rank_us[static_cast<size_t>(ep_rank)];
  }
  return p->time_us;
}

}  // namespace

ReplayReport ReplayRank(const Plan& plan, const ReplayOptions& o, Backend& backend) {
  if (o.iters < 1) throw Error(fmt::format("replay: iters must be >= 1, got {}", o.iters));
  if (o.warmup < 0) throw Error(fmt::format("replay: warmup must be >= 0, got {}", o.warmup));
  if (o.check_rows < 0) throw Error(fmt::format("replay: check_rows must be >= 0, got {}", o.check_rows));
  if (o.weight_block_bytes < 1) throw Error(fmt::format("replay: weight block bytes must be >= 1, got {}", o.weight_block_bytes));
  for (const auto& [name, v] : {std::pair{"atol", o.atol}, std::pair{"rtol", o.rtol}}) {
    if (!std::isfinite(v) || v < 0) throw Error(fmt::format("{} must be a finite number >= 0, got {}", name, v));
  }
  const Workload w = ComputeWorkload(plan);
  const int64_t T = w.routed_tokens;
  if (T > (int64_t{1} << 24)) {
    throw Error(
        fmt::format("replay: the plan routes {} tokens per rank (seq_len {} x micro_batch_size {} / cp {}); at "
                    "most 2^24: lower --seq-len",
                    T, plan.training.seq_len, plan.training.micro_batch_size, plan.dims.cp));
  }
  RunOptions ro;
  ro.tokens_per_rank = T;
  ro.layer = o.layer;
  ro.seed = o.seed;
  ro.iters = o.iters;
  ro.warmup = o.warmup;
  ro.check_buffer_bound = false;  // one rank, actual rows only
  ro.runs_dispatch = false;       // dispatch and combine from the cost model (the plan's FP8 dispatch included)
  const RunConfig c = MakeRunConfig(plan, ro);
  const auto rit = std::find_if(c.ranks.begin(), c.ranks.end(), [&](const RankConfig& r) { return r.rank == o.rank; });
  if (rit == c.ranks.end()) {
    throw Error(fmt::format("--replay-rank {}: not a rank of pipeline stage {}, which holds layer {} (ranks {}..{})", o.rank, c.stage,
                            c.layer, c.ranks.front().rank, c.ranks.back().rank));
  }
  const RankConfig& r = *rit;
  const int64_t E = c.num_experts, k = c.top_k, D = c.hidden, ep = c.ep, L = r.num_local_experts, e = r.ep_index;

  // Rows this rank receives, per (source EP rank, local expert): the planner's routing stream
  // of this MoE layer (every MoE layer prepared, as simulate does, so traces and per-layer
  // shuffles give this layer's routing).
  const int64_t moe_layers = plan.model.NumMoeLayers();
  int64_t l = 0;  // this layer's index among the MoE layers
  for (int64_t i = 0; i < c.layer; ++i) l += plan.model.moe_layers[static_cast<size_t>(i)] ? 1 : 0;
  const RoutingModel model = PrepareRouting(o.routing, E, k, moe_layers, GroupLimitOf(plan.model.moe));
  std::vector<int32_t> own;
  std::vector<int64_t> recv_counts(static_cast<size_t>(ep * L), 0);
  for (int64_t s = 0; s < ep; ++s) {
    std::vector<int32_t> experts = SampleTokenExperts(model, l, s, T);
    for (int32_t x : experts) {
      if (x >= r.first_expert && x < r.first_expert + L) ++recv_counts[static_cast<size_t>(s * L + (x - r.first_expert))];
    }
    if (s == e) own = std::move(experts);
  }
  // The cost model on the same sample, drawn as simulate draws it (SampleRoutingForPlan: routed
  // tokens T, the dispatcher's outer EP size, the deepep per-token node counts). It sees this layer only.
  RoutingResult sampled = SampleRoutingForPlan(plan, o.routing, moe_layers);
  LayerRouting layer = std::move(sampled.layers[static_cast<size_t>(l)]);
  sampled.layers.clear();
  sampled.max_imbalance = layer.imbalance;
  sampled.layers.push_back(std::move(layer));
  sampled.assignments = T * ep * k;
  const CostBreakdown cost = SimulateStep(plan, o.cluster, sampled);

  ReplayReport rep;
  rep.model_name = c.model_name;
  rep.layer = c.layer;
  rep.routing_layer = l;
  rep.cluster = o.cluster.name;
  rep.routing = RoutingSpecText(o.routing);
  rep.precision = o.precision;
  rep.seed = o.seed;
  rep.atol = o.atol;
  rep.rtol = o.rtol;
  rep.rank = o.rank;
  rep.ep = ep;
  rep.ep_rank = e;
  rep.first_expert = r.first_expert;
  rep.num_local_experts = L;
  rep.f_begin = r.f_begin;
  rep.f_end = r.f_end;
  rep.tokens = T;
  rep.top_k = k;
  rep.rows_per_local_expert.assign(static_cast<size_t>(L), 0);
  for (int64_t s = 0; s < ep; ++s) {
    for (int64_t j = 0; j < L; ++j) rep.rows_per_local_expert[static_cast<size_t>(j)] += recv_counts[static_cast<size_t>(s * L + j)];
  }
  for (int64_t j = 0; j < L; ++j) {
    const int64_t want = sampled.layers.front().rows_per_local_expert[static_cast<size_t>(e * L + j)];
    if (want != rep.rows_per_local_expert[static_cast<size_t>(j)]) {
      throw Error(fmt::format("replay: local expert {} receives {} rows by token sampling but {} in the routing matrices", j,
                              rep.rows_per_local_expert[static_cast<size_t>(j)], want));
    }
  }
  rep.received_rows = std::accumulate(rep.rows_per_local_expert.begin(), rep.rows_per_local_expert.end(), int64_t{0});
  rep.imbalance = T * k > 0 ? static_cast<double>(rep.received_rows) / static_cast<double>(T * k) : 1.0;

  // Own slots sorted by expert (stable): gather index = the slot's token; row_of_slot inverts it.
  const int64_t slots = T * k;
  std::vector<int64_t> order(static_cast<size_t>(slots));
  std::iota(order.begin(), order.end(), int64_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return own[static_cast<size_t>(a)] < own[static_cast<size_t>(b)]; });
  std::vector<int64_t> gather_idx(static_cast<size_t>(slots)), row_of_slot(static_cast<size_t>(slots));
  for (int64_t i = 0; i < slots; ++i) {
    gather_idx[static_cast<size_t>(i)] = order[static_cast<size_t>(i)] / k;
    row_of_slot[static_cast<size_t>(order[static_cast<size_t>(i)])] = i;
  }
  const PermutePlan pp = RankMajorToExpertMajor(recv_counts, ep, L);
  const std::vector<RowBlock> inverse = InverseBlocks(pp.blocks);
  const int64_t R = pp.total_rows;
  const bool shared = c.shared_intermediate > 0 && r.shared_mode != SharedMode::kNone;
  // The MLP arguments, built once (the buffers are bound inside the run).
  std::vector<int64_t> local_experts;
  for (int64_t j = 0; j < L; ++j) local_experts.push_back(r.first_expert + j);
  FfnArgs routed_ffn = RoutedFfnArgs(c, local_experts, pp.expert_offsets, r.f_begin, r.f_end);
  routed_ffn.block_bytes = o.weight_block_bytes;
  FfnArgs shared_ffn = SharedFfnArgs(c, {0, T}, r.shared_f_begin, r.shared_f_end);
  shared_ffn.block_bytes = o.weight_block_bytes;

  std::vector<double> seconds(kNumMeasured, 0.0);
  std::vector<float> recv_host, in_host, out_host;
  try {
    backend.RunRanks({RankSpec{o.rank, {}}}, [&](RankContext& ctx) {
      Device& dev = ctx.device();
      ComputeOps& ops = ctx.ops();
      DeviceArray<float> x(&dev, T * D), router_w(&dev, E * D), scores(&dev, T * E), routed(&dev, slots * D), recv(&dev, R * D),
          expert_in(&dev, R * D), expert_out(&dev, R * D), combine_in(&dev, R * D), weights(&dev, slots), out(&dev, T * D),
          shared_out(&dev, T * D);
      DeviceArray<int64_t> topk(&dev, T * k), d_gather(&dev), d_row_of_slot(&dev);
      // The model's router (router.h): the score bias and the group limit where the model has them.
      const bool select_scratch = c.score_correction_bias || c.group_limit.active();
      DeviceArray<float> score_bias(&dev, c.score_correction_bias ? E : 0), select(&dev, select_scratch ? T * E : 0);
      FillScoreBias(ops, c, score_bias.data());
      d_gather.CopyFromHost(gather_idx);
      d_row_of_slot.CopyFromHost(row_of_slot);
      ops.FillTokens(o.seed, r.source, 0, T, D, x.data());
      // The received rows are other ranks' tokens: any values; a source id no rank uses.
      ops.FillTokens(o.seed, int64_t{1} << 40 | o.rank, 0, R, D, recv.data());
      WeightRowsArgs wr;
      wr.seed = o.seed;
      wr.layer = c.layer;
      wr.matrix = kMatrixRouter;
      wr.row_end = E;
      wr.col_end = D;
      wr.scale = RouterScale(D);
      wr.out = router_w.data();
      ops.FillWeightRows(wr);
      ops.Fill(weights.data(), 1.0f / static_cast<float>(k), slots);
      FfnWorkspace ws(&dev), shared_ws(&dev);

      const auto time = [&](MeasuredIndex p, bool timed, auto&& fn) {
        dev.Synchronize();
        const auto t0 = std::chrono::steady_clock::now();
        fn();
        dev.Synchronize();
        if (timed) seconds[p] += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      };
      for (int64_t it = 0; it < o.warmup + o.iters; ++it) {
        const bool timed = it >= o.warmup;
        time(kRouter, timed, [&] {
          const int64_t offsets[2] = {0, T};
          const float* b[1] = {router_w.data()};
          GroupedGemmArgs g;
          g.num_groups = 1;
          g.offsets = offsets;
          g.n = E;
          g.k = D;
          g.a = x.data();
          g.lda = D;
          g.b = b;
          g.ldb = D;
          g.c = scores.data();
          g.ldc = E;
          ops.GroupedGemm(g);
          if (c.sigmoid_scores) {
            ops.Sigmoid(scores.data(), T * E);
          } else {
            ops.Softmax(scores.data(), T, E);
          }
          SelectExperts(ops, c, scores.data(), score_bias.data(), T, select.data(), topk.data());
        });
        time(kPermute, timed, [&] {
          ops.GatherRows(x.data(), d_gather.data(), slots, D, routed.data());
          ops.CopyRowBlocks(recv.data(), expert_in.data(), pp.blocks, D);
        });
        routed_ffn.x = expert_in.data();
        routed_ffn.out = expert_out.data();
        double gen = 0;
        time(kGroupedGemm, timed, [&] { gen = RunSwiGluFfn(ops, dev, routed_ffn, ws); });
        if (timed) {
          seconds[kGroupedGemm] -= gen;
          seconds[kWeightGen] += gen;
        }
        time(kUnpermute, timed, [&] {
          ops.CopyRowBlocks(expert_out.data(), combine_in.data(), inverse, D);
          ops.WeightedCombine(routed.data(), d_row_of_slot.data(), weights.data(), T, k, D, out.data());
        });
        if (shared) {
          shared_ffn.x = x.data();
          shared_ffn.out = shared_out.data();
          double sgen = 0;
          time(kSharedExperts, timed, [&] { sgen = RunSwiGluFfn(ops, dev, shared_ffn, shared_ws); });
          if (timed) {
            seconds[kSharedExperts] -= sgen;
            seconds[kWeightGen] += sgen;
          }
        }
      }
      if (o.router_experts != nullptr) *o.router_experts = topk.ToHost();
      recv_host = recv.ToHost();
      in_host = expert_in.ToHost();
      out_host = expert_out.ToHost();
    });
  } catch (const std::bad_alloc&) {
    const double gib = static_cast<double>((T * (2 * D + E + 2 * k) + slots * D + 4 * R * D) * 4) / (1 << 30);
    throw Error(
        fmt::format("replay: out of memory for rank {}'s buffers: {} tokens, {} received rows of hidden {} "
                    "(about {:.1f} GiB, plus weights); lower --seq-len",
                    o.rank, T, R, D, gib));
  }
  rep.backend = backend.name();  // after the run: names the GEMM path that ran

  // Validation on the CPU: the permutation exactly, the expert MLP within tolerance.
  cpu::CpuDevice cpu_dev;
  cpu::CpuOps cpu_ops;
  FfnWorkspace cpu_ws(&cpu_dev);
  const std::vector<int64_t> src_of_dst = ExpandToRowIndices(pp.blocks);
  for (int64_t j = 0; j < L; ++j) {
    const int64_t begin = pp.expert_offsets[static_cast<size_t>(j)], end = pp.expert_offsets[static_cast<size_t>(j + 1)];
    std::vector<int64_t> rows;
    for (int64_t i = begin; i < end; ++i) {
      if (i < begin + o.check_rows || i >= end - o.check_rows) rows.push_back(i);
    }
    if (rows.empty()) continue;
    std::vector<float> xin(rows.size() * static_cast<size_t>(D)), ref(rows.size() * static_cast<size_t>(D));
    for (size_t q = 0; q < rows.size(); ++q) {
      const int64_t i = rows[q];
      for (int64_t d = 0; d < D; ++d) {
        const float permuted = in_host[static_cast<size_t>(i * D + d)];
        const float source = recv_host[static_cast<size_t>(src_of_dst[static_cast<size_t>(i)] * D + d)];
        if (std::memcmp(&permuted, &source, sizeof(float)) != 0) ++rep.wrong;  // permute is a copy: exact
        xin[q * static_cast<size_t>(D) + static_cast<size_t>(d)] = permuted;
      }
    }
    FfnArgs a = RoutedFfnArgs(c, {r.first_expert + j}, {0, static_cast<int64_t>(rows.size())}, r.f_begin, r.f_end);
    a.x = xin.data();
    a.out = ref.data();
    RunSwiGluFfn(cpu_ops, cpu_dev, a, cpu_ws);
    for (size_t q = 0; q < rows.size(); ++q) {
      for (int64_t d = 0; d < D; ++d) {
        const double got = out_host[static_cast<size_t>(rows[q] * D + d)], want = ref[q * static_cast<size_t>(D) + static_cast<size_t>(d)];
        const double err = std::fabs(got - want);
        ++rep.checked;
        if (!std::isfinite(got) || err > o.atol + o.rtol * std::fabs(want)) ++rep.wrong;
        if (std::isfinite(err)) rep.max_abs_error = std::max(rep.max_abs_error, err);
      }
    }
  }

  const auto add = [&](const std::string& name, double us, const std::string& source) {
    rep.phases.push_back({name, us, source, PredictedFor(cost, name, e)});
    rep.layer_forward_us += us;
  };
  const double iters = static_cast<double>(o.iters);
  add(PhaseName(Phase::kRouter), seconds[kRouter] * 1e6 / iters, "measured");
  add(PhaseName(Phase::kPermute), seconds[kPermute] * 1e6 / iters, "measured");
  add(PhaseName(Phase::kDispatch), std::max(0.0, PredictedFor(cost, PhaseName(Phase::kDispatch), e)), "cost model");
  add(PhaseName(Phase::kGroupedGemm), seconds[kGroupedGemm] * 1e6 / iters, "measured");
  add(PhaseName(Phase::kUnpermute), seconds[kUnpermute] * 1e6 / iters, "measured");
  add(PhaseName(Phase::kCombine), std::max(0.0, PredictedFor(cost, PhaseName(Phase::kCombine), e)), "cost model");
  if (shared) add(PhaseName(Phase::kSharedExperts), seconds[kSharedExperts] * 1e6 / iters, "measured");
  // Weight generation is a cost of the replay (weights are generated, not loaded): reported,
  // not part of the layer's time.
  rep.phases.push_back({"weight_gen", seconds[kWeightGen] * 1e6 / iters, "measured (not in the layer)", -1});
  return rep;
}

Json ReplayReportToJson(const ReplayReport& r) {
  Json phases = Json::array();
  for (const ReplayPhase& p : r.phases) {
    Json j = {{"name", p.name}, {"time_us", p.time_us}, {"source", p.source}};
    j["predicted_us"] = p.predicted_us >= 0 ? Json(p.predicted_us) : Json(nullptr);
    phases.push_back(j);
  }
  return Json{{"schema_version", 1},
              {"kind", "replay"},
              {"replay",
               {{"backend", r.backend},
                {"model", r.model_name},
                {"layer", r.layer},
                {"routing_layer", r.routing_layer},
                {"cluster", r.cluster},
                {"routing", r.routing},
                {"seed", r.seed},
                {"precision", r.precision},
                {"rank", r.rank},
                {"ep", r.ep},
                {"ep_rank", r.ep_rank},
                {"first_expert", r.first_expert},
                {"num_local_experts", r.num_local_experts},
                {"f_begin", r.f_begin},
                {"f_end", r.f_end},
                {"tokens", r.tokens},
                {"top_k", r.top_k},
                {"received_rows", r.received_rows},
                {"rows_per_local_expert", r.rows_per_local_expert},
                {"imbalance", r.imbalance},
                {"phases", phases},
                {"layer_forward_us", r.layer_forward_us},
                {"validation",
                 {{"checked", r.checked}, {"wrong", r.wrong}, {"max_abs_error", r.max_abs_error}, {"atol", r.atol}, {"rtol", r.rtol}}}}}};
}

std::string ReplayReportToText(const ReplayReport& r) {
  std::ostringstream out;
  out << fmt::format("Replay     {} layer {} rank {} (EP rank {} of {}): experts [{}, {}), intermediate [{}, {}), backend {}\n",
                     r.model_name, r.layer, r.rank, r.ep_rank, r.ep, r.first_expert, r.first_expert + r.num_local_experts, r.f_begin,
                     r.f_end, r.backend);
  out << fmt::format("Settings   cluster {}, routing {} (seed {}), expert GEMM {}\n", r.cluster, r.routing, r.seed, r.precision);
  out << fmt::format("Rows       {} tokens route {} rows; this rank receives {} rows ({:.3f} x the mean)\n", r.tokens, r.tokens * r.top_k,
                     r.received_rows, r.imbalance);
  out << fmt::format("  {:<16} {:>12} {:>14}  {}\n", "phase", "time (us)", "predicted (us)", "source");
  for (const ReplayPhase& p : r.phases) {
    out << fmt::format("  {:<16} {:>12.1f} {:>14}  {}\n", p.name, p.time_us,
                       p.predicted_us >= 0 ? fmt::format("{:.1f}", p.predicted_us) : std::string("-"), p.source);
  }
  out << fmt::format("  {:<16} {:>12.1f}\n", "layer forward", r.layer_forward_us);
  if (r.checked == 0) {
    out << "Validation: nothing to check (this rank received no rows)\n";
  } else if (r.passed()) {
    out << fmt::format("Validation OK: 0 wrong of {} checked elements (max abs error {:.3e})\n", r.checked, r.max_abs_error);
  } else {
    out << fmt::format("Validation FAILED: {} wrong of {} checked elements (max abs error {:.3e})\n", r.wrong, r.checked, r.max_abs_error);
  }
  return out.str();
}

}  // namespace dockyard::runtime
