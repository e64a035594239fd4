// torchtitan's per-op selective checkpointing: the backward's re-run (see op_sac_time.h).
#include "planner/cost/op_sac_time.h"

#include "planner/cost/gemm_efficiency.h"

namespace dockyard {

void OpSacForwardUs(const ModelSpec& m, double T, double tp, double attention_kernels_us, double tp_collective_us, const ClusterSpec& c,
                    double peak, ComputeModel model, GemmPrecision precision, RecomputeForwardUs& rf) {
  const ComputeKnobs& kn = c.knobs.compute;
  auto linear_us = [&](const OpSacLinear& l) {
    const double in = static_cast<double>(l.in), out = static_cast<double>(l.out);
    if (model != ComputeModel::kKernels) return 2.0 * T * in * out / tp / (peak * kn.gemm.dense_efficiency * Fp8GemmSpeedup(kn, precision));
    const double n = l.tp == LinearTp::kColwise ? out / tp : out, k = l.tp == LinearTp::kRowwise ? in / tp : in;
    return LinearUs(T, n, k, false, c.dense_bf16_tflops, kn, precision);
  };
  rf.attention_linears = rf.shared_linears = rf.dense_linears = 0;
  for (bool moe_layer : {false, true}) {
    for (const OpSacLinear& l : OpSacLinears(m, moe_layer)) {
      if (l.saved) continue;
      if (l.part == OpSacPart::kAttention && !moe_layer) rf.attention_linears += linear_us(l);
      if (l.part == OpSacPart::kDenseMlp) rf.dense_linears += linear_us(l);
      if (l.part == OpSacPart::kSharedExperts) rf.shared_linears += linear_us(l);
    }
  }
  rf.attention_kernels = attention_kernels_us;
  rf.tp_all_gathers = tp > 1 ? 2.0 * tp_collective_us : 0.0;
}

}  // namespace dockyard
