// torchtitan's per-layer selective activation checkpointing (selective_ac_option N): which blocks
// are checkpointed, the setting's rules, and memory and time by hand on the tiny model.
#include <doctest/doctest.h>

#include "planner/accounting/memory.h"
#include "planner/base/error.h"
#include "planner/model/recompute.h"
#include "planner/cost/cost.h"
#include "planner/model/training_json.h"
#include "tests/test_models.h"
#include "tests/tiny_plan.h"

using dockyard::Recompute;
using dockyard::TrainingConfig;

namespace {

// TinyMixtral with `layers` MoE layers (tests/tiny_plan.h).
dockyard::ModelSpec Tiny(int64_t layers) {
  return dockyard::testing::TinyMixtralLayers(layers);
}

TrainingConfig Sac(const std::string& option) {
  TrainingConfig t;
  t.recompute = Recompute::kSelective;
  t.selective_ac_option = option;
  return t;
}

// One GPU, 16-token sequences, FSDP (nothing to shard on one rank).
dockyard::Plan OneGpu(TrainingConfig t, int64_t layers = 4, int64_t pp = 1) {
  dockyard::ParallelDimsOptions d;
  d.world_size = pp;
  d.pp = pp;
  t.seq_len = 16;
  return dockyard::BuildPlan(Tiny(layers), d, t);
}

}  // namespace

TEST_CASE("Every N-th block of a rank is checkpointed, counted per rank from 1") {
  // torchtitan _apply_layer_sac: _layer_sac_count += 1 per block; checkpointed when count % N == 0.
  CHECK(dockyard::LayerSacCheckpointed({0, 0, 0, 0}, 2) == std::vector<bool>{false, true, false, true});
  CHECK(dockyard::LayerSacCheckpointed({0, 0, 0, 0}, 1) == std::vector<bool>{true, true, true, true});
  CHECK(dockyard::LayerSacCheckpointed({0, 0, 0, 0}, 5) == std::vector<bool>{false, false, false, false});
  // Two ranks: the count restarts on each (each process wraps only its own blocks).
  CHECK(dockyard::LayerSacCheckpointed({0, 0, 0, 1, 1}, 2) == std::vector<bool>{false, true, false, false, true});
  CHECK(dockyard::LayerSacEvery(Sac("2")) == 2);
  CHECK(dockyard::LayerSacEvery(Sac("0")) == 1);  // torchtitan: `not ac_freq` checkpoints every block
  CHECK(dockyard::LayerSacEvery(Sac("")) == 0);
  // Whole blocks: no Megatron module set on top.
  CHECK_FALSE(dockyard::RecomputeSetOf(Sac("2")).layernorm);
  CHECK(dockyard::RecomputeSetOf(Sac("")).layernorm);
}

TEST_CASE("selective_ac_option: digits, recompute selective, no module list, torchtitan convention") {
  CHECK_THROWS_WITH_AS(dockyard::ValidateTraining(Sac("two"), "--"),
                       doctest::Contains("--selective-ac-option: \"two\" is not a layer frequency"), dockyard::Error);
  CHECK_THROWS_WITH_AS(dockyard::ValidateTraining(Sac("-1"), "/training/"), doctest::Contains("/training/selective_ac_option: \"-1\""),
                       dockyard::Error);
  TrainingConfig full = Sac("2");
  full.recompute = Recompute::kFull;
  CHECK_THROWS_WITH_AS(dockyard::ValidateTraining(full, "--"), doctest::Contains("applies with recompute selective"), dockyard::Error);
  TrainingConfig modules = Sac("2");
  modules.recompute_modules = {"moe"};
  CHECK_THROWS_WITH_AS(dockyard::ValidateTraining(modules, "--"), doctest::Contains("cannot be combined"), dockyard::Error);
  dockyard::ParallelDimsOptions d;
  d.world_size = 1;
  d.convention = dockyard::Convention::kMegatron;
  CHECK_THROWS_WITH_AS(dockyard::BuildPlan(Tiny(4), d, Sac("2")), doctest::Contains("needs --convention torchtitan"), dockyard::Error);
  // JSON: the training block round-trips the key.
  const dockyard::Json j = dockyard::TrainingToJson(Sac("3"), dockyard::Machine{});
  const TrainingConfig back = dockyard::TrainingFromJson(dockyard::JsonView(&j, "spec.json", "/training"));
  CHECK(back.selective_ac_option == "3");
}

