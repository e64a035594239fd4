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

#include "planner/cost/cost.h"
#include "planner/base/error.h"
#include "planner/accounting/workload.h"
#include "planner/routing/plan_routing.h"
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

const PhaseCost* FindPhase(const CostBreakdown& cost, Phase phase) {
  for (const PhaseCost& p : cost.phases) {
    if (p.phase == phase && p.layer_kind == LayerKind::kMoe && p.direction == Direction::kForward) return &p;
  }
  return nullptr;
}

double PredictedFor(const CostBreakdown& cost, Phase phase, int64_t ep_rank) {
  const PhaseCost* p = FindPhase(cost, phase);
  if (p == nullptr) return -1;
  if (!p->per_ep_rank_us.empty() && ep_rank < static_cast<int64_t>(p->per_ep_rank_us.size())) {
    return p->per_ep_rank_us[static_cast<size_t>(ep_rank)];
  }
  return p->time_us;
}

// The replay's own bounds on its options.
void CheckReplayOptions(const ReplayOptions& o) {
  if (o.iters < 1) throw Error(fmt::format("replay: iters must be >= 1, got {}", o.iters));
  if (o.warmup < 0) throw Error(fmt::format("replay: warmup must be >= 0, got {}", o.warmup));
  if (o.check_rows < 0) throw Error(fmt::format("replay: check_rows must be >= 0, got {}", o.check_rows));
  if (o.weight_block_bytes < 1) throw Error(fmt::format("replay: weight block bytes must be >= 1, got {}", o.weight_block_bytes));
  for (const auto& [name, v] : {std::pair{"atol", o.atol}, std::pair{"rtol", o.rtol}}) {
    if (!std::isfinite(v) || v < 0) throw Error(fmt::format("{} must be a finite number >= 0, got {}", name, v));
  }
}

// The tokens the plan routes per rank (the workload's routed tokens), at most 2^24.
int64_t RoutedTokensOfPlan(const Plan& plan) {
  const Workload w = ComputeWorkload(plan);
  const int64_t T = w.routed_tokens;
  if (T > (int64_t{1} << 24)) {
    throw Error(
        fmt::format("replay: the plan routes {} tokens per rank (seq_len {} x micro_batch_size {} / cp {}); at "
                    "most 2^24: lower --seq-len",
                    T, plan.training.seq_len, plan.training.micro_batch_size, plan.dims.cp));
  }
  return T;
}

// The run configuration of the replayed layer: T tokens per rank, no buffer bound, no dispatch.
RunConfig ReplayRunConfig(const Plan& plan, const ReplayOptions& o, int64_t T) {
  RunOptions ro;
  ro.tokens_per_rank = T;
  ro.layer = o.layer;
  ro.seed = o.seed;
  ro.iters = o.iters;
  ro.warmup = o.warmup;
  ro.check_buffer_bound = false;  // one rank, actual rows only
  ro.runs_dispatch = false;       // dispatch and combine from the cost model (the plan's FP8 dispatch included)
  return MakeRunConfig(plan, ro);
}

// The replayed rank's configuration; it must be a rank of the layer's stage.
const RankConfig& FindReplayRank(const RunConfig& c, int64_t rank) {
  const auto rit = std::find_if(c.ranks.begin(), c.ranks.end(), [&](const RankConfig& r) { return r.rank == rank; });
  if (rit == c.ranks.end()) {
    throw Error(fmt::format("--replay-rank {}: not a rank of pipeline stage {}, which holds layer {} (ranks {}..{})", rank, c.stage,
                            c.layer, c.ranks.front().rank, c.ranks.back().rank));
  }
  return *rit;
}

// The routing the rank sees, sampled from the planner's routing stream of this MoE layer.
struct ReceivedRouting {
  int64_t moe_layer = 0;             // this layer's index among the MoE layers
  std::vector<int32_t> own;          // [T * top_k]: the experts of the rank's own tokens
  std::vector<int64_t> recv_counts;  // [ep * num_local_experts]: rows received per (source EP rank, local expert)
};

