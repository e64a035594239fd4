// dockyard-run's CUDA + NCCL backend (backend.h's interface on GPUs). This header is CUDA-free:
// it is compiled everywhere; cuda_backend.cc implements it where the build found a CUDA
// toolkit (tools/cuda.bzl), cuda_backend_stub.cc where it did not (every call then says so).
//
// One rank per GPU. Launch (docs/runtime.md, "CUDA backend"):
//   single process   one thread per rank drives GPU i = the rank's index in the run (the plan's
//                    ranks of one node: needs as many visible GPUs as ranks); NCCL ids in memory.
//   one process/GPU  under torchrun, srun or mpirun (launch.h): the process runs the rank given by
//                    the launcher (RANK, SLURM_PROCID, OMPI_COMM_WORLD_RANK) on GPU LOCAL_RANK;
//                    NCCL ids are exchanged as files in --nccl-id-dir, a directory every process sees.
// Communicators: one NCCL communicator per mesh-axis group of the rank (ncclCommInitRank with
// the group's id; groups initialized in label order on every rank, so no two ranks wait on each
// other's different groups). all_to_all_single with uneven splits = ncclSend/ncclRecv pairs in
// one ncclGroupStart/End; all_gather, reduce_scatter and all_reduce are NCCL's. Every op of a
// rank runs on the rank's one stream, so communication is ordered against compute; a
// collective blocks until it completed (the Communicator contract), polling so that a failing
// rank aborts the others' communicators instead of leaving them hung.
// Reductions are NCCL's (not in group-rank order), so results agree with the CPU backend within
// the run's tolerance, not bit for bit. Compute: kernels/moe_kernels.h (router GEMM bit-exact
// with the CPU), expert GEMMs through cuBLAS (kernels/grouped_gemm.h) at `precision`.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "runtime/backend.h"
#include "runtime/cuda/launch.h"

namespace dockyard::runtime::cuda {

struct CudaBackendOptions {
  std::string precision = "fp32";     // expert GEMMs: fp32 | tf32 | bf16 (kernels/grouped_gemm.h)
  std::string gemm_path = "auto";  // auto (kernels/grouped_gemm_path.h) | grouped (cublasGemmGroupedBatchedEx) | loop (cublasGemmEx per expert)
  LaunchInfo launch;                  // LaunchFromEnv(); launcher "none" = single process
  std::string nccl_id_dir;            // multi-process: the shared directory of NCCL id files
  double id_timeout_seconds = 300;
};

// True when this binary was built with the CUDA backend.
bool CudaBackendCompiled();

// GPUs visible to this process (0 when built without CUDA, or when no driver/GPU is present).
// Never throws; `why` (optional) gets the reason when 0.
int CudaDeviceCount(std::string* why = nullptr);

// The backend. Throws dockyard::Error: built without CUDA ("this dockyard-run was built
// without the CUDA backend"), no GPU visible, a bad precision or gemm path, or a multi-process
// launch without --nccl-id-dir.
std::unique_ptr<Backend> MakeCudaBackend(const CudaBackendOptions& options);

}  // namespace dockyard::runtime::cuda
