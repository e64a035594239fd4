// Routing specification text: ParseRoutingSpec and RoutingSpecText (see routing.h).
#include <charconv>
#include <cmath>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "planner/base/error.h"
#include "planner/base/json_util.h"
#include "planner/base/number_text.h"
#include "planner/routing/routing.h"

namespace dockyard {

namespace {

std::string FormatDouble(double v) {
  return fmt::format("{}", v);
}

std::vector<std::string> SplitColon(const std::string& text, size_t max_parts) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (parts.size() + 1 < max_parts) {
    const size_t colon = text.find(':', start);
    if (colon == std::string::npos) break;
    parts.push_back(text.substr(start, colon - start));
    start = colon + 1;
  }
  parts.push_back(text.substr(start));
  return parts;
}

}  // namespace

RoutingSpec ParseRoutingSpec(const std::string& text) {
  const std::string forms = "expected uniform, zipf:S, hot:H:F or trace:PATH";
  if (text.empty()) throw Error(fmt::format("routing spec is empty; {}", forms));
  RoutingSpec spec;
  const std::string kind = text.substr(0, text.find(':'));
  if (kind == "trace") {
    spec.kind = RoutingKind::kTrace;
    spec.trace_path = text.size() > 6 ? text.substr(6) : "";
    if (text.size() <= 6 || spec.trace_path.empty()) {
      throw Error(fmt::format("routing spec '{}': the trace path is empty (expected trace:PATH)", text));
    }
    return spec;
  }
  const std::vector<std::string> parts = SplitColon(text, 8);
  if (kind == "uniform") {
    if (parts.size() != 1) throw Error(fmt::format("routing spec '{}': uniform takes no parameters (expected uniform)", text));
    return spec;
  }
  if (kind == "zipf") {
    spec.kind = RoutingKind::kZipf;
    if (parts.size() < 2 || parts.size() > 3) {
      throw Error(fmt::format("routing spec '{}': expected zipf:S or zipf:S:noshuffle with S a finite number >= 0", text));
    }
    if (!ParseStrictDouble(parts[1], &spec.zipf_s) || !std::isfinite(spec.zipf_s)) {
      throw Error(
          fmt::format("routing spec '{}': Zipf exponent '{}' is not a finite number (expected zipf:S with S >= 0)", text, parts[1]));
    }
    if (spec.zipf_s < 0) {
      throw Error(fmt::format("routing spec '{}': Zipf exponent must be >= 0, got {}", text, parts[1]));
    }
    if (parts.size() == 3) {
      if (parts[2] == "noshuffle")
        spec.zipf_shuffle = false;
      else if (parts[2] == "shuffle")
        spec.zipf_shuffle = true;
      else
        throw Error(fmt::format("routing spec '{}': unknown Zipf option '{}' (expected shuffle or noshuffle)", text, parts[2]));
    }
    return spec;
  }
  if (kind == "hot") {
    spec.kind = RoutingKind::kHot;
    if (parts.size() != 3) {
      throw Error(fmt::format("routing spec '{}': expected hot:H:F (H hot experts receive fraction F of the assignments)", text));
    }
    if (!ParseStrictInt(parts[1], &spec.hot_experts)) {
      throw Error(fmt::format("routing spec '{}': hot expert count '{}' is not an integer (expected hot:H:F)", text, parts[1]));
    }
    if (spec.hot_experts < 0) {
      throw Error(fmt::format("routing spec '{}': hot expert count must be >= 0, got {}", text, spec.hot_experts));
    }
    if (!ParseStrictDouble(parts[2], &spec.hot_fraction) || !std::isfinite(spec.hot_fraction)) {
      throw Error(
          fmt::format("routing spec '{}': hot fraction '{}' is not a finite number (expected hot:H:F with 0 <= F <= 1)", text, parts[2]));
    }
    if (spec.hot_fraction < 0 || spec.hot_fraction > 1) {
      throw Error(fmt::format("routing spec '{}': hot fraction must be in [0, 1], got {}", text, parts[2]));
    }
    return spec;
  }
  std::string message = fmt::format("routing spec '{}': unknown kind '{}'; {}", text, kind, forms);
  if (auto suggestion = DidYouMean(kind, {"uniform", "zipf", "hot", "trace"})) {
    message += fmt::format("; did you mean '{}'?", *suggestion);
  }
  throw Error(message);
}

std::string RoutingSpecText(const RoutingSpec& spec) {
  switch (spec.kind) {
    case RoutingKind::kUniform:
      return "uniform";
    case RoutingKind::kZipf:
      return "zipf:" + FormatDouble(spec.zipf_s) + (spec.zipf_shuffle ? "" : ":noshuffle");
    case RoutingKind::kHot:
      return fmt::format("hot:{}:{}", spec.hot_experts, FormatDouble(spec.hot_fraction));
    case RoutingKind::kTrace:
      return "trace:" + spec.trace_path;
  }
  return "uniform";
}

}  // namespace dockyard