// Rows this rank receives, per (source EP rank, local expert): the planner's routing stream
// of this MoE layer (every MoE layer prepared, as simulate does, so traces and per-layer
// shuffles give this layer's routing).
ReceivedRouting SampleReceivedRows(const Plan& plan, const ReplayOptions& o, const RunConfig& c, const RankConfig& r, int64_t T) {
  const int64_t E = c.num_experts, k = c.top_k, ep = c.ep, L = r.num_local_experts, e = r.ep_index;
  ReceivedRouting out;
  for (int64_t i = 0; i < c.layer; ++i) out.moe_layer += plan.model.moe_layers[static_cast<size_t>(i)] ? 1 : 0;
  const RoutingModel model = PrepareRouting(o.routing, E, k, plan.model.NumMoeLayers(), GroupLimitOf(plan.model.moe));
  out.recv_counts.assign(static_cast<size_t>(ep * L), 0);
  for (int64_t s = 0; s < ep; ++s) {
    std::vector<int32_t> experts = SampleTokenExperts(model, out.moe_layer, s, T);
    for (int32_t x : experts) {
      if (x >= r.first_expert && x < r.first_expert + L) ++out.recv_counts[static_cast<size_t>(s * L + (x - r.first_expert))];
    }
    if (s == e) out.own = std::move(experts);
  }
  return out;
}

// The cost model's routing sample of this layer only, drawn as simulate draws it
// (SampleRoutingForPlan: routed tokens T, the dispatcher's outer EP size, the deepep per-token
// node counts).
RoutingResult SampleLayerForCost(const Plan& plan, const ReplayOptions& o, int64_t moe_layer, int64_t T, int64_t ep, int64_t k) {
  RoutingResult sampled = SampleRoutingForPlan(plan, o.routing, plan.model.NumMoeLayers());
  LayerRouting layer = std::move(sampled.layers[static_cast<size_t>(moe_layer)]);
  sampled.layers.clear();
  sampled.max_imbalance = layer.imbalance;
  sampled.layers.push_back(std::move(layer));
  sampled.assignments = T * ep * k;
  return sampled;
}

// The report's description of the replayed rank, before anything is measured.
ReplayReport ReportHeader(const RunConfig& c, const RankConfig& r, const ReplayOptions& o, int64_t moe_layer, int64_t T) {
  ReplayReport rep;
  rep.model_name = c.model_name;
  rep.layer = c.layer;
  rep.routing_layer = moe_layer;
  rep.cluster = o.cluster.name;
  rep.routing = RoutingSpecText(o.routing);
  rep.precision = o.precision;
  rep.seed = o.seed;
  rep.atol = o.atol;
  rep.rtol = o.rtol;
  rep.rank = o.rank;
  rep.ep = c.ep;
  rep.ep_rank = r.ep_index;
  rep.first_expert = r.first_expert;
  rep.num_local_experts = r.num_local_experts;
  rep.f_begin = r.f_begin;
  rep.f_end = r.f_end;
  rep.tokens = T;
  rep.top_k = c.top_k;
  return rep;
}

// Rows per local expert summed over the sources, checked against the cost model's routing
// matrices; the received rows and their imbalance.
void CountReceivedRows(const std::vector<int64_t>& recv_counts, const LayerRouting& sampled, int64_t ep, int64_t e, int64_t T, int64_t k,
                       ReplayReport& rep) {
  const int64_t L = rep.num_local_experts;
  rep.rows_per_local_expert.assign(static_cast<size_t>(L), 0);
  for (int64_t s = 0; s < ep; ++s) {
    for (int64_t j = 0; j < L; ++j) rep.rows_per_local_expert[static_cast<size_t>(j)] += recv_counts[static_cast<size_t>(s * L + j)];
  }
  for (int64_t j = 0; j < L; ++j) {
    const int64_t want = sampled.rows_per_local_expert[static_cast<size_t>(e * L + j)];
    if (want != rep.rows_per_local_expert[static_cast<size_t>(j)]) {
      throw Error(fmt::format("replay: local expert {} receives {} rows by token sampling but {} in the routing matrices", j,
                              rep.rows_per_local_expert[static_cast<size_t>(j)], want));
    }
  }
  rep.received_rows = std::accumulate(rep.rows_per_local_expert.begin(), rep.rows_per_local_expert.end(), int64_t{0});
  rep.imbalance = T * k > 0 ? static_cast<double>(rep.received_rows) / static_cast<double>(T * k) : 1.0;
}

