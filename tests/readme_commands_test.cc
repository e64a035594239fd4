// End-to-end: every dockyard-plan command the README shows (its `tools/run_plan.sh ...` lines) runs
// and exits as the README says (0, or 3 where a line says "exit 3 if over"), so that a README
// example broken by a new rule is caught here, not by a new user (issue 31's new-user check found
// `--model mixtral-8x7b.json --world-size 16 --tp 4` refused by torchtitan's ep >= tp rule).
// The binary stands for tools/run_plan.sh (which builds it, then runs it with the same arguments);
// output files go to $TEST_TMPDIR.
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "tests/run_command.h"

namespace {

std::string TmpDir() {
  const char* t = std::getenv("TEST_TMPDIR");
  return t ? t : "/tmp";
}

// The README's dockyard-plan command lines: "tools/run_plan.sh ARGS [# comment]".
std::vector<std::string> ReadmePlanLines() {
  std::ifstream in("README.md");
  REQUIRE(in.good());
  std::vector<std::string> lines;
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("tools/run_plan.sh", 0) == 0) lines.push_back(line);
  }
  return lines;
}

// The line as a command of the built binary: arguments kept, an output file (after --json, --html,
// --refit-json, --out; "-" is stdout) moved into $TEST_TMPDIR, the comment dropped.
std::string AsCommand(const std::string& line) {
  const std::string args = line.substr(0, line.find('#'));
  std::istringstream words(args);
  std::string word, previous, command = "cli/dockyard-plan";
  words >> word;  // tools/run_plan.sh
  while (words >> word) {
    if ((previous == "--json" || previous == "--html" || previous == "--refit-json" || previous == "--out") && word != "-") {
      word = TmpDir() + "/" + word.substr(word.rfind('/') + 1);
    }
    command += " " + word;
    previous = word;
  }
  return command;
}

}  // namespace

TEST_CASE("Every dockyard-plan command of the README runs and exits as the README says") {
  const std::vector<std::string> lines = ReadmePlanLines();
  CHECK(lines.size() >= 15);  // the quick start and the examples section
  for (const std::string& line : lines) {
    CAPTURE(line);
    const dockyard::testing::CommandResult r = dockyard::testing::RunCommand(AsCommand(line) + " > /dev/null");
    const bool may_be_over = line.find("exit 3 if over") != std::string::npos;
    CHECK_MESSAGE((r.code == 0 || (may_be_over && r.code == 3)), r.out);
  }
}
