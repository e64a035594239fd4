// The search's fast path, the cost model's inputs (see layout_eval_internal.h): what SimulateStep
// gathers from a plan (rank 0's groups, the FSDP units of the first MoE and dense layer, the
// routing-dependent MoE phases, the step-end collectives), from the classes and the shared cache,
// and the guard that hands a candidate near the reference's overflow checks to the plan path.
#include <chrono>
#include <vector>

#include "planner/accounting/workload.h"
#include "planner/model/precision.h"
#include "planner/search/layout_eval_internal.h"
#include "planner/cost/deepep.h"
#include "planner/cost/gemm_efficiency.h"
#include "planner/cost/network.h"
#include "planner/cost/moe_phases.h"

namespace dockyard {
namespace layout_eval_detail {

bool CommVolumesNearLimit(const LayoutEvaluator::Impl& im, const ModelSpec& m, const Workload& w, const ParallelDims& d,
                          const TrainingConfig& t) {
  const int64_t oep = DispatchOep(t, im.machine, d.ep);
  const double M = static_cast<double>(t.num_microbatches.value_or(d.pp)) * static_cast<double>(t.run.grad_accumulation_steps);
  const double L = static_cast<double>(m.num_hidden_layers), T = static_cast<double>(w.tokens);
  const double H = static_cast<double>(m.hidden_size), P8 = 8.0 * static_cast<double>(im.all_params);
  const auto& a = m.attention;
  const double kv = static_cast<double>(a.num_attention_heads) *
                        static_cast<double>(a.qk_nope_head_dim + a.qk_rope_head_dim + a.v_head_dim + a.head_dim) +
                    2.0 * static_cast<double>(a.num_key_value_heads) * static_cast<double>(a.head_dim);
  const double rows = static_cast<double>(w.mean_received_rows) * H * 8.0;
  const double bound = 2.0 * (3.0 * M * P8 + 10.0 * P8 + 8.0 * L * M * T * H * 8.0 + 3.0 * L * d.cp * M * T * kv * 8.0 +
                              L * M * (4.0 * rows * (oep + 1) + 2.0 * 8.0 * m.moe.num_experts * oep) + 2.0 * M * T * H * 8.0);
  return !(bound < 4.0e18);
}

}  // namespace layout_eval_detail

using layout_eval_detail::kExactDouble;
using layout_eval_detail::UnitSums;
using layout_eval_detail::Wide;

bool LayoutEvaluator::FillStepInputs(const GroupStatics& g, const Workload& w, const ParallelDims& d, const TrainingConfig& t,
                                     StepInputs* out) {
  const Impl& im = *impl_;
  StepInputs& in = *out;
  // Rank 0's group {0, s, ..., (n-1)s}: spans nodes when its last member is on another node.
  const int64_t domain = NvlinkDomainGpus(options_.cluster);
  auto strided = [&](int64_t n, int64_t stride) {
    return CollectiveGroup{n, (n - 1) * stride / domain > 0, MembersPerDomainStrided(n, stride, domain)};
  };
  const bool megatron = d.convention == Convention::kMegatron;
  in.workload = w;
  in.kernel_memo = kernel_memo_.get();
  in.attention_params = im.attention_params;
  in.tp_group = strided(d.tp, 1);
  in.etp_group = strided(d.etp, 1);  // the sparse mesh's innermost axis
  // FSDP's inputs, as simulate.cc AddFsdpInputs forms them: nothing without FSDP (the cost model reads
  // the groups' NVLink-domain span for the NICs FSDP's rings would share with the EP all-to-alls).
  if (*t.dp_sharding == DpSharding::kFsdp) {
    const int64_t dense_dp_n = (megatron ? d.dp_replicate * d.dp_shard : d.dp_shard) * d.cp;
    const int64_t sparse_dp_n = megatron ? d.edp() : d.efsdp;
    in.dense_dp_group = strided(dense_dp_n, d.tp);
    in.sparse_dp_group = strided(sparse_dp_n, d.ep * d.etp);
    for (int which = 0; which < 2; ++which) {
      if (im.first_kind[which] < 0) continue;
      const UnitSums& u = (*g.kind_sums)[static_cast<size_t>(im.first_kind[which])];
      if (u.mp[0] >= kExactDouble || u.mp[1] >= kExactDouble) return false;
      // --fp8-param-gather: the FP8 GEMM weights among them, at most mp.
      const Wide fp8_dense = t.fp8_param_gather ? u.mp_fp8[0] : 0, fp8_sparse = t.fp8_param_gather ? u.mp_fp8[1] : 0;
      in.fsdp_layer[which] = {true, static_cast<double>(static_cast<int64_t>(u.mp[0])), static_cast<double>(static_cast<int64_t>(u.mp[1])),
                              static_cast<double>(static_cast<int64_t>(fp8_dense)), static_cast<double>(static_cast<int64_t>(fp8_sparse))};
    }
  }
  in.moe_phases = &MoePhasesOf(w, d, t);
  in.num_moe_layers = im.num_moe_layers;
  in.layer_stage = &g.split->layer_stage;
  in.layer_chunk = &g.split->layer_chunk;
  in.stage_runs = &g.split->runs;
  in.dp_step_comm_us = g.dp_step_comm_us;
  in.param_gather_dense_us = g.param_gather_dense_us;
  in.param_gather_sparse_us = g.param_gather_sparse_us;
  in.grad_reduce_dense_us = g.grad_reduce_dense_us;
  in.grad_reduce_sparse_us = g.grad_reduce_sparse_us;
  in.dense_elems_rank0 = static_cast<double>(static_cast<int64_t>(g.dense0));  // fit int64 (StaticsFor)
  in.sparse_elems_rank0 = static_cast<double>(static_cast<int64_t>(g.sparse0));
  in.grad_bytes_rank0 = static_cast<int64_t>(g.grads0);
  in.optimizer_elems_rank0 = static_cast<int64_t>(g.optimizer_elems0);
  return true;
}

const MoePhaseTimes& LayoutEvaluator::MoePhasesOf(const Workload& w, const ParallelDims& d, const TrainingConfig& t) {
  // Routing-dependent MoE phases, cached: they depend on the routing sample (ep, T_r, oep), the
  // EP group of rank 0 ({0, etp, 2 etp, ...}: the ep axis has stride etp), F / expert TP and the
  // dispatcher (with deepep, on the per-token node counts of that group).
  const ModelSpec& m = model_;
  const int64_t oep = DispatchOep(t, impl_->machine, d.ep);
  const SearchEvalCache::MoeKey key{
      d.ep, w.routed_tokens, oep, d.etp, w.expert_f_local, d.ep > 1 ? t.dispatcher : Dispatcher::kAllToAll, t.fp8_dispatch};
  const MoePhaseTimes*& seen = impl_->moe_seen[key];
  if (seen) return *seen;
  seen = &cache_->MoePhases(key, [&] {
    const auto start = std::chrono::steady_clock::now();
    std::vector<int64_t> ep_group(d.ep);
    for (int64_t i = 0; i < d.ep; ++i) ep_group[i] = i * d.etp;
    const bool flex = d.ep > 1 && t.dispatcher == Dispatcher::kDeepEp;
    const FlexRoutingResult* flex_routing = flex ? &cache_->FlexRouting(ep_group, impl_->machine.gpus_per_node, w.routed_tokens) : nullptr;
    const RoutingResult& routing = flex ? *flex_routing->routing : cache_->Routing(d.ep, w.routed_tokens, oep);
    // The shape as SimulateStep forms it (MoePhaseShapeOf), summed in integers where exact.
    MoePhaseShape shape = MoePhaseShapeOf(m, w, t, d.ep);
    shape.integer_sums = true;
    MoePhaseTimes phases =
        SimulateMoePhases(routing, ep_group, shape, options_.cluster, options_.compute_model, flex ? &flex_routing->layers : nullptr);
    cache_fill_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return phases;
  });
  return *seen;
}

}  // namespace dockyard
