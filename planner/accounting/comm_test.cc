// Communication volumes per step, by hand for small worlds.
#include "planner/accounting/comm.h"

#include <doctest/doctest.h>

#include "planner/model/model_file.h"
#include "tests/test_models.h"

using dockyard::BuildPlan;
using dockyard::CommEntry;
using dockyard::DpSharding;
using dockyard::ParallelDimsOptions;
using dockyard::TrainingConfig;

namespace {

ParallelDimsOptions Dims(int64_t world, int64_t tp = 1, int64_t ep = 1) {
  ParallelDimsOptions o;
  o.world_size = world;
  o.tp = tp;
  o.ep = ep;
  // ep < tp and etp = tp: torchtitan before PR #3167 / #4794 (torchtitan as it is refuses them).
  o.convention = dockyard::Convention::kTorchtitan2026_03;
  return o;
}

const CommEntry* Find(const dockyard::CommReport& r, const std::string& purpose, const std::string& phase = "") {
  for (const auto& e : r.entries) {
    if (e.purpose == purpose && (phase.empty() || e.phase == phase)) return &e;
  }
  return nullptr;
}
// A pointer into a temporary report would dangle (ASan: heap-use-after-free): keep the report.
const CommEntry* Find(dockyard::CommReport&& r, const std::string& purpose, const std::string& phase = "") = delete;

// Whether a report holds an entry of this purpose; takes temporaries.
bool Has(const dockyard::CommReport& r, const std::string& purpose) { return Find(r, purpose) != nullptr; }

}  // namespace

TEST_CASE("Cross-node fractions of ring and all-to-all groups") {
  std::vector<int64_t> g(16);
  for (int i = 0; i < 16; ++i) g[i] = i;
  // 16 ranks on 2 nodes of 8: the ring crosses at 7->8 and 15->0.
  CHECK(dockyard::RingCrossNodeFraction(g, 8) == doctest::Approx(2.0 / 16));
  // Rank 0 sends to 15 peers, 8 of them on the other node.
  CHECK(dockyard::AllToAllCrossNodeFraction(g, 0, 8) == doctest::Approx(8.0 / 15));
  CHECK(dockyard::RingCrossNodeFraction(g, 16) == 0.0);
}

TEST_CASE("FSDP all-gathers each layer forward and backward and reduce-scatters its grads") {
  TrainingConfig t;
  t.dp_sharding = DpSharding::kFsdp;
  t.seq_len = 16;
  auto plan = BuildPlan(dockyard::testing::TinyMixtral(), Dims(4), t);
  auto r = dockyard::ComputeComm(plan, 0);
  // Units: embed 64000, layer 0 and 1 (62080 each, experts included: ep 1), root 64 + 64000 =
  // 64064 elements -> forward all-gathers of 128000 + 124160 + 124160 + 128128 bytes (bf16).
  int64_t fwd_bytes = 0, fwd_wire = 0, calls = 0;
  for (const auto& e : r.entries) {
    if (e.purpose != "fsdp_all_gather_forward") continue;
    fwd_bytes += e.bytes_per_call * e.calls;
    fwd_wire += e.wire_bytes;
    calls += e.calls;
    CHECK(e.axis == "dp_shard*cp");
    CHECK(e.group_size == 4);
  }
  CHECK(calls == 4);
  CHECK(fwd_bytes == 128000 + 124160 + 124160 + 128128);
  CHECK(fwd_wire == fwd_bytes * 3 / 4);  // ring: (n-1)/n of the output
  const CommEntry* rs = Find(r, "fsdp_reduce_scatter_grads");
  REQUIRE(rs != nullptr);
  CHECK(rs->bytes_per_call % 4 == 0);  // fp32 grads
}

TEST_CASE("FSDP2 all-gathers padded shards: world 3 gathers 3 x ceil(n / 3) rows of every tensor") {
  TrainingConfig t;
  t.dp_sharding = DpSharding::kFsdp;
  t.seq_len = 16;
  auto plan = BuildPlan(dockyard::testing::TinyMixtral(), Dims(3), t);
  auto r = dockyard::ComputeComm(plan, 0);
  // Padded units (memory_test "FSDP2 all-gather buffers hold the padded unit"): embedding 1002 x
  // 64 = 64128, each layer 68676, root 64194 elements; bf16: 128256 + 2 x 137352 + 128388 bytes
  // (unpadded: 128000 + 2 x 124160 + 128128).
  int64_t fwd_bytes = 0;
  for (const auto& e : r.entries) {
    if (e.purpose == "fsdp_all_gather_forward") fwd_bytes += e.bytes_per_call * e.calls;
  }
  CHECK(fwd_bytes == 128256 + 2 * 137352 + 128388);
}

