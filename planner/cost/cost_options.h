// CostOptions: the cost model's calibration knobs and the run settings it reads (docs/cost-model.md,
// docs/calibration.md).
#pragma once

namespace dockyard {

struct CostOptions {
  bool overlap_shared_experts = true;  // shared-expert forward overlaps the combine all-to-all
  // Grouped-GEMM efficiency curve eff(M) = max_eff * M / (M + half_rows), M = rows of one expert.
  double gemm_max_efficiency = 0.80;
  double gemm_half_rows = 128.0;
  double dense_efficiency = 0.70;      // large dense GEMMs (attention projections, dense MLP)
  double attention_efficiency = 0.50;  // flash-attention core
  double memory_floor_us = 5.0;        // fixed cost of a memory-bound kernel (permute, top-k)
  // deepep dispatcher (planner/cost/deepep.h): the fraction of intra_node_gbps / network_gbps its
  // SM-limited kernels reach. DeepEP issue #493 (2 x 8 H200, CX7 400G, normal kernels, BF16
  // dispatch): 133.78 GB/s NVLink = 0.362 x 370; 40.89 GB/s RDMA = 0.852 x 48.
  double flex_nvlink_efficiency = 0.362;
  double flex_network_efficiency = 0.852;
  // The kernel-level compute model (planner/cost/kernels_model.h, gemm_efficiency.h, docs/cost-model.md
  // §3.11-3.12): the default (compute_model.h kDefaultComputeModel); false is `--compute-model gemm`,
  // the older model of GEMMs at fixed efficiencies.
  bool kernel_compute = true;        // --compute-model kernels (default) | gemm
  bool cuda_graphs = false;          // --cuda-graphs (Megatron --enable-cuda-graph / --cuda-graph-impl)
  bool fused_cross_entropy = false;  // --cross-entropy fused (Megatron --cross-entropy-loss-fusion)
  double hbm_efficiency = 0.70;      // fraction of hbm_gbps a memory-bound kernel moves
  double kernel_launch_us = 2.0;     // exposed host gap per kernel launch (eager)
  double graph_launch_us = 0.5;      // the same inside a CUDA graph
  // GEMM and flash-attention efficiency by shape (planner/cost/gemm_efficiency.h), --compute-model kernels.
  double gemm_shape_efficiency = 0.72;  // ceiling of eff(M, N, K); M's half-fill is gemm_half_rows
  double gemm_half_nk = 34.0;           // N or K at which its factor is one half
  double gemm_tile_rows = 128.0;        // rows of a grouped-GEMM tile (each expert padded to whole tiles)
  double flash_max_efficiency = 0.69;   // flash-attention forward ceiling
  double flash_half_head_dim = 10.0;    // head dim at which its factor is one half
  double flash_half_seq = 240.0;        // attended keys at which their factor is one half
  double flash_bwd_ratio = 0.70;        // backward efficiency / forward efficiency
  // FP8 GEMMs (planner/model/precision.h): set by SimulateStep / the search from the training config.
  bool fp8_gemms = false, fp8_blockwise = false;
  double fp8_efficiency_ratio = 0.87;  // FP8 GEMM efficiency / BF16 efficiency of the same shape
};

}  // namespace dockyard
