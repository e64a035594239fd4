// The CUDA + NCCL backend (cuda_backend.h). Built only where CUDA was found (tools/cuda.bzl).
#include "runtime/cuda/cuda_backend.h"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <exception>
#include <map>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "kernels/grouped_gemm.h"
#include "kernels/moe_kernels.h"
#include "planner/base/error.h"

namespace dockyard::runtime::cuda {
namespace {

using kernels::CheckCuda;

void CheckNccl(ncclResult_t r, const char* what) {
  if (r != ncclSuccess) throw Error(fmt::format("nccl: {}: {}", what, ncclGetErrorString(r)));
}

// Thrown in ranks released from a collective because another rank failed.
struct Aborted : std::exception {
  const char* what() const noexcept override { return "aborted: another rank failed"; }
};

// The communicators of one rank. AbortAll (ncclCommAbort, once) runs before any buffer a
// pending NCCL kernel may touch is freed: a failing collective calls it before it throws, and
// RunOne's error path calls it again (a no-op then).
struct RankComms {
  std::vector<ncclComm_t> comms;
  bool aborted = false;
  void AbortAll() {
    if (aborted) return;
    aborted = true;
    for (ncclComm_t c : comms) ncclCommAbort(c);
  }
};

// Waits for `stream` while watching the run's abort flag and the communicator's async error,
// so a rank of this process never waits forever on a peer of this process that already
// failed. Across processes a failed peer is not seen here: the failing process exits non-zero
// and the launcher (torchrun, srun --kill-on-bad-exit, mpirun) ends the others.
void WaitCollective(cudaStream_t stream, ncclComm_t comm, const std::atomic<bool>& aborted, RankComms& mine, const char* what) {
  while (true) {
    const cudaError_t e = cudaStreamQuery(stream);
    if (e == cudaSuccess) return;
    std::string failure;
    if (e != cudaErrorNotReady) {
      failure = fmt::format("cuda: {}: {} ({})", what, cudaGetErrorName(e), cudaGetErrorString(e));
    } else {
      ncclResult_t async = ncclSuccess;
      const ncclResult_t q = ncclCommGetAsyncError(comm, &async);
      if (q != ncclSuccess) {
        failure = fmt::format("nccl: ncclCommGetAsyncError: {}", ncclGetErrorString(q));
      } else if (async != ncclSuccess && async != ncclInProgress) {
        failure = fmt::format("nccl: {}: {}", what, ncclGetErrorString(async));
      }
    }
    if (!failure.empty()) {
      mine.AbortAll();
      throw Error(failure);
    }
    if (aborted.load()) {
      mine.AbortAll();
      throw Aborted();
    }
    std::this_thread::yield();
  }
}

class CudaDevice : public Device {
 public:
  CudaDevice(int ordinal, cudaStream_t stream) : ordinal_(ordinal), stream_(stream) {
    cudaDeviceProp prop{};
    CheckCuda(cudaGetDeviceProperties(&prop, ordinal), "cudaGetDeviceProperties");
    name_ = fmt::format("cuda:{} ({})", ordinal, prop.name);
  }
  std::string name() const override { return name_; }
  void* Allocate(int64_t bytes) override {
    if (bytes < 0) throw Error(fmt::format("cuda device: cannot allocate {} bytes", bytes));
    void* p = nullptr;
    // At least 256 bytes so the pointer is never null and distinct allocations never alias.
    const cudaError_t e = cudaMalloc(&p, static_cast<size_t>(std::max<int64_t>(bytes, 256)));
    if (e != cudaSuccess) {
      throw Error(fmt::format("{}: cannot allocate {} bytes: {}", name_, bytes, cudaGetErrorString(e)));
    }
    return p;
  }
  void Free(void* ptr) noexcept override { cudaFree(ptr); }
  void CopyToHost(void* host, const void* device, int64_t bytes) override {
    if (bytes <= 0) return;
    CheckCuda(cudaMemcpyAsync(host, device, static_cast<size_t>(bytes), cudaMemcpyDeviceToHost, stream_), "cudaMemcpyAsync (to host)");
    Synchronize();
  }
  void CopyToDevice(void* device, const void* host, int64_t bytes) override {
    if (bytes <= 0) return;
    CheckCuda(cudaMemcpyAsync(device, host, static_cast<size_t>(bytes), cudaMemcpyHostToDevice, stream_), "cudaMemcpyAsync (to device)");
    Synchronize();  // the host buffer may be freed once we return
  }
  void Synchronize() override { CheckCuda(cudaStreamSynchronize(stream_), "cudaStreamSynchronize"); }

