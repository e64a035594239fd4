// Helpers of the end-to-end tests that run dockyard-plan on framework job configs
// (frameworks_cli_test, torchtitan_cli_test, megatron_bridge_cli_test): run it, read what it wrote,
// compare two reports' plans.
#pragma once

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "tests/run_command.h"

namespace dockyard::testing {

using Json = nlohmann::json;

// dockyard-plan ARGS from the test's runfiles, stderr apart.
inline CommandResult Plan(const std::string& args) { return RunCommand("cli/dockyard-plan " + args, StderrTo::kApart); }

// A path in the test's scratch directory ($TEST_TMPDIR, else /tmp).
inline std::string Tmp(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir ? dir : "/tmp") + "/" + name;
}

inline Json ReadJson(const std::string& path) {
  std::ifstream in(path);
  REQUIRE_MESSAGE(in.good(), path);
  return Json::parse(in);
}

inline std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

inline void WriteText(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

inline bool Exists(const std::string& path) { return std::ifstream(path).good(); }

inline bool Has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// Every section of report `a` that describes the plan (all but what produced it: generator,
// header, provenance) equals `b`'s.
inline void CheckSamePlan(const Json& a, const Json& b) {
  for (const auto& [key, value] : a.items()) {
    if (key == "generator" || key == "header" || key == "provenance") continue;
    CHECK_MESSAGE(value == b.at(key), key);
  }
}

}  // namespace dockyard::testing
