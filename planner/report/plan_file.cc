// Plan files (see plan_file.h).
#include "planner/report/plan_file.h"

#include <sys/stat.h>

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "planner/base/error.h"
#include "planner/report/report.h"
#include "planner/model/training_json.h"

namespace dockyard {

PlanFile ReadPlanFile(const std::string& path) {
  const Json j = ReadJsonFile(path);
  JsonView root(&j, path, "");
  const int64_t version = root.Int("schema_version", INT64_MIN);
  if (version != kReportSchemaVersion) {
    root.Fail("schema_version",
              fmt::format("this plan file has schema version {}; this dockyard-run reads version {}", version, kReportSchemaVersion));
  }
  PlanFile f;
  f.model_source = root.Object("model").String("source");
  const JsonView p = root.Object("parallel");
  f.dims.world_size = p.Int("world_size");
  f.dims.dp_replicate = p.Int("dp_replicate");
  f.dims.dp_shard = p.Int("dp_shard");
  f.dims.cp = p.Int("cp");
  f.dims.tp = p.Int("tp");
  f.dims.ep = p.Int("ep");
  f.dims.etp = p.Int("etp");
  f.dims.pp = p.Int("pp");
  const std::string convention = p.String("convention");
  const std::vector<std::string> conventions = ConventionNames();
  if (std::find(conventions.begin(), conventions.end(), convention) == conventions.end()) {
    p.Fail("convention", fmt::format("must be one of {}, got \"{}\"", fmt::join(conventions, ", "), convention));
  }
  f.dims.convention = ParseConvention(convention, "convention");
  f.training = TrainingFromJson(root.Object("training"));
  f.machine = MachineFromTrainingJson(root.Object("training"));
  if (!j.contains("parameters") || !j["parameters"].is_array()) root.Fail("parameters", "required: the plan's parameter list");
  f.parameters = j["parameters"];
  if (j.contains("predicted")) f.predicted = j["predicted"];
  if (j.contains("cluster") && j["cluster"].is_object()) f.cluster = ClusterFromJson(j["cluster"], path + ": /cluster");
  if (j.contains("routing") && j["routing"].is_string()) {
    f.routing = j["routing"].get<std::string>();
    f.routing_seed = static_cast<uint64_t>(root.IntOr("seed", 0, 0));
  }
  // A relative model path is resolved from the plan file's directory when it is not found from
  // the current one.
  struct stat st {};
  if (!f.model_source.empty() && f.model_source[0] != '/' && f.model_source[0] != '<' && stat(f.model_source.c_str(), &st) != 0) {
    const size_t slash = path.find_last_of('/');
    const std::string beside = (slash == std::string::npos ? std::string(".") : path.substr(0, slash)) + "/" + f.model_source;
    if (stat(beside.c_str(), &st) == 0) {
      f.model_source = beside;
    } else {
      root.Object("model").Fail("source", fmt::format("model file \"{}\" not found from here or beside the plan file; "
                                                      "pass --model PATH",
                                                      f.model_source));
    }
  }
  return f;
}

void CheckPlacementsMatch(const Plan& plan, const PlanFile& f, const std::string& path) {
  if (f.parameters.size() != plan.inventory.params.size()) {
    throw Error(fmt::format("{}: /parameters lists {} tensors; the model has {}", path, f.parameters.size(), plan.inventory.params.size()));
  }
  for (size_t i = 0; i < plan.inventory.params.size(); ++i) {
    const Json& entry = f.parameters[i];
    const std::string where = fmt::format("{}: /parameters/{}", path, i);
    if (!entry.is_object() || !entry.contains("fqn") || !entry.contains("placements")) {
      throw Error(where + ": needs \"fqn\" and \"placements\"");
    }
    Json rebuilt = Json::array();
    for (const auto& pl : plan.placements[i].placements) rebuilt.push_back(pl.ToString());
    if (entry["fqn"] != plan.inventory.params[i].fqn || entry["placements"] != rebuilt) {
      throw Error(
          fmt::format("{}: the file places {} as {}, but its own degrees give {} {}: the file was edited or "
                      "written by another dockyard version; re-plan it",
                      where, JsonValueText(entry["fqn"]), entry["placements"].dump(), plan.inventory.params[i].fqn, rebuilt.dump()));
    }
  }
}

std::optional<double> PredictedMoeForwardUs(const Json& predicted, const std::string& name) {
  if (!predicted.is_object() || !predicted.contains("phases") || !predicted["phases"].is_array()) return std::nullopt;
  for (const auto& p : predicted["phases"]) {
    if (p.value("name", "") == name && p.value("layer_kind", "") == "moe" && p.value("direction", "") == "forward" &&
        p.contains("time_us") && p["time_us"].is_number()) {
      return p["time_us"].get<double>();
    }
  }
  return std::nullopt;
}

}  // namespace dockyard
