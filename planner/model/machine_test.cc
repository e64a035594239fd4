// Machine: the node size and budget read from a training block, written back, checked, and set by flags.
#include "planner/model/machine.h"

#include <string>

#include <doctest/doctest.h>

#include "planner/base/error.h"
#include "planner/base/json_util.h"
#include "planner/model/training.h"
#include "planner/model/training_overrides.h"
#include "planner/model/training_json.h"

using dockyard::Error;
using dockyard::Json;
using dockyard::JsonView;
using dockyard::Machine;

namespace {

Machine FromBlock(const std::string& text) {
  const Json j = dockyard::ParseJsonText(text, "spec.json");
  return dockyard::MachineFromTrainingJson(JsonView(&j, "spec.json", "/training"));
}

}  // namespace

TEST_CASE("A training block's gpus_per_node and gpu_memory_gib land in the machine; absent keys keep 8 GPUs and no budget") {
  const Machine given = FromBlock(R"({"gpus_per_node": 4, "gpu_memory_gib": 80, "seq_len": 2048})");
  CHECK(given.gpus_per_node == 4);
  CHECK(given.gpu_memory_gib == 80.0);
  const Machine none = FromBlock(R"({"seq_len": 2048})");
  CHECK(none.gpus_per_node == 8);
  CHECK(none.gpu_memory_gib == 0.0);
  // The training reader accepts the two keys (they are not unknown) and leaves them to the machine.
  const Json j = dockyard::ParseJsonText(R"({"gpus_per_node": 4, "gpu_memory_gib": 80, "seq_len": 2048})", "spec.json");
  CHECK(dockyard::TrainingFromJson(JsonView(&j, "spec.json", "/training")).seq_len == 2048);
}

TEST_CASE("Out-of-range machine values name the field as JSON or as the flag spells it") {
  CHECK_THROWS_WITH_AS(FromBlock(R"({"gpu_memory_gib": -80})"),
                       doctest::Contains("/training/gpu_memory_gib: must be a finite number in [0, 1e6] GiB, got -80"), Error);
  // JSON integers below 1 are refused by the reader (JsonView::IntOr), as the training block always did.
  CHECK_THROWS_WITH_AS(FromBlock(R"({"gpus_per_node": 0})"), "spec.json: /training/gpus_per_node: must be >= 1, got 0", Error);
  CHECK_THROWS_WITH_AS(FromBlock(R"({"gpus_per_node": 2000000})"),
                       doctest::Contains("/training/gpus_per_node: must be in [1, 2^20], got 2000000"), Error);
  dockyard::TrainingOverrides o;
  o.gpus_per_node = 0;
  CHECK_THROWS_WITH_AS(dockyard::ApplyMachineOverrides(Machine{}, o), "--gpus-per-node: must be in [1, 2^20], got 0", Error);
  o.gpus_per_node = 2;
  o.gpu_memory_gib = 40;
  const Machine m = dockyard::ApplyMachineOverrides(FromBlock(R"({"gpus_per_node": 4, "gpu_memory_gib": 80})"), o);
  CHECK(m.gpus_per_node == 2);  // the flag over the block
  CHECK(m.gpu_memory_gib == 40.0);
  CHECK(dockyard::ApplyMachineOverrides(FromBlock(R"({"gpus_per_node": 4})"), {}).gpus_per_node == 4);  // no flag: the block's
}

TEST_CASE("TrainingToJson writes the machine's keys into the training block, and the block reads back to both") {
  dockyard::TrainingConfig t;
  t.seq_len = 1024;
  Machine m;
  m.gpus_per_node = 72;
  m.gpu_memory_gib = 186;
  const Json j = dockyard::TrainingToJson(t, m);
  CHECK(j.at("gpus_per_node") == 72);
  CHECK(j.at("gpu_memory_gib") == 186.0);
  CHECK(j.at("seq_len") == 1024);
  const Json back = dockyard::ParseJsonText(j.dump(), "back.json");
  const Machine again = dockyard::MachineFromTrainingJson(JsonView(&back, "back.json", "/training"));
  CHECK(again.gpus_per_node == 72);
  CHECK(again.gpu_memory_gib == 186.0);
  CHECK(dockyard::TrainingToJson(dockyard::TrainingFromJson(JsonView(&back, "back.json", "/training")), again) == j);
}

TEST_CASE("A report's training block reads back its run settings: vpp, the Megatron-Core release, the fused cross-entropy") {
  dockyard::TrainingConfig t;
  t.run.vpp = 4;
  t.run.megatron_core_version = "0.15";
  t.run.fused_cross_entropy = true;
  t.run.cross_entropy_fusion_impl = "te";
  const Json j = dockyard::TrainingToJson(t, Machine{});
  const dockyard::TrainingConfig back = dockyard::TrainingFromJson(JsonView(&j, "report.json", "/training"));
  CHECK(back.run.vpp == 4);
  CHECK(back.run.megatron_core_version == "0.15");
  CHECK(back.run.fused_cross_entropy);
  CHECK(back.run.cross_entropy_fusion_impl == "te");
  // The same rules as the flags: TE's loss needs a release 0.12 to 0.18.
  Json bad = j;
  bad.erase("megatron_core_version");
  CHECK_THROWS_WITH_AS(dockyard::TrainingFromJson(JsonView(&bad, "report.json", "/training")),
                       doctest::Contains("Megatron-LM refuses TransformerEngine's cross-entropy from core_v0.19.0"), Error);
}

