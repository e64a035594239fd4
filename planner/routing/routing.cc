// Routing model of the simulator (see routing.h).
#include "planner/routing/routing.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <map>
#include <numeric>
#include <sstream>
#include <sys/stat.h>

#include <fmt/format.h>

#include "planner/base/checked_math.h"
#include "planner/base/error.h"
#include "planner/routing/group_routing.h"
#include "planner/base/json_util.h"

namespace dockyard {

namespace {

// The rank index of the per-layer Zipf shuffle stream (no EP rank reaches it).
constexpr uint64_t kShuffleStream = ~uint64_t{0};

// An expert whose target inclusion probability is above 1 - kForceEpsilon is picked by every
// token (it would miss fewer than one token in a million).
constexpr double kForceEpsilon = 1e-6;

// Sanity bound on the size of the dispatch matrices of one SampleRouting call.
constexpr int64_t kMaxMatrixEntries = int64_t{1} << 28;

}  // namespace

// ---------------------------------------------------------------------------------------------
// Spec text.

namespace {

std::string FormatDouble(double v) {
  return fmt::format("{}", v);
}

// Strict decimal number: digits, one optional sign, '.', exponent; the whole text consumed.
bool ParseStrictDouble(const std::string& text, double* out) {
  if (text.empty()) return false;
  for (char c : text) {
    if (!(std::isdigit(static_cast<unsigned char>(c)) || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-')) {
      return false;
    }
  }
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size()) return false;
  *out = v;
  return true;
}

bool ParseStrictInt(const std::string& text, int64_t* out) {
  if (text.empty()) return false;
  const char* first = text.data();
  const char* last = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(first, last, *out);
  return ec == std::errc() && ptr == last;
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

// ---------------------------------------------------------------------------------------------
// Traces.

namespace {

std::string ReadTraceFile(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) throw Error(fmt::format("{}: cannot open routing trace: no such file", path));
  if (S_ISDIR(st.st_mode)) throw Error(fmt::format("{}: is a directory, expected a routing trace file", path));
  if (!S_ISREG(st.st_mode)) {
    throw Error(fmt::format("{}: is not a regular file (a device or pipe?), expected a routing trace file", path));
  }
  if (st.st_size > kMaxJsonFileBytes) {
    throw Error(fmt::format("{}: file is {} bytes, larger than the {} bytes a routing trace may have", path,
                            static_cast<int64_t>(st.st_size), kMaxJsonFileBytes));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(fmt::format("{}: cannot open for reading", path));
  std::ostringstream buffer;
  buffer << in.rdbuf();
  std::string text = buffer.str();
  if (text.find_first_not_of(" \t\r\n") == std::string::npos) {
    throw Error(fmt::format("{}: file is empty (expected a routing trace)", path));
  }
  return text;
}

bool EndsWith(const std::string& s, const std::string& suffix) {
  if (s.size() < suffix.size()) return false;
  for (size_t i = 0; i < suffix.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(s[s.size() - suffix.size() + i])) != suffix[i]) return false;
  }
  return true;
}

int64_t TraceCount(const Json& v, const std::string& where) {
  if (v.is_number_integer()) {
    if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
      throw Error(fmt::format("{}: value {} does not fit in a signed 64-bit integer", where, JsonValueText(v)));
    }
    const int64_t out = v.get<int64_t>();
    if (out < 0) throw Error(fmt::format("{}: token count must be >= 0, got {}", where, out));
    return out;
  }
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) <= 9.0e15) {
      if (d < 0) throw Error(fmt::format("{}: token count must be >= 0, got {}", where, JsonValueText(v)));
      return static_cast<int64_t>(d);
    }
    throw Error(fmt::format("{}: token count must be an integer >= 0, got {}", where, JsonValueText(v)));
  }
  throw Error(fmt::format("{}: token count must be an integer >= 0, got {} {}", where, v.type_name(), JsonValueText(v)));
}

RoutingTrace ParseJsonTrace(const std::string& path, const std::string& text) {
  const Json root = ParseJsonText(text, path);
  JsonView view(&root, path, "");
  view.RejectUnknownKeys({"num_experts", "layers", "description"});
  RoutingTrace trace;
  trace.path = path;
  trace.num_experts = view.Int("num_experts", 1);
  (void)view.StringOr("description", "");
  if (!view.Has("layers")) view.Fail("layers", "required key is missing (an array of per-layer token counts)");
  const Json& layers = root.at("layers");
  if (!layers.is_array() || layers.empty()) {
    view.Fail("layers", fmt::format("must be a non-empty array of layers (arrays of {} token counts), got {} {}", trace.num_experts,
                                    layers.type_name(), JsonValueText(layers)));
  }
  for (size_t l = 0; l < layers.size(); ++l) {
    const std::string where = fmt::format("{}: /layers/{}", path, l);
    const Json& row = layers[l];
    if (!row.is_array()) {
      throw Error(
          fmt::format("{}: must be an array of {} token counts, got {} {}", where, trace.num_experts, row.type_name(), JsonValueText(row)));
    }
    if (static_cast<int64_t>(row.size()) != trace.num_experts) {
      throw Error(fmt::format("{}: has {} token counts, num_experts is {}", where, row.size(), trace.num_experts));
    }
    std::vector<int64_t> counts(row.size());
    int64_t total = 0;
    for (size_t e = 0; e < row.size(); ++e) {
      counts[e] = TraceCount(row[e], fmt::format("{}/{}", where, e));
      total = CheckedAdd(total, counts[e], where + ": total token count");
    }
    if (total == 0) throw Error(fmt::format("{}: all token counts are 0; a layer needs a positive total", where));
    trace.layers.push_back(std::move(counts));
  }
  return trace;
}

std::string Trim(const std::string& s) {
  return TrimSpaces(s);
}

// One data line of a CSV trace.
struct CsvRow {
  int64_t layer, expert, tokens, line;
};

