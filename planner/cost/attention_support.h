// Which attention variants the step cost model (cost.h) prices. It prices every attention layer
// as softmax attention over the causal context (core FLOPs 2·T·(seq_len/2)·heads·(d_qk + d_v))
// plus projection GEMMs from the layer's parameter count. Variants that cost something else are
// refused here rather than priced as full attention:
//   - DeepSeek Sparse Attention (DeepSeek-V3.2-Exp): the lightning indexer scores every
//     (query, key) pair with index_n_heads heads of index_head_dim, then each query attends to
//     index_topk keys only (DeepSeek-V3.2-Exp tech report, section 2.1);
//   - Gated DeltaNet linear attention (Qwen3-Next): a chunked recurrent scan whose cost is
//     linear in seq_len (Yang et al., "Gated Delta Networks", ICLR 2025).
// Plan and check (memory, rank groups, traffic from the parameter inventory) are unaffected.
#pragma once

#include "planner/model/model_spec.h"

namespace dockyard {

// Throws dockyard::Error naming the model file, the spec field (and its HF key), its value and
// the rule when the model uses an attention variant the cost model does not price.
void CheckCostModelCoversAttention(const ModelSpec& model);

}  // namespace dockyard
