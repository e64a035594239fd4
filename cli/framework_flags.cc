// Framework job configs on dockyard-plan's command line (see framework_flags.h).
#include "cli/framework_flags.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "cli/flags.h"
#include "planner/base/error.h"
#include "planner/base/file_util.h"
#include "planner/base/number_text.h"
#include "planner/frameworks/megatron_args.h"
#include "planner/frameworks/megatron_bridge_config.h"
#include "planner/frameworks/torchtitan_config.h"
#include "planner/layout/default_layout.h"
#include "planner/model/model_file.h"
#include "planner/model/training.h"
#include "planner/report/provenance.h"

namespace dockyard::cli {
namespace {

// The job configs dockyard reads: each framework's flag, its reader and its model.
struct FrameworkReader {
  const char* flag;
  std::string PlanCliOptions::*path;
  FrameworkConfig (*import)(const std::string& text, const std::string& file, const std::optional<ModelSpec>& model,
                            std::optional<int64_t> world_size);
  ModelSpec (*model)(const FrameworkConfig& config, const std::optional<ModelSpec>& base);
  bool needs_model_first;  // the reader needs --model's layers (torchtitan's stage split)
};

const std::vector<FrameworkReader>& Readers() {
  static const std::vector<FrameworkReader> readers = {
      {"--from-megatron", &PlanCliOptions::from_megatron,
       [](const std::string& text, const std::string& file, const std::optional<ModelSpec>&, std::optional<int64_t>) {
         return ImportMegatronArgs(text, file);
       },
       &MegatronModel, false},
      {"--from-torchtitan", &PlanCliOptions::from_torchtitan, &ImportTorchtitanConfig, &TorchtitanModel, true},
      {"--from-megatron-bridge", &PlanCliOptions::from_megatron_bridge,
       [](const std::string& text, const std::string& file, const std::optional<ModelSpec>& model, std::optional<int64_t>) {
         return ImportMegatronBridgeConfig(text, file, model);
       },
       &MegatronModel, true},
  };
  return readers;
}

const FrameworkReader& ReaderOf(const PlanCliOptions& o) {
  for (const FrameworkReader& r : Readers()) {
    if (r.flag == o.framework_flag) return r;
  }
  throw Error("internal: no reader for " + o.framework_flag);
}

// The value of `flag` in `args` ("--flag V" or "--flag=V"): nullopt when absent; "" for a switch
// (no value follows, or the next word is a flag). Counts its occurrences in `*count`.
std::optional<std::string> GivenValue(const std::vector<std::string>& args, const std::string& flag, int* count) {
  std::optional<std::string> value;
  *count = 0;
  for (size_t i = 1; i < args.size(); ++i) {
    if (args[i] == flag) {
      ++*count;
      value = (i + 1 < args.size() && args[i + 1].rfind("--", 0) != 0) ? args[i + 1] : "";
    } else if (args[i].rfind(flag + "=", 0) == 0) {
      ++*count;
      value = args[i].substr(flag.size() + 1);
    }
  }
  return value;
}

// The same setting written two ways ("2" and "2.0", "1" and "1.0" for --clip-grad; a switch the
// file sets, "" and CLI11's true words, "--overlap-grad-reduce=true").
// The layers per stage of a split the reader wrote ("n0,n1,...", megatron_args.cc), empty when
// malformed.
std::vector<int64_t> StagesOf(const std::string& split) {
  std::vector<int64_t> stages;
  std::stringstream in(split);
  for (std::string n; std::getline(in, n, ',');) {
    int64_t v = 0;
    if (!ParseStrictInt(n, &v)) return {};
    stages.push_back(v);
  }
  return stages;
}

// Whether `given` (--pp-layer-split as typed: "15,11,11,11" or "15+11") is the file's split `file`
// (always "n0,n1,..."), read against the file's stages and layers (training.h ParseLayerSplit).
bool SameLayerSplit(const std::string& given, const std::string& file) {
  const std::vector<int64_t> stages = StagesOf(file);
  int64_t layers = 0;
  for (int64_t n : stages) layers += n;
  try {
    return !stages.empty() && ParseLayerSplit(given, static_cast<int64_t>(stages.size()), layers, "--pp-layer-split") == stages;
  } catch (const Error&) {
    return false;  // not a split of these stages: a contradiction, named as such
  }
}

bool SameValue(const std::string& a, const std::string& b) {
  if (a == b) return true;
  if (b.empty()) return a == "true" || a == "1" || a == "on" || a == "yes";
  double x = 0, y = 0;
  return ParseStrictDouble(a, &x) && ParseStrictDouble(b, &y) && x == y;
}

// A job config is a text file of at most kMaxConfigBytes (the largest published launch script is a
// few KiB): a directory, a device, a FIFO or a larger file is refused before reading.
constexpr int64_t kMaxConfigBytes = int64_t{16} << 20;

std::string ReadConfigFile(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) throw Error(fmt::format("{}: cannot open the file ({})", path, std::strerror(errno)));
  if (S_ISDIR(st.st_mode)) throw Error(fmt::format("{}: is a directory, not a file of arguments", path));
  if (!S_ISREG(st.st_mode)) throw Error(fmt::format("{}: not a regular file (a device, FIFO or socket): give the file of arguments", path));
  if (st.st_size > kMaxConfigBytes) {
    throw Error(fmt::format("{}: {} bytes, more than the {} MiB a file of arguments may have", path, st.st_size, kMaxConfigBytes >> 20));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in.good()) throw Error(fmt::format("{}: cannot open the file", path));
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The subcommand named in `args` (the first word that is one of `app`'s), or nullptr.
const CLI::App* SubcommandOf(const std::vector<std::string>& args, const CLI::App& app) {
  for (size_t i = 1; i < args.size(); ++i) {
    for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
      if (args[i] == sub->get_name()) return sub;
    }
  }
  return nullptr;
}

// Whether `app` (or the app a subcommand falls through to) takes `flag`.
bool Takes(const CLI::App* app, const std::string& flag) {
  for (const CLI::App* a = app; a != nullptr; a = a->get_parent()) {
    if (a->get_option_no_throw(flag) != nullptr) return true;
    if (!a->get_fallthrough()) break;
  }
  return false;
}

std::set<std::string> ParseUnpin(const std::vector<std::string>& args) {
  int count = 0;
  const std::optional<std::string> value = GivenValue(args, "--unpin", &count);
  std::set<std::string> names;
  if (!value) return names;
  std::stringstream s(*value);
  std::string name;
  while (std::getline(s, name, ',')) {
    if (name.empty()) throw UsageError(fmt::format("--unpin '{}': an empty name in the list", *value));
    names.insert(name.rfind("--", 0) == 0 ? name : "--" + name);
  }
  return names;
}

}  // namespace

void AddFrameworkFlags(CLI::App* app, PlanCliOptions& o, bool search) {
  app->add_option("--from-megatron", o.from_megatron,
                  search ? "a Megatron-LM argument file (docs/frameworks.md): its model, and its degrees and settings as pins "
                           "(--unpin frees them); --world-size still needed"
                         : "a Megatron-LM argument file (docs/frameworks.md): its model and layout, as the flags they are; "
                           "--world-size still needed (--model: checked against its architecture)");
  app->add_option("--from-torchtitan", o.from_torchtitan,
                  search ? "a torchtitan job config (docs/frameworks.md: a JSON dump, a TOML job file or command-line overrides): its "
                           "degrees and settings as pins (--unpin frees them); the model from --model or its hf_assets_path; "
                           "--world-size still needed"
                         : "a torchtitan job config (docs/frameworks.md: a JSON dump, a TOML job file or command-line overrides): its "
                           "layout, as the flags they are; the model from --model or its hf_assets_path; --world-size still needed");
  app->add_option("--from-megatron-bridge", o.from_megatron_bridge,
                  "a Megatron-Bridge ConfigContainer YAML (docs/frameworks.md: a run_config.yaml dump, or an overrides YAML with "
                  "--model): its layout and settings, as the flags they are; --world-size still needed");
  if (search) {
    app->add_option("--unpin", o.unpin,
                    "with --from-megatron / --from-torchtitan: comma-separated settings of the file to search instead of pin, e.g. "
                    "tp,pp,ep,etp,vpp");
    app->add_option("--emit-row", o.emit_row, "with --emit: the ranking's row N (1 = the best) written as a launch config");
  }
  app->add_option("--emit", o.emit,
                  search ? "megatron | torchtitan | megatron-bridge: write --emit-row's layout as Megatron-LM arguments, torchtitan "
                           "overrides or a Megatron-Bridge overrides YAML"
                         : "megatron | torchtitan | megatron-bridge: write the plan's layout as Megatron-LM arguments, torchtitan "
                           "command-line overrides or a Megatron-Bridge overrides YAML (stdout without --emit-out)")
      ->check(CLI::IsMember({"megatron", "torchtitan", "megatron-bridge"}));
  app->add_option("--emit-out", o.emit_out, "with --emit: the file to write (default: stdout, in place of the tables)");
}

// The settings a search varies, which --unpin may free (docs/search.md): its degrees and the
// settings it enumerates beside them.
const std::vector<std::string>& UnpinnableFlags() {
  static const std::vector<std::string> flags = {"--tp", "--pp", "--cp", "--ep", "--etp", "--dp-replicate", "--dp-shard", "--vpp",
                                                 "--micro-batch-size", "--recompute", "--dp-sharding", "--dispatcher",
                                                 "--overlap-moe-expert-parallel-comm", "--no-overlap-moe-expert-parallel-comm"};
  return flags;
}

// The flag a --unpin name stands for ("tp" -> "--tp"; "overlap-moe-expert-parallel-comm" also
// frees its "--no-" pin).
bool Unpinned(const std::set<std::string>& unpin, const std::string& flag) {
  if (unpin.count(flag)) return true;
  return flag == "--no-overlap-moe-expert-parallel-comm" && unpin.count("--overlap-moe-expert-parallel-comm");
}

std::vector<std::string> ExpandFrameworkConfig(const std::vector<std::string>& args, const CLI::App& app, PlanCliOptions* o) {
  int count = 0;
  const FrameworkReader* reader = nullptr;
  std::optional<std::string> path;
  for (const FrameworkReader& r : Readers()) {
    int n = 0;
    std::optional<std::string> p = GivenValue(args, r.flag, &n);
    if (!p) continue;
    if (reader) throw UsageError(fmt::format("{} and {}: give one job config", reader->flag, r.flag));
    reader = &r;
    path = p;
    count = n;
  }
  if (!path) {
    if (GivenValue(args, "--unpin", &count)) throw UsageError("--unpin frees settings of a --from-megatron, --from-torchtitan or --from-megatron-bridge file; give one");
    return args;
  }
  const std::string flag = reader->flag;  // the flag the messages name
  if (count > 1) throw UsageError(fmt::format("{}: given {} times; give one file", flag, count));
  if (path->empty()) throw UsageError(fmt::format("{} needs a path, got an empty string", flag));
  const CLI::App* sub = SubcommandOf(args, app);
  const std::string command = sub ? sub->get_name() : "plan";
  if (command != "plan" && command != "check" && command != "simulate" && command != "search") {
    throw UsageError(fmt::format("{} is taken by plan, check, simulate and search, not {}", flag, command));
  }
  const bool search = command == "search";
  const CLI::App* target = sub ? sub : &app;
  // torchtitan's stage split needs the model's layers before the file's flags are known.
  std::optional<ModelSpec> model;
  if (reader->needs_model_first) {
    int n = 0;
    if (const std::optional<std::string> m = GivenValue(args, "--model", &n); m && !m->empty()) {
      model = WithFlag("--model", [&] { return LoadModel(*m); });
    }
  }
  std::optional<int64_t> world_size;
  if (int n = 0; const std::optional<std::string> w = GivenValue(args, "--world-size", &n)) {
    if (int64_t v = 0; ParseStrictInt(*w, &v) && v > 0) world_size = v;
  }
  FrameworkConfig config = WithFlag(flag, [&] { return reader->import(ReadConfigFile(*path), *path, model, world_size); });
  o->framework_flag = reader->flag;
  const std::set<std::string> unpin = search ? ParseUnpin(args) : std::set<std::string>{};
  for (const std::string& name : unpin) {
    const auto& can = UnpinnableFlags();
    if (std::find(can.begin(), can.end(), name) == can.end() || name.rfind("--no-", 0) == 0) {
      std::vector<std::string> names;
      for (const auto& f : can) {
        if (f.rfind("--no-", 0) != 0) names.push_back(f.substr(2));
      }
      throw UsageError(fmt::format("--unpin {}: not a setting the search varies (it varies {})", name.substr(2), fmt::join(names, ", ")));
    }
  }
  std::vector<std::string> out = args;
  std::vector<ConfigFlag> kept;
  auto given_anyhow = [&](const std::string& flag) {
    int n = 0;
    return GivenValue(args, flag, &n).has_value() ||
           (flag.rfind("--no-", 0) == 0 ? GivenValue(args, "--" + flag.substr(5), &n).has_value()
                                        : GivenValue(args, "--no-" + flag.substr(2), &n).has_value());
  };
  // The file's settings, then (search) the defaults it leaves to Megatron; a default yields to the
  // command line, a setting the file gives does not.
  std::vector<std::pair<ConfigFlag, bool>> settings;
  for (const ConfigFlag& f : config.flags) settings.push_back({f, false});
  if (search) {
    for (const ConfigFlag& f : config.search_defaults) settings.push_back({f, true});
  }
  for (const std::string& name : unpin) {
    int n = 0;
    if (GivenValue(args, name, &n)) throw UsageError(fmt::format("--unpin {} and {} on the command line: free it or pin it, not both", name.substr(2), name));
  }
  for (const auto& [f, is_default] : settings) {
    if (Unpinned(unpin, f.flag)) {
      config.searched.push_back(fmt::format("{}{} ({})", f.flag, f.value.empty() ? "" : " " + f.value, f.from));
      continue;
    }
    if (!Takes(target, f.flag)) {
      config.ignored.push_back(fmt::format("{}{} ({}{}): not taken by {}", f.flag, f.value.empty() ? "" : " " + f.value,
                                           f.from.rfind("(", 0) == 0 ? "" : "from ", f.from.rfind("(", 0) == 0 ? f.from.substr(1, f.from.size() - 2) : f.from, command));
      config.untaken.push_back(f);
      continue;
    }
    // A setting the file leaves to Megatron's default ("(no --key: ...)") yields to the command line.
    if (is_default || f.from.rfind("(no ", 0) == 0) {
      if (given_anyhow(f.flag)) continue;  // the command line's choice over Megatron's default
      // etp = tp is Megatron's default: with tp searched, etp follows it (searched too).
      if (f.flag == "--etp" && Unpinned(unpin, "--tp")) {
        config.searched.push_back(fmt::format("--etp ({}, with --tp searched)", f.from));
        continue;
      }
      out.push_back(f.flag);
      if (!f.value.empty()) out.push_back(f.value);
      kept.push_back(f);
      continue;
    }
    int given = 0;
    // A switch turned off on the command line (search's --no-overlap-moe-expert-parallel-comm pin).
    const std::string negated = "--no-" + f.flag.substr(2);
    if (f.value.empty() && GivenValue(args, negated, &given)) {
      throw UsageError(fmt::format("{} on the command line contradicts {} in {}, which sets {}: give one", negated, f.from, *path, f.flag));
    }
    const std::optional<std::string> value = GivenValue(args, f.flag, &given);
    if (value) {
      // --precision mxfp8 is --precision fp8 --fp8-recipe mxfp8 (precision.h NormalizeMxfp8Precision).
      const ConfigFlag* recipe = config.FindFlag("--fp8-recipe");
      const bool same_mxfp8 = f.flag == "--precision" && *value == "mxfp8" && f.value == "fp8" && recipe && recipe->value == "mxfp8";
      const bool same_split = f.flag == "--pp-layer-split" && SameLayerSplit(*value, f.value);
      if (!SameValue(*value, f.value) && !same_mxfp8 && !same_split) {
        throw UsageError(fmt::format("{}{} on the command line contradicts {} in {}, which sets {}{}: give one", f.flag,
                                     value->empty() ? "" : " " + *value, f.from, *path, f.flag, f.value.empty() ? "" : " " + f.value));
      }
      kept.push_back(f);
      continue;  // given once, by the command line
    }
    out.push_back(f.flag);
    if (!f.value.empty()) out.push_back(f.value);
    kept.push_back(f);
  }
  // Command-line flags that set the same thing another way than the file's (a layout and --vpp, a
  // global batch and its micro-batch count): one of them, named with the file's key.
  static const std::map<std::string, std::vector<std::string>> excludes = {
      {"--pipeline-model-parallel-layout",
       {"--vpp", "--pp-layer-split", "--account-for-embedding-in-pipeline-split", "--account-for-loss-in-pipeline-split"}},
      {"--pp-layer-split", {"--pipeline-model-parallel-layout", "--account-for-embedding-in-pipeline-split", "--account-for-loss-in-pipeline-split"}},
      {"--vpp", {"--pipeline-model-parallel-layout"}},
      {"--global-batch-size", {"--global-batch-tokens", "--num-microbatches", "--grad-accumulation-steps"}}};
  for (const ConfigFlag& f : kept) {
    const auto it = excludes.find(f.flag);
    if (it == excludes.end() || f.from.rfind("(", 0) == 0) continue;
    for (const std::string& other : it->second) {
      int n = 0;
      if (GivenValue(args, other, &n)) {
        throw UsageError(fmt::format("{} on the command line and {} in {} (as {}) set the same thing two ways: give one", other, f.from, *path,
                                     f.flag));
      }
    }
  }
  // Megatron's uneven first / last stage (--decoder-first/last-pipeline-num-layers, read as
  // --pp-layer-split) with virtual stages from the command line: transformer_config.py raises unless
  // every stage's layers divide into them, as the reader checks for the file's own vpp.
  for (const ConfigFlag& f : kept) {
    if (f.flag != "--pp-layer-split" || f.from != "--decoder-first/last-pipeline-num-layers") continue;
    int n = 0;
    const std::optional<std::string> vpp_text = GivenValue(args, "--vpp", &n);
    if (!vpp_text) continue;
    int64_t vpp = 0;
    if (!ParseStrictInt(*vpp_text, &vpp) || vpp <= 1) continue;  // malformed: --vpp's own parse names it
    for (int64_t layers : StagesOf(f.value)) {
      if (layers % vpp != 0) {
        throw UsageError(fmt::format(
            "--vpp {} on the command line and --decoder-first/last-pipeline-num-layers in {} (stages of {} layers): a stage of {} "
            "layers does not divide into {} virtual stages, which Megatron-LM refuses (transformer_config.py: \"number of layers at "
            "first/last stage ... must be divisible by virtual pipeline parallel degree\"); give a --pipeline-model-parallel-layout",
            vpp, *path, f.value, layers, vpp));
      }
    }
  }
  config.flags = kept;
  o->framework_config = std::move(config);
  return out;
}

bool ModelGiven(const PlanCliOptions& o) { return o.model_given || o.framework_config.has_value(); }

void RequireWorldSize(const PlanCliOptions& o) {
  if (!o.degrees.world_size.empty()) return;
  if (o.framework_config) {
    throw UsageError(fmt::format("--world-size is required with {} ({} takes the world size from the launcher: nodes x GPUs per node)",
                                 o.framework_flag, o.framework_config->framework));
  }
  if (o.model_given) throw UsageError("--world-size is required with --model");
}

ModelSpec LoadPlanModel(const PlanCliOptions& o) {
  if (!o.framework_config) return WithFlag("--model", [&] { return LoadModelOrDefault(o.model); });
  std::optional<ModelSpec> base;
  if (o.model_given) base = WithFlag("--model", [&] { return LoadModel(o.model); });
  return WithFlag(o.framework_flag, [&] { return ReaderOf(o).model(*o.framework_config, base); });
}

std::string PlanModelSource(const PlanCliOptions& o) {
  if (o.framework_config && !o.model_given) {
    if (!o.framework_config->model_file.empty()) return fmt::format("{} (hf_assets_path of {})", o.framework_config->model_file, o.framework_config->file);
    return fmt::format("{} ({})", o.framework_config->file,
                       o.framework_config->framework == "Megatron-LM" ? "Megatron-LM arguments" : o.framework_config->framework + " " + o.framework_config->form);
  }
  return ModelSourceName(o.model);
}

void CheckEmitFlags(const PlanCliOptions& o, bool search) {
  if (o.emit.empty()) {
    if (!o.emit_out.empty()) throw UsageError("--emit-out needs --emit FORMAT (megatron | torchtitan | megatron-bridge)");
    if (!o.emit_row.empty()) throw UsageError("--emit-row needs --emit FORMAT (megatron | torchtitan | megatron-bridge)");
    return;
  }
  if (search && o.emit_row.empty()) throw UsageError("search --emit needs --emit-row N (1 = the best row)");
  // A job config's plan is under its framework's convention: torchtitan's cannot be written as a
  // Megatron launch, nor Megatron's as torchtitan's.
  if (o.framework_config) {
    const bool titan_file = o.framework_config->framework == "torchtitan";
    if (titan_file != (o.emit == "torchtitan")) {
      throw UsageError(fmt::format("--emit {} with {}: the file's job runs under {}'s convention, which {} does not launch; write it with "
                                   "--emit {}, or plan the model with --model and --convention {} (without {})",
                                   o.emit, o.framework_flag, titan_file ? "torchtitan" : "Megatron-Core", titan_file ? "Megatron" : "torchtitan",
                                   titan_file ? "torchtitan" : "megatron (or megatron-bridge)", titan_file ? "megatron" : "torchtitan",
                                   o.framework_flag));
    }
  }
  if (o.emit_out.empty() || o.emit_out == "-") {
    // One document per stdout.
    for (const auto& [given, path, flag] : {std::tuple{o.json_given, o.json_path, "--json"}, std::tuple{o.refit_given, o.refit_json, "--refit-json"}}) {
      if (given && path == "-") throw UsageError(fmt::format("--emit without --emit-out and {} - both write to stdout: give --emit-out FILE", flag));
    }
  }
  if (!o.emit_out.empty()) {
    if (o.emit_out == "-") return;
    CheckOutputPath(o.emit_out, "--emit-out");
    RejectOutputOverInputs(o.emit_out, "--emit-out", {o.model, o.cluster, o.calibration, o.from_megatron, o.from_torchtitan, o.from_megatron_bridge});
    for (const auto& [given, other, flag] : {std::tuple{o.json_given, o.json_path, "--json"}, std::tuple{o.html_given, o.html_path, "--html"},
                                             std::tuple{o.refit_given, o.refit_json, "--refit-json"}}) {
      if (given && SameOutputPath(o.emit_out, other)) throw UsageError(fmt::format("--emit-out and {} name the same output ({})", flag, other));
    }
  }
}

std::string FrameworkAttribution(const PlanCliOptions& o, const std::string& message) {
  if (!o.framework_config) return "";
  // The mesh rules name the degrees by their axis: "tp (8) must divide ...", "dp_shard(16)".
  static const std::map<std::string, std::string> axis = {{"--tp", "tp"}, {"--ep", "ep"}, {"--etp", "etp"}, {"--pp", "pp"},
                                                          {"--cp", "cp"}, {"--dp-shard", "dp_shard"}, {"--dp-replicate", "dp_replicate"},
                                                          {"--vpp", "vpp"}};
  // The training rules name some settings by their field: "num_microbatches 3", "micro_batch_size 8)".
  static const std::map<std::string, std::string> field = {{"--num-microbatches", "num_microbatches"}, {"--micro-batch-size", "micro_batch_size"}};
  auto names = [&](const std::string& word, bool is_axis) {
    for (size_t at = message.find(word); at != std::string::npos; at = message.find(word, at + 1)) {
      const size_t end = at + word.size();
      const bool word_start = at == 0 || message[at - 1] == ' ' || message[at - 1] == '(' || message[at - 1] == '\'' || message[at - 1] == '*';
      const bool word_end = is_axis ? end < message.size() && (message[end] == '(' || message.compare(end, 2, " (") == 0)
                                    : end == message.size() || message[end] == ' ' || message[end] == ':' || message[end] == '=';
      if (word_start && word_end) return true;
    }
    return false;
  };
  std::string out;
  for (const ConfigFlag& f : o.framework_config->flags) {
    if (f.from.rfind("(", 0) == 0 || f.flag == "--convention") continue;  // a framework default, not a key of the file
    const auto a = axis.find(f.flag);
    const auto named = field.find(f.flag);
    if (names(f.flag, false) || (a != axis.end() && names(a->second, true)) || (named != field.end() && names(named->second, false))) {
      out += fmt::format("\n  ({}{} came from {} in {})", f.flag, f.value.empty() ? "" : " " + f.value, f.from, o.framework_config->file);
    }
  }
  return out;
}

std::string EmitFormatName(const std::string& format) {
  return format == "torchtitan" ? "torchtitan overrides" : format == "megatron-bridge" ? "Megatron-Bridge overrides" : "Megatron-LM arguments";
}

std::string EmitText(const PlanCliOptions& o, const Plan& plan, int64_t global_batch_size, const std::vector<std::string>& notes) {
  std::string command;
  for (const auto& a : o.argv) command += (command.empty() ? "" : " ") + a;
  const std::string version = VersionText("dockyard-plan");
  std::vector<std::string> header = {"written by " + version.substr(0, version.size() - 1), "command: " + command};
  header.insert(header.end(), notes.begin(), notes.end());
  if (o.emit == "torchtitan") return EmitTorchtitanConfig(plan, global_batch_size, header);
  if (o.emit == "megatron-bridge") return EmitMegatronBridgeConfig(plan, global_batch_size, header);
  // A Megatron file's other arguments are carried into the written one.
  const bool megatron_file = o.framework_config && o.framework_config->framework == "Megatron-LM";
  return EmitMegatronArgs(plan, global_batch_size, header, megatron_file ? &*o.framework_config : nullptr);
}

}  // namespace dockyard::cli
