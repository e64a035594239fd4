// Memory per rank: the public cross-check derived by hand, and one test per rule that public
// estimators get wrong (issue "Per-rank memory, communication volumes and the refit map").
#include "planner/accounting/memory.h"

#include <cmath>

#include <doctest/doctest.h>

#include "planner/base/error.h"
#include "planner/model/model_file.h"
#include "planner/model/pipeline_schedule.h"
#include "tests/test_models.h"

using dockyard::BuildPlan;
using dockyard::DpSharding;
using dockyard::ParallelDimsOptions;
using dockyard::Plan;
using dockyard::TrainingConfig;

namespace {

ParallelDimsOptions Dims(int64_t world, int64_t tp = 1, int64_t ep = 1, int64_t etp = 1, int64_t pp = 1) {
  ParallelDimsOptions o;
  o.world_size = world;
  o.tp = tp;
  o.ep = ep;
  o.etp = etp;
  o.pp = pp;
  // ep < tp and etp = tp: torchtitan before PR #3167 / #4794 (torchtitan as it is refuses them).
  o.convention = dockyard::Convention::kTorchtitan2026_03;
  return o;
}

TrainingConfig Train(DpSharding s) {
  TrainingConfig t;
  t.dp_sharding = s;
  return t;
}

int64_t Static(const dockyard::MemoryBreakdown& m) {
  return m.params_bytes + m.grads_bytes + m.optimizer_bytes;
}

}  // namespace

TEST_CASE("Qwen3-30B-A3B on 8 GPUs, EP 8, distributed optimizer: 71.51 GiB of weights, grads and optimizer") {
  // Published cross-check (public estimators agree within 0.2%): TP1 PP1 EP8, DP8, EDP1, bf16
  // params, fp32 grads, Adam with the distributed optimizer: ~71.51 GiB per GPU.
  // Routed experts: 48 layers x 128 x 3 x 2048 x 768 = 28,991,029,248 elements; per rank / ep 8 =
  //   3,623,878,656, each 2 (bf16) + 4 (fp32 grad) + 12 / EDP 1 (fp32 master + 2 moments) = 18 bytes
  //   -> 65,229,815,808 bytes.
  // Everything else: 30,532,122,624 - 28,991,029,248 = 1,541,093,376 elements in full on each
  //   rank: 6 bytes -> 9,246,560,256, plus 12 bytes over DP 8 -> 192,636,672 x 12 = 2,311,640,064.
  // Total 76,788,016,128 bytes = 71.514 GiB.
  Plan plan = BuildPlan(dockyard::LoadModel("testdata/hf/qwen3-30b-a3b.json"), Dims(8, 1, 8), Train(DpSharding::kZero1));
  auto m = dockyard::StaticMemoryOnRank(plan, 0);
  CHECK(Static(m) == 76788016128);
  CHECK(Static(m) / 1073741824.0 == doctest::Approx(71.51).epsilon(0.0005));
  CHECK(m.params_by_role["routed_experts"] == 3623878656LL * 2);
}

TEST_CASE("Qwen3-30B-A3B on 64 GPUs, EP 8, distributed optimizer: 34.19 GiB") {
  // DP 64, EDP 8. Experts per rank 3,623,878,656 x 6 = 21,743,271,936 + 452,984,832 (/ EDP 8) x 12
  //   = 5,435,817,984 -> 27,179,089,920. Non-expert 9,246,560,256 + 24,079,584 (/ DP 64) x 12
  //   = 288,955,008 -> 9,535,515,264. Total 36,714,605,184 bytes = 34.193 GiB.
  Plan plan = BuildPlan(dockyard::LoadModel("testdata/hf/qwen3-30b-a3b.json"), Dims(64, 1, 8), Train(DpSharding::kZero1));
  auto m = dockyard::StaticMemoryOnRank(plan, 0);
  CHECK(Static(m) == 36714605184);
  CHECK(Static(m) / 1073741824.0 == doctest::Approx(34.19).epsilon(0.0005));
}

TEST_CASE("Dense and shared-expert parameters are divided by TP") {
  auto model = dockyard::testing::TinyMixtral();
  model.family = "qwen2_moe";
  model.moe.num_shared_experts = 1;
  model.moe.shared_expert_intermediate_size = 48;
  Plan plan = BuildPlan(model, Dims(2, 2), Train(DpSharding::kDdp));
  auto m = dockyard::StaticMemoryOnRank(plan, 0);
  // Shared expert per layer: 3 x 48 x 64 = 9216 elements, / tp 2 = 4608, x 2 layers x 2 bytes.
  CHECK(m.params_by_role["shared_experts"] == 4608 * 2 * 2);
  // Attention per layer: q 4096 + k 2048 + v 2048 + o 4096 = 12288, / tp 2 = 6144, x 2 layers x 2 bytes.
  CHECK(m.params_by_role["attention"] == 6144 * 2 * 2);
}