TEST_CASE("Megatron's embedding group all-reduces the tied embedding's gradient between the first and last stage") {
  // Tiny Mixtral with tied embeddings, world 4, pp 2, tp 2 (megatron, zero1): stage 0 holds the
  // embedding and stage 1 its lm_head copy, vocab 1000 padded by Megatron-LM to a multiple of
  // 128 x tp 2 = 1024 (vocab_padding.h), each [1024, 64] vocab-parallel over tp 2: 512 x 64 =
  // 32768 elements per rank; fp32 grads: 131072 bytes, group {r, r + 2} of 2 ranks; ring
  // all-reduce wire 2 x 131072 x 1/2 = 131072.
  auto m = dockyard::testing::TinyMixtral();
  m.tie_word_embeddings = true;
  ParallelDimsOptions o = Dims(4, 2);
  o.pp = 2;
  o.convention = dockyard::Convention::kMegatron;
  TrainingConfig t;
  t.seq_len = 16;
  const auto plan = BuildPlan(m, o, t);
  for (int64_t rank : {0, 1, 2, 3}) {
    CAPTURE(rank);
    const auto r = dockyard::ComputeComm(plan, rank);
    const CommEntry* e = Find(r, "embedding_all_reduce_grads");
    REQUIRE(e != nullptr);
    CHECK(e->bytes_per_call == 131072);
    CHECK(e->group_size == 2);
    CHECK(e->wire_bytes == 131072);
    CHECK(e->axis == "pp");
    CHECK(e->phase == "step");
  }
  // Untied: no embedding group traffic.
  m.tie_word_embeddings = false;
  CHECK_FALSE(Has(dockyard::ComputeComm(BuildPlan(m, o, t), 0), "embedding_all_reduce_grads"));
}

TEST_CASE("Megatron's embedding group all-reduces the word-embedding gradient when MTP keeps a copy on the last stage") {
  // finalize_model_grads._get_shared_word_embedding_weight: "share_embeddings_and_output_weights or
  // mtp_num_layers". DeepSeek-V3 (untied, vocab 129280, hidden 7168), world 256, pp 4, ep 64,
  // --mtp-layers 1, megatron: the first stage's embedding and the MTP stage's copy, tp 1: 129280 x
  // 7168 = 926,679,040 elements; fp32 main grads: 3,706,716,160 bytes (3.45 GiB) per step; group
  // {r, r + 3 x 64} (stage size 256 / 4 = 64), nodes of 8: rank 0 and 192 on different nodes, so
  // the ring all-reduce's wire 2 x 3,706,716,160 x 1/2 all crosses nodes.
  const dockyard::ModelSpec m = dockyard::LoadModel("testdata/hf/deepseek-v3.json");
  REQUIRE_FALSE(m.tie_word_embeddings);
  ParallelDimsOptions o = Dims(256, 1, 64);
  o.pp = 4;
  o.convention = dockyard::Convention::kMegatron;
  TrainingConfig t;
  t.seq_len = 16;
  t.mtp_layers = 1;
  const auto plan = BuildPlan(m, o, t);
  for (int64_t rank : {0, 192}) {
    CAPTURE(rank);
    const dockyard::CommReport report = dockyard::ComputeComm(plan, rank);
    const CommEntry* e = Find(report, "embedding_all_reduce_grads");
    REQUIRE(e != nullptr);
    CHECK(e->bytes_per_call == 3706716160);
    CHECK(e->group_size == 2);
    CHECK(e->stride == 192);
    CHECK(e->wire_bytes == 3706716160);
    CHECK(e->cross_node_bytes == 3706716160);
    CHECK(e->axis == "pp");
    CHECK(e->phase == "step");
  }
  // A middle stage holds no copy: no entry.
  CHECK_FALSE(Has(dockyard::ComputeComm(plan, 64), "embedding_all_reduce_grads"));
  // Gradients reduced in bf16 (--grad-dtype bfloat16): 926,679,040 x 2 = 1,853,358,080 bytes (1.73 GiB).
  t.grad_dtype = "bfloat16";
  const dockyard::CommReport bf16_report = dockyard::ComputeComm(BuildPlan(m, o, t), 0);
  const CommEntry* bf16 = Find(bf16_report, "embedding_all_reduce_grads");
  REQUIRE(bf16 != nullptr);
  CHECK(bf16->bytes_per_call == 1853358080);
  // Without MTP (and untied) there is no second copy; torchtitan has no embedding group.
  t.mtp_layers = 0;
  CHECK_FALSE(Has(dockyard::ComputeComm(BuildPlan(m, o, t), 0), "embedding_all_reduce_grads"));
  t.mtp_layers = 1;
  o.convention = dockyard::Convention::kTorchtitan;
  CHECK_FALSE(Has(dockyard::ComputeComm(BuildPlan(m, o, t), 0), "embedding_all_reduce_grads"));
}

