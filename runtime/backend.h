// The backend interface of dockyard-run: device memory, communicators (one per mesh-axis group)
// and the compute ops of one MoE layer. Plain C++17, no CUDA: the CPU backend (runtime/cpu/)
// implements it with one thread per rank, and a CUDA/NCCL backend implements the same classes
// later (device pointers instead of host pointers, NCCL instead of shared memory).
//
// Conventions. Every float buffer is row-major fp32; every size, offset, split and index is
// int64 (token counts times hidden sizes cross 2^31 at real model shapes). Pointers passed to
// ops and communicators are device pointers (Device::Allocate); arrays documented as "host" are
// read on the host (split sizes, row blocks). Shapes are written as comments: `// [rows, hidden]`.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace dockyard::runtime {

// ---------------------------------------------------------------------------------------------
// Device memory.

class Device {
 public:
  virtual ~Device() = default;
  virtual std::string name() const = 0;
  // Allocates `bytes` (>= 0) of device memory; throws dockyard::Error when it cannot.
  virtual void* Allocate(int64_t bytes) = 0;
  virtual void Free(void* ptr) noexcept = 0;
  virtual void CopyToHost(void* host, const void* device, int64_t bytes) = 0;
  virtual void CopyToDevice(void* device, const void* host, int64_t bytes) = 0;
  // Waits until every op issued so far has finished (timing boundaries).
  virtual void Synchronize() = 0;
};

// An owning array of device memory (RAII). Resize keeps no contents; it reallocates only when
// the capacity is too small, so buffers reused across iterations are allocated once.
template <typename T>
class DeviceArray {
 public:
  DeviceArray() = default;
  explicit DeviceArray(Device* device, int64_t size = 0) : device_(device) { Resize(size); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  DeviceArray(DeviceArray&& o) noexcept { *this = std::move(o); }
  DeviceArray& operator=(DeviceArray&& o) noexcept {
    if (this != &o) {
      Release();
      device_ = o.device_;
      data_ = o.data_;
      size_ = o.size_;
      capacity_ = o.capacity_;
      o.data_ = nullptr;
      o.size_ = o.capacity_ = 0;
    }
    return *this;
  }
  ~DeviceArray() { Release(); }

  void Resize(int64_t size) {
    if (size > capacity_) {
      Release();
      data_ = static_cast<T*>(device_->Allocate(size * static_cast<int64_t>(sizeof(T))));
      capacity_ = size;
    }
    size_ = size;
  }
  T* data() { return data_; }
  const T* data() const { return data_; }
  int64_t size() const { return size_; }
  int64_t bytes() const { return size_ * static_cast<int64_t>(sizeof(T)); }

  void CopyFromHost(const std::vector<T>& host) {
    Resize(static_cast<int64_t>(host.size()));
    if (!host.empty()) device_->CopyToDevice(data_, host.data(), bytes());
  }
  std::vector<T> ToHost() const {
    std::vector<T> host(static_cast<size_t>(size_));
    if (size_ > 0) device_->CopyToHost(host.data(), data_, bytes());
    return host;
  }

 private:
  void Release() {
    if (data_ != nullptr) device_->Free(data_);
    data_ = nullptr;
    capacity_ = size_ = 0;
  }
  Device* device_ = nullptr;
  T* data_ = nullptr;
  int64_t size_ = 0;
  int64_t capacity_ = 0;
};

// ---------------------------------------------------------------------------------------------
// Communicators.

// One collective as a rank issued it (for the "same collectives in the same order" check).
struct CollectiveRecord {
  std::string op;     // "all_to_all_single", "all_gather", "reduce_scatter", "all_reduce", "barrier"
  std::string group;  // the group's label: "ep", "oep", "iep", "expert_tp", "shared_tp"
  std::string dtype;  // "float32" or "int64"
  int64_t group_size = 0;
  int64_t send_elems = 0;  // elements this rank contributed
  int64_t recv_elems = 0;  // elements this rank received
};

// The communicator of one group of ranks (the ranks of one mesh-axis group), as one member
// sees it. Collectives are blocking and every member must issue the same collectives in the
// same order (as with NCCL). Reductions are sums in group-rank order, so every member gets
// bit-identical results and runs are reproducible.
//
// Public methods are non-virtual: they check arguments, append to the collective log (when one
// is attached) and call the backend's Do* implementation.
class Communicator {
 public:
  Communicator(std::string label, std::vector<int64_t> ranks, int64_t index)
      : label_(std::move(label)), ranks_(std::move(ranks)), index_(index) {}
  virtual ~Communicator() = default;

