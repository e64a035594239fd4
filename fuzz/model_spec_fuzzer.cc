// libFuzzer target: dockyard's own model spec reader (ParseJsonText + ModelSpecFromJson), with
// the round trip ModelSpecFromJson(ModelSpecToJson(m)) == m on every accepted spec.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz/fuzz_util.h"
#include "planner/base/error.h"
#include "planner/model/inventory.h"
#include "planner/model/model_spec.h"
#include "planner/model/model_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  dockyard::ModelSpec spec;
  try {
    spec = dockyard::ModelSpecFromJson(dockyard::ParseJsonText(text, "fuzz.json"), "fuzz.json");
  } catch (const dockyard::Error&) {
    return 0;
  }
  const dockyard::Json out = dockyard::ModelSpecToJson(spec);
  try {
    const dockyard::ModelSpec again = dockyard::ModelSpecFromJson(dockyard::ParseJsonText(out.dump(), "roundtrip.json"), "roundtrip.json");
    if (dockyard::ModelSpecToJson(again) != out) dockyard_fuzz::Fail("spec round trip changed the spec");
  } catch (const dockyard::Error& e) {
    dockyard_fuzz::Fail(std::string("written spec rejected: ") + e.what());
  }
  if (spec.num_hidden_layers <= 256) {
    try {
      dockyard::BuildInventory(spec);
    } catch (const dockyard::Error&) {
    }
  }
  return 0;
}
