// The deepep dispatcher's token-level counts (Megatron `flex` with the DeepEP or HybridEP backend;
// deepseek-ai/DeepEP normal kernels, csrc/kernels/internode.cu), drawn from a routing sample: a
// token crosses the network ONCE per destination node -- RDMA to the GPU of that node with the
// sender's local index (its rail peer) -- and is then forwarded over NVLink to every GPU of the
// node that holds at least one of its experts (once per GPU, not once per expert). A destination
// on the sender's own node gets it over NVLink directly. The combine mirrors it. What those rows
// cost is planner/cost/deepep.h.
//
// Rail peer of s on node n: the member of n whose index among n's members equals s's index among
// its own node's members (modulo n's member count when the node holds fewer).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "planner/routing/routing.h"

namespace dockyard {

// Token-level counts of one layer for the flex dispatcher (stored in LayerRouting).
struct FlexCounts {
  int64_t gpus_per_node = 0;         // the node size the counts were made with (MakeFlexCounts)
  std::vector<int64_t> node_of;      // [n] node of each EP member (rank / gpus_per_node)
  int64_t num_nodes = 0;             // distinct nodes, numbered 0.. in member order (node_index)
  std::vector<int64_t> node_index;   // [n] member -> 0..num_nodes-1
  std::vector<int64_t> rank_tokens;  // [n*n] tokens of source s with >= 1 expert on member d
  std::vector<int64_t> node_tokens;  // [n*num_nodes] tokens of source s with >= 1 expert on node j
};

// Empty counts for the members of an EP group (global ranks) on nodes of gpus_per_node.
FlexCounts MakeFlexCounts(const std::vector<int64_t>& ep_group, int64_t gpus_per_node);

// Adds the tokens of `source` (member index): experts [tokens * top_k], member d owns the
// contiguous experts [d * experts_per_member, (d + 1) * experts_per_member).
void AddFlexTokens(FlexCounts& counts, int64_t source, const int32_t* experts, int64_t tokens, int64_t top_k, int64_t experts_per_member);

// The counts of `layer` for every member, drawn with SampleTokenExperts (the stream the dispatch
// matrices count).
FlexCounts SampleFlexCounts(const RoutingModel& model, int64_t layer, const std::vector<int64_t>& ep_group, int64_t gpus_per_node,
                            int64_t tokens_per_rank);

// The rail peer of every member on every node (above): [n * num_nodes], member s's peer on node j
// at s * num_nodes + j, for members on nodes node_index[0..n) (0..num_nodes-1).
std::vector<int64_t> RailPeers(const std::vector<int64_t>& node_index, int64_t num_nodes);
std::vector<int64_t> RailPeers(const FlexCounts& counts);

// The rail peer of member s on node j (RailPeers' entry).
int64_t RailPeer(const FlexCounts& counts, int64_t s, int64_t node);

// The row sums and column sums of FlexDispatchBytes' matrices, in token rows (exact integers):
// per member, the rows it sends and receives over NVLink and by RDMA in the dispatch. The combine
// sends what the dispatch received (its matrices are the transposes).
struct FlexLinkRows {
  int64_t n = 0;
  std::vector<int64_t> nvlink_send, nvlink_recv, network_send, network_recv;  // [n]
};
FlexLinkRows FlexDispatchRows(const FlexCounts& counts);

// The dispatch's transfers (the rule above), the one home of it: fn(from, to, rows, network) for
// every RDMA send (network = true: source s to its rail peer on each other node j,
// node_rows(s)[j] rows) and every NVLink write (rank_rows(s)[r] rows to member r, from s on its
// own node, else from the rail peer that received them; none when they are already on r), source
// by source. rank_rows(s) and node_rows(s) point at source s's n and num_nodes counts
// (FlexCounts::rank_tokens and node_tokens rows, or the search's block counts, any integer type).
template <class RankRows, class NodeRows, class Fn>
void ForEachFlexTransfer(const std::vector<int64_t>& node_index, int64_t num_nodes, RankRows&& rank_rows, NodeRows&& node_rows, Fn&& fn) {
  const int64_t n = static_cast<int64_t>(node_index.size());
  const std::vector<int64_t> peer = RailPeers(node_index, num_nodes);
  for (int64_t s = 0; s < n; ++s) {
    const int64_t home = node_index[static_cast<size_t>(s)];
    const int64_t* rail = peer.data() + s * num_nodes;
    const auto* to_node = node_rows(s);
    for (int64_t j = 0; j < num_nodes; ++j) {
      if (j != home) fn(s, rail[j], static_cast<int64_t>(to_node[j]), true);
    }
    const auto* to_rank = rank_rows(s);
    for (int64_t r = 0; r < n; ++r) {
      const int64_t j = node_index[static_cast<size_t>(r)];
      const int64_t from = j == home ? s : rail[j];
      if (from != r) fn(from, r, static_cast<int64_t>(to_rank[r]), false);
    }
  }
}
// Accessors of a FlexCounts' rows for ForEachFlexTransfer.
inline auto RankRowsOf(const FlexCounts& c) {
  return [&c](int64_t s) { return c.rank_tokens.data() + s * static_cast<int64_t>(c.node_index.size()); };
}
inline auto NodeRowsOf(const FlexCounts& c) {
  return [&c](int64_t s) { return c.node_tokens.data() + s * c.num_nodes; };
}
// FlexLinkRows from counts read through accessors (ForEachFlexTransfer).
template <class RankRows, class NodeRows>
FlexLinkRows FlexDispatchRows(const std::vector<int64_t>& node_index, int64_t num_nodes, RankRows&& rank_rows, NodeRows&& node_rows) {
  FlexLinkRows t;
  t.n = static_cast<int64_t>(node_index.size());
  for (auto* v : {&t.nvlink_send, &t.nvlink_recv, &t.network_send, &t.network_recv}) v->assign(static_cast<size_t>(t.n), 0);
  int64_t* const nvl_send = t.nvlink_send.data();
  int64_t* const nvl_recv = t.nvlink_recv.data();
  int64_t* const net_send = t.network_send.data();
  int64_t* const net_recv = t.network_recv.data();
  ForEachFlexTransfer(node_index, num_nodes, rank_rows, node_rows, [&](int64_t from, int64_t to, int64_t rows, bool network) {
    (network ? net_send : nvl_send)[from] += rows;
    (network ? net_recv : nvl_recv)[to] += rows;
  });
  return t;
}

// What the deepep time model reads of one sampled layer: the members' nodes (checked against the
// cluster's NVLink domains) and the rows per link.
struct FlexLinks {
  int64_t gpus_per_node = 0;     // FlexCounts::gpus_per_node
  std::vector<int64_t> node_of;  // [n] FlexCounts::node_of
  FlexLinkRows rows;             // FlexDispatchRows
};
FlexLinks FlexLinksOf(const FlexCounts& counts);

// The plan's EP group of rank 0 (the members the routing sample's ranks stand for).
// SampleRoutingForPlan fills every layer's flex counts with it when the dispatcher is deepep.
void AddFlexCounts(const RoutingModel& model, const std::vector<int64_t>& ep_group, int64_t gpus_per_node, RoutingResult& routing);

}  // namespace dockyard
