// The rank limits of the deepep (Megatron flex) dispatcher's backends (dispatcher.h FlexBackend):
// one rule, called by BuildPlan (plan, check, simulate), the search's fast path
// (planner/search/layout_eval_rules.cc) and so by `search --explain`.
//
// Megatron's flex dispatcher (megatron/core/transformer/moe/token_dispatcher.py
// MoEFlexTokenDispatcher) builds its communication buffer over the expert tensor-and-expert
// parallel group, N = ep x etp consecutive ranks (the sparse mesh puts etp innermost, then ep;
// planner/layout/mesh.h), so the limits below hold for N (= ep when etp is 1).
//
//   deepep    DeepEP's normal-mode Buffer (csrc/legacy/buffer.hpp) asserts N <= NUM_MAX_NVL_PEERS
//             (8) or N a multiple of 8, and at most 8 x 20 = 160 ranks (NUM_MAX_RDMA_PEERS 20);
//             rank r is NVLink peer r % 8 of RDMA rank r / 8, so above 8 ranks every node holds
//             exactly 8 of the group's ranks (its NVLink peers) and below 8 the whole group is
//             one node's. Its kernels are instantiated (csrc/kernels/legacy/launch.cuh
//             SWITCH_RANKS / SWITCH_RDMA_RANKS) for 2, 4 or 8 ranks inside a node and for 2, 3, 4,
//             6, 8, 12, 16, 18 or 20 nodes (N / 8). N = 1 dispatches nothing (no limit).
//   hybridep  HybridEP (deep_ep hybrid_ep_buffer.py HybridEPBuffer, csrc/hybrid_ep config.cuh
//             MAX_NUM_OF_RANKS_PER_NODE 72): the group is split into NVLink domains of
//             num_of_ranks_per_node ranks, so a group spanning more than one domain must be a
//             multiple of the ranks per domain; the only backend that spans a multi-node NVLink
//             domain (e.g. GB200 NVL72).
//   ncclep    NCCL's EP all-to-all: no DeepEP rank limits (Megatron transformer_config.py lists
//             none for it).
#pragma once

#include <cstdint>
#include <string>

#include "planner/model/machine.h"
#include "planner/model/training.h"

namespace dockyard {

// The backend a training runs the deepep dispatcher with: its moe_flex_dispatcher_backend, else
// Megatron's default "deepep" (transformer_config.py).
FlexBackend FlexBackendOf(const TrainingConfig& t);

// Why the deepep dispatcher's backend cannot run an EP group of `ep` x `etp` ranks on
// `machine` (machine.gpus_per_node: ranks per node, that is per NVLink domain: --gpus-per-node,
// or a cluster's NVLink domain, planner/cost/network.h MachineOf; e.g. 8 on an HGX node, 72 on
// gb200-nvl72); empty when it can, or when the dispatcher is not deepep. The message names
// --moe-flex-dispatcher-backend, --ep (and --etp when > 1), the value, the limit and the source
// file, e.g. "--moe-flex-dispatcher-backend deepep with --ep 256: DeepEP's normal-mode Buffer takes
// at most 160 ranks (8 NVLink peers x 20 RDMA nodes; DeepEP csrc/legacy/buffer.hpp); ...".
// Under a torchtitan convention (`megatron` false) the backends are torchtitan's EP comm_backend
// "deepep" (the default of --dispatcher deepep there, named so) and "hybridep"
// (torchtitan/models/common/config_utils.py: standard, deepep, hybridep, minimal_async_ep), with the
// same limits; ncclep, Megatron-Core's only, is refused whatever the dispatcher.
std::string FlexBackendLimitError(const TrainingConfig& t, int64_t ep, int64_t etp, const Machine& machine, bool megatron = true);

// The part of FlexBackendLimitError that needs no layout: ncclep under a torchtitan convention
// (`megatron` false); empty otherwise. The search calls it before it enumerates, so that a backend
// its convention refuses is an error, not every deepep candidate silently invalid.
std::string FlexBackendConventionError(const TrainingConfig& t, bool megatron);

}  // namespace dockyard
