// Helpers of the frameworks' unit tests (torchtitan_config_test, megatron_bridge_config_test,
// megatron_args_test).
#pragma once

#include <string>

#include "planner/frameworks/framework_config.h"
#include "planner/layout/parallel_dims.h"
#include "planner/model/model_file.h"
#include "planner/model/model_spec.h"
#include "planner/model/training.h"

namespace dockyard::testing {

// testdata/hf/qwen3-30b-a3b.json, read once.
inline const ModelSpec& Qwen() {
  static const ModelSpec m = LoadModel("testdata/hf/qwen3-30b-a3b.json");
  return m;
}

// The value `config` sets for `flag` and where it came from, or "<absent>".
inline std::string FlagValue(const FrameworkConfig& config, const std::string& flag) {
  const ConfigFlag* f = config.FindFlag(flag);
  return f ? f->value : "<absent>";
}
inline std::string FlagFrom(const FrameworkConfig& config, const std::string& flag) {
  const ConfigFlag* f = config.FindFlag(flag);
  return f ? f->from : "<absent>";
}

// Megatron-convention degrees: `world_size` GPUs, `ep` expert-parallel ranks, the rest default.
inline ParallelDimsOptions MegatronDims(int64_t world_size, int64_t ep) {
  ParallelDimsOptions d;
  d.world_size = world_size;
  d.ep = ep;
  d.convention = Convention::kMegatron;
  return d;
}

// Megatron's flex dispatcher with the HybridEP backend on `num_sms` SMs (0: the backend's default).
inline TrainingConfig HybridEpTraining(int64_t num_sms) {
  TrainingConfig t;
  t.dispatcher = Dispatcher::kDeepEp;
  t.moe_flex_dispatcher_backend = FlexBackend::kHybridEp;
  t.run.moe_flex_dispatcher_num_sms = num_sms;
  return t;
}

}  // namespace dockyard::testing
