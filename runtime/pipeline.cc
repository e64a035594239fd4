// One MoE layer's forward on one rank (pipeline.h).
#include "runtime/pipeline.h"

#include "planner/base/phase.h"

#include <algorithm>
#include <chrono>
#include <numeric>

#include <fmt/format.h>

#include "planner/base/error.h"
#include "planner/routing/replica_routing.h"
#include "runtime/data.h"
#include "planner/cost/deepep.h"
#include "planner/routing/flex_counts.h"
#include "runtime/deepep_dispatch.h"
#include "runtime/dispatch.h"
#include "runtime/expert_ffn.h"
#include "runtime/router.h"

namespace dockyard::runtime {

namespace {

// The phases a rank measures, in report order (names: planner/base/phase.h).
constexpr Phase kMeasured[] = {Phase::kRouter,  Phase::kPermute,       Phase::kDispatch, Phase::kGroupedGemm, Phase::kUnpermute,
                               Phase::kCombine, Phase::kSharedExperts, Phase::kTpComm,   Phase::kWeightGen};
enum MeasuredIndex : int {
  kRouter,
  kPermute,
  kDispatch,
  kGroupedGemm,
  kUnpermute,
  kCombine,
  kSharedExperts,
  kTpComm,
  kWeightGen,
  kNumPhases,
};
static_assert(sizeof(kMeasured) / sizeof(kMeasured[0]) == kNumPhases, "one index per measured phase");

int64_t Total(const std::vector<int64_t>& v) {
  return std::accumulate(v.begin(), v.end(), int64_t{0});
}

class LayerRank {
 public:
  LayerRank(RankContext& ctx, const RunConfig& config, const RankConfig& rank)
      : ctx_(ctx),
        dev_(ctx.device()),
        ops_(ctx.ops()),
        c_(config),
        r_(rank),
        x_(&dev_),
        router_w_(&dev_),
        score_bias_(&dev_),
        shared_sig_w_(&dev_),
        scores_(&dev_),
        select_(&dev_),
        topk_(&dev_),
        weights_(&dev_),
        token_of_row_(&dev_),
        row_of_slot_(&dev_),
        routed_in_(&dev_),
        counts_send_(&dev_),
        counts_recv_(&dev_),
        gathered_counts_(&dev_),
        gathered_(&dev_),
        outer_in_(&dev_),
        outer_out_(&dev_),
        whiteboard_(&dev_),
        dispatched_(&dev_),
        expert_in_(&dev_),
        expert_out_(&dev_),
        combine_in_(&dev_),
        routed_out_(&dev_),
        y_(&dev_),
        shared_x_(&dev_),
        shared_out_(&dev_),
        shared_own_(&dev_),
        shared_scale_(&dev_),
        gathered_topk_(&dev_),
        gathered_weights_(&dev_),
        ffn_ws_(&dev_) {}

  void Setup() {
    const int64_t T = r_.tokens, D = c_.hidden, E = c_.num_experts;
    x_.Resize(T * D);
    ops_.FillTokens(c_.options.seed, r_.source, 0, T, D, x_.data());
    router_w_.Resize(E * D);
    WeightRowsArgs w;
    w.seed = c_.options.seed;
    w.layer = c_.layer;
    w.matrix = kMatrixRouter;
    w.row_end = E;
    w.col_end = D;
    w.scale = RouterScale(D);
    w.out = router_w_.data();
    ops_.FillWeightRows(w);
    if (c_.score_correction_bias) {
      score_bias_.Resize(E);
      FillScoreBias(ops_, c_, score_bias_.data());
    }
    if (c_.shared_expert_gate) {
      shared_sig_w_.Resize(D);
      w.matrix = kMatrixSharedSigmoidGate;
      w.row_end = 1;
      w.col_end = D;
      w.scale = RouterScale(D);
      w.out = shared_sig_w_.data();
      ops_.FillWeightRows(w);
    }
    if (c_.routing_model) assigned_ = AssignedExperts(c_, *c_.routing_model, r_.source, T);
  }

