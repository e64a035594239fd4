// What dockyard takes from a framework's job config (Megatron-LM arguments; docs/frameworks.md):
// the arguments as read, the dockyard flags they set, and what it leaves alone, by name.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dockyard {

// One argument as written in the file: its key ("--num-layers"), its values (none for a switch)
// and the line it started on (1-based).
struct ConfigArg {
  std::string key;
  std::vector<std::string> values;
  int line = 0;
};

// One dockyard flag a config sets: the flag ("--tp"), its value ("" for a switch) and the key(s)
// it came from ("--tensor-model-parallel-size"), for messages that name both.
struct ConfigFlag {
  std::string flag, value, from;
};

struct FrameworkConfig {
  std::string framework;  // "Megatron-LM", "torchtitan"
  std::string file;
  std::string form;        // how the file gives it, when a framework has several: "JSON dump", "TOML job file", ...
  std::string model_file;  // the HF config.json the job names (torchtitan's hf_assets_path), when found
  int64_t keys = -1;       // the file's keys, where `args` holds them translated (Megatron-Bridge); -1: args.size()
  std::vector<ConfigArg> args;
  std::vector<ConfigFlag> flags;
  // Settings a search varies that the file leaves at the framework's default (Megatron: tp, pp, cp,
  // ep 1, etp = tp, micro-batch 1, no recompute, no EP overlap, ...): a search pins them to it, as the
  // job would run (the plan's commands need not: the defaults are theirs too).
  std::vector<ConfigFlag> search_defaults;
  // Keys that change a plan and that dockyard does not model: "--key (why)".
  std::vector<std::string> ignored;
  // Keys without effect on a plan (learning rate, data, logging, checkpoints, ...).
  std::vector<std::string> not_read;
  // Keys read into dockyard's flags; a written config replaces them and carries every other key
  // of the file over unchanged unless it writes that key itself (megatron_args.h EmitMegatronArgs).
  std::vector<std::string> read;
  // search --unpin: the settings searched instead of pinned, "--flag value (from KEY)".
  std::vector<std::string> searched;
  // Settings the command does not take (a written config carries their keys, ConfigFlag::from,
  // over and names them as not priced).
  std::vector<ConfigFlag> untaken;

  // The argument named `key`, or nullptr.
  const ConfigArg* Find(const std::string& key) const;
  // The flag `flag` ("--tp") among `flags`, or nullptr.
  const ConfigFlag* FindFlag(const std::string& flag) const;
};

// The lines a report prints for a config: where it came from, how many keys it read, the ignored
// keys by name (the one home of this text: plan, check, simulate and search print it).
std::string FrameworkConfigText(const FrameworkConfig& config);

}  // namespace dockyard
