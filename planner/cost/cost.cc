// Cost model (see cost.h and docs/cost-model.md).
#include "planner/cost/cost.h"

#include "planner/base/phase.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <map>
#include <optional>
#include <sstream>
#include <unordered_map>

#include <fmt/format.h>

#include "planner/cost/attention_support.h"
#include "planner/accounting/comm.h"
#include "planner/cost/deepep.h"
#include "planner/base/error.h"
#include "planner/cost/gemm_efficiency.h"
#include "planner/cost/kernels_model.h"
#include "planner/accounting/memory.h"
#include "planner/cost/network.h"
#include "planner/cost/op_sac_time.h"
#include "planner/model/pipeline_schedule.h"
#include "planner/cost/model_flops.h"
#include "planner/model/precision.h"
#include "planner/model/recompute.h"
#include "planner/accounting/workload.h"
#include "planner/cost/moe_phases.h"

namespace dockyard {

namespace {

// Unit conversions: GB/s -> bytes per microsecond, TFLOP/s -> FLOP per microsecond.
constexpr double kBytesPerUsPerGbps = 1e3;
constexpr double kFlopsPerUsPerTflops = 1e6;

}  // namespace

StageLayerRuns StageLayerRunsOf(const std::vector<bool>& moe_layers, const std::vector<int64_t>& layer_stage,
                                const std::vector<bool>* checkpointed, int64_t pp) {
  const size_t n = layer_stage.size();
  if (moe_layers.size() != n) {
    throw Error(fmt::format("stage layer runs: layer_stage has {} layers, moe_layers {}", n, moe_layers.size()));
  }
  const bool marked = checkpointed != nullptr && !checkpointed->empty();
  if (marked && checkpointed->size() != n) {
    throw Error(fmt::format("stage layer runs: layer_stage has {} layers, the checkpointed marks {}", n, checkpointed->size()));
  }
  if (pp < 1) throw Error(fmt::format("stage layer runs: pp must be >= 1, got {}", pp));
  // Each stage's runs in layer order, then laid out stage after stage.
  std::vector<std::vector<StageLayerRuns::Run>> per_stage(static_cast<size_t>(pp));
  for (size_t l = 0; l < n; ++l) {
    const int64_t s = layer_stage[l];
    if (s < 0 || s >= pp) throw Error(fmt::format("stage layer runs: layer {} is on stage {}, outside [0, {})", l, s, pp));
    const bool moe = moe_layers[l], ckpt = marked && (*checkpointed)[l];
    std::vector<StageLayerRuns::Run>& runs = per_stage[static_cast<size_t>(s)];
    if (!runs.empty() && runs.back().moe == moe && runs.back().checkpointed == ckpt) {
      ++runs.back().count;
    } else {
      runs.push_back({moe, ckpt, 1});
    }
  }
  StageLayerRuns out;
  out.stage_begin.push_back(0);
  for (const auto& runs : per_stage) {
    out.runs.insert(out.runs.end(), runs.begin(), runs.end());
    out.stage_begin.push_back(static_cast<int64_t>(out.runs.size()));
  }
  return out;
}

StageLayerRuns::Counts StageLayerRuns::CountsOf(int64_t stage) const {
  Counts c;
  for (int64_t i = stage_begin[static_cast<size_t>(stage)]; i < stage_begin[static_cast<size_t>(stage) + 1]; ++i) {
    const Run& r = runs[static_cast<size_t>(i)];
    (r.moe ? c.moe : c.dense) += r.count;
    if (r.checkpointed) (r.moe ? c.moe_checkpointed : c.dense_checkpointed) += r.count;
  }
  return c;
}

namespace {

// The phases of one layer, in the order SimulateStepFromInputs adds them, and the other
// contributors to the critical path.
// (planner/base/phase.h; the cost model predicts every phase but weight_gen.)
enum PhaseId {
  kAttention = static_cast<int>(Phase::kAttention),
  kTpComm = static_cast<int>(Phase::kTpComm),
  kRouter = static_cast<int>(Phase::kRouter),
  kPermute = static_cast<int>(Phase::kPermute),
  kDispatch = static_cast<int>(Phase::kDispatch),
  kGroupedGemm = static_cast<int>(Phase::kGroupedGemm),
  kUnpermute = static_cast<int>(Phase::kUnpermute),
  kCombine = static_cast<int>(Phase::kCombine),
  kSharedExperts = static_cast<int>(Phase::kSharedExperts),
  kFsdpComm = static_cast<int>(Phase::kFsdpComm),
  kDenseMlp = static_cast<int>(Phase::kDenseMlp),
  kLmHead = static_cast<int>(Phase::kLmHead),
  kDpStepComm = static_cast<int>(Phase::kDpStepComm),
  kOptimizer = static_cast<int>(Phase::kOptimizer),
  kCpComm = static_cast<int>(Phase::kCpComm),
  kNumPhaseIds = static_cast<int>(Phase::kWeightGen)  // the predicted phases are those before weight_gen
};
const char* PhaseNameOf(int id) {
  return PhaseName(static_cast<Phase>(id));
}

// Context parallelism's K/V exchange per layer (network.h), forward and backward: the ring's
// transfers under the attention core's blocks (`core_us` of them), or the Ulysses all-to-alls of
// Q, K, V and the output. T tokens of `ab` bytes per element, `heads_local` heads of width d_qk + d_v.
struct CpExchangeUs {
  double forward = 0, backward = 0;
};
CpExchangeUs CpExchangePerLayerUs(const ModelSpec& m, const ParallelDims& d, const TrainingConfig& t, const ClusterSpec& c, double T,
                                  double ab, double heads_local, double d_qk, double d_v, double core_us) {
  CpExchangeUs cp;
  if (d.cp <= 1) return cp;
  const int64_t domain = NvlinkDomainGpus(c);
  const bool cp_spans = (d.cp - 1) * d.tp / domain > 0;  // rank 0's cp group {0, tp, ...}
  if (t.run.cp_comm == "a2a") {
    const double width = 2.0 * heads_local * (d_qk + d_v) + static_cast<double>(CpKvWidth(m, d.tp));  // q, o, k, v
    cp.forward = CpAllToAllUs(T * width * ab, d.cp, cp_spans, c);
    cp.backward = cp.forward;
  } else {
    const double kv_bytes = T * static_cast<double>(CpKvWidth(m, d.tp)) * ab;
    cp.forward = CpRingExposedUs(kv_bytes, core_us, d.cp, cp_spans, c);
    cp.backward = CpRingExposedUs(2.0 * kv_bytes, 2.0 * core_us, d.cp, cp_spans, c);
  }
  return cp;
}

// FSDP per layer, one call each: the all-gather of the layer's parameters and the reduce-scatter of
// its gradients over rank 0's dense and sparse data-parallel groups; [0] the MoE layer, [1] the
// dense layer (StepInputs::fsdp_layer). Zero without FSDP.
struct FsdpLayerUs {
  double all_gather[2] = {0, 0}, reduce_scatter[2] = {0, 0};
};
FsdpLayerUs FsdpPerLayerUs(const TrainingConfig& t, const StepInputs& in, const ClusterSpec& c) {
  FsdpLayerUs f;
  if (*t.dp_sharding != DpSharding::kFsdp) return f;
  const int64_t param_b = DtypeBytes(t.param_dtype, "param_dtype"), grad_b = DtypeBytes(t.grad_dtype, "grad_dtype");
  const auto& dn = in.dense_dp_group;
  const auto& sp = in.sparse_dp_group;
  for (int kind = 0; kind < 2; ++kind) {
    if (!in.fsdp_layer[kind].present) continue;
    const double dense_elems = in.fsdp_layer[kind].dense_elems, sparse_elems = in.fsdp_layer[kind].sparse_elems;
    // --fp8-param-gather: the FP8 GEMM weights travel in FP8 (precision.h Fp8WeightBytesPerElement).
    const double fp8_b = Fp8WeightBytesPerElement(t);
    const double fp8_dense = in.fsdp_layer[kind].fp8_dense_elems, fp8_sparse = in.fsdp_layer[kind].fp8_sparse_elems;
    auto gathered = [&](double elems, double fp8) {  // comm.h ParamAllGatherBytes
      return static_cast<double>(
          ParamAllGatherBytes(static_cast<int64_t>(elems), static_cast<int64_t>(fp8), param_b, fp8_b, "FSDP all-gather bytes"));
    };
    f.all_gather[kind] = RingCollectiveUs(gathered(dense_elems, fp8_dense), dn.size, dn.spans_nodes, c, dn.members_per_domain) +
                         RingCollectiveUs(gathered(sparse_elems, fp8_sparse), sp.size, sp.spans_nodes, c, sp.members_per_domain);
    f.reduce_scatter[kind] = RingCollectiveUs(dense_elems * grad_b, dn.size, dn.spans_nodes, c, dn.members_per_domain) +
                             RingCollectiveUs(sparse_elems * grad_b, sp.size, sp.spans_nodes, c, sp.members_per_domain);
  }
  return f;
}

// One phase added to a layer's time: (id, MoE layer?, backward?, time, per-EP-rank source).
struct Record {
  PhaseId id;
  bool moe;
  bool backward;
  double us;
  const std::vector<double>* per_rank;  // scaled by `scale` when shown
  double scale;
};

// The dominant phase: the largest share (> 0) among those present, ties to the name that sorts
// last; -1 when none.
int DominantPhaseId(const double (&share)[kNumPhaseIds], const bool (&present)[kNumPhaseIds]) {
  int dominant = -1;
  for (int id = 0; id < kNumPhaseIds; ++id) {
    if (!present[id] || !(share[id] > 0)) continue;
    if (dominant < 0 || share[id] > share[dominant] ||
        (share[id] == share[dominant] && std::strcmp(PhaseNameOf(id), PhaseNameOf(dominant)) > 0)) {
      dominant = id;
    }
  }
  return dominant;
}

// The report's detail: every record as a PhaseCost (per EP rank where routing-dependent, with the
// slowest rank), then the critical path, the phases present by share, largest first (ties by name).
void AddPhaseDetail(const Record* records, int num_records, const double (&share)[kNumPhaseIds], const bool (&present)[kNumPhaseIds],
                    CostBreakdown& out) {
  for (int i = 0; i < num_records; ++i) {
    const Record& r = records[i];
    PhaseCost p;
    p.name = PhaseNameOf(r.id);
    p.layer_kind = r.moe ? "moe" : "dense";
    p.direction = r.backward ? "backward" : "forward";
    p.time_us = r.us;
    if (r.per_rank && !r.per_rank->empty()) {
      p.per_ep_rank_us = *r.per_rank;
      for (auto& x : p.per_ep_rank_us) x *= r.scale;
      auto it = std::max_element(p.per_ep_rank_us.begin(), p.per_ep_rank_us.end());
      p.slowest_ep_rank = it - p.per_ep_rank_us.begin();
    }
    out.phases.push_back(std::move(p));
  }
  std::vector<std::pair<double, std::string>> ranked;
  for (int id = 0; id < kNumPhaseIds; ++id) {
    if (present[id]) ranked.push_back({share[id], PhaseNameOf(id)});
  }
  std::sort(ranked.rbegin(), ranked.rend());
  for (const auto& [v, n] : ranked) {
    if (!(v > 0)) continue;
    out.critical_path.push_back(n);
    out.critical_path_us.push_back(v);
  }
}

// One micro-batch's forward + backward on every pipeline stage: its layers (those per-layer
// selective checkpointing checkpoints at the recompute-full run's time, from `out`), lm_head on
// the loss stage, each MTP module's eh_proj, layer and logits on the MTP stage, its p2p sends. `worst` is the
// slowest stage's time -- with DualPipe the slowest rank's, the mean of its two stages -- and
// `slowest` that stage.
struct StageWalk {
  double worst = 0;
  int64_t slowest = 0;
};
StageWalk WalkStages(const ModelSpec& m, const ParallelDims& d, const TrainingConfig& t, const StageLayerRuns& runs,
                     const CostBreakdown& out, int64_t loss_stage, int64_t mtp_stage, double lm_head_us, double eh_proj_us, double p2p_us) {
  double worst_stage = 0;
  int64_t slowest_stage = 0;
  // [pp]: forward + backward of one micro-batch on each stage. The last stage (a layout's loss
  // stage) runs lm_head and, with --mtp-layers, each MTP module's eh_proj, layer and logits (on a
  // layout's MTP stage); then each stage adds its layers one by one in layer order (its runs).
  const double mtp_us =
      static_cast<double>(t.mtp_layers) * (eh_proj_us + (m.moe_layers.back() ? out.moe_layer_us : out.dense_layer_us) + lm_head_us);
  constexpr int64_t kInline = 64;  // stages kept on the stack (no allocation per step)
  double inline_us[kInline];
  std::vector<double> heap_us;
  if (d.pp > kInline) heap_us.resize(static_cast<size_t>(d.pp));
  double* const stage_us = d.pp > kInline ? heap_us.data() : inline_us;
  for (int64_t s = 0; s < d.pp; ++s) {
    double stage = (s == loss_stage ? lm_head_us : 0.0) + (s == mtp_stage ? mtp_us : 0.0) + p2p_us;
    for (int64_t i = runs.stage_begin[static_cast<size_t>(s)]; i < runs.stage_begin[static_cast<size_t>(s) + 1]; ++i) {
      const StageLayerRuns::Run& r = runs.runs[static_cast<size_t>(i)];
      const double layer_us = r.checkpointed ? (r.moe ? out.checkpointed_moe_layer_us : out.checkpointed_dense_layer_us)
                                             : (r.moe ? out.moe_layer_us : out.dense_layer_us);
      for (int64_t k = 0; k < r.count; ++k) stage += layer_us;  // one addition per layer, in layer order (the sum's rounding)
    }
    stage_us[s] = stage;
    if (stage > worst_stage) {
      worst_stage = stage;
      slowest_stage = s;
    }
  }
  // DualPipe: rank s runs stage s and stage pp - 1 - s, half the micro-batches each, so a rank's
  // time per micro-batch is the mean of the two stages'.
  if (IsDualPipe(t.run)) {
    worst_stage = 0;
    for (int64_t s = 0; s < d.pp; ++s) worst_stage = std::max(worst_stage, (stage_us[s] + stage_us[DualPipeMirrorStage(d.pp, s)]) / 2.0);
  }
  return {worst_stage, slowest_stage};
}

// The forward part of one micro-batch on the slowest stage: its layers' forward times, lm_head's
// forward third on the loss stage, half its p2p sends.
double SlowestStageForwardUs(const StageLayerRuns& runs, int64_t slowest_stage, double moe_fwd, double dense_fwd, bool loss_stage,
                             double lm_head_us, double p2p_us) {
  const StageLayerRuns::Counts n = runs.CountsOf(slowest_stage);
  return static_cast<double>(n.moe) * moe_fwd + static_cast<double>(n.dense) * dense_fwd + (loss_stage ? lm_head_us / 3.0 : 0.0) +
         p2p_us / 2.0;
}

// The data-parallel step communication left exposed: Megatron's overlapped gradient reduce (under
// the slowest stage's last backward, `stage_bwd_us`) and parameter gather (under its first forward,
// `stage_fwd_us`) leave only what exceeds that compute (ExposedUs).
double ExposedDpStepCommUs(const StepInputs& in, const RunSettings& run, double stage_fwd_us, double stage_bwd_us) {
  const double param_us = in.dp_step_param_gather_us, grad_us = in.dp_step_comm_us - param_us;
  return (run.overlap_grad_reduce ? ExposedUs(grad_us, stage_bwd_us) : grad_us) +
         (run.overlap_param_gather ? ExposedUs(param_us, stage_fwd_us) : param_us);
}

// Each phase's share of the step from the layers of the slowest stage: a record counts once per
// such layer of its kind per pipeline slot (`slots`); checkpointed layers (per-layer selective
// checkpointing) at the recompute-full run's phase time (`checkpointed`, whose records come in the
// same order).
struct PhaseShares {
  double share[kNumPhaseIds] = {};
  bool present[kNumPhaseIds] = {};
};
PhaseShares LayerPhaseShares(const StageLayerRuns& runs, int64_t slowest_stage, const Record* records, int num_records,
                             const CostBreakdown& checkpointed, double slots) {
  PhaseShares p;
  const StageLayerRuns::Counts n = runs.CountsOf(slowest_stage);
  const int64_t moe_count = n.moe, dense_count = n.dense, moe_checkpointed = n.moe_checkpointed, dense_checkpointed = n.dense_checkpointed;
  if (moe_checkpointed == 0 && dense_checkpointed == 0) {
    // No layer of the stage checkpointed: the sum below with its checkpointed term zero (the
    // same value: x + 0 x 0 is x).
    const double layers[2] = {static_cast<double>(dense_count), static_cast<double>(moe_count)};
    for (int i = 0; i < num_records; ++i) {
      const Record& r = records[i];
      p.share[r.id] += r.us * layers[r.moe] * slots;
      p.present[r.id] = true;
    }
    return p;
  }
  for (int i = 0; i < num_records; ++i) {
    const Record& r = records[i];
    const int64_t n_checkpointed = r.moe ? moe_checkpointed : dense_checkpointed;
    const double us_checkpointed = n_checkpointed > 0 ? checkpointed.phases.at(i).time_us : 0.0;
    p.share[r.id] += (r.us * static_cast<double>((r.moe ? moe_count : dense_count) - n_checkpointed) +
                      us_checkpointed * static_cast<double>(n_checkpointed)) *
                     slots;
    p.present[r.id] = true;
  }
  return p;
}

// One phase added to a layer's time, in the order they are added (Record); at most 32.
struct PhaseRecords {
  Record at[32];
  int size = 0;
  // Records phase `id` of the MoE (`moe`) or dense layer in `pass` (0 forward, 1 backward): `us`
  // its time, `per_rank` (routing-dependent phases) shown per EP rank times `scale`; returns us.
  double Add(PhaseId id, bool moe, int pass, double us, const std::vector<double>* per_rank = nullptr, double scale = 1.0) {
    at[size++] = {id, moe, pass == 1, us, per_rank, scale};
    return us;
  }
};

// torchtitan's per-layer selective checkpointing (recompute.h): one layer in `every` of each stage
// checkpointed (0: none), costing what it costs under recompute full (`checkpointed`: that run's
// layer times and phases, us, detail on); `layer_checkpointed` [num_hidden_layers] marks them
// (empty when every is 0).
struct LayerSac {
  int64_t every = 0;
  CostBreakdown checkpointed;
  std::vector<bool> layer_checkpointed;
};
LayerSac LayerSacOf(const ModelSpec& m, const ParamTotals& totals, const ParallelDims& d, const TrainingConfig& t, const ClusterSpec& c,
                    const StepInputs& in, ComputeModel model) {
  LayerSac sac;
  if (const int64_t every = LayerSacEvery(t); every > 0) {
    TrainingConfig full = t;
    full.recompute = Recompute::kFull;
    full.selective_ac_option.clear();
    sac.every = every;
    sac.checkpointed = SimulateStepFromInputs(m, totals, d, full, c, in, model, /*detail=*/true);
    sac.layer_checkpointed = LayerSacCheckpointed(*in.layer_stage, every);
  }
  return sac;
}

// The memory-bound kernels selective recomputation re-runs that depend only on the layer's shape
// (--compute-model kernels): the attention block's norms, the shared experts' and the dense
// MLP's SwiGLU, forward, us (MemoryBoundUs). The routed SwiGLU depends on the routing sample.
struct SelectiveKernelsUs {
  double norms = 0, shared_act = 0, dense_act = 0;
};
SelectiveKernelsUs SelectiveKernelsOf(const ModelSpec& m, const KernelShape& ks, const MemoryBoundKnobs& o, double hbm_gbps) {
  auto mem = [&](const std::vector<KernelBytes>& k) { return MemoryBoundUs(k, hbm_gbps, o.hbm_efficiency, o.floor_us); };
  SelectiveKernelsUs s;
  std::vector<KernelBytes> norms;
  for (const KernelBytes& k : AttentionBlockKernels(m, ks, false)) {
    if (k.name.find("norm") != std::string::npos && k.name != "qk_norm") norms.push_back(k);
  }
  s.norms = mem(norms);
  if (m.moe.num_shared_experts > 0)
    s.shared_act = mem({SwigluKernel(ks.tokens, m.moe.shared_expert_intermediate_size / ks.tp, ks.act_bytes, false)});
  s.dense_act = mem({SwigluKernel(ks.tokens, m.intermediate_size / ks.tp, ks.act_bytes, false)});
  return s;
}

// The figures every phase of one layer reads: the run's inputs, unit rates, the micro-batch's shape
// and each compute phase's forward time at the fixed efficiencies (us per layer and micro-batch).
struct LayerTerms {
  LayerTerms(const ModelSpec& m_, const ParallelDims& d_, const TrainingConfig& t_, const ClusterSpec& c_, const StepInputs& in_,
             ComputeModel model_)
      : m(m_), d(d_), t(t_), c(c_), in(in_), kn(c_.knobs.compute), kernels(model_ == ComputeModel::kKernels), precision(GemmPrecisionOf(t_)) {}
  const ModelSpec& m;
  const ParallelDims& d;
  const TrainingConfig& t;
  const ClusterSpec& c;
  const StepInputs& in;
  const ComputeKnobs& kn;                      // the cluster's compute knobs
  bool kernels;                                // ComputeModel::kKernels (else the fixed-efficiency gemm model)
  GemmPrecision precision;                     // the training config's FP8 GEMMs
  double peak = 0;                             // dense BF16 FLOP per microsecond
  double hbm = 0;                              // HBM bytes per microsecond
  double T = 0, D = 0, ab = 0, tp = 0, E = 0;  // tokens, hidden size, bytes per activation element, tp, num_experts
  double fp8x = 1;                             // FP8 GEMM speedup of projections and MLPs (gemm_efficiency.h Fp8GemmSpeedup)
  // Backward computes input and weight gradients (2x the forward FLOPs); with full
  // recomputation it first re-runs the forward, communication included (3x compute, 2x comm).
  bool full_recompute = false;
  double bwd_compute = 2.0, bwd_comm = 1.0;
  KernelShape ks;                // the layer's shape for the kernel model and the selective-recompute kernels (kernels_model.h)
  KernelExtrasUs kx;             // memory-bound kernels and launch gaps (zero unless --compute-model kernels)
  ShapedComputeUs sc;            // GEMMs and flash attention by shape (gemm_efficiency.h; --compute-model kernels only)
  SelectiveKernelsUs selective;  // what selective recomputation re-runs of the memory-bound kernels (--compute-model kernels only)
  double heads_local = 0, d_qk = 0, d_v = 0;              // attention heads on a rank and their q/k and v widths
  double core_flops = 0;                                  // the causal attention core, FLOP
  double attention_us = 0;                                // attention forward: projections and core
  CpExchangeUs cp;                                        // context parallelism's K/V exchange
  double tp_collective = 0;                               // one tp ring collective of the layer's T x D activations
  double router_us = 0, shared_us = 0, dense_mlp_us = 0;  // forward times
  // The multipliers of a forward time in `pass` (0 forward, 1 backward): compute and communication.
  double ComputeMult(int pass) const { return pass == 0 ? 1.0 : bwd_compute; }
  double CommMult(int pass) const { return pass == 0 ? 1.0 : bwd_comm; }
  // A compute phase in `pass` (us): by shape under --compute-model kernels (`shaped`, the backward
  // after the forward's re-run under full recomputation), else `fwd_us` times `mult`.
  double Compute(double fwd_us, const double (&shaped)[2], int pass, double mult) const {
    if (!kernels) return fwd_us * mult;
    return shaped[pass] + (pass == 1 && full_recompute ? shaped[0] : 0.0);
  }
};
}  // namespace

class KernelTermsMemo {
 public:
  struct Terms {
    KernelExtrasUs kx;
    ShapedComputeUs sc;
    SelectiveKernelsUs selective;
  };
  // The terms of `ks` under the rest of the key (the GEMMs' precision and the run settings the
  // kernel model reads are part of it), `compute()` on a miss.
  template <class Compute>
  const Terms& Get(const ModelSpec& m, const ClusterSpec& c, const KernelShape& ks, bool full_recompute, double seq_len,
                   GemmPrecision precision, const RunSettings& run, Compute compute) {
    if (!model_) {
      model_ = &m, cluster_ = &c;
    } else if (model_ != &m || cluster_ != &c) {
      throw Error("internal: a KernelTermsMemo was used with another model or cluster");
    }
    const Key key{ks.tokens, ks.sp_tokens, ks.router_tokens, ks.tp, ks.act_bytes, seq_len, full_recompute, precision.fp8, precision.blockwise,
                  run.cuda_graphs, run.fused_cross_entropy};
    auto it = terms_.find(key);
    if (it == terms_.end()) it = terms_.emplace(key, compute()).first;
    return it->second;
  }

