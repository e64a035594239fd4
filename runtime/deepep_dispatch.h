// dockyard-run's deepep dispatcher (planner/cost/deepep.h has the rule and its sources): a token
// crosses "the network" once per destination node -- to its rail peer there -- and is then
// forwarded inside the node to every member holding one of its experts; the combine mirrors it
// (each expert rank returns one weighted partial sum per token, the forwarder sums its node's
// partials in member order, the source sums the nodes' in node order). Both stages run on the
// EP group's communicator with splits that are zero except to the rail peers (network stage) or
// to the same node's members (NVLink stage); on the CPU backend that is the shared-memory
// communicator, on CUDA NCCL. The rows each rank sends per stage and destination are recorded so
// that they can be compared with the planner's link matrices (FlexDispatchBytes).
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/backend.h"

namespace dockyard::runtime {

// Token records: per token `meta_elems` int64 (source member, token index, its top_k experts),
// top_k float weights and one row of `row_elems` floats.
struct TokenRecords {
  std::vector<int64_t> meta;
  std::vector<float> weights;
  std::vector<float> rows;
  int64_t count = 0;
  void Append(const TokenRecords& from, int64_t i, int64_t meta_elems, int64_t top_k, int64_t row_elems);
};

// Sends buckets[d] to EP member d for every d != self (buckets[self] is not sent), after an
// exchange of counts; returns what arrived, in member order, and the count from each member.
TokenRecords ExchangeRecords(Communicator& ep, Device& device, const std::vector<TokenRecords>& buckets, int64_t meta_elems, int64_t top_k,
                             int64_t row_elems, std::vector<int64_t>* recv_counts);

// Sends rows[d] (count_to[d] rows of row_elems, d != self) and receives count_from[d] rows from
// each member, in member order (the combine: the reverse of an ExchangeRecords).
std::vector<float> ExchangeRows(Communicator& ep, Device& device, const std::vector<std::vector<float>>& rows,
                                const std::vector<int64_t>& count_to, const std::vector<int64_t>& count_from, int64_t row_elems);

}  // namespace dockyard::runtime
