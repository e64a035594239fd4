// Shared helpers of the libFuzzer targets in fuzz/ (built by tools/run_fuzz.sh with clang
// -fsanitize=fuzzer,address,undefined; not a Bazel package's concern).
//
// Contract checked by every target: an input is either accepted or rejected with a
// dockyard::Error. Any other exception escapes the target and libFuzzer reports it as a crash
// ("deadly signal" after std::terminate), as are sanitizer reports, timeouts and leaks.
#pragma once

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "planner/base/json_util.h"

namespace dockyard_fuzz {

// Aborts with a message: a broken invariant is a crash for libFuzzer.
[[noreturn]] inline void Fail(const std::string& what) {
  std::fprintf(stderr, "fuzz invariant broken: %s\n", what.c_str());
  std::abort();
}

// Every number in a report must be finite (nlohmann writes NaN and inf as null).
inline void CheckFinite(const dockyard::Json& j, const std::string& where = "") {
  if (j.is_number_float() && !std::isfinite(j.get<double>())) Fail("non-finite number at " + where);
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it) CheckFinite(it.value(), where + "/" + it.key());
  } else if (j.is_array()) {
    for (size_t i = 0; i < j.size(); ++i) CheckFinite(j[i], where + "/" + std::to_string(i));
  }
}

}  // namespace dockyard_fuzz
