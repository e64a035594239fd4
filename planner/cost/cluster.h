// ClusterSpec: the hardware a layout runs on and the knobs it is priced with, for the cost model
// (docs/cluster.md cites the source of every preset value). Bandwidths are effective per-GPU, per-direction figures in
// GB/s (1e9 bytes/s); latencies in microseconds; compute in dense BF16 TFLOP/s (1e12 FLOP/s).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "planner/base/json_util.h"
#include "planner/cost/knobs.h"

namespace dockyard {

struct ClusterSpec {
  std::string name;
  int64_t gpus_per_node = 8;
  int64_t nodes = 0;                   // 0 = as many as the world needs
  double dense_bf16_tflops = 989.0;    // peak dense BF16 tensor-core throughput per GPU
  double hbm_gbps = 3350.0;            // HBM bandwidth per GPU
  double memory_gib = 79.6;            // usable GPU memory
  // Streaming multiprocessors per GPU: what a kernel that holds N SMs takes from the compute beside
  // it (N / sm_count: the EP dispatcher's --moe-flex-dispatcher-num-sms, ep_overlap.h; the knobs'
  // default kernel widths). H100 SXM / H200 / H800 132, H100 PCIe 114 (NVIDIA H100 whitepaper), B200 /
  // GB200 148, B300 / GB300 160 (NVIDIA "Inside NVIDIA Blackwell Ultra", 2025-08; docs/cluster.md).
  int64_t sm_count = 132;
  // NICs per node (rails); network_gbps x gpus_per_node is the node's NIC bandwidth, shared by
  // its NICs. Used where a group runs alone on its nodes (network.h RingBusGbps).
  int64_t nics_per_node = 8;
  // GPUs of one NVLink domain (a multiple of gpus_per_node; 0 = one node): the locality unit of the
  // cost model (network.h NvlinkDomainGpus). gb200-nvl72: 72 GPUs over 18 nodes of 4.
  int64_t nvlink_domain_gpus = 0;
  // What the cost model prices this hardware with (knobs.h): the preset's priors -- its effective
  // link figures in `links` (docs/cluster.md cites them), the compute and dispatcher knobs'
  // defaults -- or a calibration file's (planner/calibration/calibration.h ApplyCalibration).
  Knobs knobs;
  // Where the preset's compute knobs (its operator table) come from, as reports print it: measured
  // on this GPU, or borrowed from another's with the reason. A cluster file inherits its base's.
  std::string compute_source = "h100-sxm priors (planner/cost/knobs.h: H100 / H200 measurements)";
  // Whether its tensor cores run MXFP8 (block-scaled FP8, E8M0 scales per 32 elements): Blackwell
  // (SM100+: b200, gb200-nvl72, b300, gb300-nvl72), not Hopper. --fp8-recipe mxfp8 is refused
  // without (precision.h ValidateFp8RecipeOnGpu). A cluster file inherits its base's.
  bool mxfp8_tensor_cores = false;
  // Whether cuDNN's FP8 attention backward below head dim 128 runs the full causal core, skipping no
  // block outside a sliding window: measured on GB200 and GB300 (cuDNN 9.19 and 9.22; its time grows
  // as the square of the sequence, testdata/fidelity C40-C42), so the Blackwell presets; the Hopper
  // ones have no FP8 attention there (priced as BF16). The cost model reads it through
  // GemmPrecisionOf (gemm_efficiency.h). A cluster file inherits its base's.
  bool fp8_small_head_bwd_full_causal = false;
};

// Presets: "h100-sxm", "h200-sxm", "h100-pcie-400g" (one 400 Gb/s NIC per node, PCIe Gen5
// inside the node), "h800-sxm" (NVLink ~160 GB/s achievable), "b200" (DGX B200), "gb200-nvl72"
// (nodes of 4 in one 72-GPU NVLink domain), "b300" (HGX B300, 800 Gb/s per GPU), "gb300-nvl72"
// (GB200 NVL72's shape with B300-class GPUs; docs/cluster.md [B5], [G2]). Throws dockyard::Error listing the presets for an
// unknown name.
ClusterSpec ClusterPreset(const std::string& name);
std::vector<std::string> ClusterPresetNames();
// ClusterPresetNames joined by ", " (the unknown-preset message, the --cluster help).
std::string ClusterPresetNamesText();

// A cluster JSON file (docs/cluster.md): {"name", "gpus_per_node", "nodes", "dense_bf16_tflops",
// "hbm_gbps", "memory_gib", "sm_count", "intra_node_gbps", "intra_node_latency_us", "network_gbps",
// "network_latency_us", "nics_per_node", "nvlink_domain_gpus"}, every field optional over the "base" preset (default "h100-sxm").
// Errors name the file, the JSON pointer, the value and the rule. Rates (dense_bf16_tflops, hbm_gbps,
// intra_node_gbps, network_gbps) must lie in [kMinClusterRate, 1e6]; memory and latencies in (0, 1e6].
ClusterSpec ClusterFromJson(const Json& json, const std::string& file);
// The lowest rate a cluster file may give (TFLOP/s or GB/s): 1 GFLOP/s or 1 MB/s, below any device
// dockyard plans for (the CPU test cluster, testdata/fidelity/cpu-2core.json, has 0.01 and 1) and
// high enough that a large model's times stay finite.
constexpr double kMinClusterRate = 0.001;

// A preset name, or a path to a cluster JSON file.
ClusterSpec LoadCluster(const std::string& name_or_path);

Json ClusterToJson(const ClusterSpec& c);

}  // namespace dockyard
