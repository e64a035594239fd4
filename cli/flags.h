// Flag parsing shared by the command-line front ends: values are read as text and parsed
// strictly (decimal only: no octal "010" or hex "0x10"; no leading spaces; the value given is
// quoted back when it is out of range), and every failure is a UsageError (exit 2).
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>

#include <CLI/CLI.hpp>

namespace dockyard::cli {

// A malformed command line: the front ends print it as "usage error" and exit 2.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// nullopt for an empty text (flag not given).
std::optional<int64_t> ParseInt(const std::string& flag, const std::string& text);
std::optional<double> ParseNumber(const std::string& flag, const std::string& text);

// Throws UsageError for any given option of `app` whose value is an empty string.
void RejectEmptyValues(const CLI::App& app);

}  // namespace dockyard::cli
