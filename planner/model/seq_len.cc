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

}  // namespace dockyard
