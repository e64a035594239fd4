// The include graph of the sources: no cycle among modules, no include from a lower package into a
// higher one (docs/architecture.md, "Layers").
//
// A module is a header and the sources of the same stem in its folder (network.h, network.cc), with its
// package-private `<stem>_internal.h` (layout_eval_internal.h belongs to layout_eval): an edge
// a -> b when a file of module a includes a header of module b ("..." includes of this repository).
// A strongly connected component of more than one module is a cycle, whatever its length (Tarjan's
// algorithm), not only a pair that includes each other.
//
// The packages' order, lowest first: planner/base, model, layout, accounting, routing, cost,
// calibration, search, report; then the front ends and the runtime (cli, runtime, kernels, fuzz,
// tests). A source that is not a test may include its own package and lower ones only.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

using Graph = std::map<std::string, std::set<std::string>>;

// The strongly connected components of `g` with more than one node (Tarjan), each sorted.
std::vector<std::vector<std::string>> Cycles(const Graph& g) {
  std::map<std::string, int> index, low;
  std::set<std::string> on_stack;
  std::vector<std::string> stack;
  std::vector<std::vector<std::string>> out;
  int next = 0;
  std::function<void(const std::string&)> visit = [&](const std::string& v) {
    index[v] = low[v] = next++;
    stack.push_back(v);
    on_stack.insert(v);
    const auto it = g.find(v);
    if (it != g.end()) {
      for (const std::string& w : it->second) {
        if (!index.count(w)) {
          visit(w);
          low[v] = std::min(low[v], low[w]);
        } else if (on_stack.count(w)) {
          low[v] = std::min(low[v], index[w]);
        }
      }
    }
    if (low[v] == index[v]) {
      std::vector<std::string> component;
      std::string w;
      do {
        w = stack.back();
        stack.pop_back();
        on_stack.erase(w);
        component.push_back(w);
      } while (w != v);
      if (component.size() > 1) {
        std::sort(component.begin(), component.end());
        out.push_back(component);
      }
    }
  };
  for (const auto& [v, edges] : g) {
    if (!index.count(v)) visit(v);
  }
  return out;
}

// "planner/search/layout_eval_internal.h" -> "planner/search/layout_eval".
std::string ModuleOf(const std::string& path) {
  std::string stem = path.substr(0, path.rfind('.'));
  const std::string internal = "_internal";
  if (path.size() > 2 && path.compare(path.size() - 2, 2, ".h") == 0 && stem.size() > internal.size() &&
      stem.compare(stem.size() - internal.size(), internal.size(), internal) == 0) {
    stem.resize(stem.size() - internal.size());
  }
  return stem;
}

// The package of a path: "planner/cost" for planner files, else the top folder ("runtime").
std::string PackageOf(const std::string& path) {
  const size_t first = path.find('/');
  if (path.compare(0, first, "planner") == 0) return path.substr(0, path.find('/', first + 1));
  return path.substr(0, first);
}

int PackageRank(const std::string& package) {
  static const std::vector<std::string> order = {"planner/base",        "planner/model",  "planner/layout", "planner/frameworks",
                                                 "planner/accounting",  "planner/routing", "planner/cost",
                                                 "planner/calibration", "planner/search", "planner/report"};
  const auto it = std::find(order.begin(), order.end(), package);
  return it == order.end() ? static_cast<int>(order.size()) : static_cast<int>(it - order.begin());
}

bool IsTest(const std::string& path) {
  return path.rfind("tests/", 0) == 0 || path.find("_test.cc") != std::string::npos || path.find("bench_") != std::string::npos;
}

// The header of a `#include "..."` line ("" for any other line, <...> includes among them).
std::string QuotedInclude(const std::string& line) {
  size_t i = line.find_first_not_of(" \t");
  if (i == std::string::npos || line[i] != '#') return "";
  i = line.find_first_not_of(" \t", i + 1);
  if (i == std::string::npos || line.compare(i, 7, "include") != 0) return "";
  i = line.find_first_not_of(" \t", i + 7);
  if (i == std::string::npos || line[i] != '"') return "";
  const size_t end = line.find('"', i + 1);
  return end == std::string::npos ? "" : line.substr(i + 1, end - i - 1);
}