  void Forward(bool timed) {
    timed_ = timed;
    const int64_t T = r_.tokens, D = c_.hidden, E = c_.num_experts, k = c_.top_k;
    // --- router
    Time(kRouter, [&] {
      scores_.Resize(T * E);
      RouterScores(ops_, c_, x_.data(), router_w_.data(), T, scores_.data());
      topk_.Resize(T * k);
      if (c_.routing_model) {
        topk_.CopyFromHost(assigned_);
      } else {
        if (c_.score_correction_bias || c_.group_limit.active()) select_.Resize(T * E);
        SelectExperts(ops_, c_, scores_.data(), score_bias_.data(), T, select_.data(), topk_.data());
      }
      weights_.Resize(T * k);
      ops_.RouterWeights(scores_.data(), topk_.data(), T, E, k, c_.norm_topk_prob, static_cast<float>(c_.routed_scaling_factor),
                         weights_.data());
    });
    // --- permute: sort the (token, slot) pairs by expert, gather their rows
    RouteOrder order;
    Time(kPermute, [&] {
      std::vector<int64_t> experts = topk_.ToHost();
      if (c_.placement) {
        // Redundant experts: sort and dispatch by physical slot (P/ep per rank, contiguous).
        experts = ReplicaSlots(c_, r_.ep_index, experts);
        order = SortByExpert(experts, c_.placement->num_physical, k);
      } else {
        order = SortByExpert(experts, E, k);
      }
      token_of_row_.CopyFromHost(order.token_of_row);
      row_of_slot_.CopyFromHost(order.row_of_slot);
      routed_in_.Resize(T * k * D);
      ops_.GatherRows(x_.data(), token_of_row_.data(), T * k, D, routed_in_.data());
    });
    if (c_.dispatcher == Dispatcher::kAllToAll) {
      AllToAllPath(order);
    } else if (c_.dispatcher == Dispatcher::kDeredundency) {
      DeredundencyPath(order);
    } else if (c_.dispatcher == Dispatcher::kAllGather) {
      AllGatherPath();  // its reduce-scatter leaves each token's weighted sum in y_
    } else {
      DeepEpPath();  // its combine leaves each token's weighted sum in y_
    }
    // --- weighted sum of each token's top-k rows
    if (c_.dispatcher != Dispatcher::kDeepEp && c_.dispatcher != Dispatcher::kAllGather) {
      y_.Resize(T * D);
      Time(kUnpermute, [&] { ops_.WeightedCombine(routed_out_.data(), row_of_slot_.data(), weights_.data(), T, k, D, y_.data()); });
    }
    SharedExperts();
    if (r_.expert_tp_group.size() > 1) {
      Time(kTpComm, [&] { group(RankGroup::kExpertTp).AllReduce(y_.data(), T * D); });
    }
  }

  void Finish(RankResult& out, int64_t iters) {
    out.rank = r_.rank;
    out.source = r_.source;
    out.tokens = r_.tokens;
    out.output = y_.ToHost();
    out.routed_rows = r_.tokens * c_.top_k;
    out.sent_rows = sent_rows_;
    out.received_rows = received_rows_;
    out.tokens_per_local_expert = tokens_per_local_expert_;
    out.flex_network_rows = flex_network_rows_;
    out.flex_nvlink_rows = flex_nvlink_rows_;
    out.gathered_rows = gathered_rows_;
    out.phase_us.assign(kNumPhases, 0.0);
    for (int p = 0; p < kNumPhases; ++p) out.phase_us[static_cast<size_t>(p)] = phase_seconds_[p] * 1e6 / static_cast<double>(iters);
  }

 private:
  template <typename F>
  void Time(int phase, F&& fn) {
    dev_.Synchronize();
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    dev_.Synchronize();
    if (timed_) phase_seconds_[phase] += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }

  // Routed experts on the received, expert-major rows; weight generation is moved out of the
  // grouped_gemm phase into weight_gen.
  void Experts(const PermutePlan& plan) {
    std::vector<int64_t> experts;
    for (int64_t l = 0; l < r_.num_local_experts; ++l) {
      int64_t e = r_.first_expert + l;
      if (c_.placement) e = c_.placement->physical_to_logical[static_cast<size_t>(e)];  // a replica: its expert's weights
      if (c_.options.fault == Fault::kWrongExpertOwner) e = (e + 1) % c_.num_experts;
      experts.push_back(e);
    }
    FfnArgs a = RoutedFfnArgs(c_, std::move(experts), plan.expert_offsets, r_.f_begin, r_.f_end);
    a.block_bytes = RankBlockBytes();
    expert_out_.Resize(plan.total_rows * c_.hidden);
    a.x = expert_in_.data();
    a.out = expert_out_.data();
    double gen = 0;
    Time(kGroupedGemm, [&] { gen = RunSwiGluFfn(ops_, dev_, a, ffn_ws_); });
    if (timed_) {
      phase_seconds_[kGroupedGemm] -= gen;
      phase_seconds_[kWeightGen] += gen;
    }
    received_rows_ = plan.total_rows;
    tokens_per_local_expert_ = plan.tokens_per_local_expert;
  }