TEST_CASE("EmbeddingGroupAllReduces: megatron, pp > 1, and tied embeddings or MTP") {
  ParallelDimsOptions o = Dims(4);
  o.pp = 2;
  o.convention = dockyard::Convention::kMegatron;
  const auto d = dockyard::ParallelDims::Build(o);
  CHECK(dockyard::EmbeddingGroupAllReduces(d, true, 0));
  CHECK(dockyard::EmbeddingGroupAllReduces(d, false, 1));
  CHECK_FALSE(dockyard::EmbeddingGroupAllReduces(d, false, 0));
  o.pp = 1;  // one stage: the embedding group has one rank (default_embedding_ranks)
  CHECK_FALSE(dockyard::EmbeddingGroupAllReduces(dockyard::ParallelDims::Build(o), true, 1));
  o.pp = 2;
  o.convention = dockyard::Convention::kTorchtitan;
  CHECK_FALSE(dockyard::EmbeddingGroupAllReduces(dockyard::ParallelDims::Build(o), true, 1));
}

TEST_CASE("EP dispatch and combine: T x top_k x hidden per MoE layer, forward and backward") {
  TrainingConfig t;
  t.dp_sharding = DpSharding::kFsdp;
  t.seq_len = 16;
  dockyard::Machine machine;
  machine.gpus_per_node = 2;
  auto plan = BuildPlan(dockyard::testing::TinyMixtral(), Dims(4, 1, 4), t, machine);
  auto r = dockyard::ComputeComm(plan, 0);
  const CommEntry* d = Find(r, "ep_dispatch", "forward");
  REQUIRE(d != nullptr);
  CHECK(d->calls == 2);                         // 2 MoE layers x 1 micro-batch
  CHECK(d->bytes_per_call == 16 * 2 * 64 * 2);  // 16 tokens x top_k 2 x h 64 x bf16 = 4096
  CHECK(d->wire_bytes == 2 * 4096 * 3 / 4);     // 3 of 4 destinations are other ranks
  // Ranks 0,1 on node 0 and 2,3 on node 1: 2 of rank 0's 3 peers are remote.
  CHECK(d->cross_node_bytes == d->wire_bytes * 2 / 3);
  CHECK(Find(r, "ep_combine", "backward") != nullptr);
}

TEST_CASE("EP dispatch with --fp8-dispatch: the forward dispatch sends FP8 rows, the combine and the backward BF16") {
  TrainingConfig t;
  t.dp_sharding = DpSharding::kFsdp;
  t.seq_len = 16;
  dockyard::Machine machine;
  machine.gpus_per_node = 2;
  t.fp8_dispatch = true;
  auto r = dockyard::ComputeComm(BuildPlan(dockyard::testing::TinyMixtral(), Dims(4, 1, 4), t, machine), 0);
  // 16 tokens x top_k 2 = 32 rows of DispatchRowBytes(64, 2, fp8) = 64 x 1 B + 4 B x ceil(64 / 128)
  // = 68 B: 2176 B (BF16: 32 x 128 = 4096 B).
  CHECK(Find(r, "ep_dispatch", "forward")->bytes_per_call == 32 * 68);
  CHECK(Find(r, "ep_dispatch", "forward")->wire_bytes == 2 * 2176 * 3 / 4);  // 2 calls, 3 of 4 destinations remote
  CHECK(Find(r, "ep_dispatch", "backward")->bytes_per_call == 4096);
  CHECK(Find(r, "ep_combine", "forward")->bytes_per_call == 4096);
  CHECK(Find(r, "ep_combine", "backward")->bytes_per_call == 4096);
}

