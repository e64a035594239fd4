// The cost model's knobs and their table (see knobs.h).
#include "planner/cost/knobs.h"

namespace dockyard {

std::string KnobSpec::Path() const {
  return std::string(section) + "." + name;
}

// The one table of knobs, one line each: calibration files (planner/calibration/calibration.h), the
// fitter (calibrate.h) and docs/calibration.md iterate it. Columns: file section and key (version 2),
// version-1 key, unit, the Knobs field, its group, valid range (min exclusive when min_open),
// physical bounds the fitter keeps to (multiples of the prior when relative), fit stage, prior
// source. Physical bounds: efficiencies between a tenth and all of the
// peak, except the GEMM and attention ceilings: a large BF16 GEMM reaches 40-90 % of the dense
// peak (cuBLAS on H100/H800/B200; the grouped-GEMM ceiling 30-95 %, runs.json C18-C21) and flash
// attention 25-85 % (FlashAttention-2/3 forward and backward on H100) -- a fit that wants less is
// missing physics and says so by hitting the bound; a kernel floor between 0.5 and 100 us; grouped-GEMM half-rows between 8 and 4096 rows
// (testdata/fidelity C21: 29 % of peak at 128 rows); a link's effective bandwidth between a tenth
// and 1.25x the cluster's figure (the presets' figures are effective busbw, 370 of NVLink4's 450
// GB/s line rate: 1.22x); a latency between 0.2x and 10x the cluster's figure.
const std::vector<KnobSpec>& KnobTable() {
  static const std::vector<KnobSpec> table = {
      {"compute.gemm", "grouped_max_efficiency", "gemm_max_efficiency", "fraction of peak",
       [](Knobs& k) -> double& { return k.compute.gemm.grouped_max_efficiency; }, KnobSpec::kCompute, 0, true, 1, 0.3, 0.95, false, KnobSpec::kComponent,
       "compute.gemm.grouped_max_efficiency (planner/cost/knobs.h); docs/cost-model.md, grouped GEMM"},
        {"compute.gemm", "grouped_half_rows", "gemm_half_rows", "rows",
       [](Knobs& k) -> double& { return k.compute.gemm.grouped_half_rows; }, KnobSpec::kCompute, 0, true, 1e9, 8, 4096, false, KnobSpec::kComponent,
       "compute.gemm.grouped_half_rows (planner/cost/knobs.h)"},
        {"compute.gemm", "dense_efficiency", "dense_efficiency", "fraction of peak",
       [](Knobs& k) -> double& { return k.compute.gemm.dense_efficiency; }, KnobSpec::kCompute, 0, true, 1, 0.4, 0.9, false, KnobSpec::kResidual,
       "compute.gemm.dense_efficiency (planner/cost/knobs.h)"},
        {"compute.flash", "fixed_efficiency", "attention_efficiency", "fraction of peak",
       [](Knobs& k) -> double& { return k.compute.flash.fixed_efficiency; }, KnobSpec::kCompute, 0, true, 1, 0.25, 0.85, false, KnobSpec::kResidual,
       "compute.flash.fixed_efficiency (planner/cost/knobs.h)"},
        {"compute.memory_bound", "floor_us", "memory_floor_us", "us",
       [](Knobs& k) -> double& { return k.compute.memory_bound.floor_us; }, KnobSpec::kCompute, 0, false, 1e6, 0.5, 100, false, KnobSpec::kComponent,
       "compute.memory_bound.floor_us (planner/cost/knobs.h)"},
        {"compute.memory_bound", "hbm_efficiency", "hbm_efficiency", "fraction of hbm_gbps",
       [](Knobs& k) -> double& { return k.compute.memory_bound.hbm_efficiency; }, KnobSpec::kCompute, 0, true, 1, 0.1, 1.0, false, KnobSpec::kComponent,
       "compute.memory_bound.hbm_efficiency (planner/cost/knobs.h); docs/cost-model.md, memory-bound kernels", false, 0.15},
        {"compute.memory_bound", "kernel_launch_us", "kernel_launch_us", "us",
       [](Knobs& k) -> double& { return k.compute.memory_bound.kernel_launch_us; }, KnobSpec::kCompute, 0, false, 1e6, 0.5, 20, false, KnobSpec::kComponent,
       "compute.memory_bound.kernel_launch_us (planner/cost/knobs.h)"},
        {"compute.memory_bound", "graph_launch_us", "graph_launch_us", "us",
       [](Knobs& k) -> double& { return k.compute.memory_bound.graph_launch_us; }, KnobSpec::kCompute, 0, false, 1e6, 0.1, 10, false, KnobSpec::kComponent,
       "compute.memory_bound.graph_launch_us (planner/cost/knobs.h)"},
        {"compute.gemm", "shape_efficiency", "gemm_shape_efficiency", "fraction of peak",
       [](Knobs& k) -> double& { return k.compute.gemm.shape_efficiency; }, KnobSpec::kCompute, 0, true, 1, 0.1, 1.0, false, KnobSpec::kComponent,
       "compute.gemm.shape_efficiency (planner/cost/knobs.h); docs/cost-model.md, GEMM efficiency by shape", false, 0.25},
        {"compute.gemm", "half_nk", "gemm_half_nk", "elements",
       [](Knobs& k) -> double& { return k.compute.gemm.half_nk; }, KnobSpec::kCompute, 0, true, 1e9, 1, 4096, false, KnobSpec::kComponent,
       "compute.gemm.half_nk (planner/cost/knobs.h)"},
        {"compute.gemm", "tile_rows", "gemm_tile_rows", "rows",
       [](Knobs& k) -> double& { return k.compute.gemm.tile_rows; }, KnobSpec::kCompute, 1, false, 1e6, 16, 256, false, KnobSpec::kComponent,
       "compute.gemm.tile_rows (planner/cost/knobs.h)"},
        {"compute.flash", "max_efficiency", "flash_max_efficiency", "fraction of peak",
       [](Knobs& k) -> double& { return k.compute.flash.max_efficiency; }, KnobSpec::kCompute, 0, true, 1, 0.1, 1.0, false, KnobSpec::kComponent,
       "compute.flash.max_efficiency (planner/cost/knobs.h)", false, 0.15},
        {"compute.flash", "half_head_dim", "flash_half_head_dim", "head dim",
       [](Knobs& k) -> double& { return k.compute.flash.half_head_dim; }, KnobSpec::kCompute, 0, true, 1e6, 1, 256, false, KnobSpec::kComponent,
       "compute.flash.half_head_dim (planner/cost/knobs.h)"},
        {"compute.flash", "half_seq", "flash_half_seq", "keys",
       [](Knobs& k) -> double& { return k.compute.flash.half_seq; }, KnobSpec::kCompute, 0, true, 1e9, 16, 16384, false, KnobSpec::kComponent,
       "compute.flash.half_seq (planner/cost/knobs.h)"},
        {"compute.flash", "bwd_ratio", "flash_bwd_ratio", "ratio",
       [](Knobs& k) -> double& { return k.compute.flash.bwd_ratio; }, KnobSpec::kCompute, 0, true, 1, 0.1, 1.0, false, KnobSpec::kComponent,
       "compute.flash.bwd_ratio (planner/cost/knobs.h)"},
        {"compute.flash", "fp8_speedup", "flash_fp8_speedup", "ratio",
       [](Knobs& k) -> double& { return k.compute.flash.fp8_speedup; }, KnobSpec::kCompute, 0.25, false, 4, 1.0, 2.5, false, KnobSpec::kComponent,
       "compute.flash.fp8_speedup (planner/cost/knobs.h): no Hopper measurement, FP8 attention priced as BF16", true, 0.15},
        {"compute.flash", "fp8_small_head_fwd_speedup", "flash_fp8_small_head_fwd_speedup", "ratio",
       [](Knobs& k) -> double& { return k.compute.flash.fp8_small_head_fwd_speedup; }, KnobSpec::kCompute, 0.25, false, 4, 0.25, 2.5, false,
       KnobSpec::kComponent, "compute.flash.fp8_small_head_fwd_speedup (planner/cost/knobs.h): no FP8 attention below head dim 128 on Hopper, priced as BF16",
       true, 0.15},
        {"compute.flash", "fp8_small_head_bwd_efficiency", "flash_fp8_small_head_bwd_efficiency", "fraction of the curve",
       [](Knobs& k) -> double& { return k.compute.flash.fp8_small_head_bwd_efficiency; }, KnobSpec::kCompute, 0.1, false, 2.5, 0.25, 2.5, false,
       KnobSpec::kComponent, "compute.flash.fp8_small_head_bwd_efficiency (planner/cost/knobs.h): no FP8 attention below head dim 128 on Hopper, priced as BF16",
       true, 0.15},
        {"compute.flash", "small_head_efficiency", "flash_small_head_efficiency", "fraction of the curve",
       [](Knobs& k) -> double& { return k.compute.flash.small_head_efficiency; }, KnobSpec::kCompute, 0, true, 1.5, 0.25, 1.5, false,
       KnobSpec::kComponent, "compute.flash.small_head_efficiency (planner/cost/knobs.h): no BF16 flash measurement below head dim 128 on Hopper",
       true, 0.15},
        {"compute.flash", "small_head_bwd_efficiency", "flash_small_head_bwd_efficiency", "fraction of the curve",
       [](Knobs& k) -> double& { return k.compute.flash.small_head_bwd_efficiency; }, KnobSpec::kCompute, 0, true, 1.5, 0.25, 1.5, false,
       KnobSpec::kComponent,
       "compute.flash.small_head_bwd_efficiency (planner/cost/knobs.h): no BF16 flash measurement below head dim 128 on Hopper", true, 0.15},
        {"compute.gemm", "fp8_efficiency_ratio", "fp8_efficiency_ratio", "ratio",
       [](Knobs& k) -> double& { return k.compute.gemm.fp8_efficiency_ratio; }, KnobSpec::kCompute, 0, true, 1.5, 0.1, 1.5, false, KnobSpec::kComponent,
       "compute.gemm.fp8_efficiency_ratio (planner/cost/knobs.h); docs/cost-model.md, precision"},
        {"compute.gemm", "mxfp8_efficiency_ratio", "mxfp8_efficiency_ratio", "ratio",
       [](Knobs& k) -> double& { return k.compute.gemm.mxfp8_efficiency_ratio; }, KnobSpec::kCompute, 0, true, 1.5, 0.3, 1.5, false,
       KnobSpec::kComponent,
       "compute.gemm.mxfp8_efficiency_ratio (planner/cost/knobs.h): torchao's MXFP8 grouped GEMMs on B200 at DeepSeek-V3's expert shape "
       "against the b200 table's BF16 time, 0.919",
       true, 0.15},
        {"links", "intra_node_gbps", "intra_node_gbps", "GB/s",
       [](Knobs& k) -> double& { return k.links.intra_node_gbps; }, KnobSpec::kLink, 0, true, 1e6, 0.1, 1.25, true, KnobSpec::kComponent,
       "the preset's intra_node_gbps (planner/cost/cluster.cc, docs/cluster.md)", false, 0.15},
        {"links", "intra_node_latency_us", "intra_node_latency_us", "us",
       [](Knobs& k) -> double& { return k.links.intra_node_latency_us; }, KnobSpec::kLink, 0, true, 1e6, 0.2, 10, true, KnobSpec::kComponent,
       "the preset's intra_node_latency_us (planner/cost/cluster.cc, docs/cluster.md)"},
        {"links", "network_gbps", "network_gbps", "GB/s",
       [](Knobs& k) -> double& { return k.links.network_gbps; }, KnobSpec::kLink, 0, true, 1e6, 0.1, 1.25, true, KnobSpec::kComponent,
       "the preset's network_gbps (planner/cost/cluster.cc, docs/cluster.md)", false, 0.15},
        {"links", "network_latency_us", "network_latency_us", "us",
       [](Knobs& k) -> double& { return k.links.network_latency_us; }, KnobSpec::kLink, 0, true, 1e6, 0.2, 10, true, KnobSpec::kComponent,
       "the preset's network_latency_us (planner/cost/cluster.cc, docs/cluster.md)"},
        {"links", "all_to_all_share", "all_to_all_share", "fraction of intra_node_gbps",
       [](Knobs& k) -> double& { return k.links.all_to_all_share; }, KnobSpec::kLink, 0, true, 1.5, 0.5, 1.2, false, KnobSpec::kResidual,
       "links.all_to_all_share (planner/cost/knobs.h): NCCL's all-to-all against its all-gather busbw inside the NVLink domain",
       true, 0.15},
        {"dispatchers.deepep", "nvlink_efficiency", "flex_nvlink_efficiency", "fraction of link",
       [](Knobs& k) -> double& { return k.dispatchers.deepep.nvlink_efficiency; }, KnobSpec::kDispatcher, 0, true, 1, 0.1, 1.0, false, KnobSpec::kComponent,
       "dispatchers.deepep.nvlink_efficiency (planner/cost/knobs.h): DeepEP issue #493, 133.78 GB/s NVLink dispatch / 370"},
        {"dispatchers.deepep", "network_efficiency", "flex_network_efficiency", "fraction of link",
       [](Knobs& k) -> double& { return k.dispatchers.deepep.network_efficiency; }, KnobSpec::kDispatcher, 0, true, 1, 0.1, 1.0, false, KnobSpec::kComponent,
       "dispatchers.deepep.network_efficiency (planner/cost/knobs.h): DeepEP issue #493, 40.89 GB/s RDMA dispatch / 48"},
        {"compute.tp_overlap", "sm_share", "tp_overlap_sm_share", "fraction of SMs",
       [](Knobs& k) -> double& { return k.compute.tp_overlap.sm_share; }, KnobSpec::kCompute, 0, false, 0.9, 0.0, 0.5, false,
       KnobSpec::kComponent,
       "compute.tp_overlap.sm_share (planner/cost/knobs.h): TransformerEngine initialize_ub's num_sm 16 (pipeline and bulk "
       "overlaps, set_sm_margin) of H100's 132 SMs",
       true, 0.5},
        {"dispatchers.ep_overlap", "all_to_all_sm_share", "ep_overlap_all_to_all_sm_share", "fraction of SMs",
       [](Knobs& k) -> double& { return k.dispatchers.ep_overlap.all_to_all_sm_share; }, KnobSpec::kDispatcher, 0, false, 0.9, 0.0, 0.5, false,
       KnobSpec::kComponent, "dispatchers.ep_overlap.all_to_all_sm_share (planner/cost/knobs.h): 16 NCCL channels' CTAs of H100's 132 SMs (assumed)", true, 0.5},
        {"dispatchers.ep_overlap", "deepep_sm_share", "ep_overlap_deepep_sm_share", "fraction of SMs",
       [](Knobs& k) -> double& { return k.dispatchers.ep_overlap.deepep_sm_share; }, KnobSpec::kDispatcher, 0, false, 0.9, 0.0, 0.5, false,
       KnobSpec::kComponent, "dispatchers.ep_overlap.deepep_sm_share (planner/cost/knobs.h): DeepEP Buffer.num_sms 20 of H100's 132 SMs", true, 0.5},
        {"dispatchers.ep_overlap", "hybridep_sm_share", "ep_overlap_hybridep_sm_share", "fraction of SMs",
       [](Knobs& k) -> double& { return k.dispatchers.ep_overlap.hybridep_sm_share; }, KnobSpec::kDispatcher, 0, false, 0.9, 0.0, 0.5, false,
       KnobSpec::kComponent, "dispatchers.ep_overlap.hybridep_sm_share (planner/cost/knobs.h): 32 SMs of H100's 132 in HybridEP's Megatron recipes", true, 0.5},
        {"dispatchers.ep_overlap", "all_to_all_comm_rate", "ep_overlap_all_to_all_comm_rate", "fraction of speed",
       [](Knobs& k) -> double& { return k.dispatchers.ep_overlap.all_to_all_comm_rate; }, KnobSpec::kDispatcher, 0, true, 1, 0.25, 1.0, false,
       KnobSpec::kComponent,
       "dispatchers.ep_overlap.all_to_all_comm_rate (planner/cost/knobs.h): NCCL beside a CUTLASS GEMM, up to 2x slower "
       "(NVIDIA/nccl issue #1433); all-reduce 106.6 ms alone, 206.4 ms beside it on 8 V100 (parasailteam/coconet issue #6)",
       true, 0.3},
        {"dispatchers.ep_overlap", "deepep_comm_rate", "ep_overlap_deepep_comm_rate", "fraction of speed",
       [](Knobs& k) -> double& { return k.dispatchers.ep_overlap.deepep_comm_rate; }, KnobSpec::kDispatcher, 0, true, 1, 0.25, 1.0, false,
       KnobSpec::kComponent,
       "dispatchers.ep_overlap.deepep_comm_rate (planner/cost/knobs.h): 1 assumed, DeepEP's kernels hold their own SMs (num_sms)", true,
       0.5},
        {"dispatchers.ep_overlap", "hybridep_comm_rate", "ep_overlap_hybridep_comm_rate", "fraction of speed",
       [](Knobs& k) -> double& { return k.dispatchers.ep_overlap.hybridep_comm_rate; }, KnobSpec::kDispatcher, 0, true, 1, 0.25, 1.0, false,
       KnobSpec::kComponent,
       "dispatchers.ep_overlap.hybridep_comm_rate (planner/cost/knobs.h): Megatron-Bridge's Nsight comparison on 16 H100 (Qwen3-30B-A3B, "
       "EP 16, HybridEP across two nodes), (8,254 - 6,873) / 3,959 = 0.349",
       true, 0.5},
        {"compute.memory_bound", "wgrad_accumulate_share", "wgrad_accumulate_share", "fraction of the traffic",
       [](Knobs& k) -> double& { return k.compute.memory_bound.wgrad_accumulate_share; }, KnobSpec::kCompute, 0, false, 1, 0.3, 1.0, false,
       KnobSpec::kComponent,
       "compute.memory_bound.wgrad_accumulate_share (planner/cost/knobs.h): SimuMax's B200 grouped GEMMs with fp32 and bf16 main_grad "
       "(configs/system/b200_bf16_ceperm.json), 0.70 / 0.67 / 0.66",
       true, 0.15},
        {"host", "step_overhead_us", "step_overhead_us", "us",
       [](Knobs& k) -> double& { return k.host.step_overhead_us; }, KnobSpec::kHost, 0, false, 1e8, 100, 5e4, false,
       KnobSpec::kResidual, "host.step_overhead_us (planner/cost/knobs.h): 2 ms assumed (batch fetch, loss reduce and logging per step)", true, 3.0},
        {"host", "moe_sync_idle_us", "moe_sync_idle_us", "us",
       [](Knobs& k) -> double& { return k.host.moe_sync_idle_us; }, KnobSpec::kHost, 0, false, 1e6, 50, 2000, false, KnobSpec::kResidual,
       "host.moe_sync_idle_us (planner/cost/knobs.h): Megatron-Bridge's Nsight comparison on 16 H100 (Qwen3-30B-A3B, EP 16, HybridEP), "
       "1.893 s of GPU idle over 3,072 MoE layer forwards without EP overlap",
       true, 0.3},
      // The host's per-step work is milliseconds; 50 ms is its physical ceiling (knobs.h HostKnobs):
      // a fit that wants more is missing physics elsewhere and says so by hitting it.
  };
  return table;
}

}  // namespace dockyard