  // The rows received from `n` peers (dispatched_, rank-major, `recv_counts` [n * L]) go through
  // the local experts: rank-major -> expert-major permutation, grouped SwiGLU, and back to
  // rank-major order in combine_in_ for the combine all-to-all.
  void LocalExperts(const std::vector<int64_t>& recv_counts, int64_t n) {
    const int64_t L = r_.num_local_experts, D = c_.hidden;
    PermutePlan plan;
    Time(kPermute, [&] {
      plan = RankMajorToExpertMajor(recv_counts, n, L);
      expert_in_.Resize(plan.total_rows * D);
      ops_.CopyRowBlocks(dispatched_.data(), expert_in_.data(), plan.blocks, D);
    });
    Experts(plan);
    Time(kUnpermute, [&] {
      combine_in_.Resize(plan.total_rows * D);
      ops_.CopyRowBlocks(expert_out_.data(), combine_in_.data(), InverseBlocks(plan.blocks), D);
    });
  }

  void AllToAllPath(const RouteOrder& order) {
    Communicator& ep = group(RankGroup::kEp);
    const int64_t n = ep.size(), L = r_.num_local_experts, D = c_.hidden;
    std::vector<int64_t> recv_counts, input_splits, output_splits;
    Time(kDispatch, [&] {
      counts_send_.CopyFromHost(order.tokens_per_expert);
      counts_recv_.Resize(n * L);
      const std::vector<int64_t> per_peer(static_cast<size_t>(n), L);
      ep.AllToAllSingle(counts_send_.data(), per_peer, counts_recv_.data(), per_peer, 1);
      recv_counts = counts_recv_.ToHost();
      input_splits = SumChunks(order.tokens_per_expert, n, L);
      output_splits = SumChunks(recv_counts, n, L);
      dispatched_.Resize(Total(output_splits) * D);
      ep.AllToAllSingle(routed_in_.data(), input_splits, dispatched_.data(), output_splits, D);
    });
    sent_rows_ = Total(input_splits) - input_splits[static_cast<size_t>(ep.rank())];
    LocalExperts(recv_counts, n);
    routed_out_.Resize(Total(input_splits) * D);
    if (OverlapShared()) {
      // combine_start; the shared experts on the compute stream; combine_wait.
      const double shared_before = phase_seconds_[kSharedExperts] + phase_seconds_[kWeightGen];
      dev_.Synchronize();
      const auto t0 = std::chrono::steady_clock::now();
      ep.StartAllToAllSingle(combine_in_.data(), output_splits, routed_out_.data(), input_splits, D);
      SharedCompute();
      ep.WaitPending();
      dev_.Synchronize();
      if (timed_) {
        const double region = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        const double shared = phase_seconds_[kSharedExperts] + phase_seconds_[kWeightGen] - shared_before;
        phase_seconds_[kCombine] += std::max(0.0, region - shared);  // the combine's exposed time
      }
    } else {
      Time(kCombine, [&] { ep.AllToAllSingle(combine_in_.data(), output_splits, routed_out_.data(), input_splits, D); });
    }
  }