TEST_CASE("Deredundency dispatcher: all-gather over oep, all-to-all over iep, reduce-scatter on combine") {
  TrainingConfig t;
  t.dp_sharding = DpSharding::kFsdp;
  t.seq_len = 16;
  dockyard::Machine machine;
  machine.gpus_per_node = 4;
  t.dispatcher = dockyard::Dispatcher::kDeredundency;
  auto plan = BuildPlan(dockyard::testing::TinyMixtral(), Dims(8, 1, 8), t, machine);
  auto r = dockyard::ComputeComm(plan, 0);
  CHECK(r.oep == 2);  // ep 8 over nodes of 4
  CHECK(r.iep == 4);
  const CommEntry* ag = Find(r, "deredundency_dispatch_all_gather");
  REQUIRE(ag != nullptr);
  CHECK(ag->group_size == 2);
  CHECK(ag->bytes_per_call == 2 * 4096);          // oep x T x top_k x h x 2 bytes
  CHECK(ag->cross_node_bytes == ag->wire_bytes);  // the oep peer is on the other node
  const CommEntry* a2a = Find(r, "deredundency_dispatch", "forward");
  REQUIRE(a2a != nullptr);
  CHECK(a2a->group_size == 4);
  CHECK(a2a->cross_node_bytes == 0);  // iep stays inside the node
  CHECK(Find(r, "deredundency_combine_reduce_scatter") != nullptr);
}

TEST_CASE("ZeRO-1 reduce-scatters grads and all-gathers params once per step") {
  TrainingConfig t;
  t.dp_sharding = DpSharding::kZero1;
  auto plan = BuildPlan(dockyard::testing::TinyMixtral(), Dims(4), t);
  auto r = dockyard::ComputeComm(plan, 0);
  const CommEntry* rs = Find(r, "zero1_reduce_scatter_grads");
  REQUIRE(rs != nullptr);
  CHECK(rs->calls == 1);
  CHECK(rs->bytes_per_call == 252224 * 4);  // every parameter, fp32 grads (ep 1: all on the dense mesh)
}

TEST_CASE("TP with sequence parallelism: 4 collectives per layer forward, 4 backward") {
  TrainingConfig t;
  t.seq_len = 16;
  auto plan = BuildPlan(dockyard::testing::TinyMixtral(), Dims(2, 2), t);
  auto r = dockyard::ComputeComm(plan, 0);
  const CommEntry* ag = Find(r, "tp_sequence_parallel_all_gather", "forward");
  REQUIRE(ag != nullptr);
  CHECK(ag->calls == 4);                     // 2 per layer x 2 layers
  CHECK(ag->bytes_per_call == 16 * 64 * 2);  // full sequence x hidden x bf16
}

TEST_CASE("RingCrossNodeFractionStrided equals RingCrossNodeFraction of the group {0, s, ..., (n-1)s}") {
  for (int64_t g : {1, 2, 3, 4, 8, 16}) {
    for (int64_t n = 1; n <= 40; ++n) {
      for (int64_t s = 1; s <= 40; ++s) {
        std::vector<int64_t> group(n);
        for (int64_t i = 0; i < n; ++i) group[i] = i * s;
        CAPTURE(g);
        CAPTURE(n);
        CAPTURE(s);
        CHECK(dockyard::RingCrossNodeFractionStrided(n, s, g) == dockyard::RingCrossNodeFraction(group, g));
      }
    }
  }
  CHECK(dockyard::RingCrossNodeFractionStrided(4, 2, 8) == 0.0);  // ranks 0, 2, 4, 6: one node
  CHECK(dockyard::RingCrossNodeFractionStrided(4, 4, 8) == 0.5);  // 0, 4 | 8, 12: two crossings of 4 edges
  CHECK(dockyard::RingCrossNodeFractionStrided(4, 8, 8) == 1.0);  // one rank per node
}

