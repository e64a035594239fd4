// Communicator's checked, logged front end (backend.h); backends implement the Do* methods.
#include "runtime/backend.h"

#include <fmt/format.h>

#include "planner/base/error.h"

namespace dockyard::runtime {

void Communicator::Record(const char* op, const char* dtype, int64_t send_elems, int64_t recv_elems) {
  if (log_ != nullptr) log_->push_back({op, label_, dtype, size(), send_elems, recv_elems});
}

void Communicator::CheckSplits(const std::vector<int64_t>& send_splits, const std::vector<int64_t>& recv_splits, int64_t row_elems) const {
  if (static_cast<int64_t>(send_splits.size()) != size() || static_cast<int64_t>(recv_splits.size()) != size()) {
    throw Error(fmt::format("all_to_all_single on group {} of {} ranks: {} send splits and {} recv splits (need {})", label_, size(),
                            send_splits.size(), recv_splits.size(), size()));
  }
  if (row_elems < 0) throw Error(fmt::format("all_to_all_single on group {}: row_elems must be >= 0, got {}", label_, row_elems));
  for (size_t p = 0; p < send_splits.size(); ++p) {
    if (send_splits[p] < 0 || recv_splits[p] < 0) {
      throw Error(fmt::format("all_to_all_single on group {}: negative split for peer {} (send {}, recv {})", label_, p, send_splits[p],
                              recv_splits[p]));
    }
  }
}

namespace {
int64_t Sum(const std::vector<int64_t>& v) {
  int64_t s = 0;
  for (int64_t x : v) s += x;
  return s;
}
}  // namespace

void Communicator::AllToAllSingle(const float* send, const std::vector<int64_t>& send_splits, float* recv,
                                  const std::vector<int64_t>& recv_splits, int64_t row_elems) {
  CheckSplits(send_splits, recv_splits, row_elems);
  Record("all_to_all_single", "float32", Sum(send_splits) * row_elems, Sum(recv_splits) * row_elems);
  DoAllToAll(send, send_splits, recv, recv_splits, row_elems * static_cast<int64_t>(sizeof(float)));
}

void Communicator::AllToAllSingle(const int64_t* send, const std::vector<int64_t>& send_splits, int64_t* recv,
                                  const std::vector<int64_t>& recv_splits, int64_t row_elems) {
  CheckSplits(send_splits, recv_splits, row_elems);
  Record("all_to_all_single", "int64", Sum(send_splits) * row_elems, Sum(recv_splits) * row_elems);
  DoAllToAll(send, send_splits, recv, recv_splits, row_elems * static_cast<int64_t>(sizeof(int64_t)));
}

void Communicator::StartAllToAllSingle(const float* send, const std::vector<int64_t>& send_splits, float* recv,
                                       const std::vector<int64_t>& recv_splits, int64_t row_elems) {
  if (pending_) throw Error(fmt::format("all_to_all_single on group {}: an exchange is already pending", label_));
  CheckSplits(send_splits, recv_splits, row_elems);
  Record("all_to_all_single", "float32", Sum(send_splits) * row_elems, Sum(recv_splits) * row_elems);
  pending_ = true;
  DoStartAllToAll(send, send_splits, recv, recv_splits, row_elems * static_cast<int64_t>(sizeof(float)));
}

void Communicator::WaitPending() {
  if (!pending_) return;
  pending_ = false;
  DoWaitPending();
}

void Communicator::AllGather(const float* send, int64_t count, float* recv) {
  if (count < 0) throw Error(fmt::format("all_gather on group {}: count must be >= 0, got {}", label_, count));
  Record("all_gather", "float32", count, count * size());
  DoAllGather(send, count * static_cast<int64_t>(sizeof(float)), recv);
}

void Communicator::AllGather(const int64_t* send, int64_t count, int64_t* recv) {
  if (count < 0) throw Error(fmt::format("all_gather on group {}: count must be >= 0, got {}", label_, count));
  Record("all_gather", "int64", count, count * size());
  DoAllGather(send, count * static_cast<int64_t>(sizeof(int64_t)), recv);
}

void Communicator::ReduceScatter(const float* send, float* recv, int64_t count) {
  if (count < 0) throw Error(fmt::format("reduce_scatter on group {}: count must be >= 0, got {}", label_, count));
  Record("reduce_scatter", "float32", count * size(), count);
  DoReduceScatter(send, recv, count);
}

void Communicator::AllReduce(float* buf, int64_t count) {
  if (count < 0) throw Error(fmt::format("all_reduce on group {}: count must be >= 0, got {}", label_, count));
  Record("all_reduce", "float32", count, count);
  DoAllReduce(buf, count);
}

void Communicator::Barrier() {
  Record("barrier", "", 0, 0);
  DoBarrier();
}

}  // namespace dockyard::runtime
