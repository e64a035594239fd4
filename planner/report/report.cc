// Plan report: JSON and terminal text (see report.h and docs/report.md).
#include "planner/model/vocab_padding.h"
#include "planner/model/flex_backend_limits.h"
#include "planner/report/report.h"

#include "planner/model/mtp.h"
#include "planner/report/header.h"
#include "planner/search/search_pins.h"
#include "planner/cost/network.h"

#include "planner/cost/dispatch_traffic.h"
#include "planner/model/training_json.h"

#include <map>
#include <tuple>
#include <regex>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace dockyard {

std::string FormatBytes(int64_t bytes) {
  const double b = static_cast<double>(bytes);
  if (b >= 1024.0 * 1024 * 1024) return fmt::format("{:.2f} GiB", b / (1024.0 * 1024 * 1024));
  if (b >= 1024.0 * 1024) return fmt::format("{:.2f} MiB", b / (1024.0 * 1024));
  if (b >= 1024.0) return fmt::format("{:.2f} KiB", b / 1024.0);
  return fmt::format("{} B", bytes);
}

std::string FormatCount(int64_t count) {
  const double c = static_cast<double>(count);
  if (c >= 1e12) return fmt::format("{:.3f}T", c / 1e12);
  if (c >= 1e9) return fmt::format("{:.2f}B", c / 1e9);
  if (c >= 1e6) return fmt::format("{:.2f}M", c / 1e6);
  if (c >= 1e3) return fmt::format("{:.1f}K", c / 1e3);
  return std::to_string(count);
}

