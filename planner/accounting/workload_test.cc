// Tokens per rank: torchtitan's and Megatron-Core's routed-token counts, by hand.
#include "planner/accounting/workload.h"

#include <doctest/doctest.h>

#include "planner/accounting/comm.h"
#include "planner/layout/plan.h"
#include "tests/test_models.h"

using dockyard::Convention;
using dockyard::RoutedTokens;

namespace {

dockyard::Workload WorkloadOf(int64_t world, int64_t tp, int64_t ep, int64_t etp, Convention convention) {
  dockyard::ParallelDimsOptions o;
  o.world_size = world;
  o.tp = tp;
  o.ep = ep;
  o.etp = etp;
  o.convention = convention;
  dockyard::TrainingConfig t;
  t.seq_len = 16;  // T = 1 x 16 tokens per micro-batch on a rank (cp 1)
  return dockyard::ComputeWorkload(dockyard::BuildPlan(dockyard::testing::TinyMixtral(), o, t));
}

}  // namespace

TEST_CASE("torchtitan routed tokens: T / tp only with EP on and etp 1, else T") {
  // T = 1000 tokens on a rank.
  CHECK(RoutedTokens(1000, 4, 8, 1, Convention::kTorchtitan) == 250);   // ReordererSequenceParallel: ceil(1000 / 4)
  CHECK(RoutedTokens(1001, 4, 8, 1, Convention::kTorchtitan) == 251);   // ceil(1001 / 4)
  CHECK(RoutedTokens(1000, 4, 8, 4, Convention::kTorchtitan) == 1000);  // etp = tp: the whole T, F sharded
  CHECK(RoutedTokens(1000, 4, 1, 1, Convention::kTorchtitan) == 1000);  // EP off: experts TP-sharded over tp
  CHECK(dockyard::DispatchTokens(1000, 4, 8, 4, Convention::kTorchtitan) == 1000);
}

TEST_CASE("Megatron routed tokens: k * T * etp / tp rows per expert rank, after the etp all-gather") {
  // T = 1000 tokens on a rank; sequence parallelism leaves ceil(T / tp) of them on each rank.
  // etp 1 < ep: T / tp = 250, the same as torchtitan's rule.
  CHECK(RoutedTokens(1000, 4, 8, 1, Convention::kMegatron) == 250);
  // ep 1, tp 4, etp 1: T / tp = 250 (torchtitan's rule gives 1000).
  CHECK(RoutedTokens(1000, 4, 1, 1, Convention::kMegatron) == 250);
  // ep 1, etp = tp = 4: 250 x 4 = 1000.
  CHECK(RoutedTokens(1000, 4, 1, 4, Convention::kMegatron) == 1000);
  // 1 < etp < tp: tp 4, etp 2: 250 x 2 = 500 (torchtitan's rule gives 1000).
  CHECK(RoutedTokens(1000, 4, 8, 2, Convention::kMegatron) == 500);
  // etp > tp: tp 1, etp 2: 1000 x 2 = 2000 (torchtitan's rule gives 1000).
  CHECK(RoutedTokens(1000, 1, 4, 2, Convention::kMegatron) == 2000);
  // The rank dispatches its own ceil(T / tp) tokens in every case.
  CHECK(dockyard::DispatchTokens(1000, 1, 4, 2, Convention::kMegatron) == 1000);
  CHECK(dockyard::DispatchTokens(1001, 4, 8, 2, Convention::kMegatron) == 251);
}

TEST_CASE("ComputeWorkload under megatron: routed rows, dispatched tokens and expert F") {
  // Tiny Mixtral (top_k 2, moe_intermediate_size 32), T = 16.
  // world 4, tp 1, ep 2, etp 2: T_r = 16 x 2 = 32, 64 routed rows; dispatch 16; F / etp = 16.
  auto w = WorkloadOf(4, 1, 2, 2, Convention::kMegatron);
  CHECK(w.routed_tokens == 32);
  CHECK(w.dispatch_tokens == 16);
  CHECK(w.mean_received_rows == 64);
  CHECK(w.expert_f_local == 16);
  // world 2, tp 2, ep 1, etp 1: T_r = ceil(16 / 2) = 8, 16 rows; experts not TP-sharded (F 32).
  w = WorkloadOf(2, 2, 1, 1, Convention::kMegatron);
  CHECK(w.routed_tokens == 8);
  CHECK(w.mean_received_rows == 16);
  CHECK(w.expert_f_local == 32);
  // The same degrees under torchtitan (before PR #4794: ep 1 < tp 2): EP off, experts TP-sharded over tp: T_r = 16, F 16.
  w = WorkloadOf(2, 2, 1, 1, Convention::kTorchtitan2026_03);
  CHECK(w.routed_tokens == 16);
  CHECK(w.expert_f_local == 16);
}

TEST_CASE("Megatron's expert-TP all-gather is in the traffic; the EP all-to-all carries the rank's own rows") {
  dockyard::ParallelDimsOptions o;
  o.world_size = 4;
  o.ep = 2;
  o.etp = 2;
  o.convention = Convention::kMegatron;
  dockyard::TrainingConfig t;
  t.seq_len = 16;
  const auto r = dockyard::ComputeComm(dockyard::BuildPlan(dockyard::testing::TinyMixtral(), o, t), 0);
  int64_t gather = -1, dispatch = -1, gather_calls = 0;
  for (const auto& e : r.entries) {
    if (e.purpose == "etp_dispatch_all_gather") {
      gather = e.bytes_per_call;
      gather_calls = e.calls;
      CHECK(e.group_size == 2);
      CHECK(e.axis == "etp");
    }
    if (e.purpose == "ep_dispatch" && e.phase == "forward") dispatch = e.bytes_per_call;
  }
  // Dispatch: 16 tokens x top_k 2 x hidden 64 x 2 B = 4096; the etp all-gather output is twice
  // that (T_r = 32: 32 x 2 x 64 x 2 = 8192), once per MoE layer (2) and micro-batch (1).
  CHECK(dispatch == 4096);
  CHECK(gather == 8192);
  CHECK(gather_calls == 2);
}
