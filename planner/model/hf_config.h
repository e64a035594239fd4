// Reads HuggingFace config.json files as their publishers ship them and normalizes them into a
// ModelSpec. Dispatch is on `architectures[0]`, else `model_type` (see SupportedFamilies()).
// Llama-4 multimodal configs are read from their `text_config`.
//
// Errors (dockyard::Error): an unknown family names the file, the key and the supported
// families; a missing key names the file, its JSON pointer and the family; wrong types and
// out-of-range values name the value and the rule.
#pragma once

#include <string>

#include "planner/base/json_util.h"
#include "planner/model/model_spec.h"

namespace dockyard {

ModelSpec ModelSpecFromHfConfig(const Json& config, const std::string& file);

}  // namespace dockyard
