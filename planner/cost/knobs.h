// The cost model's knobs: exactly what a calibration file holds (calibration/*.json,
// docs/calibration.md) -- efficiencies, effective link figures, latencies, kernel floors -- and
// nothing else. Datasheet figures (peak TFLOP/s, HBM bandwidth, memory, GPUs per node) are the
// cluster's (cluster.h); settings of a run (shared-expert overlap, CUDA graphs, fused cross-entropy,
// precision) are the training's (planner/model/run_settings.h, training.h); which compute model
// prices a step is compute_model.h's.
//
// Laid out by what a knob describes, so that each GPU can carry its own compute table and each
// dispatcher backend its own figures: a cluster holds one Knobs (ClusterSpec::knobs), its preset's
// priors unless a calibration file replaces them (planner/calibration/calibration.h).
//
// The table of knobs (KnobTable) is the one list of their file keys, units, valid ranges, physical
// bounds, fit stages and prior sources: parsing, writing, the fitter and docs/calibration.md read it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dockyard {

// GEMMs (gemm_efficiency.h). Fractions of the dense BF16 peak unless said otherwise.
struct GemmKnobs {
  // --compute-model gemm: the grouped-GEMM curve eff(M) = grouped_max_efficiency * M / (M +
  // grouped_half_rows), M = rows of one expert; the other GEMMs at dense_efficiency.
  double grouped_max_efficiency = 0.80;
  double grouped_half_rows = 128.0;  // rows
  double dense_efficiency = 0.70;    // large dense GEMMs (attention projections, dense MLP, router, lm_head)
  // --compute-model kernels (the default): eff(M, N, K) = shape_efficiency * M / (M + grouped_half_rows)
  // * N / (N + half_nk) * K / (K + half_nk).
  double shape_efficiency = 0.72;
  double half_nk = 34.0;      // elements of N or K at which its factor is one half
  double tile_rows = 128.0;   // rows of a grouped-GEMM tile (each expert padded to whole tiles)
  double fp8_efficiency_ratio = 0.87;  // FP8 GEMM efficiency / BF16 efficiency of the same shape
  // MXFP8 GEMM efficiency (of the FP8 peak) / BF16 efficiency of the same shape (of the BF16 peak),
  // with --fp8-recipe mxfp8 (Blackwell only): 0.92, torchao's MXFP8 grouped GEMMs on B200 at
  // DeepSeek-V3's expert shape (131,072 rows over 8 groups, N 2048, K 7168: 1,838.1 us forward and
  // data gradient, 2,412.4 us weight gradient; pytorch/ao@0b1bb117287185f325161acd6a0bce8fb443936c
  // torchao/prototype/moe_training/README.md, "MXFP8 Kernel Breakdown by Pass") against the b200
  // operator table's BF16 time of the same three GEMMs (3,812.1 + 3,812.1 + 3,565.4 us):
  // 11,189.6 / (2 x 6,088.6) = 0.919. Per pass it is 1.04 (forward, dgrad) and 0.74 (wgrad, torchao's
  // 2D-2D kernel); one ratio is their time-weighted mean.
  double mxfp8_efficiency_ratio = 0.92;
};

