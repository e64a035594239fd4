// Command-line training settings over a spec's training block.
#include "planner/model/training_overrides.h"

#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "planner/base/error.h"

using dockyard::Error;
using dockyard::TrainingConfig;
using dockyard::TrainingOverrides;

TEST_CASE("Unset overrides keep the spec's training block; set ones replace it") {
  TrainingConfig spec;  // as a model spec's training block sets it
  spec.seq_len = 2048;
  spec.fp8_dispatch = true;
  spec.memory_reserve_gib = 3.0;
  const TrainingConfig kept = dockyard::ApplyTrainingOverrides(spec, {}, 1, 2);
  CHECK(kept.seq_len == 2048);
  CHECK(kept.fp8_dispatch);  // a flag left off does not turn the block's setting off
  CHECK(kept.memory_reserve_gib == 3.0);
  CHECK(kept.param_dtype == "bfloat16");  // TrainingConfig's default

  TrainingOverrides o;
  o.seq_len = 8192;
  o.param_dtype = "bf16";  // CanonicalDtype spelling
  o.dp_sharding = dockyard::DpSharding::kZero1;
  o.recompute = dockyard::Recompute::kSelective;
  o.recompute_modules = std::vector<std::string>{"core_attn", "moe_act"};
  o.vpp = 2;
  o.overlap_grad_reduce = true;
  o.dispatcher = dockyard::Dispatcher::kDeredundency;
  o.oep = 2;
  spec.fp8_dispatch = false;  // FP8 dispatch is refused with deredundency (ValidateTraining)
  const TrainingConfig t = dockyard::ApplyTrainingOverrides(spec, o, 1, 2);
  CHECK(t.seq_len == 8192);
  CHECK(t.param_dtype == "bfloat16");
  CHECK(t.dp_sharding == dockyard::DpSharding::kZero1);
  CHECK(t.recompute_modules == std::vector<std::string>{"core_attn", "moe_act"});
  CHECK(t.run.vpp == 2);
  CHECK(t.run.overlap_grad_reduce);
  CHECK(t.dispatcher == dockyard::Dispatcher::kDeredundency);
  CHECK(t.oep == 2);
}

TEST_CASE("The result is validated with the flag's name, and the layer split parsed for pp stages") {
  TrainingOverrides o;
  o.micro_batch_size = 0;
  CHECK_THROWS_WITH_AS(dockyard::ApplyTrainingOverrides({}, o, 1, 2), doctest::Contains("--micro-batch-size: must be >= 1, got 0"), Error);

  TrainingOverrides split;
  split.pp_layer_split = "7+6";  // 19 layers on 3 stages: 7, then 6 per stage
  CHECK(dockyard::ApplyTrainingOverrides({}, split, 3, 19).pp_layer_split == std::vector<int64_t>{7, 6, 6});
  CHECK_THROWS_WITH_AS(dockyard::ApplyTrainingOverrides({}, split, 3, 20), doctest::Contains("--pp-layer-split"), Error);
}

TEST_CASE("With --vpp the layer split may list every virtual stage: pp x vpp entries, one of them empty, every rank >= 1") {
  // pp 2, vpp 3, 10 layers: torchtitan's stages 0..5 (stage s on rank s mod 2); stage 0 holds
  // only the embedding: rank 0 = 0 + 3 + 2 = 5, rank 1 = 2 + 2 + 1 = 5.
  TrainingOverrides o;
  o.vpp = 3;
  o.pp_layer_split = "0,2,3,2,2,1";
  CHECK(dockyard::ApplyTrainingOverrides({}, o, 2, 10).pp_layer_split == std::vector<int64_t>{0, 2, 3, 2, 2, 1});
  CHECK(dockyard::IsVirtualStageSplit({0, 2, 3, 2, 2, 1}, 2, 3));
  CHECK_FALSE(dockyard::IsVirtualStageSplit({5, 5}, 2, 3));
  // Rank 1 (entries 1, 3, 5) with none: refused, naming it.
  o.pp_layer_split = "3,0,4,0,3,0";
  CHECK_THROWS_WITH_AS(dockyard::ApplyTrainingOverrides({}, o, 2, 10), doctest::Contains("pipeline rank 1 holds no decoder layer"), Error);
  // Neither pp nor pp x vpp entries: the message names both counts.
  o.pp_layer_split = "5,3,2";
  CHECK_THROWS_WITH_AS(dockyard::ApplyTrainingOverrides({}, o, 2, 10), doctest::Contains("gives 3 stages, but pp is 2 (or pp x vpp = 6 virtual stages)"),
                       Error);
  // Per rank, an empty entry stays refused.
  o.pp_layer_split = "10,0";
  CHECK_THROWS_WITH_AS(dockyard::ApplyTrainingOverrides({}, o, 2, 10), doctest::Contains("\"0\" is not a layer count >= 1"), Error);
}