  // model_flops.h ModelFlopsPerToken of the memo's model (the last (seq_len, mtp_layers) asked).
  double ModelFlops(const ModelSpec& m, int64_t seq_len, int64_t mtp_layers) {
    if (model_ && model_ != &m) throw Error("internal: a KernelTermsMemo was used with another model");
    if (!(flops_model_ == &m && flops_seq_len_ == seq_len && flops_mtp_ == mtp_layers)) {
      flops_ = ModelFlopsPerToken(m, seq_len, mtp_layers);
      flops_model_ = &m, flops_seq_len_ = seq_len, flops_mtp_ = mtp_layers;
    }
    return flops_;
  }

 private:
  struct Key {
    double tokens, sp_tokens, router_tokens, tp, act_bytes, seq_len;
    bool full_recompute, fp8_gemms, fp8_blockwise, cuda_graphs, fused_cross_entropy;
    bool operator==(const Key& k) const {
      return tokens == k.tokens && sp_tokens == k.sp_tokens && router_tokens == k.router_tokens && tp == k.tp && act_bytes == k.act_bytes &&
             seq_len == k.seq_len && full_recompute == k.full_recompute && fp8_gemms == k.fp8_gemms && fp8_blockwise == k.fp8_blockwise &&
             cuda_graphs == k.cuda_graphs && fused_cross_entropy == k.fused_cross_entropy;
    }
  };
  struct KeyHash {
    size_t operator()(const Key& k) const {
      // The doubles' bits, mixed (std::hash<double> hashes bytes out of line).
      uint64_t h = 0;
      for (double x : {k.tokens, k.sp_tokens, k.router_tokens, k.tp, k.act_bytes, k.seq_len}) {
        uint64_t bits;
        std::memcpy(&bits, &x, sizeof bits);
        h = (h ^ bits) * 0x9E3779B97F4A7C15ull;
        h ^= h >> 29;
      }
      return static_cast<size_t>(h * 31u + (k.cuda_graphs ? 16u : 0u) + (k.fused_cross_entropy ? 8u : 0u) + (k.full_recompute ? 4u : 0u) +
                                 (k.fp8_gemms ? 2u : 0u) + (k.fp8_blockwise ? 1u : 0u));
    }
  };
  const ModelSpec* model_ = nullptr;
  const ClusterSpec* cluster_ = nullptr;
  std::unordered_map<Key, Terms, KeyHash> terms_;
  const ModelSpec* flops_model_ = nullptr;
  int64_t flops_seq_len_ = -1, flops_mtp_ = -1;
  double flops_ = 0;
};

void KernelTermsMemoDeleter::operator()(KernelTermsMemo* memo) const {
  delete memo;
}

KernelTermsMemoPtr MakeKernelTermsMemo() {
  return KernelTermsMemoPtr(new KernelTermsMemo);
}

namespace {

LayerTerms LayerTermsOf(const ModelSpec& m, const ParallelDims& d, const TrainingConfig& t, const ClusterSpec& c, const StepInputs& in,
                        ComputeModel model) {
  LayerTerms L(m, d, t, c, in, model);
  const ComputeKnobs& kn = L.kn;
  const auto& a = m.attention;
  const Workload& w = in.workload;
  L.peak = c.dense_bf16_tflops * kFlopsPerUsPerTflops;  // FLOP per microsecond
  L.hbm = c.hbm_gbps * kBytesPerUsPerGbps;
  L.T = static_cast<double>(w.tokens);
  L.D = static_cast<double>(m.hidden_size), L.ab = static_cast<double>(w.act_bytes);
  L.tp = static_cast<double>(d.tp);
  L.E = static_cast<double>(m.moe.num_experts);
  const double peak = L.peak, T = L.T, D = L.D, ab = L.ab, tp = L.tp, E = L.E;
  // Attention: projections from the parameter count of one layer, core from the context.
  const double attn_params = in.attention_params;
  L.heads_local = a.num_attention_heads / tp;
  L.d_qk = a.kind == AttentionKind::kMla ? a.qk_nope_head_dim + a.qk_rope_head_dim : a.head_dim;
  L.d_v = a.kind == AttentionKind::kMla ? a.v_head_dim : a.head_dim;
  // Causal attention: each of the T local tokens attends on average to half of the sequence.
  L.core_flops = 2.0 * T * (t.seq_len / 2.0) * L.heads_local * (L.d_qk + L.d_v);
  // FP8 GEMMs (gemm_efficiency.h Fp8GemmSpeedup) speed up the projections, not the flash core.
  L.fp8x = Fp8GemmSpeedup(kn, L.precision);
  L.attention_us = 2.0 * T * attn_params / tp / (peak * kn.gemm.dense_efficiency * L.fp8x) + L.core_flops / (peak * kn.flash.fixed_efficiency);
  // Context parallelism's K/V exchange per layer (network.h): the ring's transfers under the
  // attention core's blocks, or the Ulysses all-to-alls of Q, K, V and the output.
  L.cp = CpExchangePerLayerUs(m, d, t, c, T, ab, L.heads_local, L.d_qk, L.d_v, L.core_flops / (peak * kn.flash.fixed_efficiency));
  L.tp_collective = RingCollectiveUs(T * D * ab, in.tp_group.size, in.tp_group.spans_nodes, c, in.tp_group.members_per_domain);
  L.router_us = std::max(2.0 * static_cast<double>(w.dispatch_tokens) * D * E / (peak * kn.gemm.dense_efficiency), kn.memory_bound.floor_us);
  L.shared_us =
      m.moe.num_shared_experts > 0 ? 6.0 * T * D * m.moe.shared_expert_intermediate_size / tp / (peak * kn.gemm.dense_efficiency * L.fp8x) : 0.0;
  L.dense_mlp_us = m.intermediate_size > 0 ? 6.0 * T * D * m.intermediate_size / tp / (peak * kn.gemm.dense_efficiency * L.fp8x) : 0.0;
  L.full_recompute = t.recompute == Recompute::kFull;
  L.bwd_compute = L.full_recompute ? 3.0 : 2.0, L.bwd_comm = L.full_recompute ? 2.0 : 1.0;
  L.ks = KernelShape{T, static_cast<double>((w.tokens + d.tp - 1) / d.tp), static_cast<double>(w.dispatch_tokens), tp, ab};
  if (L.kernels) {
    auto compute = [&] {
      return KernelTermsMemo::Terms{KernelExtras(m, L.ks, kn.memory_bound, t.run, c.hbm_gbps, L.full_recompute),
                                    ShapedCompute(m, T, static_cast<double>(w.dispatch_tokens), tp, static_cast<double>(t.seq_len),
                                                  c.dense_bf16_tflops, kn, L.precision, c.hbm_gbps),
                                    SelectiveKernelsOf(m, L.ks, kn.memory_bound, c.hbm_gbps)};
    };
    const KernelTermsMemo::Terms terms =
        in.kernel_memo ? in.kernel_memo->Get(m, c, L.ks, L.full_recompute, static_cast<double>(t.seq_len), L.precision, t.run, compute)
                       : compute();
    L.kx = terms.kx;
    L.sc = terms.sc;
    L.selective = terms.selective;
  }
  return L;
}

// FSDP per layer: all-gathers of the layer's parameters and reduce-scatters of its gradients,
// each overlapped with the compute of the micro-batch that carries it (the micro-batch takes the
// longer of the two); how many of the M micro-batches carry one follows the reshard-after-forward
// policy and pp (pipeline_schedule.h FsdpCallsPerStep). `kind` 0 is the MoE layer, 1 the dense one.
struct FsdpSchedule {
  FsdpLayerUs us;  // one call each
  int64_t num_mb = 1;
  FsdpCalls calls;
  bool spans = false;  // a data-parallel group crosses NVLink domains
  int64_t AllGathers(int pass) const { return pass == 0 ? calls.forward_all_gathers : calls.backward_all_gathers; }
  int64_t ReduceScatters(int pass) const { return pass == 0 ? 0 : calls.reduce_scatters; }
  // One layer direction's mean time per micro-batch (us) with `compute_us` under its collectives;
  // FSDP's rings and the EP all-to-alls (`a2a_us`) share the NICs when both cross NVLink domains
  // (network.h): the all-to-all's time is added to the FSDP traffic of the micro-batches that carry some.
  double LayerUs(int kind, int pass, double compute_us, double a2a_us, bool a2a_spans) const {
    return FsdpLayerMeanUs(compute_us, us.all_gather[kind], us.reduce_scatter[kind], AllGathers(pass), ReduceScatters(pass), num_mb,
                           NicContentionUs(a2a_us, spans, a2a_spans));
  }
  // The FSDP traffic of one layer direction per micro-batch (us), as the phase shows it.
  double MeanUs(int kind, int pass) const {
    return (us.all_gather[kind] * static_cast<double>(AllGathers(pass)) +
            us.reduce_scatter[kind] * static_cast<double>(ReduceScatters(pass))) /
           static_cast<double>(num_mb);
  }
};
FsdpSchedule FsdpScheduleOf(const ParallelDims& d, const TrainingConfig& t, const StepInputs& in, const ClusterSpec& c) {
  FsdpSchedule f;
  f.us = FsdpPerLayerUs(t, in, c);
  f.num_mb = t.num_microbatches.value_or(d.pp);
  f.calls = FsdpCallsPerStep(t.run.reshard_after_forward, d.pp, f.num_mb);
  f.spans = in.dense_dp_group.spans_nodes || in.sparse_dp_group.spans_nodes;
  return f;
}

// Selective recomputation by module (recompute.h): the forward time (us) of each piece the backward
// may re-run; the norm and SwiGLU kernels cost time only under --compute-model kernels. All zero
// unless recompute is selective; the dense MLP's is the caller's (after the MoE layer).
RecomputeForwardUs RecomputeForwardOf(const LayerTerms& L, const MoePhaseTimes& mp) {
  RecomputeForwardUs rf;
  const ModelSpec& m = L.m;
  const TrainingConfig& t = L.t;
  const ClusterSpec& c = L.c;
  const ComputeKnobs& kn = L.kn;
  const Workload& w = L.in.workload;
  const auto& a = m.attention;
  const double T = L.T, ab = L.ab, tp = L.tp, peak = L.peak, fp8x = L.fp8x, heads_local = L.heads_local, d_qk = L.d_qk;
  const double core_flops = L.core_flops;
  if (t.recompute != Recompute::kSelective) return rf;
  auto mem = [&](const std::vector<KernelBytes>& k) { return MemoryBoundUs(k, c.hbm_gbps, kn.memory_bound.hbm_efficiency, kn.memory_bound.floor_us); };
  if (L.kernels) {
    rf.norms = L.selective.norms;
    // The routed SwiGLU re-runs on the rows the routing sample sends the slowest rank (the
    // forward's, SimulateMoePhases), not on the memory-sizing bound (training.imbalance).
    const double sampled_rows = static_cast<double>(w.mean_received_rows) * mp.imbalance;
    rf.routed_act = MemoryBoundUs(SwigluKernel(sampled_rows, static_cast<double>(w.expert_f_local), ab, false), c.hbm_gbps,
                                  kn.memory_bound.hbm_efficiency, kn.memory_bound.floor_us);
    rf.shared_act = L.selective.shared_act;
    rf.dense_act = L.selective.dense_act;
  }
  rf.attention_core = L.kernels
                          ? core_flops / (peak * FlashAttentionEfficiency(d_qk, static_cast<double>(t.seq_len), true, false, kn))
                          : core_flops / (peak * kn.flash.fixed_efficiency);
  if (a.kind == AttentionKind::kMla) {
    const double q_b_n = heads_local * d_qk, kv_b_n = heads_local * (a.qk_nope_head_dim + a.v_head_dim);
    const double q_b_k = a.q_lora_rank > 0 ? static_cast<double>(a.q_lora_rank) : 0.0;
    const double kv_b_k = static_cast<double>(a.kv_lora_rank);
    rf.mla_up_proj = L.kernels ? LinearUs(T, q_b_n, q_b_k, false, c.dense_bf16_tflops, kn, L.precision) +
                                            LinearUs(T, kv_b_n, kv_b_k, false, c.dense_bf16_tflops, kn, L.precision)
                                      : 2.0 * T * (q_b_n * q_b_k + kv_b_n * kv_b_k) / (peak * kn.gemm.dense_efficiency * fp8x);
  }
  rf.router = L.Compute(L.router_us, L.sc.router, 0, 1.0) + L.kx.router[0];
  rf.permute = rf.unpermute = mp.permute_max;
  rf.dispatch = mp.dispatch_max;
  rf.combine = mp.combine_max;
  rf.grouped_gemm = mp.gemm_max + L.kx.grouped_gemm[0];
  rf.shared_experts = L.Compute(L.shared_us, L.sc.shared_experts, 0, 1.0) + L.kx.shared_experts[0];
  if (OpSac(t))
    OpSacForwardUs(m, T, tp, L.kernels ? mem(AttentionBlockKernels(m, L.ks, false)) : 0.0, L.tp_collective, c, peak, L.kernels ? ComputeModel::kKernels : ComputeModel::kGemm, L.precision, rf);
  return rf;
}

// What the backward re-runs of each phase (us): per-op checkpointing's set or the module set `rs`.
RecomputeExtraUs RecomputeExtraOf(const TrainingConfig& t, const RecomputeSet& rs, const RecomputeForwardUs& rf) {
  return OpSac(t) ? OpSacRecomputeUs(rf) : SelectiveRecomputeUs(rs, rf);
}

// A recomputation time (us) in `pass`: recomputation runs in the backward only.
double BackwardOnly(double extra, int pass) {
  return pass == 1 ? extra : 0.0;
}

// The attention phase of one layer, forward [0] and backward [1] (us): projections and core, the
// kernel model's extras and what recomputation re-runs (context parallelism's exchange is the
// cp_comm phase, AddCpComm).
std::array<double, 2> AttentionPhaseUs(const LayerTerms& L, const RecomputeExtraUs& rx) {
  std::array<double, 2> us;
  for (int pass = 0; pass < 2; ++pass) {
    us[pass] =
        L.Compute(L.attention_us, L.sc.attention, pass, L.ComputeMult(pass)) + L.kx.attention[pass] + BackwardOnly(rx.attention, pass);
  }
  return us;
}

// Records the cp_comm phase of a layer in `pass` when context parallelism is on (cp > 1; no row
// otherwise) and returns its time (us; 0 with cp 1): the K/V exchange, CpExchangePerLayerUs, the
// backward's after the forward's again under full recomputation. It runs beside the attention
// core and is added right after the attention phase, so the layer's sum is the same sum of the
// same terms in the same order as when it was part of that phase.
double AddCpComm(const LayerTerms& L, bool moe, int pass, PhaseRecords& records) {
  if (L.d.cp <= 1) return 0.0;
  return records.Add(kCpComm, moe, pass, pass == 0 ? L.cp.forward : L.cp.backward + (L.full_recompute ? L.cp.forward : 0.0));
}

// The tensor-parallel communication of one layer, forward [0] and backward [1] (us): four tp
// collectives and what recomputation re-runs.
std::array<double, 2> TpCommPhaseUs(const LayerTerms& L, const RecomputeExtraUs& rx) {
  std::array<double, 2> us;
  for (int pass = 0; pass < 2; ++pass) us[pass] = 4 * L.tp_collective * L.CommMult(pass) + BackwardOnly(rx.tp_comm, pass);
  return us;
}

// The backward dispatch per EP rank (us): BF16 rows (dispatch_bwd), after the forward's again under
// full recomputation.
std::vector<double> BackwardDispatchRanks(const MoePhaseTimes& mp, bool full_recompute) {
  std::vector<double> dispatch_bwd_ranks = mp.dispatch_bwd;
  for (size_t r = 0; r < dispatch_bwd_ranks.size() && full_recompute; ++r) dispatch_bwd_ranks[r] += mp.dispatch[r];
  return dispatch_bwd_ranks;
}

// One layer of one micro-batch, forward and backward (us).
struct LayerUs {
  double fwd = 0, bwd = 0;
};

// Per direction of the MoE layer (us): its phases' sum, its EP all-to-alls, the rest of it, and
// the records of its dispatch and combine phases (for --overlap-moe-expert-parallel-comm).
struct MoePassSums {
  double sum[2] = {0, 0}, a2a[2] = {0, 0}, rest[2] = {0, 0};
  int a2a_record[2][2] = {{-1, -1}, {-1, -1}};
};

// Records the MoE layer's phases, forward then backward (us per layer and micro-batch; the
// routing-dependent ones per EP rank from `mp`, the backward dispatch from `dispatch_bwd_ranks`,
// which must outlive `records`), and returns each direction's sums.
MoePassSums AddMoeLayerPhases(const LayerTerms& L, const MoePhaseTimes& mp, const RecomputeExtraUs& rx,
                              const std::vector<double>& dispatch_bwd_ranks, const FsdpSchedule& fsdp, PhaseRecords& records) {
  MoePassSums s;
  const std::array<double, 2> attention = AttentionPhaseUs(L, rx), tp_comm = TpCommPhaseUs(L, rx);
  // The dispatch per pass: the forward's (FP8 rows with --fp8-dispatch); the backward's in BF16
  // (dispatch_bwd), after the forward's again under full recomputation.
  const double dispatch_us[2] = {mp.dispatch_max, mp.dispatch_bwd_max + (L.full_recompute ? mp.dispatch_max : 0.0)};
  for (int pass = 0; pass < 2; ++pass) {
    const double mult = L.ComputeMult(pass);
    const double cmult = L.CommMult(pass);
    double sum = 0;
    sum += records.Add(kAttention, true, pass, attention[pass]);
    sum += AddCpComm(L, true, pass, records);
    sum += records.Add(kTpComm, true, pass, tp_comm[pass]);
    sum += records.Add(kRouter, true, pass,
                       L.Compute(L.router_us, L.sc.router, pass, mult) + L.kx.router[pass] + BackwardOnly(rx.router, pass));
    sum += records.Add(kPermute, true, pass, mp.permute_max * cmult + BackwardOnly(rx.permute, pass), &mp.permute, cmult);
    s.a2a_record[pass][0] = records.size;
    sum += records.Add(kDispatch, true, pass, dispatch_us[pass] + BackwardOnly(rx.dispatch, pass),
                       pass == 0 ? &mp.dispatch : &dispatch_bwd_ranks);
    sum += records.Add(kGroupedGemm, true, pass, mp.gemm_max * mult + L.kx.grouped_gemm[pass] + BackwardOnly(rx.grouped_gemm, pass),
                       &mp.gemm, mult);
    sum += records.Add(kUnpermute, true, pass, mp.permute_max * cmult + BackwardOnly(rx.unpermute, pass), &mp.permute, cmult);
    s.a2a_record[pass][1] = records.size;
    const double comb = records.Add(kCombine, true, pass, mp.combine_max * cmult + BackwardOnly(rx.combine, pass), &mp.combine, cmult);
    const double shared = records.Add(
        kSharedExperts, true, pass,
        L.Compute(L.shared_us, L.sc.shared_experts, pass, mult) + L.kx.shared_experts[pass] + BackwardOnly(rx.shared_experts, pass));
    sum += L.t.run.overlap_shared_experts && !EpCommOverlapped(L.t.run) ? std::max(comb, shared) : comb + shared;
    records.Add(kFsdpComm, true, pass, fsdp.MeanUs(0, pass));
    s.sum[pass] = sum;
    s.a2a[pass] = dispatch_us[pass] + mp.combine_max * cmult + BackwardOnly(rx.dispatch, pass) + BackwardOnly(rx.combine, pass);
    s.rest[pass] = sum - s.a2a[pass];
  }
  return s;
}

// Megatron's --overlap-moe-expert-parallel-comm: one micro-batch's all-to-alls run under another
// micro-batch's compute of the other direction (pipeline_schedule.h EpOverlapExposedUs); the
// dispatch and combine records are scaled to what stays exposed, and each direction's sum becomes
// the rest plus that (us).
void OverlapEpComm(MoePassSums& s, PhaseRecords& records) {
  const EpOverlap ov = EpOverlapExposedUs(s.a2a[0], s.a2a[1], s.rest[0], s.rest[1]);
  const double exposed[2] = {ov.forward_exposed_us, ov.backward_exposed_us};
  for (int pass = 0; pass < 2; ++pass) {
    const double f = s.a2a[pass] > 0 ? exposed[pass] / s.a2a[pass] : 0.0;
    for (int which = 0; which < 2; ++which) {
      Record& r = records.at[s.a2a_record[pass][which]];
      r.us *= f;
      r.scale *= f;
    }
    s.sum[pass] = s.rest[pass] + exposed[pass];
  }
}

// The MoE layer of one micro-batch, forward and backward (us), its phases recorded (AddMoeLayerPhases),
// the EP all-to-alls overlapped where the run says so, and FSDP's collectives overlapped with it.
LayerUs MoeLayerUs(const LayerTerms& L, const MoePhaseTimes& mp, const RecomputeExtraUs& rx, const std::vector<double>& dispatch_bwd_ranks,
                   const FsdpSchedule& fsdp, PhaseRecords& records) {
  MoePassSums s = AddMoeLayerPhases(L, mp, rx, dispatch_bwd_ranks, fsdp, records);
  if (EpCommOverlapped(L.t.run) && L.d.ep > 1) OverlapEpComm(s, records);
  LayerUs u;
  for (int pass = 0; pass < 2; ++pass) {
    // FSDP's rings and the EP all-to-alls share the NICs when both cross NVLink domains (network.h).
    (pass == 0 ? u.fwd : u.bwd) = fsdp.LayerUs(0, pass, s.sum[pass], s.a2a[pass], mp.spans_domains);
  }
  return u;
}

// The dense layer of one micro-batch, forward and backward (us; zero when the model has none): its
// attention, tp communication and dense MLP recorded, FSDP's collectives overlapped with them.
LayerUs DenseLayerUs(const LayerTerms& L, const RecomputeExtraUs& rx, const FsdpSchedule& fsdp, PhaseRecords& records) {
  LayerUs u;
  if (!(L.in.num_moe_layers < L.m.num_hidden_layers)) return u;
  const std::array<double, 2> attention = AttentionPhaseUs(L, rx), tp_comm = TpCommPhaseUs(L, rx);
  for (int pass = 0; pass < 2; ++pass) {
    const double mult = L.ComputeMult(pass);
    double sum =
        records.Add(kAttention, false, pass, attention[pass]) + AddCpComm(L, false, pass, records) +
        records.Add(kTpComm, false, pass, tp_comm[pass]) +
        records.Add(kDenseMlp, false, pass,
                    L.Compute(L.dense_mlp_us, L.sc.dense_mlp, pass, mult) + L.kx.dense_mlp[pass] + BackwardOnly(rx.dense_mlp, pass));
    records.Add(kFsdpComm, false, pass, fsdp.MeanUs(1, pass));
    (pass == 0 ? u.fwd : u.bwd) = fsdp.LayerUs(1, pass, sum, 0.0, false);
  }
  return u;
}

// Per micro-batch outside the layers (us): lm_head forward + backward on the loss stage, each MTP
// module's eh_proj forward + backward, and every stage's pipeline send/recv.
struct StageExtrasUs {
  double lm_head = 0, eh_proj = 0, p2p = 0;
};
StageExtrasUs StageExtrasOf(const LayerTerms& L) {
  const ModelSpec& m = L.m;
  const ParallelDims& d = L.d;
  const TrainingConfig& t = L.t;
  const ClusterSpec& c = L.c;
  const ComputeKnobs& kn = L.kn;
  const double T = L.T, D = L.D, tp = L.tp, peak = L.peak;
  StageExtrasUs x;
  x.lm_head = (L.kernels ? L.sc.lm_head[0] + L.sc.lm_head[1] : 3.0 * 2.0 * T * D * m.vocab_size / tp / (peak * kn.gemm.dense_efficiency)) +
              L.kx.lm_head[0] + L.kx.lm_head[1];
  // Each MTP module's eh_proj, forward and backward: the column-parallel projection of [h; emb]
  // (2 D -> D / tp; megatron/core/transformer/multi_token_prediction.py MultiTokenPredictionLayer,
  // gather_output=False) over the micro-batch's T tokens, an FP8 GEMM with --precision fp8.
  x.eh_proj =
      L.kernels ? L.sc.eh_proj[0] + L.sc.eh_proj[1] : 3.0 * 2.0 * T * (2.0 * D) * D / tp / (peak * kn.gemm.dense_efficiency * L.fp8x);
  // Pipeline send/recv per micro-batch on every stage: activations forward and gradients back at
  // each of its vpp chunk boundaries, PpSendBytes each (comm.h), over the
  // link they cross (network.h P2pUs: some stage boundary leaves the domain once the world does).
  x.p2p = d.pp > 1 ? 2.0 * static_cast<double>(t.run.vpp) *
                         P2pUs(static_cast<double>(PpSendBytes(L.in.workload, d.tp, m.hidden_size)), d.world_size > NvlinkDomainGpus(c), c)
                   : 0.0;
  return x;
}

// The step from its slowest stage (`walk`), written to `out` (us): the stage's micro-batch, the
// pipeline bubble, the exposed data-parallel step communication, the optimizer and the step time.
// Returns the pipeline slots per step: A (M + (pp - 1) / vpp), or DualPipe's.
double SetPipelineStep(const LayerTerms& L, const StageLayerRuns& runs, const StageWalk& walk, const StageExtrasUs& x, int64_t loss_stage,
                       const LayerUs& moe, const LayerUs& dense, CostBreakdown& out) {
  const ParallelDims& d = L.d;
  const TrainingConfig& t = L.t;
  const StepInputs& in = L.in;
  const double worst_stage = walk.worst;
  const int64_t slowest_stage = walk.slowest;
  const double M = static_cast<double>(t.num_microbatches.value_or(d.pp));
  // torchtitan's gradient accumulation with pp > 1: an outer loop of A pipeline schedules.
  const double A = static_cast<double>(t.run.grad_accumulation_steps);
  out.stage_microbatch_us = worst_stage;
  const double vpp = static_cast<double>(t.run.vpp);
  out.pipeline_bubble_us = A * (d.pp - 1) / vpp * worst_stage;
  // Megatron's overlapped gradient reduce (under the slowest stage's last backward) and
  // parameter gather (under its first forward) leave only what exceeds that compute exposed.
  const double stage_fwd_us = SlowestStageForwardUs(runs, slowest_stage, moe.fwd, dense.fwd, slowest_stage == loss_stage, x.lm_head, x.p2p);
  out.dp_step_comm_us = ExposedDpStepCommUs(in, t.run, stage_fwd_us, worst_stage - stage_fwd_us);
  out.optimizer_us = 2.0 * static_cast<double>(in.static_bytes_rank0) / L.hbm;
  double slots = A * PipelineSlots(static_cast<int64_t>(M), d.pp, t.run.vpp);
  if (IsDualPipe(t.run)) {
    // DualPipe's bubble (pipeline_schedule.h DualPipeBubbleUs): F&B is a stage's overlapped
    // forward + backward (its EP all-to-alls already under the other direction's compute), B its
    // backward and W the weight-gradient half of it (the weight-gradient GEMMs carry the same FLOPs
    // as the input-gradient ones).
    const double b_us = worst_stage - stage_fwd_us;
    out.pipeline_bubble_us = A * DualPipeBubbleUs(d.pp, worst_stage, b_us, b_us / 2.0);
    slots = A * M + (worst_stage > 0 ? out.pipeline_bubble_us / worst_stage : 0.0);
  }
  out.step_time_us = slots * worst_stage + out.dp_step_comm_us + out.optimizer_us;
  return slots;
}

// Tokens per second per GPU, Megatron's model FLOPs per token (model_flops.h) and the MFU of the
// step time in `out`.
void SetThroughput(const LayerTerms& L, CostBreakdown& out) {
  const ParallelDims& d = L.d;
  const TrainingConfig& t = L.t;
  const double M = static_cast<double>(t.num_microbatches.value_or(d.pp));
  const double A = static_cast<double>(t.run.grad_accumulation_steps);
  const double global_tokens = A * M * t.micro_batch_size * t.seq_len * d.dp_replicate * d.dp_shard;
  out.tokens_per_s_per_gpu = global_tokens / (out.step_time_us * 1e-6) / d.world_size;
  // Megatron's model FLOPs (model_flops.h).
  out.model_flops_per_token =
      L.in.kernel_memo ? L.in.kernel_memo->ModelFlops(L.m, t.seq_len, t.mtp_layers) : ModelFlopsPerToken(L.m, t.seq_len, t.mtp_layers);
  const double model_flops = global_tokens * out.model_flops_per_token;
  out.mfu = model_flops / (out.step_time_us * 1e-6 * d.world_size * L.c.dense_bf16_tflops * 1e12);
}

// Critical path: every contributor to the step by its share of it (us). Layer phases count once per
// layer of the slowest stage per pipeline slot (`slots`); then lm_head on the loss stage and the
// step-end terms. Sets the dominant phase and, with `detail`, the phases and the critical path.
void SetCriticalPath(const StageLayerRuns& runs, const LayerSac& sac, int64_t slowest_stage, int64_t loss_stage,
                     const PhaseRecords& records, double lm_head_us, double slots, bool detail, CostBreakdown& out) {
  PhaseShares shares = LayerPhaseShares(runs, slowest_stage, records.at, records.size, sac.checkpointed, slots);
  double(&share)[kNumPhaseIds] = shares.share;
  bool(&present)[kNumPhaseIds] = shares.present;
  if (slowest_stage == loss_stage) {
    share[kLmHead] += lm_head_us * slots;
    present[kLmHead] = true;
  }
  share[kDpStepComm] += out.dp_step_comm_us;
  share[kOptimizer] += out.optimizer_us;
  present[kDpStepComm] = present[kOptimizer] = true;
  const int dominant = DominantPhaseId(share, present);
  if (!detail) {
    out.dominant_phase = dominant < 0 ? "" : PhaseNameOf(dominant);
    return;
  }
  AddPhaseDetail(records.at, records.size, share, present, out);
  out.dominant_phase = out.critical_path.empty() ? "" : out.critical_path.front();
}

}  // namespace

CostBreakdown SimulateStepFromInputs(const ModelSpec& m, const ParamTotals& totals, const ParallelDims& d, const TrainingConfig& t,
                                     const ClusterSpec& c, const StepInputs& in, ComputeModel model, bool detail) {
  CheckCostModelCoversAttention(m);
  CostBreakdown out;
  // torchtitan's per-layer selective checkpointing (recompute.h): the checkpointed layers cost what
  // they cost under recompute full (that run's layer times and phases), the others -- this run,
  // whose recompute set is empty -- what they cost under recompute none.
  const LayerSac sac = LayerSacOf(m, totals, d, t, c, in, model);
  if (sac.every > 0) {
    out.layer_sac_every = sac.every;
    out.checkpointed_moe_layer_us = sac.checkpointed.moe_layer_us;
    out.checkpointed_dense_layer_us = sac.checkpointed.dense_layer_us;
  }
  const LayerTerms L = LayerTermsOf(m, d, t, c, in, model);
  const FsdpSchedule fsdp = FsdpScheduleOf(d, t, in, c);

  // --- MoE layer over the sampled routing layers (SimulateMoePhases).
  const MoePhaseTimes& mp = *in.moe_phases;
  out.routing_imbalance = mp.imbalance;
  const RecomputeSet rs = RecomputeSetOf(t);
  RecomputeForwardUs rf = RecomputeForwardOf(L, mp);
  RecomputeExtraUs rx = RecomputeExtraOf(t, rs, rf);
  PhaseRecords records;  // every phase added, in order
  // The backward dispatch per EP rank; `records` point at it. Only the detail shows per-rank
  // figures (AddPhaseDetail): without it, none (no copy per step).
  const std::vector<double> dispatch_bwd_ranks = detail ? BackwardDispatchRanks(mp, L.full_recompute) : std::vector<double>{};
  const LayerUs moe = MoeLayerUs(L, mp, rx, dispatch_bwd_ranks, fsdp, records);
  out.moe_layer_us = moe.fwd + moe.bwd;

  // --- Dense layer.
  if (t.recompute == Recompute::kSelective) {
    rf.dense_mlp = L.Compute(L.dense_mlp_us, L.sc.dense_mlp, 0, 1.0) + L.kx.dense_mlp[0];
    rx = RecomputeExtraOf(t, rs, rf);
  }
  const LayerUs dense = DenseLayerUs(L, rx, fsdp, records);
  out.dense_layer_us = dense.fwd + dense.bwd;

  // --- Stages, pipeline, data-parallel step communication, optimizer.
  // The stages' layers as runs (StageLayerRuns): the caller's when given, made here otherwise or
  // when per-layer selective checkpointing marks layers.
  std::optional<StageLayerRuns> own_runs;
  if (in.stage_runs == nullptr || sac.every > 0) {
    own_runs = StageLayerRunsOf(m.moe_layers, *in.layer_stage, &sac.layer_checkpointed, d.pp);
  }
  const StageLayerRuns& runs = own_runs ? *own_runs : *in.stage_runs;
  const StageExtrasUs x = StageExtrasOf(L);
  const int64_t loss_stage = in.loss_stage < 0 ? d.pp - 1 : in.loss_stage;
  const int64_t mtp_stage = in.mtp_stage < 0 ? d.pp - 1 : in.mtp_stage;
  const StageWalk walk = WalkStages(m, d, t, runs, out, loss_stage, mtp_stage, x.lm_head, x.eh_proj, x.p2p);
  const double slots = SetPipelineStep(L, runs, walk, x, loss_stage, moe, dense, out);
  SetThroughput(L, out);
  SetCriticalPath(runs, sac, walk.slowest, loss_stage, records, x.lm_head, slots, detail, out);
  return out;
}

namespace {

// Rank 0's view of a collective over `group` (global ranks): its size, whether it spans NVLink
// domains and its members in rank 0's domain (network.h).
CollectiveGroup CollectiveGroupOf(const std::vector<int64_t>& group, const ClusterSpec& c) {
  return CollectiveGroup{static_cast<int64_t>(group.size()), SpansNodes(group, NvlinkDomainGpus(c)),
                         MembersPerDomain(group, NvlinkDomainGpus(c))};
}

// Rank 0's FSDP data-parallel group (global ranks, sorted): efsdp x edp on the sparse mesh,
// dp_shard x dp x cp on the dense mesh (the axes the mesh has).
std::vector<int64_t> FsdpGroupOfRank0(const Plan& plan, bool sparse) {
  const Mesh& mesh = sparse ? plan.meshes.sparse : plan.meshes.dense;
  std::vector<int64_t> g = {0};
  for (const char* name : sparse ? std::vector<const char*>{"efsdp", "edp"} : std::vector<const char*>{"dp_shard", "dp", "cp"}) {
    const int ax = mesh.AxisIndex(name);
    if (ax < 0) continue;
    std::vector<int64_t> next;
    for (int64_t r : g)
      for (int64_t x : mesh.GroupOf(r, ax)) next.push_back(x);
    g = next;
  }
  std::sort(g.begin(), g.end());
  g.erase(std::unique(g.begin(), g.end()), g.end());
  return g;
}

// FSDP's step inputs (StepInputs): rank 0's data-parallel groups and, for the first MoE [0] and the
// first dense [1] layer, rank 0's model-parallel elements on each mesh (and, with
// --fp8-param-gather, the FP8 GEMM weights among them). Nothing without FSDP.
void AddFsdpInputs(const Plan& plan, const ClusterSpec& c, StepInputs& in) {
  const auto& m = plan.model;
  const auto& t = plan.training;
  if (*t.dp_sharding != DpSharding::kFsdp) return;
  in.dense_dp_group = CollectiveGroupOf(FsdpGroupOfRank0(plan, false), c);
  in.sparse_dp_group = CollectiveGroupOf(FsdpGroupOfRank0(plan, true), c);
  for (int kind = 0; kind < 2; ++kind) {
    const bool moe = kind == 0;
    int64_t layer = -1;
    for (int64_t l = 0; l < m.num_hidden_layers && layer < 0; ++l)
      if (m.moe_layers[l] == moe) layer = l;
    if (layer < 0) continue;
    double dense_elems = 0, sparse_elems = 0, fp8_dense = 0, fp8_sparse = 0;
    for (size_t i = 0; i < plan.inventory.params.size(); ++i) {
      const auto& p = plan.inventory.params[i];
      if (p.layer != layer) continue;
      // FSDP gathers the model-parallel shard back (rank 0 holds the largest one).
      const double n = static_cast<double>(ModelParallelNumel(plan, i, 0));
      (plan.placements[i].sparse_mesh ? sparse_elems : dense_elems) += n;
      if (t.fp8_param_gather && Fp8GemmGroup(RoleGroup(p.role))) (plan.placements[i].sparse_mesh ? fp8_sparse : fp8_dense) += n;
    }
    in.fsdp_layer[kind] = {true, dense_elems, sparse_elems, fp8_dense, fp8_sparse};
  }
}

// The MoE phase shape of `plan` (MoePhaseShapeOf and, with replicas, the physical slots). Throws dockyard::Error when `routing` was sampled for another
// deredundency oep.
MoePhaseShape PlanMoePhaseShape(const Plan& plan, const Workload& w, const RoutingResult& routing) {
  const auto& m = plan.model;
  const auto& d = plan.dims;
  const auto& t = plan.training;
  const bool deredundency = d.ep > 1 && t.dispatcher == Dispatcher::kDeredundency;
  if (deredundency && routing.oep != DeredundencyOep(plan)) {
    throw Error(
        fmt::format("routing was sampled for oep {}, the plan's deredundency dispatcher uses oep {}", routing.oep, DeredundencyOep(plan)));
  }
  MoePhaseShape shape = MoePhaseShapeOf(m, w, t, d.ep);
  if (routing.num_slots > 0) shape.num_experts = routing.num_slots;  // replicas: the physical slots
  return shape;
}

// Rank 0's step-end data-parallel communication (us): the sum of StepCollectiveUs over its "step"
// CommEntry list, in order, and the part of it that gathers ZeRO-1 parameters.
void AddStepCommInputs(const Plan& plan, const ClusterSpec& c, StepInputs& in) {
  const CommReport comm = ComputeComm(plan, 0);
  for (const auto& e : comm.entries) {
    if (e.phase != "step") continue;
    // Rank 0's step groups are {0, stride, ...} (comm.h StepCollective): rails from that shape.
    const int64_t domain = NvlinkDomainGpus(c);
    const double us =
        StepCollectiveUs(static_cast<double>(e.wire_bytes), e.group_size, MembersPerDomainStrided(e.group_size, e.stride, domain),
                         (e.group_size - 1) * e.stride / domain > 0, c);
    in.dp_step_comm_us += us;
    if (e.purpose == "zero1_all_gather_params") in.dp_step_param_gather_us += us;
  }
}

}  // namespace

CostBreakdown SimulateStep(const Plan& plan, const ClusterSpec& c, const RoutingResult& routing, ComputeModel model) {
  const auto& m = plan.model;
  const auto& d = plan.dims;
  const auto& t = plan.training;
  StepInputs in;
  in.workload = ComputeWorkload(plan);
  const Workload& w = in.workload;
  if (d.ep > 1 && (routing.ep != d.ep || routing.num_experts != m.moe.num_experts || routing.layers.empty())) {
    throw Error(fmt::format("routing was sampled for ep {} and {} experts, the plan has ep {} and {} experts", routing.ep,
                            routing.num_experts, d.ep, m.moe.num_experts));
  }
  // Attention parameters of one layer.
  for (const auto& p : plan.inventory.params) {
    if (p.layer == 0 && RoleGroup(p.role) == std::string("attention")) in.attention_params += static_cast<double>(p.Numel());
  }
  // Groups of the slowest ranks.
  in.tp_group = CollectiveGroupOf(plan.meshes.dense.GroupOf(0, plan.meshes.dense.AxisIndex("tp")), c);
  const int ep_axis = plan.meshes.sparse.AxisIndex("ep");
  const auto ep_group = plan.meshes.sparse.GroupOf(0, ep_axis);
  AddFsdpInputs(plan, c, in);

  // Routing-dependent MoE phases.
  const MoePhaseShape shape = PlanMoePhaseShape(plan, w, routing);
  const MoePhaseTimes moe = SimulateMoePhases(routing, ep_group, shape, c, model);
  in.moe_phases = &moe;
  in.num_moe_layers = m.NumMoeLayers();
  in.layer_stage = &plan.layer_stage;
  in.loss_stage = plan.loss_stage;
  in.mtp_stage = plan.mtp_stage;

  AddStepCommInputs(plan, c, in);
  const MemoryBreakdown mem = StaticMemoryOnRank(plan, 0);
  in.static_bytes_rank0 = mem.params_bytes + mem.grads_bytes + mem.optimizer_bytes;
  return SimulateStepFromInputs(m, plan.inventory.totals, d, t, c, in, model, /*detail=*/true);
}

Json CostToJson(const CostBreakdown& cost) {
  Json phases = Json::array();
  for (const auto& p : cost.phases) {
    Json j = {{"name", p.name}, {"layer_kind", p.layer_kind}, {"direction", p.direction}, {"time_us", p.time_us}};
    if (!p.per_ep_rank_us.empty()) {
      j["slowest_ep_rank"] = p.slowest_ep_rank;
      j["per_ep_rank_us"] = p.per_ep_rank_us;
    }
    phases.push_back(std::move(j));
  }
  Json j{{"kind", "predicted"},
         {"phases", phases},
         {"moe_layer_us", cost.moe_layer_us},
         {"dense_layer_us", cost.dense_layer_us},
         {"stage_microbatch_us", cost.stage_microbatch_us},
         {"pipeline_bubble_us", cost.pipeline_bubble_us},
         {"dp_step_comm_us", cost.dp_step_comm_us},
         {"optimizer_us", cost.optimizer_us},
         {"step_time_us", cost.step_time_us},
         {"tokens_per_s_per_gpu", cost.tokens_per_s_per_gpu},
         {"mfu", cost.mfu},
         {"model_flops_per_token", cost.model_flops_per_token},
         {"routing_imbalance", cost.routing_imbalance},
         {"critical_path", cost.critical_path},
         {"dominant_phase", cost.dominant_phase}};
  if (cost.layer_sac_every > 0) {  // opt-in keys only
    j["layer_sac_every"] = cost.layer_sac_every;
    j["checkpointed_moe_layer_us"] = cost.checkpointed_moe_layer_us;
    j["checkpointed_dense_layer_us"] = cost.checkpointed_dense_layer_us;
  }
  return j;
}

std::string CostToText(const CostBreakdown& cost) {
  std::ostringstream out;
  out << fmt::format("Predicted  step {:.1f} ms, {:.0f} tokens/s per GPU, MFU {:.1f}%, dominant phase: {} (routing imbalance {:.2f})\n",
                     cost.step_time_us / 1e3, cost.tokens_per_s_per_gpu, 100.0 * cost.mfu, cost.dominant_phase, cost.routing_imbalance);
  out << fmt::format("  per layer and micro-batch, slowest rank (us)\n  {:<16} {:<6} {:>12} {:>12}\n", "phase", "layer", "forward",
                     "backward");
  std::map<std::pair<std::string, std::string>, std::pair<double, double>> rows;
  std::vector<std::pair<std::string, std::string>> order;
  for (const auto& p : cost.phases) {
    auto key = std::make_pair(p.layer_kind, p.name);
    if (!rows.count(key)) order.push_back(key);
    (p.direction == "forward" ? rows[key].first : rows[key].second) = p.time_us;
  }
  for (const auto& key : order) {
    out << fmt::format("  {:<16} {:<6} {:>12.1f} {:>12.1f}\n", key.second, key.first, rows[key].first, rows[key].second);
  }
  out << fmt::format(
      "  MoE layer {:.1f} us, dense layer {:.1f} us (fwd+bwd); slowest stage {:.1f} us per micro-batch; "
      "bubble {:.1f} us; step-end DP comm {:.1f} us; optimizer {:.1f} us\n",
      cost.moe_layer_us, cost.dense_layer_us, cost.stage_microbatch_us, cost.pipeline_bubble_us, cost.dp_step_comm_us, cost.optimizer_us);
  if (cost.layer_sac_every > 0) {
    out << fmt::format(
        "  per-layer selective checkpointing: one layer in {} of each stage checkpointed (MoE layer {:.1f} us, dense layer "
        "{:.1f} us fwd+bwd); the phases above are the other layers'\n",
        cost.layer_sac_every, cost.checkpointed_moe_layer_us, cost.checkpointed_dense_layer_us);
  }
  return out.str();
}

}  // namespace dockyard
