// libFuzzer target: the HuggingFace config.json reader (ParseJsonText + ModelSpecFromHfConfig).
// A config that is accepted must survive the spec round trip and give a parameter inventory or
// a dockyard::Error (overflow), nothing else.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz/fuzz_util.h"
#include "planner/base/error.h"
#include "planner/model/hf_config.h"
#include "planner/model/inventory.h"
#include "planner/model/model_spec.h"
#include "planner/model/model_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  dockyard::ModelSpec spec;
  try {
    spec = dockyard::ModelSpecFromHfConfig(dockyard::ParseJsonText(text, "fuzz.json"), "fuzz.json");
  } catch (const dockyard::Error&) {
    return 0;
  }
  // The normalized spec must read back as the same spec.
  const dockyard::Json normalized = dockyard::ModelSpecToJson(spec);
  try {
    const dockyard::ModelSpec again = dockyard::ModelSpecFromJson(normalized, "fuzz.json");
    if (dockyard::ModelSpecToJson(again) != normalized) dockyard_fuzz::Fail("spec round trip changed the spec");
  } catch (const dockyard::Error& e) {
    dockyard_fuzz::Fail(std::string("normalized spec rejected: ") + e.what());
  }
  if (spec.num_hidden_layers <= 256) {
    try {
      dockyard::BuildInventory(spec);
    } catch (const dockyard::Error&) {
    }
  }
  return 0;
}
