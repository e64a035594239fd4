// The CUDA backend end to end: the MoE layer of runtime/pipeline.h on GPUs against the CPU
// reference (runtime/run.h), the single-GPU replay, the grouped-GEMM paths and precisions.
// Cases needing more GPUs than are visible are skipped, and without a GPU every case is.
#include <cstdio>

#include <doctest/doctest.h>

#include "planner/cost/cluster.h"
#include "runtime/cuda/cuda_backend.h"
#include "runtime/replay.h"
#include "runtime/run.h"
#include "runtime/test_layouts.h"

namespace dockyard::runtime {
namespace {

int Gpus() {
  static const int n = [] {
    std::string why;
    const int count = cuda::CudaDeviceCount(&why);
    // Evaluated while doctest registers the cases (static init): plain stderr, not MESSAGE.
    if (count == 0) std::fprintf(stderr, "no GPU visible (%s): GPU test cases are skipped\n", why.c_str());
    return count;
  }();
  return n;
}

#define GPU_TEST(name, gpus) TEST_CASE(name* doctest::skip(Gpus() < (gpus)))

std::unique_ptr<Backend> Cuda(const std::string& precision = "fp32", const std::string& path = "grouped") {
  cuda::CudaBackendOptions o;
  o.precision = precision;
  o.gemm_path = path;
  return cuda::MakeCudaBackend(o);
}

RunOptions Options(int64_t tokens) {
  RunOptions o;
  o.tokens_per_rank = tokens;
  o.iters = 2;
  o.warmup = 1;
  o.rank_weight_block_bytes = int64_t{256} << 20;  // the GPU ranks; the CPU reference keeps 1 MiB
  return o;
}

void Report(const RunReport& r) {
  for (const Mismatch& m : r.first_mismatches) {
    MESSAGE("rank " << m.rank << " token " << m.token << " dim " << m.dim << ": got " << m.got << " expected " << m.expected);
  }
  MESSAGE(r.backend << ": max abs error " << r.max_abs_error << ", " << r.wrong << " wrong of " << r.checked);
}

GPU_TEST("one GPU: the MoE layer of every tiny model matches the CPU reference (fp32, grouped and loop)", 1) {
  for (const ModelSpec& m : {testing::TinyMoe(), testing::TinyDeepSeek(), testing::TinyQwen2()}) {
    for (const char* path : {"grouped", "loop"}) {
      const auto backend = Cuda("fp32", path);
      const RunReport r = RunMoeLayer(testing::MakePlan(m, 1, 1), Options(200), *backend);
      Report(r);
      CHECK(r.passed());
      CHECK(r.checked == 200 * m.hidden_size);
    }
  }
}

GPU_TEST("one GPU: tf32 and bf16 expert GEMMs pass at their documented tolerances", 1) {
  struct Case {
    const char* precision;
    double atol, rtol;
  };
  for (const Case& c : {Case{"tf32", 1e-3, 1e-2}, Case{"bf16", 5e-3, 5e-2}}) {
    RunOptions o = Options(200);
    o.atol = c.atol;
    o.rtol = c.rtol;
    const auto backend = Cuda(c.precision);
    const RunReport r = RunMoeLayer(testing::MakePlan(testing::TinyDeepSeek(), 1, 1), o, *backend);
    Report(r);
    CHECK(r.passed());
  }
}

GPU_TEST("one GPU: a real expert size (Qwen3-30B-A3B layer, 128 experts of 2048 x 768) matches the reference", 1) {
  ModelSpec m = testing::TinyMoe(128, 8, 2048, 768);
  const auto backend = Cuda();
  const RunReport r = RunMoeLayer(testing::MakePlan(m, 1, 1), Options(256), *backend);
  Report(r);
  CHECK(r.passed());
}

GPU_TEST("one GPU: the shared-expert overlap gives a passing layer", 1) {
  RunOptions o = Options(128);
  o.overlap_shared_experts = true;
  const auto backend = Cuda();
  const RunReport r = RunMoeLayer(testing::MakePlan(testing::TinyDeepSeek(), 1, 1), o, *backend);
  Report(r);
  CHECK(r.passed());
}

GPU_TEST("one GPU: the replay of a rank of a 64-GPU plan validates", 1) {
  ModelSpec m = testing::TinyMoe(64, 6, 1024, 512);
  ParallelDimsOptions d;
  d.world_size = 64;
  d.ep = 16;
  TrainingConfig t;
  t.seq_len = 512;
  const Plan plan = BuildPlan(m, d, t);
  ReplayOptions o;
  o.rank = 37;
  o.cluster = ClusterPreset("h200-sxm");
  const auto backend = Cuda();
  const ReplayReport r = ReplayRank(plan, o, *backend);
  MESSAGE(ReplayReportToText(r));
  CHECK(r.ep_rank == 37 % 16);
  CHECK(r.passed());
  CHECK(r.checked > 0);
}

GPU_TEST("two GPUs: EP all-to-all over NCCL, both dispatchers, TP-sharded experts", 2) {
  const auto backend = Cuda();
  for (const char* dispatcher : {"all_to_all", "deredundency"}) {
    RunOptions o = Options(64);
    o.dispatcher = dockyard::ParseDispatcher(dispatcher, "dispatcher");
    o.oep = std::string(dispatcher) == "deredundency" ? 2 : 1;
    const RunReport r = RunMoeLayer(testing::MakePlan(testing::TinyDeepSeek(), 2, 2), o, *backend);
    Report(r);
    CHECK(r.passed());
  }
  const RunReport tp = RunMoeLayer(testing::MakePlan(testing::TinyMoe(), 2, 1, 2, 2), Options(64), *backend);
  Report(tp);
  CHECK(tp.passed());
}

GPU_TEST("eight GPUs: EP 8 with the overlap", 8) {
  RunOptions o = Options(128);
  o.overlap_shared_experts = true;
  const auto backend = Cuda();
  const RunReport r = RunMoeLayer(testing::MakePlan(testing::TinyDeepSeek(), 8, 8), o, *backend);
  Report(r);
  CHECK(r.passed());
}

}  // namespace
}  // namespace dockyard::runtime
