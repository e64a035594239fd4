// Overflow-checked int64 arithmetic for products of sizes (params, bytes, ranks).
// Throws dockyard::OverflowError (a dockyard::Error) naming what was being computed.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "planner/base/error.h"

namespace dockyard {

// The Error of a figure beyond int64: what a caller that can set one case aside (the layout search,
// which counts such a layout instead of stopping) catches; everything else treats it as an Error.
class OverflowError : public Error {
 public:
  using Error::Error;
};

inline int64_t CheckedMul(int64_t a, int64_t b, std::string_view what) {
  int64_t out = 0;
  if (__builtin_mul_overflow(a, b, &out)) {
    throw OverflowError(std::string(what) + ": " + std::to_string(a) + " * " + std::to_string(b) + " overflows a signed 64-bit integer");
  }
  return out;
}

inline int64_t CheckedAdd(int64_t a, int64_t b, std::string_view what) {
  int64_t out = 0;
  if (__builtin_add_overflow(a, b, &out)) {
    throw OverflowError(std::string(what) + ": " + std::to_string(a) + " + " + std::to_string(b) + " overflows a signed 64-bit integer");
  }
  return out;
}

}  // namespace dockyard
