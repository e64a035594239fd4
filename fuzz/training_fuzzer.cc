// libFuzzer target: the `training` block reader (TrainingFromJson, ValidateTraining) and the
// --pp-layer-split parser (ParseLayerSplit).
//
// Input: a JSON object read as a spec's training block; or, when the first byte is '#',
// "#<pp byte><layers byte><split text>" for ParseLayerSplit with pp, layers in [1, 64].
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <string>

#include "fuzz/fuzz_util.h"
#include "planner/base/error.h"
#include "planner/base/json_util.h"
#include "planner/model/training.h"
#include "planner/model/training_json.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  if (size >= 3 && data[0] == '#') {
    const int64_t pp = 1 + data[1] % 64, layers = 1 + data[2] % 64;
    try {
      const std::vector<int64_t> split = dockyard::ParseLayerSplit(text.substr(3), pp, layers, "--pp-layer-split");
      if (static_cast<int64_t>(split.size()) != pp) dockyard_fuzz::Fail("split has the wrong number of stages");
      int64_t total = 0;
      for (int64_t n : split) {
        if (n < 1 || n > layers) dockyard_fuzz::Fail("split stage out of range");
        total += n;
      }
      if (total != layers) dockyard_fuzz::Fail("split does not sum to the layers");
    } catch (const dockyard::Error&) {
    }
    return 0;
  }
  dockyard::TrainingConfig t;
  dockyard::Machine machine;
  try {
    const dockyard::Json json = dockyard::ParseJsonText(text, "fuzz.json");
    t = dockyard::TrainingFromJson(dockyard::JsonView(&json, "fuzz.json", "/training"));
    machine = dockyard::MachineFromTrainingJson(dockyard::JsonView(&json, "fuzz.json", "/training"));
  } catch (const dockyard::Error&) {
    return 0;
  }
  const dockyard::Json out = dockyard::TrainingToJson(t, machine);
  dockyard_fuzz::CheckFinite(out, "/training");
  try {
    const dockyard::Json back = dockyard::ParseJsonText(out.dump(), "roundtrip.json");
    const dockyard::TrainingConfig again = dockyard::TrainingFromJson(dockyard::JsonView(&back, "roundtrip.json", "/training"));
    const dockyard::Machine machine_again = dockyard::MachineFromTrainingJson(dockyard::JsonView(&back, "roundtrip.json", "/training"));
    if (dockyard::TrainingToJson(again, machine_again) != out) dockyard_fuzz::Fail("training round trip changed the block");
  } catch (const dockyard::Error& e) {
    dockyard_fuzz::Fail(std::string("written training block rejected: ") + e.what());
  }
  return 0;
}
