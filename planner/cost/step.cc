// The step from its layers: each stage's layers as runs, the slowest stage, the pipeline's slots
// and bubble, the exposed data-parallel traffic, the optimizer, throughput, MFU and the critical
// path (SimulateStepFromInputs; see cost.h and docs/cost-model.md).
#include "planner/cost/cost.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <optional>
#include <unordered_map>

#include <fmt/format.h>

#include "planner/accounting/comm.h"
#include "planner/accounting/memory.h"
#include "planner/accounting/workload.h"
#include "planner/base/error.h"
#include "planner/base/phase.h"
#include "planner/cost/attention_support.h"
#include "planner/cost/gemm_efficiency.h"
#include "planner/cost/kernels_model.h"
#include "planner/cost/model_flops.h"
#include "planner/cost/network.h"
#include "planner/cost/op_sac_time.h"
#include "planner/cost/param_gather.h"
#include "planner/cost/units.h"
#include "planner/model/pipeline_schedule.h"
#include "planner/model/muon.h"
#include "planner/model/precision.h"
#include "planner/model/recompute.h"
#include "planner/cost/step_internal.h"

namespace dockyard {

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

namespace cost_detail {
namespace {

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
    p.phase = static_cast<Phase>(r.id);
    p.layer_kind = r.moe ? LayerKind::kMoe : LayerKind::kDense;
    p.direction = r.backward ? Direction::kBackward : Direction::kForward;
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

// Per micro-batch outside the layers (us): lm_head forward + backward on the loss stage, each MTP
// module's eh_proj forward + backward, the embedding's backward on the first stage and every
// stage's exposed pipeline send/recv (p2p); p2p_flush_hop is what one warm-up / flush hop adds
// beyond what p2p already holds per boundary (0 unless the steady phase's sends are overlapped).
struct StageExtrasUs {
  double lm_head = 0, eh_proj = 0, embedding = 0, p2p = 0, p2p_flush_hop = 0;
};

// One micro-batch's forward + backward on every pipeline stage: its layers (those per-layer
// selective checkpointing checkpoints at the recompute-full run's time, from `out`), lm_head on
// the loss stage, each MTP module's eh_proj, layer and logits on the MTP stage, the embedding's
// backward on the first, its p2p sends. `worst` is the
// slowest stage's time -- with DualPipe the slowest rank's, the mean of its two stages -- and
// `slowest` that stage.
struct StageWalk {
  double worst = 0;
  int64_t slowest = 0;
};

StageWalk WalkStages(const ModelSpec& m, const ParallelDims& d, const TrainingConfig& t, const StageLayerRuns& runs,
                     const CostBreakdown& out, int64_t loss_stage, int64_t mtp_stage, const StageExtrasUs& x) {
  const double lm_head_us = x.lm_head, eh_proj_us = x.eh_proj, p2p_us = x.p2p;
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
    double stage = (s == loss_stage ? lm_head_us : 0.0) + (s == mtp_stage ? mtp_us : 0.0) + (s == 0 ? x.embedding : 0.0) + p2p_us;
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

// The data-parallel step communication left exposed: the distributed optimizer's / DDP's gradient
// reduce and parameter all-gather as Megatron-Core's DDP runs them over its buckets
// (param_gather.h: with --overlap-grad-reduce the edge bucket and what outlasts a chunk's last
// backward; with --overlap-param-gather the edge bucket, the rest under the first chunk's forward,
// the later chunks aligned, on the first micro-batch's path, or under the optimizer step), and the
// rest of the step collectives (the embedding group's and the router bias's all-reduces, after the
// backward) whole. `stage_fwd_us` / `stage_bwd_us`: the slowest stage's forward / backward of one
// micro-batch, all its chunks.
double ExposedDpStepCommUs(const ModelSpec& m, const StepInputs& in, const ParallelDims& d, const RunSettings& run, double stage_fwd_us,
                           double stage_bwd_us, double optimizer_us) {
  DdpOverlapInputs g;
  g.grads = {in.grad_reduce_dense_us, in.grad_reduce_sparse_us, in.dense_elems_rank0, in.sparse_elems_rank0};
  g.params = {in.param_gather_dense_us, in.param_gather_sparse_us, in.dense_elems_rank0, in.sparse_elems_rank0};
  g.bucket_elems = static_cast<double>(DdpBucketElems(run, d.dp_replicate * d.dp_shard * d.cp));
  // Rank 0's stage holds the (vocabulary-parallel) embedding.
  g.embedding_elems = static_cast<double>(m.vocab_size) * static_cast<double>(m.hidden_size) / static_cast<double>(d.tp);
  g.pp = d.pp;
  const double vpp = static_cast<double>(std::max<int64_t>(1, run.vpp));
  g.chunk_forward_us = stage_fwd_us / vpp;
  g.chunk_backward_us = stage_bwd_us / vpp;
  g.optimizer_us = optimizer_us;
  const double other_us = std::max(0.0, in.dp_step_comm_us - in.grad_reduce_dense_us - in.grad_reduce_sparse_us - in.param_gather_dense_us -
                                            in.param_gather_sparse_us);
  return other_us + GradReduceExposedUs(g, run) + ParamGatherExposedUs(g, run);
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

// Whether the step ends as Megatron's DDP and (distributed) optimizer end it (zero1 or ddp under
// the megatron convention) rather than as torch's (kernels_model.h StepEndKernels).
bool MegatronStepEnd(const ParallelDims& d, const TrainingConfig& t) {
  return d.convention == Convention::kMegatron && t.dp_sharding != DpSharding::kFsdp;
}

StepEndShape StepEndShapeOf(const ParallelDims& d, const TrainingConfig& t, const StepInputs& in) {
  const TrainingBytes tb = TrainingBytesOf(t);
  StepEndShape s;
  s.grad_buffer_bytes = static_cast<double>(in.grad_bytes_rank0);
  s.optimizer_elems = static_cast<double>(in.optimizer_elems_rank0);
  s.grad_bytes = static_cast<double>(tb.grad);
  s.param_bytes = static_cast<double>(tb.param);
  s.master_bytes = static_cast<double>(Fp8ModelParams(t) ? 4 : tb.master);
  // Under Muon nearly every element is a Muon matrix's (muon.h): its one momentum for all of them.
  s.moment_bytes = static_cast<double>(tb.muon_momentum >= 0 ? tb.muon_momentum : tb.moments);
  s.megatron = MegatronStepEnd(d, t);
  s.data_parallel = d.dp_replicate * d.dp_shard * d.cp > 1;
  s.clip = !s.megatron || t.run.clip_grad > 0;  // torchtitan clips at every step
  s.nan_check = t.run.check_for_nan_in_grad;
  return s;
}

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
  // The embedding's backward (kernels_model.h EmbeddingBackwardKernels), memory-bound kernels and
  // their launches; the older GEMM model prices no memory-bound kernel.
  if (L.kernels) {
    const std::vector<KernelBytes> emb =
        EmbeddingBackwardKernels(m, L.ks, MegatronStepEnd(d, t), static_cast<double>(TrainingBytesOf(t).grad));
    x.embedding = MemoryBoundUs(emb, c.hbm_gbps, kn.memory_bound.hbm_efficiency, kn.memory_bound.floor_us) +
                  LaunchGapUs(static_cast<double>(emb.size()), t.run.cuda_graphs, kn.memory_bound.kernel_launch_us,
                              kn.memory_bound.graph_launch_us);
  }
  // Pipeline send/recv per micro-batch on every stage: activations forward and gradients back at
  // each of its vpp chunk boundaries, PpSendBytes each (comm.h), over the
  // link they cross (network.h P2pUs: some stage boundary leaves the domain once the world does).
  // In the interleaved schedule's steady phase they run beside the next chunk's compute
  // (run_settings.h P2pOverlapped), leaving each boundary its link latency; the warm-up and the
  // flush cross pp - 1 boundaries each way unoverlapped (SetPipelineStep).
  if (d.pp > 1) {
    const bool spans = d.world_size > NvlinkDomainGpus(c);
    const double transfer = P2pUs(static_cast<double>(PpSendBytes(L.in.workload, d.tp, m.hidden_size)), spans, c);
    const double per_boundary = P2pOverlapped(t.run) ? std::min(LinkLatencyUs(spans, c), transfer) : transfer;
    x.p2p = 2.0 * static_cast<double>(t.run.vpp) * per_boundary;
    x.p2p_flush_hop = transfer - per_boundary;
  }
  return x;
}

// The step from its slowest stage (`walk`), written to `out` (us): the stage's micro-batch, the
// pipeline bubble, the exposed data-parallel step communication, the optimizer and the step time.
// Returns the pipeline slots per step: A (M + (pp - 1) x the chunk slot share), or DualPipe's.
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
  // A chunk slot: the most-loaded rank's largest model chunk (ChunkSlotShare; 1 / vpp with equal chunks).
  static const std::vector<int64_t> kNoChunks;  // vpp 1: every layer in chunk 0
  const double chunk_share = ChunkSlotShare(*in.layer_stage, in.layer_chunk ? *in.layer_chunk : kNoChunks, d.pp, t.run.vpp);
  // The fill and the flush: (pp - 1) chunk slots of a stage's micro-batch, and with the steady phase's
  // transfers overlapped (StageExtrasOf) the pp - 1 hops each way their full transfer still takes
  // (Megatron's overlap_p2p_comm_warmup_flush is off by default): 2 (pp - 1) x (transfer - what the
  // stage time already holds per hop).
  const double flush_p2p_us = A * 2.0 * static_cast<double>(d.pp - 1) * x.p2p_flush_hop;
  out.pipeline_bubble_us = A * static_cast<double>(d.pp - 1) * chunk_share * worst_stage + flush_p2p_us;
  // Megatron's overlapped gradient reduce (under the slowest stage's last backward) and
  // parameter gather (under its first forward) leave only what exceeds that compute exposed.
  const double stage_fwd_us = SlowestStageForwardUs(runs, slowest_stage, moe.fwd, dense.fwd, slowest_stage == loss_stage, x.lm_head, x.p2p);
  // The optimizer and the passes around it (kernels_model.h StepEndKernels) at the HBM efficiency
  // the memory-bound kernels reach (knobs.h MemoryBoundKnobs); no one-kernel floor (multi-tensor
  // kernels over many tensors, their few launches not counted).
  out.optimizer_us = MemoryBoundUs(StepEndKernels(StepEndShapeOf(d, t, in)), L.c.hbm_gbps, L.kn.memory_bound.hbm_efficiency, 0.0) +
                     MuonNewtonSchulzUs(L.m, t, L.c, L.kernels ? ComputeModel::kKernels : ComputeModel::kGemm,
                                        static_cast<double>(in.optimizer_elems_rank0), L.tp);
  out.dp_step_comm_us = ExposedDpStepCommUs(L.m, in, d, t.run, stage_fwd_us, worst_stage - stage_fwd_us, out.optimizer_us);
  double slots = A * PipelineSlots(static_cast<int64_t>(M), d.pp, t.run.vpp, chunk_share);
  if (IsDualPipe(t.run)) {
    // DualPipe's bubble (pipeline_schedule.h DualPipeBubbleUs): F&B is a stage's overlapped
    // forward + backward (its EP all-to-alls already under the other direction's compute), B its
    // backward and W the weight-gradient half of it (the weight-gradient GEMMs carry the same FLOPs
    // as the input-gradient ones).
    const double b_us = worst_stage - stage_fwd_us;
    out.pipeline_bubble_us = A * DualPipeBubbleUs(d.pp, worst_stage, b_us, b_us / 2.0);
    slots = A * M + (worst_stage > 0 ? out.pipeline_bubble_us / worst_stage : 0.0);
  }
  out.host_overhead_us = L.c.knobs.host.step_overhead_us;
  out.step_time_us = slots * worst_stage + flush_p2p_us + out.dp_step_comm_us + out.optimizer_us + out.host_overhead_us;
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
// layer of the slowest stage per pipeline slot (`slots`); then lm_head on the loss stage, the
// embedding's backward on the first and the
// step-end terms. Sets the dominant phase and, with `detail`, the phases and the critical path.
void SetCriticalPath(const StageLayerRuns& runs, const LayerSac& sac, int64_t slowest_stage, int64_t loss_stage,
                     const PhaseRecords& records, const StageExtrasUs& x, double slots, bool detail, CostBreakdown& out) {
  PhaseShares shares = LayerPhaseShares(runs, slowest_stage, records.at, records.size, sac.checkpointed, slots);
  double(&share)[kNumPhaseIds] = shares.share;
  bool(&present)[kNumPhaseIds] = shares.present;
  if (slowest_stage == loss_stage) {
    share[kLmHead] += x.lm_head * slots;
    present[kLmHead] = true;
  }
  if (slowest_stage == 0 && x.embedding > 0) {
    share[kEmbedding] += x.embedding * slots;
    present[kEmbedding] = true;
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

// SimulateStepFromInputs's body.
CostBreakdown StepFromInputs(const ModelSpec& m, const ParamTotals& totals, const ParallelDims& d, const TrainingConfig& t,
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
  out.ep_overlap = records.ep_overlap;
  out.moe_sync_idle_us = L.moe_sync_idle_us[0] + L.moe_sync_idle_us[1];

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
  out.embedding_bwd_us = x.embedding;
  const int64_t loss_stage = in.loss_stage < 0 ? d.pp - 1 : in.loss_stage;
  const int64_t mtp_stage = in.mtp_stage < 0 ? d.pp - 1 : in.mtp_stage;
  const StageWalk walk = WalkStages(m, d, t, runs, out, loss_stage, mtp_stage, x);
  const double slots = SetPipelineStep(L, runs, walk, x, loss_stage, moe, dense, out);
  SetThroughput(L, out);
  SetCriticalPath(runs, sac, walk.slowest, loss_stage, records, x, slots, detail, out);
  // A time that overflowed (cluster rates at the bottom of their range against a large model)
  // would print as inf or rank a layout first with a 0 us stage: refuse it, naming the figures.
  for (const auto& [name, v] : {std::pair<const char*, double>{"MoE layer", out.moe_layer_us}, {"dense layer", out.dense_layer_us},
                                {"stage", out.stage_microbatch_us}, {"step", out.step_time_us}}) {
    if (!std::isfinite(v)) {
      throw Error(fmt::format("the predicted {} time is not finite ({} us): cluster {} (dense_bf16_tflops {}, hbm_gbps {}) is too slow for a "
                              "finite time of this model",
                              name, v, c.name, c.dense_bf16_tflops, c.hbm_gbps));
    }
  }
  return out;
}

}  // namespace
}  // namespace cost_detail

double MuonNewtonSchulzUs(const ModelSpec& m, const TrainingConfig& t, const ClusterSpec& c, ComputeModel model, double optimizer_elems,
                          double tp) {
  if (t.optimizer != Optimizer::kMuon) return 0.0;
  double elems = 0;
  const double full = MuonNewtonSchulzFullUs(m, t.mtp_layers, c.dense_bf16_tflops, c.knobs.compute, model == ComputeModel::kKernels, &elems);
  return elems > 0 ? full * std::min(1.0, optimizer_elems / elems) * tp : 0.0;
}

CostBreakdown SimulateStepFromInputs(const ModelSpec& m, const ParamTotals& totals, const ParallelDims& d, const TrainingConfig& t,
                                     const ClusterSpec& c, const StepInputs& in, ComputeModel model, bool detail) {
  return cost_detail::StepFromInputs(m, totals, d, t, c, in, model, detail);
}

}  // namespace dockyard