// The comma-separated fields of a line, each trimmed.
std::vector<std::string> SplitCsvLine(const std::string& line) {
  std::vector<std::string> fields;
  size_t start = 0;
  while (true) {
    const size_t comma = line.find(',', start);
    fields.push_back(Trim(line.substr(start, comma == std::string::npos ? std::string::npos : comma - start)));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return fields;
}

// A data line's layer, expert and tokens: integers >= 0, layer and expert < 2^31.
CsvRow ParseCsvRow(const std::string& path, int64_t line_no, const std::vector<std::string>& fields) {
  if (fields.size() != 3) {
    throw Error(fmt::format("{}: line {}: expected 3 comma-separated fields (layer,expert,tokens), got {}", path, line_no, fields.size()));
  }
  CsvRow row{0, 0, 0, line_no};
  const char* names[3] = {"layer", "expert", "tokens"};
  int64_t* slots[3] = {&row.layer, &row.expert, &row.tokens};
  for (int f = 0; f < 3; ++f) {
    if (!ParseStrictInt(fields[f], slots[f])) {
      throw Error(fmt::format("{}: line {}: {} must be an integer >= 0, got '{}'", path, line_no, names[f], fields[f]));
    }
    if (*slots[f] < 0) throw Error(fmt::format("{}: line {}: {} must be >= 0, got {}", path, line_no, names[f], *slots[f]));
  }
  if (row.layer > INT32_MAX) throw Error(fmt::format("{}: line {}: layer must be < 2^31, got {}", path, line_no, row.layer));
  if (row.expert > INT32_MAX) throw Error(fmt::format("{}: line {}: expert must be < 2^31, got {}", path, line_no, row.expert));
  return row;
}

// The data lines after the 'layer,expert,tokens' header, in file order (blank lines skipped).
std::vector<CsvRow> ReadCsvRows(const std::string& path, const std::string& text) {
  std::vector<CsvRow> rows;
  std::istringstream in(text);
  std::string line;
  int64_t line_no = 0;
  bool header_seen = false;
  while (std::getline(in, line)) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const std::vector<std::string> fields = SplitCsvLine(line);
    if (!header_seen) {
      if (fields != std::vector<std::string>{"layer", "expert", "tokens"}) {
        throw Error(fmt::format("{}: line {}: the header must be 'layer,expert,tokens', got '{}'", path, line_no,
                                line.size() > 60 ? line.substr(0, 57) + "..." : line));
      }
      header_seen = true;
      continue;
    }
    if (Trim(line).empty()) continue;
    rows.push_back(ParseCsvRow(path, line_no, fields));
  }
  if (rows.empty()) throw Error(fmt::format("{}: no data lines after the header 'layer,expert,tokens'", path));
  return rows;
}

// Rejects a (layer, expert) given twice in the sorted rows, naming the earliest repeated line.
void CheckNoDuplicateRows(const std::string& path, const std::vector<CsvRow>& rows) {
  const CsvRow* worst_duplicate = nullptr;
  const CsvRow* first_of_duplicate = nullptr;
  for (size_t i = 1; i < rows.size(); ++i) {
    if (rows[i].layer == rows[i - 1].layer && rows[i].expert == rows[i - 1].expert) {
      if (!worst_duplicate || rows[i].line < worst_duplicate->line) {
        worst_duplicate = &rows[i];
        first_of_duplicate = &rows[i - 1];
      }
    }
  }
  if (worst_duplicate) {
    // rows with equal keys keep file order (stable sort), so rows[i-1] is an earlier line.
    throw Error(fmt::format("{}: line {}: layer {} expert {} is already given on line {}", path, worst_duplicate->line,
                            worst_duplicate->layer, worst_duplicate->expert, first_of_duplicate->line));
  }
}

// Every (layer, expert) pair exactly once: check the sorted rows walk 0..max_layer x
// 0..max_expert before allocating anything sized by those maxima.
void CheckNoGaps(const std::string& path, const std::vector<CsvRow>& rows, int64_t max_layer, int64_t max_expert) {
  size_t i = 0;
  for (int64_t l = 0; l <= max_layer; ++l) {
    if (i == rows.size() || rows[i].layer != l) {
      throw Error(fmt::format("{}: no lines for layer {} (layers must be numbered 0..{} without gaps)", path, l, max_layer));
    }
    for (int64_t e = 0; e <= max_expert; ++e, ++i) {
      if (i == rows.size() || rows[i].layer != l || rows[i].expert != e) {
        throw Error(fmt::format("{}: layer {} has no line for expert {} (every layer must list experts 0..{})", path, l, e, max_expert));
      }
    }
  }
}

RoutingTrace ParseCsvTrace(const std::string& path, const std::string& text) {
  std::vector<CsvRow> rows = ReadCsvRows(path, text);
  std::stable_sort(rows.begin(), rows.end(),
                   [](const CsvRow& a, const CsvRow& b) { return a.layer != b.layer ? a.layer < b.layer : a.expert < b.expert; });
  int64_t max_layer = 0, max_expert = 0;
  for (const CsvRow& r : rows) {
    max_layer = std::max(max_layer, r.layer);
    max_expert = std::max(max_expert, r.expert);
  }
  // First duplicates (by the later line), then gaps.
  CheckNoDuplicateRows(path, rows);
  CheckNoGaps(path, rows, max_layer, max_expert);
  RoutingTrace trace;
  trace.path = path;
  trace.num_experts = max_expert + 1;
  size_t i = 0;
  for (int64_t l = 0; l <= max_layer; ++l) {
    std::vector<int64_t> counts(static_cast<size_t>(trace.num_experts), 0);
    int64_t total = 0;
    for (int64_t e = 0; e <= max_expert; ++e, ++i) {
      counts[static_cast<size_t>(e)] = rows[i].tokens;
      total = CheckedAdd(total, rows[i].tokens, fmt::format("{}: layer {}: total token count", path, l));
    }
    if (total == 0) throw Error(fmt::format("{}: layer {}: all token counts are 0; a layer needs a positive total", path, l));
    trace.layers.push_back(std::move(counts));
  }
  return trace;
}

}  // namespace

RoutingTrace LoadRoutingTrace(const std::string& path) {
  if (path.empty()) throw Error("routing trace path is empty");
  const std::string text = ReadTraceFile(path);
  bool json = false;
  if (EndsWith(path, ".json"))
    json = true;
  else if (EndsWith(path, ".csv"))
    json = false;
  else
    json = text[text.find_first_not_of(" \t\r\n")] == '{';
  return json ? ParseJsonTrace(path, text) : ParseCsvTrace(path, text);
}

// ---------------------------------------------------------------------------------------------
// Samplers.

