// The token dispatchers of expert parallelism: one vocabulary for the planner (TrainingConfig,
// memory and communication accounting, the cost model, the search) and dockyard-run (runtime/config.h).
//   all_to_all    Megatron MoEAlltoAllTokenDispatcher / torchtitan's all-to-all: each routed row
//                 goes to its expert's EP rank and back (planner/accounting/comm.h).
//   deredundency  hyper_parallel expert_parallel.py DeredundencyTokenDispatcher: ep = oep x iep, a
//                 token crosses the outer EP group once, then an all-to-all inside (comm.h).
//   deepep        Megatron flex dispatcher with DeepEP / HybridEP: once per destination node over the
//                 network, then NVLink (planner/cost/deepep.h).
//   allgather     Megatron MoEAllGatherTokenDispatcher: all-gather the tokens over EP, reduce-scatter
//                 the outputs.
#pragma once

#include <string>
#include <vector>

#include "planner/base/json_util.h"

namespace dockyard {

enum class Dispatcher { kAllToAll, kDeredundency, kDeepEp, kAllGather };

// "all_to_all", "deredundency", "deepep", "allgather" (JSON `dispatcher`, --dispatcher, reports).
const char* DispatcherName(Dispatcher d);
// Every name, in the order above (CLI11 IsMember, search spaces).
const std::vector<std::string>& DispatcherNames();
// The dispatcher spelled `name`, else throws dockyard::Error
// "{field}: must be \"all_to_all\", \"deredundency\", \"deepep\" or \"allgather\", got \"x\"; did you mean 'y'?", or for
// Megatron's spellings (--moe-token-dispatcher-type alltoall | flex) "...; Megatron's ... alltoall is dockyard's all_to_all"
// (flex: deepep, with its backend).
Dispatcher ParseDispatcher(const std::string& name, const std::string& field);

// JSON writes the name (nlohmann's to_json, found by argument-dependent lookup), never the ordinal.
void to_json(Json& j, Dispatcher d);

// The backend of Megatron's flex dispatcher (dockyard's `deepep` dispatcher), named as Megatron
// names it: `moe_flex_dispatcher_backend` in megatron/core/transformer/transformer_config.py
// (--moe-flex-dispatcher-backend; default "deepep").
//   deepep    DeepEP's normal-mode kernels (deep_ep Buffer): NVLink inside a node of 8 NVLink peers,
//             RDMA between nodes; rank limits in flex_backend_limits.h.
//   hybridep  NVIDIA's HybridEP (deep_ep hybrid_ep_buffer.py HybridEPBuffer): the one backend that
//             spans a multi-node NVLink domain (e.g. GB200 NVL72).
//   ncclep    NCCL's device-side EP all-to-all: no DeepEP rank limits.
// Their time model is today's deepep model for all three (planner/cost/deepep.h).
enum class FlexBackend { kDeepEp, kHybridEp, kNcclEp };

// "deepep", "hybridep", "ncclep" (JSON `moe_flex_dispatcher_backend`, --moe-flex-dispatcher-backend, reports).
const char* FlexBackendName(FlexBackend b);
// Every name, in the order above (CLI11 IsMember).
const std::vector<std::string>& FlexBackendNames();
// The backend spelled `name`, else throws dockyard::Error
// "{field}: must be \"deepep\", \"hybridep\" or \"ncclep\", got \"x\"; did you mean 'y'?".
FlexBackend ParseFlexBackend(const std::string& name, const std::string& field);

}  // namespace dockyard