  const std::string& label() const { return label_; }
  const std::vector<int64_t>& ranks() const { return ranks_; }  // global ranks, group order
  int64_t rank() const { return index_; }                       // this member's index
  int64_t size() const { return static_cast<int64_t>(ranks_.size()); }

  // torch.distributed.all_to_all_single with split sizes, in rows of `row_elems` elements:
  // send_splits[p] rows go to member p (consecutive blocks of `send`), recv_splits[p] rows come
  // from member p (consecutive blocks of `recv`). Host arrays of size(); every member's
  // send_splits[q] must equal member q's recv_splits[p] (checked where the backend can).
  void AllToAllSingle(const float* send, const std::vector<int64_t>& send_splits, float* recv, const std::vector<int64_t>& recv_splits,
                      int64_t row_elems);
  void AllToAllSingle(const int64_t* send, const std::vector<int64_t>& send_splits, int64_t* recv, const std::vector<int64_t>& recv_splits,
                      int64_t row_elems);
  // The same exchange, started without waiting (the seed dispatcher's combine_start): `recv`
  // is ready, and `send` may be reused, after WaitPending() (combine_wait). At most one
  // exchange is pending per communicator; no other collective of this communicator may be
  // issued before WaitPending(). Backends without asynchronous communication (CPU) complete it
  // inside the call, which is correct but overlaps nothing.
  void StartAllToAllSingle(const float* send, const std::vector<int64_t>& send_splits, float* recv, const std::vector<int64_t>& recv_splits,
                           int64_t row_elems);
  void WaitPending();
  // recv [size * count] = concatenation of every member's send [count], in group order.
  void AllGather(const float* send, int64_t count, float* recv);
  void AllGather(const int64_t* send, int64_t count, int64_t* recv);
  // send [size * count]; recv [count] = sum over members m of m's send[rank * count ...].
  void ReduceScatter(const float* send, float* recv, int64_t count);
  // buf [count] = sum over members of their buf (in place).
  void AllReduce(float* buf, int64_t count);
  void Barrier();

  // Attaches a log that every later collective of this communicator appends to (nullptr: off).
  void set_log(std::vector<CollectiveRecord>* log) { log_ = log; }

 protected:
  enum class Op { kAllToAll, kAllGather, kReduceScatter, kAllReduce, kBarrier };
  virtual void DoAllToAll(const void* send, const std::vector<int64_t>& send_splits, void* recv, const std::vector<int64_t>& recv_splits,
                          int64_t row_bytes) = 0;
  virtual void DoAllGather(const void* send, int64_t bytes, void* recv) = 0;
  virtual void DoReduceScatter(const float* send, float* recv, int64_t count) = 0;
  virtual void DoAllReduce(float* buf, int64_t count) = 0;
  virtual void DoBarrier() = 0;
  virtual void DoStartAllToAll(const void* send, const std::vector<int64_t>& send_splits, void* recv,
                               const std::vector<int64_t>& recv_splits, int64_t row_bytes) {
    DoAllToAll(send, send_splits, recv, recv_splits, row_bytes);
  }
  virtual void DoWaitPending() {}

 private:
  void Record(const char* op, const char* dtype, int64_t send_elems, int64_t recv_elems);
  void CheckSplits(const std::vector<int64_t>& send_splits, const std::vector<int64_t>& recv_splits, int64_t row_elems) const;

