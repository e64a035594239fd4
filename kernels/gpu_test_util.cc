#include "kernels/gpu_test_util.h"

#include <cuda_runtime_api.h>

#include <cstdio>

#include "kernels/moe_kernels.h"

namespace dockyard::kernels::testing {

bool HaveGpu() {
  static const bool have = [] {
    int count = 0;
    const cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count == 0) {
      std::fprintf(stderr, "no GPU visible (%s): GPU test cases are skipped\n", e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
      return false;
    }
    return true;
  }();
  return have;
}

template <typename T>
Buffer<T>::Buffer(int64_t n) : n_(n) {
  CheckCuda(cudaMalloc(reinterpret_cast<void**>(&ptr_), static_cast<size_t>(n > 0 ? n : 1) * sizeof(T)), "cudaMalloc");
}

template <typename T>
Buffer<T>::Buffer(const std::vector<T>& host) : Buffer(static_cast<int64_t>(host.size())) {
  if (!host.empty()) {
    CheckCuda(cudaMemcpy(ptr_, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice), "cudaMemcpy");
  }
}

template <typename T>
Buffer<T>::~Buffer() {
  cudaFree(ptr_);
}

template <typename T>
std::vector<T> Buffer<T>::ToHost() const {
  CheckCuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  std::vector<T> host(static_cast<size_t>(n_));
  if (n_ > 0) CheckCuda(cudaMemcpy(host.data(), ptr_, host.size() * sizeof(T), cudaMemcpyDeviceToHost), "cudaMemcpy");
  return host;
}

template class Buffer<float>;
template class Buffer<int64_t>;
template class Buffer<uint16_t>;

}  // namespace dockyard::kernels::testing
