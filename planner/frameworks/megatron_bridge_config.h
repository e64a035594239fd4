// Megatron-Bridge run configs, both directions (docs/frameworks.md):
//   - ImportMegatronBridgeConfig: a Bridge ConfigContainer as YAML -- the run_config.yaml a run
//     writes beside every checkpoint (ConfigContainer.to_yaml: every section, `_target_` keys,
//     dtypes as {_target_: torch.bfloat16}), or an overrides file that Bridge merges onto a recipe
//     (partial, no `_target_`) -- into dockyard's flags. Bridge's model, ddp, optimizer and
//     train settings are Megatron-Core's and Megatron-LM's under other names: each key read is
//     translated to its Megatron-LM argument and read by ImportMegatronArgs (one home for the
//     rules), with Bridge's own defaults where they differ (expert TP 1 with EP, no vocabulary
//     padding unless should_pad_vocab, the recipes' bf16_mixed);
//   - the model: MegatronModel over the translated arguments (a dump carries the architecture; an
//     overrides file takes it from --model, as a recipe takes it from the HF config);
//   - EmitMegatronBridgeConfig: a plan written back as a Bridge overrides YAML.
// Every key is checked against Bridge's and Megatron-Core's config dataclasses at
// kMegatronBridgeCommit (megatron-bridge-fields.txt beside this file, extracted by
// tools/extract_megatron_bridge_fields.py).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "planner/frameworks/framework_config.h"
#include "planner/layout/plan.h"
#include "planner/model/model_spec.h"

namespace dockyard {

// The Megatron-Bridge commit (and, in megatron-bridge-fields.txt, the Megatron-LM commit it pins)
// whose config the reader and the writer hold to.
extern const char* const kMegatronBridgeCommit;

// Bridge's ConfigContainer keys: "section" (train, model, ddp, ...) or "section.field" -> "section" |
// "field".
const std::map<std::string, std::string>& MegatronBridgeFieldTable();

// The config's settings as dockyard flags (FrameworkConfig::flags; FrameworkConfig::args holds the
// Megatron-LM arguments they were translated to, for MegatronModel and the emitter). `model`:
// --model's, when given (an overrides file needs it: the architecture is the recipe's). Throws
// dockyard::Error naming the file:line, the Bridge key, its value and the rule: malformed YAML, a
// key Bridge does not have (with the nearest name), a value of the wrong kind, and every refusal of
// ImportMegatronArgs, named by the Bridge key that set the argument.
FrameworkConfig ImportMegatronBridgeConfig(const std::string& text, const std::string& file, const std::optional<ModelSpec>& model);

// A plan's layout as a Megatron-Bridge overrides YAML (to merge onto the run's recipe: the
// degrees, pipeline layout or split, micro and global batch, sequence length, recompute, dispatcher,
// overlaps, mixed precision, optimizer moments, clipping) after a header of '#' lines. Every key
// written is in MegatronBridgeFieldTable() and reads back to the same plan. Throws dockyard::Error
// for a plan Megatron-LM cannot run (EmitMegatronArgs's refusals) or a setting without a Bridge key.
std::string EmitMegatronBridgeConfig(const Plan& plan, int64_t global_batch_size, const std::vector<std::string>& header_lines);

}  // namespace dockyard
