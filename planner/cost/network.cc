// Collective bandwidth from the group's shape (see network.h and docs/cost-model.md).
#include "planner/cost/network.h"

#include <algorithm>

#include <fmt/format.h>

#include "planner/base/error.h"
#include "planner/cost/units.h"

namespace dockyard {

int64_t NvlinkDomainGpus(const ClusterSpec& c) {
  return std::max<int64_t>(c.gpus_per_node, c.nvlink_domain_gpus);
}

Machine MachineOf(const ClusterSpec& cluster, double gpu_memory_gib) {
  return Machine{NvlinkDomainGpus(cluster), gpu_memory_gib};
}

int64_t MembersPerDomain(const std::vector<int64_t>& group, int64_t domain) {
  if (group.empty()) return 0;
  int64_t k = 0;
  for (int64_t r : group) k += r / domain == group.front() / domain;
  return k;
}

int64_t MembersPerDomainStrided(int64_t n, int64_t stride, int64_t domain) {
  if (n < 1) return 0;
  if (stride >= domain) return 1;
  // Members 0, s, 2s, ... below `domain`: ceil(domain / s), at most n.
  return std::min(n, (domain + stride - 1) / stride);
}

double RingBusGbps(const ClusterSpec& c, int64_t k, bool spans_domains, bool nodes_shared) {
  if (k < 1) throw Error(fmt::format("members per NVLink domain must be >= 1, got {}", k));
  if (!spans_domains) return c.knobs.links.intra_node_gbps;
  double net = static_cast<double>(k) * c.knobs.links.network_gbps;  // k GPUs' share of the NICs
  if (!nodes_shared) {
    const int64_t g = std::max<int64_t>(c.gpus_per_node, 1), nics = std::max<int64_t>(c.nics_per_node, 1);
    const int64_t domain_nics = nics * (NvlinkDomainGpus(c) / g);
    const int64_t rails = std::min(domain_nics, (k * nics + g - 1) / g);
    net = static_cast<double>(rails) * c.knobs.links.network_gbps * static_cast<double>(g) / static_cast<double>(nics);
  }
  return k == 1 ? net : std::min(net, c.knobs.links.intra_node_gbps);
}

double RingTimeUs(double bytes, int64_t n, int64_t k, bool spans_domains, const ClusterSpec& c) {
  if (n < 2 || bytes <= 0) return 0.0;
  const double bw = RingBusGbps(c, k, spans_domains) * kBytesPerUsPerGbps;
  const double alpha = LinkLatencyUs(spans_domains, c);
  return static_cast<double>(n - 1) * (alpha + bytes / static_cast<double>(n) / bw);
}

double StepCollectiveUs(double wire_bytes, int64_t n, int64_t k, bool spans_domains, const ClusterSpec& c) {
  const double bw = RingBusGbps(c, k, spans_domains) * kBytesPerUsPerGbps;
  const double alpha = LinkLatencyUs(spans_domains, c);
  return wire_bytes / bw + alpha * static_cast<double>(n - 1);
}

double SharedNicUs(double a, bool a_spans, double b, bool b_spans) {
  return a_spans && b_spans ? a + b : std::max(a, b);
}

double P2pUs(double bytes, bool spans_domains, const ClusterSpec& c) {
  if (bytes <= 0) return 0.0;
  const double bw = (spans_domains ? c.knobs.links.network_gbps : c.knobs.links.intra_node_gbps) * kBytesPerUsPerGbps;
  return LinkLatencyUs(spans_domains, c) + bytes / bw;
}

double CpRingExposedUs(double kv_bytes, double core_us, int64_t cp, bool spans_domains, const ClusterSpec& c) {
  if (cp < 2) return 0.0;
  return static_cast<double>(cp - 1) * std::max(0.0, P2pUs(kv_bytes, spans_domains, c) - core_us / static_cast<double>(cp));
}

double CpAllToAllUs(double a2a_bytes, int64_t cp, bool spans_domains, const ClusterSpec& c) {
  if (cp < 2 || a2a_bytes <= 0) return 0.0;
  return P2pUs(a2a_bytes * static_cast<double>(cp - 1) / static_cast<double>(cp), spans_domains, c);
}

double NicContentionUs(double other_us, bool spans, bool other_spans) {
  return spans && other_spans ? other_us : 0.0;
}

bool SpansNodes(const std::vector<int64_t>& group, int64_t gpus_per_node) {
  for (int64_t r : group) {
    if (r / gpus_per_node != group.front() / gpus_per_node) return true;
  }
  return false;
}

// AllToAllTimesUs from row r of the sent matrix and row r of the received matrix (the sent one
// transposed) for every member r, the node of every member given: both sums run over the
// other members d in increasing order, reading rows only.
void AllToAllTimesFromRows(const double* sent, const double* received, const int64_t* node, size_t n, const ClusterSpec& c, double* times) {
  const double intra = IntraNodeAllToAllGbps(c) * kBytesPerUsPerGbps, inter = c.knobs.links.network_gbps * kBytesPerUsPerGbps;
  for (size_t r = 0; r < n; ++r) {
    double send_intra = 0, send_inter = 0, recv_intra = 0, recv_inter = 0;
    bool remote = false;
    const double* sent_row = sent + r * n;
    const double* recv_row = received + r * n;
    for (size_t d = 0; d < n; ++d) {
      if (d == r) continue;
      const bool same = node[r] == node[d];
      remote = remote || !same;
      (same ? send_intra : send_inter) += sent_row[d];
      (same ? recv_intra : recv_inter) += recv_row[d];
    }
    // NVLink and the NIC are separate links: the busiest one decides.
    const double t = std::max({send_intra / intra, recv_intra / intra, send_inter / inter, recv_inter / inter});
    times[r] = LinkLatencyUs(remote, c) + t;
  }
}

std::vector<int64_t> NodesOf(const std::vector<int64_t>& group, int64_t gpus_per_node) {
  std::vector<int64_t> node(group.size());
  for (size_t r = 0; r < group.size(); ++r) node[r] = group[r] / gpus_per_node;
  return node;
}

std::vector<double> AllToAllTimesUs(const std::vector<double>& bytes, const std::vector<int64_t>& group, const ClusterSpec& c) {
  const size_t n = group.size();
  if (bytes.size() != n * n) throw Error(fmt::format("all-to-all matrix has {} cells for a group of {}", bytes.size(), n));
  std::vector<double> times(n, 0.0);
  if (n < 2) return times;
  std::vector<double> received(n * n);
  for (size_t s = 0; s < n; ++s) {
    for (size_t d = 0; d < n; ++d) received[d * n + s] = bytes[s * n + d];
  }
  const std::vector<int64_t> node = NodesOf(group, NvlinkDomainGpus(c));
  AllToAllTimesFromRows(bytes.data(), received.data(), node.data(), n, c, times.data());
  return times;
}

double RingCollectiveUs(double bytes, int64_t group_size, bool spans_nodes, const ClusterSpec& c, int64_t members_per_domain) {
  return RingTimeUs(bytes, group_size, members_per_domain, spans_nodes, c);  // network.h: bandwidth from the group's shape
}

double StepCommUs(int64_t wire_bytes, int64_t cross_node_bytes, int64_t group_size, const ClusterSpec& c) {
  // Step-end collectives are not overlapped with compute in this model.
  const double bw = (cross_node_bytes > 0 ? c.knobs.links.network_gbps : c.knobs.links.intra_node_gbps) * kBytesPerUsPerGbps;
  return static_cast<double>(wire_bytes) / bw + LinkLatencyUs(cross_node_bytes > 0, c) * (group_size - 1);
}

double RingCollectiveUs(double bytes, const std::vector<int64_t>& group, const ClusterSpec& c) {
  if (group.size() < 2 || bytes <= 0) return 0.0;
  const int64_t domain = NvlinkDomainGpus(c);
  return RingCollectiveUs(bytes, static_cast<int64_t>(group.size()), SpansNodes(group, domain), c, MembersPerDomain(group, domain));
}

}  // namespace dockyard