 private:
  int ordinal_;
  cudaStream_t stream_;
  std::string name_;
};

class CudaOps : public ComputeOps {
 public:
  CudaOps(cudaStream_t stream, kernels::GemmPrecision precision, kernels::GroupedGemmPath path, std::atomic<bool>* fell_back)
      : stream_(stream), gemm_(stream), precision_(precision), path_(path), fell_back_(fell_back) {}

  // The router GEMM (and any plain Gemm): bit-exact with the CPU backend.
  void Gemm(const GemmArgs& g) override {
    kernels::GemmExact(g.m, g.n, g.k, g.a, g.lda, g.b, g.ldb, g.trans_b, g.c, g.ldc, g.accumulate, stream_);
  }
  void GroupedGemm(const GroupedGemmArgs& g) override {
    const kernels::GroupedGemmPath ran =
        gemm_.RunFloat(g.num_groups, g.offsets, g.n, g.k, g.a, g.lda, g.b, g.ldb, g.trans_b, g.c, g.ldc, g.accumulate, precision_, path_);
    if (ran != path_) *fell_back_ = true;
  }
  void GatherRows(const float* src, const int64_t* indices, int64_t num_rows, int64_t row_elems, float* dst) override {
    kernels::GatherRows(src, indices, num_rows, row_elems, dst, stream_);
  }
  void ScatterRows(const float* src, const int64_t* indices, int64_t num_rows, int64_t row_elems, float* dst) override {
    kernels::ScatterRows(src, indices, num_rows, row_elems, dst, stream_);
  }
  void CopyRowBlocks(const float* src, float* dst, const std::vector<RowBlock>& blocks, int64_t row_elems) override {
    for (const RowBlock& b : blocks) {
      if (b.rows <= 0) continue;
      CheckCuda(cudaMemcpyAsync(dst + b.dst_row * row_elems, src + b.src_row * row_elems,
                                static_cast<size_t>(b.rows * row_elems) * sizeof(float), cudaMemcpyDeviceToDevice, stream_),
                "cudaMemcpyAsync (row blocks)");
    }
  }
  void SwiGlu(const float* gate, const float* up, float* out, int64_t count) override { kernels::SwiGlu(gate, up, out, count, stream_); }
  void Softmax(float* x, int64_t rows, int64_t cols) override { kernels::Softmax(x, rows, cols, stream_); }
  void Sigmoid(float* x, int64_t count) override { kernels::Sigmoid(x, count, stream_); }
  void AddRowBias(const float* x, const float* bias, int64_t rows, int64_t cols, float* out) override {
    kernels::AddRowBias(x, bias, rows, cols, out, stream_);
  }
  void GroupSelect(float* x, int64_t rows, int64_t cols, int64_t n_group, int64_t topk_group, bool top2_sum) override {
    kernels::GroupSelect(x, rows, cols, n_group, topk_group, top2_sum, stream_);
  }
  void TopK(const float* x, int64_t rows, int64_t cols, int64_t k, int64_t* indices) override {
    kernels::TopK(x, rows, cols, k, indices, stream_);
  }
  void RouterWeights(const float* scores, const int64_t* indices, int64_t rows, int64_t cols, int64_t k, bool normalize, float scale,
                     float* weights) override {
    kernels::RouterWeights(scores, indices, rows, cols, k, normalize, scale, weights, stream_);
  }
  void WeightedCombine(const float* rows, const int64_t* row_of_slot, const float* weights, int64_t tokens, int64_t top_k,
                       int64_t row_elems, float* out) override {
    kernels::WeightedCombine(rows, row_of_slot, weights, tokens, top_k, row_elems, out, stream_);
  }
  void Add(const float* x, float* y, int64_t count) override { kernels::Add(x, y, count, stream_); }
  void ScaleRows(float* x, const float* s, int64_t rows, int64_t row_elems) override { kernels::ScaleRows(x, s, rows, row_elems, stream_); }
  void Fill(float* x, float value, int64_t count) override { kernels::Fill(x, value, count, stream_); }
  void FillTokens(uint64_t seed, int64_t source, int64_t first_token, int64_t num_tokens, int64_t hidden, float* out) override {
    kernels::FillTokens(seed, source, first_token, num_tokens, hidden, out, stream_);
  }
  void FillWeightRows(const WeightRowsArgs& a) override {
    kernels::FillWeightRows(a.seed, a.layer, a.matrix, a.expert, a.row_begin, a.row_end, a.col_begin, a.col_end, a.scale, a.out, stream_);
  }