TEST_CASE("Norms and the router are counted in full on every rank, whatever the TP degree") {
  Plan plan = BuildPlan(dockyard::testing::TinyMixtral(), Dims(2, 2), Train(DpSharding::kZero1));
  auto m = dockyard::StaticMemoryOnRank(plan, 1);
  // Norms: 2 layers x 2 x 64 + final 64 = 320 elements; router: 2 x 8 x 64 = 1024; bf16.
  CHECK(m.params_by_role["norm"] == 320 * 2);
  CHECK(m.params_by_role["router"] == 1024 * 2);
}

TEST_CASE("Routed experts are divided by EP x ETP and then by their FSDP axis") {
  // world 8, tp 2, ep 2, etp 2: efsdp = 4*2 / (2*2) = 2. Experts 2 layers x 49152 elements
  // = 98304, / (ep 2 x etp 2 x efsdp 2) = 12288 per rank; FSDP keeps them in fp32.
  Plan plan = BuildPlan(dockyard::testing::TinyMixtral(), Dims(8, 2, 2, 2), Train(DpSharding::kFsdp));
  auto m = dockyard::StaticMemoryOnRank(plan, 5);
  CHECK(m.params_by_role["routed_experts"] == 12288 * 4);
  CHECK(m.optimizer_by_role["routed_experts"] == 12288 * 8);  // two fp32 moments, sharded alike
}

TEST_CASE("Optimizer state is sharded over the axis that shards that parameter") {
  // ZeRO-1, world 8, ep 4: dense optimizer over dp_shard 8, experts over efsdp = 8/4 = 2.
  Plan plan = BuildPlan(dockyard::testing::TinyMixtral(), Dims(8, 1, 4), Train(DpSharding::kZero1));
  auto m = dockyard::StaticMemoryOnRank(plan, 0);
  // Experts on a rank: 98304 / ep 4 = 24576 elements; optimizer 12 bytes / efsdp 2.
  CHECK(m.optimizer_by_role["routed_experts"] == 24576 / 2 * 12);
  // Router 1024 elements in full; optimizer over dp_shard 8.
  CHECK(m.optimizer_by_role["router"] == 1024 / 8 * 12);
}

TEST_CASE("MoE activations are not divided by EP") {
  TrainingConfig t = Train(DpSharding::kFsdp);
  t.seq_len = 16;
  Plan one = BuildPlan(dockyard::testing::TinyMixtral(), Dims(8, 1, 1), t);
  Plan eight = BuildPlan(dockyard::testing::TinyMixtral(), Dims(8, 1, 8), t);
  auto w1 = dockyard::ComputeWorkload(one);
  auto a1 = dockyard::ActivationBytesPerMicrobatch(one, w1, 0);
  auto a8 = dockyard::ActivationBytesPerMicrobatch(eight, dockyard::ComputeWorkload(eight), 0);
  // Per layer, bf16: received rows R = 16 tokens x top_k 2 = 32; fc1's input R x h = 2048 and
  // torchtitan's eager SwiGLU 4 x R x F = 4096 elements x 2 B, the fp32 scored copy of the
  // T x k x h = 2048 combined rows x 4 B -> 12288 + 8192 = 20480 bytes; 2 layers.
  CHECK(a1["routed_experts"] == 2 * 20480);
  CHECK(a8["routed_experts"] == a1["routed_experts"]);
}

