// The sequence length against the model's positions: a hard sanity bound on --seq-len (a typo such
// as 10000000 would otherwise run for minutes and look like a hang), and a warning for a sequence
// beyond the checkpoint's max_position_embeddings.
#pragma once

#include <cstdint>
#include <string>

#include "planner/model/model_spec.h"

namespace dockyard {

// The longest sequence dockyard plans, in tokens: 2^20 = 1,048,576, 16x the longest sequence of the
// published runs dockyard is checked against (65,536: testdata/fidelity/runs.json H03). The time a
// search spends grows with it (routing is sampled token by token).
constexpr int64_t kMaxSeqLen = int64_t{1} << 20;

// Throws dockyard::Error naming `flag` (e.g. "--seq-len"), the value and the limit when
// seq_len > kMaxSeqLen, whatever the model.
//
// A sequence beyond the HF config's max_position_embeddings is not refused: that number is the
// checkpoint's pretrained window, not a limit of training. Megatron-LM's check
// (megatron/training/arguments.py validate_args: max_position_embeddings >= seq_length) is against
// its own --max-position-embeddings, which a long-context run raises, and a published run trains
// Qwen3-235B-A22B (max_position_embeddings 40960, no rope_scaling) at 65,536 (runs.json H03).
// torchtitan sizes its RoPE cache from its own model args. SeqLenWarning says it instead.
void ValidateSeqLenForModel(int64_t seq_len, const ModelSpec& model, const std::string& flag);

// One line ("" when none, and above kMaxSeqLen, which is an error) for a seq_len above
// model.max_position_embeddings (when the config has
// it), naming the flag, the value and the limit, and whether the config's rope_scaling (YaRN,
// linear, dynamic NTK, llama3) may cover it: some configs state the scaled window in
// max_position_embeddings (DeepSeek-V3: 163840 = 40 x 4096), others leave the factor to the user
// (Qwen3 documents YaRN factor 4 over 32768).
std::string SeqLenWarning(int64_t seq_len, const ModelSpec& model, const std::string& flag);

// Load-balanced context parallelism cuts each sequence into 2 x cp equal chunks and gives cp rank
// r chunks r and 2 cp - 1 - r, so seq_len must be a multiple of 2 x cp when cp > 1:
//  - Megatron: megatron/core/utils.py get_batch_on_this_cp_rank views the sequence dim as
//    [2 * cp_size, seq_len // (2 * cp_size)] ("The sequence length must be divisible by 2 * cp_size");
//  - torchtitan: PyTorch's context_parallel load balancer (torch/distributed/tensor/experimental/
//    _context_parallel/_load_balancer.py _HeadTailLoadBalancer) asserts seq_length % (2 * world_size) == 0.
// Megatron's sequence parallelism (which dockyard prices at tp > 1; a Megatron MoE with TP needs it)
// then scatters each cp rank's seq_len / cp tokens over the TP group along the sequence dim, which
// must divide evenly (megatron/core/tensor_parallel/mappings.py _split_along_first_dim: "First
// dimension of the tensor should be divisible by tensor parallel size"); torchtitan's DTensor
// sequence sharding takes uneven splits.
// SeqLenSplits returns false on the first broken rule and, when `error` is not null, writes there
// the message ValidateSeqLenSplits throws (naming --seq-len, its value, cp and 2 x cp, or tp);
// cp <= 1 and tp <= 1 always hold.
bool SeqLenSplits(int64_t seq_len, int64_t cp, int64_t tp, bool megatron, std::string* error);
void ValidateSeqLenSplits(int64_t seq_len, int64_t cp, int64_t tp, bool megatron);

}  // namespace dockyard
