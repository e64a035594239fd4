// Network physics of collectives: how much bandwidth a collective group gets from the shape of
// the group on the cluster (docs/cost-model.md, "Collective bandwidth from the group's shape").
//
// Units: bandwidths in GB/s (1e9 bytes/s) per direction, times in microseconds, bytes as doubles.
//
// The locality unit is the NVLink domain (ClusterSpec::nvlink_domain_gpus; at least a node): GPUs
// of one domain talk over NVLink, GPUs of different domains over the NICs.
//  - A ring (all-gather, reduce-scatter, all-reduce) whose group has k members in each domain runs
//    NCCL channels through k rails at once (one ring per NIC, NCCL's multi-rail rings; NVIDIA's
//    NCCL team measures ~192 GB/s all-reduce busbw on DGX-A100 with 8 x 200 Gb/s IB,
//    NVIDIA/nccl#812): k x network_gbps (network_gbps = one GPU's share of its node's NICs when
//    every GPU of the node sends, which is the case for the SPMD collectives of a training step:
//    the sibling groups of the other GPUs run the same collective at the same time), capped by
//    NVLink (intra_node_gbps) when k >= 2 because every byte also crosses NVLink inside a domain.
//    One member per domain gets one GPU's NIC share.
//  - All-to-all never aggregates NICs: each rank's inter-domain bytes go through its own NIC share
//    (nccl-tests#267; AllToAllTimesUs in cost.h).
//  - Collectives of different groups that run at the same time share the NICs: their NIC times
//    add (SharedNicUs).
#pragma once

#include <cstdint>
#include <vector>

#include "planner/model/machine.h"
#include "planner/cost/cluster.h"

