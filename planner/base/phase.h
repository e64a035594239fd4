// The phases of a training step, one vocabulary for what the cost model predicts (planner/cost/cost.h)
// and what dockyard-run measures (runtime/pipeline.h, runtime/replay.h): predicted and measured
// rows of a report are joined by these names.
#pragma once

#include <cstdint>

namespace dockyard {

enum class Phase : uint8_t {
  kAttention,      // attention block: projections and the flash-attention core
  kTpComm,         // tensor/sequence-parallel all-gathers and reduce-scatters
  kRouter,         // router GEMM, softmax/sigmoid, top-k
  kPermute,        // rows sorted by expert before dispatch
  kDispatch,       // EP all-to-all (or the deredundency all-gather + all-to-all) of the routed rows
  kGroupedGemm,    // the routed experts' SwiGLU MLP
  kUnpermute,      // rows back in token order, weighted by the router
  kCombine,        // EP all-to-all back (or all-to-all + reduce-scatter)
  kSharedExperts,  // the shared experts' MLP
  kFsdpComm,       // FSDP all-gathers and reduce-scatters of a layer
  kDenseMlp,       // a dense layer's MLP
  kLmHead,         // final norm, lm_head and the loss
  kDpStepComm,     // data-parallel collectives at the end of the step
  kOptimizer,      // the optimizer step
  kCpComm,         // context parallelism's K/V exchange: the ring's exposed send/recv or the Ulysses all-to-alls (cp > 1 only)
  kEmbedding,      // the input embedding's backward on the first stage (its gradient table zeroed, scattered into, accumulated)
  kWeightGen,      // dockyard-run only: generating the expert weights block by block (not a training phase)
  kCount
};

// "attention", "tp_comm", "router", ... "cp_comm", "embedding", "weight_gen": the names reports use.
inline const char* PhaseName(Phase phase) {
  static constexpr const char* kNames[static_cast<int>(Phase::kCount)] = {
      "attention",      "tp_comm",   "router",    "permute", "dispatch",     "grouped_gemm", "unpermute", "combine",
      "shared_experts", "fsdp_comm", "dense_mlp", "lm_head", "dp_step_comm", "optimizer",    "cp_comm",   "embedding", "weight_gen"};
  return kNames[static_cast<int>(phase)];
}

// The kind of layer a phase's time belongs to: an MoE layer's or a dense layer's ("moe", "dense").
enum class LayerKind : uint8_t { kMoe, kDense };
inline const char* LayerKindName(LayerKind kind) { return kind == LayerKind::kMoe ? "moe" : "dense"; }

// The pass a phase's time belongs to ("forward", "backward"; a recomputed forward counts in the backward).
enum class Direction : uint8_t { kForward, kBackward };
inline const char* DirectionName(Direction direction) { return direction == Direction::kForward ? "forward" : "backward"; }

}  // namespace dockyard
