// dockyard-plan's embedded default: the model, its layout, its training and its note.
#include "planner/layout/default_layout.h"

#include <string>

#include <doctest/doctest.h>

TEST_CASE("The embedded default model is DeepSeek-V3's published config") {
  // deepseek-ai/DeepSeek-V3 config.json: 61 layers, hidden 7168, 256 routed experts, top-8,
  // the first 3 layers dense (first_k_dense_replace 3).
  const dockyard::ModelSpec m = dockyard::LoadModelOrDefault("");
  CHECK(m.num_hidden_layers == 61);
  CHECK(m.hidden_size == 7168);
  CHECK(m.moe.num_experts == 256);
  CHECK(m.moe.top_k == 8);
  CHECK(m.NumMoeLayers() == 58);
  CHECK(std::string(dockyard::DefaultModelJson()).find("\"n_routed_experts\": 256") != std::string::npos);
  CHECK(dockyard::ModelSourceName("") == "<embedded testdata/hf/deepseek-v3.json>");
  CHECK(dockyard::ModelSourceName("m.json") == "m.json");
}

TEST_CASE("The default EP is 64 where the ranks allow it, else gcd(64, ranks per slice); a given EP is kept") {
  dockyard::ParallelDimsOptions d;
  d.world_size = dockyard::kDefaultWorldSize;  // 256
  dockyard::ApplyDefaultLayout(false, &d);
  CHECK(d.ep == 64);
  d.world_size = 96;  // gcd(64, 96) = 32
  dockyard::ApplyDefaultLayout(false, &d);
  CHECK(d.ep == 32);
  d.ep = 8;
  dockyard::ApplyDefaultLayout(true, &d);
  CHECK(d.ep == 8);
}

TEST_CASE("The embedded default recomputes fully unless --recompute is given") {
  dockyard::TrainingConfig t;
  REQUIRE(t.recompute == dockyard::Recompute::kNone);
  dockyard::ApplyDefaultTraining(true, &t);
  CHECK(t.recompute == dockyard::Recompute::kNone);
  dockyard::ApplyDefaultTraining(false, &t);
  CHECK(t.recompute == dockyard::Recompute::kFull);
}

TEST_CASE("The default's note names nodes of 8 only when the world divides by 8") {
  dockyard::ParallelDimsOptions d;
  d.world_size = 256;
  d.ep = 64;
  CHECK(dockyard::DefaultModelNote(d, dockyard::Recompute::kFull) ==
        "(no --model: the embedded default, DeepSeek-V3 on 256 GPUs = 32 nodes x 8, ep 64, recompute full)\n");
  d.world_size = 12;
  d.ep = 4;
  CHECK(dockyard::DefaultModelNote(d, dockyard::Recompute::kNone) ==
        "(no --model: the embedded default, DeepSeek-V3 on 12 GPUs, ep 4, recompute none)\n");
}