 private:
  cudaStream_t stream_;
  kernels::CublasGemm gemm_;
  kernels::GemmPrecision precision_;
  kernels::GroupedGemmPath path_;
  std::atomic<bool>* fell_back_;
};

class NcclCommunicator : public Communicator {
 public:
  NcclCommunicator(std::string label, std::vector<int64_t> ranks, int64_t index, ncclComm_t comm, cudaStream_t stream,
                   const std::atomic<bool>* aborted, RankComms* mine)
      : Communicator(std::move(label), std::move(ranks), index), comm_(comm), stream_(stream), aborted_(aborted), mine_(mine) {
    CheckCuda(cudaMalloc(&scratch_, sizeof(float)), "cudaMalloc (barrier)");
  }
  ~NcclCommunicator() override {
    if (scratch_ != nullptr) cudaFree(scratch_);
    if (ready_ != nullptr) cudaEventDestroy(ready_);
    if (comm_stream_ != nullptr) cudaStreamDestroy(comm_stream_);
  }

 protected:
  void DoAllToAll(const void* send, const std::vector<int64_t>& send_splits, void* recv, const std::vector<int64_t>& recv_splits,
                  int64_t row_bytes) override {
    IssueAllToAll(send, send_splits, recv, recv_splits, row_bytes, stream_);
    WaitCollective(stream_, comm_, *aborted_, *mine_, "all_to_all_single");
  }
  // combine_start: the exchange runs on the communicator's own stream, after everything the
  // compute stream has queued so far (an event orders it), so compute issued meanwhile overlaps.
  void DoStartAllToAll(const void* send, const std::vector<int64_t>& send_splits, void* recv, const std::vector<int64_t>& recv_splits,
                       int64_t row_bytes) override {
    if (comm_stream_ == nullptr) {
      CheckCuda(cudaStreamCreateWithFlags(&comm_stream_, cudaStreamNonBlocking), "cudaStreamCreate (comm)");
      CheckCuda(cudaEventCreateWithFlags(&ready_, cudaEventDisableTiming), "cudaEventCreate");
    }
    CheckCuda(cudaEventRecord(ready_, stream_), "cudaEventRecord");
    CheckCuda(cudaStreamWaitEvent(comm_stream_, ready_, 0), "cudaStreamWaitEvent");
    IssueAllToAll(send, send_splits, recv, recv_splits, row_bytes, comm_stream_);
  }
  // combine_wait.
  void DoWaitPending() override { WaitCollective(comm_stream_, comm_, *aborted_, *mine_, "all_to_all_single (async)"); }

