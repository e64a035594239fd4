// The deepep dispatcher's token-level counts (see flex_counts.h).
#include "planner/routing/flex_counts.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "planner/base/error.h"

namespace dockyard {

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

FlexLinkRows FlexDispatchRows(const FlexCounts& c) {
  return FlexDispatchRows(c.node_index, c.num_nodes, RankRowsOf(c), NodeRowsOf(c));
}

FlexLinks FlexLinksOf(const FlexCounts& c) {
  return FlexLinks{c.gpus_per_node, c.node_of, FlexDispatchRows(c)};
}

void AddFlexCounts(const RoutingModel& model, const std::vector<int64_t>& ep_group, int64_t gpus_per_node, RoutingResult& routing) {
  for (size_t l = 0; l < routing.layers.size(); ++l) {
    routing.layers[l].flex = std::make_shared<const FlexCounts>(
        SampleFlexCounts(model, static_cast<int64_t>(l), ep_group, gpus_per_node, routing.tokens_per_rank));
  }
}

}  // namespace dockyard
