// GPU benchmarks of dockyard-run's kernels, in nccl-tests' manner (columns, warm-up, then the
// mean of timed iterations measured with CUDA events):
//   grouped_gemm   BF16 in and out, FP32 accumulate: cublasGemmGroupedBatchedEx and the per-expert
//                  cublasGemmEx loop, beside one dense cublasGemmEx of the same FLOPs, in TFLOP/s
//                  and % of the dense BF16 peak (--peak-tflops, default 989: H100/H200 SXM)
//   permute        GatherRows of routed rows (fp32, hidden 7168), GB/s = (read + write bytes) / t,
//                  beside a device-to-device cudaMemcpy and the HBM bandwidth (--hbm-gbs,
//                  default 4800: H200)
//   all_to_all     NCCL all-to-all over every visible GPU (one process, ncclCommInitAll):
//                  algbw = bytes sent per rank / t, busbw = algbw * (n - 1) / n (nccl-tests'
//                  alltoall convention)
// Usage: bench_gpu [--json FILE] [--iters N] [--peak-tflops F] [--hbm-gbs G] [--quick]
// Exits 1 with a message when no GPU is visible.
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "kernels/grouped_gemm.h"
#include "kernels/moe_kernels.h"
#include "planner/base/error.h"

namespace dockyard::kernels {
namespace {

using Json = nlohmann::json;

struct Options {
  std::string json_path;
  int iters = 20;
  double peak_tflops = 989.0;
  double hbm_gbs = 4800.0;
  bool quick = false;
};

// Mean microseconds of `fn` over `iters` launches on `stream` after 3 warm-ups.
double TimeUs(cudaStream_t stream, int iters, const std::function<void()>& fn) {
  for (int i = 0; i < 3; ++i) fn();
  cudaEvent_t start, stop;
  CheckCuda(cudaEventCreate(&start), "cudaEventCreate");
  CheckCuda(cudaEventCreate(&stop), "cudaEventCreate");
  CheckCuda(cudaEventRecord(start, stream), "cudaEventRecord");
  for (int i = 0; i < iters; ++i) fn();
  CheckCuda(cudaEventRecord(stop, stream), "cudaEventRecord");
  CheckCuda(cudaEventSynchronize(stop), "cudaEventSynchronize");
  float ms = 0;
  CheckCuda(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return 1000.0 * ms / iters;
}

void* Malloc(size_t bytes) {
  void* p = nullptr;
  CheckCuda(cudaMalloc(&p, bytes), "cudaMalloc");
  return p;
}

Json BenchGroupedGemm(const Options& o, cudaStream_t stream) {
  // DeepSeek-V3's routed experts (hidden 7168, moe_intermediate_size 2048), gate|up fused:
  // C[M, 4096] = A[M, 7168] . W^T per expert, 8 local experts (256 experts over ep 32).
  const int64_t experts = 8, n = 4096, k = 7168;
  std::vector<int64_t> rows_per_expert = {16, 64, 128, 256, 512, 1024, 2048, 4096};
  if (o.quick) rows_per_expert = {128, 1024};
  const int64_t max_rows = experts * rows_per_expert.back();
  auto* a = static_cast<__nv_bfloat16*>(Malloc(static_cast<size_t>(max_rows * k) * 2));
  auto* w = static_cast<__nv_bfloat16*>(Malloc(static_cast<size_t>(experts * n * k) * 2));
  auto* c = static_cast<__nv_bfloat16*>(Malloc(static_cast<size_t>(max_rows * n) * 2));
  // Inputs: generated floats in [-1, 1] rounded to bf16 (values do not change GEMM speed, but
  // NaN-free inputs keep the benchmark honest).
  {
    float* tmp = static_cast<float*>(Malloc(static_cast<size_t>(std::max(max_rows * k, experts * n * k)) * 4));
    FillTokens(1, 0, 0, max_rows, k, tmp, stream);
    FloatToBf16(tmp, reinterpret_cast<uint16_t*>(a), max_rows * k, stream);
    FillTokens(1, 1, 0, experts * n, k, tmp, stream);
    FloatToBf16(tmp, reinterpret_cast<uint16_t*>(w), experts * n * k, stream);
    CheckCuda(cudaStreamSynchronize(stream), "sync");
    cudaFree(tmp);
  }
  CublasGemm gemm(stream);
  std::vector<const void*> b(static_cast<size_t>(experts));
  for (int64_t e = 0; e < experts; ++e) b[e] = w + e * n * k;
  std::printf("\n# grouped_gemm: %lld experts, C[M, %lld] = A[M, %lld] . W_e^T, BF16 in and out, FP32 accumulate\n",
              static_cast<long long>(experts), static_cast<long long>(n), static_cast<long long>(k));
  std::printf("%10s %12s %11s %9s %11s %9s %11s %9s %8s %8s\n", "rows/exp", "GFLOP", "grouped_us", "TFLOP/s", "loop_us", "TFLOP/s",
              "dense_us", "TFLOP/s", "grp/dense", "%peak");
  Json rows = Json::array();
  for (int64_t m : rows_per_expert) {
    std::vector<int64_t> offsets = {0};
    for (int64_t e = 0; e < experts; ++e) offsets.push_back(offsets.back() + m);
    GroupedGemmDesc d;
    d.num_groups = experts;
    d.offsets = offsets.data();
    d.n = n;
    d.k = k;
    d.a = a;
    d.lda = k;
    d.b = b.data();
    d.ldb = k;
    d.trans_b = true;
    d.c = c;
    d.ldc = n;
    d.ab_type = CUDA_R_16BF;
    d.c_type = CUDA_R_16BF;
    d.compute = CUBLAS_COMPUTE_32F;
    GroupedGemmPath used = GroupedGemmPath::kGrouped;
    const double grouped_us = TimeUs(stream, o.iters, [&] { used = gemm.Run(d, GroupedGemmPath::kGrouped); });
    const double loop_us = TimeUs(stream, o.iters, [&] { gemm.Run(d, GroupedGemmPath::kLoop); });
    // The same FLOPs as one dense GEMM: [experts * M, k] . W_0^T.
    const double dense_us = TimeUs(stream, o.iters, [&] {
      gemm.Dense(experts * m, n, k, a, k, w, k, true, c, n, false, CUDA_R_16BF, CUDA_R_16BF, CUBLAS_COMPUTE_32F);
    });
    const double flop = 2.0 * experts * m * n * k;
    const auto tf = [&](double us) { return flop / (us * 1e-6) / 1e12; };
    std::printf("%10lld %12.1f %11.1f %9.1f %11.1f %9.1f %11.1f %9.1f %8.2f %7.1f%%%s\n", static_cast<long long>(m), flop / 1e9, grouped_us,
                tf(grouped_us), loop_us, tf(loop_us), dense_us, tf(dense_us), tf(grouped_us) / tf(dense_us),
                100.0 * tf(grouped_us) / o.peak_tflops, used == GroupedGemmPath::kLoop ? "  (grouped call unsupported: loop ran)" : "");
    rows.push_back({{"experts", experts},
                    {"rows_per_expert", m},
                    {"n", n},
                    {"k", k},
                    {"gflop", flop / 1e9},
                    {"grouped_us", grouped_us},
                    {"grouped_tflops", tf(grouped_us)},
                    {"grouped_path", PathName(used)},
                    {"loop_us", loop_us},
                    {"loop_tflops", tf(loop_us)},
                    {"dense_us", dense_us},
                    {"dense_tflops", tf(dense_us)},
                    {"peak_tflops", o.peak_tflops}});
  }
  cudaFree(a);
  cudaFree(w);
  cudaFree(c);
  return rows;
}

Json BenchPermute(const Options& o, cudaStream_t stream) {
  const int64_t hidden = 7168;
  std::vector<int64_t> row_counts = {1024, 8192, 65536, 131072};
  if (o.quick) row_counts = {8192};
  const int64_t max_rows = row_counts.back();
  auto* src = static_cast<float*>(Malloc(static_cast<size_t>(max_rows * hidden) * 4));
  auto* dst = static_cast<float*>(Malloc(static_cast<size_t>(max_rows * hidden) * 4));
  auto* idx = static_cast<int64_t*>(Malloc(static_cast<size_t>(max_rows) * 8));
  std::printf("\n# permute: GatherRows, fp32 rows of %lld (HBM reference %.0f GB/s)\n", static_cast<long long>(hidden), o.hbm_gbs);
  std::printf("%10s %12s %11s %9s %11s %9s %8s\n", "rows", "bytes", "gather_us", "GB/s", "memcpy_us", "GB/s", "%hbm");
  Json rows = Json::array();
  for (int64_t r : row_counts) {
    // A permutation with stride 7919 (prime): scattered rows, as routing makes them.
    std::vector<int64_t> h(static_cast<size_t>(r));
    for (int64_t i = 0; i < r; ++i) h[i] = (i * 7919) % r;
    CheckCuda(cudaMemcpy(idx, h.data(), h.size() * 8, cudaMemcpyHostToDevice), "cudaMemcpy");
    const double bytes = 2.0 * r * hidden * 4;  // read + write
    const double gather_us = TimeUs(stream, o.iters, [&] { GatherRows(src, idx, r, hidden, dst, stream); });
    const double copy_us = TimeUs(stream, o.iters, [&] {
      CheckCuda(cudaMemcpyAsync(dst, src, static_cast<size_t>(r * hidden) * 4, cudaMemcpyDeviceToDevice, stream), "memcpy");
    });
    const double gbs = bytes / (gather_us * 1e-6) / 1e9, copy_gbs = bytes / (copy_us * 1e-6) / 1e9;
    std::printf("%10lld %12.0f %11.1f %9.0f %11.1f %9.0f %7.1f%%\n", static_cast<long long>(r), bytes, gather_us, gbs, copy_us, copy_gbs,
                100.0 * gbs / o.hbm_gbs);
    rows.push_back({{"rows", r},
                    {"hidden", hidden},
                    {"bytes", bytes},
                    {"gather_us", gather_us},
                    {"gather_gbs", gbs},
                    {"memcpy_us", copy_us},
                    {"memcpy_gbs", copy_gbs},
                    {"hbm_gbs", o.hbm_gbs}});
  }
  cudaFree(src);
  cudaFree(dst);
  cudaFree(idx);
  return rows;
}

void CheckNccl(ncclResult_t r, const char* what) {
  if (r != ncclSuccess) throw Error(fmt::format("nccl: {}: {}", what, ncclGetErrorString(r)));
}

Json BenchAllToAll(const Options& o, int devices) {
  std::vector<ncclComm_t> comms(static_cast<size_t>(devices));
  CheckNccl(ncclCommInitAll(comms.data(), devices, nullptr), "ncclCommInitAll");
  std::vector<cudaStream_t> streams(static_cast<size_t>(devices));
  std::vector<char*> send(static_cast<size_t>(devices)), recv(static_cast<size_t>(devices));
  std::vector<int64_t> sizes = {1 << 20, 8 << 20, 64 << 20, 256 << 20, int64_t{1} << 30};
  if (o.quick) sizes = {8 << 20, 256 << 20};
  for (int d = 0; d < devices; ++d) {
    CheckCuda(cudaSetDevice(d), "cudaSetDevice");
    CheckCuda(cudaStreamCreate(&streams[d]), "cudaStreamCreate");
    send[d] = static_cast<char*>(Malloc(static_cast<size_t>(sizes.back())));
    recv[d] = static_cast<char*>(Malloc(static_cast<size_t>(sizes.back())));
  }
  std::printf("\n# all_to_all: NCCL send/recv pairs over %d GPU(s) in one process (nccl-tests alltoall columns)\n", devices);
  std::printf("%14s %12s %8s %10s %10s %10s\n", "size (B)", "count", "type", "time (us)", "algbw", "busbw");
  Json rows = Json::array();
  for (int64_t bytes : sizes) {
    const int64_t chunk = bytes / devices;
    const auto once = [&] {
      CheckNccl(ncclGroupStart(), "ncclGroupStart");
      for (int d = 0; d < devices; ++d) {
        for (int p = 0; p < devices; ++p) {
          CheckNccl(ncclSend(send[d] + p * chunk, static_cast<size_t>(chunk), ncclChar, p, comms[d], streams[d]), "ncclSend");
          CheckNccl(ncclRecv(recv[d] + p * chunk, static_cast<size_t>(chunk), ncclChar, p, comms[d], streams[d]), "ncclRecv");
        }
      }
      CheckNccl(ncclGroupEnd(), "ncclGroupEnd");
    };
    const auto sync_all = [&] {
      for (int d = 0; d < devices; ++d) {
        CheckCuda(cudaSetDevice(d), "cudaSetDevice");
        CheckCuda(cudaStreamSynchronize(streams[d]), "cudaStreamSynchronize");
      }
    };
    for (int i = 0; i < 3; ++i) once();
    sync_all();
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < o.iters; ++i) once();
    sync_all();
    const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / o.iters;
    const double algbw = static_cast<double>(bytes) / (us * 1e-6) / 1e9;
    const double busbw = algbw * (devices - 1) / devices;
    std::printf("%14lld %12lld %8s %10.1f %10.2f %10.2f\n", static_cast<long long>(bytes), static_cast<long long>(bytes), "int8", us, algbw,
                busbw);
    rows.push_back({{"bytes", bytes}, {"ranks", devices}, {"time_us", us}, {"algbw_gbs", algbw}, {"busbw_gbs", busbw}});
  }
  for (int d = 0; d < devices; ++d) {
    cudaSetDevice(d);
    cudaFree(send[d]);
    cudaFree(recv[d]);
    cudaStreamDestroy(streams[d]);
    ncclCommDestroy(comms[d]);
  }
  return rows;
}

int Main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const auto next = [&]() -> std::string {
      if (i + 1 >= argc) throw Error(a + " needs a value");
      return argv[++i];
    };
    if (a == "--json") {
      o.json_path = next();
    } else if (a == "--iters") {
      o.iters = std::max(1, std::atoi(next().c_str()));
    } else if (a == "--peak-tflops") {
      o.peak_tflops = std::atof(next().c_str());
    } else if (a == "--hbm-gbs") {
      o.hbm_gbs = std::atof(next().c_str());
    } else if (a == "--quick") {
      o.quick = true;
    } else {
      throw Error("bench_gpu: unknown argument '" + a + "' (--json FILE, --iters N, --peak-tflops F, --hbm-gbs G, --quick)");
    }
  }
  int devices = 0;
  const cudaError_t e = cudaGetDeviceCount(&devices);
  if (e != cudaSuccess || devices == 0) {
    std::fprintf(stderr, "bench_gpu: no GPU visible (%s)\n", e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
    return 1;
  }
  cudaDeviceProp prop{};
  CheckCuda(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  std::printf("bench_gpu: %d GPU(s), device 0: %s, %.1f GiB\n", devices, prop.name, static_cast<double>(prop.totalGlobalMem) / (1 << 30));
  CheckCuda(cudaSetDevice(0), "cudaSetDevice");
  cudaStream_t stream;
  CheckCuda(cudaStreamCreate(&stream), "cudaStreamCreate");
  Json out = {{"device", prop.name}, {"devices", devices}, {"iters", o.iters}};
  out["grouped_gemm"] = BenchGroupedGemm(o, stream);
  out["permute"] = BenchPermute(o, stream);
  out["all_to_all"] = BenchAllToAll(o, devices);
  if (!o.json_path.empty()) {
    std::ofstream f(o.json_path);
    f << out.dump(1) << "\n";
    if (!f) throw Error("bench_gpu: cannot write " + o.json_path);
  }
  return 0;
}

}  // namespace
}  // namespace dockyard::kernels

int main(int argc, char** argv) {
  try {
    return dockyard::kernels::Main(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_gpu: error: %s\n", e.what());
    return 1;
  }
}