// Flash attention (gemm_efficiency.h FlashAttentionEfficiency).
struct FlashKnobs {
  double fixed_efficiency = 0.50;  // --compute-model gemm: the attention core at this fraction of peak
  double max_efficiency = 0.69;    // forward ceiling
  double half_head_dim = 10.0;     // head dim at which its factor is one half
  double half_seq = 240.0;         // attended keys at which their factor is one half
  double bwd_ratio = 0.70;         // backward efficiency / forward efficiency
  // TransformerEngine's FP8 dot-product attention (--fp8-dot-product-attention; GemmPrecision
  // fp8_attention): the flash core's forward + backward time in BF16 over FP8's, at seq 4,096 and
  // query-key head dims of 128 and more, one ratio for both passes. The Hopper prior is 1 (no Hopper measurement: FP8 attention priced as BF16); the Blackwell presets
  // carry cuDNN's own figures (cluster.cc).
  double fp8_speedup = 1.0;
  // At query-key head dims under 128 (gpt-oss's 64) the two passes differ (cluster.cc, cuDNN 9.19 and
  // 9.22 on GB200 and GB300, head dim 64, sliding windows of 1,024 and 128, seq 2,048-32,768):
  //  - fp8_small_head_fwd_speedup: the forward's BF16 time over FP8's, the window honoured
  //    (GB200 1.028, GB300 1.202);
  //  - fp8_small_head_bwd_efficiency: the FP8 backward's efficiency as a fraction of the BF16 curve's
  //    (FlashEfficiencyAtKeys, with small_head_bwd_efficiency) at the whole causal core: where
  //    fp8_small_head_bwd_full_causal is set, cuDNN's FP8 backward skips no block outside a sliding
  //    window -- its time grows with the square of the sequence (GB200, window 128: 0.536 / 1.731 /
  //    6.176 / 23.2 / 90.3 ms at 2,048-32,768) where BF16's grows linearly -- so it is priced as the
  //    full causal core's FLOPs at this fraction (GB200 0.872, GB300 1.025). That rule is the GPU's
  //    (ClusterSpec::fp8_small_head_bwd_full_causal, carried by GemmPrecision).
  // The Hopper priors are 1: cuDNN has no FP8 attention below head dim 128 on H200 (the
  // cudnn-frontend sweep's FP8 backward fails validation there, "hidden_dim shoud be equal to 128"),
  // priced as BF16.
  double fp8_small_head_fwd_speedup = 1.0;
  double fp8_small_head_bwd_efficiency = 1.0;
  // BF16 flash attention at query-key head dims under 128 (gpt-oss's 64), as a fraction of the
  // curve above (which is fitted at head dims 128 and 192 and, through d / (d + half_head_dim),
  // cannot follow both): forward and backward. Small heads leave the softmax's exponentials a
  // larger share of each tile's work, more so in the forward (2 matmuls per exponential against
  // the backward's 5). The Hopper prior is 1 (no measurement at head dim 64 on Hopper in the
  // calibration set); the Blackwell presets carry cuDNN's gpt-oss sweeps (cluster.cc).
  double small_head_efficiency = 1.0;
  double small_head_bwd_efficiency = 1.0;
};

// Memory-bound kernels and kernel launches (kernels_model.h).
struct MemoryBoundKnobs {
  double floor_us = 5.0;          // fixed cost of a memory-bound kernel (permute, top-k), us
  double hbm_efficiency = 0.70;   // fraction of the HBM bandwidth a memory-bound kernel moves
  double kernel_launch_us = 2.0;  // exposed host gap per kernel launch, eager, us
  double graph_launch_us = 0.5;   // the same inside a CUDA graph, us
  // The exposed share of the grouped weight-gradient GEMM's main-gradient traffic
  // (kernels_model.h GroupedWgradAccumulateUs): Megatron's fused wgrad accumulation reads and writes
  // each local expert's fp32 main_grad per micro-batch in the GEMM's epilogue, which hides part of
  // it under its math. 0.67 from SimuMax's B200 sweep, the same grouped GEMMs with fp32 and bf16
  // main_grad (configs/system/b200_bf16_ceperm.json: DeepSeek-V3 gate-up 32 x 1,024 rows 0.289 /
  // 0.347 of peak, 64 x 512 0.219 / 0.289; DeepSeek-V2 fc1 20 x 1,232 0.328 / 0.385: the time
  // difference over the traffic difference at 0.666 of 8 TB/s, 0.70 / 0.67 / 0.66); the other presets
  // borrow it (no measurement).
  double wgrad_accumulate_share = 0.67;
};

// TransformerEngine's TP-communication overlap (--tp-comm-overlap; tp_overlap.h): the fraction of
// the GPU's SMs its pipeline and bulk userbuffers kernels hold back from the linears beside them
// (initialize_ub's default num_sm 16 with set_sm_margin for both methods; ring_exchange uses copy
// engines and one SM, no margin): 16 of H100's 132 SMs; each preset the same 16 of its own SM count
// (ClusterSpec::sm_count; cluster.cc).
constexpr int64_t kTeUserbufferNumSms = 16;
struct TpOverlapKnobs {
  double sm_share = static_cast<double>(kTeUserbufferNumSms) / 132.0;
};

// How one GPU computes: its operator table.
struct ComputeKnobs {
  GemmKnobs gemm;
  FlashKnobs flash;
  MemoryBoundKnobs memory_bound;
  TpOverlapKnobs tp_overlap;
};

// The deepep dispatcher (Megatron flex with the DeepEP backend; deepep.h): the fraction of the
// links' bandwidth its SM-limited kernels reach. DeepEP issue #493 (2 x 8 H200, CX7 400G, normal
// kernels, BF16 dispatch): 133.78 GB/s NVLink = 0.362 x 370; 40.89 GB/s RDMA = 0.852 x 48.
struct DeepEpKnobs {
  double nvlink_efficiency = 0.362;
  double network_efficiency = 0.852;
};

