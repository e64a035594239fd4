// dockyard's one library exception type.
//
// Every invalid input (bad model config, degrees that break a rule, unreadable file) is
// reported by throwing dockyard::Error with a message that names the field, its value and the
// rule, e.g. "ep (3) must divide num_experts (64)" or, for JSON input,
// "mixtral.json: /num_local_experts: must be >= 1, got 0". Only main() catches it
// (cli/), prints "dockyard-plan: error: <message>" and exits 1.
#pragma once

#include <stdexcept>
#include <string>

namespace dockyard {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// Runs `fn` and returns its result; an Error it throws comes back with the command-line flag that
// gave the input in front, so a message about a file says which flag named it:
// WithFlag("--calibration", load) turns "cal.json: /format: ..." into
// "--calibration: cal.json: /format: ...".
template <typename F>
auto WithFlag(const std::string& flag, F&& fn) -> decltype(fn()) {
  try {
    return fn();
  } catch (const Error& e) {
    throw Error(flag + ": " + e.what());
  }
}

}  // namespace dockyard
