// Model FLOPs per token as Megatron-LM / NeMo report them (megatron/training/training.py,
// num_floating_point_operations): 6 x the matmul parameters a token touches (attention
// projections, the top-k routed experts, the shared experts or the dense MLP, the logits) plus the
// causal core attention at half the full square, forward and backward; the router, norms and
// embedding lookup are not counted, nor recomputation (model FLOPs, not hardware FLOPs). Each MTP
// layer (DeepSeek-V3 num_nextn_predict_layers, Megatron --mtp-num-layers) adds one more
// transformer layer (MoE when the model's last layer is) and its own logits.
//
// Published per-token figures this reproduces (GFLOP per token at seq 4096): Qwen3-30B-A3B 23.01,
// Qwen3-235B-A22B 148.0 (16K 204.8 ... 128K 734.7), DeepSeek-V3 249.8 (259.4 with one MTP layer),
// Mixtral-8x22B 242.2, Mixtral-8x7B 79.7 (model_flops_test).
#pragma once

#include <cstdint>

#include "planner/model/model_spec.h"

namespace dockyard {

// Matmul parameters of one layer's attention projections (no biases, norms or sinks).
double AttentionMatmulParams(const ModelSpec& model);
// FLOPs of one token of a `seq_len`-token sequence, forward and backward, with `mtp_layers` MTP
// layers. Throws dockyard::Error for seq_len < 1 or mtp_layers < 0.
double ModelFlopsPerToken(const ModelSpec& model, int64_t seq_len, int64_t mtp_layers = 0);

}  // namespace dockyard