namespace routing_detail {

enum class DrawMode { kNone, kUniformReject, kUniformShuffle, kWeighted, kGrouped };

struct LayerSampler {
  int64_t num_experts = 0, top_k = 0;
  std::vector<int32_t> forced;    // experts every token picks
  std::vector<int32_t> free_ids;  // global ids of the drawn experts [n]
  int64_t free_k = 0;             // picks drawn per token (top_k - forced)
  DrawMode mode = DrawMode::kNone;
  // Weighted draws over the free experts: per-draw probabilities and an alias table. Column c
  // keeps c when the low 64 bits of (x * n) are below threshold[c], else takes alias[c].
  std::vector<double> prob;         // [n], sums to 1
  std::vector<uint64_t> threshold;  // [n]
  std::vector<uint32_t> alias;      // [n]
  std::vector<double> share;        // [E] target share of the assignments
  double calibration_error = 0;     // max |inclusion - target| after calibration
  // kGrouped (group_routing.h): the two-stage draw over free_ids = 0..E-1, nothing forced.
  std::shared_ptr<const GroupSampler> grouped;
};


}  // namespace routing_detail

using routing_detail::DrawMode;
using routing_detail::LayerSampler;

namespace {

// Target inclusion probabilities (sum top_k, each in [0, 1]) from weights: pi = min(1, c * w)
// (water-filling); with fewer than top_k positive weights, the positive ones get 1 and the rest
// of the picks go evenly to the zero-weight experts.
std::vector<double> TargetInclusion(const std::vector<double>& w, int64_t k) {
  const size_t n = w.size();
  std::vector<double> pi(n, 0.0);
  std::vector<size_t> order;
  for (size_t e = 0; e < n; ++e) {
    if (w[e] > 0) order.push_back(e);
  }
  const int64_t positive = static_cast<int64_t>(order.size());
  if (positive <= k) {
    for (size_t e : order) pi[e] = 1.0;
    if (static_cast<int64_t>(n) > positive) {
      const double rest = static_cast<double>(k - positive) / static_cast<double>(static_cast<int64_t>(n) - positive);
      for (size_t e = 0; e < n; ++e) {
        if (w[e] <= 0) pi[e] = rest;
      }
    }
    return pi;
  }
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return w[a] > w[b]; });
  // suffix[m] = sum of the weights order[m..], summed from the smallest for accuracy.
  std::vector<double> suffix(order.size() + 1, 0.0);
  for (size_t m = order.size(); m-- > 0;) suffix[m] = suffix[m + 1] + w[order[m]];
  size_t m = 0;
  while (static_cast<int64_t>(m) < k && suffix[m] > 0 &&
         static_cast<double>(k - static_cast<int64_t>(m)) * w[order[m]] / suffix[m] >= 1.0 - kForceEpsilon) {
    pi[order[m]] = 1.0;
    ++m;
  }
  if (static_cast<int64_t>(m) < k && suffix[m] > 0) {
    const double c = static_cast<double>(k - static_cast<int64_t>(m)) / suffix[m];
    for (size_t j = m; j < order.size(); ++j) pi[order[j]] = std::min(1.0, c * w[order[j]]);
  }
  return pi;
}

// Inclusion probabilities of successive sampling (k draws without replacement, per-draw
// weights w) by the exponential-clock representation: expert i has a clock X_i ~ Exp(w_i), the
// k first clocks are picked, so
//   pi_i = integral_0^inf w_i exp(-w_i t) P(fewer than k other clocks before t) dt.
// The integral is taken over u = ln t by the trapezoid rule (exponentially accurate for this
// smooth, doubly decaying integrand); the Poisson-binomial count of the other clocks comes from
// prefix and suffix distributions truncated at k.
std::vector<double> SuccessiveInclusion(const std::vector<double>& weights, int64_t k) {
  const size_t n = weights.size();
  const size_t kk = static_cast<size_t>(k);
  double total = 0;
  for (double x : weights) total += x;
  std::vector<double> w(n);
  for (size_t i = 0; i < n; ++i) w[i] = weights[i] / total;
  std::vector<double> sorted = w;
  std::sort(sorted.begin(), sorted.end(), std::greater<double>());
  const double w_max = sorted[0];
  // The (k+1)-th largest weight, floored so that the integration range stays finite.
  const double w_tail = std::max(sorted[std::min(n - 1, kk)], 1e-280);
  // Below t_lo every integrand is under w_i t_lo <= 1e-13; above t_hi at least k of the k+1
  // heaviest other clocks have run out, except with probability (k+1) e^-40.
  const double u_lo = std::log(1e-13 / w_max);
  const double u_hi = std::log((40.0 + std::log(static_cast<double>(kk + 1))) / w_tail);
  const double step_target = 0.125;
  const int64_t steps = std::min<int64_t>(1 << 16, std::max<int64_t>(16, static_cast<int64_t>(std::ceil((u_hi - u_lo) / step_target))));
  const double h = (u_hi - u_lo) / static_cast<double>(steps);
  std::vector<double> pi(n, 0.0), fired(n), waiting(n), pre(kk), suffix_cum((n + 1) * kk), dist(kk);
  for (int64_t s = 0; s <= steps; ++s) {
    const double t = std::exp(u_lo + h * static_cast<double>(s));
    for (size_t j = 0; j < n; ++j) {
      waiting[j] = std::exp(-w[j] * t);
      fired[j] = -std::expm1(-w[j] * t);
    }
    // Suffix distributions of the count of fired clocks among j..n-1, as cumulative P(<= b).
    std::fill(dist.begin(), dist.end(), 0.0);
    dist[0] = 1.0;
    for (size_t b = 0; b < kk; ++b) suffix_cum[n * kk + b] = 1.0;
    for (size_t j = n; j-- > 0;) {
      for (size_t c = kk; c-- > 1;) dist[c] = dist[c] * waiting[j] + dist[c - 1] * fired[j];
      dist[0] *= waiting[j];
      double cum = 0;
      for (size_t b = 0; b < kk; ++b) {
        cum += dist[b];
        suffix_cum[j * kk + b] = cum;
      }
    }
    std::fill(pre.begin(), pre.end(), 0.0);
    pre[0] = 1.0;
    const double weight = (s == 0 || s == steps) ? 0.5 * h : h;
    for (size_t i = 0; i < n; ++i) {
      double fewer = 0;  // P(fewer than k of the others fired)
      const double* suf = &suffix_cum[(i + 1) * kk];
      for (size_t a = 0; a < kk; ++a) fewer += pre[a] * suf[kk - 1 - a];
      pi[i] += weight * w[i] * t * waiting[i] * fewer;
      for (size_t c = kk; c-- > 1;) pre[c] = pre[c] * waiting[i] + pre[c - 1] * fired[i];
      pre[0] *= waiting[i];
    }
  }
  return pi;
}

