// "did you mean" for a mistyped flag (see flag_suggest.h).
#include "cli/flag_suggest.h"

#include <vector>

#include <fmt/format.h>

#include "planner/json_util.h"

namespace dockyard::cli {

namespace {

void CollectFlags(const CLI::App& app, std::vector<std::string>& flags) {
  for (const CLI::Option* opt : app.get_options()) {
    for (const std::string& name : opt->get_lnames()) flags.push_back("--" + name);
  }
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) CollectFlags(*sub, flags);
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
    if (auto s = DidYouMean(name, flags)) return text + fmt::format("; did you mean '{}'?", *s);
  }
  return text;
}

}  // namespace dockyard::cli
