// ComputeOps on the host CPU: the kernels of kernels.h for GEMMs and weight generation, plain
// loops for the rest. Stateless and thread-safe: every rank thread (and the reference) may use
// one instance concurrently. Single-threaded per call: the CPU backend's parallelism is one
// thread per rank.
#pragma once

#include "runtime/backend.h"
#include "runtime/cpu/kernels.h"

namespace dockyard::runtime::cpu {

class CpuOps : public ComputeOps {
 public:
  CpuOps() : kernels_(BestKernels()) {}
  explicit CpuOps(const KernelTable& kernels) : kernels_(kernels) {}
  const char* isa() const { return kernels_.isa; }

  void Gemm(const GemmArgs& args) override;
  void GroupedGemm(const GroupedGemmArgs& args) override;
  void GatherRows(const float* src, const int64_t* indices, int64_t num_rows, int64_t row_elems, float* dst) override;
  void ScatterRows(const float* src, const int64_t* indices, int64_t num_rows, int64_t row_elems, float* dst) override;
  void CopyRowBlocks(const float* src, float* dst, const std::vector<RowBlock>& blocks, int64_t row_elems) override;
  void SwiGlu(const float* gate, const float* up, float* out, int64_t count) override;
  void Softmax(float* x, int64_t rows, int64_t cols) override;
  void Sigmoid(float* x, int64_t count) override;
  void AddRowBias(const float* x, const float* bias, int64_t rows, int64_t cols, float* out) override;
  void GroupSelect(float* x, int64_t rows, int64_t cols, int64_t n_group, int64_t topk_group, bool top2_sum) override;
  void TopK(const float* x, int64_t rows, int64_t cols, int64_t k, int64_t* indices) override;
  void RouterWeights(const float* scores, const int64_t* indices, int64_t rows, int64_t cols, int64_t k, bool normalize, float scale,
                     float* weights) override;
  void WeightedCombine(const float* rows, const int64_t* row_of_slot, const float* weights, int64_t tokens, int64_t top_k,
                       int64_t row_elems, float* out) override;
  void Add(const float* x, float* y, int64_t count) override;
  void ScaleRows(float* x, const float* s, int64_t rows, int64_t row_elems) override;
  void Fill(float* x, float value, int64_t count) override;
  void FillTokens(uint64_t seed, int64_t source, int64_t first_token, int64_t num_tokens, int64_t hidden, float* out) override;
  void FillWeightRows(const WeightRowsArgs& args) override;

 private:
  const KernelTable& kernels_;
};

}  // namespace dockyard::runtime::cpu
