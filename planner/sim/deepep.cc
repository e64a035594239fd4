// DeepEP-style (flex) and allgather dispatchers (see deepep.h).
#include "planner/sim/deepep.h"

#include "planner/model/precision.h"
#include "planner/sim/network.h"
#include "planner/accounting/comm.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "planner/base/error.h"

namespace dockyard {

namespace {
constexpr double kBytesPerUsPerGbps = 1e3;  // 1 GB/s = 1e9 B/s = 1e3 B/us
}

FlexCounts MakeFlexCounts(const std::vector<int64_t>& ep_group, int64_t gpus_per_node) {
  if (gpus_per_node < 1) throw Error(fmt::format("gpus_per_node must be >= 1, got {}", gpus_per_node));
  FlexCounts c;
  c.gpus_per_node = gpus_per_node;
  const int64_t n = static_cast<int64_t>(ep_group.size());
  std::map<int64_t, int64_t> index;
  for (int64_t r : ep_group) {
    const int64_t node = r / gpus_per_node;
    c.node_of.push_back(node);
    auto it = index.find(node);
    if (it == index.end()) it = index.emplace(node, static_cast<int64_t>(index.size())).first;
    c.node_index.push_back(it->second);
  }
  c.num_nodes = static_cast<int64_t>(index.size());
  c.rank_tokens.assign(static_cast<size_t>(n * n), 0);
  c.node_tokens.assign(static_cast<size_t>(n * c.num_nodes), 0);
  return c;
}

void AddFlexTokens(FlexCounts& c, int64_t source, const int32_t* experts, int64_t tokens, int64_t top_k, int64_t experts_per_member) {
  const int64_t n = static_cast<int64_t>(c.node_of.size());
  std::vector<int64_t> rank_seen(static_cast<size_t>(n), -1), node_seen(static_cast<size_t>(c.num_nodes), -1);
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t j = 0; j < top_k; ++j) {
      const int64_t d = experts[t * top_k + j] / experts_per_member;
      if (rank_seen[static_cast<size_t>(d)] != t) {
        rank_seen[static_cast<size_t>(d)] = t;
        ++c.rank_tokens[static_cast<size_t>(source * n + d)];
      }
      const int64_t node = c.node_index[static_cast<size_t>(d)];
      if (node_seen[static_cast<size_t>(node)] != t) {
        node_seen[static_cast<size_t>(node)] = t;
        ++c.node_tokens[static_cast<size_t>(source * c.num_nodes + node)];
      }
    }
  }
}

FlexCounts SampleFlexCounts(const RoutingModel& model, int64_t layer, const std::vector<int64_t>& ep_group, int64_t gpus_per_node,
                            int64_t tokens_per_rank) {
  FlexCounts c = MakeFlexCounts(ep_group, gpus_per_node);
  const int64_t n = static_cast<int64_t>(ep_group.size());
  for (int64_t s = 0; s < n; ++s) {
    const std::vector<int32_t> experts = SampleTokenExperts(model, layer, s, tokens_per_rank);
    AddFlexTokens(c, s, experts.data(), tokens_per_rank, model.top_k, model.num_experts / n);
  }
  return c;
}

std::vector<int64_t> RailPeers(const std::vector<int64_t>& node_index, int64_t num_nodes) {
  const int64_t n = static_cast<int64_t>(node_index.size());
  std::vector<std::vector<int64_t>> members(static_cast<size_t>(num_nodes));  // per node, in member order
  std::vector<int64_t> local(static_cast<size_t>(n));                         // index among its node's members
  for (int64_t m = 0; m < n; ++m) {
    auto& on_node = members[static_cast<size_t>(node_index[static_cast<size_t>(m)])];
    local[static_cast<size_t>(m)] = static_cast<int64_t>(on_node.size());
    on_node.push_back(m);
  }
  std::vector<int64_t> peer(static_cast<size_t>(n * num_nodes));
  for (int64_t s = 0; s < n; ++s) {
    for (int64_t j = 0; j < num_nodes; ++j) {
      const auto& on_node = members[static_cast<size_t>(j)];
      peer[static_cast<size_t>(s * num_nodes + j)] =
          on_node[static_cast<size_t>(local[static_cast<size_t>(s)] % static_cast<int64_t>(on_node.size()))];
    }
  }
  return peer;
}

std::vector<int64_t> RailPeers(const FlexCounts& c) {
  return RailPeers(c.node_index, c.num_nodes);
}

int64_t RailPeer(const FlexCounts& c, int64_t s, int64_t node) {
  return RailPeers(c)[static_cast<size_t>(s * c.num_nodes + node)];
}

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

FlexLinkRows FlexDispatchRows(const FlexCounts& c) {
  return FlexDispatchRows(c.node_index, c.num_nodes, RankRowsOf(c), NodeRowsOf(c));
}

FlexLinks FlexLinksOf(const FlexCounts& c) {
  return FlexLinks{c.gpus_per_node, c.node_of, FlexDispatchRows(c)};
}

double FlexTokenBytes(double hidden, double act_bytes, bool fp8) {
  return DispatchRowBytes(hidden, act_bytes, fp8);
}

std::vector<double> FlexTimesUs(const FlexLinkRows& rows, double bytes_per_token, bool transpose, const std::vector<int64_t>& ep_group,
                                const ClusterSpec& cl, const CostOptions& o) {
  const int64_t n = rows.n;
  const double nvl = cl.intra_node_gbps * o.flex_nvlink_efficiency * kBytesPerUsPerGbps;
  const double net = cl.network_gbps * o.flex_network_efficiency * kBytesPerUsPerGbps;
  bool spans = false;
  for (int64_t r : ep_group) spans = spans || r / cl.gpus_per_node != ep_group.front() / cl.gpus_per_node;
  std::vector<double> t(static_cast<size_t>(n), 0.0);
  if (n < 2) return t;
  // The combine (transpose) sends what the dispatch received.
  const std::vector<int64_t>& nvl_send = transpose ? rows.nvlink_recv : rows.nvlink_send;
  const std::vector<int64_t>& nvl_recv = transpose ? rows.nvlink_send : rows.nvlink_recv;
  const std::vector<int64_t>& net_send = transpose ? rows.network_recv : rows.network_send;
  const std::vector<int64_t>& net_recv = transpose ? rows.network_send : rows.network_recv;
  const double latency = spans ? cl.network_latency_us : cl.intra_node_latency_us;
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
                            const ClusterSpec& cluster, const CostOptions& options, double* dt, double* ct, double* dt_bwd) {
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
  const std::vector<double> d = FlexTimesUs(rows, dispatch_bytes, false, ep_group, cluster, options);
  const std::vector<double> c = FlexTimesUs(rows, combine_bytes, true, ep_group, cluster, options);
  std::copy(d.begin(), d.end(), dt);
  std::copy(c.begin(), c.end(), ct);
  if (dt_bwd != nullptr) {
    // The backward dispatch moves BF16 rows: the dispatch pattern at the combine's row bytes.
    const std::vector<double> b = s.flex_fp8 ? FlexTimesUs(rows, combine_bytes, false, ep_group, cluster, options) : d;
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

void AddFlexCounts(const RoutingModel& model, const std::vector<int64_t>& ep_group, int64_t gpus_per_node, RoutingResult& routing) {
  for (size_t l = 0; l < routing.layers.size(); ++l) {
    routing.layers[l].flex = std::make_shared<const FlexCounts>(
        SampleFlexCounts(model, static_cast<int64_t>(l), ep_group, gpus_per_node, routing.tokens_per_rank));
  }
}

}  // namespace dockyard
