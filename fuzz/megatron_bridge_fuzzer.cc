// libFuzzer target: the Megatron-Bridge reader (ImportMegatronBridgeConfig: a run_config.yaml dump
// or an overrides YAML through yaml-cpp, each key translated to its Megatron-LM argument and read by
// ImportMegatronArgs) and the model it plans (MegatronModel), i.e. what `--from-megatron-bridge FILE`
// does with an untrusted file, with Qwen3-30B-A3B as --model (testdata/hf, read from the working
// directory: the repository root under tools/run_fuzz.sh and in the replay test).
//
// Input: the file's text.
//
// Checked: an input is accepted or refused with a dockyard::Error (fuzz_util.h); every flag read is
// a "--" flag that names where it came from.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "fuzz/fuzz_util.h"
#include "planner/base/error.h"
#include "planner/frameworks/framework_config.h"
#include "planner/frameworks/megatron_args.h"
#include "planner/frameworks/megatron_bridge_config.h"
#include "planner/model/model_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const dockyard::ModelSpec model = dockyard::LoadModel("testdata/hf/qwen3-30b-a3b.json");
  const std::string text(reinterpret_cast<const char*>(data), size);
  dockyard::FrameworkConfig config;
  try {
    config = dockyard::ImportMegatronBridgeConfig(text, "fuzz.yaml", model);
  } catch (const dockyard::Error&) {
    return 0;
  }
  for (const dockyard::ConfigFlag& f : config.flags) {
    if (f.flag.rfind("--", 0) != 0) dockyard_fuzz::Fail("a flag without '--': " + f.flag);
    if (f.from.empty()) dockyard_fuzz::Fail("flag " + f.flag + " names no source");
  }
  (void)dockyard::FrameworkConfigText(config);
  try {
    (void)dockyard::MegatronModel(config, model);
  } catch (const dockyard::Error&) {
  }
  return 0;
}