// Per-draw weights whose successive-sampling inclusion probabilities are `target` (each in
// (0, 1), summing to k): start from -ln(1 - target) (exact if the k-th clock always stopped at
// t = 1) and correct by the same transform of the error until the largest error is below 1e-8
// (a share error far below the sampling noise of any simulated batch).
std::vector<double> CalibrateWeights(const std::vector<double>& target, int64_t k, double* error) {
  const size_t n = target.size();
  std::vector<double> w(n);
  for (size_t i = 0; i < n; ++i) w[i] = -std::log1p(-target[i]);
  *error = 1.0;
  for (int iter = 0; iter < 60; ++iter) {
    const std::vector<double> pi = SuccessiveInclusion(w, k);
    double worst = 0;
    for (size_t i = 0; i < n; ++i) worst = std::max(worst, std::fabs(pi[i] - target[i]));
    *error = worst;
    if (worst < 1e-8) break;
    double total = 0;
    for (size_t i = 0; i < n; ++i) {
      const double got = std::min(std::max(pi[i], 1e-300), 1.0 - 1e-15);
      w[i] *= std::log1p(-target[i]) / std::log1p(-got);
      total += w[i];
    }
    for (double& x : w) x /= total;
  }
  return w;
}

void BuildAlias(LayerSampler& s) {
  s.threshold.resize(s.prob.size());
  s.alias.resize(s.prob.size());
  routing_detail::BuildAliasTable(s.prob.data(), s.prob.size(), s.threshold.data(), s.alias.data());
}

// A sampler for one weight vector over the experts (ids 0..E-1).
LayerSampler BuildSampler(const std::vector<double>& weights, int64_t top_k) {
  LayerSampler s;
  s.num_experts = static_cast<int64_t>(weights.size());
  s.top_k = top_k;
  const std::vector<double> pi = TargetInclusion(weights, top_k);
  s.share.resize(pi.size());
  std::vector<double> free_target;
  for (size_t e = 0; e < pi.size(); ++e) {
    s.share[e] = pi[e] / static_cast<double>(top_k);
    if (pi[e] >= 1.0) {
      s.forced.push_back(static_cast<int32_t>(e));
    } else if (pi[e] > 0) {
      s.free_ids.push_back(static_cast<int32_t>(e));
      free_target.push_back(pi[e]);
    }
  }
  s.free_k = top_k - static_cast<int64_t>(s.forced.size());
  const int64_t n = static_cast<int64_t>(s.free_ids.size());
  if (s.free_k <= 0 || n == 0) {
    s.free_k = 0;
    s.free_ids.clear();
    s.mode = DrawMode::kNone;
    return s;
  }
  if (n <= s.free_k) {  // cannot happen with exact arithmetic (targets < 1 summing to free_k)
    for (int32_t e : s.free_ids) {
      s.forced.push_back(e);
      s.share[static_cast<size_t>(e)] = 1.0 / static_cast<double>(top_k);
    }
    std::sort(s.forced.begin(), s.forced.end());
    s.free_ids.clear();
    s.free_k = 0;
    s.mode = DrawMode::kNone;
    return s;
  }
  const auto [lo, hi] = std::minmax_element(free_target.begin(), free_target.end());
  if (*hi - *lo <= 1e-12 * *hi) {
    s.mode = 2 * s.free_k <= n ? DrawMode::kUniformReject : DrawMode::kUniformShuffle;
    return s;
  }
  s.mode = DrawMode::kWeighted;
  std::vector<double> w = CalibrateWeights(free_target, s.free_k, &s.calibration_error);
  double total = 0;
  for (double x : w) total += x;
  s.prob.resize(w.size());
  for (size_t i = 0; i < w.size(); ++i) s.prob[i] = w[i] / total;
  BuildAlias(s);
  return s;
}

// The sampler with expert ids mapped through `perm` (base expert e becomes perm[e]).
LayerSampler Permuted(const LayerSampler& base, const std::vector<int32_t>& perm) {
  LayerSampler s = base;
  for (auto& e : s.forced) e = perm[e];
  std::sort(s.forced.begin(), s.forced.end());
  for (auto& e : s.free_ids) e = perm[e];
  for (size_t e = 0; e < base.share.size(); ++e) s.share[perm[e]] = base.share[e];
  return s;
}

// Per-token scratch of one source rank: a stamp per free expert marks the current token's picks
// (no clearing between tokens), a permutation for Fisher-Yates draws.
struct Scratch {
  std::vector<uint32_t> stamp;
  std::vector<uint32_t> perm;
  uint32_t current = 0;

  void Reset(size_t n) {
    stamp.assign(n, 0);
    perm.resize(n);
    std::iota(perm.begin(), perm.end(), 0u);
    current = 0;
  }
  void NextToken() {
    if (++current == 0) {  // wrapped after 2^32 tokens
      std::fill(stamp.begin(), stamp.end(), 0u);
      current = 1;
    }
  }
};

// Exact draw among the unpicked free experts in proportion to prob (linear scan; the total is
// summed branch-free, the walk stops at the first unpicked expert past the drawn mass).
inline uint32_t ScanDraw(const LayerSampler& s, Scratch& sc, Xoshiro256ss& rng) {
  const size_t n = s.prob.size();
  const double* prob = s.prob.data();
  const uint32_t* stamp = sc.stamp.data();
  const uint32_t cur = sc.current;
  double total = 0;
  for (size_t j = 0; j < n; ++j) total += stamp[j] != cur ? prob[j] : 0.0;
  double u = rng.Uniform01() * total;
  size_t last = n;
  for (size_t j = 0; j < n; ++j) {
    if (stamp[j] == cur) continue;
    last = j;
    u -= prob[j];
    if (u < 0) return static_cast<uint32_t>(j);
  }
  return static_cast<uint32_t>(last);  // rounding: the last unpicked expert
}

template <class Sink>
void DrawFreeTokens(const LayerSampler& s, Xoshiro256ss& rng, int64_t tokens, Scratch& sc, Sink& sink);

