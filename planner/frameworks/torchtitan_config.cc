// torchtitan job configs read into dockyard's flags (torchtitan_config.h). Sources of each rule, at
// kTorchtitanCommit unless named: torchtitan/config/configs.py (ParallelismConfig, TrainingConfig,
// CompileConfig), torchtitan/trainer.py (Trainer.Config, the batch arithmetic in Trainer.__init__),
// torchtitan/distributed/pipeline_parallel.py (_get_pipeline_metadata,
// _generate_llm_fqn_per_model_part), torchtitan/distributed/activation_checkpoint.py; at
// kTorchtitanTomlCommit torchtitan/config/job_config.py and torchtitan/train.py.
#include "planner/frameworks/torchtitan_config.h"

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "planner/base/error.h"

// toml++ 3.3 (Debian's) asserts on some malformed input (a table header whose key starts on the next
// line: parse_key's TOML_ASSERT_ASSUME, found by fuzz/torchtitan_config_fuzzer.cc), and under
// NDEBUG turns those asserts into optimizer assumptions. Its checks stay on here and throw a
// dockyard::Error instead (the parser's functions may throw: they throw toml::parse_error).
namespace dockyard {
[[noreturn]] inline void TomlInternalCheckFailed(const char* expr) {
  throw Error(std::string("not a TOML file dockyard can read (toml++'s check '") + expr + "' failed)");
}
}  // namespace dockyard
#pragma push_macro("NDEBUG")
#undef NDEBUG
#define TOML_ASSERT(expr) ((expr) ? static_cast<void>(0) : ::dockyard::TomlInternalCheckFailed(#expr))
#include <toml++/toml.h>
#pragma pop_macro("NDEBUG")

#include "planner/base/json_util.h"
#include "planner/base/number_text.h"
#include "planner/frameworks/shell_words.h"
#include "planner/frameworks/torchtitan_fields.h"
#include "planner/model/model_file.h"