  std::string label_;
  std::vector<int64_t> ranks_;
  int64_t index_ = 0;
  std::vector<CollectiveRecord>* log_ = nullptr;
  bool pending_ = false;
};

// ---------------------------------------------------------------------------------------------
// Compute ops.

// C = A · op(B) (+ C when accumulate). A [m, k] (row stride lda); B [n, k] with trans_b (the
// weight layout of nn.Linear: out x in), else [k, n] (stride ldb); C [m, n] (stride ldc).
// Every element of C is computed by the same sequence of fp32 operations whatever m, n and its
// position are, so the same row gives the same result in any batch (the router relies on it).
struct GemmArgs {
  int64_t m = 0, n = 0, k = 0;
  const float* a = nullptr;
  int64_t lda = 0;
  const float* b = nullptr;
  int64_t ldb = 0;
  bool trans_b = true;
  float* c = nullptr;
  int64_t ldc = 0;
  bool accumulate = false;
};

// One GEMM per group g over rows [offsets[g], offsets[g+1]) of A and C with the group's own
// weight b[g] (layout as GemmArgs). `offsets` is a host array of num_groups + 1 non-decreasing
// entries starting at 0; a group with no rows may have a null weight.
struct GroupedGemmArgs {
  int64_t num_groups = 0;
  const int64_t* offsets = nullptr;  // host [num_groups + 1]
  int64_t n = 0, k = 0;
  const float* a = nullptr;  // [offsets[num_groups], k]
  int64_t lda = 0;
  const float* const* b = nullptr;  // host [num_groups] device pointers
  int64_t ldb = 0;
  bool trans_b = true;
  float* c = nullptr;  // [offsets[num_groups], n]
  int64_t ldc = 0;
  bool accumulate = false;
};

// A run of consecutive rows copied from src rows [src_row, src_row + rows) to dst rows
// [dst_row, dst_row + rows). Block lists describe permutations compactly (O(ranks x experts)
// entries instead of one index per token), which is also how 2^31+ element offsets are tested
// without allocating them.
struct RowBlock {
  int64_t src_row = 0;
  int64_t dst_row = 0;
  int64_t rows = 0;
};

// What FillWeightRows generates: rows [row_begin, row_end) and columns [col_begin, col_end) of
// matrix `matrix` of expert `expert` in layer `layer` (runtime/data.h defines the values).
struct WeightRowsArgs {
  uint64_t seed = 0;
  int64_t layer = 0;
  int64_t matrix = 0;  // data.h kMatrix*
  int64_t expert = 0;
  int64_t row_begin = 0, row_end = 0;
  int64_t col_begin = 0, col_end = 0;
  float scale = 1.0f;
  float* out = nullptr;  // [row_end - row_begin, col_end - col_begin]
};

class ComputeOps {
 public:
  virtual ~ComputeOps() = default;

  virtual void Gemm(const GemmArgs& args) = 0;
  virtual void GroupedGemm(const GroupedGemmArgs& args) = 0;

  // Permute: dst[i, :] = src[indices[i], :] for i < num_rows. src [*, row_elems], indices
  // (device) [num_rows], dst [num_rows, row_elems].
  virtual void GatherRows(const float* src, const int64_t* indices, int64_t num_rows, int64_t row_elems, float* dst) = 0;
  // Unpermute: dst[indices[i], :] = src[i, :].
  virtual void ScatterRows(const float* src, const int64_t* indices, int64_t num_rows, int64_t row_elems, float* dst) = 0;
  // dst rows of every block = src rows of the block (blocks: host array).
  virtual void CopyRowBlocks(const float* src, float* dst, const std::vector<RowBlock>& blocks, int64_t row_elems) = 0;

