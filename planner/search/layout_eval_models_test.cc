// The search's fast path (layout_eval.h) equals the plan path for every candidate on Qwen3-30B-A3B,
// Mixtral, gpt-oss-120b and OLMoE, under FP8, and under all four dispatchers.
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

TEST_CASE("Fast evaluation equals the plan path for every candidate: Qwen3-30B-A3B, Mixtral, gpt-oss-120b, OLMoE") {
  SUBCASE("Qwen3-30B-A3B on 8 GPUs, everything fits") {
    SearchOptions o = FullSearch(8);
    o.gpu_memory_gib = 1000;
    const Coverage cov = CompareEveryCandidate(dockyard::LoadModel("testdata/hf/qwen3-30b-a3b.json"), o);
    CHECK(cov.candidates == 158);
    CHECK(cov.over_budget == 0);
    CHECK(cov.ranked > 0);
  }
  SUBCASE("Qwen3-30B-A3B on 64 GPUs, ddp, 2 sequences of 1000 tokens per micro-batch") {
    SearchOptions o = FullSearch(64);
    o.training.dp_sharding = dockyard::DpSharding::kDdp;
    o.training.micro_batch_size = 2;
    o.training.seq_len = 1000;
    const Coverage cov = CompareEveryCandidate(dockyard::LoadModel("testdata/hf/qwen3-30b-a3b.json"), o);
    CHECK(cov.over_budget > 0);
    CHECK(cov.ranked > 0);
    CHECK(cov.pp_gt_1 > 0);
  }
  SUBCASE("Mixtral 8x7B on 64 GPUs, zero1, no recompute, 60 GiB budget") {
    SearchOptions o = FullSearch(64);
    o.training.dp_sharding = dockyard::DpSharding::kZero1;
    o.training.recompute = dockyard::Recompute::kNone;
    o.gpu_memory_gib = 60;
    const Coverage cov = CompareEveryCandidate(dockyard::LoadModel("testdata/hf/mixtral-8x7b.json"), o);
    CHECK(cov.over_budget > 0);
    CHECK(cov.ranked > 0);
  }
  SUBCASE("gpt-oss-120b on 128 GPUs (biases, sinks, interleaved gate/up), h200, 8 micro-batches, imbalance 1.3") {
    SearchOptions o = FullSearch(128);
    o.cluster = dockyard::ClusterPreset("h200-sxm");
    o.training.num_microbatches = 8;
    o.training.imbalance = 1.3;
    const Coverage cov = CompareEveryCandidate(dockyard::LoadModel("testdata/hf/gpt-oss-120b.json"), o);
    CHECK(cov.ranked > 0);
    CHECK(cov.deredundency > 0);
    CHECK(cov.pp_gt_1 > 0);
  }
  SUBCASE("Qwen3-30B-A3B on 16 GPUs, zipf routing sizing each layout's memory (search --routing)") {
    SearchOptions o = FullSearch(16);
    o.routing = dockyard::ParseRoutingSpec("zipf:1.2");
    o.routing_sizes_memory = true;
    o.gpu_memory_gib = 40;
    const auto model = dockyard::LoadModel("testdata/hf/qwen3-30b-a3b.json");
    const Coverage cov = CompareEveryCandidate(model, o);
    CHECK(cov.over_budget > 0);
    CHECK(cov.ranked > 0);
    // The samples move memory: some layout (ep > 1) peaks higher than at --imbalance 1.0.
    dockyard::LayoutEvaluator sized(model, o);
    o.routing_sizes_memory = false;
    dockyard::LayoutEvaluator plain(model, o);
    bool higher = false;
    for (const auto& c : dockyard::EnumerateLayouts(model, o)) {
      const auto a = sized.Evaluate(c, true), b = plain.Evaluate(c, true);
      if (a.status != dockyard::LayoutEvaluation::Status::kInvalid && a.peak_bytes > b.peak_bytes) higher = true;
    }
    CHECK(higher);
  }
  SUBCASE("OLMoE on 64 GPUs (full-width q/k norms), float32 params, bfloat16 grads, hot routing") {
    SearchOptions o = FullSearch(64);
    o.training.param_dtype = "float32";
    o.training.grad_dtype = "bfloat16";
    o.routing = dockyard::ParseRoutingSpec("hot:4:0.5");
    const Coverage cov = CompareEveryCandidate(dockyard::LoadModel("testdata/hf/olmoe-1b-7b-0125-instruct.json"), o);
    CHECK(cov.ranked > 0);
  }
  SUBCASE(
      "Qwen3-30B-A3B with tied embeddings (lm_head copy on the last stage and the embedding group's all-reduce "
      "when pp > 1), megatron, SGD, 16 GPUs") {
    auto model = dockyard::LoadModel("testdata/hf/qwen3-30b-a3b.json");
    model.tie_word_embeddings = true;
    SearchOptions o = FullSearch(16);
    o.convention = dockyard::Convention::kMegatron;
    o.training.optimizer = dockyard::Optimizer::kSgd;
    const Coverage cov = CompareEveryCandidate(model, o);
    CHECK(cov.pp_gt_1 > 0);
    CHECK(cov.ranked > 0);
  }
}

