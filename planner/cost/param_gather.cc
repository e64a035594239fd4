// The distributed optimizer's step-end data-parallel traffic as Megatron-Core's DDP runs it (param_gather.h).
#include "planner/cost/param_gather.h"

#include <algorithm>

namespace dockyard {

double EdgeBucketUs(const DdpBufferTraffic& t, const DdpOverlapInputs& in, int64_t vpp_chunks) {
  const double vpp = static_cast<double>(std::max<int64_t>(1, vpp_chunks));
  // A buffer smaller than the edge bucket: all of its first chunk.
  auto edge_us = [&](double buffer_us, double buffer_elems, double edge_elems) {
    const double chunk_elems = buffer_elems / vpp;
    return chunk_elems > 0 ? buffer_us / vpp * std::min(1.0, edge_elems / chunk_elems) : 0.0;
  };
  return edge_us(t.dense_us, t.dense_elems, std::max(in.bucket_elems, in.embedding_elems)) + edge_us(t.sparse_us, t.sparse_elems, in.bucket_elems);
}

double GradReduceExposedUs(const DdpOverlapInputs& in, const RunSettings& run) {
  const double whole_us = in.grads.dense_us + in.grads.sparse_us;
  if (!run.overlap_grad_reduce || whole_us <= 0) return whole_us;
  const double chunk_us = whole_us / static_cast<double>(std::max<int64_t>(1, run.vpp));
  const double edge_us = EdgeBucketUs(in.grads, in, run.vpp);
  return edge_us + std::max(0.0, chunk_us - edge_us - in.chunk_backward_us);
}

double ParamGatherExposedUs(const DdpOverlapInputs& in, const RunSettings& run) {
  const double whole_us = in.params.dense_us + in.params.sparse_us;
  if (!run.overlap_param_gather || whole_us <= 0) return whole_us;
  const double vpp = static_cast<double>(std::max<int64_t>(1, run.vpp));
  const double chunk_us = whole_us / vpp;
  const bool aligned = ParamGatherAligned(run);
  if (run.overlap_param_gather_with_optimizer_step && run.vpp > 1) {
    const double elems = in.params.dense_elems + in.params.sparse_elems;
    const double first_chunk_share = elems > 0 ? in.params.dense_elems / vpp / elems : 0.0;
    const double first_chunk = std::max(0.0, chunk_us - in.optimizer_us * (1.0 - first_chunk_share));
    return first_chunk + (aligned ? 0.0 : static_cast<double>(in.pp) * (vpp - 1.0) * chunk_us);
  }
  const double edge_us = EdgeBucketUs(in.params, in, run.vpp);
  double exposed = edge_us + std::max(0.0, chunk_us - edge_us - in.chunk_forward_us);
  if (!aligned) exposed += (static_cast<double>(in.pp) * vpp - 1.0) * chunk_us;
  return exposed;
}

}  // namespace dockyard
