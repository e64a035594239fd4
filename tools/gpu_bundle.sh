#!/usr/bin/env bash
# Builds the GPU binaries here (optimized, dockyard's libraries linked in, cudart static) and
# puts them with the libraries a bare GPU machine may lack into out/gpu/ (git-ignored), ready
# to carry to the device machine, where tools/gpu_check.sh runs them (no Bazel there).
#   tools/gpu_bundle.sh            -> out/gpu/{bin,lib}
# Needs the CUDA toolkit here (compile and link only). cuBLAS and NCCL are not bundled (over
# 200 MB): gpu_check.sh finds the device's own (CUDA toolkit, PyTorch's nvidia-* wheels).
set -euo pipefail
cd "$(dirname "$0")/.."
tools/ensure_deps.sh
if [ ! -x "${CUDA_PATH:-/usr/local/cuda}/bin/nvcc" ]; then
  echo "gpu_bundle: no CUDA toolkit (nvcc) at ${CUDA_PATH:-/usr/local/cuda}: nothing to bundle" >&2
  exit 1
fi
targets=(//cli:dockyard-run //cli:dockyard-plan //kernels:moe_kernels_gpu_test //kernels:bench_gpu
         //runtime:cuda_backend_gpu_test)
# --dynamic_mode=off: tests too link dockyard's libraries statically (no _solib_ to carry).
bazel build -c opt --dynamic_mode=off "${targets[@]}"
bin="$(bazel info -c opt --dynamic_mode=off bazel-bin)"
rm -rf out/gpu
mkdir -p out/gpu/bin out/gpu/lib
cp "$bin/cli/dockyard-run" "$bin/cli/dockyard-plan" "$bin/kernels/moe_kernels_gpu_test" "$bin/kernels/bench_gpu" \
   "$bin/runtime/cuda_backend_gpu_test" out/gpu/bin/
chmod u+w out/gpu/bin/*
strip out/gpu/bin/*
# Debian's shared libraries the binaries use that a GPU image may not have.
for lib in libfmt.so.9 libcrypto.so.3; do
  cp -L "$(ldconfig -p | awk -v l="$lib" '$1 == l { print $NF; exit }')" out/gpu/lib/
done
du -sh out/gpu
ls -la out/gpu/bin out/gpu/lib
