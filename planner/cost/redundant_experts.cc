// Redundant experts for a plan (see redundant_experts.h).
#include "planner/cost/redundant_experts.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "planner/base/error.h"
#include "planner/cost/network.h"
#include "planner/routing/received_rows.h"

namespace dockyard {

namespace {

int64_t RoleBytes(const std::map<std::string, int64_t>& by_role) {
  auto it = by_role.find("routed_experts");
  return it == by_role.end() ? 0 : it->second;
}

// a * R / E rounded to the nearest byte (a x R fits a double's 53 bits for any real model).
int64_t Scale(int64_t bytes, int64_t R, int64_t E) {
  return static_cast<int64_t>(std::llround(static_cast<double>(bytes) * static_cast<double>(R) / static_cast<double>(E)));
}

RedundantExpertsSide Side(const RoutingResult& routing, const CostBreakdown& cost) {
  RedundantExpertsSide s;
  s.imbalance = routing.max_imbalance;
  for (const auto& l : routing.layers) {
    s.max_received = std::max(s.max_received, l.max_received);
    s.p99_received = std::max(s.p99_received, l.p99_received);
  }
  s.moe_layer_us = cost.moe_layer_us;
  s.step_time_us = cost.step_time_us;
  s.tokens_per_s_per_gpu = cost.tokens_per_s_per_gpu;
  return s;
}

std::string GiB(int64_t bytes) {
  return fmt::format("{:.2f} GiB", static_cast<double>(bytes) / 1073741824.0);
}

// The placement (PlaceExperts) of every sampled MoE layer of `model`, by its expected shares.
std::vector<ExpertPlacement> PlaceLayers(const RoutingModel& model, const EplbOptions& eo) {
  std::vector<ExpertPlacement> out;
  for (int64_t l = 0; l < model.num_layers; ++l) out.push_back(PlaceExperts(ExpectedShare(model, l), eo));
  return out;
}

}  // namespace

int64_t EpGroupNodes(const Plan& plan) {
  const auto group = plan.meshes.sparse.GroupOf(0, plan.meshes.sparse.AxisIndex("ep"));
  const int64_t gpn = plan.machine.gpus_per_node;
  std::set<int64_t> nodes;
  for (int64_t r : group) nodes.insert(r / gpn);
  const int64_t n = static_cast<int64_t>(nodes.size());
  const int64_t ep = static_cast<int64_t>(group.size());
  bool ok = ep % n == 0;
  for (int64_t i = 1; ok && i < ep; ++i) {
    // Consecutive EP ranks share a node exactly when they are in the same block of ep / n.
    const bool same_node = group[static_cast<size_t>(i)] / gpn == group[static_cast<size_t>(i - 1)] / gpn;
    ok = same_node == (i / (ep / n) == (i - 1) / (ep / n));
  }
  if (!ok) {
    throw Error(
        fmt::format("redundant experts: the EP group of rank 0 ({} ranks over {} nodes of {} GPUs) does not fill nodes in EP "
                    "order with ep / nodes ranks each, which the placement's node model assumes",
                    ep, n, gpn));
  }
  return n;
}

std::vector<int64_t> ReadPlacementFile(const std::string& path, int64_t moe_layer, int64_t ep, int64_t num_experts) {
  const Json root = ReadJsonFile(path);
  const JsonView top(&root, path, "");
  if (top.Has("physical_to_logical")) return top.IntList("physical_to_logical", 0);
  if (!top.Has("redundant_experts")) {
    top.Fail("physical_to_logical", "a placement file needs /physical_to_logical or a simulate report's /redundant_experts");
  }
  // The report priced this placement for its own layout: refuse another one.
  if (top.Has("parallel")) {
    const int64_t report_ep = top.Object("parallel").Int("ep");
    if (report_ep != ep) {
      top.Object("parallel").Fail("ep", fmt::format("the report's placement was made for ep {}, the run has ep {}", report_ep, ep));
    }
  }
  if (top.Has("model")) {
    const JsonView model = top.Object("model");
    if (model.Has("num_experts") && model.Int("num_experts") != num_experts) {
      model.Fail("num_experts",
                 fmt::format("the report's model has {} routed experts, the run's model {}", model.Int("num_experts"), num_experts));
    }
  }
  const JsonView block = top.Object("redundant_experts");
  const Json& layers = block.value()["layers"];
  if (!layers.is_array() || moe_layer < 0 || moe_layer >= static_cast<int64_t>(layers.size()) ||
      !layers[static_cast<size_t>(moe_layer)].is_object()) {
    block.Fail("layers", fmt::format("has no entry for MoE layer {} (the report sampled {} layer(s))", moe_layer,
                                     layers.is_array() ? layers.size() : 0));
  }
  const JsonView layer(&layers[static_cast<size_t>(moe_layer)], path, fmt::format("/redundant_experts/layers/{}", moe_layer));
  return layer.IntList("physical_to_logical", 0);
}

EplbOptions EplbOptionsFor(const Plan& plan, const RedundantExpertsOptions& o) {
  EplbOptions eo;
  eo.policy = o.policy;
  eo.redundant_experts = o.redundant_experts;
  eo.ep = plan.dims.ep;
  eo.num_nodes = EpGroupNodes(plan);
  eo.num_groups = o.expert_groups;
  return eo;
}

std::vector<ExpertPlacement> PlaceMoeLayers(const Plan& plan, const RoutingSpec& spec, const RedundantExpertsOptions& o) {
  const RoutingModel model =
      PrepareRouting(spec, plan.model.moe.num_experts, plan.model.moe.top_k, plan.model.NumMoeLayers(), GroupLimitOf(plan.model.moe));
  return PlaceLayers(model, EplbOptionsFor(plan, o));
}

namespace {

// Refuses a model without routed experts, the deredundency dispatcher (ep > 1), and a plain
// routing sample `before` that is not the plan's (ep, experts, no slots, one entry per layer).
void CheckRedundantInputs(const Plan& plan, const RoutingModel& model, const RoutingResult& before) {
  const int64_t E = plan.model.moe.num_experts, ep = plan.dims.ep;
  if (E < 1) throw Error("--redundant-experts: the model has no routed experts");
  if (ep > 1 && plan.training.dispatcher == Dispatcher::kDeredundency) {
    throw Error("--redundant-experts is not supported with --dispatcher deredundency (use all_to_all)");
  }
  if (before.ep != ep || before.num_experts != E || before.num_slots != 0 ||
      static_cast<int64_t>(before.layers.size()) != model.num_layers) {
    throw Error("redundant experts: the plain routing sample does not match the plan");
  }
}

// Memory: the worst rank of every stage, routed-expert bytes x R / E more of each kind; sets the
// peak bytes before (from `before`) and after (from `after`: the plan's memory with the received
// rows of the routing over the replicas when a routing sample sizes them, else `before` again) and
// the extra bytes of the worst rank after.
void AddReplicaMemory(const MemoryReport& before, const MemoryReport& after, int64_t R, int64_t E, RedundantExpertsReport* rep) {
  for (const auto& st : before.stages) rep->before.peak_bytes = std::max(rep->before.peak_bytes, st.worst.peak_bytes);
  for (const auto& st : after.stages) {
    const auto& w = st.worst;
    const int64_t p = Scale(RoleBytes(w.params_by_role), R, E), g = Scale(RoleBytes(w.grads_by_role), R, E),
                  x = Scale(RoleBytes(w.optimizer_by_role), R, E);
    if (w.peak_bytes + p + g + x >= rep->after.peak_bytes) {
      rep->after.peak_bytes = w.peak_bytes + p + g + x;
      rep->extra_params_bytes = p;
      rep->extra_grads_bytes = g;
      rep->extra_optimizer_bytes = x;
    }
  }
}

// Per EP rank, the replica-gradient all-reduce summed over the sampled layers, in slot gradients:
// all of it and the part of sets that span nodes; and the largest set of distinct ranks.
struct ReplicaGradShares {
  std::vector<double> per_rank, cross;  // [ep]
  int64_t largest_set = 1;
};

// Replicas on one rank sum locally first; the d distinct ranks holding an expert then all-reduce
// one slot gradient: every rank adds 2 (d - 1) / d per sampled layer once per expert it holds with d >= 2.
ReplicaGradShares ReplicaGradSharesOf(const std::vector<ExpertPlacement>& placements, int64_t E, int64_t ep) {
  ReplicaGradShares out{std::vector<double>(static_cast<size_t>(ep), 0.0), std::vector<double>(static_cast<size_t>(ep), 0.0), 1};
  for (const auto& p : placements) {
    for (int64_t e = 0; e < E; ++e) {
      std::set<int64_t> ranks, nodes;
      for (int64_t s : p.logical_to_physical[static_cast<size_t>(e)]) {
        ranks.insert(p.RankOfSlot(s));
        nodes.insert(p.NodeOfRank(p.RankOfSlot(s)));
      }
      const int64_t d = static_cast<int64_t>(ranks.size());
      if (d < 2) continue;
      out.largest_set = std::max(out.largest_set, d);
      const double share = 2.0 * static_cast<double>(d - 1) / static_cast<double>(d);
      for (int64_t r : ranks) {
        out.per_rank[static_cast<size_t>(r)] += share;
        if (nodes.size() > 1) out.cross[static_cast<size_t>(r)] += share;
      }
    }
  }
  return out;
}

// The bytes of one layer's slot gradient on the worst rank of the stage with the most
// routed-expert gradients, and that stage's MoE layers (0 and 0 without MoE layers).
std::pair<double, int64_t> SlotGradBytes(const Plan& plan, const MemoryReport& memory, int64_t E, int64_t ep) {
  double slot_grad_bytes = 0;
  int64_t stage_moe_layers = 0;
  for (const auto& st : memory.stages) {
    int64_t moe_layers = 0;
    for (int64_t l = 0; l < plan.model.num_hidden_layers; ++l) {
      if (plan.layer_stage[static_cast<size_t>(l)] == st.stage && plan.model.moe_layers[static_cast<size_t>(l)]) ++moe_layers;
    }
    if (moe_layers == 0) continue;
    const double b = static_cast<double>(RoleBytes(st.worst.grads_by_role)) /
                     (static_cast<double>(moe_layers) * static_cast<double>(E / std::max<int64_t>(1, ep)));
    if (b * static_cast<double>(moe_layers) > slot_grad_bytes * static_cast<double>(stage_moe_layers)) {
      slot_grad_bytes = b;
      stage_moe_layers = moe_layers;
    }
  }
  return {slot_grad_bytes, stage_moe_layers};
}

// The replica-gradient all-reduce of the worst rank (bytes of the whole step, averaged over the
// sampled layers, once per MoE layer of its stage) into rep->replica_grad_all_reduce, and its
// time (StepCommUs, us) into rep->replica_grad_all_reduce_us.
void PriceReplicaGradAllReduce(const Plan& plan, const ClusterSpec& cluster, const MemoryReport& memory, RedundantExpertsReport* rep) {
  const ReplicaGradShares shares = ReplicaGradSharesOf(rep->placements, rep->num_experts, rep->ep);
  const int64_t worst = static_cast<int64_t>(std::max_element(shares.per_rank.begin(), shares.per_rank.end()) - shares.per_rank.begin());
  const auto [slot_grad_bytes, stage_moe_layers] = SlotGradBytes(plan, memory, rep->num_experts, rep->ep);
  const double layers_sampled = static_cast<double>(rep->placements.size());
  CommEntry& c = rep->replica_grad_all_reduce;
  c.purpose = "replica_grad_all_reduce";
  c.collective = "all_reduce";
  c.mesh = "sparse";
  c.axis = "ep";
  c.phase = "step";
  c.group_size = shares.largest_set;
  if (shares.per_rank[static_cast<size_t>(worst)] > 0 && stage_moe_layers > 0) {
    const double per_layer = shares.per_rank[static_cast<size_t>(worst)] / layers_sampled;
    c.calls = stage_moe_layers;
    c.wire_bytes = static_cast<int64_t>(std::llround(per_layer * slot_grad_bytes * static_cast<double>(stage_moe_layers)));
    c.cross_node_bytes = static_cast<int64_t>(
        std::llround(shares.cross[static_cast<size_t>(worst)] / layers_sampled * slot_grad_bytes * static_cast<double>(stage_moe_layers)));
    c.bytes_per_call = static_cast<int64_t>(std::llround(slot_grad_bytes));
    rep->replica_grad_all_reduce_us = StepCommUs(c.wire_bytes, c.cross_node_bytes, c.group_size, cluster);
  }
}

}  // namespace

RedundantExpertsReport AnalyzeRedundantExperts(const Plan& plan, const ClusterSpec& cluster, const RoutingModel& model,
                                               const RoutingResult& before, const CostBreakdown& cost_before, const MemoryReport& memory,
                                               const RedundantExpertsOptions& o, ComputeModel compute_model, bool routing_sizes_memory) {
  CheckRedundantInputs(plan, model, before);
  const int64_t E = plan.model.moe.num_experts, ep = plan.dims.ep;
  RedundantExpertsReport rep;
  rep.options = o;
  rep.num_experts = E;
  rep.ep = ep;
  const EplbOptions eo = EplbOptionsFor(plan, o);
  rep.num_nodes = eo.num_nodes;
  rep.placements = PlaceLayers(model, eo);
  rep.policy = rep.placements.front().policy;
  rep.num_slots = E + o.redundant_experts;
  rep.slots_per_rank = rep.num_slots / ep;
  rep.routing = SampleReplicatedRouting(model, rep.placements, before.tokens_per_rank, o.choice);
  const CostBreakdown cost_after = SimulateStep(plan, cluster, rep.routing, compute_model);
  rep.before = Side(before, cost_before);
  rep.after = Side(rep.routing, cost_after);
  std::optional<MemoryReport> memory_after;
  if (routing_sizes_memory) {
    // The activations and all-to-all buffers hold the rows a rank receives over the replicas.
    Plan replicated = plan;
    replicated.training.imbalance = SampleImbalance(rep.routing);
    memory_after = ComputeMemory(replicated);
  }
  AddReplicaMemory(memory, memory_after ? *memory_after : memory, o.redundant_experts, E, &rep);
  PriceReplicaGradAllReduce(plan, cluster, memory, &rep);
  rep.after.step_time_us = cost_after.step_time_us + rep.replica_grad_all_reduce_us;
  rep.after.tokens_per_s_per_gpu =
      rep.after.step_time_us > 0 ? cost_after.tokens_per_s_per_gpu * cost_after.step_time_us / rep.after.step_time_us : 0.0;
  rep.budget_gib = memory.budget_gib;
  rep.reserve_gib = memory.reserve_gib;
  rep.after_over_budget = OverBudget(static_cast<double>(rep.after.peak_bytes), memory.budget_gib, memory.reserve_gib);
  return rep;
}

Json RedundantExpertsToJson(const RedundantExpertsReport& r) {
  auto side = [](const RedundantExpertsSide& s) {
    return Json{{"imbalance", s.imbalance},       {"max_received", s.max_received}, {"p99_received", s.p99_received},
                {"moe_layer_us", s.moe_layer_us}, {"step_time_us", s.step_time_us}, {"tokens_per_s_per_gpu", s.tokens_per_s_per_gpu},
                {"peak_bytes", s.peak_bytes}};
  };
  Json layers = Json::array();
  for (size_t l = 0; l < r.placements.size(); ++l) {
    const auto& p = r.placements[l];
    const auto& L = r.routing.layers[l];
    layers.push_back({{"routing_layer", l},
                      {"physical_to_logical", p.physical_to_logical},
                      {"logical_to_physical", p.logical_to_physical},
                      {"replica_count", p.replica_count},
                      {"rows_per_slot", L.rows_per_local_expert},
                      {"received", L.received},
                      {"imbalance", L.imbalance},
                      {"p99_received", L.p99_received}});
  }
  const CommEntry& c = r.replica_grad_all_reduce;
  return Json{
      {"redundant_experts", r.options.redundant_experts},
      {"policy", EplbPolicyName(r.policy)},
      {"expert_groups", r.options.expert_groups},
      {"replica_choice", ReplicaChoiceName(r.options.choice)},
      {"num_slots", r.num_slots},
      {"slots_per_rank", r.slots_per_rank},
      {"ep_nodes", r.num_nodes},
      {"before", side(r.before)},
      {"after", side(r.after)},
      {"extra_bytes_per_rank", {{"params", r.extra_params_bytes}, {"grads", r.extra_grads_bytes}, {"optimizer", r.extra_optimizer_bytes}}},
      {"replica_grad_all_reduce",
       {{"purpose", c.purpose},
        {"collective", c.collective},
        {"mesh", c.mesh},
        {"axis", c.axis},
        {"phase", c.phase},
        {"group_size", c.group_size},
        {"calls", c.calls},
        {"bytes_per_call", c.bytes_per_call},
        {"wire_bytes", c.wire_bytes},
        {"cross_node_bytes", c.cross_node_bytes},
        {"time_us", r.replica_grad_all_reduce_us}}},
      {"budget_gib", r.budget_gib},
      {"reserve_gib", r.reserve_gib},
      {"after_over_budget", r.after_over_budget},
      {"layers", layers}};
}

std::string RedundantOverBudgetText(const RedundantExpertsReport& r, const std::string& prefix) {
  if (!r.after_over_budget) return "";
  const double peak_gib = static_cast<double>(r.after.peak_bytes) / static_cast<double>(int64_t{1} << 30);
  const double limit_gib = r.budget_gib - r.reserve_gib;
  return fmt::format(
      "{}: with {} redundant experts the worst rank needs {:.2f} GiB, over the {:.2f} GiB limit ({:.2f} GiB budget less the "
      "{:.2f} GiB reserve) by {:.2f} GiB\n",
      prefix, r.options.redundant_experts, peak_gib, limit_gib, r.budget_gib, r.reserve_gib, peak_gib - limit_gib);
}

std::string RedundantWithinBudgetText(const RedundantExpertsReport& r, const std::string& prefix) {
  if (r.after_over_budget || r.budget_gib <= 0) return "";
  const double gib = static_cast<double>(int64_t{1} << 30);
  return fmt::format(
      "{}: with {} redundant experts the worst rank needs {:.2f} GiB, within the {:.2f} GiB limit ({:.2f} GiB budget less the "
      "{:.2f} GiB reserve; {:.2f} GiB without them)\n",
      prefix, r.options.redundant_experts, static_cast<double>(r.after.peak_bytes) / gib, r.budget_gib - r.reserve_gib, r.budget_gib,
      r.reserve_gib, static_cast<double>(r.before.peak_bytes) / gib);
}

std::string RedundantExpertsToText(const RedundantExpertsReport& r) {
  std::ostringstream out;
  out << fmt::format(
      "Redundant experts  R = {} ({} policy, {} replica choice, {} expert group(s)): {} slots, {} per EP rank over {} "
      "node(s)\n",
      r.options.redundant_experts, EplbPolicyName(r.policy), ReplicaChoiceName(r.options.choice), r.options.expert_groups, r.num_slots,
      r.slots_per_rank, r.num_nodes);
  out << fmt::format("  {:<8} {:>9} {:>13} {:>13} {:>14} {:>12} {:>16} {:>12}\n", "", "imbalance", "max rows/rank", "p99 rows/rank",
                     "MoE layer us", "step ms", "tokens/s per GPU", "peak");
  for (int i = 0; i < 2; ++i) {
    const RedundantExpertsSide& s = i == 0 ? r.before : r.after;
    out << fmt::format("  {:<8} {:>9.3f} {:>13} {:>13} {:>14.1f} {:>12.1f} {:>16.0f} {:>12}\n", i == 0 ? "before" : "after", s.imbalance,
                       s.max_received, s.p99_received, s.moe_layer_us, s.step_time_us / 1e3, s.tokens_per_s_per_gpu, GiB(s.peak_bytes));
  }
  out << fmt::format("  extra per rank: params {}, grads {}, optimizer {}\n", GiB(r.extra_params_bytes), GiB(r.extra_grads_bytes),
                     GiB(r.extra_optimizer_bytes));
  if (r.after_over_budget) {
    out << fmt::format("  OVER BUDGET after: peak {} exceeds the {:.2f} GiB limit ({:.2f} GiB budget less the {:.2f} GiB reserve)\n",
                       GiB(r.after.peak_bytes), r.budget_gib - r.reserve_gib, r.budget_gib, r.reserve_gib);
  }
  const CommEntry& c = r.replica_grad_all_reduce;
  out << fmt::format("  {:<26} {:<10} {:<7} {:<5} {:>6} {:>6} {:>14} {:>14} {:>10}\n", "purpose", "collective", "mesh", "axis", "group",
                     "calls", "wire", "cross-node", "time us");
  out << fmt::format("  {:<26} {:<10} {:<7} {:<5} {:>6} {:>6} {:>14} {:>14} {:>10.1f}\n", c.purpose, c.collective, c.mesh, c.axis,
                     c.group_size, c.calls, GiB(c.wire_bytes), GiB(c.cross_node_bytes), r.replica_grad_all_reduce_us);
  return out.str();
}

}  // namespace dockyard
