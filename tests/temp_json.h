// Test helper: a JSON document written to a file in $TEST_TMPDIR (or /tmp), for tests that read
// reports back (plan files).
#pragma once

#include <cstdlib>
#include <fstream>
#include <string>

#include "planner/base/json_util.h"

namespace dockyard::testing {

// Writes `j` (indent 1) to NAME in $TEST_TMPDIR (or /tmp) and returns the path.
inline std::string WriteTempJson(const Json& j, const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string path = std::string(dir ? dir : "/tmp") + "/" + name;
  std::ofstream(path) << j.dump(1);
  return path;
}

}  // namespace dockyard::testing
