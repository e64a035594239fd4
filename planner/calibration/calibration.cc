// Calibration files (see calibration.h and docs/calibration.md).
#include "planner/calibration/calibration.h"

#include <algorithm>
#include <optional>
#include <cmath>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "planner/base/error.h"
#include "planner/base/digest.h"

namespace dockyard {

namespace {

// The object of `section` ("compute.gemm") under `knobs`: with `required`, JsonView::Object's
// error when one on the path is missing; without, nullopt then.
std::optional<JsonView> FindSection(const JsonView& knobs, const std::string& section, bool required) {
  JsonView at = knobs;
  size_t start = 0;
  while (start <= section.size()) {
    const size_t dot = section.find('.', start);
    const std::string part = section.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (!required && !at.value().contains(part)) return std::nullopt;  // present but null: Object() names it
    at = at.Object(part);
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return at;
}

// The keys an object of the version-2 layout may hold at `prefix` ("" = the knobs object itself):
// the next section name of every knob below it, or the knob names of the sections equal to it.
std::vector<std::string> KeysAt(const std::string& prefix) {
  std::vector<std::string> keys;
  for (const KnobSpec& k : KnobTable()) {
    const std::string section = k.section;
    std::string key;
    if (section == prefix) {
      key = k.name;
    } else if (prefix.empty() || section.rfind(prefix + ".", 0) == 0) {
      const std::string rest = prefix.empty() ? section : section.substr(prefix.size() + 1);
      key = rest.substr(0, rest.find('.'));
    } else {
      continue;
    }
    if (std::find(keys.begin(), keys.end(), key) == keys.end()) keys.push_back(key);
  }
  return keys;
}

// Whether `path` ("compute", "compute.gemm") is a section of the version-2 layout.
bool IsSection(const std::string& path) {
  for (const KnobSpec& k : KnobTable()) {
    const std::string section = k.section;
    if (section == path || section.rfind(path + ".", 0) == 0) return true;
  }
  return false;
}

// Rejects unknown keys in every object of the version-2 layout at and under `at` (section `prefix`).
void RejectUnknownSections(const JsonView& at, const std::string& prefix) {
  const std::vector<std::string> keys = KeysAt(prefix);
  at.RejectUnknownKeys(keys);
  for (const std::string& key : keys) {
    const std::string path = prefix.empty() ? key : prefix + "." + key;
    if (IsSection(path) && at.Has(key)) RejectUnknownSections(at.Object(key), path);  // a missing one: its knobs say so
  }
}

// Reads one knob's {"value", "source"} object into `cal`.
void ReadKnob(const KnobSpec& k, const JsonView& knob, Calibration& cal) {
  knob.RejectUnknownKeys({"value", "source", "interval80"});
  const double x = knob.Number("value");
  const bool low_ok = k.min_open ? x > k.min : x >= k.min;
  if (!low_ok || !(x <= k.max)) knob.Fail("value", fmt::format("must be in {}{}, {}], got {}", k.min_open ? "(" : "[", k.min, k.max, x));
  k.Set(cal.knobs, x);
  if (knob.Has("source")) cal.knob_sources[k.Path()] = knob.String("source");
  if (knob.value().contains("interval80")) {
    const Json& a = knob.value().at("interval80");
    if (!a.is_array() || a.size() != 2 || !a[0].is_number() || !a[1].is_number() || !(a[0].get<double>() <= x) ||
        !(x <= a[1].get<double>())) {
      knob.Fail("interval80", fmt::format("must be [lo, hi] with lo <= value ({}) <= hi, got {}", x, a.dump()));
    }
    const double lo = a[0].get<double>(), hi = a[1].get<double>();
    if (!(k.min_open ? lo > k.min : lo >= k.min) || !(hi <= k.max)) {
      knob.Fail("interval80", fmt::format("must lie in the knob's range {}{}, {}], got [{}, {}]", k.min_open ? "(" : "[", k.min, k.max, lo, hi));
    }
    cal.knob_intervals[k.Path()] = {a[0].get<double>(), a[1].get<double>()};
  }
}

}  // namespace

Calibration DefaultCalibration(const std::string& preset) {
  Calibration cal;
  cal.name = preset + "-prior";
  cal.preset = preset;
  cal.description = "the knobs dockyard uses without a calibration file (the " + preset + " preset's knobs, planner/cost/knobs.h and cluster.cc); priors, not fitted";
  cal.knobs = ClusterPreset(preset).knobs;
  return cal;
}

Calibration CalibrationFromJson(const Json& json, const std::string& file) {
  JsonView v(&json, file, "");
  // The format first: another JSON file (a model config, a cluster) is named as such, not by its
  // first unknown key.
  if (!v.Has("format")) {
    v.Fail("format", "missing: not a dockyard calibration file (it starts {\"format\": \"dockyard-calibration\", \"version\": 2, ...}; "
                     "dockyard-plan calibrate writes one, docs/calibration.md)");
  }
  const std::string format = v.String("format");
  if (format != "dockyard-calibration") v.Fail("format", fmt::format("must be \"dockyard-calibration\", got \"{}\"", format));
  v.RejectUnknownKeys({"format", "version", "name", "preset", "description", "knobs"});
  const int64_t version = v.Int("version");
  if (version != 1 && version != 2) {
    v.Fail("version", fmt::format("unsupported version {}; this dockyard reads versions 1 and 2", version));
  }
  Calibration cal;
  cal.name = v.String("name");
  if (cal.name.empty()) v.Fail("name", "must not be empty");
  cal.preset = v.String("preset");
  try {
    cal.knobs = ClusterPreset(cal.preset).knobs;
  } catch (const Error& e) {
    v.Fail("preset", e.what());
  }
  cal.description = v.StringOr("description", "");
  const JsonView knobs = v.Object("knobs");
  // A knob split in two (2026-12-06): its one forward + backward ratio carries into neither.
  const std::string split =
      "was split into fp8_small_head_fwd_speedup (the forward's BF16 / FP8 time, the window kept) and "
      "fp8_small_head_bwd_efficiency (the backward's fraction of BF16's efficiency over the full causal core; docs/calibration.md): "
      "its one forward + backward ratio carries into neither; take both from calibration/<preset>.json or calibrate again";
  if (version == 1 && knobs.Has("flash_fp8_small_head_speedup")) knobs.Fail("flash_fp8_small_head_speedup", split);
  if (version == 2 && knobs.Has("compute") && knobs.Object("compute").Has("flash") &&
      knobs.Object("compute").Object("flash").Has("fp8_small_head_speedup")) {
    knobs.Object("compute").Object("flash").Fail("fp8_small_head_speedup", split);
  }
  if (version == 1) {
    std::vector<std::string> names;
    for (const KnobSpec& k : KnobTable()) names.push_back(k.v1_name);
    for (const std::string& section : KeysAt("")) {
      if (knobs.Has(section)) {
        knobs.Fail(section, fmt::format("a version-1 file holds its knobs in one flat object (\"gemm_max_efficiency\", ...); \"{}\" "
                                        "is a section of version 2: set \"version\": 2",
                                        section));
      }
    }
    knobs.RejectUnknownKeys(names);
    for (const KnobSpec& k : KnobTable()) {
      if (k.optional && !knobs.value().contains(k.v1_name)) continue;  // the preset's prior; null is refused below
      ReadKnob(k, knobs.Object(k.v1_name), cal);
    }
  } else {
    for (const KnobSpec& k : KnobTable()) {
      if (knobs.Has(k.v1_name) && std::string(k.v1_name) != k.section) {
        std::string pointer = std::string(k.section) + "/" + k.name;
        std::replace(pointer.begin(), pointer.end(), '.', '/');
        knobs.Fail(k.v1_name, fmt::format("a version-1 key; version 2 holds this knob at /knobs/{} (or set \"version\": 1)", pointer));
      }
    }
    RejectUnknownSections(knobs, "");
    for (const KnobSpec& k : KnobTable()) {
      const std::optional<JsonView> section = FindSection(knobs, k.section, !k.optional);
      if (k.optional && !(section && section->value().contains(k.name))) continue;  // the preset's prior; null is refused below
      ReadKnob(k, section->Object(k.name), cal);
    }
  }
  return cal;
}

Calibration LoadCalibration(const std::string& path) {
  Json json;
  try {
    json = ReadJsonFile(path);  // size, type and parse checks
  } catch (const Error& e) {
    throw Error(fmt::format("calibration file {}", e.what()));  // names what the path was given as
  }
  std::ifstream in(path, std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  if (!in) throw Error(fmt::format("{}: cannot be read", path));
  Calibration cal = CalibrationFromJson(json, path);
  cal.file = path;
  cal.sha256 = Sha256Hex(bytes.str());
  return cal;
}

void ApplyCalibration(const Calibration& cal, ClusterSpec* cluster) {
  const std::vector<std::string> presets = ClusterPresetNames();
  if (std::find(presets.begin(), presets.end(), cluster->name) != presets.end() && cluster->name != cal.preset) {
    throw Error(fmt::format("calibration \"{}\"{} is for preset \"{}\", the cluster is preset \"{}\" (its calibration: {}.json)", cal.name,
                            cal.file.empty() ? "" : " (" + cal.file + ")", cal.preset, cluster->name, cluster->name));
  }
  cluster->knobs = cal.knobs;
  // Reports name where the compute knobs now come from: the file.
  cluster->compute_source = fmt::format("calibration \"{}\"{}", cal.name, cal.file.empty() ? "" : " (" + cal.file + ")");
}

std::string KnobSource(const Calibration& cal, const KnobSpec& k) {
  const auto src = cal.knob_sources.find(k.Path());
  if (src != cal.knob_sources.end()) return src->second;
  if (!cal.preset.empty() && k.Get(cal.knobs) == k.Get(ClusterPreset(cal.preset).knobs) && k.Get(cal.knobs) != k.Get(Knobs{})) {
    return fmt::format("the {0} preset's figure, not the Hopper prior (its source, measured on the GPU or borrowed: planner/cost/cluster.cc, "
                       "calibration/{0}.json, docs/cluster.md); {1}",
                       cal.preset, k.Path());
  }
  return k.source;
}

Json CalibrationToJson(const Calibration& cal) {
  Json knobs = Json::object();
  for (const KnobSpec& k : KnobTable()) {
    Json* at = &knobs;
    const std::string section = k.section;
    size_t start = 0;
    while (true) {
      const size_t dot = section.find('.', start);
      at = &(*at)[section.substr(start, dot == std::string::npos ? std::string::npos : dot - start)];
      if (dot == std::string::npos) break;
      start = dot + 1;
    }
    (*at)[k.name] = Json{{"value", k.Get(cal.knobs)}, {"source", KnobSource(cal, k)}};
    const auto iv = cal.knob_intervals.find(k.Path());
    if (iv != cal.knob_intervals.end()) (*at)[k.name]["interval80"] = {iv->second.first, iv->second.second};
  }
  return Json{{"format", "dockyard-calibration"}, {"version", kCalibrationVersion}, {"name", cal.name}, {"preset", cal.preset},
              {"description", cal.description},   {"knobs", knobs}};
}

Json CalibrationRefToJson(const Calibration& cal) {
  Json j{{"name", cal.name}, {"preset", cal.preset}, {"file", cal.file}, {"sha256", cal.sha256}};
  if (!cal.knob_intervals.empty()) {
    Json fitted = Json::object();
    for (const KnobSpec& k : KnobTable()) {
      const auto iv = cal.knob_intervals.find(k.Path());
      if (iv == cal.knob_intervals.end()) continue;
      fitted[k.Path()] = Json{{"value", k.Get(cal.knobs)}, {"interval80", {iv->second.first, iv->second.second}}};
    }
    j["fitted"] = fitted;
  }
  return j;
}

}  // namespace dockyard
