// The sequence length against the model's positions (see seq_len.h).
#include "planner/model/seq_len.h"

#include <fmt/format.h>

#include "planner/base/error.h"

namespace dockyard {

void ValidateSeqLenForModel(int64_t seq_len, const ModelSpec& m, const std::string& flag) {
  if (seq_len > kMaxSeqLen) {
    throw Error(
        fmt::format("{} {}: above dockyard's bound of {} tokens per sequence (2^24; the longest published context is "
                    "10485760, Llama-4-Scout)",
                    flag, seq_len, kMaxSeqLen));
  }
  if (m.max_position_embeddings > 0 && seq_len > m.max_position_embeddings && !m.rope_scaling) {
    throw Error(
        fmt::format("{} {}: above the model's max_position_embeddings ({}), and its config has no rope_scaling to extend "
                    "it (Megatron-LM refuses seq_length > max_position_embeddings)",
                    flag, seq_len, m.max_position_embeddings));
  }
}

std::string SeqLenWarning(int64_t seq_len, const ModelSpec& m, const std::string& flag) {
  if (m.max_position_embeddings <= 0 || seq_len <= m.max_position_embeddings || !m.rope_scaling) return "";
  return fmt::format(
      "warning: {} {} is above the model's max_position_embeddings ({}); planned because the config has rope_scaling, "
      "which must cover it\n",
      flag, seq_len, m.max_position_embeddings);
}

}  // namespace dockyard