  void IssueAllToAll(const void* send, const std::vector<int64_t>& send_splits, void* recv, const std::vector<int64_t>& recv_splits,
                     int64_t row_bytes, cudaStream_t stream) {
    const char* s = static_cast<const char*>(send);
    char* r = static_cast<char*>(recv);
    int64_t send_off = 0, recv_off = 0;
    CheckNccl(ncclGroupStart(), "ncclGroupStart");
    for (int64_t p = 0; p < size(); ++p) {
      const int64_t sb = send_splits[static_cast<size_t>(p)] * row_bytes;
      const int64_t rb = recv_splits[static_cast<size_t>(p)] * row_bytes;
      if (sb > 0) CheckNccl(ncclSend(s + send_off, static_cast<size_t>(sb), ncclChar, static_cast<int>(p), comm_, stream), "ncclSend");
      if (rb > 0) CheckNccl(ncclRecv(r + recv_off, static_cast<size_t>(rb), ncclChar, static_cast<int>(p), comm_, stream), "ncclRecv");
      send_off += sb;
      recv_off += rb;
    }
    CheckNccl(ncclGroupEnd(), "ncclGroupEnd (all_to_all_single)");
  }
  void DoAllGather(const void* send, int64_t bytes, void* recv) override {
    CheckNccl(ncclAllGather(send, recv, static_cast<size_t>(bytes), ncclChar, comm_, stream_), "ncclAllGather");
    WaitCollective(stream_, comm_, *aborted_, *mine_, "all_gather");
  }
  void DoReduceScatter(const float* send, float* recv, int64_t count) override {
    CheckNccl(ncclReduceScatter(send, recv, static_cast<size_t>(count), ncclFloat, ncclSum, comm_, stream_), "ncclReduceScatter");
    WaitCollective(stream_, comm_, *aborted_, *mine_, "reduce_scatter");
  }
  void DoAllReduce(float* buf, int64_t count) override {
    CheckNccl(ncclAllReduce(buf, buf, static_cast<size_t>(count), ncclFloat, ncclSum, comm_, stream_), "ncclAllReduce");
    WaitCollective(stream_, comm_, *aborted_, *mine_, "all_reduce");
  }
  void DoBarrier() override {
    CheckNccl(ncclAllReduce(scratch_, scratch_, 1, ncclFloat, ncclSum, comm_, stream_), "ncclAllReduce (barrier)");
    WaitCollective(stream_, comm_, *aborted_, *mine_, "barrier");
  }

 private:
  ncclComm_t comm_;
  cudaStream_t stream_;
  const std::atomic<bool>* aborted_;
  RankComms* mine_;
  float* scratch_ = nullptr;
  cudaStream_t comm_stream_ = nullptr;  // created on the first StartAllToAllSingle
  cudaEvent_t ready_ = nullptr;
};

class CudaRankContext : public RankContext {
 public:
  CudaRankContext(int64_t rank, CudaDevice* device, CudaOps* ops) : rank_(rank), device_(device), ops_(ops) {}
  int64_t rank() const override { return rank_; }
  Device& device() override { return *device_; }
  ComputeOps& ops() override { return *ops_; }
  Communicator& group(const std::string& label) override {
    for (auto& c : comms_) {
      if (c->label() == label) return *c;
    }
    throw Error(fmt::format("rank {} has no group '{}'", rank_, label));
  }
  std::vector<std::unique_ptr<NcclCommunicator>> comms_;

 private:
  int64_t rank_;
  CudaDevice* device_;
  CudaOps* ops_;
};

using GroupKey = std::pair<std::string, int64_t>;  // label, first global rank

class CudaBackend : public Backend {
 public:
  explicit CudaBackend(const CudaBackendOptions& o)
      : options_(o),
        precision_(kernels::ParsePrecision(o.precision, "--gemm-precision")),
        path_(o.gemm_path == "loop"      ? kernels::GroupedGemmPath::kLoop
              : o.gemm_path == "grouped" ? kernels::GroupedGemmPath::kGrouped
                                         : kernels::GroupedGemmPath::kAuto) {
    if (o.gemm_path != "grouped" && o.gemm_path != "loop" && o.gemm_path != "auto") {
      throw Error(fmt::format("--grouped-gemm: must be auto, grouped or loop, got '{}'", o.gemm_path));
    }
    ValidateLaunch(o.launch, o.nccl_id_dir);  // before the GPU probe: these errors need no GPU
    std::string why;
    devices_ = CudaDeviceCount(&why);
    if (devices_ == 0) throw Error(fmt::format("--backend cuda: no GPU visible: {}", why));
  }

