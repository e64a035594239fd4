// EP communication overlap as Megatron-Core's combined 1F1B runs it
// (--overlap-moe-expert-parallel-comm; DualPipe's overlapped forward-and-backward chunks alike):
// the forward of one micro-batch's layer is paired with the backward of another's, on a compute
// stream and a communication stream, in the order NVIDIA/Megatron-LM
// megatron/core/models/common/model_chunk_schedule_plan.py TransformerLayerSchedulePlan.run
// issues them:
//
//   comm stream: combine_bwd(b) | dispatch_fwd(f) -> dispatch_bwd(b)      | combine_fwd(f)
//   comp stream: pre_fwd(f)     | mlp_bwd(b) -> mlp_bwd_dw(b) -> mlp_fwd(f) | pre_bwd(b)
//
// pre = attention, its tp / cp traffic, router and permute (pre_dispatch_computation); mlp = the
// grouped GEMMs, unpermute and shared experts (the mlp node). Each operation waits for the one
// before it on its stream and for its data: mlp_bwd(b) for combine_bwd(b), dispatch_fwd(f) for
// pre_fwd(f), dispatch_bwd(b) for mlp_bwd(b) (with delay_wgrad_compute the input gradient only,
// mlp_bwd_dw(b) after it; without, the MLP backward computes both and backward_dw is empty),
// mlp_fwd(f) for dispatch_fwd(f), combine_fwd(f) for mlp_fwd(f), pre_bwd(b) for dispatch_bwd(b);
// and across the layers of a model chunk (TransformerModelChunkSchedulePlan.run pairs forward layer
// k with backward layer n - 1 - k) the next pair's pre_fwd waits for combine_fwd, its combine_bwd
// for pre_bwd. While a communication kernel runs, the compute beside it runs on the SMs it leaves:
// at 1 - sm_share of its speed (DeepEP's kernels take 20 SMs by default, HybridEP's recipes 32,
// NCCL its channels' CTAs); and while compute runs, the communication kernel beside it runs at
// comm_rate of its speed (NCCL's kernels wait for SM slots and share HBM with the GEMMs:
// about half its speed measured; DeepEP's and HybridEP's hold their own SMs) (knobs.h EpOverlapKnobs).
#pragma once

#include <cstdint>
#include <string>

namespace dockyard {

// How the two streams slow each other while both run (knobs.h EpOverlapKnobs, per dispatcher
// backend): the compute runs at 1 - sm_share of its speed beside a communication kernel, the
// communication kernel at comm_rate of its speed beside compute.
struct EpOverlapContention {
  double sm_share = 0;   // the SMs the communication kernel holds, in [0, 1)
  double comm_rate = 1;  // in (0, 1]
};

// One layer's work per direction, [0] forward and [1] backward, us at full speed.
struct EpOverlapLayer {
  double pre[2] = {0, 0};       // attention, tp / cp traffic, router, permute
  double mlp[2] = {0, 0};       // grouped GEMMs, unpermute, shared experts; the backward's half is its weight gradient
  double dispatch[2] = {0, 0};  // the EP dispatch all-to-all
  double combine[2] = {0, 0};   // the EP combine all-to-all
};

// The combined step of `layers` (>= 1) forward layers paired with as many backward layers of the
// same shape (one model chunk), the streams slowing each other by `contention`: the two streams
// simulated operation by operation. Returns the chunk's time divided by `layers` (us per layer
// pair): at least the compute (sum of pre and mlp, both directions) and at least the
// communication (dispatch and combine, both directions). Throws dockyard::Error for layers < 1,
// a negative time, sm_share outside [0, 1) or comm_rate outside (0, 1].
// `delay_wgrad` (pipeline_schedule.h WgradDelayed): the backward dispatch waits for the MLP's
// input gradient only (its weight gradient, half the MLP backward, follows beside it); else for
// the whole MLP backward.
// `one_queue` (CUDA_DEVICE_MAX_CONNECTIONS=1, RunSettings::cuda_device_max_connections): both
// streams feed one hardware queue in the order above, and a kernel at its head holds back every
// kernel issued after it, on either stream, until it can start. An operation then starts only when
// every operation issued before it has left the queue: a communication operation (one kernel) once
// it has started, a compute operation (many kernels, each waiting for the one before it on its
// stream) once it has ended (its last kernel's own overlap neglected). So a communication kernel
// overlaps only the compute issued after it: combine_bwd beside pre_fwd, dispatch_fwd beside
// mlp_bwd_dw (with delay_wgrad; without, it runs alone), dispatch_bwd beside mlp_fwd, combine_fwd
// beside pre_bwd.
double PairedLayerUs(const EpOverlapLayer& layer, int64_t layers, const EpOverlapContention& contention, bool delay_wgrad,
                     bool one_queue = false);

// The share of the GPU's SMs the flex dispatcher's kernels hold when the run sets their count
// (RunSettings::moe_flex_dispatcher_num_sms, Megatron --moe-flex-dispatcher-num-sms): num_sms /
// sm_count (ClusterSpec::sm_count). Throws dockyard::Error naming the flag, the value, the cluster
// and its SMs unless 1 <= num_sms < sm_count (the compute beside needs an SM).
double FlexDispatcherSmShare(int64_t num_sms, int64_t sm_count, const std::string& cluster);

// The share of a stage's chunk forwards that run paired with a backward under the combined 1F1B
// schedule, in [0, 1]: of the M x vpp chunk forwards of a pipeline rank, those it runs before its
// first backward (pipeline_schedule.h InFlightChunks: Megatron's warm-up, schedules.py
// get_pp_rank_microbatches, plus the step's first forward) run alone, and as many backwards at the
// end; averaged over the ranks. pp 1 (combined_1f1b.py): the first forward and the last backward;
// pp 8, vpp 4: 7 + 24 + 1 = 32 of the chunk forwards. DualPipe (vpp 1) likewise.
// Throws dockyard::Error unless M, pp, vpp >= 1.
double PairedChunkShare(int64_t num_microbatches, int64_t pp, int64_t vpp);

}  // namespace dockyard