// Draws the free picks of `tokens` tokens. sink.BeginToken() and sink.Pick(free_index) per token.
template <class Sink>
void DrawTokens(const LayerSampler& s, Xoshiro256ss& rng, int64_t tokens, Scratch& sc, Sink& sink) {
  switch (s.mode) {
    case DrawMode::kNone:
      for (int64_t t = 0; t < tokens; ++t) sink.BeginToken();
      return;
    case DrawMode::kGrouped:
      s.grouped->Draw(rng, tokens, sink);
      return;
    default: {
      // The loops run on a local copy of the generator, written back after (the same stream):
      // the sink's stores could otherwise alias its state and keep it in memory.
      Xoshiro256ss local = rng;
      DrawFreeTokens(s, local, tokens, sc, sink);
      rng = local;
    }
  }
}

// DrawTokens' one-stage modes (kUniformReject, kUniformShuffle, kWeighted).
template <class Sink>
void DrawFreeTokens(const LayerSampler& s, Xoshiro256ss& rng, int64_t tokens, Scratch& sc, Sink& sink) {
  const uint64_t n = s.free_ids.size();
  const int64_t k = s.free_k;
  switch (s.mode) {
    case DrawMode::kNone:
    case DrawMode::kGrouped:
      return;  // DrawTokens
    case DrawMode::kUniformReject: {
      uint32_t* stamp = sc.stamp.data();
      // A power-of-two n (128 experts) takes whole bits, several draws per generator output
      // (Xoshiro256ss::Bits); others draw Below().
      const int bits = Log2IfPow2(n);
      for (int64_t t = 0; t < tokens; ++t) {
        sink.BeginToken();
        sc.NextToken();
        const uint32_t cur = sc.current;
        for (int64_t i = 0; i < k; ++i) {
          uint64_t idx;
          do {
            idx = bits > 0 ? rng.Bits(bits) : rng.Below(n);
          } while (stamp[idx] == cur);  // duplicates: probability < 1/2 per draw since 2k <= n
          stamp[idx] = cur;
          sink.Pick(static_cast<uint32_t>(idx));
        }
      }
      return;
    }
    case DrawMode::kUniformShuffle: {
      uint32_t* perm = sc.perm.data();
      for (int64_t t = 0; t < tokens; ++t) {
        sink.BeginToken();
        for (int64_t i = 0; i < k; ++i) {
          const uint64_t j = static_cast<uint64_t>(i) + rng.Below(n - static_cast<uint64_t>(i));
          std::swap(perm[i], perm[j]);
          sink.Pick(perm[i]);
        }
      }
      return;
    }
    case DrawMode::kWeighted: {
      uint32_t* stamp = sc.stamp.data();
      const uint64_t* threshold = s.threshold.data();
      const uint32_t* alias = s.alias.data();
      const double* prob = s.prob.data();
      // Below this remaining draw mass, rejection would need more than n/2 draws on average:
      // scan instead.
      const double scan_below = 2.0 / static_cast<double>(n);
      for (int64_t t = 0; t < tokens; ++t) {
        sink.BeginToken();
        sc.NextToken();
        const uint32_t cur = sc.current;
        double remaining = 1.0;
        for (int64_t i = 0; i < k; ++i) {
          uint32_t idx = 0;
          bool drawn = false;
          if (remaining >= scan_below) {
            for (int attempt = 0; attempt < 64; ++attempt) {
              idx = routing_detail::AliasPick(threshold, alias, n, rng.Next());
              if (stamp[idx] != cur) {
                drawn = true;
                break;
              }
            }
          }
          if (!drawn) idx = ScanDraw(s, sc, rng);
          stamp[idx] = cur;
          remaining -= prob[idx];
          sink.Pick(idx);
        }
      }
      return;
    }
  }
}

struct CountSink {
  int64_t* counts;
  void BeginToken() {}
  void Pick(uint32_t idx) { ++counts[idx]; }
};

struct RecordSink {
  const LayerSampler* s;
  int32_t* out;
  void BeginToken() {
    for (int32_t e : s->forced) *out++ = e;
  }
  void Pick(uint32_t idx) { *out++ = s->free_ids[idx]; }
};

// Sets token u's bit in the words of the experts it picks (TokenHitStream).
struct HitSink {
  const int32_t* free_ids;             // LayerSampler::free_ids
  const int32_t *forced, *forced_end;  // LayerSampler::forced
  uint64_t* hit;
  uint64_t next_bit = 1;  // the bit of the token BeginToken starts
  uint64_t bit = 0;
  void BeginToken() {
    bit = next_bit;
    next_bit <<= 1;
    for (const int32_t* e = forced; e != forced_end; ++e) hit[*e] |= bit;
  }
  void Pick(uint32_t idx) { hit[free_ids[idx]] |= bit; }
};
// The same for the group-limited draw, whose picks are the experts themselves (free_ids = 0..E-1,
// nothing forced): one load and one register less in its inner loop.
struct ExpertHitSink {
  uint64_t* hit;
  uint64_t next_bit = 1;
  uint64_t bit = 0;
  void BeginToken() {
    bit = next_bit;
    next_bit <<= 1;
  }
  void Pick(uint32_t expert) { hit[expert] |= bit; }
};

void Require(bool ok, const std::string& message) {
  if (!ok) throw Error(message);
}

}  // namespace

