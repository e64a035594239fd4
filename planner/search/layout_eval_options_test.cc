// The search's fast path (layout_eval.h) equals the plan path for every candidate under the opt-in
// settings that once handed every candidate to the plan path: --fp8-param-gather (FP8 GEMM weights
// all-gathered in FP8: Megatron's distributed optimizer and torchtitan's FSDP2) and torchtitan's
// selective checkpointing per layer (--selective-ac-option N) and per op (op), on Qwen3-30B-A3B
// (MoE layers only), Mixtral 8x7B and DeepSeek-V2-Lite (a dense first layer, MLA) -- and takes no
// candidate to the plan path (LayoutEvaluator::handed_to_reference() 0).
#include <doctest/doctest.h>

#include "planner/base/error.h"
#include "planner/layout/plan.h"
#include "planner/search/every_candidate.h"
#include "planner/search/layout_eval.h"
#include "planner/model/model_file.h"
#include "tests/test_models.h"

using dockyard::SearchOptions;
using dockyard::testing::CompareEveryCandidate;
using dockyard::testing::Coverage;
using dockyard::testing::FullSearch;

namespace {

// 16 GPUs, FP8 GEMMs with --fp8-param-gather under `convention`, both data-parallel shardings of
// the convention searched (ddp: refused by ValidateFp8ParamGather), micro-batches of 1 and 2.
SearchOptions Fp8GatherSearch(dockyard::Convention convention, const char* recipe) {
  SearchOptions o = FullSearch(16);
  o.convention = convention;
  o.training.precision = "fp8";
  o.training.fp8_recipe = recipe;
  o.training.fp8_param_gather = true;
  o.dp_shardings = {convention == dockyard::Convention::kMegatron ? dockyard::DpSharding::kZero1 : dockyard::DpSharding::kFsdp,
                    dockyard::DpSharding::kDdp};
  o.micro_batch_sizes = {1, 2};
  return o;
}

// 16 GPUs, torchtitan, recompute selective with selective_ac_option `option`, vpp 1 and 2.
SearchOptions SacSearch(const char* option) {
  SearchOptions o = FullSearch(16);
  o.training.recompute = dockyard::Recompute::kSelective;
  o.training.selective_ac_option = option;
  o.vpps = {1, 2};
  return o;
}

// The ddp candidates of `o` valid without --fp8-param-gather, and how many of them the fast path
// refuses with it, with ValidateFp8ParamGather's message.
std::pair<int64_t, int64_t> DdpRefusedByFp8Gather(const dockyard::ModelSpec& model, const SearchOptions& o) {
  SearchOptions plain = o;
  plain.training.fp8_param_gather = false;
  dockyard::LayoutEvaluator with(model, o), without(model, plain);
  int64_t ddp = 0, refused = 0;
  for (const auto& c : dockyard::EnumerateLayouts(model, o)) {
    if (c.settings.dp_sharding != dockyard::DpSharding::kDdp) continue;
    if (without.Evaluate(c).status == dockyard::LayoutEvaluation::Status::kInvalid) continue;
    ++ddp;
    const auto r = with.Evaluate(c);
    refused += r.status == dockyard::LayoutEvaluation::Status::kInvalid && r.reason.rfind("fp8_param_gather: ", 0) == 0;
  }
  return {ddp, refused};
}

}  // namespace