namespace dockyard {

const char* const kTorchtitanCommit = "b5bcd76c66d0acb1a08b176d9639425bc55e0b2a";
const char* const kTorchtitanTomlCommit = "238fa9953e4aec2a62582121564273d7cbb1e9f1";

const std::map<std::string, std::string>& TorchtitanFieldTable(const std::string& era) {
  static const std::map<std::string, std::map<std::string, std::string>> tables = [] {
    std::map<std::string, std::map<std::string, std::string>> t;
    std::istringstream in(kTorchtitanFieldsText);
    std::string line;
    while (std::getline(in, line)) {
      if (line.empty() || line[0] == '#') continue;
      const size_t a = line.find('\t'), b = line.find('\t', a + 1);
      t[line.substr(0, a)][line.substr(a + 1, b - a - 1)] = line.substr(b + 1);
    }
    return t;
  }();
  return tables.at(era);
}

namespace {

constexpr const char* kCurrent = "current";
constexpr const char* kToml = "toml";

// One key of a section dockyard reads, its value as text.
struct Entry {
  std::string text;                // a scalar: a string unquoted, true / false, a number; an object: its JSON
  std::vector<std::string> items;  // a list's elements
  bool list = false, null = false;
  bool quoted = false;  // a JSON or TOML string (an overrides file's words are all text)
  bool bare = false;    // an override given without a value (tyro's --section.flag switch)
  int line = 0;         // 0: the form has no lines (a JSON dump)
};

// The sections whose every key is checked and read; the others are named as not read.
const std::set<std::string>& ReadSections(const std::string& era) {
  static const std::set<std::string> current = {"parallelism", "training", "activation_checkpoint", "compile", "debug", "optimizer", "loss"};
  static const std::set<std::string> toml = {"job",   "model",    "training", "parallelism", "activation_checkpoint", "compile",
                                             "quantize", "optimizer", "debug"};
  return era == kCurrent ? current : toml;
}

struct Job {
  std::string era, form, file;
  std::map<std::string, Entry> entries;
  std::vector<std::string> not_read_sections;
  std::optional<Json> model_tree;  // a current-era dump's model_spec.model
  std::string model_name;          // model_spec.name / model.name / --module
  std::optional<std::string> ac_mode;  // an overrides file's activation-checkpoint:MODE
  std::vector<std::string> launch_words;  // an overrides file's --module / --config
};

std::string Where(const Job& j, int line) { return line > 0 ? fmt::format("{}:{}", j.file, line) : j.file; }

[[noreturn]] void Fail(const Job& j, int line, const std::string& message) { throw Error(fmt::format("{}: {}", Where(j, line), message)); }

std::string EraName(const std::string& era) {
  return era == kCurrent ? fmt::format("torchtitan at {}", std::string(kTorchtitanCommit).substr(0, 9))
                         : fmt::format("torchtitan's TOML-era JobConfig at {}", std::string(kTorchtitanTomlCommit).substr(0, 9));
}

[[noreturn]] void UnknownKey(const Job& j, const std::string& key, int line) {
  const auto& table = TorchtitanFieldTable(j.era);
  // The nearest name among the keys of the same section.
  const size_t dot = key.rfind('.');
  const std::string prefix = dot == std::string::npos ? "" : key.substr(0, dot + 1);
  std::vector<std::string> siblings;
  for (const auto& [k, kind] : table) {
    if (k.rfind(prefix, 0) == 0 && k.find('.', prefix.size()) == std::string::npos) siblings.push_back(k);
  }
  Fail(j, line, fmt::format("{}: not a key of {}{}", ShownWord(key), EraName(j.era), DidYouMeanText(key, siblings)));
}

// Whether torchtitan-fields.txt lists keys below `key` (a section dockyard checks key by key).
bool HasChildren(const std::map<std::string, std::string>& table, const std::string& key) {
  const auto it = table.upper_bound(key + ".");
  return it != table.end() && it->first.rfind(key + ".", 0) == 0;
}

Entry EntryOf(const Json& v, int line) {
  Entry e;
  e.line = line;
  auto text = [](const Json& x) { return x.is_string() ? x.get<std::string>() : x.dump(); };
  if (v.is_null()) e.null = true;
  else if (v.is_string()) {
    e.text = v.get<std::string>();
    e.quoted = true;
  } else if (v.is_array()) {
    e.list = true;
    for (const Json& x : v) e.items.push_back(text(x));
    e.text = v.dump();
  } else {
    e.text = text(v);
  }
  return e;
}

// Walks a section's object: every key checked against the era's table; nested sections with listed
// keys walked, others kept whole.
void Walk(Job& j, const Json& obj, const std::string& prefix, const std::map<std::string, int>& lines) {
  const auto& table = TorchtitanFieldTable(j.era);
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    const std::string key = prefix + it.key();
    const auto l = lines.find(key);
    const int line = l == lines.end() ? 0 : l->second;
    const auto t = table.find(key);
    if (t == table.end()) UnknownKey(j, key, line);
    if (t->second == "section" && it.value().is_object() && HasChildren(table, key)) {
      Walk(j, it.value(), key + ".", lines);
    } else {
      j.entries[key] = EntryOf(it.value(), line);
    }
  }
}

// A whole config (a JSON dump's or a TOML file's top level).
void WalkTop(Job& j, const Json& root, const std::map<std::string, int>& lines) {
  const auto& table = TorchtitanFieldTable(j.era);
  const auto& read = ReadSections(j.era);
  for (auto it = root.begin(); it != root.end(); ++it) {
    const std::string& key = it.key();
    const auto l = lines.find(key);
    const int line = l == lines.end() ? 0 : l->second;
    if (j.era == kCurrent && key == "model_spec") {
      const Json& spec = it.value();
      if (!spec.is_object()) Fail(j, line, "model_spec: must be an object {name, flavor, model}");
      if (spec.contains("name") && spec["name"].is_string()) j.model_name = spec["name"].get<std::string>();
      if (spec.contains("model") && spec["model"].is_object()) j.model_tree = spec["model"];
      continue;
    }
    const auto t = table.find(key);
    if (t == table.end()) UnknownKey(j, key, line);
    if (t->second == "section" && !read.count(key)) {
      j.not_read_sections.push_back(key);
      continue;
    }
    if (t->second == "section" && it.value().is_object()) {
      Walk(j, it.value(), key + ".", lines);
    } else if (t->second == "section" && (!it.value().is_null() || key != "activation_checkpoint")) {
      Fail(j, line, fmt::format("{}: must be a table of settings, got {}", key, ShownWord(it.value().dump())));
    } else {
      j.entries[key] = EntryOf(it.value(), line);
    }
  }
}

// A TOML document as JSON, with the line of every key.
Json TomlToJson(const toml::node& node, const std::string& prefix, std::map<std::string, int>& lines) {
  if (const toml::table* t = node.as_table()) {
    Json out = Json::object();
    for (const auto& [k, v] : *t) {
      const std::string key = prefix.empty() ? std::string(k.str()) : prefix + "." + std::string(k.str());
      lines[key] = static_cast<int>(k.source().begin.line);
      out[std::string(k.str())] = TomlToJson(v, key, lines);
    }
    return out;
  }
  if (const toml::array* a = node.as_array()) {
    Json out = Json::array();
    for (const auto& v : *a) out.push_back(TomlToJson(v, prefix, lines));
    return out;
  }
  if (auto v = node.value_exact<std::string>()) return *v;
  if (auto v = node.value_exact<int64_t>()) return *v;
  if (auto v = node.value_exact<double>()) return *v;
  if (auto v = node.value_exact<bool>()) return *v;
  // Dates and times (no torchtitan key takes one): as TOML writes them.
  std::ostringstream s;
  if (auto v = node.value_exact<toml::date>()) s << *v;
  else if (auto v = node.value_exact<toml::time>()) s << *v;
  else if (auto v = node.value_exact<toml::date_time>()) s << *v;
  return s.str();
}

// The torchtitan release a JSON dump comes from, by its keys (torchtitan-facts: a `job` section is
// the TOML era; model_spec with token counts the current one).
std::string DumpEra(const Json& root, const std::string& file) {
  if (root.contains("job")) return kToml;
  const bool token_keys = root.contains("training") && root["training"].is_object() && root["training"].contains("num_tokens_per_microbatch_per_dp_rank");
  const bool batch_keys = root.contains("training") && root["training"].is_object() && root["training"].contains("local_batch_size");
  if (root.contains("model_spec") && batch_keys && !token_keys) {
    throw Error(fmt::format(
        "{}: a torchtitan dump with model_spec and training.local_batch_size: a release between 9810191bb (config functions) and "
        "73aed7f6c (token counts), which dockyard does not read; dump the job with torchtitan at {} or later, or give its TOML-era "
        "job file",
        file, std::string(kTorchtitanCommit).substr(0, 9)));
  }
  return kCurrent;
}

// An overrides file: --section.key values words, activation-checkpoint:MODE, --module / --config.
void ReadOverrides(Job& j, const std::string& text) {
  const std::vector<ShellWord> words = SplitShellWords(text, j.file, "torchtitan command-line overrides");
  const auto& table = TorchtitanFieldTable(kCurrent);
  // tyro's activation-checkpoint:MODE subcommand (a value may hold ':' too, e.g. a JSON word).
  const auto subcommand = [](const std::string& word) {
    const std::string head = word.substr(0, word.find(':'));
    return word.find(':') != std::string::npos && (head == "activation-checkpoint" || head == "activation_checkpoint");
  };
  for (size_t i = 0; i < words.size();) {
    const ShellWord& w = words[i];
    std::string word = w.text;
    if (word.rfind("--", 0) != 0) {
      const size_t colon = word.find(':');
      if (subcommand(word)) {
        if (j.ac_mode) Fail(j, w.line, fmt::format("'{}': a second activation-checkpoint subcommand (tyro takes one)", ShownWord(word)));
        j.ac_mode = word.substr(colon + 1);
        ++i;
        continue;
      }
      Fail(j, w.line,
           fmt::format("'{}' is not an override: the file holds torchtitan's command-line overrides (--section.key value, and "
                       "activation-checkpoint:MODE)",
                       ShownWord(word)));
    }
    std::vector<std::string> values;
    const size_t eq = word.find('=');
    if (eq != std::string::npos) {
      values.push_back(word.substr(eq + 1));
      word = word.substr(0, eq);
    }
    ++i;
    while (eq == std::string::npos && i < words.size() && words[i].text.rfind("--", 0) != 0 && !subcommand(words[i].text)) {
      values.push_back(words[i++].text);
    }
    if (word == "--module" || word == "--config") {
      if (values.size() != 1) Fail(j, w.line, fmt::format("{} takes one value", word));
      if (word == "--module") j.model_name = values[0];
      j.launch_words.push_back(word + " " + values[0]);
      continue;
    }
    // tyro takes hyphens or underscores in a key; torchtitan's docs write underscores.
    std::string key = word.substr(2);
    std::replace(key.begin(), key.end(), '-', '_');
    Entry e;
    e.line = w.line;
    const size_t dot = key.rfind('.');
    if (!table.count(key) && dot != std::string::npos && key.compare(dot + 1, 3, "no_") == 0 &&
        table.count(key.substr(0, dot + 1) + key.substr(dot + 4))) {
      key = key.substr(0, dot + 1) + key.substr(dot + 4);  // tyro's --section.no_flag
      if (!values.empty()) Fail(j, w.line, fmt::format("{} is a switch and takes no value", word));
      e.text = "false";
    } else if (values.empty()) {
      e.text = "true";  // tyro's --section.flag
      e.bare = true;
    } else if (values.size() == 1) {
      e.text = values[0];
    } else {
      e.list = true;
      e.items = values;
      e.text = fmt::format("{}", fmt::join(values, " "));
    }
    const auto t = table.find(key);
    if (t == table.end() || t->second == "section") UnknownKey(j, key, w.line);
    const std::string section = key.substr(0, key.find('.'));
    if (key.find('.') != std::string::npos && !ReadSections(kCurrent).count(section)) {
      j.not_read_sections.push_back(key);
      continue;
    }
    j.entries[key] = e;
  }
}

Job ReadJob(const std::string& text, const std::string& file) {
  Job j;
  j.file = file;
  size_t start = text.find_first_not_of(" \t\r\n");
  if (start != std::string::npos && text[start] == '{') {
    j.form = "JSON dump";
    const Json root = ParseJsonText(text, file);
    if (!root.is_object()) throw Error(fmt::format("{}: a torchtitan config dump is a JSON object", file));
    j.era = DumpEra(root, file);
    WalkTop(j, root, {});
    return j;
  }
  // Comments and blank lines, then "--" words: an overrides file; else a TOML job file.
  bool overrides = false;
  for (std::istringstream in(text); !in.eof();) {
    std::string line;
    std::getline(in, line);
    const size_t a = line.find_first_not_of(" \t\r");
    if (a == std::string::npos || line[a] == '#') continue;
    overrides = line.compare(a, 2, "--") == 0 || line.compare(a, 22, "activation-checkpoint:") == 0;
    break;
  }
  if (overrides) {
    j.form = "command-line overrides";
    j.era = kCurrent;
    ReadOverrides(j, text);
    return j;
  }
  j.form = "TOML job file";
  j.era = kToml;
  if (text.find('\0') != std::string::npos) throw Error(fmt::format("{}: a NUL byte: not a torchtitan TOML job file", file));
  if (text.rfind("\xEF\xBB\xBF", 0) == 0) throw Error(fmt::format("{}:1: a UTF-8 byte-order mark at the start: save the file without it", file));
  // toml++ 3.3 reaches __builtin_unreachable on some non-ASCII characters (unicode_autogenerated.h
  // is_non_ascii_horizontal_whitespace, found by fuzz/torchtitan_config_fuzzer.cc): each non-ASCII
  // byte is read as '?'. No key dockyard reads holds one; outside a string or comment '?' is TOML's
  // own syntax error.
  std::string ascii = text;
  for (char& ch : ascii) {
    if (static_cast<unsigned char>(ch) >= 0x80) ch = '?';
  }
  toml::table doc;
  try {
    doc = toml::parse(ascii, file);
  } catch (const Error& e) {
    throw Error(fmt::format("{}: {}", file, e.what()));
  } catch (const toml::parse_error& e) {
    throw Error(fmt::format("{}:{}:{}: not a torchtitan config (TOML: {}); torchtitan configs dockyard reads: a JSON dump "
                            "(--debug.save_config_file), a TOML job file, or a file of --section.key overrides",
                            file, e.source().begin.line, e.source().begin.column, e.description()));
  }
  std::map<std::string, int> lines;
  const Json root = TomlToJson(doc, "", lines);
  WalkTop(j, root, lines);
  if (root.contains("model") && root["model"].is_object() && root["model"].contains("name") && root["model"]["name"].is_string()) {
    j.model_name = root["model"]["name"].get<std::string>();
  }
  return j;
}

// ---- values ------------------------------------------------------------------------------------

class Reader {
 public:
  Reader(const Job& job, FrameworkConfig& config) : j_(job), c_(config) {}

