// The distributed optimizer's parameter all-gather as Megatron-Core's DDP runs it (param_gather.h).
#include "planner/cost/param_gather.h"

#include <algorithm>

namespace dockyard {

double ParamGatherExposedUs(const ParamGatherInputs& in, const RunSettings& run) {
  const double whole_us = in.dense_us + in.sparse_us;
  if (!run.overlap_param_gather || whole_us <= 0) return whole_us;
  const double vpp = static_cast<double>(std::max<int64_t>(1, run.vpp));
  const double chunk_us = whole_us / vpp;
  if (run.overlap_param_gather_with_optimizer_step && run.vpp > 1) {
    const double elems = in.dense_elems + in.sparse_elems;
    const double first_chunk_share = elems > 0 ? in.dense_elems / vpp / elems : 0.0;
    return std::max(0.0, chunk_us - in.optimizer_us * (1.0 - first_chunk_share));
  }
  // The first bucket of each buffer of the first chunk (a buffer smaller than a bucket: all of it).
  auto first_bucket_us = [&](double buffer_us, double buffer_elems) {
    const double chunk_elems = buffer_elems / vpp;
    return chunk_elems > 0 ? buffer_us / vpp * std::min(1.0, in.bucket_elems / chunk_elems) : 0.0;
  };
  const double bucket_us = first_bucket_us(in.dense_us, in.dense_elems) + first_bucket_us(in.sparse_us, in.sparse_elems);
  double exposed = bucket_us + std::max(0.0, chunk_us - bucket_us - in.chunk_forward_us);
  if (!ParamGatherAligned(run)) exposed += static_cast<double>(in.pp * run.vpp - 1) * chunk_us;
  return exposed;
}

double MegatronDdpBucketElems(int64_t ddp_bucket_size, int64_t dp_cp) {
  if (ddp_bucket_size > 0) return static_cast<double>(ddp_bucket_size);
  return std::max(4.0e7, 1.0e6 * static_cast<double>(dp_cp));
}

}  // namespace dockyard