TEST_CASE("Megatron-only flags are refused under torchtitan, kept under megatron") {
  dockyard::TrainingOverrides zero1;
  zero1.dp_sharding = dockyard::DpSharding::kZero1;
  CHECK_NOTHROW(dockyard::RejectMegatronOnlyOverrides(zero1, false));
  CHECK_THROWS_WITH_AS(dockyard::RejectMegatronOnlyOverrides(zero1, true),
                       doctest::Contains("--dp-sharding zero1: Megatron's distributed optimizer; torchtitan has FSDP"), dockyard::Error);
  dockyard::TrainingOverrides ddp;
  ddp.dp_sharding = dockyard::DpSharding::kDdp;  // torchtitan's DDP (data_parallel_replicate_degree alone)
  CHECK_NOTHROW(dockyard::RejectMegatronOnlyOverrides(ddp, true));
  dockyard::TrainingOverrides overlap;
  overlap.overlap_moe_ep_comm = true;
  CHECK_NOTHROW(dockyard::RejectMegatronOnlyOverrides(overlap, false));
  CHECK_THROWS_WITH_AS(dockyard::RejectMegatronOnlyOverrides(overlap, true),
                       doctest::Contains("--overlap-moe-expert-parallel-comm: a Megatron-Core feature"), dockyard::Error);
  // The step end: Megatron's NaN check and --clip-grad 0 (no norm, no clipping) exist only there;
  // torchtitan clips by max_norm at every step, so a positive --clip-grad is its max_norm.
  dockyard::TrainingOverrides nan;
  nan.no_check_for_nan_in_grad = true;
  CHECK_NOTHROW(dockyard::RejectMegatronOnlyOverrides(nan, false));
  CHECK_THROWS_WITH_AS(dockyard::RejectMegatronOnlyOverrides(nan, true),
                       doctest::Contains("--no-check-for-nan-in-loss-and-grad: Megatron-LM's switch"), dockyard::Error);
  // The interleaved schedule's P2P overlap switch and TransformerEngine's FP8 attention are Megatron's.
  dockyard::TrainingOverrides p2p;
  p2p.no_overlap_p2p_comm = true;
  CHECK_NOTHROW(dockyard::RejectMegatronOnlyOverrides(p2p, false));
  CHECK_THROWS_WITH_AS(dockyard::RejectMegatronOnlyOverrides(p2p, true),
                       doctest::Contains("--no-overlap-p2p-communication: Megatron-LM's switch"), dockyard::Error);
  dockyard::TrainingOverrides dpa;
  dpa.fp8_dot_product_attention = true;
  CHECK_NOTHROW(dockyard::RejectMegatronOnlyOverrides(dpa, false));
  CHECK_THROWS_WITH_AS(dockyard::RejectMegatronOnlyOverrides(dpa, true),
                       doctest::Contains("--fp8-dot-product-attention: TransformerEngine's FP8 attention, a Megatron-Core setting"),
                       dockyard::Error);
  dockyard::TrainingOverrides clip;
  clip.clip_grad = 0.0;
  CHECK_NOTHROW(dockyard::RejectMegatronOnlyOverrides(clip, false));
  CHECK_THROWS_WITH_AS(dockyard::RejectMegatronOnlyOverrides(clip, true), doctest::Contains("--clip-grad 0: torchtitan clips"),
                       dockyard::Error);
  clip.clip_grad = 0.5;
  CHECK_NOTHROW(dockyard::RejectMegatronOnlyOverrides(clip, true));
  CHECK(dockyard::ApplyTrainingOverrides({}, clip, 1, 4).run.clip_grad == 0.5);
  clip.clip_grad = -1.0;
  CHECK_THROWS_WITH_AS(dockyard::ApplyTrainingOverrides({}, clip, 1, 4),
                       "--clip-grad: must be a finite number >= 0 (the gradient norm's clipping threshold; 0 = no norm and no "
                       "clipping, Megatron --clip-grad), got -1",
                       dockyard::Error);
  // Megatron-Core DDP's bucketed overlaps: torchtitan's FSDP2 and torch DDP run their own.
  dockyard::TrainingOverrides grad_overlap;
  grad_overlap.overlap_grad_reduce = true;
  CHECK_NOTHROW(dockyard::RejectMegatronOnlyOverrides(grad_overlap, false));
  CHECK_THROWS_WITH_AS(dockyard::RejectMegatronOnlyOverrides(grad_overlap, true),
                       doctest::Contains("--overlap-grad-reduce: Megatron-Core DDP's bucketed overlap"), dockyard::Error);
  dockyard::TrainingOverrides with_step;
  with_step.overlap_param_gather_with_optimizer_step = true;
  CHECK_THROWS_WITH_AS(dockyard::RejectMegatronOnlyOverrides(with_step, true),
                       doctest::Contains("--overlap-param-gather-with-optimizer-step: Megatron-Core DDP's bucketed overlap"), dockyard::Error);
  // Megatron-Core DDP's parameter-gather dispatch and buckets; FSDP2 has neither.
  dockyard::TrainingOverrides ddp_gather;
  ddp_gather.ddp_bucket_size = 50000000;
  CHECK_NOTHROW(dockyard::RejectMegatronOnlyOverrides(ddp_gather, false));
  CHECK_THROWS_WITH_AS(dockyard::RejectMegatronOnlyOverrides(ddp_gather, true),
                       doctest::Contains("--ddp-bucket-size: Megatron-Core DDP's parameter all-gather setting"), dockyard::Error);
  CHECK(dockyard::ApplyTrainingOverrides({}, ddp_gather, 1, 4).run.ddp_bucket_size == 50000000);
  ddp_gather.ddp_bucket_size.reset();
  ddp_gather.no_align_param_gather = true;
  CHECK_THROWS_WITH_AS(dockyard::RejectMegatronOnlyOverrides(ddp_gather, true), doctest::Contains("--no-align-param-gather: Megatron-Core DDP"),
                       dockyard::Error);
  CHECK_FALSE(dockyard::ApplyTrainingOverrides({}, ddp_gather, 1, 4).run.align_param_gather);
  ddp_gather.ddp_bucket_size = 0;
  CHECK_THROWS_WITH_AS(dockyard::ApplyTrainingOverrides({}, ddp_gather, 1, 4), doctest::Contains("--ddp-bucket-size: must be a number of parameters in [1, 2^40]"),
                       dockyard::Error);
}

