// Multi-process launch and NCCL id exchange (launch.h).
#include "runtime/cuda/launch.h"

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <thread>

#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include "planner/base/error.h"

namespace dockyard::runtime {
namespace {

// Strict decimal in [0, 2^31): what a launcher writes.
int64_t ParseVar(const char* name, const char* value) {
  const std::string s = value;
  if (s.empty() || s.size() > 10 || s.find_first_not_of("0123456789") != std::string::npos) {
    throw Error(fmt::format("environment variable {}='{}': must be a decimal integer >= 0", name, s));
  }
  const int64_t v = std::stoll(s);
  if (v >= (int64_t{1} << 31)) throw Error(fmt::format("environment variable {}={}: must be < 2^31", name, v));
  return v;
}

struct Vars {
  const char* launcher;
  const char* rank;
  const char* size;
  const char* local_rank;
  const char* local_size;
};

}  // namespace

LaunchInfo LaunchFromEnv(const std::function<const char*(const char*)>& getenv) {
  static const Vars kLaunchers[] = {
      {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"},
      {"openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"},
      {"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE"},
  };
  for (const Vars& v : kLaunchers) {
    const char* rank = getenv(v.rank);
    const char* size = getenv(v.size);
    if (rank == nullptr && size == nullptr) continue;
    if (rank == nullptr || size == nullptr) {
      throw Error(fmt::format("{} launch: {} and {} must both be set (got only {})", v.launcher, v.rank, v.size,
                              rank != nullptr ? v.rank : v.size));
    }
    LaunchInfo info;
    info.launcher = v.launcher;
    info.rank = ParseVar(v.rank, rank);
    info.world_size = ParseVar(v.size, size);
    if (info.world_size < 1) throw Error(fmt::format("environment variable {}=0: must be >= 1", v.size));
    if (info.rank >= info.world_size) {
      throw Error(fmt::format("environment variable {}={}: must be < {} ({})", v.rank, info.rank, v.size, info.world_size));
    }
    const char* local_rank = getenv(v.local_rank);
    if (local_rank == nullptr) {
      throw Error(fmt::format("{} launch: {} is not set (it picks this process's GPU)", v.launcher, v.local_rank));
    }
    info.local_rank = ParseVar(v.local_rank, local_rank);
    info.local_world_size = 0;
    if (const char* ls = getenv(v.local_size)) {
      // Slurm writes SLURM_NTASKS_PER_NODE as "4" or "4(x2)": the leading count is the local size.
      std::string s = ls;
      if (std::string(v.launcher) == "slurm") s = s.substr(0, s.find('('));
      info.local_world_size = ParseVar(v.local_size, s.c_str());
      if (info.local_rank >= info.local_world_size) {
        throw Error(fmt::format("environment variable {}={}: must be < {} ({})", v.local_rank, info.local_rank, v.local_size,
                                info.local_world_size));
      }
    }
    const auto var = [&](const char* name) -> std::string {
      const char* value = getenv(name);
      return value != nullptr ? value : "";
    };
    std::string job;
    if (info.launcher == "torchrun" && var("TORCHELASTIC_RUN_ID") != "none") job = var("TORCHELASTIC_RUN_ID");
    if (info.launcher == "slurm" && !var("SLURM_JOB_ID").empty()) {
      job = var("SLURM_JOB_ID") + "." + (var("SLURM_STEP_ID").empty() ? "0" : var("SLURM_STEP_ID"));
    }
    if (info.launcher == "openmpi") job = !var("PMIX_NAMESPACE").empty() ? var("PMIX_NAMESPACE") : var("OMPI_MCA_orte_ess_jobid");
    if (!job.empty()) info.job_id = job;
    return info;
  }
  return LaunchInfo{};
}

void ValidateLaunch(const LaunchInfo& launch, const std::string& dir) {
  if (!launch.multi_process()) {
    if (!dir.empty()) {
      throw Error(
          fmt::format("--nccl-id-dir '{}': this process was not started as one of several by torchrun, srun or "
                      "mpirun (no RANK/WORLD_SIZE > 1 ...): one process drives every GPU and needs no id "
                      "directory",
                      dir));
    }
    return;
  }
  if (dir.empty()) {
    throw Error(
        fmt::format("--backend cuda under {} ({} processes, one per GPU) needs --nccl-id-dir, a directory every "
                    "process sees, to exchange the NCCL ids",
                    launch.launcher, launch.world_size));
  }
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    throw Error(fmt::format("--nccl-id-dir '{}': not a directory", dir));
  }
  if (::access(dir.c_str(), W_OK | X_OK) != 0) throw Error(fmt::format("--nccl-id-dir '{}': not writable", dir));
  if (launch.job_id.empty()) {
    throw Error(
        fmt::format("{} gives no job id (torchrun: pass --rdzv-id; it sets TORCHELASTIC_RUN_ID): pass "
                    "--nccl-job-id ID, unique per run, so that a rerun never reads a previous run's NCCL ids "
                    "from '{}'",
                    launch.launcher, dir));
  }
}

void RemoveId(const std::string& dir, const std::string& name) {
  std::remove((dir + "/" + name).c_str());
}

std::string IdFileName(const std::string& job_id, const std::string& label, int64_t first_rank) {
  std::string job = job_id;
  for (char& ch : job) {
    const bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '.' || ch == '_' || ch == '-';
    if (!ok) ch = '_';
  }
  return fmt::format("{}-{}-{}.ncclid", job, label, first_rank);
}

void PublishId(const std::string& dir, const std::string& name, const std::vector<char>& bytes) {
  const std::string path = dir + "/" + name;
  const std::string tmp = fmt::format("{}.tmp.{}", path, static_cast<long>(::getpid()));
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out.flush();
    if (!out) {
      std::remove(tmp.c_str());
      throw Error(fmt::format("--nccl-id-dir: cannot write '{}' (is '{}' a writable directory shared by every process?)", tmp, dir));
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    throw Error(fmt::format("--nccl-id-dir: cannot rename '{}' to '{}'", tmp, path));
  }
}

std::vector<char> WaitForId(const std::string& dir, const std::string& name, int64_t size, double timeout_seconds) {
  const std::string path = dir + "/" + name;
  const auto start = std::chrono::steady_clock::now();
  while (true) {
    std::ifstream in(path, std::ios::binary);
    if (in) {
      std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      if (static_cast<int64_t>(bytes.size()) != size) {
        throw Error(fmt::format("--nccl-id-dir: '{}' holds {} bytes, an NCCL id has {} (a stale file from another job?)", path,
                                bytes.size(), size));
      }
      return bytes;
    }
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > timeout_seconds) {
      throw Error(
          fmt::format("--nccl-id-dir: '{}' did not appear within {:g} s (did the group's first rank start, and "
                      "do all processes see the same directory?)",
                      path, timeout_seconds));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

}  // namespace dockyard::runtime
