// CpuBackend (cpu_backend.h).
#include "runtime/cpu/cpu_backend.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <thread>

#include <fmt/format.h>

#include "planner/base/error.h"

namespace dockyard::runtime::cpu {

// ---------------------------------------------------------------------------------------------
// Device.

void* CpuDevice::Allocate(int64_t bytes) {
  if (bytes < 0) throw Error(fmt::format("cpu device: cannot allocate {} bytes", bytes));
  // 64-byte alignment (cache lines, any vector width); at least one line so the pointer is
  // never null and distinct allocations never alias.
  const size_t size = (static_cast<size_t>(bytes) + 63) / 64 * 64 + 64;
  void* p = std::aligned_alloc(64, size);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}

void CpuDevice::Free(void* ptr) noexcept {
  std::free(ptr);
}

void CpuDevice::CopyToHost(void* host, const void* device, int64_t bytes) {
  if (bytes > 0) std::memcpy(host, device, static_cast<size_t>(bytes));
}

void CpuDevice::CopyToDevice(void* device, const void* host, int64_t bytes) {
  if (bytes > 0) std::memcpy(device, host, static_cast<size_t>(bytes));
}

namespace {

// Thrown in ranks released from a collective because another rank failed.
struct Aborted : std::exception {
  const char* what() const noexcept override { return "aborted: another rank failed"; }
};

class RunState {
 public:
  std::atomic<bool> aborted{false};
  std::mutex mu;
  std::condition_variable cv;  // one condition for every barrier of the run: aborts wake all
};

// A reusable barrier (generation counting). An abortable wait throws Aborted once the run is
// aborted. A collective's first wait (everyone has posted) is abortable: a member may never
// come. Its later waits are not: every member has posted and will arrive, and a member must not
// unwind (freeing buffers) while peers still copy from them.
class Barrier {
 public:
  Barrier(int64_t n, RunState* run) : n_(n), run_(run) {}
  void Wait(bool abortable = true) {
    std::unique_lock<std::mutex> lock(run_->mu);
    if (abortable && run_->aborted) throw Aborted();
    const int64_t generation = generation_;
    if (++arrived_ == n_) {
      arrived_ = 0;
      ++generation_;
      run_->cv.notify_all();
      return;
    }
    run_->cv.wait(lock, [&] { return generation_ != generation || (abortable && run_->aborted.load()); });
    if (generation_ == generation) throw Aborted();
  }

 private:
  int64_t n_;
  RunState* run_;
  int64_t arrived_ = 0;
  int64_t generation_ = 0;
};

enum class OpCode { kAllToAll, kAllGather, kReduceScatter, kAllReduce, kBarrier };

const char* OpName(OpCode op) {
  switch (op) {
    case OpCode::kAllToAll:
      return "all_to_all_single";
    case OpCode::kAllGather:
      return "all_gather";
    case OpCode::kReduceScatter:
      return "reduce_scatter";
    case OpCode::kAllReduce:
      return "all_reduce";
    case OpCode::kBarrier:
      return "barrier";
  }
  return "?";
}

// What a member posts for one collective.
struct Slot {
  OpCode op = OpCode::kBarrier;
  int64_t unit_bytes = 0;  // row bytes (all-to-all), bytes (all-gather), count (reductions)
  const void* send = nullptr;
  const std::vector<int64_t>* send_splits = nullptr;
  const std::vector<int64_t>* recv_splits = nullptr;
};

struct GroupState {
  GroupState(std::string label_in, std::vector<int64_t> ranks_in, RunState* run)
      : label(std::move(label_in)), ranks(std::move(ranks_in)), barrier(static_cast<int64_t>(ranks.size()), run), slots(ranks.size()) {}
  std::string label;
  std::vector<int64_t> ranks;
  Barrier barrier;
  std::vector<Slot> slots;
  std::vector<float> scratch;  // all-reduce result, written chunk-wise by the members
};

class CpuCommunicator : public Communicator {
 public:
  CpuCommunicator(GroupState* state, int64_t index) : Communicator(state->label, state->ranks, index), s_(state) {}

