// dockyard-plan's embedded default: DeepSeek-V3's published config.json (testdata/hf/deepseek-v3.json,
// compiled in) on 32 nodes x 8 GPUs, FSDP over all 256 ranks and EP 64 (DeepSeek-V3's own training
// used EP 64), giving 4 experts per EP rank and efsdp 4; full recomputation (as torchtitan's
// DeepSeek-V3 configs) so that the layout fits 80 GiB GPUs. Used when no --model is given.
#pragma once

#include <cstdint>
#include <string>

#include "planner/layout/parallel_dims.h"
#include "planner/model/model_spec.h"
#include "planner/model/training.h"

namespace dockyard {

inline constexpr int64_t kDefaultWorldSize = 256;
inline constexpr int64_t kDefaultEp = 64;
inline constexpr const char* kDefaultModelName = "<embedded testdata/hf/deepseek-v3.json>";

// The embedded config.json text (its digest goes into report provenance).
const char* DefaultModelJson();

// LoadModel(path) (model_spec.h), or the embedded DeepSeek-V3 when `path` is empty.
ModelSpec LoadModelOrDefault(const std::string& path);

// The name reports give the model's source: `path`, or kDefaultModelName when it is empty.
std::string ModelSourceName(const std::string& path);

// The embedded default's layout and training where the command line leaves them: ep =
// DefaultEp(dims, kDefaultEp) unless `ep_given`; recompute full unless `recompute_given`.
void ApplyDefaultLayout(bool ep_given, ParallelDimsOptions* dims);
void ApplyDefaultTraining(bool recompute_given, TrainingConfig* training);

// The line the plan text adds under the embedded default: "(no --model: the embedded default,
// DeepSeek-V3 on W GPUs[ = W/8 nodes x 8], ep E, recompute R)".
std::string DefaultModelNote(const ParallelDimsOptions& dims, Recompute recompute);

}  // namespace dockyard
