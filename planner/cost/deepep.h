// The dispatchers real jobs use beside the NCCL all-to-all (Megatron-Core --moe-token-dispatcher-type):
//
//   deepep   (Megatron `flex` with the DeepEP or HybridEP backend; deepseek-ai/DeepEP normal
//            kernels, csrc/kernels/internode.cu): a token crosses the network ONCE per destination
//            node -- RDMA to the GPU of that node with the sender's local index (its rail peer) --
//            and is then forwarded over NVLink to every GPU of the node that holds at least one of
//            its experts (once per GPU, not once per expert). A destination on the sender's own
//            node gets it over NVLink directly. The combine mirrors it (NVLink reduce inside the
//            node, one RDMA send back per node). The dispatch may be sent in FP8 (DeepEP
//            `use_fp8`: 1 byte per element + one fp32 scale per 128 elements); the combine is BF16.
//   allgather (Megatron MoEAllGatherTokenDispatcher): every EP rank all-gathers the tokens of the
//            EP group and keeps the rows of its experts; the combine is the reduce-scatter.
//
// Link-level byte matrices per sampled layer, [n x n] over the EP group's members (row = sender):
//   network[s][p]  bytes s sends by RDMA to p (p = the rail peer of s on a destination node)
//   nvlink[f][r]   bytes f writes over NVLink to r (f the source itself, or the rail peer that
//                  received the token by RDMA)
// Rail peer of s on node n: the member of n whose index among n's members equals s's index among
// its own node's members (modulo n's member count when the node holds fewer).
//
// Time of rank r (each link level its own engine, the busiest direction decides, as in
// AllToAllTimesUs):
//   t(r) = latency + max(nvl_send/nvl_bw, nvl_recv/nvl_bw, net_send/net_bw, net_recv/net_bw)
//   nvl_bw = intra_node_gbps * nvlink_efficiency, net_bw = network_gbps * network_efficiency
// (the cluster's knobs: LinkKnobs and DispatcherKnobs::deepep, knobs.h; DeepEP's normal kernels run on a few SMs -- 20 to 24 -- and reach 134 to
// 158 GB/s over NVLink, 41 to 58 GB/s per 400 Gb/s NIC; DeepEP README and issue #493).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "planner/cost/cluster.h"
#include "planner/cost/moe_shape.h"
#include "planner/base/json_util.h"
#include "planner/routing/flex_counts.h"
#include "planner/routing/routing.h"

namespace dockyard {

struct LinkBytes {
  int64_t n = 0;
  std::vector<double> nvlink;   // [n*n], row = sender
  std::vector<double> network;  // [n*n], row = sender
};

// The dispatch's link matrices, bytes_per_token bytes per token sent (D x element bytes, or the
// FP8 size). The combine's are their transposes.
LinkBytes FlexDispatchBytes(const FlexCounts& counts, double bytes_per_token);

// Bytes of one token row in the dispatch: hidden * act_bytes, or with FP8 hidden + 4 * ceil(hidden / 128).
double FlexTokenBytes(double hidden, double act_bytes, bool fp8);

// Per-member times (us) of the dispatch (transpose = false) or combine (true) of `rows`, each row
// bytes_per_token bytes; the NVLink term at `nvlink_scale` of the knob's bandwidth
// (moe_shape.h FlexSmBandwidthScale).
std::vector<double> FlexTimesUs(const FlexLinkRows& rows, double bytes_per_token, bool transpose, const std::vector<int64_t>& ep_group,
                                const ClusterSpec& cluster, double nvlink_scale = 1.0);


// The allgather dispatcher: ring all-gather of the EP group's tokens (ep * tokens * hidden *
// act_bytes bytes gathered); the combine is the reduce-scatter of the same size.
double AllGatherDispatchUs(int64_t ep, double tokens, double hidden, double act_bytes, const std::vector<int64_t>& ep_group,
                           const ClusterSpec& cluster);

// The dispatch (dt) and combine (ct) times of one sampled layer under the deepep or allgather
// dispatcher (s.flex / s.allgather), per EP member; `sent_ab` = bytes per element sent (the
// megatron etp scaling of SimulateMoePhases). Returns false (nothing written) for the other
// dispatchers. `dt_bwd` (optional): the backward pass's dispatch, in BF16 rows even with FP8
// dispatch (s.flex_fp8 only changes the forward). `flex`: the layer's per-token counts
// (FlexLinksOf LayerRouting::flex). Throws dockyard::Error when a deepep layer has no flex counts
// (null), or counts for other nodes than `cluster` places the members on.
bool FlexOrAllGatherTimesUs(const FlexLinks* flex, const std::vector<int64_t>& ep_group, const MoePhaseShape& s, double sent_ab,
                            const ClusterSpec& cluster, double* dt, double* ct, double* dt_bwd = nullptr);

// The deepep dispatch's link-level traffic of every sampled layer of `routing` (its flex counts),
// for the simulate report: {"dispatcher": "deepep", "bytes_per_token", "layers": [{"network":
// [n*n], "nvlink": [n*n] (bytes, row = sender), "network_send", "network_recv", "nvlink_send",
// "nvlink_recv" ([n] bytes per member)}]}; the combine's are the transposes (in BF16 with FP8
// dispatch: scale by hidden * act_bytes / bytes_per_token). Null when no layer has flex counts.
Json FlexLinksToJson(const RoutingResult& routing, double bytes_per_token);

}  // namespace dockyard