  // allgather dispatcher (Megatron MoEAllGatherTokenDispatcher; the planner's volumes:
  // accounting/comm.h AllGatherDispatchBytes): every EP member all-gathers the group's tokens with
  // their top-k and gate weights, runs its local experts on every (token, slot) pair that picks
  // one, writes the weighted sums in slot order into a [n * T, D] buffer, and the combine
  // reduce-scatters it: each member gets its own T rows summed over the members in order.
  // Leaves y_ [T, D].
  void AllGatherPath() {
    Communicator& ep = group(RankGroup::kEp);
    const int64_t n = ep.size(), T = r_.tokens, k = c_.top_k, D = c_.hidden, L = r_.num_local_experts;
    std::vector<int64_t> experts;
    std::vector<float> weights;
    Time(kDispatch, [&] {
      gathered_.Resize(n * T * D);
      ep.AllGather(x_.data(), T * D, gathered_.data());
      gathered_topk_.Resize(n * T * k);
      ep.AllGather(topk_.data(), T * k, gathered_topk_.data());
      gathered_weights_.Resize(n * T * k);
      ep.AllGather(weights_.data(), T * k, gathered_weights_.data());
      experts = gathered_topk_.ToHost();
      weights = gathered_weights_.ToHost();
    });
    gathered_rows_ = n * T;
    sent_rows_ = (n - 1) * T;  // ring all-gather: every member's block passes on n - 1 times
    // The (token, slot) pairs of the local experts, expert-major, tokens in gathered order.
    PermutePlan plan;
    std::vector<int64_t> pair_row(static_cast<size_t>(n * T * k), -1), token_of_row;
    Time(kPermute, [&] {
      plan.tokens_per_local_expert.assign(static_cast<size_t>(L), 0);
      plan.expert_offsets.assign(static_cast<size_t>(L + 1), 0);
      for (int64_t l = 0; l < L; ++l) {
        for (int64_t i = 0; i < n * T; ++i) {
          for (int64_t j = 0; j < k; ++j) {
            if (experts[static_cast<size_t>(i * k + j)] != r_.first_expert + l) continue;
            pair_row[static_cast<size_t>(i * k + j)] = plan.total_rows++;
            ++plan.tokens_per_local_expert[static_cast<size_t>(l)];
            token_of_row.push_back(i);
          }
        }
        plan.expert_offsets[static_cast<size_t>(l + 1)] = plan.total_rows;
      }
      token_of_row_.CopyFromHost(token_of_row);
      expert_in_.Resize(plan.total_rows * D);
      ops_.GatherRows(gathered_.data(), token_of_row_.data(), plan.total_rows, D, expert_in_.data());
    });
    Experts(plan);
    Time(kUnpermute, [&] {
      const std::vector<float> out = expert_out_.ToHost();
      std::vector<float> partial(static_cast<size_t>(n * T * D), 0.0f);  // weighted sum of the local slots, slot order
      for (int64_t i = 0; i < n * T; ++i) {
        for (int64_t j = 0; j < k; ++j) {
          const int64_t row = pair_row[static_cast<size_t>(i * k + j)];
          if (row < 0) continue;
          const float w = weights[static_cast<size_t>(i * k + j)];
          for (int64_t d = 0; d < D; ++d) partial[static_cast<size_t>(i * D + d)] += w * out[static_cast<size_t>(row * D + d)];
        }
      }
      gathered_.CopyFromHost(partial);
    });
    y_.Resize(T * D);
    Time(kCombine, [&] { ep.ReduceScatter(gathered_.data(), y_.data(), T * D); });
  }

