// libFuzzer target: the torchtitan job-config reader (ImportTorchtitanConfig: a JSON dump, a TOML job
// file through toml++, or a file of command-line overrides), i.e. what `--from-torchtitan FILE` does
// with an untrusted file before planning, with Qwen3-30B-A3B as --model (testdata/hf, read from the
// working directory: the repository root under tools/run_fuzz.sh and in the replay test).
//
// Input: the file's text.
//
// Checked: an input is accepted or refused with a dockyard::Error (fuzz_util.h); every flag read is
// a "--" flag that names where it came from; a --pp-layer-split read sums to the model's layers.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <sstream>
#include <string>

#include "fuzz/fuzz_util.h"
#include "planner/base/error.h"
#include "planner/frameworks/framework_config.h"
#include "planner/frameworks/torchtitan_config.h"
#include "planner/model/model_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const dockyard::ModelSpec model = dockyard::LoadModel("testdata/hf/qwen3-30b-a3b.json");
  const std::string text(reinterpret_cast<const char*>(data), size);
  dockyard::FrameworkConfig config;
  try {
    config = dockyard::ImportTorchtitanConfig(text, "fuzz.json", model, int64_t{64});
  } catch (const dockyard::Error&) {
    return 0;
  }
  for (const dockyard::ConfigFlag& f : config.flags) {
    if (f.flag.rfind("--", 0) != 0) dockyard_fuzz::Fail("a flag without '--': " + f.flag);
    if (f.from.empty()) dockyard_fuzz::Fail("flag " + f.flag + " names no source");
    if (f.flag == "--pp-layer-split") {
      std::stringstream s(f.value);
      int64_t total = 0;
      for (std::string part; std::getline(s, part, ',');) total += std::stoll(part);
      if (total != model.num_hidden_layers) dockyard_fuzz::Fail("--pp-layer-split " + f.value + " does not sum to the layers");
    }
  }
  (void)dockyard::FrameworkConfigText(config);
  return 0;
}
