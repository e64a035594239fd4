// Typed, located JSON access (see json_util.h).
#include "planner/base/json_util.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>
#include <sys/stat.h>

#include <fmt/format.h>

#include "planner/base/error.h"

namespace dockyard {

Json ParseJsonText(const std::string& text, const std::string& origin) {
  if (text.find_first_not_of(" \t\r\n") == std::string::npos) {
    throw Error(fmt::format("{}: file is empty (expected a JSON object)", origin));
  }
  Json parsed;
  // A key given twice in one object: JSON keeps only the last value, which silently drops the first
  // (QA: {"network_gbps": 48, "network_gbps": 1} ran at 1 GB/s). Refused, naming the key and the
  // object's JSON pointer. One frame per open object or array: its keys, or the element index.
  struct Frame {
    bool object = false;
    int64_t index = -1;       // arrays: the element being read
    std::string key;          // objects: the member being read
    std::set<std::string> keys;
  };
  std::vector<Frame> frames;
  auto pointer = [&frames]() {
    std::string out;
    for (size_t i = 0; i + 1 < frames.size(); ++i) {
      out += "/" + (frames[i].object ? JsonPointerToken(frames[i].key) : std::to_string(frames[i].index));
    }
    return out.empty() ? std::string("the top-level object") : out;
  };
  auto element = [&frames]() {
    if (!frames.empty() && !frames.back().object) ++frames.back().index;
  };
  try {
    // Nesting is bounded so that neither parsing nor destroying the value recurses without limit.
    static constexpr int kMaxDepth = 64;
    parsed = Json::parse(text, [&](int depth, Json::parse_event_t event, Json& value) {
      if (depth > kMaxDepth) throw Error(fmt::format("{}: JSON nested deeper than {} levels", origin, kMaxDepth));
      switch (event) {
        case Json::parse_event_t::object_start:
        case Json::parse_event_t::array_start:
          element();
          frames.push_back(Frame{event == Json::parse_event_t::object_start, -1, "", {}});
          break;
        case Json::parse_event_t::object_end:
        case Json::parse_event_t::array_end:
          if (!frames.empty()) frames.pop_back();
          break;
        case Json::parse_event_t::key: {
          if (frames.empty() || !value.is_string()) break;
          const std::string key = value.get<std::string>();
          if (!frames.back().keys.insert(key).second) {
            throw Error(fmt::format("{}: key \"{}\" appears twice in {} (JSON keeps only the last value): give each key once", origin,
                                    key, pointer()));
          }
          frames.back().key = key;
          break;
        }
        case Json::parse_event_t::value:
          element();
          break;
      }
      return true;
    });
  } catch (const Json::parse_error& e) {
    throw Error(fmt::format("{}: not valid JSON at byte {}: {}", origin, e.byte,
                            std::string(e.what()).substr(std::string(e.what()).find(':') + 2)));
  } catch (const Json::exception& e) {
    // e.g. out_of_range 406: a number such as 1e400 that overflows a double.
    std::string what = e.what();
    const size_t bracket = what.find("] ");
    throw Error(fmt::format("{}: not valid JSON: {}", origin, bracket == std::string::npos ? what : what.substr(bracket + 2)));
  }
  if (!parsed.is_object()) {
    throw Error(fmt::format("{}: top level must be a JSON object, got {}", origin, parsed.type_name()));
  }
  return parsed;
}

Json ReadJsonFile(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) {
    throw Error(fmt::format("{}: cannot open: no such file", path));
  }
  if (S_ISDIR(st.st_mode)) {
    throw Error(fmt::format("{}: is a directory, expected a JSON file", path));
  }
  if (!S_ISREG(st.st_mode)) throw Error(fmt::format("{}: is not a regular file (a device or pipe?), expected a JSON file", path));
  if (st.st_size > kMaxJsonFileBytes) {
    throw Error(fmt::format("{}: file is {} bytes, larger than the {} bytes a JSON input may have", path, static_cast<int64_t>(st.st_size),
                            kMaxJsonFileBytes));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(fmt::format("{}: cannot open for reading", path));
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return ParseJsonText(buffer.str(), path);
}

std::string JsonPointerToken(const std::string& key) {
  std::string out;
  for (char c : key) {
    if (c == '~')
      out += "~0";
    else if (c == '/')
      out += "~1";
    else
      out += c;
  }
  return out;
}

std::string JsonValueText(const Json& value) {
  // Arrays and objects by their size only: dumping a deeply nested value would recurse deeply.
  if (value.is_array()) return fmt::format("[... {} elements]", value.size());
  if (value.is_object()) return fmt::format("{{... {} keys}}", value.size());
  std::string text = value.dump(-1, ' ', false, Json::error_handler_t::replace);
  if (text.size() > 60) text = text.substr(0, 57) + "...";
  return text;
}

JsonView::JsonView(const Json* value, std::string file, std::string pointer)
    : value_(value), file_(std::move(file)), pointer_(std::move(pointer)) {}

std::string JsonView::Where() const {
  return fmt::format("{}: {}", file_, pointer_.empty() ? "/" : pointer_);
}

std::string JsonView::Where(const std::string& key) const {
  // A key of a message is shown whole up to 80 characters, else its start and its length (QA: a
  // 5 MB unknown key was echoed whole).
  constexpr size_t kShown = 80;
  const std::string token = JsonPointerToken(key);
  if (token.size() <= kShown) return fmt::format("{}: {}/{}", file_, pointer_, token);
  return fmt::format("{}: {}/{}... ({} characters)", file_, pointer_, token.substr(0, 60), token.size());
}

void JsonView::Fail(const std::string& key, const std::string& message) const {
  throw Error(fmt::format("{}: {}", Where(key), message));
}

bool JsonView::Has(const std::string& key) const {
  auto it = value_->find(key);
  return it != value_->end() && !it->is_null();
}

void JsonView::RefuseNull(const std::string& key, const std::string& why) const {
  auto it = value_->find(key);
  if (it != value_->end() && it->is_null()) Fail(key, "null: " + why);
}

const Json& JsonView::Required(const std::string& key) const {
  auto it = value_->find(key);
  if (it == value_->end()) Fail(key, "required key is missing" + (missing_context_.empty() ? "" : " " + missing_context_));
  if (it->is_null()) Fail(key, "must have a value, got null" + (missing_context_.empty() ? "" : " " + missing_context_));
  return *it;
}

static int64_t ToInt(const JsonView& view, const std::string& key, const Json& v, int64_t min_value) {
  int64_t out = 0;
  if (v.is_number_integer()) {
    if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
      view.Fail(key, fmt::format("value {} does not fit in a signed 64-bit integer", JsonValueText(v)));
    }
    out = v.get<int64_t>();
  } else if (v.is_number_float()) {
    double d = v.get<double>();
    if (!std::isfinite(d) || d != std::floor(d) || std::fabs(d) > 9.0e15) {
      view.Fail(key, fmt::format("must be an integer, got {}", JsonValueText(v)));
    }
    out = static_cast<int64_t>(d);
  } else {
    view.Fail(key, fmt::format("must be an integer, got {} {}", v.type_name(), JsonValueText(v)));
  }
  if (out < min_value) view.Fail(key, fmt::format("must be >= {}, got {}", min_value, out));
  return out;
}

