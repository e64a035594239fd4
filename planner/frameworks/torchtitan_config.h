// torchtitan job configs, both directions (docs/frameworks.md):
//   - ImportTorchtitanConfig: a job's config into dockyard's flags, with torchtitan's defaults where a
//     key is absent. Three forms: the JSON a run dumps (--debug.save_config_file,
//     Trainer.Config.to_dict(); also a TOML-era job's --job.save_config_file dump), an older release's
//     TOML job file (--job.config_file), and a file of command-line overrides (what follows
//     `-m torchtitan.train --module M --config F`: --section.key value words and an
//     activation-checkpoint:MODE subcommand);
//   - TorchtitanModel: the model, from --model or the job's hf_assets_path/config.json;
//   - EmitTorchtitanConfig: a plan's layout written back as torchtitan command-line overrides.
// Every key of a section dockyard reads (parallelism, training, activation_checkpoint, compile,
// debug, optimizer, loss; model, quantize and job in a TOML-era file) is checked against
// torchtitan's own config at kTorchtitanCommit or kTorchtitanTomlCommit (torchtitan-fields.txt
// beside this file, extracted from its dataclasses by tools/extract_torchtitan_fields.py); the other
// sections (data, checkpoint, logging, ...) are named as not read.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "planner/frameworks/framework_config.h"
#include "planner/layout/plan.h"
#include "planner/layout/torchtitan_split.h"
#include "planner/model/model_spec.h"

namespace dockyard {

// torchtitan's commits whose config the reader holds to: the current one (Trainer.Config, token
// counts for the batch since 73aed7f6c "fold batch dim"), and the last with TOML job files
// (JobConfig, batch sizes in sequences).
extern const char* const kTorchtitanCommit;
extern const char* const kTorchtitanTomlCommit;

// torchtitan's config keys at kTorchtitanCommit (`era` "current") or kTorchtitanTomlCommit
// ("toml"): dotted key -> "section" (a nested config) or "field". Throws std::out_of_range for
// another era.
const std::map<std::string, std::string>& TorchtitanFieldTable(const std::string& era);

// The job's settings as dockyard flags (FrameworkConfig::flags, with --convention torchtitan, or
// torchtitan-2026-03 for a TOML-era file: expert TP 1 or tp). `model`: --model's, when given;
// otherwise the model is read from the job's hf_assets_path (its config.json, relative to the
// working directory, then to the file's). The model's layers decide torchtitan's pipeline split
// (torchtitan/distributed/pipeline_parallel.py _generate_llm_fqn_per_model_part, the first / last
// stage less layers), written as --pp-layer-split; a JSON dump's model tree is checked against the
// model (layers, hidden size, vocabulary, experts, top-k, expert width). Throws dockyard::Error
// naming the file (with :line where the form has lines), the key, its value and the rule: a key
// torchtitan does not have (with the nearest name), a malformed value, a setting torchtitan refuses
// (its pipeline-stage checks, local batch not dividing into pipeline micro-batches) or dockyard does
// not plan (GPipe and zero-bubble schedules, a module split (module_fqns_per_model_part) placing the
// embedding, the output or the layers otherwise, CPU offload, pure-bf16 training,
// MXFP8, Muon, the memory-budget checkpointing policy), a model that differs from the dump's, no
// model found, a torchtitan release between the two it reads (a dump with model_spec and
// local_batch_size).
// `world_size` (--world-size, when given): a job without training.num_tokens_per_train_step (or
// global_batch_size) steps on one micro-batch schedule per data-parallel rank; the search pins the
// global batch that gives at the file's degrees (FrameworkConfig::search_defaults), as it varies dp.
FrameworkConfig ImportTorchtitanConfig(const std::string& text, const std::string& file, const std::optional<ModelSpec>& model,
                                       std::optional<int64_t> world_size = std::nullopt);

// The model of an imported config: `base` (--model) when given, else the HF config
// ImportTorchtitanConfig found (FrameworkConfig::model_file).
ModelSpec TorchtitanModel(const FrameworkConfig& config, const std::optional<ModelSpec>& base);

// A plan's layout as torchtitan (kTorchtitanCommit) command-line overrides, one per line ending
// " \" (to follow `-m torchtitan.train --module M --config F`), after a header of '#' lines
// (`header_lines`, then the world size and the torchrun line): the degrees, the pipeline schedule,
// micro-batches and stage split (pipeline_parallel_layers_per_stage and the first / last stage less
// layers that give the plan's layers per virtual stage, with module_fqns_per_model_part None; where
// none do, e.g. 48 layers in pp 2 x vpp 20 stages, which no layers_per_stage yields, the stages as
// module_fqns_per_model_part lists in tyro's spelling), the token counts of a micro-batch and of a
// step, the context length, mixed precision, clipping, the reshard policy, the optimizer's moment
// dtype, and activation-checkpoint:MODE last. `global_batch_size` 0: micro batch x dp x the plan's
// micro-batches. Settings torchtitan takes in the config function (Float8 converters, the MoE
// communication backend) are named in the header, with the flags that read the row back. Throws dockyard::Error for a plan torchtitan cannot run: the megatron convention,
// ZeRO-1 / DDP data parallelism, expert TP, a per-layer selective_ac_option or Megatron recompute
// modules.
std::string EmitTorchtitanConfig(const Plan& plan, int64_t global_batch_size, const std::vector<std::string>& header_lines);

}  // namespace dockyard
