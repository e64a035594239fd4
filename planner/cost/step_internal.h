// The cost model's step internals, private to planner/cost: the phase ids of one layer, the
// figures every phase of a layer reads (LayerTerms), the kernel terms memo, FSDP's per-layer
// schedule, and the layer sums (layer_terms.cc: the terms; layer_phases.cc: each phase recorded,
// the MoE and dense layers; step.cc: stages, pipeline and the step).
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <unordered_map>
#include <vector>

#include "planner/base/error.h"
#include "planner/base/phase.h"
#include "planner/cost/cost.h"
#include "planner/cost/gemm_efficiency.h"
#include "planner/cost/kernels_model.h"
#include "planner/cost/tp_overlap.h"
#include "planner/cost/model_flops.h"
#include "planner/cost/network.h"
#include "planner/model/pipeline_schedule.h"
#include "planner/model/recompute.h"

namespace dockyard {
namespace cost_detail {

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
  kEmbedding = static_cast<int>(Phase::kEmbedding),
  kNumPhaseIds = static_cast<int>(Phase::kWeightGen)  // the predicted phases are those before weight_gen
};

inline const char* PhaseNameOf(int id) {
  return PhaseName(static_cast<Phase>(id));
}

// Context parallelism's K/V exchange per layer (network.h), forward and backward: the ring's
// transfers under the attention core's blocks (`core_us` of them), or the Ulysses all-to-alls of
// Q, K, V and the output. T tokens of `ab` bytes per element, `heads_local` heads of width d_qk + d_v.
struct CpExchangeUs {
  double forward = 0, backward = 0;
};

// FSDP per layer, one call each: the all-gather of the layer's parameters and the reduce-scatter of
// its gradients over rank 0's dense and sparse data-parallel groups; [0] the MoE layer, [1] the
// dense layer (StepInputs::fsdp_layer). Zero without FSDP.
struct FsdpLayerUs {
  double all_gather[2] = {0, 0}, reduce_scatter[2] = {0, 0};
};

// One phase added to a layer's time: (id, MoE layer?, backward?, time, per-EP-rank source).
struct Record {
  PhaseId id;
  bool moe;
  bool backward;
  double us;
  const std::vector<double>* per_rank;  // scaled by `scale` when shown
  double scale;
};

// One phase added to a layer's time, in the order they are added (Record); at most 32.
struct PhaseRecords {
  Record at[32];
  int size = 0;
  EpOverlapDetail ep_overlap;  // set by OverlapEpComm (layer_phases.cc) for the MoE layer
  // Records phase `id` of the MoE (`moe`) or dense layer in `pass` (0 forward, 1 backward): `us`
  // its time, `per_rank` (routing-dependent phases) shown per EP rank times `scale`; returns us.
  double Add(PhaseId id, bool moe, int pass, double us, const std::vector<double>* per_rank = nullptr, double scale = 1.0) {
    at[size++] = {id, moe, pass == 1, us, per_rank, scale};
    return us;
  }
};

// The memory-bound kernels selective recomputation re-runs that depend only on the layer's shape
// (--compute-model kernels): the attention block's norms, the shared experts' and the dense
// MLP's SwiGLU, forward, us (MemoryBoundUs). The routed SwiGLU depends on the routing sample.
struct SelectiveKernelsUs {
  double norms = 0, shared_act = 0, dense_act = 0;
};

// The figures every phase of one layer reads: the run's inputs, unit rates, the micro-batch's shape
// and each compute phase's forward time at the fixed efficiencies (us per layer and micro-batch).
struct LayerTerms {
  LayerTerms(const ModelSpec& m_, const ParallelDims& d_, const TrainingConfig& t_, const ClusterSpec& c_, const StepInputs& in_,
             ComputeModel model_)
      : m(m_), d(d_), t(t_), c(c_), in(in_), kn(c_.knobs.compute), kernels(model_ == ComputeModel::kKernels), precision(GemmPrecisionOf(t_, c_)) {}
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
  double core_flops = 0;                                  // the causal attention core, FLOP (full and sliding-window layers averaged)
  double fixed_core_us = 0;                               // that core at flash.fixed_efficiency (and FP8 attention's ratio), forward, us
  double attention_us = 0;                                // attention forward: projections and core
  CpExchangeUs cp;                                        // context parallelism's K/V exchange
  double tp_collective = 0;                               // one tp ring collective of the layer's T x D activations
  // The linears beside the sequence-parallel collectives (tp_overlap.h; tp > 1): the attention
  // block's, the dense MLP's and the shared experts' column- and row-parallel forward times.
  TpBlockGemmsUs tp_attention, tp_dense_mlp, tp_shared_experts;
  // Megatron with etp > 1: one expert-TP all-gather (after the dispatch) or reduce-scatter (before
  // the combine) of the T_r x top_k routed rows (accounting/comm.cc AddExpertTpGather), in the
  // dispatch and combine phases.
  double etp_collective = 0;
  double router_us = 0, shared_us = 0, dense_mlp_us = 0;  // forward times
  // The grouped weight-gradient GEMM's main-gradient traffic in the backward (kernels_model.h
  // GroupedWgradAccumulateUs; --compute-model kernels only), us per micro-batch.
  double grouped_wgrad_accumulate_us = 0;
  // The GPU idle a MoE layer's host synchronization leaves (kernels_model.h MoeSyncIdleUs; --compute-model
  // kernels only), us per micro-batch: [0] the forward, [1] the backward's recomputed forward (full
  // recomputation, or Megatron's selective "moe").
  double moe_sync_idle_us[2] = {0, 0};
  // Megatron-Core's eager ops around the routed experts (kernels_model.h ExpertEagerKernels;
  // --compute-model kernels only): the run's shape, rows left at 0 (ExpertEagerUs sets them).
  ExpertEagerShape expert_eager;
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

// One layer of one micro-batch, forward and backward (us).
struct LayerUs {
  double fwd = 0, bwd = 0;
};

}  // namespace cost_detail

// The memo of cost.h (KernelTermsMemo): the kernel model's terms of one layer shape, and the model FLOPs.
class KernelTermsMemo {
 public:
  struct Terms {
    KernelExtrasUs kx;
    ShapedComputeUs sc;
    cost_detail::SelectiveKernelsUs selective;
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
    const Key key{ks.tokens, ks.sp_tokens, ks.router_tokens, ks.tp, ks.act_bytes, seq_len, ks.ring_steps, full_recompute, precision.fp8,
                  precision.scaling, precision.fp8_attention, run.cuda_graphs, run.fused_cross_entropy, ks.rotary_unfused};
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
    double tokens, sp_tokens, router_tokens, tp, act_bytes, seq_len, ring_steps;
    bool full_recompute, fp8_gemms;
    Fp8Scaling fp8_scaling;
    bool fp8_attention, cuda_graphs, fused_cross_entropy, rotary_unfused;
    bool operator==(const Key& k) const {
      return tokens == k.tokens && sp_tokens == k.sp_tokens && router_tokens == k.router_tokens && tp == k.tp && act_bytes == k.act_bytes &&
             seq_len == k.seq_len && ring_steps == k.ring_steps && full_recompute == k.full_recompute && fp8_gemms == k.fp8_gemms && fp8_scaling == k.fp8_scaling &&
             fp8_attention == k.fp8_attention && cuda_graphs == k.cuda_graphs && fused_cross_entropy == k.fused_cross_entropy &&
             rotary_unfused == k.rotary_unfused;
    }
  };
  struct KeyHash {
    size_t operator()(const Key& k) const {
      // The doubles' bits, mixed (std::hash<double> hashes bytes out of line).
      uint64_t h = 0;
      for (double x : {k.tokens, k.sp_tokens, k.router_tokens, k.tp, k.act_bytes, k.seq_len, k.ring_steps}) {
        uint64_t bits;
        std::memcpy(&bits, &x, sizeof bits);
        h = (h ^ bits) * 0x9E3779B97F4A7C15ull;
        h ^= h >> 29;
      }
      return static_cast<size_t>(h * 31u + (k.cuda_graphs ? 16u : 0u) + (k.fused_cross_entropy ? 8u : 0u) + (k.full_recompute ? 4u : 0u) +
                                 (k.fp8_gemms ? 2u : 0u) + static_cast<size_t>(k.fp8_scaling) * 32u + (k.fp8_attention ? 1u : 0u));
    }
  };
  const ModelSpec* model_ = nullptr;
  const ClusterSpec* cluster_ = nullptr;
  std::unordered_map<Key, Terms, KeyHash> terms_;
  const ModelSpec* flops_model_ = nullptr;
  int64_t flops_seq_len_ = -1, flops_mtp_ = -1;
  double flops_ = 0;
};

namespace cost_detail {

CpExchangeUs CpExchangePerLayerUs(const ModelSpec& m, const ParallelDims& d, const TrainingConfig& t, const ClusterSpec& c, double T,
                                  double ab, double heads_local, double d_qk, double d_v, double core_us);

FsdpLayerUs FsdpPerLayerUs(const TrainingConfig& t, const StepInputs& in, const ClusterSpec& c);

SelectiveKernelsUs SelectiveKernelsOf(const ModelSpec& m, const KernelShape& ks, const MemoryBoundKnobs& o, double hbm_gbps);

LayerTerms LayerTermsOf(const ModelSpec& m, const ParallelDims& d, const TrainingConfig& t, const ClusterSpec& c, const StepInputs& in,
                        ComputeModel model);

FsdpSchedule FsdpScheduleOf(const ParallelDims& d, const TrainingConfig& t, const StepInputs& in, const ClusterSpec& c);

// Selective recomputation by module (recompute.h): the forward time (us) of each piece the backward
// may re-run; the norm and SwiGLU kernels cost time only under --compute-model kernels. All zero
// unless recompute is selective; the dense MLP's is the caller's (after the MoE layer).
RecomputeForwardUs RecomputeForwardOf(const LayerTerms& L, const MoePhaseTimes& mp);

// The routed experts' eager ops of one micro-batch (kernels_model.h ExpertEagerKernels) on the rows
// the routing sample sends the slowest rank (the mean received rows x mp.imbalance, as the
// recomputed SwiGLU), us: the forward (`backward` false) or the backward's own; `clamp_only`: the
// activation clamp alone (what --recompute-modules moe_act re-runs). 0 without them.
double ExpertEagerUs(const LayerTerms& L, const MoePhaseTimes& mp, bool backward, bool clamp_only = false);

// What the backward re-runs of each phase (us): per-op checkpointing's set or the module set `rs`.
RecomputeExtraUs RecomputeExtraOf(const TrainingConfig& t, const RecomputeSet& rs, const RecomputeForwardUs& rf);

// The backward dispatch per EP rank (us): BF16 rows (dispatch_bwd), after the forward's again under
// full recomputation.
std::vector<double> BackwardDispatchRanks(const MoePhaseTimes& mp, bool full_recompute);

// The MoE layer of one micro-batch, forward and backward (us), its phases recorded (AddMoeLayerPhases),
// the EP all-to-alls overlapped where the run says so, and FSDP's collectives overlapped with it.
LayerUs MoeLayerUs(const LayerTerms& L, const MoePhaseTimes& mp, const RecomputeExtraUs& rx, const std::vector<double>& dispatch_bwd_ranks,
                   const FsdpSchedule& fsdp, PhaseRecords& records);

// The dense layer of one micro-batch, forward and backward (us; zero when the model has none): its
// attention, tp communication and dense MLP recorded, FSDP's collectives overlapped with them.
LayerUs DenseLayerUs(const LayerTerms& L, const RecomputeExtraUs& rx, const FsdpSchedule& fsdp, PhaseRecords& records);

}  // namespace cost_detail
}  // namespace dockyard
