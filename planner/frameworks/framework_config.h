// What dockyard takes from a framework's job config (Megatron-LM arguments; docs/frameworks.md):
// the arguments as read, the dockyard flags they set, and what it leaves alone, by name.
#pragma once

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
  std::string framework;  // "Megatron-LM"
  std::string file;
  std::vector<ConfigArg> args;
  std::vector<ConfigFlag> flags;
  // Keys that change a plan and that dockyard does not model: "--key (why)".
  std::vector<std::string> ignored;
  // Keys without effect on a plan (learning rate, data, logging, checkpoints, ...).
  std::vector<std::string> not_read;

  // The argument named `key`, or nullptr.
  const ConfigArg* Find(const std::string& key) const;
};

// The lines a report prints for a config: where it came from, how many keys it read, the ignored
// keys by name (the one home of this text: plan, check, simulate and search print it).
std::string FrameworkConfigText(const FrameworkConfig& config);

}  // namespace dockyard
