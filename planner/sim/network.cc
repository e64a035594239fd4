// Collective bandwidth from the group's shape (see network.h and docs/cost-model.md).
#include "planner/sim/network.h"

#include <algorithm>

#include <fmt/format.h>

#include "planner/base/error.h"

namespace dockyard {

namespace {
constexpr double kBytesPerUsPerGbps = 1e3;  // GB/s -> bytes per microsecond
}  // namespace

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
  if (!spans_domains) return c.intra_node_gbps;
  double net = static_cast<double>(k) * c.network_gbps;  // k GPUs' share of the NICs
  if (!nodes_shared) {
    const int64_t g = std::max<int64_t>(c.gpus_per_node, 1), nics = std::max<int64_t>(c.nics_per_node, 1);
    const int64_t domain_nics = nics * (NvlinkDomainGpus(c) / g);
    const int64_t rails = std::min(domain_nics, (k * nics + g - 1) / g);
    net = static_cast<double>(rails) * c.network_gbps * static_cast<double>(g) / static_cast<double>(nics);
  }
  return k == 1 ? net : std::min(net, c.intra_node_gbps);
}

double RingTimeUs(double bytes, int64_t n, int64_t k, bool spans_domains, const ClusterSpec& c) {
  if (n < 2 || bytes <= 0) return 0.0;
  const double bw = RingBusGbps(c, k, spans_domains) * kBytesPerUsPerGbps;
  const double alpha = spans_domains ? c.network_latency_us : c.intra_node_latency_us;
  return static_cast<double>(n - 1) * (alpha + bytes / static_cast<double>(n) / bw);
}

double StepCollectiveUs(double wire_bytes, int64_t n, int64_t k, bool spans_domains, const ClusterSpec& c) {
  const double bw = RingBusGbps(c, k, spans_domains) * kBytesPerUsPerGbps;
  const double alpha = spans_domains ? c.network_latency_us : c.intra_node_latency_us;
  return wire_bytes / bw + alpha * static_cast<double>(n - 1);
}

double SharedNicUs(double a, bool a_spans, double b, bool b_spans) {
  return a_spans && b_spans ? a + b : std::max(a, b);
}

double P2pUs(double bytes, bool spans_domains, const ClusterSpec& c) {
  if (bytes <= 0) return 0.0;
  const double bw = (spans_domains ? c.network_gbps : c.intra_node_gbps) * kBytesPerUsPerGbps;
  return (spans_domains ? c.network_latency_us : c.intra_node_latency_us) + bytes / bw;
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

}  // namespace dockyard