  const Entry* Find(const std::string& key) {
    const auto it = j_.entries.find(key);
    if (it == j_.entries.end()) return nullptr;
    used_.insert(key);
    return &it->second;
  }
  bool Has(const std::string& key) const { return j_.entries.count(key) > 0; }
  int Line(const std::string& key) const {
    const auto it = j_.entries.find(key);
    return it == j_.entries.end() ? 0 : it->second.line;
  }
  [[noreturn]] void Bad(const std::string& key, const std::string& rule) {
    const Entry* e = Find(key);
    Fail(j_, e ? e->line : 0, fmt::format("{} {}: {}", key, e ? ShownWord(e->null ? "null" : e->text) : "(absent)", rule));
  }
  // A whole number in [min, max]; nullopt when absent, or null where torchtitan's field is
  // Optional (`nullable`). Quoted numbers ("8" in JSON or TOML) are refused: torchtitan would not
  // take a string for an int field.
  std::optional<int64_t> OptInt(const std::string& key, int64_t min, bool nullable = false, int64_t max = int64_t{1} << 40) {
    const Entry* e = Find(key);
    if (e == nullptr) return std::nullopt;
    if (e->null || e->text == "None") {
      if (nullable) return std::nullopt;
      Bad(key, "must be a whole number, not null");
    }
    int64_t v = 0;
    if (e->bare) Fail(j_, e->line, fmt::format("--{} needs a value (a whole number)", key));
    if (e->quoted) Bad(key, "a string: torchtitan's field is a whole number (write it without quotes)");
    if (e->list || !ParseStrictInt(e->text, &v)) Bad(key, "not a whole number (or out of range)");
    if (v < min) Bad(key, fmt::format("must be >= {}", min));
    if (v > max) Bad(key, fmt::format("must be <= {}", max));
    return v;
  }
  int64_t Int(const std::string& key, int64_t fallback, int64_t min) { return OptInt(key, min).value_or(fallback); }
  double Number(const std::string& key, double fallback) {
    const Entry* e = Find(key);
    if (e == nullptr) return fallback;
    double v = 0;
    if (e->bare) Fail(j_, e->line, fmt::format("--{} needs a value (a number)", key));
    if (e->quoted || e->null || e->list || !ParseStrictDouble(e->text, &v) || !(v >= 0 && v < 1e30)) Bad(key, "not a number >= 0");
    return v;
  }
  std::string Str(const std::string& key, const std::string& fallback) {
    const Entry* e = Find(key);
    if (e == nullptr) return fallback;
    if (e->null) return "";
    if (e->bare) Fail(j_, e->line, fmt::format("--{} needs a value", key));
    if (e->list) Bad(key, "must be one value, not a list");
    if (!e->quoted && j_.form != "command-line overrides") Bad(key, "must be a string (in quotes)");
    return e->text;
  }
  bool Bool(const std::string& key, bool fallback) {
    const Entry* e = Find(key);
    if (e == nullptr) return fallback;
    if (e->quoted) Bad(key, "a string: torchtitan's field is true or false");
    if (e->text == "true" || e->text == "True") return true;
    if (e->text == "false" || e->text == "False") return false;
    Bad(key, "must be true or false");
  }
  std::string Choice(const std::string& key, const std::string& fallback, const std::vector<std::string>& choices) {
    const std::string v = Str(key, fallback);
    if (std::find(choices.begin(), choices.end(), v) == choices.end()) {
      Bad(key, fmt::format("torchtitan takes {}{}", fmt::join(choices, " | "), DidYouMeanText(v, choices)));
    }
    return v;
  }
  // A dockyard flag the job sets: `from` the key when the file gives it, else torchtitan's default.
  void Flag(const std::string& flag, const std::string& value, const std::string& key) {
    c_.flags.push_back({flag, value, Has(key) ? key : fmt::format("(no {}: torchtitan's default)", key)});
  }
  void Ignore(const std::string& what) { c_.ignored.push_back(what); }
  void MarkUsed(const std::string& key) {
    if (Has(key)) used_.insert(key);
  }
  const std::set<std::string>& Used() const { return used_; }
  const Job& job() const { return j_; }

