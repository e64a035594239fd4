// DeepEP-style (flex) and allgather dispatchers (see deepep.h).
#include "planner/cost/deepep.h"

#include "planner/model/precision.h"
#include "planner/cost/network.h"
#include "planner/accounting/comm.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "planner/base/error.h"
#include "planner/routing/flex_counts.h"
#include "planner/cost/units.h"

namespace dockyard {

LinkBytes FlexDispatchBytes(const FlexCounts& c, double bytes_per_token) {
  const int64_t n = static_cast<int64_t>(c.node_index.size());
  LinkBytes b;
  b.n = n;
  b.nvlink.assign(static_cast<size_t>(n * n), 0.0);
  b.network.assign(static_cast<size_t>(n * n), 0.0);
  ForEachFlexTransfer(c.node_index, c.num_nodes, RankRowsOf(c), NodeRowsOf(c), [&](int64_t from, int64_t to, int64_t rows, bool network) {
    (network ? b.network : b.nvlink)[static_cast<size_t>(from * n + to)] += static_cast<double>(rows) * bytes_per_token;
  });
  return b;
}

double FlexTokenBytes(double hidden, double act_bytes, bool fp8) {
  return DispatchRowBytes(hidden, act_bytes, fp8);
}

std::vector<double> FlexTimesUs(const FlexLinkRows& rows, double bytes_per_token, bool transpose, const std::vector<int64_t>& ep_group,
                                const ClusterSpec& cl, double nvlink_scale) {
  const int64_t n = rows.n;
  const double nvl = cl.knobs.links.intra_node_gbps * cl.knobs.dispatchers.deepep.nvlink_efficiency * nvlink_scale * kBytesPerUsPerGbps;
  const double net = cl.knobs.links.network_gbps * cl.knobs.dispatchers.deepep.network_efficiency * kBytesPerUsPerGbps;
  bool spans = false;
  for (int64_t r : ep_group) spans = spans || r / cl.gpus_per_node != ep_group.front() / cl.gpus_per_node;
  std::vector<double> t(static_cast<size_t>(n), 0.0);
  if (n < 2) return t;
  // The combine (transpose) sends what the dispatch received.
  const std::vector<int64_t>& nvl_send = transpose ? rows.nvlink_recv : rows.nvlink_send;
  const std::vector<int64_t>& nvl_recv = transpose ? rows.nvlink_send : rows.nvlink_recv;
  const std::vector<int64_t>& net_send = transpose ? rows.network_recv : rows.network_send;
  const std::vector<int64_t>& net_recv = transpose ? rows.network_send : rows.network_recv;
  const double latency = spans ? cl.knobs.links.network_latency_us : cl.knobs.links.intra_node_latency_us;
  for (size_t r = 0; r < static_cast<size_t>(n); ++r) {
    const double busiest =
        std::max({static_cast<double>(nvl_send[r]) * bytes_per_token / nvl, static_cast<double>(nvl_recv[r]) * bytes_per_token / nvl,
                  static_cast<double>(net_send[r]) * bytes_per_token / net, static_cast<double>(net_recv[r]) * bytes_per_token / net});
    t[r] = latency + busiest;
  }
  return t;
}

double AllGatherDispatchUs(int64_t ep, double tokens, double hidden, double act_bytes, const std::vector<int64_t>& ep_group,
                           const ClusterSpec& cluster) {
  return RingCollectiveUs(AllGatherDispatchBytes(ep, tokens, hidden, act_bytes), ep_group, cluster);
}

bool FlexOrAllGatherTimesUs(const FlexLinks* flex, const std::vector<int64_t>& ep_group, const MoePhaseShape& s, double sent_ab,
                            const ClusterSpec& cluster, double* dt, double* ct, double* dt_bwd) {
  const int64_t n = static_cast<int64_t>(ep_group.size());
  if (s.allgather) {
    const double Td = s.dispatch_tokens > 0 ? s.dispatch_tokens : s.routed_tokens;
    const double t = AllGatherDispatchUs(n, Td, s.hidden, s.act_bytes, ep_group, cluster);
    std::fill(dt, dt + n, t);
    std::fill(ct, ct + n, t);  // the reduce-scatter of the same buffer
    if (dt_bwd != nullptr) std::fill(dt_bwd, dt_bwd + n, t);
    return true;
  }
  if (!s.flex) return false;
  if (flex == nullptr) throw Error("the deepep dispatcher needs the routing sample's per-token counts (SampleRoutingForPlan with deepep)");
  // DeepEP / HybridEP forward over NVLink inside the NVLink domain (a node, or 72 GPUs of a
  // GB200 NVL72) and cross the network between domains: the sample's nodes must be those domains.
  const int64_t domain = NvlinkDomainGpus(cluster);
  for (int64_t m = 0; m < n; ++m) {
    const int64_t rank = ep_group[static_cast<size_t>(m)];
    if (flex->node_of[static_cast<size_t>(m)] != rank / domain) {
      throw Error(
          fmt::format("--gpus-per-node (training.gpus_per_node) is {}, but cluster {}'s NVLink domain is {} GPUs: the deepep "
                      "dispatcher forwards over NVLink only inside one NVLink domain, so a node must be exactly one domain; give "
                      "--gpus-per-node {}",
                      flex->gpus_per_node, cluster.name, domain, domain));
    }
  }
  const double scale = sent_ab / s.act_bytes;  // megatron etp: a rank sends T_d / T_r of the sampled tokens
  const FlexLinkRows& rows = flex->rows;
  const double dispatch_bytes = FlexTokenBytes(s.hidden, s.act_bytes, s.flex_fp8) * scale;
  const double combine_bytes = s.flex_fp8 ? FlexTokenBytes(s.hidden, s.act_bytes, false) * scale : dispatch_bytes;
  const std::vector<double> d = FlexTimesUs(rows, dispatch_bytes, false, ep_group, cluster, s.flex_nvlink_scale);
  const std::vector<double> c = FlexTimesUs(rows, combine_bytes, true, ep_group, cluster, s.flex_nvlink_scale);
  std::copy(d.begin(), d.end(), dt);
  std::copy(c.begin(), c.end(), ct);
  if (dt_bwd != nullptr) {
    // The backward dispatch moves BF16 rows: the dispatch pattern at the combine's row bytes.
    const std::vector<double> b = s.flex_fp8 ? FlexTimesUs(rows, combine_bytes, false, ep_group, cluster, s.flex_nvlink_scale) : d;
    std::copy(b.begin(), b.end(), dt_bwd);
  }
  return true;
}

Json FlexLinksToJson(const RoutingResult& routing, double bytes_per_token) {
  Json layers = Json::array();
  for (const LayerRouting& L : routing.layers) {
    if (!L.flex) return Json();
    const LinkBytes b = FlexDispatchBytes(*L.flex, bytes_per_token);
    const int64_t n = b.n;
    std::vector<double> net_send(static_cast<size_t>(n), 0), net_recv(static_cast<size_t>(n), 0), nvl_send(static_cast<size_t>(n), 0),
        nvl_recv(static_cast<size_t>(n), 0);
    for (int64_t s = 0; s < n; ++s) {
      for (int64_t d = 0; d < n; ++d) {
        const size_t i = static_cast<size_t>(s * n + d);
        net_send[static_cast<size_t>(s)] += b.network[i];
        net_recv[static_cast<size_t>(d)] += b.network[i];
        nvl_send[static_cast<size_t>(s)] += b.nvlink[i];
        nvl_recv[static_cast<size_t>(d)] += b.nvlink[i];
      }
    }
    layers.push_back({{"network", b.network},
                      {"nvlink", b.nvlink},
                      {"network_send", net_send},
                      {"network_recv", net_recv},
                      {"nvlink_send", nvl_send},
                      {"nvlink_recv", nvl_recv}});
  }
  if (layers.empty()) return Json();
  return {{"dispatcher", "deepep"}, {"bytes_per_token", bytes_per_token}, {"layers", layers}};
}

}  // namespace dockyard
