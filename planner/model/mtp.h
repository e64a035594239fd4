// Multi-token prediction (MTP) modules, DeepSeek-V3 style (HF config num_nextn_predict_layers;
// Megatron-LM --mtp-num-layers): each module is one more decoder layer (like the model's last)
// fed by enorm(embedding of the next token) and hnorm(hidden state) concatenated and projected by
// eh_proj [D, 2D], with its own output norm and logits. Opt-in in training (--mtp-layers N,
// TrainingConfig::mtp_layers): the parameters, gradients and optimizer state of the modules and
// their activations live on the last pipeline stage, which also runs them (docs/memory-model.md
// "MTP", docs/cost-model.md §5); model FLOPs count them (model_flops.h).
#pragma once

#include <cstdint>

#include "planner/model/model_spec.h"

namespace dockyard {

// Parameters of one MTP module as DeepSeek-V3's checkpoint stores it (model.layers.61.*): the
// decoder layer (all routed experts), enorm, hnorm, eh_proj, shared_head.norm, plus its own copies
// of embed_tokens and shared_head.head. DeepSeek-V3: 671B + 14B = 685B (HF model card).
int64_t MtpModuleParams(const ModelSpec& model);

// Elements of one MTP module besides its decoder layer that a last-stage rank keeps under
// Megatron: eh_proj (TP-sharded on its output) and the three norms, plus the word embedding when
// pp > 1 (the module embeds the next tokens on the last stage; with pp = 1 it shares the first
// stage's). The output head is shared with the model's lm_head.
int64_t MtpExtraElementsOnRank(const ModelSpec& model, int64_t tp, int64_t pp);

}  // namespace dockyard