// EP overlap (ep_overlap.h): the fraction of the GPU's SMs the EP all-to-all kernels take from
// the compute that runs beside them, per backend. Priors from each backend's default kernel
// width on H100's 132 SMs: DeepEP Buffer.num_sms 20 (Megatron --moe-flex-dispatcher-num-sms is
// the same knob there); HybridEP's Megatron recipes 32; NCCL's all-to-all one CTA per channel,
// 16 channels assumed (its figure varies with NCCL_MAX_NCHANNELS and the topology).
//
// The other side: the fraction of its speed a communication kernel keeps while compute runs beside
// it (`*_comm_rate`, in (0, 1]). NCCL's kernels compete with the GEMMs for SM
// slots and HBM bandwidth (NCCL's maintainers: "you may not compete for SMs but still compete for
// memory bandwidth", NVIDIA/nccl issue #1433): measured, send/recv "up to 2x in communication
// compared to comm-only" beside a CUTLASS GEMM (NVIDIA/nccl #1433), and an all-reduce of 106.6 ms
// alone took 206.4 ms beside a CUTLASS GEMM on 8 V100 (parasailteam/coconet issue #6): 0.5 to
// 0.52 of its speed kept; prior 0.5. DeepEP's kernels hold their own SMs for the whole transfer
// (num_sms) and move data with TMA / NVLink stores: prior 1 (no measurement of their speed beside a
// GEMM). HybridEP's, measured on H100 across two nodes (its RDMA path): Megatron-Bridge's Nsight
// comparison of Qwen3-30B-A3B on 16 H100 (EP 16, skills/nemo-mbridge-perf-expert-parallel-overlap/
// SKILL.md @ 067f987df) has the communication kernels at 9.079 ms concurrent with GEMMs and
// attention = 0.11 % of their time without EP overlap (8,254 ms in all) and 3,958.997 ms = 36.55 %
// with it (10,832 ms): the 8,254 ms of work took 6,873 ms alone and 3,959 ms beside compute, so
// beside it the kernels kept (8,254 - 6,873) / 3,959 = 0.349 of their speed (0.26-0.45 with the 0.11 %
// rounded). The Blackwell presets keep 1 (cluster.cc SetBlackwellEpOverlap: no measurement; their
// NVL72 rows run HybridEP's NVLink-only kernels).
//
// The default kernel widths, in SMs (each preset divides them by its own SM count, ClusterSpec::
// sm_count; a run's --moe-flex-dispatcher-num-sms replaces the flex backend's, ep_overlap.h
// FlexDispatcherSmShare).
constexpr int64_t kNcclAllToAllCtas = 16;  // NCCL: one CTA per channel, 16 channels assumed
constexpr int64_t kDeepEpNumSms = 20;      // DeepEP Buffer.num_sms
constexpr int64_t kHybridEpNumSms = 32;    // Megatron-Bridge's performance recipes' moe_hybridep_num_sms
struct EpOverlapKnobs {
  double all_to_all_sm_share = static_cast<double>(kNcclAllToAllCtas) / 132.0;  // NCCL (all_to_all, flex ncclep)
  double deepep_sm_share = static_cast<double>(kDeepEpNumSms) / 132.0;          // flex deepep
  double hybridep_sm_share = static_cast<double>(kHybridEpNumSms) / 132.0;      // flex hybridep
  double all_to_all_comm_rate = 0.5;          // NCCL: the measured figures above
  double deepep_comm_rate = 1.0;              // DeepEP: own SMs, assumed
  double hybridep_comm_rate = (8254.0 - 6873.0) / 3959.0;  // HybridEP: 0.349, measured on H100 (above)
};
// Figures per dispatcher backend.
struct DispatcherKnobs {
  DeepEpKnobs deepep;
  EpOverlapKnobs ep_overlap;
};

// Effective link figures a collective sees (network.h), per GPU and direction: the preset's
// priors are in cluster.cc with their sources in docs/cluster.md.
struct LinkKnobs {
  double intra_node_gbps = 370.0;      // NVLink bandwidth, GB/s (1e9 B/s)
  double intra_node_latency_us = 3.0;  // per collective step inside an NVLink domain, us
  double network_gbps = 48.0;          // network bandwidth per GPU, GB/s
  double network_latency_us = 8.0;     // per collective step across domains, us
  // The share of intra_node_gbps an NCCL all-to-all reaches inside the NVLink domain (network.h
  // IntraNodeAllToAllGbps; the EP dispatch and combine of the all_to_all dispatcher): 1 on Hopper,
  // where NCCL's ~370 GB/s busbw holds for every non-all-reduce collective ([N2], NVIDIA/nccl-tests
  // issue #212); 0.886 = 0.597 / 0.674 on B200, SimuMax's all-to-all against its all-gather busbw
  // on the machine of its B200 rows (docs/cluster.md [B4]; GB200, B300, GB300 borrow it).
  double all_to_all_share = 1.0;
};

