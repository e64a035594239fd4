// Multi-token prediction (MTP) modules, DeepSeek-V3 style (HF config num_nextn_predict_layers;
// Megatron-LM --mtp-num-layers): each module is one more decoder layer (like the model's last)
// fed by enorm(embedding of the next token) and hnorm(hidden state) concatenated and projected by
// eh_proj [D, 2D], with its own output norm and logits. Opt-in in training (--mtp-layers N,
// TrainingConfig::mtp_layers): the parameters, gradients and optimizer state of the modules and
// their activations live on the last pipeline stage, which also runs them (docs/memory-model.md
// "MTP", docs/cost-model.md §5); model FLOPs count them (model_flops.h).
#pragma once

#include <cstdint>
#include <vector>

#include "planner/model/inventory.h"
#include "planner/model/model_spec.h"

namespace dockyard {

// Parameters of one MTP module as DeepSeek-V3's checkpoint stores it (model.layers.61.*): the
// decoder layer (all routed experts), enorm, hnorm, eh_proj, shared_head.norm, plus its own copies
// of embed_tokens and shared_head.head. DeepSeek-V3: 671B + 14B = 685B (HF model card).
int64_t MtpModuleParams(const ModelSpec& model);

// The tensors of one MTP module besides its decoder layer that a last-stage rank keeps under
// Megatron (multi_token_prediction.py MultiTokenPredictionLayer; gpt_model.py builds
// `self.embedding` when `pre_process or mtp_process`): enorm, hnorm and the final layernorm [D],
// eh_proj [D, 2D] (ColumnParallelLinear: TP on dim 0), and with pp > 1 the word embedding
// [V, D] (vocab-parallel, TP on dim 0) -- with pp = 1 the module uses the first stage's. The
// output head is the model's lm_head on the same stage (the DeepSeek-V3 report: MTP modules
// share the embedding and the output head), so it is not listed: no rank holds a second copy of
// either. Shapes are global; the caller places them with the one placement policy
// (planner/layout/placement.h PlaceParam), so TP and FSDP shard them like every other module
// (torchtitan fully_shard on each module; Megatron's distributed optimizer over all parameters).
// Each has layer -1, `fqn` "mtp.<name>" and the role of a tensor with the same TP cut (eh_proj:
// kDenseMlpUp, a column-parallel projection).
std::vector<ParamInfo> MtpExtraParams(const ModelSpec& model, int64_t pp);

// A model needs no MTP entry in its config for --mtp-layers: Megatron-LM trains MTP on any GPT
// model (--mtp-num-layers; the module is a copy of the model's last decoder layer plus the
// tensors above), so every shape comes from the model itself. num_nextn_predict_layers only
// says how many modules the checkpoint ships.

}  // namespace dockyard
