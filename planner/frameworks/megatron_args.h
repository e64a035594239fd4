// Megatron-LM launch arguments, both directions (docs/frameworks.md):
//   - ReadMegatronArgs / ImportMegatronArgs: an argument file (what follows `pretrain_gpt.py` in a
//     launch script) into dockyard's flags, and MegatronModel into a model spec, with Megatron's
//     defaults where an argument is absent;
//   - EmitMegatronArgs: a plan's layout and settings written back as Megatron arguments.
// Every key is checked against Megatron-LM's own argument list at kMegatronLmCommit
// (megatron-lm-args.txt beside this file, extracted from megatron/training/arguments.py by
// tools/extract_megatron_args.py): a key Megatron does not have is an error, with the nearest name.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "planner/frameworks/framework_config.h"
#include "planner/layout/plan.h"
#include "planner/model/model_spec.h"

namespace dockyard {

// The Megatron-LM commit whose argument list the reader and the emitter hold to.
extern const char* const kMegatronLmCommit;

// Megatron-LM's arguments at kMegatronLmCommit: "--name" -> arity, '0' (a switch), '1' (one value)
// or '+' (one or more values).
const std::map<std::string, char>& MegatronArgTable();

// Megatron-LM's arguments that place layers on pipeline stages: the layout, the first / last stage
// layer counts, the account-for splits and the virtual-stage counts. A layout refuses the others
// (transformer_config.py); a written config replaces them all with its own.
const std::set<std::string>& MegatronSplitKeys();

// Splits an argument file into Megatron arguments, as bash would split the body of an argument
// array: whitespace separates words, '...' and "..." quote, a backslash at a line's end continues
// it, '#' starts a comment; "--key=value" is "--key value". A key given twice keeps its last value
// (argparse). Throws dockyard::Error naming `file`:line, the word and the rule for: a shell variable
// ($VAR, ${VAR}, $(...)), a bash array (NAME=( ... )), a word that is not a Megatron-LM argument
// (with the nearest name), a value missing, a value given to a switch, an unclosed quote.
std::vector<ConfigArg> ReadMegatronArgs(const std::string& text, const std::string& file);

// The arguments as dockyard flags (FrameworkConfig::flags), with Megatron-LM's defaults where an
// argument is absent (each with its source in the .cc: arguments.py / transformer_config.py):
// ETP = TP, the allgather dispatcher, DDP without --use-distributed-optimizer, core_attn for a bare
// selective recompute, `delayed` FP8 scaling priced as tensorwise. Arguments that change a plan and
// that dockyard does not model go to `ignored` with the reason; learning rate, data, logging and
// checkpoint arguments to `not_read`. Throws dockyard::Error (file:line, key, value, rule) for a
// malformed or out-of-range value and for a setting dockyard cannot plan (MXFP8, Muon, ZeRO-2, ...).
FrameworkConfig ImportMegatronArgs(const std::string& text, const std::string& file);

// The model the arguments describe. With `base` (--model): `base`, after checking that every
// architecture argument the file gives agrees with it (dockyard::Error naming both values
// otherwise). Without: built from the arguments with Megatron's defaults (--ffn-hidden-size
// 4 x hidden, --kv-channels hidden / heads, MHA without --group-query-attention, LayerNorm, tied
// embeddings, biases on unless --disable-bias-linear, every layer MoE); --vocab-size is then
// required (Megatron takes it from the tokenizer), and the family is the one whose parameter names
// the layout takes (deepseek_v3 for MLA, qwen2_moe with shared experts, else qwen3_moe).
ModelSpec MegatronModel(const FrameworkConfig& config, const std::optional<ModelSpec>& base);

// What a plan's layout is launched with under Megatron-LM: the architecture, degrees, vpp or the
// pipeline layout / split, micro and global batch, recompute and its modules, dispatcher and
// backend, overlap flags, precision, one argument per line ending " \" (a bash fragment to follow
// `pretrain_gpt.py`), after a header of '#' lines (`header_lines`, then the world size). With
// `config` (the plan came from --from-megatron), the file's other arguments follow unchanged: the
// keys dockyard did not read and those the command did not take (named in the header as not
// priced), except the pipeline-split keys the written layout replaces. `global_batch_size` 0: micro
// batch x dp x the plan's micro-batches. Every key written is in MegatronArgTable()
// (megatron_args_test). Throws dockyard::Error for a setting Megatron-LM cannot express (another
// convention's rank order, DualPipe, the deredundency dispatcher, a model feature with no Megatron
// argument, e.g. attention sinks, linear attention, LayerNorm without a bias).
std::string EmitMegatronArgs(const Plan& plan, int64_t global_batch_size, const std::vector<std::string>& header_lines,
                             const FrameworkConfig* config = nullptr);

// The architecture arguments of `model` as EmitMegatronArgs writes them (--num-layers ...
// --vocab-size, the position table at least `seq_len`): what a Megatron-Bridge recipe takes from the
// model's HF config, for a Bridge overrides file that leaves the architecture to it. Throws
// dockyard::Error for a model Megatron-LM cannot build (EmitMegatronArgs's refusals).
std::vector<ConfigArg> MegatronArchitectureArgs(const ModelSpec& model, int64_t seq_len);

}  // namespace dockyard