TEST_CASE("One MoE layer's saved tensors by framework release, by hand") {
  // Tiny Mixtral, T = 16 tokens, h 64, F 32, top_k 2, tp 1: R = 32 received rows, bf16.
  TrainingConfig t = Train(DpSharding::kZero1);
  t.seq_len = 16;
  ParallelDimsOptions d = Dims(1);
  d.convention = dockyard::Convention::kMegatron;
  auto routed = [&](const TrainingConfig& tc, const dockyard::RecomputeSet& rs) {
    const Plan plan = BuildPlan(dockyard::testing::TinyMixtral(), d, tc);
    return dockyard::LayerActivations(plan.model, rs, dockyard::ComputeWorkload(plan), true).routed_experts;
  };
  const dockyard::RecomputeSet none;
  dockyard::RecomputeSet moe_act;
  moe_act.moe_act = true;
  // Megatron-Core >= 0.13 (current): fc1's input 32 x 64 x 2 = 4096 B, the weighted SwiGLU's
  // input (fc1's output, gate and up) 2 x 32 x 32 x 2 = 4096 B, fc2's input 32 x 32 x 2 = 2048 B,
  // the probabilities 32 x 4 B = 128 B: 10368 B. No fc2 output, no combined rows.
  CHECK(routed(t, none) == 4096 + 4096 + 2048 + 128);
  // moe_act recomputes the activation: fc2's input goes, its input (fc1's output) stays: 8320 B.
  CHECK(routed(t, moe_act) == 4096 + 4096 + 128);
  // Megatron-Core 0.12: the same SwiGLU, and the unpermute keeps the T x k = 32 combined rows
  // (32 x 64 x 2 = 4096 B) with their probabilities (128 B): 14464 B.
  TrainingConfig old = t;
  old.run.megatron_core_version = "0.12.1";
  CHECK(routed(old, none) == 4096 + 4096 + 2048 + 4096 + 128);
  old.run.megatron_core_version = "0.13";
  CHECK(routed(old, none) == 10368);
  // torchtitan: eager SwiGLU 4 x 32 x 32 x 2 = 8192 B, and the combine's fp32 scored copy of the
  // 32 combined rows 32 x 64 x 4 = 8192 B: 4096 + 8192 + 8192 = 20480 B.
  d.convention = dockyard::Convention::kTorchtitan;
  TrainingConfig tt = Train(DpSharding::kFsdp);
  tt.seq_len = 16;
  CHECK(routed(tt, none) == 20480);
}

TEST_CASE("Interleaved stages hold their activations by chunk, not whole stages rounded up") {
  // One MoE layer table of 1000 B (attention) and a stage of 4 MoE layers over vpp 4 chunks (one
  // layer a chunk) with 39 chunk forwards in flight (pp 8, stage 0, pipeline_schedule.h
  // InFlightChunks): 4 layers x 1000 B x 39 / 4 = 39,000 B, not ceil(39 / 4) = 10 stages' 40,000.
  dockyard::LayerActivationBytes moe;
  moe.moe_layer = true;
  moe.attention = 1000;
  const auto table = dockyard::ActivationTable(moe, dockyard::LayerActivationBytes{});
  dockyard::StageLayers st;
  st.moe_layers = 4;
  st.in_flight = 39;
  st.chunks_per_microbatch = 4;
  CHECK(dockyard::StageActivations(table, st, dockyard::Recompute::kNone, 64, 0).total == 39000);
  // The embedding output lives on chunk 0 only: 15 of the 39 forwards run chunk 0
  // (pipeline_schedule.h FirstChunkInFlight), 15 x 64 B.
  st.first_stage = true;
  st.pp = 8;
  CHECK(dockyard::StageActivations(table, st, dockyard::Recompute::kNone, 64, 0).total == 39000 + 15 * 64);
  // EP overlap's combined step: one layer more (1000 B).
  st.first_stage = false;
  st.extra_layers = 1;
  CHECK(dockyard::StageActivations(table, st, dockyard::Recompute::kNone, 64, 0).total == 39000 + 1000);
  CHECK(dockyard::StageActivationsTotal(table, st, dockyard::Recompute::kNone, 64, 0) == 39000 + 1000);
  st.extra_layers = 0;
  // Full recomputation: 4 layer inputs of 64 B for each of 39 / 4 micro-batches, one layer rebuilt.
  st.first_stage = false;
  CHECK(dockyard::StageActivations(table, st, dockyard::Recompute::kFull, 64, 0).total == 4 * 64 * 39 / 4 + 1000);
  CHECK(dockyard::StageActivationsTotal(table, st, dockyard::Recompute::kFull, 64, 0) == 4 * 64 * 39 / 4 + 1000);
}