  // deepep dispatcher (deepep_dispatch.h, the rule in planner/cost/deepep.h): each token goes once to
  // the rail peer of every other node holding one of its experts, then every holder forwards it
  // once to each member of its node with one of its experts; expert ranks return one weighted
  // partial per token, forwarders sum their node's partials in member order, sources the nodes'
  // in node order. Leaves y_ [T, D].
  void DeepEpPath() {
    Communicator& ep = group(RankGroup::kEp);
    const int64_t n = ep.size(), me = ep.rank(), T = r_.tokens, k = c_.top_k, D = c_.hidden, M = k + 2;
    const int64_t per = c_.num_experts / n, L = r_.num_local_experts;
    const FlexCounts topo = MakeFlexCounts(r_.ep_group, c_.gpus_per_node);
    const int64_t home = topo.node_index[static_cast<size_t>(me)];
    auto member_of = [&](const TokenRecords& rec, int64_t i, int64_t j) { return rec.meta[static_cast<size_t>(i * M + 2 + j)] / per; };
    TokenRecords held;  // own tokens first (index t), then those received from rail peers
    {
      const std::vector<int64_t> experts = topk_.ToHost();
      held.weights = weights_.ToHost();
      held.rows = x_.ToHost();
      held.count = T;
      for (int64_t t = 0; t < T; ++t) {
        held.meta.push_back(me);
        held.meta.push_back(t);
        for (int64_t j = 0; j < k; ++j) held.meta.push_back(experts[static_cast<size_t>(t * k + j)]);
      }
    }
    flex_network_rows_.assign(static_cast<size_t>(n), 0);
    flex_nvlink_rows_.assign(static_cast<size_t>(n), 0);
    std::vector<std::vector<int64_t>> sent_a(static_cast<size_t>(n)), sent_b(static_cast<size_t>(n));
    std::vector<int64_t> recv_a, recv_b, local;  // local: held indices this rank computes itself
    TokenRecords fin;                            // the tokens this rank computes: `local` ones, then received
    Time(kDispatch, [&] {
      std::vector<TokenRecords> buckets(static_cast<size_t>(n));
      for (int64_t node = 0; node < topo.num_nodes; ++node) {
        if (node == home) continue;
        const int64_t peer = RailPeer(topo, me, node);
        for (int64_t t = 0; t < T; ++t) {
          bool reaches = false;
          for (int64_t j = 0; j < k; ++j) reaches = reaches || topo.node_index[static_cast<size_t>(member_of(held, t, j))] == node;
          if (!reaches) continue;
          buckets[static_cast<size_t>(peer)].Append(held, t, M, k, D);
          sent_a[static_cast<size_t>(peer)].push_back(t);
        }
        flex_network_rows_[static_cast<size_t>(peer)] = buckets[static_cast<size_t>(peer)].count;
      }
      const TokenRecords got = ExchangeRecords(ep, dev_, buckets, M, k, D, &recv_a);
      for (int64_t i = 0; i < got.count; ++i) held.Append(got, i, M, k, D);
      std::vector<TokenRecords> fan(static_cast<size_t>(n));
      for (int64_t r = 0; r < n; ++r) {
        if (topo.node_index[static_cast<size_t>(r)] != home) continue;
        for (int64_t h = 0; h < held.count; ++h) {
          bool reaches = false;
          for (int64_t j = 0; j < k; ++j) reaches = reaches || member_of(held, h, j) == r;
          if (!reaches) continue;
          if (r == me) {
            local.push_back(h);
            fin.Append(held, h, M, k, D);
          } else {
            fan[static_cast<size_t>(r)].Append(held, h, M, k, D);
            sent_b[static_cast<size_t>(r)].push_back(h);
          }
        }
        if (r != me) flex_nvlink_rows_[static_cast<size_t>(r)] = fan[static_cast<size_t>(r)].count;
      }
      const TokenRecords got_b = ExchangeRecords(ep, dev_, fan, M, k, D, &recv_b);
      for (int64_t i = 0; i < got_b.count; ++i) fin.Append(got_b, i, M, k, D);
    });
    sent_rows_ = 0;
    for (int64_t r = 0; r < n; ++r) sent_rows_ += flex_network_rows_[static_cast<size_t>(r)] + flex_nvlink_rows_[static_cast<size_t>(r)];
    // The (token, slot) pairs of the local experts, expert-major, tokens in `fin` order.
    PermutePlan plan;
    std::vector<int64_t> pair_row(static_cast<size_t>(fin.count * k), -1);
    Time(kPermute, [&] {
      plan.tokens_per_local_expert.assign(static_cast<size_t>(L), 0);
      plan.expert_offsets.assign(static_cast<size_t>(L + 1), 0);
      std::vector<float> in;
      for (int64_t l = 0; l < L; ++l) {
        for (int64_t i = 0; i < fin.count; ++i) {
          for (int64_t j = 0; j < k; ++j) {
            if (fin.meta[static_cast<size_t>(i * M + 2 + j)] != r_.first_expert + l) continue;
            pair_row[static_cast<size_t>(i * k + j)] = plan.total_rows++;
            ++plan.tokens_per_local_expert[static_cast<size_t>(l)];
            in.insert(in.end(), fin.rows.begin() + i * D, fin.rows.begin() + (i + 1) * D);
          }
        }
        plan.expert_offsets[static_cast<size_t>(l + 1)] = plan.total_rows;
      }
      expert_in_.CopyFromHost(in);
    });
    Experts(plan);
    std::vector<float> partial(static_cast<size_t>(fin.count * D), 0.0f);  // weighted sum of the local slots, slot order
    Time(kUnpermute, [&] {
      const std::vector<float> out = expert_out_.ToHost();
      for (int64_t i = 0; i < fin.count; ++i) {
        for (int64_t j = 0; j < k; ++j) {
          const int64_t row = pair_row[static_cast<size_t>(i * k + j)];
          if (row < 0) continue;
          const float w = fin.weights[static_cast<size_t>(i * k + j)];
          for (int64_t d = 0; d < D; ++d) partial[static_cast<size_t>(i * D + d)] += w * out[static_cast<size_t>(row * D + d)];
        }
      }
    });
    std::vector<float> y(static_cast<size_t>(T * D), 0.0f);
    Time(kCombine, [&] {
      // NVLink back: the partials of the received tokens to their forwarders.
      const int64_t nl = static_cast<int64_t>(local.size());
      std::vector<std::vector<float>> to(static_cast<size_t>(n));
      for (int64_t r = 0, i = nl; r < n; ++r) {
        for (int64_t c = 0; c < recv_b[static_cast<size_t>(r)]; ++c, ++i) {
          to[static_cast<size_t>(r)].insert(to[static_cast<size_t>(r)].end(), partial.begin() + i * D, partial.begin() + (i + 1) * D);
        }
      }
      std::vector<int64_t> back_from(static_cast<size_t>(n));
      for (int64_t r = 0; r < n; ++r) back_from[static_cast<size_t>(r)] = static_cast<int64_t>(sent_b[static_cast<size_t>(r)].size());
      const std::vector<float> back = ExchangeRows(ep, dev_, to, recv_b, back_from, D);
      // Node sums of the held tokens, members in order.
      std::vector<float> node_sum(static_cast<size_t>(held.count * D), 0.0f);
      std::vector<char> has(static_cast<size_t>(held.count), 0);
      int64_t offset = 0;
      for (int64_t r = 0; r < n; ++r) {
        if (r == me) {
          for (int64_t i = 0; i < nl; ++i) {
            const int64_t h = local[static_cast<size_t>(i)];
            has[static_cast<size_t>(h)] = 1;
            for (int64_t d = 0; d < D; ++d) node_sum[static_cast<size_t>(h * D + d)] += partial[static_cast<size_t>(i * D + d)];
          }
        }
        for (int64_t h : sent_b[static_cast<size_t>(r)]) {
          has[static_cast<size_t>(h)] = 1;
          for (int64_t d = 0; d < D; ++d) node_sum[static_cast<size_t>(h * D + d)] += back[static_cast<size_t>(offset * D + d)];
          ++offset;
        }
      }
      // Network back: the node sums of the tokens received from rail peers, to their sources.
      std::vector<std::vector<float>> to_a(static_cast<size_t>(n));
      for (int64_t r = 0, h = T; r < n; ++r) {
        for (int64_t c = 0; c < recv_a[static_cast<size_t>(r)]; ++c, ++h) {
          to_a[static_cast<size_t>(r)].insert(to_a[static_cast<size_t>(r)].end(), node_sum.begin() + h * D, node_sum.begin() + (h + 1) * D);
        }
      }
      std::vector<int64_t> back_a_from(static_cast<size_t>(n));
      for (int64_t r = 0; r < n; ++r) back_a_from[static_cast<size_t>(r)] = static_cast<int64_t>(sent_a[static_cast<size_t>(r)].size());
      const std::vector<float> back_a = ExchangeRows(ep, dev_, to_a, recv_a, back_a_from, D);
      // Per own token: the nodes' sums in node order.
      std::vector<std::vector<const float*>> from_node(static_cast<size_t>(T),
                                                       std::vector<const float*>(static_cast<size_t>(topo.num_nodes), nullptr));
      for (int64_t t = 0; t < T; ++t) {
        if (has[static_cast<size_t>(t)])
          from_node[static_cast<size_t>(t)][static_cast<size_t>(home)] = &node_sum[static_cast<size_t>(t * D)];
      }
      offset = 0;
      for (int64_t r = 0; r < n; ++r) {
        for (int64_t t : sent_a[static_cast<size_t>(r)]) {
          from_node[static_cast<size_t>(t)][static_cast<size_t>(topo.node_index[static_cast<size_t>(r)])] =
              &back_a[static_cast<size_t>(offset * D)];
          ++offset;
        }
      }
      for (int64_t t = 0; t < T; ++t) {
        for (const float* part : from_node[static_cast<size_t>(t)]) {
          if (part == nullptr) continue;
          for (int64_t d = 0; d < D; ++d) y[static_cast<size_t>(t * D + d)] += part[d];
        }
      }
      y_.CopyFromHost(y);
    });
  }