RoutingModel PrepareRouting(const RoutingSpec& spec, int64_t num_experts, int64_t top_k, int64_t num_layers) {
  Require(num_experts >= 1, fmt::format("num_experts must be >= 1, got {}", num_experts));
  Require(num_experts <= INT32_MAX, fmt::format("num_experts must be < 2^31 for routing, got {}", num_experts));
  Require(top_k >= 1 && top_k <= num_experts, fmt::format("top_k ({}) must be in [1, num_experts ({})]", top_k, num_experts));
  Require(num_layers >= 0, fmt::format("num_layers (MoE layers) must be >= 0, got {}", num_layers));
  RoutingModel model;
  model.spec = spec;
  model.num_experts = num_experts;
  model.top_k = top_k;
  model.num_layers = num_layers;
  const size_t E = static_cast<size_t>(num_experts);
  auto all_layers = [&](std::shared_ptr<const LayerSampler> s) { model.layers.assign(static_cast<size_t>(num_layers), s); };
  switch (spec.kind) {
    case RoutingKind::kUniform:
      all_layers(std::make_shared<const LayerSampler>(BuildSampler(std::vector<double>(E, 1.0), top_k)));
      break;
    case RoutingKind::kZipf: {
      Require(std::isfinite(spec.zipf_s) && spec.zipf_s >= 0,
              fmt::format("Zipf exponent (zipf_s) must be a finite number >= 0, got {}", FormatDouble(spec.zipf_s)));
      std::vector<double> w(E);
      for (size_t e = 0; e < E; ++e) w[e] = std::pow(static_cast<double>(e + 1), -spec.zipf_s);
      const auto base = std::make_shared<const LayerSampler>(BuildSampler(w, top_k));
      if (!spec.zipf_shuffle) {
        all_layers(base);
        break;
      }
      for (int64_t l = 0; l < num_layers; ++l) {
        Xoshiro256ss rng = Xoshiro256ss::ForStream(spec.seed, static_cast<uint64_t>(l), kShuffleStream);
        std::vector<int32_t> perm(E);
        std::iota(perm.begin(), perm.end(), 0);
        for (size_t i = E; i-- > 1;) std::swap(perm[i], perm[rng.Below(i + 1)]);
        model.layers.push_back(std::make_shared<const LayerSampler>(Permuted(*base, perm)));
      }
      break;
    }
    case RoutingKind::kHot: {
      const int64_t H = spec.hot_experts;
      const double F = spec.hot_fraction;
      Require(H >= 0 && H <= num_experts, fmt::format("hot expert count ({}) must be in [0, num_experts ({})]", H, num_experts));
      Require(std::isfinite(F) && F >= 0 && F <= 1, fmt::format("hot fraction must be in [0, 1], got {}", FormatDouble(F)));
      Require(H > 0 || F == 0, fmt::format("hot fraction {} needs at least one hot expert, got 0 hot experts", FormatDouble(F)));
      Require(H < num_experts || F == 1,
              fmt::format("with all {} experts hot the hot fraction must be 1, got {} (no cold expert takes the rest)", num_experts,
                          FormatDouble(F)));
      std::vector<double> w(E);
      for (size_t e = 0; e < E; ++e) {
        w[e] = static_cast<int64_t>(e) < H ? F / static_cast<double>(H) : (1.0 - F) / static_cast<double>(num_experts - H);
      }
      if (H == 0) std::fill(w.begin(), w.end(), 1.0);
      all_layers(std::make_shared<const LayerSampler>(BuildSampler(w, top_k)));
      break;
    }
    case RoutingKind::kTrace: {
      Require(!spec.trace_path.empty(), "routing trace path (trace_path) is empty");
      const RoutingTrace trace = LoadRoutingTrace(spec.trace_path);
      Require(trace.num_experts == num_experts,
              fmt::format("{}: the trace has {} experts, the model has {} (num_experts)", trace.path, trace.num_experts, num_experts));
      const int64_t L = static_cast<int64_t>(trace.layers.size());
      Require(L == num_layers || L == 1,
              fmt::format("{}: the trace has {} layers; expected {} (one per MoE layer) or 1 (broadcast to all layers)", trace.path, L,
                          num_layers));
      std::map<std::vector<int64_t>, std::shared_ptr<const LayerSampler>> built;  // identical layers built once
      for (int64_t l = 0; l < num_layers; ++l) {
        const std::vector<int64_t>& counts = trace.layers[L == 1 ? 0 : static_cast<size_t>(l)];
        auto it = built.find(counts);
        if (it == built.end()) {
          std::vector<double> w(counts.begin(), counts.end());
          it = built.emplace(counts, std::make_shared<const LayerSampler>(BuildSampler(w, top_k))).first;
        }
        model.layers.push_back(it->second);
      }
      break;
    }
  }
  return model;
}

namespace {

// Per-expert assignment counts ([E], global expert ids) of the tokens of source `rank` in
// `layer`: forced experts in bulk plus the free draws of the rank's own stream. Draws are
// sequential per token (the stream and the scratch carry over), so Start, Advance(a),
// Advance(b) draws exactly the first a + b tokens of Start, Advance(a + b).
struct RankCounter {
  Scratch scratch;
  std::vector<int64_t> free_counts;
  Xoshiro256ss rng{0};
  const LayerSampler* sampler = nullptr;