TEST_CASE("Fast evaluation equals the plan path for every candidate under FP8 (Megatron keeps FP8 weight copies, torchtitan none)") {
  // Qwen3-30B-A3B on 16 GPUs, --precision fp8: under megatron (TransformerEngine) every rank holds
  // an FP8 copy of its attention and MLP GEMM weights and saves FP8 linear inputs; under torchtitan
  // (torchao) neither (workload.h Fp8KeepsQuantizedTensors). Both paths must price that alike.
  const auto model = dockyard::LoadModel("testdata/hf/qwen3-30b-a3b.json");
  for (const auto convention : {dockyard::Convention::kMegatron, dockyard::Convention::kTorchtitan}) {
    for (const char* recipe : {"tensorwise", "blockwise"}) {
      CAPTURE(recipe);
      SearchOptions o = FullSearch(16);
      o.convention = convention;
      o.training.precision = "fp8";
      o.training.fp8_recipe = recipe;
      const Coverage cov = CompareEveryCandidate(model, o);
      CHECK(cov.ranked > 0);
      CHECK(cov.handed_to_reference == 0);
    }
  }
}

TEST_CASE("Fast evaluation equals the plan path for every candidate under all four dispatchers, without the plan path") {
  // Qwen3-30B-A3B (128 experts, top 8) on 32 GPUs of 4-GPU nodes: EP groups of up to 32 ranks span
  // up to 8 nodes, so deredundency's oep, deepep's per-node RDMA and NVLink forwarding and
  // allgather's ring over nodes are all exercised. Short sequences keep the reference path's
  // per-candidate deepep draws quick. The deepep dispatcher runs the hybridep backend: DeepEP's own
  // kernels need nodes of 8 NVLink peers (flex_backend_limits.h), HybridEP any whole nodes (here 4).
  const auto model = dockyard::LoadModel("testdata/hf/qwen3-30b-a3b.json");
  auto all_four = [](dockyard::Convention convention) {
    SearchOptions o = FullSearch(32);
    o.cluster.gpus_per_node = 4;
    o.convention = convention;
    o.training.seq_len = 256;
    o.include_deepep = true;
    o.include_allgather = true;
    o.training.moe_flex_dispatcher_backend = dockyard::FlexBackend::kHybridEp;
    return o;
  };
  SUBCASE("the deepep backend on 4-GPU nodes: the layouts DeepEP cannot run are refused alike and never ranked") {
    SearchOptions o = all_four(dockyard::Convention::kTorchtitan2026_03);
    o.training.moe_flex_dispatcher_backend.reset();  // Megatron's default, deepep
    const Coverage deepep = CompareEveryCandidate(model, o);
    const Coverage hybridep = CompareEveryCandidate(model, all_four(dockyard::Convention::kTorchtitan2026_03));
    CHECK(deepep.candidates == hybridep.candidates);
    CHECK(deepep.deepep > 0);               // ep x etp of 2 or 4: one node's NVLink peers
    CHECK(deepep.spanning_deepep == 0);     // over two 4-GPU nodes: 4 NVLink peers per node, not 8 (DeepEP buffer.hpp)
    CHECK(hybridep.spanning_deepep > 0);
    // Exactly the deepep layouts HybridEP runs and DeepEP does not are the extra refusals.
    CHECK(deepep.invalid == hybridep.invalid + (hybridep.deepep - deepep.deepep));
    CHECK(deepep.handed_to_reference == 0);
  }
  SUBCASE("torchtitan as it is: no expert TP (PR #3167), ep >= tp (PR #4794), 1F1B M >= pp; refused alike on both paths") {
    SearchOptions o = all_four(dockyard::Convention::kTorchtitan);
    o.include_deepep = false;
    o.include_allgather = false;
    const Coverage cov = CompareEveryCandidate(model, o);
    CHECK(cov.etp_gt_1 == 0);  // never enumerated (CheckEtpForConvention)
    CHECK(cov.invalid > 0);    // ep < tp among them, refused by CheckEpAtLeastTp on both paths
    CHECK(cov.ranked > 0);
  }
  SUBCASE("torchtitan-2026-03, fsdp, full recompute") {
    const Coverage cov = CompareEveryCandidate(model, all_four(dockyard::Convention::kTorchtitan2026_03));
    CHECK(cov.deredundency > 0);
    CHECK(cov.deepep > 0);
    CHECK(cov.spanning_deepep > 0);
    CHECK(cov.allgather > 0);
    CHECK(cov.etp_gt_1 > 0);
    CHECK(cov.ranked > 0);
    CHECK(cov.handed_to_reference == 0);  // deepep and allgather take the fast path too
    CHECK(cov.flex_from_blocks > 0);      // and the deepep counts came from the per-source block counts,
    CHECK(cov.routing_from_blocks > 0);   // as did the routing samples' per-expert counts
  }
  SUBCASE("megatron (zero1, expert TP scaling of the sent rows), FP8 dispatch, zipf routing") {
    SearchOptions o = all_four(dockyard::Convention::kMegatron);
    o.training.fp8_dispatch = true;
    o.routing = dockyard::ParseRoutingSpec("zipf:1.2");
    const Coverage cov = CompareEveryCandidate(model, o);
    CHECK(cov.deredundency > 0);
    CHECK(cov.spanning_deepep > 0);
    CHECK(cov.allgather > 0);
    CHECK(cov.etp_gt_1 > 0);
    CHECK(cov.pp_gt_1 > 0);
    CHECK(cov.handed_to_reference == 0);
    CHECK(cov.flex_from_blocks > 0);
    CHECK(cov.routing_from_blocks > 0);
  }
}