  int64_t RankBlockBytes() const {
    return c_.options.rank_weight_block_bytes > 0 ? c_.options.rank_weight_block_bytes : c_.options.weight_block_bytes;
  }

  bool OverlapShared() const {
    return c_.options.overlap_shared_experts && r_.shared_mode != SharedMode::kNone && r_.shared_mode != SharedMode::kSequenceParallel;
  }

  void DeredundencyPath(const RouteOrder& order) {
    Communicator& oep = group(RankGroup::kOep);
    Communicator& iep = group(RankGroup::kIep);
    const int64_t no = oep.size(), ni = iep.size(), L = r_.num_local_experts, D = c_.hidden, E = c_.num_experts;
    const int64_t rows = r_.tokens * c_.top_k;
    DeredundencyPlan dplan;
    std::vector<int64_t> iep_recv_counts, input_splits, output_splits;
    Time(kDispatch, [&] {
      counts_send_.CopyFromHost(order.tokens_per_expert);
      gathered_counts_.Resize(no * E);
      oep.AllGather(counts_send_.data(), E, gathered_counts_.data());
      const std::vector<int64_t> gathered_counts = gathered_counts_.ToHost();
      dplan = DeredundencyDispatchBlocks(gathered_counts, no, E, r_.oep_index * ni * L, ni, L);
      // The shared token view is an all-gather: every source of the oep group must route the
      // same number of rows (hyper_parallel _oep_gather_for_dispatch).
      for (int64_t o = 0; o < no; ++o) {
        if (dplan.source_totals[static_cast<size_t>(o)] != rows) {
          throw Error(
              fmt::format("the deredundency dispatcher requires equal routed token counts within each oep group "
                          "(its shared token view is an all-gather), got totals [{}] on oep group [{}]",
                          fmt::join(dplan.source_totals, ", "), fmt::join(oep.ranks(), " ")));
        }
      }
      gathered_.Resize(no * rows * D);
      oep.AllGather(routed_in_.data(), rows * D, gathered_.data());
      input_splits = SumChunks(dplan.counts_by_destination_expert, ni, L);
      counts_send_.CopyFromHost(dplan.counts_by_destination_expert);
      counts_recv_.Resize(ni * L);
      const std::vector<int64_t> per_peer(static_cast<size_t>(ni), L);
      iep.AllToAllSingle(counts_send_.data(), per_peer, counts_recv_.data(), per_peer, 1);
      iep_recv_counts = counts_recv_.ToHost();
      output_splits = SumChunks(iep_recv_counts, ni, L);
    });
    Time(kPermute, [&] {
      outer_in_.Resize(dplan.total_rows * D);
      ops_.CopyRowBlocks(gathered_.data(), outer_in_.data(), dplan.blocks, D);
    });
    Time(kDispatch, [&] {
      dispatched_.Resize(Total(output_splits) * D);
      iep.AllToAllSingle(outer_in_.data(), input_splits, dispatched_.data(), output_splits, D);
    });
    sent_rows_ = Total(input_splits) - input_splits[static_cast<size_t>(iep.rank())];
    LocalExperts(iep_recv_counts, ni);
    Time(kCombine, [&] {
      outer_out_.Resize(dplan.total_rows * D);
      iep.AllToAllSingle(combine_in_.data(), output_splits, outer_out_.data(), input_splits, D);
    });
    Time(kUnpermute, [&] {
      // Every gathered row of this outer range goes back to its place; the rows of other
      // ranges stay zero, so the reduce-scatter adds exactly one non-zero term per row.
      whiteboard_.Resize(no * rows * D);
      ops_.Fill(whiteboard_.data(), 0.0f, no * rows * D);
      ops_.CopyRowBlocks(outer_out_.data(), whiteboard_.data(), InverseBlocks(dplan.blocks), D);
    });
    Time(kCombine, [&] {
      routed_out_.Resize(rows * D);
      oep.ReduceScatter(whiteboard_.data(), routed_out_.data(), rows * D);
    });
  }

