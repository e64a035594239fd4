// The deepep (Megatron flex) dispatcher's backends: their names and their rank limits
// (flex_backend_limits.h; DeepEP csrc/legacy/buffer.hpp and csrc/kernels/legacy/launch.cuh,
// deep_ep hybrid_ep_buffer.py, Megatron transformer_config.py moe_flex_dispatcher_backend).
#include "planner/model/flex_backend_limits.h"

#include <doctest/doctest.h>

#include "planner/base/error.h"
#include "planner/model/training_json.h"

namespace dockyard {
namespace {

TrainingConfig Flex(std::optional<FlexBackend> backend = std::nullopt) {
  TrainingConfig t;
  t.dispatcher = Dispatcher::kDeepEp;
  t.moe_flex_dispatcher_backend = backend;
  return t;
}

Machine Node(int64_t gpus_per_node) { return Machine{gpus_per_node, 0}; }

}  // namespace

TEST_CASE("the flex backends are named as Megatron names them, and an unknown one is refused with the closest") {
  CHECK(FlexBackendNames() == std::vector<std::string>{"deepep", "hybridep", "ncclep"});
  for (FlexBackend b : {FlexBackend::kDeepEp, FlexBackend::kHybridEp, FlexBackend::kNcclEp}) {
    CHECK(ParseFlexBackend(FlexBackendName(b), "--moe-flex-dispatcher-backend") == b);
  }
  CHECK_THROWS_WITH_AS(ParseFlexBackend("hybrid_ep", "--moe-flex-dispatcher-backend"),
                       "--moe-flex-dispatcher-backend: must be \"deepep\", \"hybridep\" or \"ncclep\", got \"hybrid_ep\"; did you mean "
                       "'hybridep'?",
                       Error);
  CHECK(FlexBackendOf(Flex()) == FlexBackend::kDeepEp);  // Megatron's default (transformer_config.py)
}

TEST_CASE("the backend is refused with a dispatcher other than deepep") {
  TrainingConfig t = Flex(FlexBackend::kHybridEp);
  t.dispatcher = Dispatcher::kAllToAll;  // invalid: the backend is the flex dispatcher's
  CHECK_THROWS_WITH_AS(ValidateTraining(t, "--"),
                       doctest::Contains("--moe-flex-dispatcher-backend: \"hybridep\" is set, but the backend only applies to the deepep "
                                         "dispatcher"),
                       Error);
  CHECK_NOTHROW(ValidateTraining(Flex(FlexBackend::kHybridEp), "--"));
}

TEST_CASE("the training block round-trips the backend and names deepep's default beside the dispatcher") {
  const Json written = TrainingToJson(Flex(FlexBackend::kNcclEp), Machine{});
  CHECK(written.at("moe_flex_dispatcher_backend") == "ncclep");
  CHECK(TrainingFromJson(JsonView(&written, "spec.json", "/training")).moe_flex_dispatcher_backend == FlexBackend::kNcclEp);
  CHECK(TrainingToJson(Flex(), Machine{}).at("moe_flex_dispatcher_backend") == "deepep");
  CHECK_FALSE(TrainingToJson(TrainingConfig{}, Machine{}).contains("moe_flex_dispatcher_backend"));  // all_to_all: no backend
}

TEST_CASE("DeepEP refuses more than 160 ranks: DeepSeek-V3 at ep 256, Kimi-K2 at ep 192") {
  // 160 = NUM_MAX_NVL_PEERS 8 x NUM_MAX_RDMA_PEERS 20 (DeepEP csrc/legacy/buffer.hpp).
  const std::string e256 = FlexBackendLimitError(Flex(), 256, 1, Node(8));
  CHECK(e256.find("--dispatcher deepep (Megatron's default backend deepep) with --ep 256") == 0);
  CHECK(e256.find("at most 160 ranks") != std::string::npos);
  CHECK(e256.find("csrc/legacy/buffer.hpp") != std::string::npos);
  CHECK(FlexBackendLimitError(Flex(FlexBackend::kDeepEp), 192, 1, Node(8)).find("with --ep 192: DeepEP's normal-mode Buffer takes at most 160") !=
        std::string::npos);
  // 160 itself is 20 nodes of 8, an instantiated count (launch.cuh).
  CHECK(FlexBackendLimitError(Flex(), 160, 1, Node(8)).empty());
}

TEST_CASE("DeepEP refuses a node count its internode kernels are not instantiated for: ep 40 = 5 nodes, 56 = 7, 112 = 14") {
  // launch.cuh instantiates 2, 3, 4, 6, 8, 12, 16, 18, 20 RDMA ranks (nodes of 8).
  CHECK(FlexBackendLimitError(Flex(), 40, 1, Node(8)).find("40 / 8 = 5 nodes, but DeepEP's internode kernels are instantiated for 2, 3, 4, "
                                                            "6, 8, 12, 16, 18 or 20 nodes only (DeepEP csrc/kernels/legacy/launch.cuh)") !=
        std::string::npos);
  CHECK(FlexBackendLimitError(Flex(), 56, 1, Node(8)).find("= 7 nodes") != std::string::npos);
  CHECK(FlexBackendLimitError(Flex(), 112, 1, Node(8)).find("= 14 nodes") != std::string::npos);
  for (int64_t ep : {16, 24, 32, 48, 64, 96, 128, 144, 160}) {  // 2, 3, 4, 6, 8, 12, 16, 18, 20 nodes
    CAPTURE(ep);
    CHECK(FlexBackendLimitError(Flex(), ep, 1, Node(8)).empty());
  }
}

TEST_CASE("DeepEP above 8 ranks needs a multiple of 8") {
  // 12 > NUM_MAX_NVL_PEERS and 12 % 8 = 4 (buffer.hpp).
  CHECK(FlexBackendLimitError(Flex(), 12, 1, Node(8)).find("above 8 ranks DeepEP needs a multiple of 8") != std::string::npos);
}

TEST_CASE("DeepEP inside a node runs 2, 4 or 8 ranks, all NVLink peers of one node") {
  for (int64_t ep : {2, 4, 8}) CHECK(FlexBackendLimitError(Flex(), ep, 1, Node(8)).empty());
  // 6 ranks: SWITCH_RANKS has no 6 (launch.cuh).
  CHECK(FlexBackendLimitError(Flex(), 6, 1, Node(8)).find("instantiated for 2, 4 or 8 ranks only") != std::string::npos);
  // Qwen3-30B on 4-GPU nodes, ep 8: two nodes of 4 NVLink peers, not one of 8.
  const std::string qwen = FlexBackendLimitError(Flex(), 8, 1, Node(4));
  CHECK(qwen.find("needs all 8 ranks NVLink peers in one node, but a node holds 4") != std::string::npos);
}

TEST_CASE("DeepEP internode needs nodes of exactly 8 NVLink peers: 4-GPU nodes and a 72-GPU NVLink domain are refused") {
  // ep 16 on 4-GPU nodes: 4 ranks of the group per node, not 8.
  CHECK(FlexBackendLimitError(Flex(), 16, 1, Node(4)).find("needs exactly 8 of the group's ranks per node") != std::string::npos);
  // gb200-nvl72: 72 ranks share NVLink; DeepEP's 8-peer nodes cannot span it, hybridep can.
  const std::string nvl72 = FlexBackendLimitError(Flex(), 64, 1, Node(72));
  CHECK(nvl72.find("a node of 72 ranks") != std::string::npos);
  CHECK(nvl72.find("holds 64; only hybridep spans a multi-node NVLink domain") != std::string::npos);
  // Inside the domain, 8 ranks are one node's NVLink peers.
  CHECK(FlexBackendLimitError(Flex(), 8, 1, Node(72)).empty());
}

TEST_CASE("the flex group is ep x etp ranks (Megatron's tp_ep group)") {
  // ep 8 x etp 2 = 16 ranks, 2 nodes of 8: runs; ep 20 x etp 2 = 40 ranks = 5 nodes: refused.
  CHECK(FlexBackendLimitError(Flex(), 8, 2, Node(8)).empty());
  CHECK(FlexBackendLimitError(Flex(), 20, 2, Node(8)).find("with --ep 20 x --etp 2 = 40 ranks: 40 / 8 = 5 nodes") != std::string::npos);
}

TEST_CASE("hybridep spans a multi-node NVLink domain, in whole domains") {
  const TrainingConfig h = Flex(FlexBackend::kHybridEp);
  CHECK(FlexBackendLimitError(h, 72, 1, Node(72)).empty());   // one domain
  CHECK(FlexBackendLimitError(h, 144, 1, Node(72)).empty());  // 144 = 2 x 72
  CHECK(FlexBackendLimitError(h, 36, 1, Node(72)).empty());   // inside one domain
  CHECK(FlexBackendLimitError(h, 256, 1, Node(8)).empty());   // 256 = 32 x 8: no 160 limit
  // 96 spans two domains but 96 % 72 = 24 (hybrid_ep_buffer.py num_of_ranks_per_node).
  CHECK(FlexBackendLimitError(h, 96, 1, Node(72)) ==
        "--moe-flex-dispatcher-backend hybridep with --ep 96: HybridEP splits a group spanning NVLink domains into domains of 72 ranks "
        "(--gpus-per-node / the cluster's NVLink domain), so 96 must be a multiple of 72 (deep_ep hybrid_ep_buffer.py "
        "num_of_ranks_per_node)");
}

TEST_CASE("ncclep has no DeepEP rank limits, and other dispatchers and ep 1 have none") {
  for (int64_t ep : {40, 192, 256}) CHECK(FlexBackendLimitError(Flex(FlexBackend::kNcclEp), ep, 1, Node(4)).empty());
  TrainingConfig a2a;
  CHECK(FlexBackendLimitError(a2a, 256, 1, Node(8)).empty());  // all_to_all
  CHECK(FlexBackendLimitError(Flex(), 1, 1, Node(8)).empty());  // one rank: nothing is dispatched
}


TEST_CASE("Under torchtitan the backends are its EP comm_backend deepep and hybridep; ncclep is Megatron's only") {
  // torchtitan/models/common/config_utils.py: comm_backend "standard", "deepep", "hybridep" or
  // "minimal_async_ep". deepep runs DeepEP's Buffer: the same 160-rank limit, named by torchtitan's backend.
  const std::string e256 = FlexBackendLimitError(Flex(), 256, 1, Node(8), /*megatron=*/false);
  CHECK(e256.find("--dispatcher deepep (torchtitan comm_backend deepep) with --ep 256: DeepEP's normal-mode Buffer takes at most 160") ==
        0);
  CHECK(FlexBackendLimitError(Flex(), 8, 1, Node(8), false).empty());
  CHECK(FlexBackendLimitError(Flex(FlexBackend::kHybridEp), 8, 1, Node(4), false).empty());  // two 4-GPU domains
  TrainingConfig a2a;
  a2a.moe_flex_dispatcher_backend = FlexBackend::kNcclEp;
  for (const TrainingConfig& t : {Flex(FlexBackend::kNcclEp), a2a}) {
    CHECK(FlexBackendLimitError(t, 8, 1, Node(8), false).find("--moe-flex-dispatcher-backend ncclep: Megatron-Core's backend") == 0);
    CHECK(FlexBackendLimitError(t, 8, 1, Node(8), true).empty());
  }
}

}  // namespace dockyard
