// The HTML report as a person sees it: each report kind rendered in headless Chromium
// (tools/html_screenshots.py): a screenshot that is not blank and a page that logs nothing to the
// console. Skipped (doctest skip, counted neither passed nor failed) when no chromium,
// chromium-browser or google-chrome is on PATH or python3 is missing; the structural checks of the
// same pages run everywhere (planner/report/html_report_test.cc, tests/cli_test.cc).
#include <cstdlib>
#include <string>
#include <sys/wait.h>

#include <doctest/doctest.h>

namespace {

bool OnPath(const char* name) {
  return std::system((std::string("command -v ") + name + " >/dev/null 2>&1").c_str()) == 0;
}

bool HaveBrowser() {
  return OnPath("python3") && (OnPath("chromium") || OnPath("chromium-browser") || OnPath("google-chrome"));
}

// Runs a shell command; its exit code.
int Sh(const std::string& cmd) {
  const int status = std::system(cmd.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string Dir() {
  const char* d = std::getenv("TEST_UNDECLARED_OUTPUTS_DIR");
  if (d != nullptr) return d;
  const char* t = std::getenv("TEST_TMPDIR");
  return t ? t : "/tmp";
}

}  // namespace

TEST_CASE("Every report kind renders in headless Chromium: not blank, no console output" * doctest::skip(!HaveBrowser())) {
  const std::string d = Dir();
  const std::string plan = "cli/dockyard-plan", run = "cli/dockyard-run";
  REQUIRE(Sh(plan + " --model testdata/hf/qwen3-30b-a3b.json --world-size 16 --ep 8 --gpus-per-node 4 --gpu-memory-gib 80 --html " + d +
             "/plan.html >/dev/null") == 0);
  REQUIRE(Sh(plan +
             " simulate --model testdata/hf/deepseek-v3.json --world-size 256 --ep 64 --pp 4 --recompute full --cluster "
             "h200-sxm --routing zipf:1.2 --html " +
             d + "/simulate.html >/dev/null") == 0);
  REQUIRE(Sh(plan + " search --model testdata/hf/qwen3-30b-a3b.json --world-size 64 --cluster h200-sxm --top 200 --html " + d +
             "/search.html >/dev/null") == 0);
  REQUIRE(Sh(plan + " simulate --model testdata/hf/qwen3-30b-a3b.json --world-size 8 --ep 8 --seq-len 64 --json " + d +
             "/sim8.json >/dev/null") == 0);
  REQUIRE(Sh(run + " --plan " + d + "/sim8.json --tokens-per-rank 16 --iters 1 --warmup 0 --html " + d + "/run.html >/dev/null") == 0);
  // Exit 0: every page passed; the script prints one line per page.
  CHECK(Sh("python3 tools/html_screenshots.py " + d + " " + d + "/plan.html " + d + "/simulate.html " + d + "/search.html " + d +
           "/run.html") == 0);
}