// The host's share of a step outside the kernels the cost model prices: fetching the batch,
// reducing and logging the loss, the training loop's Python between iterations. One figure per
// step (us), added to the step time; the prior is an assumption (a few ms in Megatron-LM's and
// torchtitan's loops), fitted by calibrate from runs at two micro-batch counts
// (docs/calibration.md, "Fitting"), within [0.1, 50] ms: the fetch of a batch that was prefetched,
// a scalar all-reduce and a log line take milliseconds, not tenths of a second.
struct HostKnobs {
  double step_overhead_us = 2000.0;
  // The GPU's idle time per MoE layer and micro-batch forward that the host's synchronization in
  // the dispatcher leaves (us): a dropless MoE layer copies its token counts to the host (the
  // all-to-all's splits, the grouped GEMM's m_splits; Megatron-Core token_dispatcher.py
  // _maybe_dtoh_and_synchronize, torchtitan's splits .tolist()) and waits for them, so the GPU
  // drains and then waits for the launches after it. 616 us measured: Megatron-Bridge's Nsight
  // Systems comparison of Qwen3-30B-A3B on 16 H100 (EP 16, HybridEP, MBS 1, GBS 1,024, 48 MoE
  // layers x 64 micro-batches, CUDA graphs of moe_router and moe_preprocess only) found the GPU
  // active 22.821 s of a 24.714 s step without EP overlap: 1.893 s / 3,072 = 616 us
  // (skills/nemo-mbridge-perf-expert-parallel-overlap/SKILL.md @ 067f987df); with EP overlap the
  // active time matched the step (21.221 s against 20.99-21.07 s): the paired micro-batch's queued
  // work covers it (ep_overlap.h). None under a full-iteration CUDA graph (RunSettings
  // full_iteration_cuda_graph: no host in the step) or with the expert inputs padded to capacity
  // (moe_pad_expert_input_to_capacity: static splits, no synchronization). The other presets
  // borrow the H100 host's figure (no measurement; Grace hosts run Python slower).
  double moe_sync_idle_us = 616.0;
};

struct Knobs {
  ComputeKnobs compute;
  DispatcherKnobs dispatchers;
  LinkKnobs links;
  HostKnobs host;
};

// One row of the knob table. A knob is one double of Knobs (`field`). Valid range: what a file
// may hold; physical bounds [lower, upper]: what the fitter keeps to (multiples of the prior when
// `relative`). Stage: fitted from component measurements and dockyard-run phase timings
// (kComponent) or from whole-step rows (kResidual).
struct KnobSpec {
  enum Stage { kComponent, kResidual };
  enum Group { kCompute, kDispatcher, kLink, kHost };  // Knobs::compute, ::dispatchers, ::links, ::host
  const char* section;    // the file's object holding it (version 2): "compute.gemm", "dispatchers.deepep", "links", ...
  const char* name;       // its key there (version 2)
  const char* v1_name;    // its key in a version-1 file (one flat object)
  const char* unit;
  double& (*field)(Knobs&);
  Group group;
  double min;  // exclusive when min_open, else inclusive
  bool min_open;
  double max;           // inclusive
  double lower, upper;  // physical bounds (inside the valid range)
  bool relative;        // lower and upper are multiples of the prior value
  Stage stage;
  const char* source;  // where the prior value comes from
  // A file may leave it out and keep the preset's prior: knobs added after the files people keep
  // were written (the EP-overlap SM shares), so that those files still load.
  bool optional = false;
  // The fitter's prior on ln(value) (planner/calibration/calibrate.h): its standard deviation, how
  // well the prior is known -- 0.15 for a figure measured on the hardware (a component sweep,
  // nccl-tests), wider for an assumption. 0: a quarter of the log width of [lower, upper].
  double prior_sd = 0;
  double Get(const Knobs& k) const { return field(const_cast<Knobs&>(k)); }
  void Set(Knobs& k, double value) const { field(k) = value; }
  // "compute.gemm.shape_efficiency": the knob's name in messages and fit reports.
  std::string Path() const;
};
const std::vector<KnobSpec>& KnobTable();

}  // namespace dockyard
