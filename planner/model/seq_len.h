// The sequence length against the model's positions: a --seq-len beyond what the checkpoint's
// position embeddings cover is refused (as Megatron-LM refuses it: megatron/training/arguments.py
// validate_args, `assert args.max_position_embeddings >= args.seq_length`), and a hard sanity
// bound holds where the model does not say (a dockyard model spec, a config without the key).
#pragma once

#include <cstdint>
#include <string>

#include "planner/model/model_spec.h"

namespace dockyard {

// The longest sequence dockyard plans, in tokens: 2^24 = 16,777,216, above the longest published
// context (Llama-4-Scout's max_position_embeddings 10,485,760, testdata/hf/llama4-scout-17b-16e.json).
// A sequence beyond it is a typo, not a run (the activations of one such sequence are terabytes).
constexpr int64_t kMaxSeqLen = int64_t{1} << 24;

// Throws dockyard::Error naming `flag` (e.g. "--seq-len"), the value and the limit when:
//  - seq_len > kMaxSeqLen (every model);
//  - seq_len > model.max_position_embeddings (HF max_position_embeddings, when the config has it)
//    and the config has no rope_scaling: the positions beyond it were never trained (Megatron
//    refuses seq_length > max_position_embeddings outright).
// With rope_scaling (YaRN, linear, dynamic NTK, llama3) the scaled window is the config's business:
// some configs state it in max_position_embeddings (DeepSeek-V3: 163840 = 40 x 4096), others do not
// (Qwen3 documents YaRN factor 4 over 32768 added by the user), so a longer sequence passes with the
// warning of SeqLenWarning.
void ValidateSeqLenForModel(int64_t seq_len, const ModelSpec& model, const std::string& flag);

// The warning for a seq_len beyond max_position_embeddings of a config with rope_scaling ("" when
// none): one line naming the flag, the value and the limit.
std::string SeqLenWarning(int64_t seq_len, const ModelSpec& model, const std::string& flag);

}  // namespace dockyard