TEST_CASE("Activations of the tiny model by hand") {
  TrainingConfig t = Train(DpSharding::kFsdp);
  t.seq_len = 16;
  Plan plan = BuildPlan(dockyard::testing::TinyMixtral(), Dims(1), t);
  auto mem = dockyard::ComputeMemory(plan);
  const auto& acts = mem.stages[0].worst.activations_by_role;
  // Per layer (T = 16, h = 64, bf16): attention: norm in + out 2048, q/k/v 16 x 128 = 2048, core
  // out 1024 -> 5120 elements = 10240 bytes + logsumexp 16 x 4 heads x 4 bytes = 256 -> 10496.
  CHECK(acts.at("attention") == 2 * 10496);
  CHECK(acts.at("norm") == 2 * 4096);            // post-attention norm in + out, 2048 elements
  CHECK(acts.at("router") == 2 * (1024 + 384));  // 16 x 8 x 8 bytes + 16 x 2 x 12 bytes
  CHECK(acts.at("embedding") == 2048);           // 16 x 64 x 2
  CHECK(acts.at("logits") == 16 * 1000 * 4);     // fp32 logits
  CHECK(mem.stages[0].worst.activations_bytes == 2 * 10496 + 2 * 4096 + 2 * 1408 + 2 * 20480 + 2048 + 64000);
}

TEST_CASE("Selective recomputation drops norm outputs and the elementwise MLP tensors") {
  dockyard::TrainingConfig t = Train(DpSharding::kFsdp);
  t.seq_len = 16;
  t.recompute = dockyard::Recompute::kSelective;
  t.recompute_modules = {"layernorm", "moe_act"};  // a bare selective is torchtitan's selective_ac_option 2 (convention.h)
  Plan plan = BuildPlan(dockyard::testing::TinyMixtral(), Dims(1), t);
  auto acts = dockyard::ComputeMemory(plan).stages[0].worst.activations_by_role;
  // Per layer: attention keeps the norm input only: 1024 + 2048 + 1024 = 4096 elements = 8192
  // bytes + logsumexp 256; norm group: input only, 1024 elements = 2048 bytes; routed experts:
  // fc1's input 32 x 64 + gate and up 2 x 32 x 32 = 4096 elements = 8192 bytes + the fp32 scored
  // copy 32 x 64 x 4 = 8192 bytes = 16384 bytes.
  CHECK(acts.at("attention") == 2 * (8192 + 256));
  CHECK(acts.at("norm") == 2 * 2048);
  CHECK(acts.at("routed_experts") == 2 * 16384);
}

TEST_CASE("Full recomputation keeps layer inputs and rebuilds one layer") {
  TrainingConfig t = Train(DpSharding::kFsdp);
  t.seq_len = 16;
  Plan none = BuildPlan(dockyard::testing::TinyMixtral(), Dims(1), t);
  t.recompute = dockyard::Recompute::kFull;
  Plan full = BuildPlan(dockyard::testing::TinyMixtral(), Dims(1), t);
  auto a = dockyard::ComputeMemory(none).stages[0].worst.activations_bytes;
  auto f = dockyard::ComputeMemory(full);
  // Full: 2 layer inputs (2048 bytes each) + one layer rebuilt (36480) + embedding + logits.
  CHECK(f.stages[0].worst.activations_bytes == 2 * 2048 + 36480 + 2048 + 64000);
  CHECK(f.stages[0].worst.activations_bytes < a);
}

TEST_CASE("All-to-all buffers are sized for the routing imbalance, not the mean") {
  TrainingConfig t = Train(DpSharding::kFsdp);
  t.seq_len = 16;
  t.imbalance = 2.0;
  Plan plan = BuildPlan(dockyard::testing::TinyMixtral(), Dims(4, 1, 4), t);
  auto w = dockyard::ComputeWorkload(plan);
  CHECK(w.mean_received_rows == 32);  // 16 tokens x top_k 2
  CHECK(w.received_rows == 64);       // x imbalance 2
  auto mem = dockyard::ComputeMemory(plan);
  // send 32 rows + receive 64 rows, x h 64 x 2 bytes.
  CHECK(mem.stages[0].worst.comm_buffers_by_use.at("all_to_all") == (32 + 64) * 64 * 2);
}

TEST_CASE("allgather dispatcher buffers: the gathered ep x T x h tokens and the reduce-scatter input of the same size") {
  TrainingConfig t = Train(DpSharding::kFsdp);
  t.seq_len = 16;
  t.dispatcher = dockyard::Dispatcher::kAllGather;
  Plan plan = BuildPlan(dockyard::testing::TinyMixtral(), Dims(4, 1, 4), t);
  auto mem = dockyard::ComputeMemory(plan);
  const auto& by_use = mem.stages[0].worst.comm_buffers_by_use;
  // ep 4 x 16 tokens x h 64 x 2 bytes = 8192 B gathered, and 8192 B of reduce-scatter input,
  // in place of the all-to-all send and receive rows.
  REQUIRE(by_use.count("allgather_dispatch") == 1);
  CHECK(by_use.at("allgather_dispatch") == 2 * 4 * 16 * 64 * 2);
  CHECK(by_use.count("all_to_all") == 0);
  // all_to_all's buffers are unchanged: send 32 rows + receive 32 rows (imbalance 1) x h 64 x 2 B.
  t.dispatcher = dockyard::Dispatcher::kAllToAll;
  CHECK(dockyard::ComputeMemory(BuildPlan(dockyard::testing::TinyMixtral(), Dims(4, 1, 4), t))
            .stages[0]
            .worst.comm_buffers_by_use.at("all_to_all") == (32 + 32) * 64 * 2);
}

