// "did you mean" for a mistyped flag (see flag_suggest.h).
#include "cli/flag_suggest.h"

#include <vector>

#include <fmt/format.h>

#include "planner/base/json_util.h"

namespace dockyard::cli {

namespace {

void CollectFlags(const CLI::App& app, std::vector<std::string>& flags) {
  for (const CLI::Option* opt : app.get_options()) {
    for (const std::string& name : opt->get_lnames()) flags.push_back("--" + name);
  }
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) CollectFlags(*sub, flags);
}

// The subcommands of `app` (by name; the main command as "") that take `flag`.
std::vector<std::string> CommandsWith(const CLI::App& app, const std::string& flag) {
  std::vector<std::string> out;
  auto has = [&](const CLI::App& a) {
    for (const CLI::Option* opt : a.get_options()) {
      for (const std::string& name : opt->get_lnames()) {
        if ("--" + name == flag) return true;
      }
    }
    return false;
  };
  if (has(app)) out.push_back("");
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    if (has(*sub)) out.push_back(sub->get_name());
  }
  return out;
}

}  // namespace

std::string ParseErrorText(const CLI::App& app, const CLI::ParseError& error) {
  std::string text = error.what();
  if (dynamic_cast<const CLI::ExtrasError*>(&error) == nullptr) return text;
  std::vector<std::string> flags;
  CollectFlags(app, flags);
  for (const std::string& arg : app.remaining(true)) {
    if (arg.size() < 3 || arg.compare(0, 2, "--") != 0) continue;
    const std::string name = arg.substr(0, arg.find('='));
    // A real flag given to a (sub)command that does not take it: say which ones do.
    const std::vector<std::string> owners = CommandsWith(app, name);
    if (!owners.empty()) {
      std::string list;
      for (const std::string& c : owners) {
        list += (list.empty() ? "" : ", ") + (c.empty() ? app.get_name() : app.get_name() + " " + c);
      }
      return text + fmt::format("; {} is not an option of this command: it belongs to {}", name, list);
    }
    if (auto s = DidYouMean(name, flags)) return text + fmt::format("; did you mean '{}'?", *s);
  }
  return text;
}

}  // namespace dockyard::cli
