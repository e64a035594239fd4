// Strict flag parsing (see flags.h).
#include "cli/flags.h"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>

#include <fmt/format.h>

#include "planner/error.h"
#include "planner/file_util.h"

namespace dockyard::cli {

std::optional<int64_t> ParseInt(const std::string& flag, const std::string& text) {
  if (text.empty()) return std::nullopt;
  size_t i = text[0] == '-' || text[0] == '+' ? 1 : 0;
  bool digits = i < text.size();
  for (size_t j = i; j < text.size(); ++j) digits = digits && text[j] >= '0' && text[j] <= '9';
  if (!digits) throw UsageError(fmt::format("{} \"{}\": expected a decimal integer", flag, text));
  errno = 0;
  const long long v = std::strtoll(text.c_str(), nullptr, 10);
  if (errno == ERANGE) throw UsageError(fmt::format("{} \"{}\": out of the 64-bit integer range", flag, text));
  return v;
}

std::optional<double> ParseNumber(const std::string& flag, const std::string& text) {
  if (text.empty()) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(text.c_str(), &end);
  if (std::isspace(static_cast<unsigned char>(text.front())) || end != text.c_str() + text.size() || errno == ERANGE ||
      !std::isfinite(v) || text.find_first_of("xXpP") != std::string::npos) {
    throw UsageError(fmt::format("{} \"{}\": expected a finite decimal number", flag, text));
  }
  return v;
}

void RejectEmptyValues(const CLI::App& app) {
  for (const CLI::Option* opt : app.get_options()) {
    if (opt->count() == 0 || opt->get_type_size() == 0) continue;
    for (const auto& v : opt->results()) {
      if (v.empty()) throw UsageError(fmt::format("{} needs a value, got an empty string", opt->get_name()));
    }
  }
}

int RunReportingErrors(const char* program, const char* oom_text, std::ostream& err, const std::function<int()>& body) {
  try {
    return body();
  } catch (const UsageError& e) {
    err << program << ": usage error: " << e.what() << "\nRun '" << program << " --help' for usage.\n";
    return 2;
  } catch (const Error& e) {
    err << program << ": error: " << e.what() << "\n";
    return 1;
  } catch (const std::bad_alloc&) {
    err << program << ": error: " << oom_text << "\n";
    return 1;
  } catch (const std::exception& e) {
    // Not expected: every input error is a dockyard::Error. Still exit cleanly, never abort.
    err << program << ": error: internal error: " << e.what() << "\n";
    return 1;
  }
}

void WriteOutput(const std::string& path, const std::string& content, std::ostream& out) {
  if (path == "-") {
    out << content;
  } else {
    WriteFileAtomically(path, content);
  }
}

}  // namespace dockyard::cli
