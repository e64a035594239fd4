// What dockyard takes from a framework's job config (see framework_config.h).
#include "planner/frameworks/framework_config.h"

#include <fmt/format.h>

namespace dockyard {

const ConfigArg* FrameworkConfig::Find(const std::string& key) const {
  for (const auto& a : args) {
    if (a.key == key) return &a;
  }
  return nullptr;
}

const ConfigFlag* FrameworkConfig::FindFlag(const std::string& flag) const {
  for (const auto& f : flags) {
    if (f.flag == flag) return &f;
  }
  return nullptr;
}

std::string FrameworkConfigText(const FrameworkConfig& config) {
  const size_t n = config.keys >= 0 ? static_cast<size_t>(config.keys) : config.args.size();
  std::string out = fmt::format("{} config {}{}: {} {}; {} set dockyard flags", config.framework, config.file,
                                config.form.empty() ? "" : " (" + config.form + ")", n,
                                config.framework == "Megatron-LM" ? (n == 1 ? "argument" : "arguments") : (n == 1 ? "key" : "keys"),
                                config.flags.size());
  if (!config.not_read.empty()) out += fmt::format(", {} without effect on a plan (learning rate, data, logging, ...)", config.not_read.size());
  out += "\n";
  if (!config.flags.empty()) {
    std::string line;
    for (const auto& f : config.flags) line += " " + f.flag + (f.value.empty() ? "" : " " + f.value);
    out += "  as flags:" + line + "\n";
  }
  if (!config.searched.empty()) {
    out += "  searched (--unpin):\n";
    for (const auto& k : config.searched) out += "    " + k + "\n";
  }
  if (!config.ignored.empty()) {
    out += "  ignored (would change the plan; not modelled or not taken):\n";
    for (const auto& k : config.ignored) out += "    " + k + "\n";
  }
  return out;
}

}  // namespace dockyard