TEST_CASE("Memory: checkpointed layers keep their input, the others every tensor") {
  // Per MoE layer of the tiny model at 16 tokens (memory_test.cc): 36,480 B of activations; a layer
  // input 16 x 64 x 2 = 2,048 B; the embedding output 2,048 B; fp32 logits 16 x 1000 x 4 = 64,000 B.
  auto act = [](const dockyard::Plan& p) { return dockyard::ComputeMemory(p).stages[0].worst.activations_bytes; };
  // N = 2 on 4 layers: layers 2 and 4 checkpointed -> 2 kept layers + 2 inputs + one rebuilt layer.
  CHECK(act(OneGpu(Sac("2"))) == 2 * 36480 + 2 * 2048 + 36480 + 2048 + 64000);
  const auto by_role = dockyard::ComputeMemory(OneGpu(Sac("2"))).stages[0].worst.activations_by_role;
  CHECK(by_role.at("checkpoints") == 2 * 2048);
  // N = 1 is full recompute, N larger than the stage's layers is none.
  TrainingConfig full;
  full.recompute = Recompute::kFull;
  CHECK(act(OneGpu(Sac("1"))) == 4 * 2048 + 36480 + 2048 + 64000);
  CHECK(act(OneGpu(Sac("1"))) == act(OneGpu(full)));
  CHECK(act(OneGpu(Sac("5"))) == 4 * 36480 + 2048 + 64000);
  CHECK(act(OneGpu(Sac("5"))) == act(OneGpu(TrainingConfig{})));
  CHECK(dockyard::ComputeMemory(OneGpu(Sac("5"))).stages[0].worst.activations_by_role.count("checkpoints") == 0);
  // pp 2 (2 + 2 layers), N = 3: each rank counts its own 2 blocks, none reaches 3 -> nothing
  // checkpointed; on one rank N = 3 checkpoints layer 3.
  CHECK(dockyard::ActivationBytesPerMicrobatch(OneGpu(Sac("3"), 4, 2), dockyard::ComputeWorkload(OneGpu(Sac("3"), 4, 2)), 1) ==
        dockyard::ActivationBytesPerMicrobatch(OneGpu({}, 4, 2), dockyard::ComputeWorkload(OneGpu({}, 4, 2)), 1));
  CHECK(act(OneGpu(Sac("3"))) == 3 * 36480 + 2048 + 36480 + 2048 + 64000);
}

TEST_CASE("Time: checkpointed layers re-run their forward in backward, the others do not") {
  // World 4, EP 4, DDP (no FSDP traffic in the layers), 1024-token sequences, uniform routing.
  const dockyard::ClusterSpec c = dockyard::ClusterPreset("h100-sxm");
  const auto routing = dockyard::SampleRouting({}, 8, 2, 4, 1024, 2);
  auto run = [&](TrainingConfig t) {
    dockyard::ParallelDimsOptions d;
    d.world_size = 4;
    d.ep = 4;
    t.seq_len = 1024;
    t.dp_sharding = dockyard::DpSharding::kDdp;
    return dockyard::SimulateStep(dockyard::BuildPlan(Tiny(4), d, t), c, routing);
  };
  TrainingConfig full_t;
  full_t.recompute = Recompute::kFull;
  const auto none = run({}), full = run(full_t), half = run(Sac("2"));
  // Full recomputation adds each layer's forward once more to its backward: the sum of the forward
  // phases (no shared experts, tp 1: attention, tp_comm, router, permute, dispatch, grouped GEMM,
  // unpermute, combine).
  double fwd = 0;
  for (const auto& p : none.phases)
    if (p.direction == dockyard::Direction::kForward && p.phase != dockyard::Phase::kFsdpComm) fwd += p.time_us;
  CHECK(full.moe_layer_us - none.moe_layer_us == doctest::Approx(fwd));
  // N = 2: layers 2 and 4 at the full-recompute time, layers 1 and 3 at none's.
  CHECK(half.layer_sac_every == 2);
  CHECK(half.checkpointed_moe_layer_us == full.moe_layer_us);
  CHECK(half.moe_layer_us == none.moe_layer_us);
  CHECK(half.stage_microbatch_us - none.stage_microbatch_us == doctest::Approx(2 * fwd));
  CHECK(half.stage_microbatch_us ==
        doctest::Approx(2 * none.moe_layer_us + 2 * full.moe_layer_us + (none.stage_microbatch_us - 4 * none.moe_layer_us)));
  // N = 1 is full recomputation, a large N none -- exactly.
  CHECK(run(Sac("1")).step_time_us == full.step_time_us);
  CHECK(run(Sac("1")).dominant_phase == full.dominant_phase);
  CHECK(run(Sac("9")).step_time_us == none.step_time_us);
  // The reports only grow the opt-in keys.
  CHECK_FALSE(dockyard::CostToJson(none).contains("layer_sac_every"));
  CHECK(dockyard::CostToJson(half).at("checkpointed_moe_layer_us").get<double>() == full.moe_layer_us);
}
