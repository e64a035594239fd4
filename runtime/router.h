// The router's expert choice, one implementation for dockyard-run's ranks (pipeline.cc) and the
// reference (reference.cc), on any backend:
//   select = scores + e_score_correction_bias (score_correction_bias; else the scores)
//   group-limited routing (n_group > 1, topk_group < n_group): every group but the topk_group
//            best masked (ComputeOps::GroupSelect; planner/model/group_limit.h has the rule)
//   top_k over select (ties to the lower expert).
// The gate weights are then taken from the unbiased scores (ComputeOps::RouterWeights).
#pragma once

#include <cstdint>

#include "runtime/backend.h"
#include "runtime/config.h"

namespace dockyard::runtime {

// The router's scores of T tokens: scores [T, E] = x [T, D] . router_w [E, D]^T (one GEMM),
// then the sigmoid (c.sigmoid_scores) or the softmax over each row. Device memory of `ops`.
void RouterScores(ComputeOps& ops, const RunConfig& c, const float* x, const float* router_w, int64_t T, float* scores);

// scores [T, E] (after softmax / sigmoid), bias [E] (read only with score_correction_bias),
// select [T, E] scratch (written when the bias or a group limit applies), topk [T, top_k] out.
// All pointers are device memory of `ops`' backend.
void SelectExperts(ComputeOps& ops, const RunConfig& c, const float* scores, const float* bias, int64_t T, float* select, int64_t* topk);

// The generated e_score_correction_bias of the config's layer into bias [E] (device memory of
// `ops`' backend): runtime/data.h matrix kMatrixScoreBias, scale kScoreBiasScale. Writes nothing
// unless c.score_correction_bias.
void FillScoreBias(ComputeOps& ops, const RunConfig& c, float* bias);

}  // namespace dockyard::runtime
