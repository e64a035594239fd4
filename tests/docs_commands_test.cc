// The README's and docs' commands work whatever ran before them (issue 31 item 12): none runs a
// binary through the bazel-bin / bazel-testlogs symlinks, which point at the configuration of the
// last Bazel command (the opt tree after `bazel run -c opt //planner/calibration:bench_fidelity`);
// the scripts they call build what they run and show Bazel's progress; tools/run_tests.sh counts a
// browser test without a browser as skipped; the README's build time is the measured one.
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <doctest/doctest.h>

namespace {

std::string Read(const std::string& path) {
  std::ifstream in(path);
  REQUIRE_MESSAGE(in.good(), path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

const std::vector<std::string> kDocs = {"README.md",         "docs/architecture.md", "docs/build.md",       "docs/calibration.md",
                                        "docs/cluster.md",   "docs/cost-model.md",   "docs/cuda.md",        "docs/fidelity.md",         "docs/frameworks.md",
                                        "docs/html-report.md", "docs/memory-model.md", "docs/model-spec.md", "docs/redundant-experts.md",
                                        "docs/report.md",    "docs/runtime.md",      "docs/search.md"};

}  // namespace

TEST_CASE("No command in the README or docs runs a binary through the bazel-bin or bazel-testlogs symlink") {
  std::vector<std::string> offending;
  for (const std::string& path : kDocs) {
    std::istringstream lines(Read(path));
    int n = 0;
    for (std::string line; std::getline(lines, line);) {
      ++n;
      // `$(bazel info bazel-bin)` names the default configuration's tree whatever ran before; the
      // bare symlink does not.
      for (const char* link : {"bazel-bin/", "bazel-testlogs/"}) {
        const size_t at = line.find(link);
        if (at == std::string::npos) continue;
        const bool through_info = at >= 12 && line.compare(at - 12, 12, "bazel info ") == 0;
        if (!through_info && line.find("$(bazel info") == std::string::npos) offending.push_back(path + ":" + std::to_string(n) + ": " + line);
      }
    }
  }
  std::string list;
  for (const auto& o : offending) list += o + "\n";
  CHECK_MESSAGE(offending.empty(), list);
}

TEST_CASE("The run scripts build what they run and run it from the default configuration's tree, with progress shown") {
  const std::string script = Read("tools/build_and_run.sh");
  CHECK(script.find("bazel build") != std::string::npos);
  CHECK(script.find("bazel info bazel-bin") != std::string::npos);     // not the bazel-bin symlink
  CHECK(script.find("$root/bazel-bin") == std::string::npos);
  CHECK(script.find("--noshow_progress") == std::string::npos);        // a first build shows its progress
  CHECK(script.find("--show_progress_rate_limit=10") != std::string::npos);
  CHECK(Read("tools/run_plan.sh").find("build_and_run.sh\" dockyard-plan") != std::string::npos);
  CHECK(Read("tools/run_run.sh").find("build_and_run.sh\" dockyard-run") != std::string::npos);
}

TEST_CASE("tools/run_tests.sh counts the skipped cases of browser tests as skipped, not passed") {
  // tests/html_screenshot_test.cc skips (doctest skip) where no headless browser is found; its
  // target is tagged "browser" (tests/BUILD) and the script keeps the skipped counts of those targets.
  const std::string script = Read("tools/run_tests.sh");
  CHECK(script.find(R"(attr(tags, "\b(gpu|browser)\b", tests(//...)))") != std::string::npos);
  CHECK(script.find("browser test cases without a browser") != std::string::npos);
}

TEST_CASE("The README's first-build time is the measured one") {
  const std::string readme = Read("README.md");
  CHECK(readme.find("one to three minutes") == std::string::npos);
  CHECK(readme.find("7 m 46 s") != std::string::npos);
  CHECK(readme.find("12 m 40 s") != std::string::npos);
}
