// dockyard-run's deepep dispatcher: the exchanges (see deepep_dispatch.h).
#include "runtime/deepep_dispatch.h"

#include <algorithm>

namespace dockyard::runtime {

void TokenRecords::Append(const TokenRecords& from, int64_t i, int64_t meta_elems, int64_t top_k, int64_t row_elems) {
  meta.insert(meta.end(), from.meta.begin() + i * meta_elems, from.meta.begin() + (i + 1) * meta_elems);
  weights.insert(weights.end(), from.weights.begin() + i * top_k, from.weights.begin() + (i + 1) * top_k);
  rows.insert(rows.end(), from.rows.begin() + i * row_elems, from.rows.begin() + (i + 1) * row_elems);
  ++count;
}

namespace {

template <typename T>
std::vector<T> Exchange(Communicator& ep, Device& device, const std::vector<std::vector<T>>& per_dest, const std::vector<int64_t>& count_to,
                        const std::vector<int64_t>& count_from, int64_t elems) {
  const int64_t n = ep.size(), self = ep.rank();
  std::vector<int64_t> send_splits(static_cast<size_t>(n)), recv_splits(static_cast<size_t>(n));
  std::vector<T> send;
  int64_t total_recv = 0;
  for (int64_t d = 0; d < n; ++d) {
    send_splits[static_cast<size_t>(d)] = d == self ? 0 : count_to[static_cast<size_t>(d)];
    recv_splits[static_cast<size_t>(d)] = d == self ? 0 : count_from[static_cast<size_t>(d)];
    if (d != self) send.insert(send.end(), per_dest[static_cast<size_t>(d)].begin(), per_dest[static_cast<size_t>(d)].end());
    total_recv += recv_splits[static_cast<size_t>(d)];
  }
  DeviceArray<T> s(&device), r(&device, total_recv * elems);
  s.CopyFromHost(send);
  ep.AllToAllSingle(s.data(), send_splits, r.data(), recv_splits, elems);
  return r.ToHost();
}

}  // namespace

TokenRecords ExchangeRecords(Communicator& ep, Device& device, const std::vector<TokenRecords>& buckets, int64_t meta_elems, int64_t top_k,
                             int64_t row_elems, std::vector<int64_t>* recv_counts) {
  const int64_t n = ep.size(), self = ep.rank();
  std::vector<int64_t> count_to(static_cast<size_t>(n));
  for (int64_t d = 0; d < n; ++d) count_to[static_cast<size_t>(d)] = d == self ? 0 : buckets[static_cast<size_t>(d)].count;
  // Counts first (one int64 per member), then the records.
  DeviceArray<int64_t> cs(&device), cr(&device, n);
  cs.CopyFromHost(count_to);
  const std::vector<int64_t> ones(static_cast<size_t>(n), 1);
  ep.AllToAllSingle(cs.data(), ones, cr.data(), ones, 1);
  *recv_counts = cr.ToHost();
  (*recv_counts)[static_cast<size_t>(self)] = 0;
  std::vector<std::vector<int64_t>> meta(static_cast<size_t>(n));
  std::vector<std::vector<float>> weights(static_cast<size_t>(n)), rows(static_cast<size_t>(n));
  for (int64_t d = 0; d < n; ++d) {
    meta[static_cast<size_t>(d)] = buckets[static_cast<size_t>(d)].meta;
    weights[static_cast<size_t>(d)] = buckets[static_cast<size_t>(d)].weights;
    rows[static_cast<size_t>(d)] = buckets[static_cast<size_t>(d)].rows;
  }
  TokenRecords out;
  out.meta = Exchange(ep, device, meta, count_to, *recv_counts, meta_elems);
  out.weights = Exchange(ep, device, weights, count_to, *recv_counts, top_k);
  out.rows = Exchange(ep, device, rows, count_to, *recv_counts, row_elems);
  for (int64_t c : *recv_counts) out.count += c;
  return out;
}

std::vector<float> ExchangeRows(Communicator& ep, Device& device, const std::vector<std::vector<float>>& rows,
                                const std::vector<int64_t>& count_to, const std::vector<int64_t>& count_from, int64_t row_elems) {
  return Exchange(ep, device, rows, count_to, count_from, row_elems);
}

}  // namespace dockyard::runtime
