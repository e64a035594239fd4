// Helpers of the frameworks' unit tests (torchtitan_config_test, megatron_bridge_config_test).
#pragma once

#include <string>

#include "planner/frameworks/framework_config.h"
#include "planner/model/model_file.h"
#include "planner/model/model_spec.h"

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

}  // namespace dockyard::testing
