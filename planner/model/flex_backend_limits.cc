// The deepep (flex) dispatcher backends' rank limits (see flex_backend_limits.h).
#include "planner/model/flex_backend_limits.h"

#include <algorithm>
#include <array>

#include <fmt/format.h>

namespace dockyard {
namespace {

// DeepEP csrc/legacy/buffer.hpp: NUM_MAX_NVL_PEERS, and NUM_MAX_RDMA_PEERS x NUM_MAX_NVL_PEERS.
constexpr int64_t kDeepEpNvlPeers = 8;
constexpr int64_t kDeepEpMaxRanks = 160;
// DeepEP csrc/kernels/legacy/launch.cuh: the intranode kernels' ranks (SWITCH_RANKS) and the
// internode kernels' RDMA ranks, i.e. nodes of 8 (SWITCH_RDMA_RANKS).
constexpr std::array<int64_t, 3> kIntranodeRanks = {2, 4, 8};
constexpr std::array<int64_t, 9> kInternodeNodes = {2, 3, 4, 6, 8, 12, 16, 18, 20};

template <size_t N>
bool In(const std::array<int64_t, N>& values, int64_t x) {
  return std::find(values.begin(), values.end(), x) != values.end();
}

std::string DeepEpError(const std::string& prefix, int64_t n, int64_t domain) {
  // The group's ranks in one node (NVLink domain): the group is n consecutive ranks.
  const int64_t peers = std::min(n, domain);
  if (n > kDeepEpMaxRanks) {
    return fmt::format("{}: DeepEP's normal-mode Buffer takes at most {} ranks (8 NVLink peers x 20 RDMA nodes; DeepEP "
                       "csrc/legacy/buffer.hpp); hybridep or ncclep have no such limit",
                       prefix, kDeepEpMaxRanks);
  }
  if (n <= kDeepEpNvlPeers) {
    if (!In(kIntranodeRanks, n)) {
      return fmt::format("{}: DeepEP's intranode kernels are instantiated for 2, 4 or 8 ranks only (DeepEP "
                         "csrc/kernels/legacy/launch.cuh)",
                         prefix);
    }
    if (peers < n) {
      return fmt::format("{}: DeepEP's intranode mode needs all {} ranks NVLink peers in one node, but a node holds {} (--gpus-per-node / "
                         "the cluster's NVLink domain is {}; DeepEP csrc/legacy/buffer.hpp NUM_MAX_NVL_PEERS)",
                         prefix, n, peers, domain);
    }
    return "";
  }
  if (n % kDeepEpNvlPeers != 0) {
    return fmt::format("{}: above 8 ranks DeepEP needs a multiple of 8 (NUM_MAX_NVL_PEERS; DeepEP csrc/legacy/buffer.hpp)", prefix);
  }
  if (!In(kInternodeNodes, n / kDeepEpNvlPeers)) {
    return fmt::format("{}: {} / 8 = {} nodes, but DeepEP's internode kernels are instantiated for 2, 3, 4, 6, 8, 12, 16, 18 or 20 "
                       "nodes only (DeepEP csrc/kernels/legacy/launch.cuh)",
                       prefix, n, n / kDeepEpNvlPeers);
  }
  if (peers != kDeepEpNvlPeers) {
    return fmt::format("{}: DeepEP's internode mode needs exactly 8 of the group's ranks per node, its NVLink peers "
                       "(NUM_MAX_NVL_PEERS; DeepEP csrc/legacy/buffer.hpp), but a node of {} ranks (--gpus-per-node / the "
                       "cluster's NVLink domain) holds {}{}",
                       prefix, domain, peers,
                       domain > kDeepEpNvlPeers ? "; only hybridep spans a multi-node NVLink domain (Megatron transformer_config.py "
                                                  "moe_flex_dispatcher_backend)"
                                                : "");
  }
  return "";
}

}  // namespace

FlexBackend FlexBackendOf(const TrainingConfig& t) {
  return t.moe_flex_dispatcher_backend.value_or(FlexBackend::kDeepEp);
}

std::string FlexBackendConventionError(const TrainingConfig& t, bool megatron) {
  if (megatron || t.moe_flex_dispatcher_backend != FlexBackend::kNcclEp) return "";
  return "--moe-flex-dispatcher-backend ncclep: Megatron-Core's backend (transformer_config.py moe_flex_dispatcher_backend); "
         "torchtitan's EP comm_backend takes standard, deepep, hybridep or minimal_async_ep "
         "(torchtitan/models/common/config_utils.py): give deepep or hybridep, or --convention megatron";
}

std::string FlexBackendLimitError(const TrainingConfig& t, int64_t ep, int64_t etp, const Machine& machine, bool megatron) {
  if (std::string refused = FlexBackendConventionError(t, megatron); !refused.empty()) return refused;
  // Megatron's flex dispatcher communicates over the ep x etp group (token_dispatcher.py).
  const int64_t n = ep * etp;
  if (t.dispatcher != Dispatcher::kDeepEp || n <= 1) return "";  // one rank: no token leaves it
  const FlexBackend backend = FlexBackendOf(t);
  const int64_t domain = machine.gpus_per_node;
  const std::string named = t.moe_flex_dispatcher_backend ? fmt::format("--moe-flex-dispatcher-backend {}", FlexBackendName(backend))
                            : megatron                      ? std::string("--dispatcher deepep (Megatron's default backend deepep)")
                                                            : std::string("--dispatcher deepep (torchtitan comm_backend deepep)");
  const std::string prefix = fmt::format("{} with --ep {}{}", named, ep, etp > 1 ? fmt::format(" x --etp {} = {} ranks", etp, n) : "");
  switch (backend) {
    case FlexBackend::kDeepEp:
      return DeepEpError(prefix, n, domain);
    case FlexBackend::kHybridEp:
      if (n > domain && n % domain != 0) {
        return fmt::format("{}: HybridEP splits a group spanning NVLink domains into domains of {} ranks (--gpus-per-node / the "
                           "cluster's NVLink domain), so {} must be a multiple of {} (deep_ep hybrid_ep_buffer.py "
                           "num_of_ranks_per_node)",
                           prefix, domain, n, domain);
      }
      return "";
    case FlexBackend::kNcclEp:
      return "";  // no DeepEP rank limits (flex_backend_limits.h)
  }
  return "";
}

}  // namespace dockyard
