// Context parallelism's K/V exchange has its own phase row, cp_comm (planner/base/phase.h), beside
// the attention phase it used to be folded into; the p2p ring also runs the attention core in cp
// steps (RingCoreEfficiency).
#include <doctest/doctest.h>

#include <algorithm>

#include "planner/layout/plan.h"
#include "planner/model/model_spec.h"
#include "planner/cost/cost.h"
#include "planner/cost/gemm_efficiency.h"
#include "planner/routing/plan_routing.h"
#include "planner/model/model_file.h"

using doctest::Approx;

namespace {

// Qwen3-30B-A3B on 8 GPUs of one H100 node: cp `cp`, ep 8, seq 2048, --cp-comm-type `cp_comm`.
dockyard::CostBreakdown Simulate(int64_t cp, const std::string& cp_comm) {
  const dockyard::ModelSpec model = dockyard::LoadModel("testdata/hf/qwen3-30b-a3b.json");
  dockyard::ParallelDimsOptions d;
  d.world_size = 8;
  d.cp = cp;
  d.ep = 8;
  dockyard::TrainingConfig t;
  t.seq_len = 2048;
  t.run.cp_comm = cp_comm;
  const dockyard::Plan plan = dockyard::BuildPlan(model, d, t);
  return dockyard::SimulateStep(plan, dockyard::ClusterPreset("h100-sxm"), dockyard::SampleRoutingForPlan(plan, {}, 1));
}

// The time of phase `name` of the MoE layer in `direction`; -1 when there is no such row.
double MoePhase(const dockyard::CostBreakdown& cost, const std::string& name, const std::string& direction) {
  for (const auto& p : cost.phases) {
    if (PhaseName(p.phase) == std::string(name) && p.layer_kind == dockyard::LayerKind::kMoe && DirectionName(p.direction) == std::string(direction)) return p.time_us;
  }
  return -1.0;
}

}  // namespace

TEST_CASE("cp_comm: the Ulysses all-to-alls of a cp 2 layout are their own phase row, forward and backward") {
  const dockyard::CostBreakdown a2a = Simulate(2, "a2a");
  // T = 2048 / cp 2 = 1024 tokens per rank; Q and O 32 heads x (128 + 128), K and V 2 x 4 x 128:
  // 16384 + 1024 = 17408 BF16 elements per token, 1024 x 17408 x 2 = 35,651,584 bytes; half of it
  // leaves the rank over NVLink (cp group inside the node): 3 us + 17,825,792 / 370e3 B/us
  // = 3 + 48.178 = 51.178 us (network.h CpAllToAllUs), the same again in the backward.
  CHECK(MoePhase(a2a, "cp_comm", "forward") == Approx(51.178).epsilon(1e-4));
  CHECK(MoePhase(a2a, "cp_comm", "backward") == Approx(51.178).epsilon(1e-4));
  // The attention rows differ by how the core runs: the all-to-all's core sees the whole
  // sequence (heads / cp of them), the ring's runs cp 2 steps over the local 1024 tokens, 512
  // attended keys per step (gemm_efficiency.h RingCoreEfficiency), and each step after the first
  // rescales the fp32 output and LSE (forward: 8 x 1024 x 32 x (128 + 1) B) or accumulates dq
  // (backward: 8 x 1024 x 32 x 128 B) at 0.70 of 3350 GB/s, with one more flash kernel and the
  // correction kernel launched (2 x 2 us). Core: 2 x 1024 x 1024 x 32 x 256 FLOP forward, 2.5x
  // backward, at 989 TFLOP/s.
  const dockyard::CostBreakdown p2p = Simulate(2, "p2p");
  const dockyard::ComputeKnobs kn = dockyard::ClusterPreset("h100-sxm").knobs.compute;
  const double core = 2.0 * 1024 * 1024 * 32 * 256, peak = 989e6;
  for (int pass = 0; pass < 2; ++pass) {
    const bool bwd = pass == 1;
    const std::string dir = bwd ? "backward" : "forward";
    const double flops = core * (bwd ? 2.5 : 1.0);
    const double ring = flops / (peak * dockyard::RingCoreEfficiency(128, 2048, 2, bwd, kn));
    const double whole = flops / (peak * dockyard::FlashAttentionEfficiency(128, 2048, true, bwd, kn));
    const double bytes = bwd ? 8.0 * 1024 * 32 * 128 : 8.0 * 1024 * 32 * 129;
    const double correction = std::max(bytes / (3350e3 * 0.70), 5.0);
    CHECK(MoePhase(p2p, "attention", dir) - MoePhase(a2a, "attention", dir) == Approx(ring - whole + correction + 2 * 2.0).epsilon(1e-6));
  }
  CHECK(MoePhase(p2p, "cp_comm", "forward") != Approx(MoePhase(a2a, "cp_comm", "forward")));
  // The layer is still the sum of its rows: the layers differ by their cp_comm and attention rows.
  const double diff = MoePhase(a2a, "cp_comm", "forward") + MoePhase(a2a, "cp_comm", "backward") - MoePhase(p2p, "cp_comm", "forward") -
                      MoePhase(p2p, "cp_comm", "backward") + MoePhase(a2a, "attention", "forward") + MoePhase(a2a, "attention", "backward") -
                      MoePhase(p2p, "attention", "forward") - MoePhase(p2p, "attention", "backward");
  CHECK(a2a.moe_layer_us - p2p.moe_layer_us == Approx(diff).epsilon(1e-9));
  // It is on the critical path by its share.
  bool on_path = false;
  for (const auto& n : a2a.critical_path) on_path = on_path || n == "cp_comm";
  CHECK(on_path);
}

TEST_CASE("cp_comm: no row without context parallelism") {
  const dockyard::CostBreakdown cp1 = Simulate(1, "a2a");
  CHECK(MoePhase(cp1, "cp_comm", "forward") == -1.0);
  CHECK(MoePhase(cp1, "attention", "forward") > 0.0);
  for (const auto& n : cp1.critical_path) CHECK(n != "cp_comm");
}