// Own slots sorted by expert (stable): gather index = the slot's token; row_of_slot inverts it.
struct SlotOrder {
  std::vector<int64_t> gather_idx;   // [T * k]: the token of each expert-sorted slot
  std::vector<int64_t> row_of_slot;  // [T * k]: the sorted row of each slot
};

SlotOrder SortSlotsByExpert(const std::vector<int32_t>& own, int64_t slots, int64_t k) {
  std::vector<int64_t> order(static_cast<size_t>(slots));
  std::iota(order.begin(), order.end(), int64_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return own[static_cast<size_t>(a)] < own[static_cast<size_t>(b)]; });
  SlotOrder out;
  out.gather_idx.resize(static_cast<size_t>(slots));
  out.row_of_slot.resize(static_cast<size_t>(slots));
  for (int64_t i = 0; i < slots; ++i) {
    out.gather_idx[static_cast<size_t>(i)] = order[static_cast<size_t>(i)] / k;
    out.row_of_slot[static_cast<size_t>(order[static_cast<size_t>(i)])] = i;
  }
  return out;
}

// What the timed run needs, computed before it.
struct ReplayRun {
  const RunConfig& c;
  const RankConfig& r;
  const ReplayOptions& o;
  int64_t T = 0;      // tokens of the rank
  int64_t slots = 0;  // T * top_k
  const PermutePlan& pp;
  const std::vector<RowBlock>& inverse;
  const SlotOrder& order;
  bool shared = false;  // the rank runs shared experts
  FfnArgs routed_ffn, shared_ffn;
};

// The rank's device buffers, allocated in this order ([rows, hidden] unless noted).
struct RankBuffers {
  RankBuffers(Device* dev, const RunConfig& c, int64_t T, int64_t slots, int64_t R)
      : x(dev, T * c.hidden),
        router_w(dev, c.num_experts * c.hidden),
        scores(dev, T * c.num_experts),
        routed(dev, slots * c.hidden),
        recv(dev, R * c.hidden),
        expert_in(dev, R * c.hidden),
        expert_out(dev, R * c.hidden),
        combine_in(dev, R * c.hidden),
        weights(dev, slots),
        out(dev, T * c.hidden),
        shared_out(dev, T * c.hidden),
        topk(dev, T * c.top_k),
        d_gather(dev),
        d_row_of_slot(dev),
        score_bias(dev, c.score_correction_bias ? c.num_experts : 0),
        select(dev, c.score_correction_bias || c.group_limit.active() ? T * c.num_experts : 0) {}
  DeviceArray<float> x, router_w, scores, routed, recv, expert_in, expert_out, combine_in, weights, out, shared_out;
  DeviceArray<int64_t> topk, d_gather, d_row_of_slot;
  // The model's router (router.h): the score bias and the group limit where the model has them.
  DeviceArray<float> score_bias, select;
};

// Tokens, received rows, router weights and combine weights, generated on the device.
void FillReplayInputs(ComputeOps& ops, const ReplayRun& run, RankBuffers& b) {
  const RunConfig& c = run.c;
  const int64_t D = c.hidden, R = run.pp.total_rows;
  FillScoreBias(ops, c, b.score_bias.data());
  b.d_gather.CopyFromHost(run.order.gather_idx);
  b.d_row_of_slot.CopyFromHost(run.order.row_of_slot);
  ops.FillTokens(run.o.seed, run.r.source, 0, run.T, D, b.x.data());
  // The received rows are other ranks' tokens: any values; a source id no rank uses.
  ops.FillTokens(run.o.seed, int64_t{1} << 40 | run.o.rank, 0, R, D, b.recv.data());
  WeightRowsArgs wr;
  wr.seed = run.o.seed;
  wr.layer = c.layer;
  wr.matrix = kMatrixRouter;
  wr.row_end = c.num_experts;
  wr.col_end = D;
  wr.scale = RouterScale(D);
  wr.out = b.router_w.data();
  ops.FillWeightRows(wr);
  ops.Fill(b.weights.data(), 1.0f / static_cast<float>(c.top_k), run.slots);
}