struct Sources {
  std::map<std::string, std::vector<std::string>> includes;  // file -> the repository headers it includes
};

// Every source under the test's runfiles (the packages' `sources` filegroups) and its includes.
Sources ReadSources() {
  Sources s;
  for (const char* top : {"planner", "cli", "runtime", "kernels", "fuzz", "tests"}) {
    if (!fs::exists(top)) continue;
    for (const auto& entry : fs::recursive_directory_iterator(top)) {
      if (!entry.is_regular_file()) continue;
      const std::string path = entry.path().generic_string();
      const std::string ext = entry.path().extension().string();
      if (ext != ".h" && ext != ".cc" && ext != ".cu" && ext != ".cuh") continue;
      std::ifstream in(entry.path());
      std::vector<std::string>& inc = s.includes[path];
      std::string line;
      while (std::getline(in, line)) {
        if (const std::string header = QuotedInclude(line); !header.empty()) inc.push_back(header);
      }
    }
  }
  return s;
}

TEST_CASE("the cycle finder finds a cycle of three, not a chain") {
  Graph g = {{"a", {"b"}}, {"b", {"c"}}, {"c", {"a", "d"}}, {"d", {}}, {"e", {"d"}}};
  const auto cycles = Cycles(g);
  REQUIRE(cycles.size() == 1);
  CHECK(cycles[0] == std::vector<std::string>{"a", "b", "c"});
  g["c"] = {"d"};
  CHECK(Cycles(g).empty());
  CHECK(ModuleOf("planner/search/layout_eval_internal.h") == "planner/search/layout_eval");
  CHECK(ModuleOf("planner/search/layout_eval.cc") == "planner/search/layout_eval");
  CHECK(ModuleOf("planner/cost/step_internal_test.cc") == "planner/cost/step_internal_test");
  CHECK(PackageRank("planner/model") < PackageRank("planner/routing"));
  CHECK(PackageRank("planner/cost") < PackageRank("planner/calibration"));
  CHECK(QuotedInclude("#include \"planner/cost/cost.h\"") == "planner/cost/cost.h");
  CHECK(QuotedInclude("  #  include \"a.h\"  // why") == "a.h");
  CHECK(QuotedInclude("#include <vector>").empty());
  CHECK(QuotedInclude("// #include \"a.h\"").empty());
}

TEST_CASE("the include graph has no cycle and no include runs upward") {
  const Sources s = ReadSources();
  // The data are there: every package's sources, and a known include among them.
  REQUIRE(s.includes.size() > 300);
  REQUIRE(s.includes.count("planner/cost/cost.h"));
  const auto& cost = s.includes.at("planner/cost/cost.h");
  CHECK(std::find(cost.begin(), cost.end(), "planner/cost/moe_phases.h") != cost.end());

  Graph g;
  std::vector<std::string> upward;
  for (const auto& [file, includes] : s.includes) {
    const std::string from = ModuleOf(file);
    g[from];
    for (const std::string& header : includes) {
      if (!s.includes.count(header)) continue;  // not a source of this repository (a system or generated header)
      const std::string to = ModuleOf(header);
      if (to != from) g[from].insert(to);
      if (!IsTest(file) && PackageRank(PackageOf(header)) > PackageRank(PackageOf(file))) {
        upward.push_back(file + " includes " + header);
      }
    }
  }
  std::ostringstream report;
  for (const auto& cycle : Cycles(g)) {
    report << "cycle:";
    for (const std::string& m : cycle) {
      report << "\n  " << m << " ->";
      for (const std::string& to : g[m]) {
        if (std::find(cycle.begin(), cycle.end(), to) != cycle.end()) report << " " << to;
      }
    }
    report << "\n";
  }
  INFO(report.str());
  CHECK(report.str().empty());
  std::string up;
  for (const std::string& u : upward) up += u + "\n";
  INFO(up);
  CHECK(upward.empty());
}

}  // namespace
