// The CPU backend: one std::thread per rank, host memory as device memory, and a
// shared-memory communicator per group.
//
// Collectives rendezvous in a per-group state: each member posts its buffers and split sizes,
// waits on the group's barrier, pulls what it needs directly from its peers' send buffers, and
// waits again before anyone may reuse a buffer. Every member checks that all members issued the
// same collective (op and element size) and that every pair's split sizes agree, so a
// mismatched collective fails with a message instead of deadlocking or corrupting memory.
// Reductions sum in group-rank order (member 0 + member 1 + ...), identical on every member
// and on every run. When a rank throws, the backend marks the run aborted and wakes every
// barrier: the other ranks leave their collectives with an "aborted" exception and the first
// real error is rethrown to the caller.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/backend.h"
#include "runtime/cpu/cpu_ops.h"

namespace dockyard::runtime::cpu {

class CpuDevice : public Device {
 public:
  std::string name() const override { return "cpu"; }
  void* Allocate(int64_t bytes) override;
  void Free(void* ptr) noexcept override;
  void CopyToHost(void* host, const void* device, int64_t bytes) override;
  void CopyToDevice(void* device, const void* host, int64_t bytes) override;
  void Synchronize() override {}
};

class CpuBackend : public Backend {
 public:
  // `max_ranks`: the most ranks (threads) one RunRanks may start.
  explicit CpuBackend(int64_t max_ranks = 1024) : max_ranks_(max_ranks) {}
  std::string name() const override { return "cpu"; }
  void RunRanks(const std::vector<RankSpec>& ranks, const RankBody& body) override;
  const char* isa() const { return ops_.isa(); }

 private:
  int64_t max_ranks_;
  CpuOps ops_;
};

}  // namespace dockyard::runtime::cpu