  // out[i] = silu(gate[i]) * up[i], silu(x) = x / (1 + exp(-x)).
  virtual void SwiGlu(const float* gate, const float* up, float* out, int64_t count) = 0;
  // Row-wise softmax of x [rows, cols], in place.
  virtual void Softmax(float* x, int64_t rows, int64_t cols) = 0;
  // x[i] = 1 / (1 + exp(-x[i])), in place.
  virtual void Sigmoid(float* x, int64_t count) = 0;
  // out [rows, cols] = x + bias (bias [cols] broadcast over rows).
  virtual void AddRowBias(const float* x, const float* bias, int64_t rows, int64_t cols, float* out) = 0;
  // Group-limited routing, in place on x [rows, cols] (biased scores): per row, every group but
  // the topk_group best is set to -inf (planner/model/group_select.h GroupSelectRow, the rule and its
  // sources in planner/model/group_limit.h). n_group divides cols; no-op without an active limit.
  virtual void GroupSelect(float* x, int64_t rows, int64_t cols, int64_t n_group, int64_t topk_group, bool top2_sum) = 0;
  // Per row of x [rows, cols]: the k largest values, ties to the lower column; indices [rows, k]
  // in decreasing value order.
  virtual void TopK(const float* x, int64_t rows, int64_t cols, int64_t k, int64_t* indices) = 0;
  // weights [rows, k] = scores[r, indices[r, j]]; if normalize, divided by (their sum + 1e-20);
  // then times `scale` (routed_scaling_factor).
  virtual void RouterWeights(const float* scores, const int64_t* indices, int64_t rows, int64_t cols, int64_t k, bool normalize,
                             float scale, float* weights) = 0;
  // out[t, :] = sum over j < top_k, in j order, of weights[t, j] * rows[row_of_slot[t * top_k + j], :].
  virtual void WeightedCombine(const float* rows, const int64_t* row_of_slot, const float* weights, int64_t tokens, int64_t top_k,
                               int64_t row_elems, float* out) = 0;
  // y[i] += x[i].
  virtual void Add(const float* x, float* y, int64_t count) = 0;
  // x[r, :] *= s[r] for r < rows.
  virtual void ScaleRows(float* x, const float* s, int64_t rows, int64_t row_elems) = 0;
  virtual void Fill(float* x, float value, int64_t count) = 0;

  // Data generators (runtime/data.h): the values depend only on their coordinates, so any rank
  // (and the reference) can recompute any element.
  // out [num_tokens, hidden]: tokens [first_token, first_token + num_tokens) of `source`.
  virtual void FillTokens(uint64_t seed, int64_t source, int64_t first_token, int64_t num_tokens, int64_t hidden, float* out) = 0;
  virtual void FillWeightRows(const WeightRowsArgs& args) = 0;
};

// ---------------------------------------------------------------------------------------------
// Running ranks.

// A group a rank belongs to: its label and the global ranks in group order.
struct GroupSpec {
  std::string label;
  std::vector<int64_t> ranks;
};

// One rank to run and the groups it communicates in.
struct RankSpec {
  int64_t rank = 0;
  std::vector<GroupSpec> groups;
};

// What one rank sees while it runs.
class RankContext {
 public:
  virtual ~RankContext() = default;
  virtual int64_t rank() const = 0;
  virtual Device& device() = 0;
  virtual ComputeOps& ops() = 0;
  // The communicator of the group with this label (one of the rank's GroupSpecs); throws
  // dockyard::Error for an unknown label.
  virtual Communicator& group(const std::string& label) = 0;
};

using RankBody = std::function<void(RankContext&)>;

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  // Runs `body` once for every rank, concurrently, and returns when all have finished. When a
  // rank throws, the others are released from their collectives and the first error is
  // rethrown (a dockyard::Error names the rank).
  virtual void RunRanks(const std::vector<RankSpec>& ranks, const RankBody& body) = 0;
  // Whether RunRanks runs ranks[index] in this process (of `total`). All of them, except in a
  // multi-process launch of the CUDA backend (one process per GPU runs its own rank only).
  virtual bool RunsRankIndex(size_t index, size_t total) const {
    (void)index;
    (void)total;
    return true;
  }
};

}  // namespace dockyard::runtime
