// How a dockyard-run process learns its place in a multi-process launch (one process per GPU
// across nodes), and how the NCCL unique ids reach every process. CUDA-free: built and tested
// everywhere; the CUDA backend (cuda_backend.h) uses it.
//
// Launchers (first match wins; each variable named is read as a strict decimal):
//   torchrun     RANK, WORLD_SIZE, LOCAL_RANK [, LOCAL_WORLD_SIZE]   (torch.distributed.run)
//   Open MPI     OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE, OMPI_COMM_WORLD_LOCAL_RANK
//                [, OMPI_COMM_WORLD_LOCAL_SIZE]                         (mpirun)
//   Slurm        SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID [, SLURM_NTASKS_PER_NODE]   (srun)
//   none         a single process drives every GPU of its node (one thread per rank)
// The rank of the process is the global rank of the plan it runs; LOCAL_RANK picks its GPU.
//
// NCCL ids: in a single process the ids are made in memory. Across processes every group's
// member 0 calls ncclGetUniqueId and publishes the 128 bytes as a file in a directory all
// processes share (--nccl-id-dir, e.g. on the cluster's shared file system), written to a
// temporary name and renamed, so a reader never sees a partial id; the other members poll for
// it. The same mechanism as torchrun's FileStore, without a dependency.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace dockyard::runtime {

struct LaunchInfo {
  std::string launcher = "none";  // "none", "torchrun", "openmpi", "slurm"
  int64_t rank = 0;               // global rank of this process (multi-process only)
  int64_t world_size = 1;         // processes in the job
  int64_t local_rank = 0;         // index of this process on its node = its GPU ordinal
  int64_t local_world_size = 1;   // processes on this node (0 when the launcher does not say)
  // Names this job's id files, so a rerun in the same directory never reads a stale id:
  // TORCHELASTIC_RUN_ID (torchrun with --rdzv-id; its default "none" does not count),
  // SLURM_JOB_ID (+ SLURM_STEP_ID), PMIX_NAMESPACE or OMPI_MCA_orte_ess_jobid (Open MPI);
  // empty when the launcher gives none (then --nccl-job-id must).
  std::string job_id;
  // One process per GPU: a launcher started more than one process. (A one-process torchrun,
  // or a Slurm allocation without srun, sets the variables with a world of 1: single process.)
  bool multi_process() const { return launcher != "none" && world_size > 1; }
};

// Reads the launcher's variables through `getenv` (std::getenv in production). Throws
// dockyard::Error naming the variable, its value and the rule: not a decimal, rank outside
// [0, world_size), local_rank outside [0, local_world_size), a launcher's variable set without
// the others it needs.
LaunchInfo LaunchFromEnv(const std::function<const char*(const char*)>& getenv);

// Checks a multi-process launch's NCCL id exchange before anything starts: `dir` is given and
// is a writable directory, and the launch has a job id. Throws dockyard::Error naming the flag.
// In a single process, `dir` must be empty (nothing would use it).
void ValidateLaunch(const LaunchInfo& launch, const std::string& dir);

// Removes an id file once every member has read it (the group's init completed); errors ignored.
void RemoveId(const std::string& dir, const std::string& name);

// Publishes `bytes` as file `dir`/`name` atomically (temporary file + rename). Throws
// dockyard::Error naming the path when the directory cannot be written.
void PublishId(const std::string& dir, const std::string& name, const std::vector<char>& bytes);

// Waits (polling every 10 ms) until `dir`/`name` exists and holds exactly `size` bytes, and
// returns them. Throws dockyard::Error naming the path after `timeout_seconds`, or when the
// file has another size.
std::vector<char> WaitForId(const std::string& dir, const std::string& name, int64_t size, double timeout_seconds);

// The id file's name for a group: "<job_id>-<label>-<first global rank>.ncclid" (labels and
// first ranks identify a group uniquely: groups of one label partition the ranks). Characters
// of job_id other than [A-Za-z0-9._-] become '_'.
std::string IdFileName(const std::string& job_id, const std::string& label, int64_t first_rank);

}  // namespace dockyard::runtime