TEST_CASE("The TransformerEngine op fuser round-trips in a report's training block, written only when on, refused before 0.18") {
  dockyard::TrainingConfig t;
  CHECK_FALSE(dockyard::TrainingToJson(t, Machine{}).contains("use_transformer_engine_op_fuser"));
  t.run.use_transformer_engine_op_fuser = true;
  const Json j = dockyard::TrainingToJson(t, Machine{});
  CHECK(j["use_transformer_engine_op_fuser"] == true);
  CHECK(dockyard::TrainingFromJson(JsonView(&j, "report.json", "/training")).run.use_transformer_engine_op_fuser);
  Json old = j;
  old["megatron_core_version"] = "0.17.1";
  CHECK_THROWS_WITH_AS(dockyard::TrainingFromJson(JsonView(&old, "report.json", "/training")),
                       doctest::Contains("/training/megatron_core_version 0.17.1: Megatron-Core has TransformerEngine's op fuser"), Error);
  old["megatron_core_version"] = "0.18";
  CHECK(dockyard::TrainingFromJson(JsonView(&old, "report.json", "/training")).run.use_transformer_engine_op_fuser);
}

TEST_CASE("The flex dispatcher's SMs and CUDA_DEVICE_MAX_CONNECTIONS round-trip, written only when set, bad values named") {
  dockyard::TrainingConfig t;
  const Json plain = dockyard::TrainingToJson(t, Machine{});
  CHECK_FALSE(plain.contains("moe_flex_dispatcher_num_sms"));
  CHECK_FALSE(plain.contains("cuda_device_max_connections"));  // CUDA's 8
  t.run.moe_flex_dispatcher_num_sms = 16;
  t.run.cuda_device_max_connections = 1;
  const Json j = dockyard::TrainingToJson(t, Machine{});
  CHECK(j["moe_flex_dispatcher_num_sms"] == 16);
  CHECK(j["cuda_device_max_connections"] == 1);
  const dockyard::TrainingConfig back = dockyard::TrainingFromJson(JsonView(&j, "report.json", "/training"));
  CHECK(back.run.moe_flex_dispatcher_num_sms == 16);
  CHECK(back.run.cuda_device_max_connections == 1);
  CHECK(dockyard::TrainingFromJson(JsonView(&plain, "report.json", "/training")).run.cuda_device_max_connections == 8);
  Json bad = j;
  bad["cuda_device_max_connections"] = 33;
  CHECK_THROWS_WITH_AS(dockyard::TrainingFromJson(JsonView(&bad, "report.json", "/training")),
                       doctest::Contains("/training/cuda_device_max_connections: CUDA_DEVICE_MAX_CONNECTIONS is in [1, 32], got 33"), Error);
  bad = j;
  bad["moe_flex_dispatcher_num_sms"] = 0;
  CHECK_THROWS_WITH_AS(dockyard::TrainingFromJson(JsonView(&bad, "report.json", "/training")),
                       doctest::Contains("/training/moe_flex_dispatcher_num_sms"), Error);
}

TEST_CASE("The step end's settings round-trip, written only when not the default, and a bad value names its key") {
  dockyard::TrainingConfig t;
  CHECK_FALSE(dockyard::TrainingToJson(t, Machine{}).contains("clip_grad"));
  CHECK_FALSE(dockyard::TrainingToJson(t, Machine{}).contains("check_for_nan_in_grad"));
  t.run.clip_grad = 0.0;
  t.run.check_for_nan_in_grad = false;
  const Json j = dockyard::TrainingToJson(t, Machine{});
  CHECK(j.at("clip_grad") == 0.0);
  CHECK(j.at("check_for_nan_in_grad") == false);
  const dockyard::TrainingConfig back = dockyard::TrainingFromJson(JsonView(&j, "report.json", "/training"));
  CHECK(back.run.clip_grad == 0.0);
  CHECK_FALSE(back.run.check_for_nan_in_grad);
  Json bad = j;
  bad["clip_grad"] = -1.0;
  CHECK_THROWS_WITH_AS(dockyard::TrainingFromJson(JsonView(&bad, "report.json", "/training")),
                       doctest::Contains("report.json: /training/clip_grad: must be a finite number >= 0"), Error);
  bad = j;
  bad["check_for_nan_in_grad"] = "no";
  CHECK_THROWS_WITH_AS(dockyard::TrainingFromJson(JsonView(&bad, "report.json", "/training")),
                       doctest::Contains("check_for_nan_in_grad"), Error);
}