namespace {

Json MeshToJson(const Mesh& mesh) {
  Json axes = Json::array(), sizes = Json::array(), placement_axes = Json::array();
  Json groups = Json::object();
  for (int a = 0; a < mesh.num_axes(); ++a) {
    axes.push_back(mesh.axis_names()[a]);
    sizes.push_back(mesh.axis_size(a));
    if (a > 0) placement_axes.push_back(mesh.axis_names()[a]);
    groups[mesh.axis_names()[a]] = mesh.Groups(a);
  }
  Json coords = Json::array();
  for (int64_t r = 0; r < mesh.size(); ++r) coords.push_back(mesh.Coords(r));
  return Json{{"name", mesh.name()}, {"axes", axes},    {"sizes", sizes}, {"placement_axes", placement_axes},
              {"groups", groups},    {"coords", coords}};
}

std::string ShapeText(const std::vector<int64_t>& shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

std::string PlacementsText(const ParamPlacement& pl) {
  std::vector<std::string> parts;
  for (const auto& p : pl.placements) parts.push_back(p.ToString());
  return fmt::format("({})", fmt::join(parts, ", "));
}

std::string LayerRanges(const std::vector<int64_t>& layers) {
  if (layers.empty()) return "-";
  if (layers.size() == 1) return std::to_string(layers[0]);
  // One arithmetic progression with a stride > 1 (interleaved MoE layers): "1-47/2".
  const int64_t stride = layers[1] - layers[0];
  bool arithmetic = layers.size() > 2 && stride > 1;
  for (size_t i = 1; arithmetic && i < layers.size(); ++i) arithmetic = layers[i] - layers[i - 1] == stride;
  if (arithmetic) return fmt::format("{}-{}/{}", layers.front(), layers.back(), stride);
  std::vector<std::string> parts;
  size_t i = 0;
  while (i < layers.size()) {
    size_t j = i;
    while (j + 1 < layers.size() && layers[j + 1] == layers[j] + 1) ++j;
    parts.push_back(i == j ? std::to_string(layers[i]) : fmt::format("{}-{}", layers[i], layers[j]));
    i = j + 1;
  }
  return fmt::format("{}", fmt::join(parts, ","));
}

std::string GroupText(const std::vector<int64_t>& group) {
  if (group.size() <= 8) return fmt::format("[{}]", fmt::join(group, " "));
  const int64_t stride = group[1] - group[0];
  bool arithmetic = true;
  for (size_t i = 1; i < group.size(); ++i) arithmetic = arithmetic && group[i] - group[i - 1] == stride;
  if (arithmetic) {
    return stride == 1 ? fmt::format("[{}..{}]", group.front(), group.back())
                       : fmt::format("[{}, {}, .. {}] (stride {})", group[0], group[1], group.back(), stride);
  }
  return fmt::format("[{} {} {} .. {}]", group[0], group[1], group[2], group.back());
}

// The MTP modules trained (--mtp-layers): outside the model's totals (a checkpoint's
// num_nextn_predict_layers modules are not part of its published count), on plan.mtp_stage.
Json MtpJson(const Plan& plan) {
  const int64_t per_module = MtpModuleParams(plan.model);
  return Json{{"layers", plan.training.mtp_layers},
              {"params_per_module", per_module},
              {"total_params_with_mtp", plan.inventory.totals.total_params + plan.training.mtp_layers * per_module},
              {"stage", plan.mtp_stage}};
}

// The model block of the plan report: sizes and parameter totals.
Json ModelJson(const Plan& plan, const std::string& model_source) {
  const auto& m = plan.model;
  const auto& t = plan.inventory.totals;
  Json j{{"name", m.name},
         {"family", m.family},
         {"source", model_source},
         {"dtype", m.dtype},
         {"num_hidden_layers", m.num_hidden_layers},
         {"num_moe_layers", m.NumMoeLayers()},
         {"hidden_size", m.hidden_size},
         {"vocab_size", plan.unpadded_vocab_size > 0 ? plan.unpadded_vocab_size : m.vocab_size},
         {"num_experts", m.moe.num_experts},
         {"top_k", m.moe.top_k},
         {"moe_intermediate_size", m.moe.moe_intermediate_size},
         {"num_shared_experts", m.moe.num_shared_experts},
         {"total_params", t.total_params},
         {"active_params", t.active_params},
         {"active_params_excluding_embedding", t.active_params_excluding_embedding},
         {"routed_expert_params", t.routed_expert_params},
         {"shared_expert_params", t.shared_expert_params},
         {"non_expert_params", t.non_expert_params},
         {"embedding_params", t.embedding_params}};
  // Megatron-LM's padded vocabulary (model/vocab_padding.h), only where it differs: the rows the
  // embedding and lm_head have.
  if (plan.unpadded_vocab_size > 0 && plan.unpadded_vocab_size != m.vocab_size) j["padded_vocab_size"] = m.vocab_size;
  if (plan.training.mtp_layers > 0) j["mtp"] = MtpJson(plan);
  return j;
}

// A stage's runs of consecutive decoder layers as [[first, last], ...].
Json LayerRunsJson(const std::vector<std::pair<int64_t, int64_t>>& runs) {
  Json out = Json::array();
  for (const auto& [first, last] : runs) out.push_back({first, last});
  return out;
}

// A stage's runs of consecutive decoder layers as "0-2, 9-11, 18-20" ("5" for a run of one,
// "none" without layers).
std::string LayerRunsText(const std::vector<std::pair<int64_t, int64_t>>& runs) {
  if (runs.empty()) return "none";
  std::vector<std::string> parts;
  for (const auto& [first, last] : runs) parts.push_back(first == last ? std::to_string(first) : fmt::format("{}-{}", first, last));
  return fmt::format("{}", fmt::join(parts, ", "));
}

// The pipeline block: each layer's stage, per-stage parameter bytes, and the Megatron layout
// when one is set.
Json PipelineJson(const Plan& plan, const std::vector<int64_t>& param_bytes_per_rank) {
  Json stages = Json::array();
  for (const auto& s : SummarizeStages(plan, param_bytes_per_rank)) {
    stages.push_back({{"stage", s.stage},
                      {"first_layer", s.first_layer},
                      {"last_layer", s.last_layer},
                      {"layers", LayerRunsJson(s.layer_runs)},
                      {"max_param_bytes", s.max_param_bytes},
                      {"min_param_bytes", s.min_param_bytes},
                      {"worst_rank", s.worst_rank}});
  }
  Json pipeline = {{"layer_stage", plan.layer_stage}, {"stages", stages}};
  const RunSettings& run = plan.training.run;
  if (!run.pipeline_layout.empty() || run.account_for_embedding || run.account_for_loss) {
    // Megatron pipeline layouts (opt-in): where the embedding, the loss and the MTP modules sit.
    pipeline["layout"] = run.pipeline_layout;
    pipeline["account_for_embedding"] = run.account_for_embedding;
    pipeline["account_for_loss"] = run.account_for_loss;
    pipeline["vpp"] = run.vpp;
    pipeline["embedding_stage"] = plan.embedding_stage;
    pipeline["loss_stage"] = plan.loss_stage;
    pipeline["mtp_stage"] = plan.mtp_stage;
  }
  return pipeline;
}

// One parameter: shape, role, placements and local shapes.
Json ParameterJson(const ParamInfo& p, const ParamPlacement& pl) {
  Json placements = Json::array();
  for (const auto& x : pl.placements) placements.push_back(x.ToString());
  Json local = Json::array();
  for (const auto& s : pl.local_shapes) local.push_back({{"shape", s.shape}, {"num_ranks", s.num_ranks}});
  Json entry = {{"fqn", p.fqn},
                {"shape", p.shape},
                {"dtype", p.dtype},
                {"role", RoleName(p.role)},
                {"group", RoleGroup(p.role)},
                {"layer", p.layer},
                {"moe_layer", p.moe_layer},
                {"numel", p.Numel()},
                {"mesh", pl.sparse_mesh ? "sparse" : "dense"},
                {"placements", placements},
                {"stage", pl.stage},
                {"local_shapes", local},
                {"max_local_bytes", pl.max_local_numel * DtypeBytes(p.dtype, p.fqn)}};
  if (!p.stored_layout.empty()) entry["stored_layout"] = p.stored_layout;
  if (!p.fused_sections.empty()) entry["fused_sections"] = p.fused_sections;
  if (!p.tied_to.empty()) entry["tied_to"] = p.tied_to;
  return entry;
}

// The experts block: counts and each EP rank's experts.
Json ExpertsJson(const Plan& plan) {
  Json ownership = Json::array();
  for (int64_t r = 0; r < plan.experts.ep; ++r) {
    std::vector<int64_t> ids;
    for (int64_t e = 0; e < plan.experts.num_local_experts; ++e) ids.push_back(plan.experts.FirstExpert(r) + e);
    ownership.push_back({{"ep_rank", r}, {"experts", ids}});
  }
  return {{"num_experts", plan.experts.num_experts},
          {"ep", plan.experts.ep},
          {"num_local_experts", plan.experts.num_local_experts},
          {"ownership", ownership}};
}

// Parameter bytes per rank: the largest (first rank holding it), the smallest, and every rank's.
Json ParamBytesJson(const std::vector<int64_t>& param_bytes_per_rank, int64_t world_size) {
  int64_t max_bytes = 0, min_bytes = INT64_MAX, worst = 0;
  for (int64_t r = 0; r < world_size; ++r) {
    if (param_bytes_per_rank[r] > max_bytes) {
      max_bytes = param_bytes_per_rank[r];
      worst = r;
    }
    min_bytes = std::min(min_bytes, param_bytes_per_rank[r]);
  }
  return {{"max_per_rank", max_bytes}, {"min_per_rank", min_bytes}, {"worst_rank", worst}, {"per_rank", param_bytes_per_rank}};
}

// The text report's model, parameter-count and degree lines.
void WriteModelText(std::ostream& out, const Plan& plan, const std::string& model_source) {
  const auto& m = plan.model;
  const auto& t = plan.inventory.totals;
  const auto& d = plan.dims;
  out << fmt::format("Model      {} (family {}, {})\n", model_source, m.family, m.dtype);
  const bool padded = plan.unpadded_vocab_size > 0 && plan.unpadded_vocab_size != m.vocab_size;
  const std::string vocab = padded ? fmt::format("{} (padded to {}: Megatron-LM --make-vocab-size-divisible-by {} x tp {})",
                                                 plan.unpadded_vocab_size, m.vocab_size, VocabDivisor(plan.training, true), d.tp)
                                   : std::to_string(m.vocab_size);
  out << fmt::format("           {} layers ({} MoE, {} dense), hidden {}, vocab {}, {} attention, {} heads\n", m.num_hidden_layers,
                     m.NumMoeLayers(), m.num_hidden_layers - m.NumMoeLayers(), m.hidden_size, vocab,
                     m.attention.kind == AttentionKind::kMla ? "MLA" : "GQA", m.attention.num_attention_heads);
  out << fmt::format("           {} routed experts (top_k {}, moe_intermediate_size {}){}\n", m.moe.num_experts, m.moe.top_k,
                     m.moe.moe_intermediate_size,
                     m.moe.num_shared_experts > 0
                         ? fmt::format(" + {} shared (intermediate {})", m.moe.num_shared_experts, m.moe.shared_expert_intermediate_size)
                         : "");
  out << fmt::format("Params     total {} ({})  active {} ({})  active w/o input embedding {}\n", FormatCount(t.total_params),
                     t.total_params, FormatCount(t.active_params), t.active_params, FormatCount(t.active_params_excluding_embedding));
  out << fmt::format("           routed experts {}  shared experts {}  non-expert {}\n", FormatCount(t.routed_expert_params),
                     FormatCount(t.shared_expert_params), FormatCount(t.non_expert_params));
  if (plan.training.mtp_layers > 0) {
    const Json mtp = MtpJson(plan);
    out << fmt::format("           + {} MTP module(s) of {} parameters on stage {} ({} with MTP; memory: the mtp rows)\n",
                       plan.training.mtp_layers, FormatCount(mtp.at("params_per_module").get<int64_t>()), plan.mtp_stage,
                       FormatCount(mtp.at("total_params_with_mtp").get<int64_t>()));
  }
  out << fmt::format("Parallel   {} convention, world_size {} = pp {} x dp_replicate {} x dp_shard {} x cp {} x tp {}\n",
                     ConventionName(d.convention), d.world_size, d.pp, d.dp_replicate, d.dp_shard, d.cp, d.tp);
  out << fmt::format("           ep {}  etp {}  efsdp {} (= dp_shard*cp*tp / (ep*etp))\n", d.ep, d.etp, d.efsdp);
}

// Both meshes: their axes and, per axis of size > 1, the first groups.
void WriteMeshesText(std::ostream& out, const Plan& plan) {
  out << "Meshes\n";
  for (const Mesh* mesh : {&plan.meshes.dense, &plan.meshes.sparse}) {
    std::vector<std::string> axes;
    for (int a = 0; a < mesh->num_axes(); ++a) axes.push_back(fmt::format("{}={}", mesh->axis_names()[a], mesh->axis_size(a)));
    out << fmt::format("  {:<7} ({})\n", mesh->name(), fmt::join(axes, ", "));
    for (int a = 0; a < mesh->num_axes(); ++a) {
      if (mesh->axis_size(a) == 1) continue;
      auto groups = mesh->Groups(a);
      std::string examples = GroupText(groups[0]);
      if (groups.size() > 1) examples += ", " + GroupText(groups[1]);
      if (groups.size() > 2) examples += ", ...";
      out << fmt::format("    {:<13} {} groups of {}: {}\n", mesh->axis_names()[a], groups.size(), mesh->axis_size(a), examples);
    }
  }
}

// One row of the parameter table: parameters folded over layers (same name pattern, shape,
// placements and local shape).
struct ParamRow {
  std::string role, pattern, shape, mesh, placements, local;
  int64_t bytes = 0;
  std::vector<int64_t> layers;
};

std::vector<ParamRow> FoldParameters(const Plan& plan) {
  std::vector<ParamRow> rows;
  std::map<std::string, size_t> index;
  const std::regex layer_number(R"(\.(\d+)\.)");
  for (size_t i = 0; i < plan.inventory.params.size(); ++i) {
    const auto& p = plan.inventory.params[i];
    const auto& pl = plan.placements[i];
    std::string pattern = p.layer >= 0 ? std::regex_replace(p.fqn, layer_number, ".{L}.", std::regex_constants::format_first_only) : p.fqn;
    std::string local = ShapeText(pl.local_shapes.front().shape);
    if (pl.local_shapes.size() > 1) local += fmt::format(" (+{} other shapes)", pl.local_shapes.size() - 1);
    ParamRow row{RoleName(p.role),
                 pattern,
                 ShapeText(p.shape),
                 pl.sparse_mesh ? plan.meshes.sparse.name() : "dense",
                 PlacementsText(pl),
                 local,
                 pl.max_local_numel * DtypeBytes(p.dtype, p.fqn),
                 {}};
    std::string key = row.pattern + "|" + row.shape + "|" + row.placements + "|" + row.local;
    auto it = index.find(key);
    if (it == index.end()) {
      index[key] = rows.size();
      rows.push_back(row);
      it = index.find(key);
    }
    if (p.layer >= 0) rows[it->second].layers.push_back(p.layer);
  }
  return rows;
}

// The parameter table, columns as wide as their longest entry.
void WriteParameterTable(std::ostream& out, const Plan& plan, const std::vector<ParamRow>& rows) {
  std::vector<std::string> dense_axes(plan.meshes.dense.axis_names().begin() + 1, plan.meshes.dense.axis_names().end());
  std::vector<std::string> sparse_axes(plan.meshes.sparse.axis_names().begin() + 1, plan.meshes.sparse.axis_names().end());
  out << fmt::format("Parameters (placements over dense ({}) / {} ({}); local shape = largest; {{L}} = layer; layers a-b/s = every s-th)\n",
                     fmt::join(dense_axes, ", "), plan.meshes.sparse.name(), fmt::join(sparse_axes, ", "));
  size_t w_role = 4, w_name = 4, w_shape = 5, w_place = 10, w_local = 11;
  for (const auto& r : rows) {
    w_role = std::max(w_role, r.role.size());
    w_name = std::max(w_name, r.pattern.size());
    w_shape = std::max(w_shape, r.shape.size());
    w_place = std::max(w_place, r.placements.size());
    w_local = std::max(w_local, r.local.size());
  }
  out << fmt::format("  {:<{}}  {:<{}}  {:<9}  {:<{}}  {:<6}  {:<{}}  {:<{}}  {}\n", "role", w_role, "name", w_name, "layers", "shape",
                     w_shape, "mesh", "placements", w_place, "local shape", w_local, "bytes/rank (one tensor)");
  for (const auto& r : rows) {
    out << fmt::format("  {:<{}}  {:<{}}  {:<9}  {:<{}}  {:<6}  {:<{}}  {:<{}}  {}\n", r.role, w_role, r.pattern, w_name,
                       LayerRanges(r.layers), r.shape, w_shape, r.mesh, r.placements, w_place, r.local, w_local, FormatBytes(r.bytes));
  }
}

// Each EP rank's experts (the middle elided past 6 ranks), then per stage its layers and
// parameter bytes, and the Megatron pipeline layout when one is set.
void WriteExpertsAndStagesText(std::ostream& out, const Plan& plan) {
  const auto& e = plan.experts;
  out << fmt::format("Experts    {} per EP rank (num_local_experts), ep {}: ", e.num_local_experts, e.ep);
  for (int64_t r = 0; r < e.ep; ++r) {
    if (e.ep > 6 && r == 3) {
      out << "... ";
      r = e.ep - 3;
    }
    const int64_t first = e.FirstExpert(r), last = first + e.num_local_experts - 1;
    out << fmt::format("ep{}={}{}", r, first == last ? std::to_string(first) : fmt::format("{}-{}", first, last),
                       r + 1 < e.ep ? "  " : "\n");
  }
  for (const auto& s : SummarizeStages(plan, ParamBytesPerRank(plan))) {
    out << fmt::format("Stage {}    layers {}: parameter bytes per rank max {} (rank {}), min {} ({} dtype as placed)\n", s.stage,
                       LayerRunsText(s.layer_runs),
                       FormatBytes(s.max_param_bytes), s.worst_rank, FormatBytes(s.min_param_bytes), plan.model.dtype);
  }
  if (!plan.training.run.pipeline_layout.empty() || plan.training.run.account_for_embedding || plan.training.run.account_for_loss) {
    out << fmt::format(
        "Pipeline layout {}: vpp {}, embedding on stage {}, loss on stage {}{}\n",
        plan.training.run.pipeline_layout.empty() ? std::string("(account-for split)") : "\"" + plan.training.run.pipeline_layout + "\"",
        plan.training.run.vpp, plan.embedding_stage, plan.loss_stage,
        plan.training.mtp_layers > 0 ? fmt::format(", MTP on stage {}", plan.mtp_stage) : std::string());
  }
}

}  // namespace

Json PlanToJson(const Plan& plan, const std::string& model_source) {
  return PlanToJson(plan, model_source, ComputeMemory(plan));
}

Json PlanToJson(const Plan& plan, const std::string& model_source, const MemoryReport& memory) {
  const auto& d = plan.dims;
  Json report;
  report["schema_version"] = kReportSchemaVersion;
  report["generator"] = {{"name", "dockyard-plan"}, {"version", kDockyardVersion}};
  report["model"] = ModelJson(plan, model_source);
  report["parallel"] = DegreesToJson(d);
  report["parallel"]["edp"] = d.edp();
  report["meshes"] = {{"dense", MeshToJson(plan.meshes.dense)}, {"sparse", MeshToJson(plan.meshes.sparse)}};
  const std::vector<int64_t> param_bytes_per_rank = ParamBytesPerRank(plan);
  report["pipeline"] = PipelineJson(plan, param_bytes_per_rank);
  Json params = Json::array();
  for (size_t i = 0; i < plan.inventory.params.size(); ++i) params.push_back(ParameterJson(plan.inventory.params[i], plan.placements[i]));
  report["parameters"] = std::move(params);
  report["experts"] = ExpertsJson(plan);
  report["param_bytes"] = ParamBytesJson(param_bytes_per_rank, d.world_size);
  Json training = TrainingToJson(plan.training, plan.machine);
  report["training"] = training;
  report["memory"] = MemoryToJson(memory);
  report["communication"] = CommToJson(ComputePlanComm(plan, memory.worst_rank));
  return report;
}

std::string PlanToText(const Plan& plan, const std::string& model_source) {
  return PlanToText(plan, model_source, ComputeMemory(plan));
}

std::string PlanToText(const Plan& plan, const std::string& model_source, const MemoryReport& memory) {
  std::ostringstream out;
  WriteModelText(out, plan, model_source);
  WriteMeshesText(out, plan);
  WriteParameterTable(out, plan, FoldParameters(plan));
  WriteExpertsAndStagesText(out, plan);
  out << MemoryToText(plan, memory);
  out << CommToText(ComputePlanComm(plan, memory.worst_rank));
  return out.str();
}

namespace {

Json ByRole(const std::map<std::string, int64_t>& m) {
  Json j = Json::object();
  for (const auto& [k, v] : m) j[k] = v;
  return j;
}

std::string Gib(int64_t bytes) {
  return fmt::format("{:.2f}", static_cast<double>(bytes) / 1073741824.0);
}

}  // namespace

Json MemoryToJson(const MemoryReport& memory) {
  Json stages = Json::array();
  for (const auto& s : memory.stages) {
    const auto& b = s.worst;
    Json by_role = Json::object();
    std::map<std::string, Json> roles;
    for (const auto* m : {&b.params_by_role, &b.grads_by_role, &b.optimizer_by_role, &b.activations_by_role}) {
      for (const auto& [k, v] : *m) roles[k] = Json::object();
    }
    for (auto& [k, j] : roles) {
      const std::string& key = k;  // structured bindings cannot be captured in C++17
      auto get = [&key](const std::map<std::string, int64_t>& m) {
        auto it = m.find(key);
        return it == m.end() ? int64_t{0} : it->second;
      };
      j = {{"params_bytes", get(b.params_by_role)},
           {"grads_bytes", get(b.grads_by_role)},
           {"optimizer_bytes", get(b.optimizer_by_role)},
           {"activations_bytes", get(b.activations_by_role)}};
      by_role[k] = j;
    }
    stages.push_back({{"stage", s.stage},
                      {"worst_rank", s.worst_rank},
                      {"in_flight_microbatches", s.in_flight_microbatches},
                      {"params_bytes", b.params_bytes},
                      {"grads_bytes", b.grads_bytes},
                      {"optimizer_bytes", b.optimizer_bytes},
                      {"activations_bytes", b.activations_bytes},
                      {"comm_buffers_bytes", b.comm_buffers_bytes},
                      {"peak_bytes", b.peak_bytes},
                      {"by_role", by_role},
                      {"comm_buffers_by_use", ByRole(b.comm_buffers_by_use)}});
    if (b.outside_allocator_bytes > 0) stages.back()["outside_allocator_bytes"] = b.outside_allocator_bytes;
  }
  const auto& w = memory.workload;
  Json j = {{"stages", stages},
            {"worst_rank", memory.worst_rank},
            {"worst_peak_bytes", memory.worst_peak_bytes},
            {"worst_allocator_peak_bytes", memory.worst_allocator_peak_bytes},
            {"workload",
             {{"tokens_per_microbatch", w.tokens},
              {"routed_tokens", w.routed_tokens},
              {"mean_received_rows", w.mean_received_rows},
              {"max_received_rows", w.received_rows}}}};
  if (memory.budget_gib > 0) {
    j["budget_bytes"] = static_cast<int64_t>(memory.budget_gib * 1073741824.0);
    j["reserve_bytes"] = static_cast<int64_t>(memory.reserve_gib * 1073741824.0);
    j["headroom_bytes"] = HeadroomBytes(memory.worst_peak_bytes, memory.budget_gib, memory.reserve_gib);
    j["over_budget_ranks"] = memory.over_budget_ranks;
  }
  return j;
}

Json CommToJson(const CommReport& comm) {
  Json entries = Json::array();
  for (const auto& e : comm.entries) {
    entries.push_back({{"purpose", e.purpose},
                       {"collective", e.collective},
                       {"mesh", e.mesh},
                       {"axis", e.axis},
                       {"phase", e.phase},
                       {"group_size", e.group_size},
                       {"calls", e.calls},
                       {"bytes_per_call", e.bytes_per_call},
                       {"wire_bytes", e.wire_bytes},
                       {"cross_node_bytes", e.cross_node_bytes}});
  }
  Json j = {{"rank", comm.rank},  {"gpus_per_node", comm.gpus_per_node},       {"dispatcher", DispatcherName(comm.dispatcher)},
            {"entries", entries}, {"total_wire_bytes", comm.total_wire_bytes}, {"total_cross_node_bytes", comm.total_cross_node_bytes}};
  if (comm.dispatcher == Dispatcher::kDeepEp) j["moe_flex_dispatcher_backend"] = FlexBackendName(comm.flex_backend);
  if (comm.dispatcher == Dispatcher::kDeredundency) {
    j["oep"] = comm.oep;
    j["iep"] = comm.iep;
  }
  if (comm.links) {
    const DispatchLinks& l = *comm.links;
    j["dispatch_links"] = {{"ep_group", l.ep_group},
                           {"layers_sampled", l.layers_sampled},
                           {"dispatch_bytes_per_token", l.dispatch_bytes_per_token},
                           {"combine_bytes_per_token", l.combine_bytes_per_token},
                           {"network_send", l.network_send},
                           {"network_recv", l.network_recv},
                           {"nvlink_send", l.nvlink_send},
                           {"nvlink_recv", l.nvlink_recv}};
  }
  return j;
}

std::string MemoryToText(const Plan& plan, const MemoryReport& memory) {
  std::ostringstream out;
  const auto& t = plan.training;
  out << fmt::format(
      "Memory     per rank, GiB ({}, {} params, {} grads, {}, seq_len {} x micro-batch {}, {} micro-batch{}, "
      "recompute {}, imbalance {:.4g})\n",
      DpShardingName(*t.dp_sharding), t.param_dtype, t.grad_dtype, OptimizerName(t.optimizer), t.seq_len, t.micro_batch_size,
      t.num_microbatches.value_or(1), t.num_microbatches.value_or(1) == 1 ? "" : "es", RecomputeName(t.recompute), t.imbalance);
  if (memory.budget_gib > 0) {
    out << fmt::format("  budget {:.2f} GiB - reserve {:.2f} GiB (CUDA context, NCCL buffers, fragmentation) = {:.2f} GiB for the peak\n",
                       memory.budget_gib, memory.reserve_gib, memory.budget_gib - memory.reserve_gib);
  }
  out << fmt::format("  {:<6} {:<6} {:>9} {:>9} {:>10} {:>12} {:>9} {:>9}{}\n", "stage", "rank", "params", "grads", "optimizer",
                     "activations", "buffers", "peak", memory.budget_gib > 0 ? "  headroom" : "");
  for (const auto& s : memory.stages) {
    const auto& b = s.worst;
    std::string headroom;
    if (memory.budget_gib > 0) {
      const double h = static_cast<double>(HeadroomBytes(b.peak_bytes, memory.budget_gib, memory.reserve_gib)) / 1073741824.0;
      headroom = fmt::format("  {:>8.2f}{}", h, h < 0 ? "  OVER BUDGET" : "");
    }
    out << fmt::format("  {:<6} {:<6} {:>9} {:>9} {:>10} {:>12} {:>9} {:>9}{}\n", s.stage, s.worst_rank, Gib(b.params_bytes),
                       Gib(b.grads_bytes), Gib(b.optimizer_bytes), Gib(b.activations_bytes), Gib(b.comm_buffers_bytes), Gib(b.peak_bytes),
                       headroom);
  }
  // Breakdown by role of the worst rank overall.
  for (const auto& s : memory.stages) {
    if (s.worst_rank != memory.worst_rank) continue;
    const auto& b = s.worst;
    std::map<std::string, int> roles;
    for (const auto* m : {&b.params_by_role, &b.grads_by_role, &b.optimizer_by_role, &b.activations_by_role}) {
      for (const auto& [k, v] : *m) roles[k] = 1;
    }
    out << fmt::format("  worst rank {} by role, GiB: {:<15} {:>9} {:>9} {:>10} {:>12}\n", s.worst_rank, "role", "params", "grads",
                       "optimizer", "activations");
    for (const auto& [k, unused] : roles) {
      const std::string& key = k;  // structured bindings cannot be captured in C++17
      auto get = [&key](const std::map<std::string, int64_t>& m) {
        auto it = m.find(key);
        return it == m.end() ? int64_t{0} : it->second;
      };
      out << fmt::format("  {:<27}{:<15} {:>9} {:>9} {:>10} {:>12}\n", "", k, Gib(get(b.params_by_role)), Gib(get(b.grads_by_role)),
                         Gib(get(b.optimizer_by_role)), Gib(get(b.activations_by_role)));
    }
    if (b.outside_allocator_bytes > 0) {
      out << fmt::format("  of the peak {} outside torch's allocator (DeepEP / HybridEP buffers): allocator peak {}\n",
                         Gib(b.outside_allocator_bytes), Gib(b.peak_bytes - b.outside_allocator_bytes));
    }
  }
  // Whose saved tensors the activations count (docs/memory-model.md 4.2b).
  for (const std::string& line : MemoryRulesLines(t, plan.dims.convention)) out << "  " << line << "\n";
  return out.str();
}

std::string DispatcherLabel(Dispatcher dispatcher, FlexBackend backend) {
  if (dispatcher != Dispatcher::kDeepEp) return DispatcherName(dispatcher);
  return fmt::format("{} (backend {})", DispatcherName(dispatcher), FlexBackendName(backend));
}

std::string DispatcherToText(const Plan& plan) {
  if (plan.dims.ep <= 1) return "";
  const Dispatcher d = plan.training.dispatcher;
  return fmt::format("Dispatcher {}{}\n", DispatcherLabel(d, FlexBackendOf(plan.training)),
                     d == Dispatcher::kDeepEp ? ": deepep, hybridep and ncclep move their bytes alike until each has its own figures "
                                                "(docs/cost-model.md 3.5a); under EP overlap each has its own SM share and rate beside "
                                                "compute (3.10)"
                                              : "");
}

std::string CommToText(const CommReport& comm) {
  std::ostringstream out;
  out << fmt::format("Traffic    rank {} per step (all micro-batches), {} GPUs per node, dispatcher {}: sent {} ({} cross-node)\n",
                     comm.rank, comm.gpus_per_node, DispatcherLabel(comm.dispatcher, comm.flex_backend), FormatBytes(comm.total_wire_bytes),
                     FormatBytes(comm.total_cross_node_bytes));
  // Fold entries with the same purpose, axis and phase.
  std::map<std::tuple<std::string, std::string, std::string, std::string>, CommEntry> folded;
  for (const auto& e : comm.entries) {
    auto key = std::make_tuple(e.purpose, e.collective, e.axis, e.phase);
    auto it = folded.find(key);
    if (it == folded.end()) {
      folded[key] = e;
    } else {
      it->second.calls += e.calls;
      it->second.wire_bytes += e.wire_bytes;
      it->second.cross_node_bytes += e.cross_node_bytes;
      it->second.bytes_per_call = std::max(it->second.bytes_per_call, e.bytes_per_call);
    }
  }
  out << fmt::format("  {:<38} {:<15} {:<12} {:<9} {:>6} {:>7} {:>12} {:>12} {:>12}\n", "purpose", "collective", "axis", "phase", "group",
                     "calls", "max size", "sent", "cross-node");
  for (const auto& [key, e] : folded) {
    out << fmt::format("  {:<38} {:<15} {:<12} {:<9} {:>6} {:>7} {:>12} {:>12} {:>12}\n", e.purpose, e.collective, e.axis, e.phase,
                       e.group_size, e.calls, FormatBytes(e.bytes_per_call), FormatBytes(e.wire_bytes), FormatBytes(e.cross_node_bytes));
  }
  if (comm.links) {
    // Every EP member's dispatch per call (the combine returns it: send <-> recv, BF16 rows).
    const DispatchLinks& l = *comm.links;
    out << fmt::format(
        "  deepep dispatch per MoE layer and micro-batch, rank {}'s EP group ({:.0f} B per token; mean of {} sampled layer(s), "
        "uniform routing):\n",
        comm.rank, l.dispatch_bytes_per_token, l.layers_sampled);
    out << fmt::format("  {:>8} {:>6} {:>12} {:>12} {:>12} {:>12}\n", "member", "rank", "network sent", "network recv", "nvlink sent",
                       "nvlink recv");
    const size_t n = l.ep_group.size();
    auto b = [](double v) { return FormatBytes(static_cast<int64_t>(v)); };
    for (size_t i = 0; i < n; ++i) {
      if (n > 16 && i == 8) {
        out << fmt::format("  {:>8}\n", "...");
        i = n - 8;
      }
      out << fmt::format("  {:>8} {:>6} {:>12} {:>12} {:>12} {:>12}\n", i, l.ep_group[i], b(l.network_send[i]), b(l.network_recv[i]),
                         b(l.nvlink_send[i]), b(l.nvlink_recv[i]));
    }
  }
  return out.str();
}

Json SimulateReportToJson(const Plan& plan, const MemoryReport& memory, const CostBreakdown& cost, const SimulateInputs& in) {
  const Json full = PlanToJson(plan, in.model_source, memory);
  return {{"schema_version", kReportSchemaVersion},
          {"generator", {{"name", "dockyard-plan simulate"}, {"version", kDockyardVersion}, {"provenance", in.provenance}}},
          {"model", full["model"]},
          {"parameters", full["parameters"]},
          {"cluster", ClusterToJson(in.cluster)},
          {"routing", in.routing_text},
          {"seed", in.seed},
          {"routing_layers_sampled", in.routing_layers},
          {"parallel", full["parallel"]},
          {"training", TrainingToJson(plan.training, plan.machine)},
          {"memory", full["memory"]},
          {"communication", full["communication"]},
          {"predicted", CostToJson(cost)}};
}

Json SearchReportToJson(const SearchResult& result, const SearchOptions& options, const std::string& model_name, int64_t moe_layers,
                        const Json& provenance) {
  Json j = SearchResultToJson(result);
  j["schema_version"] = kReportSchemaVersion;
  j["generator"] = {{"name", "dockyard-plan search"}, {"version", kDockyardVersion}};
  j["provenance"] = provenance;
  j["model"] = model_name;
  j["world_size"] = options.world_size;
  j["cluster"] = ClusterToJson(options.cluster);
  // The node size as the search evaluated it (the cluster's locality unit) and the budget it held layouts to.
  j["training"] = TrainingToJson(options.training, MachineOf(options.cluster, result.budget_gib));
  // The settings each row gives for itself: the training block's values of these are the base the
  // search varies, not the rows' (header "degrees"/"pinned" lists the fixed ones).
  j["training"]["searched"] = SearchedSettings(options);
  j["routing"] = RoutingSpecText(options.routing);
  j["routing_layers_sampled"] = options.routing.kind == RoutingKind::kTrace ? moe_layers : options.routing_layers;
  return j;
}

}  // namespace dockyard