TEST_CASE("1F1B keeps pp - s micro-batches of activations on stage s") {
  TrainingConfig t = Train(DpSharding::kFsdp);
  t.num_microbatches = 8;
  Plan plan = BuildPlan(dockyard::testing::TinyMixtral(), Dims(2, 1, 1, 1, 2), t);
  auto mem = dockyard::ComputeMemory(plan);
  CHECK(mem.stages[0].in_flight_microbatches == 2);
  CHECK(mem.stages[1].in_flight_microbatches == 1);
}

TEST_CASE("A budget lists the stages' worst ranks that exceed it") {
  TrainingConfig t = Train(DpSharding::kFsdp);
  dockyard::Machine machine;
  machine.gpu_memory_gib = 1e-6;  // about 1 KiB: everything exceeds it
  Plan plan = BuildPlan(dockyard::testing::TinyMixtral(), Dims(2, 1, 1, 1, 2), t, machine);
  auto mem = dockyard::ComputeMemory(plan);
  CHECK(mem.over_budget_ranks.size() == 2);
  machine.gpu_memory_gib = 1000;
  CHECK(dockyard::ComputeMemory(BuildPlan(dockyard::testing::TinyMixtral(), Dims(2, 1, 1, 1, 2), t, machine)).over_budget_ranks.empty());
}

TEST_CASE("The budget rule subtracts the reserve: usable = budget - reserve, headroom = budget - reserve - peak") {
  // 10 GiB budget, 2 GiB reserve: 8 GiB = 8 x 2^30 = 8589934592 B usable.
  CHECK(dockyard::UsableBudgetBytes(10, 2) == 8589934592.0);
  CHECK_FALSE(dockyard::OverBudget(8589934592.0, 10, 2));  // exactly the usable bytes fits
  CHECK(dockyard::OverBudget(8589934593.0, 10, 2));        // one byte more does not
  CHECK_FALSE(dockyard::OverBudget(1e18, 0, 2));           // no budget: nothing is over
  CHECK(dockyard::OverBudget(1, 1, 1));                    // a reserve that takes the whole budget leaves nothing
  // headroom of a 7 GiB peak: 10 - 2 - 7 = 1 GiB = 1073741824 B.
  CHECK(dockyard::HeadroomBytes(7 * 1073741824LL, 10, 2) == 1073741824LL);
}

TEST_CASE("ComputeMemory applies the reserve: a plan that fits the budget is over it once the reserve is held back") {
  TrainingConfig t = Train(DpSharding::kFsdp);
  Plan plan = BuildPlan(dockyard::testing::TinyMixtral(), Dims(2, 1, 1, 1, 2), t);
  const int64_t peak = dockyard::ComputeMemory(plan).worst_peak_bytes;
  // A budget of exactly the peak plus 1 MiB fits with no reserve and is over with a 2 MiB reserve.
  dockyard::Machine machine;
  machine.gpu_memory_gib = static_cast<double>(peak + (1 << 20)) / 1073741824.0;
  auto fits = dockyard::ComputeMemory(BuildPlan(dockyard::testing::TinyMixtral(), Dims(2, 1, 1, 1, 2), t, machine));
  CHECK(fits.over_budget_ranks.empty());
  t.memory_reserve_gib = 2.0 / 1024;  // 2 MiB
  auto over = dockyard::ComputeMemory(BuildPlan(dockyard::testing::TinyMixtral(), Dims(2, 1, 1, 1, 2), t, machine));
  CHECK(over.reserve_gib == 2.0 / 1024);
  CHECK(!over.over_budget_ranks.empty());
  CHECK(over.over_budget_ranks.front() == over.worst_rank);
}

