// The tiny model (test_models.h) planned on 4 GPUs with EP 4 and 1024-token sequences, and the
// uniform routing sample the cost tests simulate it with (hand arithmetic in the tests).
#pragma once

#include "planner/layout/plan.h"
#include "planner/routing/routing.h"
#include "tests/test_models.h"

namespace dockyard::testing {

// `training` with seq_len 1024; world 4, EP 4, `convention`.
inline Plan TinyEp4Plan(TrainingConfig training = {}, Convention convention = Convention::kTorchtitan) {
  ParallelDimsOptions d;
  d.world_size = 4;
  d.ep = 4;
  d.convention = convention;
  training.seq_len = 1024;
  return BuildPlan(TinyMixtral(), d, training);
}

// TinyEp4Plan under megatron with `mtp` MTP layers (--mtp-layers).
inline Plan TinyMtpPlan(int64_t mtp) {
  TrainingConfig t;
  t.mtp_layers = mtp;
  return TinyEp4Plan(t, Convention::kMegatron);
}

// Uniform routing of the tiny model (8 experts, top-2) for EP 4, 1024 tokens per rank.
inline RoutingResult TinyEp4Routing(int64_t layers = 2) {
  return SampleRouting({}, 8, 2, 4, 1024, layers);
}

// The tiny model with `layers` MoE layers (pipeline tests).
inline ModelSpec TinyMixtralLayers(int64_t layers) {
  ModelSpec m = TinyMixtral();
  m.num_hidden_layers = layers;
  m.moe_layers.assign(layers, true);
  return m;
}

// `world` GPUs in `pp` stages with EP `ep`.
inline ParallelDimsOptions PipelineDims(int64_t world, int64_t pp, int64_t ep = 1) {
  ParallelDimsOptions d;
  d.world_size = world;
  d.pp = pp;
  d.ep = ep;
  return d;
}

// ZeRO-1 training of 256-token sequences in `microbatches` micro-batches.
inline TrainingConfig Zero1Training(int64_t microbatches) {
  TrainingConfig t;
  t.dp_sharding = DpSharding::kZero1;
  t.seq_len = 256;
  t.num_microbatches = microbatches;
  return t;
}

}  // namespace dockyard::testing
