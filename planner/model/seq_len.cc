// The sequence length against the model's positions (see seq_len.h).
#include "planner/model/seq_len.h"

#include <fmt/format.h>

#include "planner/base/error.h"

namespace dockyard {

void ValidateSeqLenForModel(int64_t seq_len, const ModelSpec& m, const std::string& flag) {
  (void)m;  // the bound holds for every model; max_position_embeddings only warns (SeqLenWarning)
  if (seq_len > kMaxSeqLen) {
    throw Error(
        fmt::format("{} {}: above dockyard's bound of {} tokens per sequence (2^20; the published runs it is checked "
                    "against train at most 65536)",
                    flag, seq_len, kMaxSeqLen));
  }
}

std::string SeqLenWarning(int64_t seq_len, const ModelSpec& m, const std::string& flag) {
  // Above kMaxSeqLen the value is refused (ValidateSeqLenForModel): no warning before the error.
  if (m.max_position_embeddings <= 0 || seq_len <= m.max_position_embeddings || seq_len > kMaxSeqLen) return "";
  return fmt::format("warning: {} {} is above the model's max_position_embeddings ({}){}\n", flag, seq_len, m.max_position_embeddings,
                     m.rope_scaling ? "; the config's rope_scaling must cover it"
                                    : " and its config has no rope_scaling: the positions beyond it were not pretrained (a "
                                      "long-context run extends RoPE itself)");
}

bool SeqLenSplits(int64_t seq_len, int64_t cp, int64_t tp, bool megatron, std::string* error) {
  if (cp > 1 && seq_len % (2 * cp) != 0) {
    if (error) {
      *error = fmt::format(
          "--seq-len {} must be divisible by 2 x cp = {} (cp {}): load-balanced context parallelism splits each sequence into "
          "2 x cp chunks (Megatron get_batch_on_this_cp_rank, PyTorch context_parallel's head-tail load balancer)",
          seq_len, 2 * cp, cp);
    }
    return false;
  }
  const int64_t per_cp_rank = cp > 1 ? seq_len / cp : seq_len;
  if (megatron && tp > 1 && per_cp_rank % tp != 0) {
    if (error) {
      *error = fmt::format(
          "--seq-len {}{} must be divisible by tp {}: Megatron's sequence parallelism scatters each sequence's tokens over the TP "
          "group (tensor_parallel/mappings.py _split_along_first_dim: \"First dimension of the tensor should be divisible by "
          "tensor parallel size\")",
          seq_len, cp > 1 ? fmt::format(" / cp {} = {} tokens per cp rank", cp, per_cp_rank) : "", tp);
    }
    return false;
  }
  return true;
}

void ValidateSeqLenSplits(int64_t seq_len, int64_t cp, int64_t tp, bool megatron) {
  std::string error;
  if (!SeqLenSplits(seq_len, cp, tp, megatron, &error)) throw Error(error);
}

}  // namespace dockyard
