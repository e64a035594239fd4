// Model files: dockyard's own JSON model spec (docs/model-spec.md, with its optional `training`
// block) and LoadModel, which reads either that or a HuggingFace config.json (hf_config.h).
#pragma once

#include <string>

#include "planner/base/json_util.h"
#include "planner/model/model_spec.h"

namespace dockyard {

// dockyard's own model spec format (docs/model-spec.md). Version key: "dockyard_model_spec": 1.
constexpr int kModelSpecVersion = 1;
Json ModelSpecToJson(const ModelSpec& spec);
ModelSpec ModelSpecFromJson(const Json& json, const std::string& file);

// True when a parsed JSON object is a dockyard model spec rather than an HF config.
bool IsDockyardModelSpec(const Json& json);

// Reads a model from a file: dockyard spec or HF config.json, detected from its content.
ModelSpec LoadModel(const std::string& path);

}  // namespace dockyard
