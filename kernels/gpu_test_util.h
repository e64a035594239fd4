// Helpers of the GPU tests: whether a GPU is present (tests skip themselves when not, so a
// machine without one reports them as skipped, never as passed) and host <-> device copies.
#pragma once

#include <cstdint>
#include <vector>

#include <doctest/doctest.h>

namespace dockyard::kernels::testing {

// True when at least one CUDA device is visible (evaluated once; prints why not, once).
bool HaveGpu();

// doctest decorator: skip the test case when no GPU is visible.
#define DOCKYARD_GPU_TEST(name) TEST_CASE(name* doctest::skip(!::dockyard::kernels::testing::HaveGpu()))

// Device buffers (cudaMalloc'd; freed by the destructor).
template <typename T>
class Buffer {
 public:
  explicit Buffer(int64_t n);
  explicit Buffer(const std::vector<T>& host);
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  T* get() { return ptr_; }
  std::vector<T> ToHost() const;
  int64_t size() const { return n_; }

 private:
  T* ptr_ = nullptr;
  int64_t n_ = 0;
};

}  // namespace dockyard::kernels::testing