// The router: gate GEMM, scores, and the model's expert selection.
void RouteTokens(ComputeOps& ops, const RunConfig& c, int64_t T, RankBuffers& b) {
  const int64_t E = c.num_experts, D = c.hidden;
  const int64_t offsets[2] = {0, T};
  const float* w[1] = {b.router_w.data()};
  GroupedGemmArgs g;
  g.num_groups = 1;
  g.offsets = offsets;
  g.n = E;
  g.k = D;
  g.a = b.x.data();
  g.lda = D;
  g.b = w;
  g.ldb = D;
  g.c = b.scores.data();
  g.ldc = E;
  ops.GroupedGemm(g);
  if (c.sigmoid_scores) {
    ops.Sigmoid(b.scores.data(), T * E);
  } else {
    ops.Softmax(b.scores.data(), T, E);
  }
  SelectExperts(ops, c, b.scores.data(), b.score_bias.data(), T, b.select.data(), b.topk.data());
}

// Warm-up and timed iterations of the rank's compute; seconds per measured phase (weight
// generation moved out of the MLPs' time into kWeightGen).
void TimeIterations(Device& dev, ComputeOps& ops, ReplayRun& run, RankBuffers& b, std::vector<double>& seconds) {
  const int64_t D = run.c.hidden;
  FfnWorkspace ws(&dev), shared_ws(&dev);
  const auto time = [&](MeasuredIndex p, bool timed, auto&& fn) {
    dev.Synchronize();
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    dev.Synchronize();
    if (timed) seconds[p] += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  // An MLP timed under `p`, its weight generation (RunSwiGluFfn's return) moved to kWeightGen.
  const auto time_ffn = [&](MeasuredIndex p, bool timed, const FfnArgs& args, FfnWorkspace& w) {
    double gen = 0;
    time(p, timed, [&] { gen = RunSwiGluFfn(ops, dev, args, w); });
    if (timed) {
      seconds[p] -= gen;
      seconds[kWeightGen] += gen;
    }
  };
  for (int64_t it = 0; it < run.o.warmup + run.o.iters; ++it) {
    const bool timed = it >= run.o.warmup;
    time(kRouter, timed, [&] { RouteTokens(ops, run.c, run.T, b); });
    time(kPermute, timed, [&] {
      ops.GatherRows(b.x.data(), b.d_gather.data(), run.slots, D, b.routed.data());
      ops.CopyRowBlocks(b.recv.data(), b.expert_in.data(), run.pp.blocks, D);
    });
    run.routed_ffn.x = b.expert_in.data();
    run.routed_ffn.out = b.expert_out.data();
    time_ffn(kGroupedGemm, timed, run.routed_ffn, ws);
    time(kUnpermute, timed, [&] {
      ops.CopyRowBlocks(b.expert_out.data(), b.combine_in.data(), run.inverse, D);
      ops.WeightedCombine(b.routed.data(), b.d_row_of_slot.data(), b.weights.data(), run.T, run.c.top_k, D, b.out.data());
    });
    if (run.shared) {
      run.shared_ffn.x = b.x.data();
      run.shared_ffn.out = b.shared_out.data();
      time_ffn(kSharedExperts, timed, run.shared_ffn, shared_ws);
    }
  }
}

// The measured seconds and the host copies validation reads.
struct Measured {
  std::vector<double> seconds = std::vector<double>(kNumMeasured, 0.0);
  std::vector<float> recv, expert_in, expert_out;  // [R, hidden] each
};

// The rank's compute on the backend, timed; an allocation failure names the buffers.
Measured MeasureRank(Backend& backend, ReplayRun& run) {
  const RunConfig& c = run.c;
  const int64_t T = run.T, D = c.hidden, E = c.num_experts, k = c.top_k, R = run.pp.total_rows;
  Measured m;
  try {
    backend.RunRanks({RankSpec{run.o.rank, {}}}, [&](RankContext& ctx) {
      Device& dev = ctx.device();
      ComputeOps& ops = ctx.ops();
      RankBuffers b(&dev, c, T, run.slots, R);
      FillReplayInputs(ops, run, b);
      TimeIterations(dev, ops, run, b, m.seconds);
      if (run.o.router_experts != nullptr) *run.o.router_experts = b.topk.ToHost();
      m.recv = b.recv.ToHost();
      m.expert_in = b.expert_in.ToHost();
      m.expert_out = b.expert_out.ToHost();
    });
  } catch (const std::bad_alloc&) {
    const double gib = static_cast<double>((T * (2 * D + E + 2 * k) + run.slots * D + 4 * R * D) * 4) / (1 << 30);
    throw Error(
        fmt::format("replay: out of memory for rank {}'s buffers: {} tokens, {} received rows of hidden {} "
                    "(about {:.1f} GiB, plus weights); lower --seq-len",
                    run.o.rank, T, R, D, gib));
  }
  return m;
}

// The CPU device, ops and MLP scratch validation runs on.
struct CpuChecker {
  cpu::CpuDevice dev;
  cpu::CpuOps ops;
  FfnWorkspace ws{&dev};
};

// Local expert j's first and last check_rows rows, checked on the CPU: the permuted input
// exactly against the received row, the MLP output within atol + rtol * |ref|.
void CheckExpertRows(const ReplayRun& run, const Measured& m, const std::vector<int64_t>& src_of_dst, int64_t j, CpuChecker& cpu,
                     ReplayReport& rep) {
  const RankConfig& r = run.r;
  const int64_t D = run.c.hidden;
  const int64_t begin = run.pp.expert_offsets[static_cast<size_t>(j)], end = run.pp.expert_offsets[static_cast<size_t>(j + 1)];
  std::vector<int64_t> rows;
  for (int64_t i = begin; i < end; ++i) {
    if (i < begin + run.o.check_rows || i >= end - run.o.check_rows) rows.push_back(i);
  }
  if (rows.empty()) return;
  std::vector<float> xin(rows.size() * static_cast<size_t>(D)), ref(rows.size() * static_cast<size_t>(D));
  for (size_t q = 0; q < rows.size(); ++q) {
    const int64_t i = rows[q];
    for (int64_t d = 0; d < D; ++d) {
      const float permuted = m.expert_in[static_cast<size_t>(i * D + d)];
      const float source = m.recv[static_cast<size_t>(src_of_dst[static_cast<size_t>(i)] * D + d)];
      if (std::memcmp(&permuted, &source, sizeof(float)) != 0) ++rep.wrong;  // permute is a copy: exact
      xin[q * static_cast<size_t>(D) + static_cast<size_t>(d)] = permuted;
    }
  }
  FfnArgs a = RoutedFfnArgs(run.c, {r.first_expert + j}, {0, static_cast<int64_t>(rows.size())}, r.f_begin, r.f_end);
  a.x = xin.data();
  a.out = ref.data();
  RunSwiGluFfn(cpu.ops, cpu.dev, a, cpu.ws);
  for (size_t q = 0; q < rows.size(); ++q) {
    for (int64_t d = 0; d < D; ++d) {
      const double got = m.expert_out[static_cast<size_t>(rows[q] * D + d)],
                   want = ref[q * static_cast<size_t>(D) + static_cast<size_t>(d)];
      const double err = std::fabs(got - want);
      ++rep.checked;
      if (!std::isfinite(got) || err > run.o.atol + run.o.rtol * std::fabs(want)) ++rep.wrong;
      if (std::isfinite(err)) rep.max_abs_error = std::max(rep.max_abs_error, err);
    }
  }
}

// The layer's phases: measured ones per iteration, dispatch and combine from the cost model.
void AddPhases(const CostBreakdown& cost, const std::vector<double>& seconds, const ReplayOptions& o, bool shared, int64_t e,
               ReplayReport& rep) {
  const auto add = [&](Phase phase, double us, const std::string& source) {
    rep.phases.push_back({PhaseName(phase), us, source, PredictedFor(cost, phase, e)});
    rep.layer_forward_us += us;
  };
  const double iters = static_cast<double>(o.iters);
  add(Phase::kRouter, seconds[kRouter] * 1e6 / iters, "measured");
  add(Phase::kPermute, seconds[kPermute] * 1e6 / iters, "measured");
  add(Phase::kDispatch, std::max(0.0, PredictedFor(cost, Phase::kDispatch, e)), "cost model");
  add(Phase::kGroupedGemm, seconds[kGroupedGemm] * 1e6 / iters, "measured");
  add(Phase::kUnpermute, seconds[kUnpermute] * 1e6 / iters, "measured");
  add(Phase::kCombine, std::max(0.0, PredictedFor(cost, Phase::kCombine, e)), "cost model");
  if (shared) add(Phase::kSharedExperts, seconds[kSharedExperts] * 1e6 / iters, "measured");
  // Weight generation is a cost of the replay (weights are generated, not loaded): reported,
  // not part of the layer's time.
  rep.phases.push_back({PhaseName(Phase::kWeightGen), seconds[kWeightGen] * 1e6 / iters, "measured (not in the layer)", -1});
}

}  // namespace