  void Start(const RoutingModel& model, int64_t layer, int64_t rank) {
    sampler = model.layers[static_cast<size_t>(layer)].get();
    rng = Xoshiro256ss::ForStream(model.spec.seed, static_cast<uint64_t>(layer), static_cast<uint64_t>(rank));
    free_counts.assign(sampler->free_ids.size(), 0);
    scratch.Reset(sampler->free_ids.size());
  }
  void Advance(int64_t tokens) {
    CountSink sink{free_counts.data()};
    if (sampler->mode != DrawMode::kNone) DrawTokens(*sampler, rng, tokens, scratch, sink);  // else all forced
  }
  // The counts of the first `tokens` tokens: all drawn so far.
  void Read(int64_t num_experts, int64_t tokens, int64_t* counts) const {
    std::fill(counts, counts + num_experts, 0);
    for (int32_t e : sampler->forced) counts[static_cast<size_t>(e)] += tokens;
    for (size_t j = 0; j < sampler->free_ids.size(); ++j) counts[static_cast<size_t>(sampler->free_ids[j])] += free_counts[j];
  }
  void Count(const RoutingModel& model, int64_t layer, int64_t rank, int64_t tokens, int64_t* counts) {
    Start(model, layer, rank);
    Advance(tokens);
    Read(model.num_experts, tokens, counts);
  }
};

// SampleRouting's checks and result, with each source rank's per-expert counts from
// `rank_counts(layer, rank)` (a pointer to E counts).
template <class RankCounts>
RoutingResult AssembleRouting(const RoutingModel& model, int64_t ep, int64_t tokens_per_rank, int64_t oep, RankCounts&& rank_counts) {
  const int64_t E = model.num_experts, k = model.top_k;
  Require(ep >= 1, fmt::format("ep must be >= 1, got {}", ep));
  Require(E % ep == 0, fmt::format("ep ({}) must divide num_experts ({})", ep, E));
  Require(oep >= 1, fmt::format("oep must be >= 1, got {}", oep));
  Require(ep % oep == 0, fmt::format("oep ({}) must divide ep ({}) for the deredundency dispatcher", oep, ep));
  Require(tokens_per_rank >= 0, fmt::format("tokens_per_rank must be >= 0, got {}", tokens_per_rank));
  Require(static_cast<int64_t>(model.layers.size()) == model.num_layers, "routing model is not prepared (use PrepareRouting)");
  const int64_t per_layer = CheckedMul(CheckedMul(tokens_per_rank, ep, "routing tokens (tokens_per_rank * ep)"), k,
                                       "routing assignments per layer (tokens_per_rank * ep * top_k)");
  const int64_t total = CheckedMul(per_layer, model.num_layers, "routing assignments (tokens_per_rank * ep * top_k * num_layers)");
  const int64_t entries = CheckedMul(CheckedMul(ep, ep, "dispatch matrix entries (ep * ep)"), std::max<int64_t>(1, model.num_layers),
                                     "dispatch matrix entries (ep * ep * num_layers)");
  Require(
      entries <= kMaxMatrixEntries,
      fmt::format("dispatch matrices would hold ep * ep * num_layers = {} entries, more than the {} allowed", entries, kMaxMatrixEntries));

  RoutingResult result;
  result.num_experts = E;
  result.top_k = k;
  result.ep = ep;
  result.tokens_per_rank = tokens_per_rank;
  result.oep = oep;
  result.assignments = total;
  result.layers.resize(static_cast<size_t>(model.num_layers));
  const int64_t local = E / ep, iep = ep / oep;
  for (int64_t l = 0; l < model.num_layers; ++l) {
    const LayerSampler& s = *model.layers[static_cast<size_t>(l)];
    LayerRouting& out = result.layers[static_cast<size_t>(l)];
    out.tokens_per_expert.assign(static_cast<size_t>(E), 0);
    out.dispatch.assign(static_cast<size_t>(ep * ep), 0);
    out.expected_share = s.share;
    for (int64_t r = 0; r < ep; ++r) {
      const auto* counts = rank_counts(l, r);  // int64 (SampleRouting) or int32 (block counts)
      int64_t* row = &out.dispatch[static_cast<size_t>(r * ep)];
      for (int64_t e = 0; e < E; ++e) out.tokens_per_expert[static_cast<size_t>(e)] += counts[e];
      // Destination rank dst owns experts [dst * local, (dst + 1) * local).
      for (int64_t dst = 0, e = 0; dst < ep; ++dst) {
        int64_t sum = 0;
        for (int64_t j = 0; j < local; ++j, ++e) sum += counts[e];
        row[dst] = sum;
      }
    }
    out.rows_per_local_expert = out.tokens_per_expert;  // contiguous ownership: same order
    // Column sums of dispatch: what rank dst receives is what its experts got (integer sums).
    out.received.assign(static_cast<size_t>(ep), 0);
    for (int64_t dst = 0, e = 0; dst < ep; ++dst) {
      for (int64_t j = 0; j < local; ++j, ++e) out.received[static_cast<size_t>(dst)] += out.tokens_per_expert[static_cast<size_t>(e)];
    }
    FillReceivedStats(out, tokens_per_rank, k);
    result.max_imbalance = l == 0 ? out.imbalance : std::max(result.max_imbalance, out.imbalance);
    if (oep == 1) continue;  // iep = ep: the sum over one outer index is dispatch itself (IepDispatchOf)
    out.iep_dispatch.assign(static_cast<size_t>(ep * iep), 0);
    for (int64_t o = 0; o < oep; ++o) {
      for (int64_t i = 0; i < iep; ++i) {
        const int64_t r = o * iep + i;
        for (int64_t j = 0; j < iep; ++j) {
          int64_t sum = 0;
          for (int64_t o2 = 0; o2 < oep; ++o2) sum += out.dispatch[static_cast<size_t>((o2 * iep + i) * ep + o * iep + j)];
          out.iep_dispatch[static_cast<size_t>(r * iep + j)] = sum;
        }
      }
    }
  }
  return result;
}

}  // namespace

void FillReceivedStats(LayerRouting& out, int64_t tokens_per_rank, int64_t top_k) {
  const int64_t ep = static_cast<int64_t>(out.received.size());
  Require(ep >= 1, "received: no ranks");
  std::vector<int64_t> sorted = out.received;
  std::sort(sorted.begin(), sorted.end());
  out.max_received = sorted.back();
  out.mean_received = static_cast<double>(tokens_per_rank) * static_cast<double>(top_k);
  out.p99_received = sorted[static_cast<size_t>((99 * ep + 99) / 100 - 1)];
  out.imbalance = out.mean_received > 0 ? static_cast<double>(out.max_received) / out.mean_received : 1.0;
}

RoutingResult SampleRouting(const RoutingModel& model, int64_t ep, int64_t tokens_per_rank, int64_t oep) {
  RankCounter counter;
  std::vector<int64_t> counts(static_cast<size_t>(std::max<int64_t>(0, model.num_experts)));
  return AssembleRouting(model, ep, tokens_per_rank, oep, [&](int64_t layer, int64_t rank) {
    counter.Count(model, layer, rank, tokens_per_rank, counts.data());
    return counts.data();
  });
}

RoutingResult AssembleRoutingFromCounts(const RoutingModel& model, int64_t ep, int64_t tokens_per_rank, int64_t oep,
                                        const std::function<const int32_t*(int64_t layer, int64_t rank)>& rank_counts) {
  return AssembleRouting(model, ep, tokens_per_rank, oep, rank_counts);
}

RoutingSampler::RoutingSampler(RoutingModel model) : model_(std::move(model)) {}

void RoutingSampler::ExpectTokenCounts(const std::vector<int64_t>& tokens_per_rank) {
  for (int64_t t : tokens_per_rank) {
    if (t >= 0) expected_.push_back(t);
  }
  std::sort(expected_.begin(), expected_.end());
  expected_.erase(std::unique(expected_.begin(), expected_.end()), expected_.end());
}