  // The path that ran: after a refused grouped call, "cublas_loop (grouped call refused)".
  std::string name() const override {
    return fmt::format("cuda ({} gemm, {})", kernels::PrecisionName(precision_),
                       fell_back_                               ? std::string("cublas_loop (grouped call refused by cuBLAS)")
                       : path_ == kernels::GroupedGemmPath::kAuto ? fmt::format("auto: cublas_loop from {} rows per expert, else cublas_grouped",
                                                                                 kernels::kLoopMinMeanRows)
                                                                  : std::string(kernels::PathName(path_)));
  }

  bool RunsRankIndex(size_t index, size_t total) const override {
    (void)total;
    return !options_.launch.multi_process() || static_cast<int64_t>(index) == options_.launch.rank;
  }

  void RunRanks(const std::vector<RankSpec>& ranks, const RankBody& body) override {
    const int64_t n = static_cast<int64_t>(ranks.size());
    std::vector<size_t> local;  // indices into `ranks` this process runs
    if (options_.launch.multi_process()) {
      if (options_.launch.world_size != n) {
        throw Error(fmt::format("{} launched {} processes but the run has {} ranks (one process per rank)", options_.launch.launcher,
                                options_.launch.world_size, n));
      }
      if (options_.launch.local_rank >= devices_) {
        throw Error(fmt::format("local rank {} has no GPU: {} visible", options_.launch.local_rank, devices_));
      }
      local.push_back(static_cast<size_t>(options_.launch.rank));
    } else {
      if (n > devices_) {
        throw Error(
            fmt::format("--backend cuda in one process runs one rank per GPU: the run has {} ranks, {} GPU(s) are "
                        "visible; launch one process per GPU (torchrun, srun or mpirun) with --nccl-id-dir",
                        n, devices_));
      }
      for (size_t i = 0; i < ranks.size(); ++i) local.push_back(i);
    }
    // Single process: every group's id made here, once.
    std::map<GroupKey, ncclUniqueId> ids;
    if (!options_.launch.multi_process()) {
      for (const RankSpec& r : ranks) {
        for (const GroupSpec& g : r.groups) {
          const GroupKey key{g.label, g.ranks.empty() ? -1 : g.ranks.front()};
          if (ids.count(key)) continue;
          ncclUniqueId id;
          CheckNccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
          ids.emplace(key, id);
        }
      }
    }
    std::atomic<bool> aborted{false};
    std::mutex mu;
    std::exception_ptr first_error;
    std::vector<std::thread> threads;
    for (size_t i : local) {
      threads.emplace_back([&, i] {
        try {
          const int ordinal = options_.launch.multi_process() ? static_cast<int>(options_.launch.local_rank) : static_cast<int>(i);
          RunOne(ranks[i], ordinal, ids, aborted, body);
        } catch (...) {
          std::lock_guard<std::mutex> lock(mu);
          const bool is_abort = [] {
            try {
              throw;
            } catch (const Aborted&) {
              return true;
            } catch (...) {
              return false;
            }
          }();
          if (!first_error && !is_abort) first_error = std::current_exception();
          aborted = true;
        }
      });
    }
    for (auto& t : threads) t.join();
    if (first_error) std::rethrow_exception(first_error);
    if (aborted) throw Error("cuda backend: a rank was aborted without an error");
  }

