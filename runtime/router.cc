// The router's expert choice (see router.h).
#include "runtime/router.h"

#include "runtime/data.h"

namespace dockyard::runtime {

void RouterScores(ComputeOps& ops, const RunConfig& c, const float* x, const float* router_w, int64_t T, float* scores) {
  const int64_t D = c.hidden, E = c.num_experts;
  GemmArgs g;
  g.m = T;
  g.n = E;
  g.k = D;
  g.a = x;
  g.lda = D;
  g.b = router_w;
  g.ldb = D;
  g.c = scores;
  g.ldc = E;
  ops.Gemm(g);
  if (c.sigmoid_scores) {
    ops.Sigmoid(scores, T * E);
  } else {
    ops.Softmax(scores, T, E);
  }
}

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