RoutingResult RoutingSampler::Sample(int64_t ep, int64_t tokens_per_rank, int64_t oep) {
  RankCounter counter;
  const size_t E = static_cast<size_t>(std::max<int64_t>(0, model_.num_experts));
  // [layer] -> counts of ranks 0..n-1 for `tokens` tokens, E each.
  auto ranks_of = [&](int64_t tokens, int64_t layer) -> std::vector<int64_t>& {
    auto& per_layer = counts_[tokens];
    if (per_layer.size() < static_cast<size_t>(model_.num_layers)) per_layer.resize(static_cast<size_t>(model_.num_layers));
    return per_layer[static_cast<size_t>(layer)];
  };
  return AssembleRouting(model_, ep, tokens_per_rank, oep, [&](int64_t layer, int64_t rank) {
    std::vector<int64_t>& ranks = ranks_of(tokens_per_rank, layer);
    while (ranks.size() < (static_cast<size_t>(rank) + 1) * E) {
      const size_t q = ranks.size() / E;
      // Draw rank q once, reading the counts of this token count and of every expected one
      // that lacks exactly rank q on the way (prefixes of the same draws).
      std::vector<int64_t> targets = {tokens_per_rank};
      for (int64_t t : expected_) {
        if (t != tokens_per_rank && ranks_of(t, layer).size() == q * E) targets.push_back(t);
      }
      std::sort(targets.begin(), targets.end());
      counter.Start(model_, layer, static_cast<int64_t>(q));
      int64_t drawn = 0;
      for (int64_t t : targets) {
        counter.Advance(t - drawn);
        drawn = t;
        std::vector<int64_t>& out = ranks_of(t, layer);
        out.resize(out.size() + E);
        counter.Read(model_.num_experts, t, out.data() + q * E);
      }
    }
    return ranks.data() + static_cast<size_t>(rank) * E;
  });
}

RoutingModel PrepareRouting(const RoutingSpec& spec, int64_t num_experts, int64_t top_k, int64_t num_layers, const GroupLimit& limit) {
  const std::string problem = GroupLimitProblem(num_experts, top_k, limit.n_group, limit.topk_group);
  Require(problem.empty(), "group-limited routing: " + problem);
  RoutingModel model = PrepareRouting(spec, num_experts, top_k, num_layers);
  if (!limit.active()) return model;
  std::map<const LayerSampler*, std::shared_ptr<const LayerSampler>> built;  // shared layers converted once
  for (auto& layer : model.layers) {
    auto it = built.find(layer.get());
    if (it == built.end()) {
      LayerSampler s;
      s.num_experts = num_experts;
      s.top_k = top_k;
      s.free_ids.resize(static_cast<size_t>(num_experts));
      std::iota(s.free_ids.begin(), s.free_ids.end(), 0);
      s.free_k = top_k;
      s.mode = DrawMode::kGrouped;
      s.share = layer->share;
      s.grouped = std::make_shared<const routing_detail::GroupSampler>(routing_detail::BuildGroupSampler(layer->share, top_k, limit));
      it = built.emplace(layer.get(), std::make_shared<const LayerSampler>(std::move(s))).first;
    }
    layer = it->second;
  }
  return model;
}

RoutingResult SampleRouting(const RoutingSpec& spec, int64_t num_experts, int64_t top_k, int64_t ep, int64_t tokens_per_rank,
                            int64_t num_layers, int64_t oep) {
  // Cheap layout checks first, so a bad ep does not wait for a trace to load or calibrate.
  Require(ep >= 1, fmt::format("ep must be >= 1, got {}", ep));
  Require(num_experts < 1 || num_experts % ep == 0, fmt::format("ep ({}) must divide num_experts ({})", ep, num_experts));
  return SampleRouting(PrepareRouting(spec, num_experts, top_k, num_layers), ep, tokens_per_rank, oep);
}

const std::vector<double>& ExpectedShare(const RoutingModel& model, int64_t layer) {
  Require(layer >= 0 && layer < static_cast<int64_t>(model.layers.size()),
          fmt::format("routing layer {} is outside the model's {} MoE layers", layer, model.layers.size()));
  return model.layers[static_cast<size_t>(layer)]->share;
}

namespace {
// The draw state of stream (seed, layer, ep_rank) before its first token: the one start of
// SampleTokenExperts and TokenHitStream. Throws dockyard::Error for a layer outside the model or
// ep_rank < 0.
struct TokenDraws {
  const LayerSampler* sampler;
  Xoshiro256ss rng;
  Scratch scratch;
};
TokenDraws StartTokenDraws(const RoutingModel& model, int64_t layer, int64_t ep_rank) {
  Require(layer >= 0 && layer < model.num_layers && static_cast<int64_t>(model.layers.size()) == model.num_layers,
          fmt::format("layer must be in [0, {}), got {}", model.num_layers, layer));
  Require(ep_rank >= 0, fmt::format("ep_rank must be >= 0, got {}", ep_rank));
  const LayerSampler& s = *model.layers[static_cast<size_t>(layer)];
  TokenDraws d{&s, Xoshiro256ss::ForStream(model.spec.seed, static_cast<uint64_t>(layer), static_cast<uint64_t>(ep_rank)), Scratch{}};
  d.scratch.Reset(s.free_ids.size());
  return d;
}
}  // namespace

std::vector<int32_t> SampleTokenExperts(const RoutingModel& model, int64_t layer, int64_t ep_rank, int64_t tokens) {
  TokenDraws d = StartTokenDraws(model, layer, ep_rank);
  Require(tokens >= 0, fmt::format("tokens must be >= 0, got {}", tokens));
  std::vector<int32_t> out(static_cast<size_t>(CheckedMul(tokens, model.top_k, "sampled experts (tokens * top_k)")));
  RecordSink sink{d.sampler, out.data()};
  DrawTokens(*d.sampler, d.rng, tokens, d.scratch, sink);
  return out;
}

struct TokenHitStream::State : TokenDraws {};

TokenHitStream::TokenHitStream(const RoutingModel& model, int64_t layer, int64_t ep_rank)
    : state_(std::make_unique<State>(State{StartTokenDraws(model, layer, ep_rank)})) {}

TokenHitStream::~TokenHitStream() = default;

void TokenHitStream::Next(int64_t tokens, uint64_t* hit) {
  if (tokens < 0 || tokens > 64) throw Error(fmt::format("a batch of token hits holds 0 to 64 tokens, got {}", tokens));
  const LayerSampler& s = *state_->sampler;
  if (s.mode == DrawMode::kGrouped) {
    ExpertHitSink sink{hit};
    s.grouped->Draw(state_->rng, tokens, sink);
    return;
  }
  HitSink sink{s.free_ids.data(), s.forced.data(), s.forced.data() + s.forced.size(), hit};
  DrawTokens(s, state_->rng, tokens, state_->scratch, sink);
}

}  // namespace dockyard