int64_t JsonView::Int(const std::string& key, int64_t min_value) const {
  return ToInt(*this, key, Required(key), min_value);
}

int64_t JsonView::IntOr(const std::string& key, int64_t fallback, int64_t min_value) const {
  return Has(key) ? Int(key, min_value) : fallback;
}

double JsonView::Number(const std::string& key) const {
  const Json& v = Required(key);
  if (!v.is_number()) Fail(key, fmt::format("must be a number, got {} {}", v.type_name(), JsonValueText(v)));
  double d = v.get<double>();
  if (!std::isfinite(d)) Fail(key, fmt::format("must be a finite number, got {}", JsonValueText(v)));
  return d;
}

double JsonView::NumberOr(const std::string& key, double fallback) const {
  return Has(key) ? Number(key) : fallback;
}

bool JsonView::Bool(const std::string& key) const {
  const Json& v = Required(key);
  if (!v.is_boolean()) Fail(key, fmt::format("must be true or false, got {} {}", v.type_name(), JsonValueText(v)));
  return v.get<bool>();
}

bool JsonView::BoolOr(const std::string& key, bool fallback) const {
  return Has(key) ? Bool(key) : fallback;
}

std::string JsonView::String(const std::string& key) const {
  const Json& v = Required(key);
  if (!v.is_string()) Fail(key, fmt::format("must be a string, got {} {}", v.type_name(), JsonValueText(v)));
  return v.get<std::string>();
}

