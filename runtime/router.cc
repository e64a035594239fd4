// The router's expert choice (see router.h).
#include "runtime/router.h"

#include "runtime/data.h"

namespace dockyard::runtime {

void SelectExperts(ComputeOps& ops, const RunConfig& c, const float* scores, const float* bias, int64_t T, float* select, int64_t* topk) {
  const int64_t E = c.num_experts, k = c.top_k;
  const GroupLimit& g = c.group_limit;
  if (!c.score_correction_bias && !g.active()) {
    ops.TopK(scores, T, E, k, topk);
    return;
  }
  if (c.score_correction_bias) {
    ops.AddRowBias(scores, bias, T, E, select);
  } else {
    ops.Fill(select, 0.0f, T * E);  // select = 0 + scores: the scores unchanged
    ops.Add(scores, select, T * E);
  }
  ops.GroupSelect(select, T, E, g.n_group, g.topk_group, g.top2_sum);
  ops.TopK(select, T, E, k, topk);
}

void FillScoreBias(ComputeOps& ops, const RunConfig& c, float* bias) {
  if (!c.score_correction_bias) return;
  WeightRowsArgs w;
  w.seed = c.options.seed;
  w.layer = c.layer;
  w.matrix = kMatrixScoreBias;
  w.row_end = 1;
  w.col_end = c.num_experts;
  w.scale = kScoreBiasScale;
  w.out = bias;
  ops.FillWeightRows(w);
}

}  // namespace dockyard::runtime
