// "did you mean" for a mistyped flag: CLI11 reports unknown arguments ("The following arguments
// were not expected: --seq-lenn 16"); this adds the closest flag of the program, as the library
// does for unknown JSON keys (planner/base/json_util.h DidYouMean).
#pragma once

#include <ostream>
#include <string>

#include <CLI/CLI.hpp>

namespace dockyard::cli {

// The text of `error` (from parsing `app`), followed by "; did you mean '--seq-len'?" for the
// first unknown "--flag" argument that is close to a long flag of `app` or of its subcommands
// (edit distance as DidYouMean). Unchanged for other errors or when nothing is close.
// An option given more than once (CLI11's "At Most 1 required but received 2") reads
// "--tp is given 2 times ('2', '4'): give it once".
std::string ParseErrorText(const CLI::App& app, const CLI::ParseError& error);

// Prints a parse error of `app` on `err` and returns the exit status (README "Exit codes"): a value
// that is not one of the names an option takes (its CLI11 IsMember check) is invalid input, exit 1
// ("<program>: error: --dispatcher: bogus not in {...}"), as a value out of its range is; anything
// else is a usage error, exit 2 ("<program>: usage error: <ParseErrorText>" and a pointer to --help).
int ReportParseError(const char* program, const CLI::App& app, const CLI::ParseError& error, std::ostream& err);

// Makes every switch of `app` and its subcommands refuse a second occurrence as an option does
// (CLI11 takes the last of a repeated flag by default): "--cuda-graphs is given 2 times ('true',
// 'true'): give it once", exit 2. Switches with a negated name ("!--no-...") keep their own check.
// Call after every flag is added, before parsing.
void RefuseRepeatedFlags(CLI::App& app);

}  // namespace dockyard::cli