TEST_CASE("--megatron-core-version: MAJOR.MINOR[.PATCH] under megatron; 0.13 is where the probabilities moved into the activation") {
  dockyard::TrainingOverrides o;
  o.megatron_core_version = "0.12.1";
  CHECK_NOTHROW(dockyard::RejectMegatronOnlyOverrides(o, false));
  CHECK_THROWS_WITH_AS(dockyard::RejectMegatronOnlyOverrides(o, true),
                       doctest::Contains("--megatron-core-version 0.12.1: names the Megatron-Core release"), dockyard::Error);
  const dockyard::TrainingConfig t = dockyard::ApplyTrainingOverrides({}, o, 1, 4);
  CHECK(t.run.megatron_core_version == "0.12.1");
  CHECK_FALSE(dockyard::MegatronProbsInActivation(t.run));
  for (const char* bad : {"v0.12", "0", "0.12.1.2", "0..1", "0.x", "0.012", ""}) {
    o.megatron_core_version = bad;
    if (std::string(bad).empty()) {
      CHECK_NOTHROW(dockyard::ApplyTrainingOverrides({}, o, 1, 4));  // empty = the current release
      continue;
    }
    const std::string expected = std::string("--megatron-core-version: must be a Megatron-Core release MAJOR.MINOR or "
                                             "MAJOR.MINOR.PATCH without leading zeros (its tag core_v0.12.0 written 0.12.0 or 0.12), got \"") +
                                 bad + "\"";
    CHECK_THROWS_WITH_AS(dockyard::ApplyTrainingOverrides({}, o, 1, 4), expected.c_str(), dockyard::Error);
  }
  dockyard::RunSettings s;
  CHECK(dockyard::MegatronProbsInActivation(s));  // the current release
  for (const auto& [version, weighted] : {std::pair<const char*, bool>{"0.12", false}, {"0.13", true}, {"0.13.0", true},
                                          {"0.9.0", false}, {"0.15.1", true}, {"1.0", true}}) {
    s.megatron_core_version = version;
    CHECK(dockyard::MegatronProbsInActivation(s) == weighted);
  }
}