 private:
  void RunOne(const RankSpec& spec, int ordinal, const std::map<GroupKey, ncclUniqueId>& ids, const std::atomic<bool>& aborted,
              const RankBody& body) {
    CheckCuda(cudaSetDevice(ordinal), "cudaSetDevice");
    cudaStream_t stream = nullptr;
    CheckCuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
    RankComms mine;
    try {
      CudaDevice device(ordinal, stream);
      CudaOps ops(stream, precision_, path_, &fell_back_);
      CudaRankContext ctx(spec.rank, &device, &ops);
      std::vector<GroupSpec> groups = spec.groups;
      std::sort(groups.begin(), groups.end(), [](const GroupSpec& a, const GroupSpec& b) { return a.label < b.label; });
      for (const GroupSpec& g : groups) {
        const auto it = std::find(g.ranks.begin(), g.ranks.end(), spec.rank);
        if (it == g.ranks.end()) throw Error(fmt::format("rank {} is not in its own group '{}'", spec.rank, g.label));
        const int64_t index = it - g.ranks.begin();
        ncclUniqueId id;
        std::string id_file;
        if (options_.launch.multi_process()) {
          id_file = IdFileName(options_.launch.job_id, g.label, g.ranks.front());
          if (index == 0) {
            CheckNccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
            PublishId(options_.nccl_id_dir, id_file, std::vector<char>(id.internal, id.internal + sizeof(id.internal)));
          } else {
            const std::vector<char> bytes = WaitForId(options_.nccl_id_dir, id_file, sizeof(id.internal), options_.id_timeout_seconds);
            std::memcpy(id.internal, bytes.data(), sizeof(id.internal));
          }
        } else {
          id = ids.at({g.label, g.ranks.front()});
        }
        ncclComm_t comm = nullptr;
        CheckNccl(ncclCommInitRank(&comm, static_cast<int>(g.ranks.size()), id, static_cast<int>(index)), "ncclCommInitRank");
        mine.comms.push_back(comm);
        // Every member has joined once the (collective) init returns: the id file has been read.
        if (!id_file.empty() && index == 0) RemoveId(options_.nccl_id_dir, id_file);
        ctx.comms_.push_back(std::make_unique<NcclCommunicator>(g.label, g.ranks, index, comm, stream, &aborted, &mine));
      }
      body(ctx);
      device.Synchronize();
      ctx.comms_.clear();
    } catch (...) {
      // Buffers of the body are freed by now only if no NCCL work was pending (a failing
      // collective aborts before it throws); abort the rest before the stream goes.
      mine.AbortAll();
      cudaStreamDestroy(stream);
      throw;
    }
    for (ncclComm_t c : mine.comms) ncclCommDestroy(c);
    cudaStreamDestroy(stream);
  }

  CudaBackendOptions options_;
  std::atomic<bool> fell_back_{false};
  kernels::GemmPrecision precision_;
  kernels::GroupedGemmPath path_;
  int devices_ = 0;
};

}  // namespace

bool CudaBackendCompiled() {
  return true;
}

int CudaDeviceCount(std::string* why) {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    if (why != nullptr) {
      int runtime = 0, driver = 0;
      cudaRuntimeGetVersion(&runtime);
      cudaDriverGetVersion(&driver);  // 0 when no driver is installed
      std::string hint;
      if (e == cudaErrorInsufficientDriver) {
        hint = driver == 0 ? "; no NVIDIA driver is installed on this machine"
                           : fmt::format(
                                 "; the NVIDIA driver supports CUDA {}.{}, this dockyard-run was built with CUDA "
                                 "{}.{}: update the driver",
                                 driver / 1000, driver % 1000 / 10, runtime / 1000, runtime % 1000 / 10);
      } else if (e == cudaErrorNoDevice) {
        hint = "; the driver sees no GPU (check CUDA_VISIBLE_DEVICES)";
      }
      *why = fmt::format("cudaGetDeviceCount: {} ({}){}", cudaGetErrorName(e), cudaGetErrorString(e), hint);
    }
    return 0;
  }
  if (count == 0 && why != nullptr) *why = "cudaGetDeviceCount reports 0 devices";
  return count;
}

std::unique_ptr<Backend> MakeCudaBackend(const CudaBackendOptions& options) {
  return std::make_unique<CudaBackend>(options);
}

}  // namespace dockyard::runtime::cuda