TEST_CASE("Fast evaluation equals the plan path for every candidate under --fp8-param-gather, without the plan path") {
  const auto qwen = dockyard::LoadModel("testdata/hf/qwen3-30b-a3b.json");
  const auto mixtral = dockyard::LoadModel("testdata/hf/mixtral-8x7b.json");
  SUBCASE("Qwen3-30B-A3B, megatron: zero1 gathers its FP8 GEMM weights in FP8 and keeps no bf16 copy of them; ddp is refused") {
    const Coverage cov = CompareEveryCandidate(qwen, Fp8GatherSearch(dockyard::Convention::kMegatron, "tensorwise"));
    CHECK(cov.candidates == 1060);
    CHECK(cov.invalid == 692);  // ddp (--fp8-param-gather needs the distributed optimizer) and the degree rules
    CHECK(cov.ranked > 0);
    CHECK(cov.pp_gt_1 > 0);
    CHECK(cov.handed_to_reference == 0);
    const auto [ddp, refused] = DdpRefusedByFp8Gather(qwen, Fp8GatherSearch(dockyard::Convention::kMegatron, "tensorwise"));
    CHECK(ddp > 0);
    CHECK(refused == ddp);
  }
  SUBCASE("Qwen3-30B-A3B, torchtitan: FSDP2 all-gathers each layer's FP8 GEMM weights in FP8 (blockwise scales); ddp is refused") {
    const Coverage cov = CompareEveryCandidate(qwen, Fp8GatherSearch(dockyard::Convention::kTorchtitan2026_03, "blockwise"));
    CHECK(cov.candidates == 1692);
    CHECK(cov.invalid == 1084);
    CHECK(cov.ranked > 0);
    CHECK(cov.handed_to_reference == 0);
  }
  SUBCASE("Mixtral 8x7B, megatron zero1, 60 GiB budget") {
    SearchOptions o = Fp8GatherSearch(dockyard::Convention::kMegatron, "blockwise");
    o.gpu_memory_gib = 60;
    const Coverage cov = CompareEveryCandidate(mixtral, o);
    CHECK(cov.candidates == 876);
    CHECK(cov.over_budget > 0);
    CHECK(cov.ranked > 0);
    CHECK(cov.handed_to_reference == 0);
  }
  SUBCASE("Mixtral 8x7B, torchtitan FSDP") {
    const Coverage cov = CompareEveryCandidate(mixtral, Fp8GatherSearch(dockyard::Convention::kTorchtitan2026_03, "tensorwise"));
    CHECK(cov.candidates == 1508);
    CHECK(cov.ranked > 0);
    CHECK(cov.handed_to_reference == 0);
  }
}

TEST_CASE("Fast evaluation equals the plan path for every candidate under torchtitan's per-layer and per-op checkpointing") {
  const auto qwen = dockyard::LoadModel("testdata/hf/qwen3-30b-a3b.json");
  const auto lite = dockyard::LoadModel("testdata/hf/deepseek-v2-lite.json");
  SUBCASE("Qwen3-30B-A3B, --selective-ac-option 2: every second block of a stage checkpointed") {
    const Coverage cov = CompareEveryCandidate(qwen, SacSearch("2"));
    CHECK(cov.candidates == 581);
    CHECK(cov.ranked > 0);
    CHECK(cov.pp_gt_1 > 0);
    CHECK(cov.handed_to_reference == 0);
  }
  SUBCASE("DeepSeek-V2-Lite (a dense first layer, 26 MoE layers), --selective-ac-option 2, 24 GiB budget") {
    SearchOptions o = SacSearch("2");
    o.gpu_memory_gib = 24;
    const Coverage cov = CompareEveryCandidate(lite, o);
    CHECK(cov.candidates == 581);
    CHECK(cov.over_budget > 0);
    CHECK(cov.ranked > 0);
    CHECK(cov.pp_gt_1 > 0);
    CHECK(cov.handed_to_reference == 0);
  }
  SUBCASE("DeepSeek-V2-Lite, --selective-ac-option 3 with recompute searched: none and full break the option's rule") {
    SearchOptions o = SacSearch("3");
    o.recomputes = {dockyard::Recompute::kNone, dockyard::Recompute::kSelective, dockyard::Recompute::kFull};
    const Coverage cov = CompareEveryCandidate(lite, o);
    CHECK(cov.candidates == 1743);
    CHECK(cov.invalid >= 192);  // the option needs recompute selective
    CHECK(cov.ranked > 0);
    CHECK(cov.handed_to_reference == 0);
  }
  SUBCASE("Qwen3-30B-A3B, --selective-ac-option op: each block keeps its saved op outputs") {
    const Coverage cov = CompareEveryCandidate(qwen, SacSearch("op"));
    CHECK(cov.candidates == 581);
    CHECK(cov.ranked > 0);
    CHECK(cov.handed_to_reference == 0);
  }
  SUBCASE("DeepSeek-V2-Lite, --selective-ac-option op (MLA's saved linears, dispatch rows with ep > 1)") {
    const Coverage cov = CompareEveryCandidate(lite, SacSearch("op"));
    CHECK(cov.candidates == 581);
    CHECK(cov.ranked > 0);
    CHECK(cov.pp_gt_1 > 0);
    CHECK(cov.handed_to_reference == 0);
  }
}