TEST_CASE("--cross-entropy and --cross-entropy-fusion-impl: TransformerEngine's loss needs the fusion and a release 0.12 to 0.18") {
  dockyard::TrainingOverrides o;
  o.cross_entropy = "fused";
  dockyard::TrainingConfig t = dockyard::ApplyTrainingOverrides({}, o, 1, 4);
  CHECK(t.run.fused_cross_entropy);
  CHECK(t.run.cross_entropy_fusion_impl == "native");
  CHECK_FALSE(dockyard::TeCrossEntropy(t.run));
  o.cross_entropy = "chunked";
  CHECK_THROWS_WITH_AS(dockyard::ApplyTrainingOverrides({}, o, 1, 4),
                       "--cross-entropy: must be unfused or fused (Megatron --cross-entropy-loss-fusion), got \"chunked\"", dockyard::Error);
  // te without the fusion: Megatron reads the impl only under --cross-entropy-loss-fusion.
  o.cross_entropy.reset();
  o.cross_entropy_fusion_impl = "te";
  o.megatron_core_version = "0.15";
  CHECK_THROWS_WITH_AS(dockyard::ApplyTrainingOverrides({}, o, 1, 4), doctest::Contains("add --cross-entropy fused"), dockyard::Error);
  o.cross_entropy = "fused";
  t = dockyard::ApplyTrainingOverrides({}, o, 1, 4);
  CHECK(dockyard::TeCrossEntropy(t.run));
  // The releases that have it: from core_v0.12.0 (ADLR/megatron-lm!2707) to before core_v0.19.0
  // (NVIDIA/Megatron-LM#5115 refuses it); the current release (no version) is refused too.
  for (const auto& [version, ok] : {std::pair<const char*, bool>{"0.12", true}, {"0.12.0", true}, {"0.18.2", true}, {"0.11", false},
                                    {"0.19", false}, {"1.0", false}}) {
    o.megatron_core_version = version;
    if (ok) {
      CHECK_NOTHROW(dockyard::ApplyTrainingOverrides({}, o, 1, 4));
    } else {
      CHECK_THROWS_WITH_AS(dockyard::ApplyTrainingOverrides({}, o, 1, 4), doctest::Contains("a release from 0.12 to 0.18"),
                           dockyard::Error);
    }
  }
  o.megatron_core_version.reset();
  CHECK_THROWS_WITH_AS(dockyard::ApplyTrainingOverrides({}, o, 1, 4),
                       doctest::Contains("Megatron-LM refuses TransformerEngine's cross-entropy from core_v0.19.0"), dockyard::Error);
  // torchtitan: refused before its release rules (the loss is torchtitan's own).
  CHECK_NOTHROW(dockyard::RejectMegatronOnlyOverrides(o, false));
  CHECK_THROWS_WITH_AS(dockyard::RejectMegatronOnlyOverrides(o, true),
                       doctest::Contains("--cross-entropy-fusion-impl te: Megatron's choice between its own fused cross-entropy"),
                       dockyard::Error);
  o.cross_entropy_fusion_impl = "native";  // a Megatron flag whatever its value
  CHECK_THROWS_WITH_AS(dockyard::RejectMegatronOnlyOverrides(o, true), doctest::Contains("--cross-entropy-fusion-impl native:"),
                       dockyard::Error);
}