  // The shared experts: computed here unless the combine overlap already did (SharedCompute),
  // then added to the routed output.
  void SharedExperts() {
    if (r_.shared_mode == SharedMode::kNone) return;
    if (!shared_done_) SharedCompute();
    shared_done_ = false;
    Time(kSharedExperts, [&] { ops_.Add(shared_own_ptr_, y_.data(), r_.tokens * c_.hidden); });
  }

  void SharedCompute() {
    shared_done_ = true;
    const int64_t T = r_.tokens, D = c_.hidden;
    const bool sp = r_.shared_mode == SharedMode::kSequenceParallel;
    int64_t rows = T;
    const float* x = x_.data();
    if (sp) {
      Communicator& tp = group(RankGroup::kSharedTp);
      rows = T * tp.size();
      shared_x_.Resize(rows * D);
      Time(kTpComm, [&] { tp.AllGather(x_.data(), T * D, shared_x_.data()); });
      x = shared_x_.data();
    }
    FfnArgs a = SharedFfnArgs(c_, {0, rows}, r_.shared_f_begin, r_.shared_f_end);
    a.block_bytes = RankBlockBytes();
    a.x = x;
    shared_out_.Resize(rows * D);
    a.out = shared_out_.data();
    double gen = 0;
    Time(kSharedExperts, [&] {
      gen = RunSwiGluFfn(ops_, dev_, a, ffn_ws_);
      if (c_.shared_expert_gate) {
        // Qwen2-MoE: out *= sigmoid(x . g), one scalar per token.
        shared_scale_.Resize(rows);
        GemmArgs g;
        g.m = rows;
        g.n = 1;
        g.k = D;
        g.a = x;
        g.lda = D;
        g.b = shared_sig_w_.data();
        g.ldb = D;
        g.c = shared_scale_.data();
        g.ldc = 1;
        ops_.Gemm(g);
        ops_.Sigmoid(shared_scale_.data(), rows);
        ops_.ScaleRows(shared_out_.data(), shared_scale_.data(), rows, D);
      }
    });
    if (timed_) {
      phase_seconds_[kSharedExperts] -= gen;
      phase_seconds_[kWeightGen] += gen;
    }
    shared_own_ptr_ = shared_out_.data();
    if (sp) {
      Communicator& tp = group(RankGroup::kSharedTp);
      shared_own_.Resize(T * D);
      Time(kTpComm, [&] { tp.ReduceScatter(shared_out_.data(), shared_own_.data(), T * D); });
      shared_own_ptr_ = shared_own_.data();
    }
  }