ReplayReport ReplayRank(const Plan& plan, const ReplayOptions& o, Backend& backend) {
  CheckReplayOptions(o);
  const int64_t T = RoutedTokensOfPlan(plan);
  const RunConfig c = ReplayRunConfig(plan, o, T);
  const RankConfig& r = FindReplayRank(c, o.rank);
  const int64_t k = c.top_k, ep = c.ep, L = r.num_local_experts, e = r.ep_index;

  // The rank's routing, and the cost model on the same sample (it sees this layer only).
  ReceivedRouting routing = SampleReceivedRows(plan, o, c, r, T);
  const RoutingResult sampled = SampleLayerForCost(plan, o, routing.moe_layer, T, ep, k);
  const CostBreakdown cost = SimulateStep(plan, o.cluster, sampled);
  ReplayReport rep = ReportHeader(c, r, o, routing.moe_layer, T);
  CountReceivedRows(routing.recv_counts, sampled.layers.front(), ep, e, T, k, rep);

  // The permutations and MLP arguments, built once (the buffers are bound inside the run).
  const int64_t slots = T * k;
  const SlotOrder order = SortSlotsByExpert(routing.own, slots, k);
  const PermutePlan pp = RankMajorToExpertMajor(routing.recv_counts, ep, L);
  const std::vector<RowBlock> inverse = InverseBlocks(pp.blocks);
  ReplayRun run{c, r, o, T, slots, pp, inverse, order, c.shared_intermediate > 0 && r.shared_mode != SharedMode::kNone, {}, {}};
  std::vector<int64_t> local_experts;
  for (int64_t j = 0; j < L; ++j) local_experts.push_back(r.first_expert + j);
  run.routed_ffn = RoutedFfnArgs(c, local_experts, pp.expert_offsets, r.f_begin, r.f_end);
  run.routed_ffn.block_bytes = o.weight_block_bytes;
  run.shared_ffn = SharedFfnArgs(c, {0, T}, r.shared_f_begin, r.shared_f_end);
  run.shared_ffn.block_bytes = o.weight_block_bytes;

  const Measured m = MeasureRank(backend, run);
  rep.backend = backend.name();  // after the run: names the GEMM path that ran

  // Validation on the CPU: the permutation exactly, the expert MLP within tolerance.
  CpuChecker cpu;
  const std::vector<int64_t> src_of_dst = ExpandToRowIndices(pp.blocks);
  for (int64_t j = 0; j < L; ++j) CheckExpertRows(run, m, src_of_dst, j, cpu, rep);
  AddPhases(cost, m.seconds, o, run.shared, e, rep);
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