TEST_CASE("Under all four dispatchers the options take the fast path too, at the plan path's figures") {
  // Qwen3-30B-A3B on 32 GPUs of 4-GPU nodes (EP groups over up to 8 nodes): deredundency's oep,
  // deepep's per-node counts and allgather's rings, with each option on.
  const auto model = dockyard::LoadModel("testdata/hf/qwen3-30b-a3b.json");
  auto all_four = [](SearchOptions o) {
    o.world_size = 32;
    o.cluster.gpus_per_node = 4;
    o.training.seq_len = 256;
    o.include_deepep = true;
    o.include_allgather = true;
    // HybridEP spans the 4-GPU nodes (DeepEP's kernels need nodes of 8 NVLink peers: flex_backend_limits.h).
    o.training.moe_flex_dispatcher_backend = dockyard::FlexBackend::kHybridEp;
    o.micro_batch_sizes.clear();
    o.vpps.clear();
    return o;
  };
  auto check = [](const Coverage& cov) {
    CHECK(cov.deredundency > 0);
    CHECK(cov.deepep > 0);
    CHECK(cov.spanning_deepep > 0);
    CHECK(cov.allgather > 0);
    CHECK(cov.ranked > 0);
    CHECK(cov.handed_to_reference == 0);
  };
  SUBCASE("--fp8-param-gather, megatron zero1, FP8 dispatch") {
    SearchOptions o = all_four(Fp8GatherSearch(dockyard::Convention::kMegatron, "blockwise"));
    o.training.fp8_dispatch = true;
    check(CompareEveryCandidate(model, o));
  }
  SUBCASE("--fp8-param-gather, torchtitan FSDP") {
    check(CompareEveryCandidate(model, all_four(Fp8GatherSearch(dockyard::Convention::kTorchtitan2026_03, "tensorwise"))));
  }
  SUBCASE("--selective-ac-option 2") {
    check(CompareEveryCandidate(model, all_four(SacSearch("2"))));
  }
  SUBCASE("--selective-ac-option op") {
    check(CompareEveryCandidate(model, all_four(SacSearch("op"))));
  }
}

TEST_CASE("Megatron's EP overlap with zero1 and ddp over several nodes: no FSDP traffic shares the NICs with the all-to-alls") {
  // Qwen3-30B-A3B on 32 GPUs, megatron, EP overlap off and on, recompute none: with EP groups and
  // data-parallel groups over several NVLink domains, the plan path gives FSDP's (empty) rings no
  // NIC share outside FSDP (simulate.cc AddFsdpInputs fills no group), nor may the fast path.
  const auto model = dockyard::LoadModel("testdata/hf/qwen3-30b-a3b.json");
  for (const bool gather : {false, true}) {
    CAPTURE(gather);
    SearchOptions o = FullSearch(32);
    o.convention = dockyard::Convention::kMegatron;
    o.training.recompute = dockyard::Recompute::kNone;
    o.training.precision = gather ? "fp8" : "bf16";
    o.training.fp8_param_gather = gather;
    o.dp_shardings = {dockyard::DpSharding::kZero1, dockyard::DpSharding::kDdp};
    o.ep_overlaps = {false, true};
    o.global_batch_size = 32;
    const Coverage cov = CompareEveryCandidate(model, o);
    CHECK(cov.ranked > 0);
    CHECK(cov.handed_to_reference == 0);
  }
}