std::string JsonView::StringOr(const std::string& key, const std::string& fallback) const {
  return Has(key) ? String(key) : fallback;
}

std::vector<int64_t> JsonView::IntList(const std::string& key, int64_t min_value) const {
  const Json& v = Required(key);
  if (!v.is_array()) Fail(key, fmt::format("must be an array of integers, got {} {}", v.type_name(), JsonValueText(v)));
  std::vector<int64_t> out;
  JsonView list(&v, file_, pointer_ + "/" + JsonPointerToken(key));
  for (size_t i = 0; i < v.size(); ++i) {
    out.push_back(ToInt(list, std::to_string(i), v[i], min_value));
  }
  return out;
}

JsonView JsonView::Object(const std::string& key) const {
  const Json& v = Required(key);
  if (!v.is_object()) Fail(key, fmt::format("must be a JSON object, got {} {}", v.type_name(), JsonValueText(v)));
  JsonView child(&v, file_, pointer_ + "/" + JsonPointerToken(key));
  child.missing_context_ = missing_context_;
  return child;
}

static size_t EditDistance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string TrimSpaces(const std::string& text) {
  const size_t a = text.find_first_not_of(" \t");
  if (a == std::string::npos) return "";
  const size_t b = text.find_last_not_of(" \t");
  return text.substr(a, b - a + 1);
}

std::optional<std::string> DidYouMean(const std::string& word, const std::vector<std::string>& candidates) {
  std::optional<std::string> best;
  size_t best_distance = std::max<size_t>(2, word.size() / 3) + 1;
  for (const auto& c : candidates) {
    // The distance is at least the difference in length: skip what cannot beat the best (a fast
    // path for long candidate lists, e.g. Megatron-LM's 865 arguments).
    const size_t length_gap = c.size() > word.size() ? c.size() - word.size() : word.size() - c.size();
    if (length_gap >= best_distance) continue;
    size_t d = EditDistance(word, c);
    if (d < best_distance) {
      best_distance = d;
      best = c;
    }
  }
  return best;
}

std::vector<std::string> Suggestions(const std::string& word, const std::vector<std::string>& candidates) {
  // A name typed short ("h100" for h100-sxm / h100-pcie-400g) is the start of what was meant: edit
  // distance would rank a same-length name ("b200", two edits) above it.
  std::vector<std::string> prefixed;
  if (!word.empty()) {
    for (const auto& c : candidates) {
      if (c.size() > word.size() && c.compare(0, word.size(), word) == 0) prefixed.push_back(c);
    }
  }
  if (!prefixed.empty()) return prefixed;
  if (auto best = DidYouMean(word, candidates)) return {*best};
  return {};
}

std::string DidYouMeanText(const std::string& word, const std::vector<std::string>& candidates) {
  const std::vector<std::string> s = Suggestions(word, candidates);
  if (s.empty()) return "";
  std::string text = "; did you mean ";
  for (size_t i = 0; i < s.size(); ++i) {
    text += (i == 0 ? "" : i + 1 == s.size() ? " or " : ", ") + ("'" + s[i] + "'");
  }
  return text + "?";
}

void JsonView::RejectUnknownKeys(const std::vector<std::string>& allowed) const {
  for (auto it = value_->begin(); it != value_->end(); ++it) {
    if (std::find(allowed.begin(), allowed.end(), it.key()) != allowed.end()) continue;
    std::string message = "unknown key";
    if (auto suggestion = DidYouMean(it.key(), allowed)) message += fmt::format("; did you mean '{}'?", *suggestion);
    Fail(it.key(), message);
  }
}

}  // namespace dockyard