 private:
  const Job& j_;
  FrameworkConfig& c_;
  std::set<std::string> used_;
};

// The architecture a current-era dump's model tree records, for the check against the model.
struct TreeFacts {
  std::optional<int64_t> layers, dim, vocab, moe_layers, experts, top_k, expert_hidden, mtp_layers;
  std::optional<Json> token_dispatcher, inner_experts;
};

std::optional<int64_t> IntAt(const Json& j, std::initializer_list<const char*> path) {
  const Json* p = &j;
  for (const char* k : path) {
    if (!p->is_object() || !p->contains(k)) return std::nullopt;
    p = &(*p)[k];
  }
  if (!p->is_number_integer()) return std::nullopt;
  return p->get<int64_t>();
}

TreeFacts FactsOf(const Json& tree) {
  TreeFacts f;
  f.dim = IntAt(tree, {"dim"});
  f.vocab = IntAt(tree, {"vocab_size"});
  if (tree.contains("mtp_layers") && tree["mtp_layers"].is_array()) f.mtp_layers = static_cast<int64_t>(tree["mtp_layers"].size());
  if (!tree.contains("layers") || !tree["layers"].is_array()) return f;
  const Json& layers = tree["layers"];
  f.layers = static_cast<int64_t>(layers.size());
  int64_t moe = 0;
  for (const Json& layer : layers) {
    if (!layer.is_object() || !layer.contains("moe") || !layer["moe"].is_object()) continue;
    ++moe;
    const Json& m = layer["moe"];
    if (f.experts) continue;
    f.experts = IntAt(m, {"num_experts"});
    f.top_k = IntAt(m, {"router", "top_k"});
    f.expert_hidden = IntAt(m, {"routed_experts", "inner_experts", "hidden_dim"});
    if (m.contains("routed_experts") && m["routed_experts"].is_object()) {
      const Json& r = m["routed_experts"];
      if (r.contains("token_dispatcher") && r["token_dispatcher"].is_object()) f.token_dispatcher = r["token_dispatcher"];
      if (r.contains("inner_experts") && r["inner_experts"].is_object()) f.inner_experts = r["inner_experts"];
    }
  }
  f.moe_layers = moe;
  return f;
}

void CheckTreeAgainstModel(const Job& j, const TreeFacts& f, const ModelSpec& m, const std::string& model_name) {
  auto check = [&](const std::optional<int64_t>& dump, int64_t model, const char* what, const char* hf_key) {
    if (dump && *dump != model) {
      throw Error(fmt::format("{}: model_spec.model has {} {}, but {} has {} {}: the job trains another model than the one given", j.file,
                              what, *dump, model_name, hf_key, model));
    }
  };
  check(f.layers, m.num_hidden_layers, "layers", "num_hidden_layers");
  check(f.dim, m.hidden_size, "dim", "hidden_size");
  check(f.vocab, m.vocab_size, "vocab_size", "vocab_size");
  check(f.moe_layers, m.NumMoeLayers(), "MoE layers", "MoE layers");
  check(f.experts, m.moe.num_experts, "num_experts", "num_experts");
  check(f.top_k, m.moe.top_k, "router top_k", "num_experts_per_tok");
  check(f.expert_hidden, m.moe.moe_intermediate_size, "expert hidden_dim", "moe_intermediate_size");
}

bool IsFile(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// hf_assets_path/config.json, relative to the working directory, then to the file's directory.
std::optional<std::string> HfConfigOf(const std::string& assets, const std::string& file) {
  if (assets.empty()) return std::nullopt;
  std::vector<std::string> candidates = {assets + "/config.json"};
  const size_t slash = file.rfind('/');
  if (assets[0] != '/' && slash != std::string::npos) candidates.push_back(file.substr(0, slash + 1) + assets + "/config.json");
  for (const auto& c : candidates) {
    if (IsFile(c)) return c;
  }
  return std::nullopt;
}

// Keys without effect on a plan: run length, logging, seeds, determinism, compile's backend, the
// optimizer's hyper-parameters, the loss's vocabulary, CP's load balancer, the TOML era's job and
// model names.
bool WithoutEffect(const std::string& key) {
  static const char* const prefixes[] = {"job.", "training.steps", "training.gc_", "training.dataloader", "training.dataset",
                                         "training.mixed_precision_reduce", "debug.", "compile.backend", "compile.components",
                                         "optimizer.lr", "optimizer.eps", "optimizer.beta", "optimizer.weight_decay",
                                         "optimizer.optimizer_factory_kwargs_by_name", "optimizer.early_step_in_backward",
                                         "loss.global_vocab_size", "loss.mtp_scale", "loss.loss_fn", "parallelism.context_parallel_load_balancer",
                                         "parallelism.context_parallel_ptrr_mask_key", "parallelism.context_parallel_rotate_method",
                                         "parallelism.spmd_backend", "model.name", "model.flavor", "model.hf_assets_path",
                                         "model.tokenizer_path", "model.print_after_conversion", "hf_assets_path", "dump_folder",
                                         "activation_checkpoint.preserve_rng_state", "activation_checkpoint.determinism_check",
                                         "activation_checkpoint.debug", "activation_checkpoint.early_stop", "quantize."};
  for (const char* p : prefixes) {
    if (key.rfind(p, 0) == 0) return true;
  }
  return false;
}

// The decoder layers of each stage of a hand-made split (parallelism.module_fqns_per_model_part:
// one list of module names per stage, pipeline_parallel.py _pipeline_module_split). dockyard plans
// the embedding (tok_embeddings) on the first stage, the final norm and `output_name` (lm_head; the
// TOML era's output) on the last, and each stage's decoder layers as one run numbered on from the
// stage before (layers.0 ... layers.{n-1}, each once). Empty, with `error` set, for another split.
std::vector<int64_t> ModuleSplitLayers(const Entry& e, bool overrides, int64_t n, const std::string& output_name, std::string* error) {
  const std::string names = fmt::format("{}, layers.N, {}, {}", kTorchtitanEmbedding, kTorchtitanNorm, output_name);
  // A dump's or TOML file's nested list arrives as its lists' JSON texts; an override as tyro spells
  // it, one word per stage with its modules comma-separated (torchtitan/config/manager.py
  // list_str_rule), or as one JSON word.
  const auto tyro_stage = [](const std::string& word) {
    Json stage = Json::array();
    for (size_t start = 0; start <= word.size();) {
      const size_t comma = std::min(word.find(',', start), word.size());
      stage.push_back(word.substr(start, comma - start));
      start = comma + 1;
    }
    return stage;
  };
  const auto is_json = [](const std::string& text) { return !text.empty() && (text.front() == '[' || text.front() == '{' || text.front() == '"'); };
  std::vector<Json> stages;
  if (e.list) {
    for (const std::string& item : e.items) {
      if (overrides && !is_json(item)) {
        stages.push_back(tyro_stage(item));
      } else {
        const Json stage = Json::parse(item, nullptr, false);
        stages.push_back(stage.is_discarded() ? Json(item) : stage);  // a flat list's name: said as not a list below
      }
    }
  } else if (is_json(e.text)) {
    if (const Json all = Json::parse(e.text, nullptr, false); all.is_array()) stages.assign(all.begin(), all.end());
  } else if (overrides && !e.text.empty()) {
    stages.push_back(tyro_stage(e.text));
  }
  if (stages.empty()) {
    *error = fmt::format("needs a list of stages, each a list of module names ({})", names);
    return {};
  }
  std::vector<int64_t> out;
  int64_t next = 0;
  const size_t last = stages.size() - 1;
  for (size_t s = 0; s < stages.size(); ++s) {
    const Json& stage = stages[s];
    if (!stage.is_array() || !std::all_of(stage.begin(), stage.end(), [](const Json& x) { return x.is_string(); })) {
      const std::string shown = stage.is_discarded() ? std::string("not JSON") : stage.dump();
      *error = fmt::format("stage {} is {}, not a list of module names ({})", s, shown.size() > 60 ? shown.substr(0, 57) + "..." : shown, names);
      return {};
    }
    int64_t layers = 0;
    bool norm = false, output = false;
    for (const Json& x : stage) {
      const std::string name = x.get<std::string>();
      const bool embedding = name == kTorchtitanEmbedding;
      if (embedding || name == kTorchtitanNorm || name == output_name) {
        if ((embedding && s != 0) || (!embedding && s != last)) {
          *error = fmt::format("stage {} holds {}; dockyard plans the embedding on the first stage and the norm and {} on the last", s, name,
                               output_name);
          return {};
        }
        norm = norm || name == kTorchtitanNorm;
        output = output || name == output_name;
        continue;
      }
      if (name.rfind("layers.", 0) != 0) {
        *error = fmt::format("stage {} lists {}: not one of torchtitan's decoder modules ({})", s, name, names);
        return {};
      }
      if (name != fmt::format("layers.{}", next) || next >= n) {
        *error = next < n ? fmt::format("stage {} lists {} where layers.{} comes next (dockyard plans the decoder layers in order, each once)", s, name, next)
                          : fmt::format("stage {} lists {}: not one of torchtitan's decoder modules ({}, layers 0 to {})", s, name, names, n - 1);
        return {};
      }
      ++next;
      ++layers;
    }
    if (stage.empty() && s != 0 && s != last) {
      *error = fmt::format("stage {} is empty, and torchtitan refuses a model chunk without parameters (its optimizer per chunk raises "
                           "\"matched no parameters\")", s);
      return {};
    }
    if (s == 0 && std::find(stage.begin(), stage.end(), Json(kTorchtitanEmbedding)) == stage.end()) {
      *error = "the first stage lacks tok_embeddings (dockyard plans the embedding there)";
      return {};
    }
    if (s == last && (!norm || !output)) {
      *error = fmt::format("the last stage lacks {} (dockyard plans the final norm and {} there)", norm ? output_name : kTorchtitanNorm, output_name);
      return {};
    }
    out.push_back(layers);
  }
  if (next != n) {
    *error = fmt::format("lists layers 0 to {} of the model's {} decoder layers", next - 1, n);
    return {};
  }
  return out;
}

}  // namespace

FrameworkConfig ImportTorchtitanConfig(const std::string& text, const std::string& file, const std::optional<ModelSpec>& given_model,
                                       std::optional<int64_t> world_size) {
  const Job job = ReadJob(text, file);
  if (job.entries.empty() && !job.model_tree && !job.ac_mode && job.launch_words.empty()) {
    throw Error(fmt::format("{}: no torchtitan settings in the {} (an empty file?): give a JSON dump, a TOML job file or "
                            "--section.key overrides",
                            file, job.form));
  }
  FrameworkConfig c;
  c.framework = "torchtitan";
  c.file = file;
  c.form = job.form;
  for (const auto& [key, e] : job.entries) c.args.push_back({key, e.list ? e.items : std::vector<std::string>{e.null ? "null" : e.text}, e.line});
  Reader r(job, c);
  const bool toml_era = job.era == kToml;

  // The model: --model, else hf_assets_path/config.json.
  ModelSpec model;
  std::string model_name = "--model";
  if (given_model) {
    model = *given_model;
  } else {
    const std::string key = toml_era ? "model.hf_assets_path" : "hf_assets_path";
    const std::string assets = r.Str(key, "./tests/assets/tokenizer");  // both releases' default
    const std::optional<std::string> hf = HfConfigOf(assets, file);
    if (!hf) {
      throw Error(fmt::format("{}: the model: give --model (an HF config.json); the job's {} '{}' holds no config.json here (looked in "
                              "the working directory{})",
                              file, key, ShownWord(assets), file.find('/') == std::string::npos ? "" : " and beside the file"));
    }
    c.model_file = *hf;
    model = LoadModel(*hf);
    model_name = *hf;
  }
  if (job.model_tree) CheckTreeAgainstModel(job, FactsOf(*job.model_tree), model, model_name);
  const TreeFacts tree = job.model_tree ? FactsOf(*job.model_tree) : TreeFacts{};

  // The TOML era predates torchtitan PR #3167 (expert TP 1 or tp): convention.h's torchtitan-2026-03.
  c.flags.push_back({"--convention", toml_era ? "torchtitan-2026-03" : "torchtitan", toml_era ? "torchtitan (TOML era)" : "torchtitan"});

  // torchtitan shards data parallelism with FSDP2 only: a search does not try ZeRO-1 or DDP.
  c.search_defaults.push_back({"--dp-sharding", "fsdp", "(torchtitan: FSDP2 only)"});

  // Degrees (ParallelismConfig). dp_shard -1 is "the ranks left", as dockyard's --dp-shard -1.
  const int64_t dp_replicate = r.Int("parallelism.data_parallel_replicate_degree", 1, 1);
  const std::optional<int64_t> dp_shard_given = r.OptInt("parallelism.data_parallel_shard_degree", -1);
  if (dp_shard_given && *dp_shard_given == 0) r.Bad("parallelism.data_parallel_shard_degree", "must be -1 (the ranks left) or >= 1");
  const int64_t tp = r.Int("parallelism.tensor_parallel_degree", 1, 1);
  const int64_t cp = r.Int("parallelism.context_parallel_degree", 1, 1);
  const int64_t pp = r.Int("parallelism.pipeline_parallel_degree", 1, 1);
  const int64_t ep = r.Int("parallelism.expert_parallel_degree", 1, 1);
  auto degree = [&](const char* flag, int64_t value, const char* key) {
    if (r.Has(key)) r.Flag(flag, std::to_string(value), key);
    else c.search_defaults.push_back({flag, std::to_string(value), fmt::format("(no {}: torchtitan's default)", key)});
  };
  degree("--dp-replicate", dp_replicate, "parallelism.data_parallel_replicate_degree");
  // -1 (the ranks left) is dockyard's default too: no flag, so that a search may vary the others.
  if (dp_shard_given.value_or(-1) > 0) r.Flag("--dp-shard", std::to_string(*dp_shard_given), "parallelism.data_parallel_shard_degree");
  degree("--tp", tp, "parallelism.tensor_parallel_degree");
  degree("--cp", cp, "parallelism.context_parallel_degree");
  degree("--pp", pp, "parallelism.pipeline_parallel_degree");
  degree("--ep", ep, "parallelism.expert_parallel_degree");
  if (toml_era) degree("--etp", r.Int("parallelism.expert_tensor_parallel_degree", 1, 1), "parallelism.expert_tensor_parallel_degree");
  if (!r.Bool("parallelism.enable_sequence_parallel", true) && tp > 1) {
    r.Ignore("parallelism.enable_sequence_parallel false (dockyard prices sequence parallelism with tp)");
  }
  if (r.Has("parallelism.fsdp_reshard_after_forward")) {
    r.Flag("--fsdp-reshard-after-forward", r.Choice("parallelism.fsdp_reshard_after_forward", "default", {"default", "always", "never"}),
           "parallelism.fsdp_reshard_after_forward");
  }
  if (r.Bool("parallelism.enable_fsdp_symm_mem", false)) r.Ignore("parallelism.enable_fsdp_symm_mem (FSDP over symmetric memory: priced as NCCL)");

  // The batch. Current: token slots per micro-batch T and per step; TOML era: sequences.
  int64_t seq = 0, mbs = 0;
  int64_t global_default = 0;  // tokens per data-parallel rank and step when the file gives no global batch
  std::optional<int64_t> schedule_microbatches;
  if (!toml_era) {
    const int64_t t = r.Int("training.num_tokens_per_microbatch_per_dp_rank", 16384, 1);
    const int64_t s = r.Int("training.max_context_length", 2048, 1);
    // Trainer.__init__: T divides over the sequence-parallel and context-parallel shards.
    const int64_t divisor = (tp > 1 && r.Bool("parallelism.enable_sequence_parallel", true) ? tp : 1) * (cp > 1 ? 2 * cp : 1);
    if (t % divisor != 0) {
      r.Bad("training.num_tokens_per_microbatch_per_dp_rank",
            fmt::format("torchtitan requires a multiple of {} (tp with sequence parallelism x 2 cp)", divisor));
    }
    if (t % s == 0) {
      seq = s;
      mbs = t / s;
    } else if (t < s) {
      seq = t;
      mbs = 1;
      r.Ignore(fmt::format("training.max_context_length {} (above the {} tokens of a micro-batch: planned as sequences of {})", s, t, t));
    } else {
      r.Bad("training.num_tokens_per_microbatch_per_dp_rank",
            fmt::format("not a multiple of training.max_context_length {}: dockyard plans micro-batches of whole sequences", s));
    }
    r.Flag("--seq-len", std::to_string(seq), seq == s ? "training.max_context_length" : "training.num_tokens_per_microbatch_per_dp_rank");
    r.Flag("--micro-batch-size", std::to_string(mbs), "training.num_tokens_per_microbatch_per_dp_rank");
    if (pp > 1) schedule_microbatches = r.Int("parallelism.num_pp_microbatches", 1, 1);
    else r.MarkUsed("parallelism.num_pp_microbatches");
    const int64_t step = r.Int("training.num_tokens_per_train_step", -1, -1);
    if (step == 0) r.Bad("training.num_tokens_per_train_step", "must be -1 (one micro-batch schedule per data-parallel rank) or > 0");
    if (step > 0) r.Flag("--global-batch-tokens", std::to_string(step), "training.num_tokens_per_train_step");
    else global_default = t * (pp > 1 ? *schedule_microbatches : 1);
  } else {
    seq = r.Int("training.seq_len", 2048, 1);
    const int64_t local = r.Int("training.local_batch_size", 8, 1);
    r.Flag("--seq-len", std::to_string(seq), "training.seq_len");
    if (pp > 1) {
      mbs = r.Int("parallelism.pipeline_parallel_microbatch_size", 1, 1);
      if (local % mbs != 0) {
        r.Bad("training.local_batch_size", fmt::format("not divisible by parallelism.pipeline_parallel_microbatch_size {} (torchtitan asserts it)", mbs));
      }
      schedule_microbatches = local / mbs;
      r.Flag("--micro-batch-size", std::to_string(mbs), "parallelism.pipeline_parallel_microbatch_size");
    } else {
      mbs = local;
      r.MarkUsed("parallelism.pipeline_parallel_microbatch_size");
      r.Flag("--micro-batch-size", std::to_string(mbs), "training.local_batch_size");
    }
    const int64_t global = r.Int("training.global_batch_size", -1, -1);
    if (global == 0) r.Bad("training.global_batch_size", "must be -1 (local batch x dp) or > 0");
    if (global > 0) r.Flag("--global-batch-size", std::to_string(global), "training.global_batch_size");
    else global_default = local * seq;
  }

  // The pipeline: schedule, stages per rank, torchtitan's split of the layers.
  if (pp > 1) {
    static const std::vector<std::string> single = {"1F1B", "GPipe"};
    static const std::vector<std::string> multi = {"Interleaved1F1B", "LoopedBFS", "InterleavedZeroBubble", "ZBVZeroBubble", "DualPipeV"};
    // PyTorch's get_schedule_class matches the name case-insensitively (torch/distributed/pipelining/schedules.py).
    std::string schedule = r.Str("parallelism.pipeline_parallel_schedule", "1F1B");
    for (const auto* names : {&single, &multi}) {
      for (const std::string& name : *names) {
        const auto same = [](char a, char b) { return std::tolower(static_cast<unsigned char>(a)) == std::tolower(static_cast<unsigned char>(b)); };
        if (name.size() == schedule.size() && std::equal(name.begin(), name.end(), schedule.begin(), same)) schedule = name;
      }
    }
    const bool is_single = std::find(single.begin(), single.end(), schedule) != single.end();
    const bool is_multi = std::find(multi.begin(), multi.end(), schedule) != multi.end();
    if (!is_single && !is_multi) {
      std::vector<std::string> all = single;
      all.insert(all.end(), multi.begin(), multi.end());
      r.Bad("parallelism.pipeline_parallel_schedule", fmt::format("torchtitan's schedules are {}{}", fmt::join(all, ", "), DidYouMeanText(schedule, all)));
    }
    if (schedule != "1F1B" && schedule != "Interleaved1F1B") {
      r.Bad("parallelism.pipeline_parallel_schedule",
            "dockyard plans 1F1B and Interleaved1F1B (GPipe keeps every micro-batch's activations; the zero-bubble and V schedules "
            "split the backward and place stages otherwise)");
    }
    if (!r.Str("parallelism.pipeline_parallel_schedule_csv", "").empty()) {
      r.Bad("parallelism.pipeline_parallel_schedule_csv", "a schedule from a CSV file is not planned; give pipeline_parallel_schedule");
    }
    // The schedule as messages name it: torchtitan's default when the file sets none.
    const std::string schedule_named = schedule + (r.Has("parallelism.pipeline_parallel_schedule") ? "" : " (pipeline_parallel_schedule's default)");
    const char* kModules = "parallelism.module_fqns_per_model_part";
    const Entry* modules = r.Find(kModules);
    if (modules && (modules->null || modules->text == "None")) modules = nullptr;
    const int64_t n = model.num_hidden_layers;
    const int64_t first = r.OptInt("parallelism.pipeline_parallel_first_stage_less_layers", 0, false, n).value_or(1);
    const int64_t last = r.OptInt("parallelism.pipeline_parallel_last_stage_less_layers", 0, false, n).value_or(1);
    int64_t per_rank = is_single ? 1 : 2;
    if (const std::optional<int64_t> lps = r.OptInt("parallelism.pipeline_parallel_layers_per_stage", 1, true)) {
      const int64_t stages = (n + first + last + *lps - 1) / *lps;
      if (stages % pp != 0) {
        r.Bad("parallelism.pipeline_parallel_layers_per_stage",
              fmt::format("gives {} virtual stages ({} layers + {} + {}), which torchtitan requires divisible by the pipeline degree {}", stages, n,
                          first, last, pp));
      }
      per_rank = stages / pp;
      if (is_single && per_rank != 1) {
        r.Bad("parallelism.pipeline_parallel_layers_per_stage",
              fmt::format("gives {} stages per rank; torchtitan's single-stage schedule {} needs exactly 1", per_rank, schedule_named));
      }
      if (!is_single && per_rank < 2) {
        r.Bad("parallelism.pipeline_parallel_layers_per_stage",
              fmt::format("gives {} stage per rank; torchtitan's multi-stage schedule {} needs at least 2", per_rank, schedule));
      }
    }
    std::vector<int64_t> stage_layers;
    if (modules) {
      // A hand-made split: one stage per list (pipeline_llm skips the generator; _pipeline_module_split
      // asserts the stages divide over pp, stage s on rank s % pp).
      std::string error;
      stage_layers = ModuleSplitLayers(*modules, job.form == "command-line overrides", n, TorchtitanOutputModule(toml_era), &error);
      if (stage_layers.empty()) r.Bad(kModules, error);
      if (stage_layers.size() % static_cast<size_t>(pp) != 0) {
        r.Bad(kModules, fmt::format("{} stages, which torchtitan requires divisible by the pipeline degree {} (_get_pp_rank_to_stage_indices_mapping)",
                                    stage_layers.size(), pp));
      }
      per_rank = static_cast<int64_t>(stage_layers.size()) / pp;
      if (is_single && per_rank != 1) {
        r.Bad(kModules, fmt::format("{} stages per rank; torchtitan's single-stage schedule {} runs exactly 1", per_rank, schedule_named));
      }
    } else {
      std::string error;
      stage_layers = TorchtitanStageLayers(pp * per_rank, n, first, last, &error);
      if (stage_layers.empty()) {
        // Named by the key that broke it: a stage less weight above the smallest stage, else the stage count.
        const int64_t smallest = (n + first + last) / (pp * per_rank);
        const char* key = smallest < 1        ? "parallelism.pipeline_parallel_degree"
                          : first > smallest ? "parallelism.pipeline_parallel_first_stage_less_layers"
                          : last > smallest  ? "parallelism.pipeline_parallel_last_stage_less_layers"
                                             : "parallelism.pipeline_parallel_degree";
        r.Bad(key, fmt::format("{}: torchtitan refuses the split ({} stages of {} layers)", error, pp * per_rank, n));
      }
    }
    const std::vector<int64_t> ranks = TorchtitanRankLayers(stage_layers, pp);
    for (size_t i = 0; i < ranks.size(); ++i) {
      if (ranks[i] < 1) {
        r.Bad("parallelism.pipeline_parallel_degree",
              fmt::format("{} leaves pipeline rank {} no decoder layer, which dockyard does not plan",
                          modules ? fmt::format("the module split ({} stages)", stage_layers.size())
                                  : fmt::format("torchtitan's split ({} stages over {} layers, first / last stage less layers {} / {})", pp * per_rank, n, first, last),
                          i));
      }
    }
    // Per rank at one stage per rank; per virtual stage (v x pp + p) with several, as torchtitan
    // places them (ParseLayerSplit's pp x vpp form).
    r.Flag("--pp-layer-split", fmt::format("{}", fmt::join(per_rank > 1 ? stage_layers : ranks, ",")),
           modules ? kModules : "parallelism.pipeline_parallel_first_stage_less_layers");
    c.flags.back().from = modules ? kModules : "torchtitan's stage split (parallelism.pipeline_parallel_first/last_stage_less_layers, _layers_per_stage)";
    if (per_rank > 1) {
      r.Flag("--vpp", std::to_string(per_rank), modules ? kModules : "parallelism.pipeline_parallel_layers_per_stage");
      c.flags.back().from = modules ? kModules : "parallelism.pipeline_parallel_schedule, parallelism.pipeline_parallel_layers_per_stage";
    } else {
      c.search_defaults.push_back({"--vpp", "1", "(parallelism.pipeline_parallel_schedule 1F1B)"});
    }
    r.Flag("--num-microbatches", std::to_string(*schedule_microbatches), toml_era ? "training.local_batch_size" : "parallelism.num_pp_microbatches");
    if (toml_era) c.flags.back().from = "training.local_batch_size / parallelism.pipeline_parallel_microbatch_size";
  } else {
    for (const char* key : {"parallelism.pipeline_parallel_schedule", "parallelism.pipeline_parallel_schedule_csv", "parallelism.module_fqns_per_model_part",
                            "parallelism.pipeline_parallel_first_stage_less_layers", "parallelism.pipeline_parallel_last_stage_less_layers",
                            "parallelism.pipeline_parallel_layers_per_stage", "parallelism.pipeline_parallel_split_points"}) {
      r.MarkUsed(key);
    }
    c.search_defaults.push_back({"--vpp", "1", "(no pipeline parallelism)"});
  }

  // No global batch in the file: one schedule per data-parallel rank (Trainer.__init__: the step's
  // tokens default to T x num_pp_microbatches x dp). A search pins that global batch at the file's
  // degrees, as it varies them.
  if (global_default > 0 && world_size && *world_size > 0) {
    const int64_t dp = dp_shard_given.value_or(-1) > 0 ? dp_replicate * *dp_shard_given : *world_size / (tp * cp * pp);
    if (dp > 0) {
      c.search_defaults.push_back({"--global-batch-tokens", std::to_string(global_default * dp),
                                   fmt::format("(no {}: {} tokens per data-parallel rank x dp {} at the file's degrees)",
                                               toml_era ? "training.global_batch_size" : "training.num_tokens_per_train_step", global_default, dp)});
    }
  }

  // Precision and the optimizer.
  if (r.Has("training.mixed_precision_param")) {
    r.Flag("--param-dtype", r.Choice("training.mixed_precision_param", "bfloat16", {"bfloat16", "float32"}), "training.mixed_precision_param");
  }
  if (r.Has("training.mixed_precision_reduce")) r.Flag("--grad-dtype", r.Choice("training.mixed_precision_reduce", "float32", {"float32"}), "training.mixed_precision_reduce");
  if (r.Str("training.dtype", "float32") == "bfloat16") {
    r.Bad("training.dtype", "pure bf16 training (parameters, gradients and optimizer states in bf16, no fp32 master) is not planned");
  }
  if (r.Bool("training.enable_cpu_offload", false)) r.Bad("training.enable_cpu_offload", "FSDP's CPU offload is not planned");
  if (r.Has("training.max_norm")) r.Flag("--clip-grad", fmt::format("{}", r.Number("training.max_norm", 1.0)), "training.max_norm");
  const std::string impl = r.Choice("optimizer.implementation", "fused", {"for-loop", "foreach", "fused", "fused_opt_states_bf16"});
  if (impl == "fused_opt_states_bf16") r.Flag("--optimizer-states-dtype", "bfloat16", "optimizer.implementation");
  if (toml_era) {
    const std::string name = r.Str("optimizer.name", "AdamW");
    if (name != "AdamW" && name != "Adam") r.Bad("optimizer.name", "dockyard plans Adam / AdamW (two moments per parameter)");
  } else if (const Entry* e = r.Find("optimizer.param_groups")) {
    for (const std::string& group : e->items) {
      if (group.find("Muon") != std::string::npos) r.Bad("optimizer.param_groups", "Muon is not planned (dockyard plans Adam / AdamW)");
    }
  }

  // Activation checkpointing.
  std::string recompute, sac_option;
  if (toml_era) {
    const std::string mode = r.Choice("activation_checkpoint.mode", "selective", {"selective", "full", "memory_budget", "none"});
    if (mode == "memory_budget") r.Bad("activation_checkpoint.mode", "the memory-budget policy (a compiler's trade-off) is not planned");
    recompute = mode;
    if (mode == "selective") sac_option = r.Str("activation_checkpoint.selective_ac_option", "2");
    else r.MarkUsed("activation_checkpoint.selective_ac_option");
    r.MarkUsed("activation_checkpoint.per_op_sac_force_recompute_mm_shapes_by_fqns");
  } else if (job.form == "command-line overrides") {
    const std::string mode = job.ac_mode.value_or("selective");
    if (mode == "memory-budget" || mode == "memory_budget") Fail(job, 0, "activation-checkpoint:memory-budget: the memory-budget policy is not planned");
    if (mode != "none" && mode != "full" && mode != "selective") {
      Fail(job, 0, fmt::format("activation-checkpoint:{}: torchtitan takes none | full | selective | memory-budget", ShownWord(mode)));
    }
    recompute = mode;
    if (mode == "selective") sac_option = "op";
  } else {
    // A dump records no class name: the policy is told by its keys (activation_checkpoint.py).
    const auto it = job.entries.find("activation_checkpoint");
    bool any = false;
    for (const auto& [k, e] : job.entries) any = any || k.rfind("activation_checkpoint.", 0) == 0;
    if (it != job.entries.end() && it->second.null) recompute = "none";
    else if (!any) recompute = "selective", sac_option = "op";  // Trainer.Config's default SelectiveAC
    else if (r.Has("activation_checkpoint.memory_budget")) r.Bad("activation_checkpoint.memory_budget", "the memory-budget policy is not planned");
    else if (r.Has("activation_checkpoint.force_recompute_mm_shapes_by_fqns")) recompute = "selective", sac_option = "op";
    else recompute = "full";
    r.MarkUsed("activation_checkpoint");
    r.MarkUsed("activation_checkpoint.force_recompute_mm_shapes_by_fqns");
  }
  const std::string ac_key = toml_era ? "activation_checkpoint.mode" : "activation_checkpoint";
  c.flags.push_back({"--recompute", recompute,
                     job.entries.count(ac_key) || job.ac_mode || std::any_of(job.entries.begin(), job.entries.end(), [](const auto& e) {
                       return e.first.rfind("activation_checkpoint.", 0) == 0;
                     })
                         ? (job.form == "command-line overrides" ? "activation-checkpoint:" + recompute : ac_key)
                         : "(no activation_checkpoint: torchtitan's default, selective)"});
  if (!sac_option.empty()) c.flags.push_back({"--selective-ac-option", sac_option, toml_era ? "activation_checkpoint.selective_ac_option" : "(SelectiveAC: per-op)"});

  // Expert communication and low precision.
  if (toml_era) {
    const std::string backend = r.Choice("parallelism.expert_parallel_comm_backend", "standard", {"standard", "deepep"});
    if (backend == "deepep") r.Flag("--dispatcher", "deepep", "parallelism.expert_parallel_comm_backend");
    const Entry* conv = r.Find("model.converters");
    std::vector<std::string> converters = conv ? (conv->list ? conv->items : std::vector<std::string>{conv->text}) : std::vector<std::string>{};
    bool float8 = false, mx = false;
    for (const std::string& name : converters) {
      if (name == "float8" || name == "quantize.linear.float8" || name == "quantize.grouped_mm.float8") {
        float8 = true;
      } else if (name == "mx" || name == "quantize.linear.mx" || name == "quantize.grouped_mm.mx") {
        // torchao's MXFP8 training (torchtitan components/quantization/mx.py: MXFP8LinearConverter,
        // MXFP8GroupedExpertsConverter): block-scaled FP8, priced as TransformerEngine's MXFP8.
        mx = true;
      } else if (name.find("mx") != std::string::npos) {
        r.Bad("model.converters", fmt::format("unknown MX converter \"{}\" (torchtitan's are mx, quantize.linear.mx, quantize.grouped_mm.mx)", name));
      } else if (!name.empty()) {
        r.Ignore(fmt::format("model.converters {} (not modelled)", name));
      }
    }
    if (float8 && mx) r.Bad("model.converters", "Float8 and MX converters together: dockyard prices one FP8 recipe per run");
    // One setting however many converters name it (linears and grouped experts are both priced in
    // FP8: dockyard's --precision covers every GEMM group, precision.h Fp8GemmGroup).
    if (float8 || mx) r.Flag("--precision", "fp8", "model.converters");
    if (mx) r.Flag("--fp8-recipe", "mxfp8", "model.converters");
    if (r.Bool("parallelism.enable_async_tensor_parallel", false)) r.Ignore("parallelism.enable_async_tensor_parallel (async TP: priced as plain TP)");
  } else if (tree.token_dispatcher) {
    const Json& d = *tree.token_dispatcher;
    if (d.contains("non_blocking_capacity_factor")) {
      c.flags.push_back({"--dispatcher", "deepep", "model_spec.model (HybridEP token dispatcher)"});
      c.flags.push_back({"--moe-flex-dispatcher-backend", "hybridep", "model_spec.model (HybridEP token dispatcher)"});
    } else if (d.contains("cudagraphable")) {
      c.flags.push_back({"--dispatcher", "deepep", "model_spec.model (DeepEP token dispatcher)"});
    } else if (d.contains("dtype") && d.contains("device")) {
      r.Ignore("model_spec.model minimal_async_ep token dispatcher (priced as the all-to-all dispatcher)");
    }
    if (tree.inner_experts && tree.inner_experts->contains("recipe_name")) {
      // torchtitan's MXFP8 grouped experts (MXFP8GroupedExpertsConverter writes its recipe name there).
      c.flags.push_back({"--precision", "fp8", "model_spec.model inner_experts.recipe_name (MXFP8 grouped experts)"});
      c.flags.push_back({"--fp8-recipe", "mxfp8", "model_spec.model inner_experts.recipe_name (MXFP8 grouped experts)"});
    }
    if (d.contains("pad_multiple") && !d.contains("non_blocking_capacity_factor")) {
      r.Ignore("model_spec.model token_dispatcher.pad_multiple (Float8 grouped experts; torchtitan's Float8 converters leave no other trace "
               "in the dump: give --precision fp8 to price FP8 GEMMs)");
    }
  }
  if (tree.mtp_layers && *tree.mtp_layers > 0) c.flags.push_back({"--mtp-layers", std::to_string(*tree.mtp_layers), "model_spec.model.mtp_layers"});
  if (!toml_era && r.Bool("compile.enable_async_tensor_parallel", false)) r.Ignore("compile.enable_async_tensor_parallel (async TP: priced as plain TP)");
  if (r.Bool("compile.enable", false)) r.Ignore("compile.enable (torch.compile: priced as eager)");
  if (!toml_era && !r.Bool("training.disable_cuda_graphs", false)) {
    r.Ignore("training.disable_cuda_graphs false (torchtitan's CUDA graphs: not priced)");
  }
  if (r.Bool("debug.moe_force_load_balance", false)) r.Ignore("debug.moe_force_load_balance (balanced routing: give --routing uniform to simulate it)");
  if (const std::optional<int64_t> chunks = r.OptInt("loss.num_chunks", 1, true); chunks && *chunks > 1) {
    r.Ignore(fmt::format("loss.num_chunks {} (the chunked loss: priced as one logits tensor)", *chunks));
  }
  for (const std::string& w : job.launch_words) {
    c.ignored.push_back(w + " (the config function's own settings are not read: keys this file does not give take torchtitan's defaults)");
  }

  // The rest: keys without effect, and keys that would change a plan but are not modelled.
  for (const auto& entry : job.entries) {
    // (not a structured binding: clang 14, which builds the fuzz targets, cannot capture one)
    const std::string& key = entry.first;
    const Entry& e = entry.second;
    if (r.Used().count(key)) {
      c.read.push_back(key);
    } else if (WithoutEffect(key)) {
      c.not_read.push_back(key);
    } else if (std::none_of(c.ignored.begin(), c.ignored.end(), [&](const std::string& s) { return s.rfind(key + " ", 0) == 0; })) {
      c.ignored.push_back(fmt::format("{} {}", key, ShownWord(e.null ? "null" : e.text)));
    }
  }
  for (const std::string& s : job.not_read_sections) c.not_read.push_back(s);
  return c;
}

ModelSpec TorchtitanModel(const FrameworkConfig& config, const std::optional<ModelSpec>& base) {
  if (base) return *base;
  if (config.model_file.empty()) throw Error(fmt::format("{}: no model: give --model (an HF config.json)", config.file));
  return LoadModel(config.model_file);
}

}  // namespace dockyard
