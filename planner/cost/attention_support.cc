// The cost model's attention coverage check (see attention_support.h).
#include "planner/cost/attention_support.h"

#include <fmt/format.h>

#include "planner/base/error.h"

namespace dockyard {

void CheckCostModelCoversAttention(const ModelSpec& m) {
  // A reference, not a copy: the search checks every layout it times.
  const std::string& file = m.source.empty() ? m.name : m.source;
  const auto& a = m.attention;
  if (a.indexer.present()) {
    throw Error(
        fmt::format("{}: /attention/indexer/index_topk (HF index_topk) = {}: DeepSeek Sparse Attention is not in the cost model: "
                    "each query attends to the index_topk keys its lightning indexer ({} heads of {}) selects, while the cost "
                    "model of simulate and search prices every attention layer as full causal attention over seq_len; refusing "
                    "rather than pricing it as full attention (plan and check still report memory and traffic)",
                    file, a.indexer.index_topk, a.indexer.index_n_heads, a.indexer.index_head_dim));
  }
  if (m.NumLinearAttentionLayers() > 0) {
    int64_t first = 0;
    while (!m.IsLinearAttentionLayer(first)) ++first;
    throw Error(
        fmt::format("{}: /attention_layer_types/{} (HF layer_types / full_attention_interval) = \"linear_attention\": Gated "
                    "DeltaNet linear attention ({} of {} layers) is not in the cost model: its chunked recurrent scan is linear "
                    "in seq_len, while the cost model of simulate and search prices every attention layer as full causal "
                    "attention over seq_len; refusing "
                    "rather than pricing it as full attention (plan and check still report memory and traffic)",
                    file, first, m.NumLinearAttentionLayers(), m.num_hidden_layers));
  }
}

}  // namespace dockyard
