// "did you mean" for a mistyped flag: CLI11 reports unknown arguments ("The following arguments
// were not expected: --seq-lenn 16"); this adds the closest flag of the program, as the library
// does for unknown JSON keys (planner/base/json_util.h DidYouMean).
#pragma once

#include <string>

#include <CLI/CLI.hpp>

namespace dockyard::cli {

// The text of `error` (from parsing `app`), followed by "; did you mean '--seq-len'?" for the
// first unknown "--flag" argument that is close to a long flag of `app` or of its subcommands
// (edit distance as DidYouMean). Unchanged for other errors or when nothing is close.
std::string ParseErrorText(const CLI::App& app, const CLI::ParseError& error);

}  // namespace dockyard::cli
