// libFuzzer target: dockyard-plan's command line (RunPlanCli with string streams).
//
// Input: the arguments, one per line (argv[0] is added). Inputs that could write a file are
// skipped: --json, --refit-json and --out (also as --flag=value) must have the value "-". Worlds
// over 4096 ranks and the `search` subcommand are skipped to keep executions fast.
//
// Checked: the exit code is 0, 1, 2 or 3; a usage error (2) says "usage error:"; over budget (3)
// lists the ranks over it ("exceed the"); an error never
// comes from the catch-all ("internal error": an exception that is not a dockyard::Error).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "cli/plan_cli.h"
#include "fuzz/fuzz_util.h"

namespace {

bool WritesAFile(const std::vector<std::string>& args) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    const size_t eq = a.find('=');
    const std::string name = a.substr(0, eq);
    // CLI11 2.1 matches option names exactly (no prefixes, case-sensitive).
    if (name != "--json" && name != "--refit-json" && name != "--out") continue;
    if (eq != std::string::npos ? a.substr(eq + 1) != "-" : i + 1 >= args.size() || args[i + 1] != "-") return true;
  }
  return false;
}

// True for an accepted --world-size over 4096 (slow to plan, not a finding).
bool TooBig(const std::vector<std::string>& args) {
  for (size_t i = 0; i < args.size(); ++i) {
    std::string value;
    if (args[i] == "--world-size" && i + 1 < args.size())
      value = args[i + 1];
    else if (args[i].rfind("--world-size=", 0) == 0)
      value = args[i].substr(13);
    else
      continue;
    size_t p = !value.empty() && value[0] == '+' ? 1 : 0;
    while (p < value.size() && value[p] == '0') ++p;
    const std::string digits = value.substr(p);
    if (digits.find_first_not_of("0123456789") != std::string::npos) continue;  // a parse error
    if (digits.size() > 7) continue;                                            // over kMaxWorldSize: rejected at once
    if (!digits.empty() && std::stoll(digits) > 4096) return true;
  }
  return false;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 4096) return 0;
  std::vector<std::string> args;
  std::string cur;
  for (size_t i = 0; i < size; ++i) {
    if (data[i] == '\n') {
      args.push_back(cur);
      cur.clear();
    } else {
      cur += static_cast<char>(data[i]);
    }
  }
  if (!cur.empty()) args.push_back(cur);
  if (args.size() > 64 || WritesAFile(args) || TooBig(args)) return 0;
  // `search` plans and simulates hundreds of layouts by design (seconds per run): not here.
  for (const auto& a : args) {
    if (a == "search") return 0;
  }

  std::vector<std::string> storage = {"dockyard-plan"};
  storage.insert(storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& s : storage) argv.push_back(s.data());
  argv.push_back(nullptr);
  std::ostringstream out, err;
  const int code = dockyard::RunPlanCli(static_cast<int>(storage.size()), argv.data(), out, err);
  const std::string e = err.str();
  if (code < 0 || code > 3) dockyard_fuzz::Fail("exit code " + std::to_string(code));
  if (code == 3 && e.find("exceed the") == std::string::npos) dockyard_fuzz::Fail("exit 3 without the ranks over budget: " + e);
  if (code == 2 && e.find("usage error:") == std::string::npos) dockyard_fuzz::Fail("exit 2 without a usage error: " + e);
  if (("\n" + e).find("\ndockyard-plan: error: internal error") != std::string::npos) {
    dockyard_fuzz::Fail("an exception that is not a dockyard::Error: " + e);
  }
  if (code == 1 && e.empty()) dockyard_fuzz::Fail("exit 1 without a message");
  return 0;
}