namespace dockyard {

// The locality unit: max(gpus_per_node, nvlink_domain_gpus).
int64_t NvlinkDomainGpus(const ClusterSpec& cluster);

// The machine a plan sees on `cluster` (machine.h): its locality unit as the node size
// (NvlinkDomainGpus: ranks in one NVLink domain talk over NVLink, as the time model counts them)
// and `gpu_memory_gib` as the budget (0 = none; the search passes the cluster's memory_gib when no
// budget is given, search.h SearchMachine).
Machine MachineOf(const ClusterSpec& cluster, double gpu_memory_gib);

// Members of `group` (global ranks) in the NVLink domain of its first member (ranks fill domains
// of `domain` GPUs in order). Groups of a row-major mesh have the same count in every domain.
int64_t MembersPerDomain(const std::vector<int64_t>& group, int64_t domain);
// The same for the group {0, s, ..., (n-1)s} (n >= 1 members, stride s >= 1), in O(1).
int64_t MembersPerDomainStrided(int64_t n, int64_t stride, int64_t domain);

// Bus bandwidth (GB/s per direction per rank) of a ring collective whose group has
// `members_per_domain` (k) members in each NVLink domain: intra_node_gbps when it stays in one
// domain, else min(k x network_gbps, intra_node_gbps) for k >= 2 and network_gbps for k = 1.
// With `nodes_shared` false (no sibling group runs at the same time on its nodes), the group
// drives ceil(k x nics_per_node / gpus_per_node) NICs of network_gbps x gpus_per_node /
// nics_per_node each (at most the domain's NICs), still capped by NVLink for k >= 2.
// Throws dockyard::Error for members_per_domain < 1.
double RingBusGbps(const ClusterSpec& cluster, int64_t members_per_domain, bool spans_domains, bool nodes_shared = true);

// One ring all-gather / reduce-scatter of a `bytes` buffer (the all-gather output) over
// `group_size` ranks: (n - 1) x (latency + bytes / n / RingBusGbps). 0 for n < 2 or bytes <= 0.
double RingTimeUs(double bytes, int64_t group_size, int64_t members_per_domain, bool spans_domains, const ClusterSpec& cluster);

// A step-end collective from its wire bytes (CommEntry::wire_bytes): wire / RingBusGbps +
// (group_size - 1) latencies of the network when it spans domains, else of NVLink.
double StepCollectiveUs(double wire_bytes, int64_t group_size, int64_t members_per_domain, bool spans_domains, const ClusterSpec& cluster);

// Two collectives of different groups that run at the same time and both cross domains share the
// NICs: the pair takes at least the sum of their times (each priced as if alone). When either
// stays inside its domain, they use different links and the longer one decides.
double SharedNicUs(double a_us, bool a_spans, double b_us, bool b_spans);
// What the other collective (`other_us`) adds to one's NIC time under SharedNicUs's rule:
// other_us when both cross domains, else 0.
double NicContentionUs(double other_us, bool spans, bool other_spans);

// One point-to-point transfer of `bytes` (a pipeline send/recv or a ring-attention K/V block):
// latency + bytes / bw, bw = one GPU's NIC share (network_gbps; every GPU of the stage sends at
// once, a send never aggregates NICs) when it crosses domains, else NVLink. 0 for bytes <= 0.
double P2pUs(double bytes, bool spans_domains, const ClusterSpec& cluster);

// The per-message latency of the link a transfer crosses (us): the network's when it leaves the
// NVLink domain, else NVLink's (the knobs' links.*_latency_us). P2pUs, the rings and the all-to-alls
// take theirs from here.
// The bandwidth an NCCL all-to-all reaches on NVLink inside the domain, GB/s:
// intra_node_gbps x links.all_to_all_share (knobs.h). The EP all-to-all's NVLink term.
inline double IntraNodeAllToAllGbps(const ClusterSpec& cluster) {
  return cluster.knobs.links.intra_node_gbps * cluster.knobs.links.all_to_all_share;
}

inline double LinkLatencyUs(bool spans_domains, const ClusterSpec& cluster) {
  return spans_domains ? cluster.knobs.links.network_latency_us : cluster.knobs.links.intra_node_latency_us;
}

// Context parallelism, per layer and direction:
//  - ring ("p2p", torchtitan's ring attention, Megatron --cp-comm-type p2p): cp - 1 transfers of
//    the local K/V block (`kv_bytes`; backward passes K/V and their gradients: 2 x) each under one
//    block's attention (core_us / cp): exposed (cp - 1) x max(0, P2pUs - core_us / cp);
//  - all-to-all ("a2a", Ulysses / Megatron --cp-comm-type a2a): Q, K, V and the output
//    redistributed over the cp group, `a2a_bytes` per rank, (cp - 1) / cp of it leaving the rank:
//    latency + that / bw (NVLink inside a domain, else the rank's NIC share), not overlapped.
double CpRingExposedUs(double kv_bytes, double core_us, int64_t cp, bool spans_domains, const ClusterSpec& cluster);
double CpAllToAllUs(double a2a_bytes, int64_t cp, bool spans_domains, const ClusterSpec& cluster);

// Whether the members of `group` (global ranks) fall in more than one block of `domain` ranks.
bool SpansNodes(const std::vector<int64_t>& group, int64_t domain);
// The block of `domain` ranks of every member of `group`: [group.size()].
std::vector<int64_t> NodesOf(const std::vector<int64_t>& group, int64_t domain);
// AllToAllTimesUs from row r of the sent matrix and row r of the received matrix (the sent one
// transposed) for every member r of n, the node of every member given (`node` [n]); writes
// times [n] (us).
void AllToAllTimesFromRows(const double* sent, const double* received, const int64_t* node, size_t n, const ClusterSpec& cluster,
                           double* times);

// Time of one all-to-all over an EP group given a [n x n] matrix of bytes (row = sender), the
// ranks of the group (to tell intra- from inter-node pairs) and the cluster. Returns per-rank
// times; the phase takes the maximum.
std::vector<double> AllToAllTimesUs(const std::vector<double>& bytes, const std::vector<int64_t>& group, const ClusterSpec& cluster);

// Ring collective time (all-gather or reduce-scatter) of `bytes` (the full buffer) over `group`.
double RingCollectiveUs(double bytes, const std::vector<int64_t>& group, const ClusterSpec& cluster);
// The same for a group of `group_size` ranks that spans NVLink domains or not, with
// `members_per_domain` members in each domain (network.h RingTimeUs: a ring over domains runs
// one NCCL ring per rail, so its bandwidth grows with the members per domain, capped by NVLink).
double RingCollectiveUs(double bytes, int64_t group_size, bool spans_nodes, const ClusterSpec& cluster, int64_t members_per_domain = 1);

// Time of one step-end data-parallel collective (not overlapped with compute) from its CommEntry
// figures: wire_bytes / bandwidth + (group_size - 1) latencies, both of the network when any
// byte crosses nodes, else of NVLink.
double StepCommUs(int64_t wire_bytes, int64_t cross_node_bytes, int64_t group_size, const ClusterSpec& cluster);

}  // namespace dockyard