TEST_CASE("allgather dispatcher: all-gather of the EP group's tokens, reduce-scatter on combine, by hand") {
  // Tiny model (hidden 64, bf16), 8 ranks, EP 8, nodes of 4, 1024 tokens: the gathered buffer is
  // 8 x 1024 x 64 x 2 B = 1 MiB per call, 2 calls (2 MoE layers x 1 micro-batch). Ring wire
  // bytes 2 x 1 MiB x 7/8 = 1835008; the ring 0..7 crosses nodes at 3 -> 4 and 7 -> 0: 2/8 of it.
  TrainingConfig t;
  t.seq_len = 1024;
  dockyard::Machine machine;
  machine.gpus_per_node = 4;
  t.dispatcher = dockyard::Dispatcher::kAllGather;
  const auto r = dockyard::ComputeComm(BuildPlan(dockyard::testing::TinyMixtral(), Dims(8, 1, 8), t, machine), 0);
  CHECK(dockyard::AllGatherDispatchBytes(8, 1024, 64, 2) == 1048576.0);
  for (const auto& [purpose, phase] :
       std::vector<std::pair<std::string, std::string>>{{"allgather_dispatch_all_gather", "forward"},
                                                        {"allgather_combine_reduce_scatter", "forward"},
                                                        {"allgather_dispatch_grad_reduce_scatter", "backward"},
                                                        {"allgather_combine_grad_all_gather", "backward"}}) {
    const CommEntry* e = Find(r, purpose, phase);
    REQUIRE_MESSAGE(e != nullptr, purpose);
    CHECK(e->group_size == 8);
    CHECK(e->calls == 2);
    CHECK(e->bytes_per_call == 1048576);
    CHECK(e->wire_bytes == 1835008);
    CHECK(e->cross_node_bytes == 458752);
  }
  // Nothing of the all-to-all or deredundency dispatchers.
  for (const auto& e : r.entries) {
    CAPTURE(e.purpose);
    CHECK(e.purpose.rfind("deredundency", 0) != 0);
    CHECK(e.purpose.rfind("ep_", 0) != 0);
  }
}

TEST_CASE("Megatron's router expert-bias update all-reduces the stage's token counts once per step over TP x DP x CP") {
  // finalize_model_grads.py _update_router_expert_bias: the stacked local_tokens_per_expert (fp32)
  // of the stage's MoE layers, one all-reduce over the tensor-and-data-parallel group with CP.
  // TinyMixtral with a score-correction bias (DeepSeek-V3's e_score_correction_bias): 2 MoE layers
  // x 8 experts x 4 B = 64 B, world 4 = dp 2 x tp 2: a group of 4.
  auto m = dockyard::testing::TinyMixtral();
  m.moe.score_correction_bias = true;
  TrainingConfig t;
  t.dp_sharding = DpSharding::kZero1;
  ParallelDimsOptions d = Dims(4, 2, 2);
  d.convention = dockyard::Convention::kMegatron;
  auto r = dockyard::ComputeComm(BuildPlan(m, d, t), 0);
  const CommEntry* e = Find(r, "router_expert_bias_all_reduce", "step");
  REQUIRE(e != nullptr);
  CHECK(e->collective == "all_reduce");
  CHECK(e->group_size == 4);
  CHECK(e->bytes_per_call == 2 * 8 * 4);
  CHECK(e->calls == 1);
  // torchtitan's optimizer hook: over tp first (EP on, tp 2), then over the loss mesh (dp_shard 2).
  d.convention = dockyard::Convention::kTorchtitan;
  TrainingConfig fsdp;
  fsdp.dp_sharding = DpSharding::kFsdp;
  auto tt = dockyard::ComputeComm(BuildPlan(m, d, fsdp), 0);
  int found = 0;
  for (const CommEntry& x : tt.entries) {
    if (x.purpose != "router_expert_bias_all_reduce") continue;
    ++found;
    CHECK(x.group_size == 2);
    CHECK(x.bytes_per_call == 64);
    CHECK((x.axis == "tp" || x.axis == "dp_replicate*dp_shard*cp"));
  }
  CHECK(found == 2);
  // Without the bias, none.
  m.moe.score_correction_bias = false;
  CHECK_FALSE(Has(dockyard::ComputeComm(BuildPlan(m, d, fsdp), 0), "router_expert_bias_all_reduce"));
  CHECK(dockyard::RouterExpertBiasElems(m, 3) == 0);
}