TEST_CASE("A reserve at or above the budget, negative or not finite is invalid input, not a plan over budget") {
  // 80 GiB budget: a reserve of 79.5 leaves 0.5 GiB; 80 leaves 0 and 90 leaves -10: both refused.
  CHECK_NOTHROW(dockyard::ValidateMemoryReserve(80, 79.5, "--gpu-memory-gib", "--memory-reserve-gib"));
  CHECK_THROWS_WITH_AS(dockyard::ValidateMemoryReserve(80, 80, "--gpu-memory-gib", "--memory-reserve-gib"),
                       "--memory-reserve-gib (80 GiB) must be below the memory budget --gpu-memory-gib (80 GiB): a rank may use "
                       "budget - reserve GiB, and a reserve at or above the budget leaves none (every rank would be over it)",
                       dockyard::Error);
  CHECK_THROWS_WITH_AS(dockyard::ValidateMemoryReserve(80, 90, "--gpu-memory-gib", "--memory-reserve-gib"),
                       doctest::Contains("--memory-reserve-gib (90 GiB) must be below the memory budget --gpu-memory-gib (80 GiB)"),
                       dockyard::Error);
  // No budget: any finite reserve >= 0 is allowed (nothing is compared with it).
  CHECK_NOTHROW(dockyard::ValidateMemoryReserve(0, 1e6, "b", "r"));
  CHECK_THROWS_WITH_AS(dockyard::ValidateMemoryReserve(80, -1, "b", "r"), doctest::Contains("r (-1): the memory reserve must be"),
                       dockyard::Error);
  CHECK_THROWS_WITH_AS(dockyard::ValidateMemoryReserve(80, std::nan(""), "b", "r"), doctest::Contains("finite"), dockyard::Error);
  CHECK_THROWS_WITH_AS(dockyard::ValidateMemoryReserve(0, HUGE_VAL, "b", "r"), doctest::Contains("finite"), dockyard::Error);
  // ComputeMemory applies the rule to the training fields.
  TrainingConfig t = Train(DpSharding::kFsdp);
  dockyard::Machine machine;
  machine.gpu_memory_gib = 4;
  t.memory_reserve_gib = 4;
  CHECK_THROWS_WITH_AS(dockyard::ComputeMemory(BuildPlan(dockyard::testing::TinyMixtral(), Dims(2, 1, 1, 1, 2), t, machine)),
                       doctest::Contains("memory_reserve_gib (4 GiB) must be below the memory budget gpu_memory_gib (4 GiB)"),
                       dockyard::Error);
}

TEST_CASE("The first rank of each stage is a worst rank (chunk 0 is never smaller)") {
  // Uneven FSDP shards: world 3 over the tiny model; compare every rank's static memory.
  Plan plan = BuildPlan(dockyard::testing::TinyMixtral(), Dims(3), Train(DpSharding::kFsdp));
  const int64_t first = Static(dockyard::StaticMemoryOnRank(plan, 0));
  // FSDP2 pads every shard to ceil(n / 3) (embedding 334 rows on all 3 ranks, not 334, 334, 332):
  // every rank holds the same bytes.
  for (int64_t r = 1; r < 3; ++r) CHECK(Static(dockyard::StaticMemoryOnRank(plan, r)) == first);
  CHECK(dockyard::ComputeMemory(plan).worst_rank == 0);
}

TEST_CASE("FSDP2 all-gather buffers hold the padded unit") {
  // world 3, FSDP: the largest unit is a decoder layer. Padded to multiples of 3 rows on dim 0:
  // q [64,64] -> 66x64 = 4224, k and v [32,64] -> 33x64 = 2112 each, o 4224, two norms [64] ->
  // 66 each, router [8,64] -> 9x64 = 576, experts gate_up [8,64,64] -> 9x4096 = 36864, down
  // [8,64,32] -> 9x2048 = 18432: 68676 elements (62080 unpadded). The root (final norm 66 +
  // lm_head 1002x64 = 64128) is 64194. Two bf16 all-gather buffers: 2 x 68676 x 2 = 274704 bytes.
  Plan plan = BuildPlan(dockyard::testing::TinyMixtral(), Dims(3), Train(DpSharding::kFsdp));
  auto mem = dockyard::ComputeMemory(plan);
  CHECK(mem.stages[0].worst.comm_buffers_by_use.at("fsdp_all_gather") == 274704);
  // One reduce-scatter buffer in the grad dtype (fp32 by default): 68676 x 4 = 274704.
  CHECK(mem.stages[0].worst.comm_buffers_by_use.at("fsdp_reduce_scatter") == 274704);
}

TEST_CASE("A reserve given with no budget is refused: nothing would hold it back") {
  CHECK_NOTHROW(dockyard::RequireBudgetForReserve(80, 5, "--memory-reserve-gib", "simulate"));
  CHECK_THROWS_WITH_AS(dockyard::RequireBudgetForReserve(0, 5, "--memory-reserve-gib", "simulate"),
                       "--memory-reserve-gib 5: a reserve is held back from a memory budget, and simulate has none: give "
                       "--gpu-memory-gib G (a rank then fits at peak <= G - 5)",
                       dockyard::Error);
}

