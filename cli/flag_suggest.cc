// "did you mean" for a mistyped flag (see flag_suggest.h).
#include "cli/flag_suggest.h"

#include <algorithm>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "planner/base/file_util.h"
#include "planner/base/json_util.h"
#include "planner/model/recompute.h"

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

// The option named `name` ("--tp") that was given on `app` or on the subcommand it ran; null when none.
const CLI::Option* GivenOption(const CLI::App& app, const std::string& name) {
  const CLI::Option* opt = app.get_option_no_throw(name);
  if (opt != nullptr && opt->count() > 0) return opt;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    if (const CLI::Option* found = GivenOption(*sub, name)) return found;
  }
  return nullptr;
}

// CLI11's "--tp: At Most 1 required but received 2" for an option given more than once, said as
// dockyard says it: "--tp is given 2 times (2, 4): give it once". Empty for other errors.
std::string GivenTwiceText(const CLI::App& app, const CLI::ParseError& error) {
  if (dynamic_cast<const CLI::ArgumentMismatch*>(&error) == nullptr) return "";
  const std::string text = error.what();
  const size_t at = text.find(": At Most 1 required but received ");
  if (at == std::string::npos) return "";
  const std::string name = text.substr(0, at);
  const CLI::Option* opt = GivenOption(app, name);
  if (opt == nullptr) return "";
  std::vector<std::string> values;
  for (const std::string& v : opt->results()) values.push_back("'" + v + "'");
  return fmt::format("{} is given {} times ({}): give it once", name, values.size(), fmt::join(values, ", "));
}

}  // namespace

void RefuseRepeatedFlags(CLI::App& app) {
  for (CLI::Option* opt : app.get_options()) {
    const bool is_switch = opt->get_expected_max() == 0 && !opt->get_positional();
    if (!is_switch || opt->get_name() == "--help" || opt->get_name() == "--version") continue;
    // A switch with a negated second name ("--x,!--no-x") counts its occurrences itself.
    const std::vector<std::string>& names = opt->get_lnames();
    bool negated = false;
    for (const std::string& n : names) negated = negated || (names.size() > 1 && n.rfind("no-", 0) == 0);
    if (negated) continue;
    opt->multi_option_policy(CLI::MultiOptionPolicy::Throw);
  }
  for (CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) RefuseRepeatedFlags(*sub);
}

std::string ParseErrorText(const CLI::App& app, const CLI::ParseError& error) {
  if (std::string twice = GivenTwiceText(app, error); !twice.empty()) return twice;
  std::string text = error.what();
  if (dynamic_cast<const CLI::ExtrasError*>(&error) == nullptr) return text;
  // CLI11 joins the left-over arguments last first (CLI::detail::rjoin): name them as typed.
  const std::vector<std::string> extras = app.remaining(true);
  const std::string reversed = CLI::detail::rjoin(extras, " ");
  if (!extras.empty() && text.size() >= reversed.size() && text.compare(text.size() - reversed.size(), reversed.size(), reversed) == 0) {
    text = text.substr(0, text.size() - reversed.size()) + CLI::detail::join(extras, " ");
  }
  std::vector<std::string> flags;
  CollectFlags(app, flags);
  // A mistyped command ("simulte"): the first left-over word that is not a flag, beside the
  // program's subcommands (only the main command takes one).
  std::vector<std::string> commands;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) commands.push_back(sub->get_name());
  for (const std::string& arg : app.remaining(true)) {
    if (arg.empty() || arg[0] == '-') continue;
    // Megatron-LM's --recompute-modules takes its modules as separate words (nargs "*").
    const std::vector<std::string>& modules = RecomputeModuleNames();
    if (std::find(modules.begin(), modules.end(), arg) != modules.end()) {
      return text + fmt::format("; '{}' is a recompute module: --recompute-modules takes one comma-separated list here (Megatron-LM's "
                                "--recompute-modules a b is --recompute-modules a,b)",
                                arg);
    }
    if (const std::string s = DidYouMeanText(arg, commands); !s.empty()) return text + s + " (a command comes first)";
    break;
  }
  for (const std::string& arg : app.remaining(true)) {
    if (arg.size() < 3 || arg.compare(0, 2, "--") != 0) continue;
    const std::string name = arg.substr(0, arg.find('='));
    // A real flag given to a (sub)command that does not take it: say which ones do.
    const std::vector<std::string> owners = CommandsWith(app, name);
    if (!owners.empty()) {
      // The program by its name: CLI11 names the app after argv[0], a Bazel path under bazel run.
      const std::string program = SplitPath(app.get_name()).second;
      std::string list;
      for (const std::string& c : owners) list += (list.empty() ? "" : ", ") + (c.empty() ? program : program + " " + c);
      return text + fmt::format("; {} is not an option of this command: it belongs to {}", name, list);
    }
    if (auto s = DidYouMean(name, flags)) return text + fmt::format("; did you mean '{}'?", *s);
  }
  return text;
}

int ReportParseError(const char* program, const CLI::App& app, const CLI::ParseError& error, std::ostream& err) {
  // A value outside the names an option takes (a CLI11 check: "--moe-flex-dispatcher-backend: bogus not in
  // {...}") is invalid input, as a value out of its range is (README "Exit codes"); the rest --
  // unknown flags, missing values, a flag given twice -- is a malformed command line.
  if (dynamic_cast<const CLI::ValidationError*>(&error) != nullptr) {
    err << program << ": error: " << error.what() << "\n";
    return 1;
  }
  err << program << ": usage error: " << ParseErrorText(app, error) << "\nRun '" << program << " --help' for usage.\n";
  return 2;
}

}  // namespace dockyard::cli
