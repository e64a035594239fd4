// Framework job configs on dockyard-plan's command line (docs/frameworks.md):
//   --from-megatron FILE  (plan, check, simulate, search): a Megatron-LM argument file; its settings
//                         become the command's flags before parsing, its model the plan's after;
//   --unpin LIST          (search): settings of the file searched instead of pinned;
//   --emit megatron       (plan, check, simulate) / --emit-row N (search): the layout written back
//                         as Megatron-LM arguments, to --emit-out FILE or stdout.
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "cli/plan_flags.h"
#include "planner/layout/plan.h"
#include "planner/model/model_spec.h"

namespace dockyard::cli {

// Registers --from-megatron, --emit and --emit-out on a plan command (`search` false) or
// --from-megatron, --unpin, --emit-row, --emit and --emit-out on search.
void AddFrameworkFlags(CLI::App* app, PlanCliOptions& o, bool search);

// Before parsing: `args` (argv) with the settings of the --from-megatron file appended as the flags
// they are (megatron_args.h ImportMegatronArgs), the config kept in o->framework_config. A setting
// the command line also gives is appended once when both agree; when they differ it is a UsageError
// naming both. A setting the command does not take (search: --pp-layer-split, ...) and, on search,
// one named by --unpin is not appended: listed in the config's `ignored` ("not taken by search") or
// searched. Throws UsageError (the flag given twice, on spec / calibrate, --unpin naming a setting
// the file does not set) and dockyard::Error (the file unreadable or malformed, named by
// --from-megatron). `args` unchanged without --from-megatron.
std::vector<std::string> ExpandFrameworkConfig(const std::vector<std::string>& args, const CLI::App& app, PlanCliOptions* o);

// After parsing: whether the model is not the embedded default (--model or --from-megatron), and
// the model itself: the config's (megatron_args.h MegatronModel, checked against --model when both
// are given), else --model's, else the embedded default.
bool ModelGiven(const PlanCliOptions& o);
// A model that is not the embedded default needs --world-size (a Megatron file: the launcher's nodes x
// GPUs per node). Throws UsageError naming --from-megatron or --model.
void RequireWorldSize(const PlanCliOptions& o);
ModelSpec LoadPlanModel(const PlanCliOptions& o);
// How reports name the model's source: "FILE (Megatron-LM arguments)", or default_layout.h ModelSourceName.
std::string PlanModelSource(const PlanCliOptions& o);

// --emit, --emit-out and --emit-row given together as they must be (--emit-out and --emit-row need
// --emit; --emit-out a writable path, not over an input, not another output). Throws UsageError.
void CheckEmitFlags(const PlanCliOptions& o, bool search);
// For an error raised after a job config's settings became flags: the lines that say which of the
// flags it names came from the file, and from which key ("  (--global-batch-tokens 409600 came from
// training.num_tokens_per_train_step in F)"); "" when none does or no config was read. A flag is
// named when the message holds it followed by a space, ':', '=' or its end.
std::string FrameworkAttribution(const PlanCliOptions& o, const std::string& message);
// What --emit FORMAT writes, for messages: "Megatron-LM arguments", "torchtitan overrides".
std::string EmitFormatName(const std::string& format);
// The launch config of `plan` in --emit's format, headed by the dockyard version and command line.
// `global_batch_size` 0: the plan's micro-batches decide it.
// `notes`: more header lines (a search row's warnings).
std::string EmitText(const PlanCliOptions& o, const Plan& plan, int64_t global_batch_size, const std::vector<std::string>& notes = {});

}  // namespace dockyard::cli