 protected:
  void DoAllToAll(const void* send, const std::vector<int64_t>& send_splits, void* recv, const std::vector<int64_t>& recv_splits,
                  int64_t row_bytes) override {
    Post(OpCode::kAllToAll, row_bytes, send, &send_splits, &recv_splits);
    // Every member checks the whole split matrix from the shared slots, so all of them reach the
    // same verdict; they throw only after everyone has finished reading the peers' split vectors
    // (a member that unwound early would free memory its peers are still reading).
    std::string error;
    for (int64_t p = 0; p < size() && error.empty(); ++p) {
      for (int64_t q = 0; q < size(); ++q) {
        const int64_t sent = (*s_->slots[static_cast<size_t>(p)].send_splits)[static_cast<size_t>(q)];
        const int64_t expected = (*s_->slots[static_cast<size_t>(q)].recv_splits)[static_cast<size_t>(p)];
        if (sent != expected) {
          error = fmt::format("all_to_all_single on group {}: rank {} sends {} rows to rank {}, which expects {}", label(),
                              ranks()[static_cast<size_t>(p)], sent, ranks()[static_cast<size_t>(q)], expected);
          break;
        }
      }
    }
    s_->barrier.Wait(false);
    if (!error.empty()) Fail(error);
    const int64_t me = rank();
    // Pull: peer p's rows for me start after the rows p sends to members before me.
    int64_t recv_offset = 0;
    for (int64_t p = 0; p < size(); ++p) {
      const Slot& peer = s_->slots[static_cast<size_t>(p)];
      const std::vector<int64_t>& peer_splits = *peer.send_splits;
      int64_t src_offset = 0;
      for (int64_t q = 0; q < me; ++q) src_offset += peer_splits[static_cast<size_t>(q)];
      const int64_t rows = recv_splits[static_cast<size_t>(p)];
      if (rows > 0) {
        std::memcpy(static_cast<char*>(recv) + recv_offset * row_bytes, static_cast<const char*>(peer.send) + src_offset * row_bytes,
                    static_cast<size_t>(rows * row_bytes));
      }
      recv_offset += rows;
    }
    s_->barrier.Wait(false);
  }

  void DoAllGather(const void* send, int64_t bytes, void* recv) override {
    Post(OpCode::kAllGather, bytes, send, nullptr, nullptr);
    for (int64_t p = 0; p < size(); ++p) {
      if (bytes > 0) std::memcpy(static_cast<char*>(recv) + p * bytes, s_->slots[static_cast<size_t>(p)].send, static_cast<size_t>(bytes));
    }
    s_->barrier.Wait(false);
  }

  void DoReduceScatter(const float* send, float* recv, int64_t count) override {
    Post(OpCode::kReduceScatter, count, send, nullptr, nullptr);
    const int64_t me = rank();
    for (int64_t i = 0; i < count; ++i) {
      float sum = static_cast<const float*>(s_->slots[0].send)[me * count + i];
      for (int64_t p = 1; p < size(); ++p) sum += static_cast<const float*>(s_->slots[static_cast<size_t>(p)].send)[me * count + i];
      recv[i] = sum;
    }
    s_->barrier.Wait(false);
  }

  void DoAllReduce(float* buf, int64_t count) override {
    // Member 0 sizes the scratch before posting, so it is ready once everyone has posted.
    if (rank() == 0) s_->scratch.resize(static_cast<size_t>(count));
    Post(OpCode::kAllReduce, count, buf, nullptr, nullptr);
    // Each member reduces one chunk (torch.chunk split) into the shared scratch.
    const int64_t n = size();
    const int64_t chunk = (count + n - 1) / n;
    const int64_t begin = std::min(count, rank() * chunk), end = std::min(count, begin + chunk);
    for (int64_t i = begin; i < end; ++i) {
      float sum = static_cast<const float*>(s_->slots[0].send)[i];
      for (int64_t p = 1; p < n; ++p) sum += static_cast<const float*>(s_->slots[static_cast<size_t>(p)].send)[i];
      s_->scratch[static_cast<size_t>(i)] = sum;
    }
    s_->barrier.Wait(false);  // every chunk reduced; nobody reads a member's buf any more
    if (count > 0) std::memcpy(buf, s_->scratch.data(), static_cast<size_t>(count) * sizeof(float));
    s_->barrier.Wait(false);  // scratch may be reused
  }

  void DoBarrier() override {
    Post(OpCode::kBarrier, 0, nullptr, nullptr, nullptr);
    s_->barrier.Wait(false);  // nobody overwrites its slot while a peer still checks it
  }

