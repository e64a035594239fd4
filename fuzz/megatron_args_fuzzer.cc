// libFuzzer target: the Megatron-LM argument-file reader (ImportMegatronArgs, which splits the
// words as bash would with ReadMegatronArgs) and the model it describes (MegatronModel without
// --model), i.e. what `--from-megatron FILE` does with an untrusted file before planning.
//
// Input: the file's text.
//
// Checked: an input is accepted or refused with a dockyard::Error (fuzz_util.h); every flag read
// is a "--" flag that names the key it came from; every key read is one of Megatron-LM's
// (MegatronArgTable); a model built from it has positive sizes and one MoE flag per layer (it has
// passed ValidateModelSpec: MegatronModel calls it).
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "fuzz/fuzz_util.h"
#include "planner/base/error.h"
#include "planner/frameworks/framework_config.h"
#include "planner/frameworks/megatron_args.h"
#include "planner/model/model_spec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  dockyard::FrameworkConfig config;
  try {
    config = dockyard::ImportMegatronArgs(text, "fuzz.sh");
  } catch (const dockyard::Error&) {
    return 0;
  }
  for (const dockyard::ConfigArg& a : config.args)
    if (dockyard::MegatronArgTable().count(a.key) == 0) dockyard_fuzz::Fail("read a key Megatron-LM does not have: " + a.key);
  for (const dockyard::ConfigFlag& f : config.flags) {
    if (f.flag.rfind("--", 0) != 0) dockyard_fuzz::Fail("a flag without '--': " + f.flag);
    if (f.from.empty()) dockyard_fuzz::Fail("flag " + f.flag + " names no key");
  }
  (void)dockyard::FrameworkConfigText(config);
  try {
    const dockyard::ModelSpec m = dockyard::MegatronModel(config, std::nullopt);
    if (m.hidden_size <= 0 || m.num_hidden_layers <= 0 || m.vocab_size <= 0) dockyard_fuzz::Fail("a model without sizes");
    if (static_cast<int64_t>(m.moe_layers.size()) != m.num_hidden_layers) dockyard_fuzz::Fail("moe_layers is not one per layer");
  } catch (const dockyard::Error&) {
  }
  return 0;
}
