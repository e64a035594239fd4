// Routing traces: LoadRoutingTrace's JSON and CSV readers (see routing.h).
#include <algorithm>
#include <cctype>
#include <fstream>
#include <sstream>
#include <string>
#include <sys/stat.h>
#include <vector>

#include <fmt/format.h>

#include "planner/base/checked_math.h"
#include "planner/base/error.h"
#include "planner/base/number_text.h"
#include "planner/base/json_util.h"
#include "planner/routing/routing.h"

namespace dockyard {

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

}  // namespace dockyard
