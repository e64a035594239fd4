// The CUDA backend of a build without a CUDA toolkit (cuda_backend.h): every entry says so.
#include "planner/base/error.h"
#include "runtime/cuda/cuda_backend.h"

namespace dockyard::runtime::cuda {

bool CudaBackendCompiled() {
  return false;
}

int CudaDeviceCount(std::string* why) {
  if (why != nullptr) *why = "this dockyard-run was built without the CUDA backend (no CUDA toolkit at build time)";
  return 0;
}

std::unique_ptr<Backend> MakeCudaBackend(const CudaBackendOptions&) {
  throw Error(
      "this dockyard-run was built without the CUDA backend (--backend cuda): no CUDA toolkit was found at build time "
      "(set CUDA_PATH or install it at /usr/local/cuda, then rebuild); use --backend cpu");
}

}  // namespace dockyard::runtime::cuda