 private:
  // Posts this member's slot, waits for all members, and checks they issued the same collective.
  void Post(OpCode op, int64_t unit, const void* send, const std::vector<int64_t>* send_splits, const std::vector<int64_t>* recv_splits) {
    Slot& mine = s_->slots[static_cast<size_t>(rank())];
    mine.op = op;
    mine.unit_bytes = unit;
    mine.send = send;
    mine.send_splits = send_splits;
    mine.recv_splits = recv_splits;
    s_->barrier.Wait();
    for (int64_t p = 0; p < size(); ++p) {
      const Slot& peer = s_->slots[static_cast<size_t>(p)];
      const bool same_unit = op == OpCode::kBarrier || peer.unit_bytes == unit;
      if (peer.op != op || !same_unit) {
        Fail(fmt::format("collective mismatch on group {}: rank {} issued {} ({}), rank {} issued {} ({})", label(),
                         ranks()[static_cast<size_t>(rank())], OpName(op), unit, ranks()[static_cast<size_t>(p)], OpName(peer.op),
                         peer.unit_bytes));
      }
    }
  }

  [[noreturn]] void Fail(const std::string& message) { throw Error(message); }

  GroupState* s_;
};

class CpuRankContext : public RankContext {
 public:
  CpuRankContext(int64_t rank, CpuDevice* device, CpuOps* ops) : rank_(rank), device_(device), ops_(ops) {}
  int64_t rank() const override { return rank_; }
  Device& device() override { return *device_; }
  ComputeOps& ops() override { return *ops_; }
  Communicator& group(const std::string& label) override {
    auto it = comms_.find(label);
    if (it == comms_.end()) throw Error(fmt::format("rank {} has no communicator for group \"{}\"", rank_, label));
    return *it->second;
  }
  void Add(const std::string& label, std::unique_ptr<Communicator> comm) { comms_[label] = std::move(comm); }

 private:
  int64_t rank_;
  CpuDevice* device_;
  CpuOps* ops_;
  std::map<std::string, std::unique_ptr<Communicator>> comms_;
};

}  // namespace

void CpuBackend::RunRanks(const std::vector<RankSpec>& ranks, const RankBody& body) {
  if (static_cast<int64_t>(ranks.size()) > max_ranks_) {
    throw Error(fmt::format("the cpu backend runs one thread per rank and at most {} ranks, got {}", max_ranks_, ranks.size()));
  }
  RunState run;
  CpuDevice device;
  // One shared state per distinct (label, member list).
  std::map<std::pair<std::string, std::vector<int64_t>>, std::unique_ptr<GroupState>> groups;
  std::vector<std::unique_ptr<CpuRankContext>> contexts;
  for (const RankSpec& spec : ranks) {
    auto ctx = std::make_unique<CpuRankContext>(spec.rank, &device, &ops_);
    for (const GroupSpec& g : spec.groups) {
      auto pos = std::find(g.ranks.begin(), g.ranks.end(), spec.rank);
      if (pos == g.ranks.end()) {
        throw Error(fmt::format("rank {} is not a member of its group \"{}\"", spec.rank, g.label));
      }
      auto& state = groups[{g.label, g.ranks}];
      if (!state) state = std::make_unique<GroupState>(g.label, g.ranks, &run);
      ctx->Add(g.label, std::make_unique<CpuCommunicator>(state.get(), pos - g.ranks.begin()));
    }
    contexts.push_back(std::move(ctx));
  }
  std::mutex error_mu;
  std::exception_ptr first_error;
  auto fail = [&](std::exception_ptr e) {
    {
      std::lock_guard<std::mutex> lock(error_mu);
      if (!first_error) first_error = e;
    }
    {
      std::lock_guard<std::mutex> lock(run.mu);
      run.aborted = true;
    }
    run.cv.notify_all();
  };
  std::vector<std::thread> threads;
  threads.reserve(contexts.size());
  for (auto& ctx : contexts) {
    threads.emplace_back([&, c = ctx.get()] {
      try {
        body(*c);
      } catch (const Aborted&) {
        // released because another rank failed; that rank reports the error
      } catch (const Error& e) {
        fail(std::make_exception_ptr(Error(fmt::format("rank {}: {}", c->rank(), e.what()))));
      } catch (...) {
        fail(std::current_exception());
      }
    });
  }
  for (auto& t : threads) t.join();
  if (first_error) std::rethrow_exception(first_error);
}

}  // namespace dockyard::runtime::cpu