  // The rank's communicator of `g` (RankSpecs labels it RankGroupName(g)).
  Communicator& group(RankGroup g) { return ctx_.group(RankGroupName(g)); }

  RankContext& ctx_;
  Device& dev_;
  ComputeOps& ops_;
  const RunConfig& c_;
  const RankConfig& r_;
  bool timed_ = false;
  bool shared_done_ = false;               // SharedCompute ran in this forward (combine overlap)
  const float* shared_own_ptr_ = nullptr;  // this rank's shared-expert output [T, D]
  double phase_seconds_[kNumPhases] = {};
  int64_t sent_rows_ = 0, received_rows_ = 0;
  std::vector<int64_t> tokens_per_local_expert_;
  std::vector<int64_t> flex_network_rows_, flex_nvlink_rows_;  // deepep: tokens sent per member and stage
  int64_t gathered_rows_ = 0;                                  // allgather: rows the all-gather delivered
  std::vector<int64_t> assigned_;                              // routing override [T * top_k]

  DeviceArray<float> x_;                             // [T, D]
  DeviceArray<float> router_w_;                      // [E, D]
  DeviceArray<float> score_bias_;                    // [E]
  DeviceArray<float> shared_sig_w_;                  // [D]
  DeviceArray<float> scores_;                        // [T, E]
  DeviceArray<float> select_;                        // [T, E] scores + bias
  DeviceArray<int64_t> topk_;                        // [T, k]
  DeviceArray<float> weights_;                       // [T, k]
  DeviceArray<int64_t> token_of_row_, row_of_slot_;  // [T * k]
  DeviceArray<float> routed_in_;                     // [T * k, D] expert-sorted
  DeviceArray<int64_t> counts_send_, counts_recv_, gathered_counts_;
  DeviceArray<float> gathered_;                // [oep * T * k, D]
  DeviceArray<float> outer_in_, outer_out_;    // deredundency outer buffers
  DeviceArray<float> whiteboard_;              // [oep * T * k, D]
  DeviceArray<float> dispatched_;              // received, rank-major
  DeviceArray<float> expert_in_, expert_out_;  // expert-major
  DeviceArray<float> combine_in_;              // rank-major, to send back
  DeviceArray<float> routed_out_;              // [T * k, D] expert-sorted, back home
  DeviceArray<float> y_;                       // [T, D]
  DeviceArray<float> shared_x_, shared_out_, shared_own_, shared_scale_;
  DeviceArray<int64_t> gathered_topk_;   // allgather: [ep * T, k] (gathered_: the tokens [ep * T, D], then the partial sums)
  DeviceArray<float> gathered_weights_;  // allgather: [ep * T, k]
  FfnWorkspace ffn_ws_;
};

}  // namespace

const std::vector<std::string>& PhaseNames() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (Phase p : kMeasured) out.push_back(PhaseName(p));
    return out;
  }();
  return names;
}

std::vector<int64_t> AssignedExperts(const RunConfig& config, const RoutingModel& routing, int64_t source, int64_t tokens) {
  const std::vector<int32_t> picks = SampleTokenExperts(routing, config.routing_layer, source, tokens);
  return std::vector<int64_t>(picks.begin(), picks.end());
}

std::vector<int64_t> ReplicaSlots(const RunConfig& config, int64_t ep_index, const std::vector<int64_t>& experts) {
  const std::vector<int32_t> logical(experts.begin(), experts.end());
  // The routing model's seed, as the planner's matrices use it; the run's seed without one.
  const uint64_t seed = config.routing_model ? config.routing_model->spec.seed : config.options.seed;
  const std::vector<int32_t> slots =
      ChooseReplicas(*config.placement, config.options.redundant->choice, seed, config.routing_layer, ep_index, logical);
  return std::vector<int64_t>(slots.begin(), slots.end());
}

void RunRank(RankContext& ctx, const RunConfig& config, const RankConfig& rank, RankResult& result) {
  LayerRank layer(ctx, config, rank);
  layer.Setup();
  const int64_t total = config.options.warmup + config.options.iters;
  const std::vector<RankGroup> groups = GroupsOfRank(config, rank);
  for (int64_t it = 0; it < total; ++it) {
    const bool last = it + 1 == total;
    if (config.options.record_collectives) {
      result.collectives.clear();
      for (RankGroup g : groups) ctx.group(RankGroupName(g)).set_log(last ? &result.collectives : nullptr);
    }
    layer.Forward(it >= config.options.warmup);
  }
  for (RankGroup g : groups) ctx.group(RankGroupName(g)).set_log(nullptr);
  layer.Finish(result, config.options.iters);
}

}  // namespace dockyard::runtime