TEST_CASE("The fast path takes the options' figures: they move peak and step time as the plan path moves them") {
  // One layout of Qwen3-30B-A3B on 16 GPUs (pp 2, ep 8, FSDP), every option on and off: the fast
  // path's figures differ from those without the option exactly where the plan path's do, and
  // equal the plan path's.
  const auto model = dockyard::LoadModel("testdata/hf/qwen3-30b-a3b.json");
  dockyard::LayoutCandidate c;
  c.dims.world_size = 16;
  c.dims.pp = 2;
  c.dims.ep = 8;
  auto both = [&](const SearchOptions& o) {
    dockyard::LayoutEvaluator e(model, o);
    const auto fast = e.Evaluate(c, /*simulate_over_budget=*/true), ref = e.EvaluateReference(c, /*simulate_over_budget=*/true);
    REQUIRE(fast.status != dockyard::LayoutEvaluation::Status::kInvalid);
    CHECK(fast.peak_bytes == ref.peak_bytes);
    CHECK(fast.step_time_us == ref.step_time_us);
    CHECK(e.handed_to_reference() == 0);
    return fast;
  };
  SearchOptions none = FullSearch(16), sac = SacSearch("2"), op = SacSearch("op"), full = FullSearch(16);
  none.training.recompute = dockyard::Recompute::kNone;
  const auto r_none = both(none), r_sac = both(sac), r_op = both(op), r_full = both(full);
  // Per-layer checkpointing keeps half the blocks' activations: between none and full in memory,
  // and in time (the checkpointed blocks re-run their forward).
  CHECK(r_sac.peak_bytes < r_none.peak_bytes);
  CHECK(r_sac.peak_bytes > r_full.peak_bytes);
  CHECK(r_sac.step_time_us > r_none.step_time_us);
  CHECK(r_sac.step_time_us < r_full.step_time_us);
  // Per-op: every block checkpointed, keeping its saved outputs besides its input.
  CHECK(r_op.peak_bytes > r_full.peak_bytes);
  CHECK(r_op.peak_bytes < r_none.peak_bytes);
  // --fp8-param-gather under FSDP2: the fp32 shard is kept either way (the same peak).
  SearchOptions fp8 = FullSearch(16), gather = FullSearch(16);
  fp8.training.precision = gather.training.precision = "fp8";
  gather.training.fp8_param_gather = true;
  CHECK(both(gather).peak_bytes == both(fp8).peak_bytes);
  // Under Megatron's distributed optimizer the FP8 GEMM weights are the parameters (no bf16 copy)
  // and the step's parameter all-gather sends 1 B per such weight instead of 2: less memory, a
  // faster step.
  c.dims.convention = fp8.convention = gather.convention = dockyard::Convention::kMegatron;
  const auto zero1_fp8 = both(fp8), zero1_gather = both(gather);
  CHECK(zero1_gather.peak_bytes < zero1_fp8.peak_bytes);
  CHECK(zero1_gather.step_time_us < zero1_fp8.step_time_us);
}

TEST_CASE("Megatron-LM's padded vocabulary: the fast path builds each tp's padded embedding and lm_head as BuildPlan does") {
  // Qwen3-30B-A3B (vocab 151,936) under megatron on 16 GPUs: tp 2 and 4 candidates pad to 152,064
  // rows, tp 8 to 149 x 1,024 = 152,576 (vocab_padding.h), tp 1 keeps 151,936; every candidate's verdict, peak and step time equal the
  // plan path's, with and without padding (--make-vocab-size-divisible-by 1).
  const auto qwen = dockyard::LoadModel("testdata/hf/qwen3-30b-a3b.json");
  SearchOptions o = FullSearch(16);
  o.convention = dockyard::Convention::kMegatron;
  const Coverage padded = CompareEveryCandidate(qwen, o);
  CHECK(padded.ranked > 0);
  CHECK(padded.handed_to_reference == 0);
  SearchOptions unpadded = o;
  unpadded.training.make_vocab_size_divisible_by = 1;
  CHECK(CompareEveryCandidate(qwen, unpadded).ranked == padded.ranked);
  // The padding reaches the fast path's figures: a tp >= 2 candidate holds more vocabulary rows per
  // rank (tp 2: 76,032 against 75,968), so its static bytes grow; a tp 1 candidate's do not move.
  dockyard::LayoutEvaluator with(qwen, o), without(qwen, unpadded);
  int64_t tp2 = 0, tp1 = 0;
  for (const auto& c : dockyard::EnumerateLayouts(qwen, o)) {
    const auto a = with.Evaluate(c, true), b = without.Evaluate(c, true);
    if (a.status == dockyard::LayoutEvaluation::Status::kInvalid) continue;
    if (c.dims.tp >= 2) {
      ++tp2;
      CHECK(a.static_peak_bytes > b.static_peak_bytes);
    } else {
      ++tp1;
      CHECK(a.static_peak_bytes == b.static_peak_bytes);
    }
  }
  CHECK(tp2 > 0);
  CHECK(tp1 > 0);
  // torchtitan has no padding: the rules refuse every candidate with VocabDivisor's message.
  SearchOptions titan = FullSearch(16);
  titan.training.make_vocab_size_divisible_by = 128;
  const Coverage refused = CompareEveryCandidate(qwen, titan);
  CHECK(refused.ranked == 0);
  CHECK(refused.invalid == refused.candidates);
}
