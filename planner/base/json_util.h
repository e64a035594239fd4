// Typed, located access to JSON input: every error names the file, the JSON pointer of the
// field, the value found and the rule ("cfg.json: /hidden_size: must be an integer >= 1, got -4").
//
// Reading is strict about types (a string where an integer is expected is an error, a float
// with a fractional part where an integer is expected is an error, NaN/inf are rejected) and
// about 64-bit range.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace dockyard {

using Json = nlohmann::json;

// Largest JSON input accepted (a model config is a few KiB; a plan report a few MiB).
constexpr int64_t kMaxJsonFileBytes = int64_t{256} << 20;

// Reads and parses a JSON file. Errors (thrown as dockyard::Error): missing file, a directory,
// a device or pipe, a file over kMaxJsonFileBytes, an empty file, a parse error (with the byte
// offset), a number out of range, a top level that is not an object.
Json ReadJsonFile(const std::string& path);

// Parses JSON text that came from `origin` (a file name or "<embedded>").
Json ParseJsonText(const std::string& text, const std::string& origin);

// Escapes one reference token of a JSON pointer (RFC 6901: "~" -> "~0", "/" -> "~1").
std::string JsonPointerToken(const std::string& key);

// A view of one JSON object together with where it came from.
class JsonView {
 public:
  JsonView(const Json* value, std::string file, std::string pointer);

  const std::string& file() const { return file_; }
  const std::string& pointer() const { return pointer_; }
  const Json& value() const { return *value_; }

  // "file: /pointer/key"
  std::string Where(const std::string& key) const;
  std::string Where() const;

  // True when the key is present and not null.
  bool Has(const std::string& key) const;
  // Throws Fail(key, "null: " + why) when the key is present and null: for an optional key whose
  // absence has a meaning (a default) that null must not silently take.
  void RefuseNull(const std::string& key, const std::string& why) const;

  // Required values: a missing key, or one set to null, is an error naming the key and `context`
  // (for example the model family).
  int64_t Int(const std::string& key, int64_t min_value = 1) const;
  double Number(const std::string& key) const;
  bool Bool(const std::string& key) const;
  std::string String(const std::string& key) const;
  std::vector<int64_t> IntList(const std::string& key, int64_t min_value = 0) const;
  JsonView Object(const std::string& key) const;

  // Optional values: the fallback when absent or null, else the same checks as above.
  int64_t IntOr(const std::string& key, int64_t fallback, int64_t min_value = 1) const;
  double NumberOr(const std::string& key, double fallback) const;
  bool BoolOr(const std::string& key, bool fallback) const;
  std::string StringOr(const std::string& key, const std::string& fallback) const;

  // Throws dockyard::Error("file: /pointer/key: <message>").
  [[noreturn]] void Fail(const std::string& key, const std::string& message) const;

  // Sets a context appended to "required key is missing" errors, e.g. "(family mixtral)".
  void set_missing_context(std::string context) { missing_context_ = std::move(context); }

  // Rejects keys not in `allowed`, with a "did you mean" suggestion (our own spec format).
  void RejectUnknownKeys(const std::vector<std::string>& allowed) const;

 private:
  const Json& Required(const std::string& key) const;

  const Json* value_;
  std::string file_;
  std::string pointer_;
  std::string missing_context_;
};

// Short text of a JSON value for error messages (strings quoted, long values cut).
std::string JsonValueText(const Json& value);

// The candidate closest to `word` by edit distance, if it is within max(2, |word| / 3) edits.
std::optional<std::string> DidYouMean(const std::string& word, const std::vector<std::string>& candidates);

// What `word` may have meant among `candidates`: every candidate that starts with it (a name typed
// short, "h100" -> h100-sxm, h100-pcie-400g), in the candidates' order; else DidYouMean's; else none.
std::vector<std::string> Suggestions(const std::string& word, const std::vector<std::string>& candidates);

// "; did you mean 'a'?", "; did you mean 'a' or 'b'?", "; did you mean 'a', 'b' or 'c'?" over
// Suggestions(word, candidates); empty when there is none.
std::string DidYouMeanText(const std::string& word, const std::vector<std::string>& candidates);

// `text` without the spaces and tabs around it ("" when it has nothing else): how a field of a
// hand-written list (a CSV trace line, a --explain item) is read.
std::string TrimSpaces(const std::string& text);

}  // namespace dockyard