TEST_CASE("Stage totals without the breakdown equal the breakdown's totals (the search's hot path)") {
  // A hand table: MoE layer 100 attention + 300 routed-expert bytes = 400; dense layer 100 + 50
  // dense-MLP bytes = 150. Stage 0 of 3 MoE and 2 dense layers, 4 micro-batches in flight, input
  // 10 bytes per layer, logits 7:
  //  - no recompute: (3 x 400 + 2 x 150) x 4 + embedding 10 x 4 = 6000 + 40 = 6040;
  //  - full: checkpoints 10 x 5 x 4 = 200, one layer rebuilt (the MoE, 400), embedding 40 = 640;
  //  - last stage, full: 200 + 400 + logits 7 = 607.
  dockyard::LayerActivationBytes moe, dense;
  moe.moe_layer = true;
  moe.attention = 100;
  moe.routed_experts = 300;
  dense.attention = 100;
  dense.dense_mlp = 50;
  const dockyard::LayerActivationTable table = dockyard::ActivationTable(moe, dense);
  dockyard::StageLayers st;
  st.moe_layers = 3;
  st.dense_layers = 2;
  st.in_flight = 4;
  st.first_stage = true;
  const auto none = dockyard::StageActivations(table, st, dockyard::Recompute::kNone, 10, 7);
  CHECK(none.total == 6040);
  CHECK(dockyard::StageActivationsTotal(table, st, dockyard::Recompute::kNone, 10, 7) == 6040);
  CHECK(dockyard::StageActivations(table, st, dockyard::Recompute::kNone, 10, 7, /*by_kind=*/false).total == 6040);
  CHECK(dockyard::StageActivationsTotal(table, st, dockyard::Recompute::kFull, 10, 7) == 640);
  CHECK(dockyard::StageActivations(table, st, dockyard::Recompute::kFull, 10, 7).total == 640);
  st.first_stage = false;
  st.last_stage = true;
  CHECK(dockyard::StageActivationsTotal(table, st, dockyard::Recompute::kFull, 10, 7) == 607);
  CHECK(dockyard::StageActivations(table, st, dockyard::Recompute::kFull, 10, 7).total == 607);

  // Buffers of a real plan's stage: the total alone equals the breakdown's.
  TrainingConfig t = Train(DpSharding::kFsdp);
  t.seq_len = 16;
  const Plan plan = BuildPlan(dockyard::testing::TinyMixtral(), Dims(8, 1, 8), t);
  const dockyard::Workload w = dockyard::ComputeWorkload(plan);
  const dockyard::StageBufferBytes b = dockyard::StageBuffers(1000, true, w, plan.dims, plan.training, plan.machine,
                                                              dockyard::TrainingBytesOf(plan.training), 1, plan.model.hidden_size, 5000);
  // FSDP's two all-gather buffers and one reduce-scatter buffer of the 1000-element unit, at least.
  const dockyard::TrainingBytes tb = dockyard::TrainingBytesOf(plan.training);
  CHECK(b.total >= 1000 * tb.param * 2 + 1000 * tb.grad);
  CHECK(dockyard::StageBuffersTotal(1000, true, w, plan.dims, plan.training, plan.machine, dockyard::TrainingBytesOf(plan.training), 1,
                                    plan.model.hidden_size, 5000) == b.total);
}

TEST_CASE("The logits at the loss by framework and cross-entropy, by hand") {
  // Tiny Mixtral, vocab 1000, T = 16 tokens, tp 1, bf16. Megatron pads the vocabulary to a multiple
  // of 128 (vocab_padding.h): 1024 logits per token.
  ParallelDimsOptions d = Dims(1);
  d.convention = dockyard::Convention::kMegatron;
  auto logits = [&](const TrainingConfig& tc) {
    const Plan plan = BuildPlan(dockyard::testing::TinyMixtral(), d, tc);
    return dockyard::LossLogitsBytes(plan.model, dockyard::ComputeWorkload(plan), 1, 0);
  };
  TrainingConfig t = Train(DpSharding::kZero1);
  t.seq_len = 16;
  // Unfused (and Megatron's native fused loss): the fp32 softmax beside the bf16 logits,
  // 16 x 1024 x (4 + 2) = 98,304 B.
  CHECK(logits(t) == 16 * 1024 * 6);
  t.run.fused_cross_entropy = true;
  CHECK(logits(t) == 98304);
  // TransformerEngine's fused loss (Megatron-Core 0.12 to 0.18): the bf16 logits alone, holding
  // the gradient, 16 x 1024 x 2 = 32,768 B.
  t.run.cross_entropy_fusion_impl = "te";
  t.run.megatron_core_version = "0.15";
  CHECK(logits(t) == 32768);
  // Named only with the fusion on: unfused, the impl is not read (as Megatron).
  t.run.fused_cross_entropy = false;
  CHECK(logits(t) == 98304);
  // torchtitan: the fp32 log-softmax, 16 x 1000 x 4 = 64,000 B (no padding).
  d.convention = dockyard::Convention::kTorchtitan;
  TrainingConfig tt = Train(DpSharding::kFsdp);
  tt.seq_len = 16;
  CHECK(logits(tt) == 16 * 1000 * 4);
}

TEST_CASE("Interleaved chunks of unequal size: a layout's chunks counted as they are in flight, by hand") {
  // Tiny Mixtral with 6 MoE layers, Megatron, pp 2, vpp 2, 8 micro-batches. The layout
  // "Et*2|t*2|t|tL" puts 2 layers in each rank's chunk 0 and 1 in its chunk 1; the split given as
  // --pp-layer-split 3,3 is placed the same way (megatron_split.h InterleavedLayerSplit: 3 / 2,
  // the first chunk one more).
  dockyard::ModelSpec m = dockyard::testing::TinyMixtral();
  m.num_hidden_layers = 6;
  m.moe_layers.assign(6, true);
  ParallelDimsOptions d = Dims(2, 1, 1, 1, 2);
  d.convention = dockyard::Convention::kMegatron;
  TrainingConfig t = Train(DpSharding::kZero1);
  t.seq_len = 16;
  t.num_microbatches = 8;
  t.run.vpp = 2;
  // Without a split flag Megatron refuses 3 layers per rank over 2 chunks; it runs the layout
  // above (megatron_split.h), and the even split is planned as that layout.
  const Plan even = BuildPlan(m, d, t);
  t.pp_layer_split = {3, 3};
  const Plan split = BuildPlan(m, d, t);
  t.pp_layer_split.clear();
  t.run.pipeline_layout = "Et*2|t*2|t|tL";
  const Plan layout = BuildPlan(m, d, t);
  CHECK(even.layer_chunk == layout.layer_chunk);
  CHECK(split.layer_chunk == layout.layer_chunk);
  CHECK(even.layer_chunk == std::vector<int64_t>{0, 0, 0, 0, 1, 1});  // layers 0-1 rank 0, 2-3 rank 1: chunk 0; 4 and 5: chunk 1
  CHECK(split.layer_stage == std::vector<int64_t>{0, 0, 1, 1, 0, 1});
  auto layers = [](const Plan& p, int64_t stage) {
    double sum = 0;
    const auto report = dockyard::ComputeMemory(p);  // kept: the loop reads into it
    for (const auto& [role, bytes] : report.stages[stage].worst.activations_by_role) {
      if (role != "embedding" && role != "logits" && role != "norm") sum += static_cast<double>(bytes);
    }
    return sum;
  };
  // Rank 1: warm-up 2 (2 - 1 - 1) + (2 - 1) x 2 = 2, so 3 chunk forwards in flight: forwards 0, 1
  // on chunk 0 and 2 on chunk 1 (pipeline_schedule.h ChunkInFlight): 2 x 2 + 1 x 1 = 5 layer
  // copies (the mean would be 3 x 3 / 2 = 4.5).
  // Rank 0: 2 + 2 + 1 = 5 chunks: 3 on chunk 0, 2 on chunk 1: 3 x 2 + 2 x 1 = 8 (mean 3 x 5 / 2 = 7.5).
  CHECK(layers(layout, 1) / layers(layout, 0) == doctest::Approx(5.0 / 8.0));
  CHECK(layers(even, 0) == layers(layout, 0));
  CHECK(layers(even, 1) == layers(layout, 1));
  CHECK(layers(split, 0) == layers(layout, 0));
  CHECK(layers(split, 1) == layers(layout, 1));
  CHECK(dockyard::ChunkInFlight(2, 2, 3, 0) == 2);
  CHECK(dockyard::ChunkInFlight(2, 2, 3, 1) == 1);
  CHECK(dockyard::ChunkInFlight(8, 4, 25, 3) == 1);  // the rank-224 case above: 8, 8, 8 and 1
}
