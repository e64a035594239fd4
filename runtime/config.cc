// RunConfig from a Plan (config.h).
#include "runtime/config.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "planner/base/checked_math.h"
#include "planner/base/error.h"
#include "planner/accounting/workload.h"

namespace dockyard::runtime {

const char* SharedModeName(SharedMode m) {
  switch (m) {
    case SharedMode::kNone:
      return "none";
    case SharedMode::kLocal:
      return "local";
    case SharedMode::kPartial:
      return "partial";
    case SharedMode::kSequenceParallel:
      return "sequence_parallel";
  }
  return "?";
}

const char* RankGroupName(RankGroup g) {
  static constexpr const char* kNames[] = {"ep", "expert_tp", "oep", "iep", "shared_tp"};
  return kNames[static_cast<int>(g)];
}

namespace {

std::vector<int64_t> GroupAlong(const Mesh& mesh, int axis, int64_t rank) {
  if (axis < 0) return {rank};
  return mesh.GroupOf(rank, axis);
}

// Index of the layer's parameter with `role`, or -1.
int64_t FindParam(const Plan& plan, int64_t layer, Role role) {
  for (size_t i = 0; i < plan.inventory.params.size(); ++i) {
    const ParamInfo& p = plan.inventory.params[i];
    if (p.layer == layer && p.role == role && p.tied_to.empty()) return static_cast<int64_t>(i);
  }
  return -1;
}

void Require(bool ok, const std::string& message) {
  if (!ok) throw Error(message);
}

// What the runtime supports of the model: SwiGLU experts without biases, softmax or sigmoid scores.
void CheckModelSupported(const ModelSpec& m) {
  const MoeSpec& moe = m.moe;
  Require(!moe.expert_bias && !moe.router_bias,
          fmt::format("the runtime supports SwiGLU experts without biases; {} has expert or router biases (gpt-oss's clamped "
                      "SwiGLU) and is not supported yet",
                      m.family));
  Require(moe.score_func == "softmax" || moe.score_func == "sigmoid",
          fmt::format("moe.score_func must be \"softmax\" or \"sigmoid\", got \"{}\"", moe.score_func));
}

// The ranges of the run options (tokens, iterations, tolerances, block sizes).
void CheckOptionRanges(const RunOptions& o) {
  // Zero tokens route, dispatch and compare nothing: the check would pass with 0 elements checked.
  // (Per-source counts, tokens_per_source, may hold zeros: the other sources still send rows.)
  Require(o.tokens_per_rank != 0 || !o.tokens_per_source.empty(),
          "--tokens-per-rank 0: tokens per rank must be in [1, 2^24]; with 0 tokens no row is routed, dispatched or compared, "
          "so the run would pass with 0 elements checked");
  Require(o.tokens_per_rank >= 0 && o.tokens_per_rank <= (int64_t{1} << 24),
          fmt::format("--tokens-per-rank {}: tokens per rank must be in [1, 2^24]", o.tokens_per_rank));
  Require(o.iters >= 1 && o.iters <= 1000000, fmt::format("iters must be in [1, 10^6], got {}", o.iters));
  Require(o.warmup >= 0 && o.warmup <= 1000000, fmt::format("warmup must be in [0, 10^6], got {}", o.warmup));
  Require(std::isfinite(o.atol) && o.atol >= 0, fmt::format("atol must be a finite number >= 0, got {}", o.atol));
  Require(std::isfinite(o.rtol) && o.rtol >= 0, fmt::format("rtol must be a finite number >= 0, got {}", o.rtol));
  Require(o.weight_block_bytes >= 1, fmt::format("weight block bytes must be >= 1, got {}", o.weight_block_bytes));
  Require(o.rank_weight_block_bytes >= 0, fmt::format("rank weight block bytes must be >= 0, got {}", o.rank_weight_block_bytes));
}

// The decoder layer that runs: `layer`, or the first MoE layer when it is negative.
int64_t ChooseLayer(const ModelSpec& m, int64_t layer) {
  const int64_t num_layers = m.num_hidden_layers;
  if (layer < 0) {
    for (int64_t l = 0; l < num_layers; ++l) {
      if (m.moe_layers[static_cast<size_t>(l)]) return l;
    }
    throw Error(fmt::format("{} has no MoE layer", m.name));
  }
  Require(layer < num_layers, fmt::format("layer ({}) must be in [0, {})", layer, num_layers));
  Require(m.moe_layers[static_cast<size_t>(layer)], fmt::format("layer {} of {} is a dense layer, not MoE", layer, m.name));
  return layer;
}

// The layer's sizes and router settings, copied from the model.
void CopyLayerShape(const ModelSpec& m, RunConfig& c) {
  const MoeSpec& moe = m.moe;
  c.hidden = m.hidden_size;
  c.moe_intermediate = moe.moe_intermediate_size;
  c.num_experts = moe.num_experts;
  c.top_k = moe.top_k;
  c.sigmoid_scores = moe.score_func == "sigmoid";
  c.score_correction_bias = moe.score_correction_bias;
  c.norm_topk_prob = moe.norm_topk_prob;
  c.routed_scaling_factor = moe.routed_scaling_factor;
  c.group_limit = GroupLimitOf(moe);
  c.shared_intermediate = moe.num_shared_experts > 0 ? moe.shared_expert_intermediate_size : 0;
  c.shared_expert_gate = moe.num_shared_experts > 0 && moe.shared_expert_gate;
}

// Inventory indices of the layer's routed (and shared, -1 without) expert tensors.
struct LayerParams {
  int64_t gate = -1, up = -1, down = -1;
  int64_t shared_gate = -1, shared_up = -1, shared_down = -1;
};

LayerParams FindLayerParams(const Plan& plan, const RunConfig& c) {
  LayerParams lp;
  const int64_t gate_up = FindParam(plan, c.layer, Role::kExpertGateUp);
  lp.gate = gate_up >= 0 ? gate_up : FindParam(plan, c.layer, Role::kExpertGate);
  lp.up = gate_up >= 0 ? gate_up : FindParam(plan, c.layer, Role::kExpertUp);
  lp.down = FindParam(plan, c.layer, Role::kExpertDown);
  Require(lp.gate >= 0 && lp.up >= 0 && lp.down >= 0,
          fmt::format("layer {}: the plan lists no routed gate/up/down expert tensors", c.layer));
  lp.shared_gate = c.shared_intermediate > 0 ? FindParam(plan, c.layer, Role::kSharedExpertGate) : -1;
  lp.shared_up = c.shared_intermediate > 0 ? FindParam(plan, c.layer, Role::kSharedExpertUp) : -1;
  lp.shared_down = c.shared_intermediate > 0 ? FindParam(plan, c.layer, Role::kSharedExpertDown) : -1;
  Require(c.shared_intermediate == 0 || (lp.shared_gate >= 0 && lp.shared_up >= 0 && lp.shared_down >= 0),
          fmt::format("layer {}: the plan lists no shared-expert gate/up/down tensors", c.layer));
  Require(plan.placements.size() == plan.inventory.params.size(), "plan: placements are not aligned with the inventory");
  return lp;
}

// The most tokens any source holds (checks the per-source counts against the world).
int64_t MaxTokens(const RunOptions& o, int64_t world_size) {
  int64_t max_tokens = o.tokens_per_rank;
  if (!o.tokens_per_source.empty()) {
    Require(static_cast<int64_t>(o.tokens_per_source.size()) == world_size,
            fmt::format("tokens per source: {} entries for a world of {}", o.tokens_per_source.size(), world_size));
    for (int64_t t : o.tokens_per_source) {
      Require(t >= 0 && t <= (int64_t{1} << 24), fmt::format("tokens per source must be in [0, 2^24], got {}", t));
      max_tokens = std::max(max_tokens, t);
    }
  }
  return max_tokens;
}

// The forward shards (placement.h ForwardShardsOnRank) of inventory parameter `index` on `rank`.
ForwardShards ShardsOfParam(const Plan& plan, int64_t index, int64_t rank) {
  const size_t i = static_cast<size_t>(index);
  return ForwardShardsOnRank(plan.inventory.params[i], plan.placements[i], plan.MeshOf(i), rank);
}

// A rank's routed experts, its intermediate slice and its EP and expert-TP groups, cross-checked
// against plan.experts.
RankConfig RoutedExpertsOnRank(const Plan& plan, const LayerParams& lp, int64_t layer, int64_t rank) {
  const auto& params = plan.inventory.params;
  RankConfig r;
  r.rank = rank;
  const Mesh& expert_mesh = plan.MeshOf(static_cast<size_t>(lp.gate));
  const ForwardShards g = ShardsOfParam(plan, lp.gate, rank);
  const ForwardShards u = ShardsOfParam(plan, lp.up, rank);
  const ForwardShards d = ShardsOfParam(plan, lp.down, rank);
  const ParamInfo& gp = params[static_cast<size_t>(lp.gate)];
  const ParamInfo& up_p = params[static_cast<size_t>(lp.up)];
  const ParamInfo& dp = params[static_cast<size_t>(lp.down)];
  Require(gp.tp_dim >= 0 && up_p.tp_dim >= 0 && dp.tp_dim >= 0,
          fmt::format("layer {}: routed expert tensors without a TP dim are not supported", layer));
  r.first_expert = g.slices[0].begin;
  r.num_local_experts = g.slices[0].size;
  const DimSlice gf = g.slices[static_cast<size_t>(gp.tp_dim)];
  const DimSlice uf = u.slices[static_cast<size_t>(up_p.tp_dim)];
  const DimSlice df = d.slices[static_cast<size_t>(dp.tp_dim)];
  Require(u.slices[0].begin == r.first_expert && d.slices[0].begin == r.first_expert && u.slices[0].size == r.num_local_experts &&
              d.slices[0].size == r.num_local_experts,
          fmt::format("rank {}: the plan gives gate, up and down different experts", rank));
  Require(gf.begin == uf.begin && gf.size == uf.size && gf.begin == df.begin && gf.size == df.size,
          fmt::format("rank {}: the plan gives gate/up the intermediate slice [{}, {}) and down [{}, {})", rank, gf.begin,
                      gf.begin + gf.size, df.begin, df.begin + df.size));
  Require(g.tp_axis == d.tp_axis && g.ep_axis == d.ep_axis,
          fmt::format("rank {}: gate/up and down are sharded over different mesh axes", rank));
  r.f_begin = gf.begin;
  r.f_end = gf.begin + gf.size;
  r.ep_group = GroupAlong(expert_mesh, g.ep_axis, rank);
  r.ep_index = std::find(r.ep_group.begin(), r.ep_group.end(), rank) - r.ep_group.begin();
  r.expert_tp_group = GroupAlong(expert_mesh, g.tp_axis, rank);
  // Ownership must agree with plan.experts (contiguous E / ep experts per EP rank).
  const int64_t ep = static_cast<int64_t>(r.ep_group.size());
  Require(ep == plan.experts.ep && r.num_local_experts == plan.experts.num_local_experts &&
              r.first_expert == plan.experts.FirstExpert(r.ep_index),
          fmt::format("rank {}: placements give experts [{}, {}) on EP index {} of {}, plan.experts says [{}, {}) of ep {}", rank,
                      r.first_expert, r.first_expert + r.num_local_experts, r.ep_index, ep, plan.experts.FirstExpert(r.ep_index),
                      plan.experts.FirstExpert(r.ep_index) + plan.experts.num_local_experts, plan.experts.ep));
  r.source = *std::min_element(r.expert_tp_group.begin(), r.expert_tp_group.end());
  return r;
}

// A rank's shared-expert slice, tp group and mode (local, partial sums with the routed experts, or
// sequence-parallel).
void SharedExpertsOnRank(const Plan& plan, const LayerParams& lp, int64_t rank, RankConfig& r) {
  const auto& params = plan.inventory.params;
  const ParamInfo& sg = params[static_cast<size_t>(lp.shared_gate)];
  const ParamInfo& sd = params[static_cast<size_t>(lp.shared_down)];
  const ForwardShards s = ShardsOfParam(plan, lp.shared_gate, rank);
  const ForwardShards su = ShardsOfParam(plan, lp.shared_up, rank);
  const ForwardShards sdn = ShardsOfParam(plan, lp.shared_down, rank);
  const DimSlice a = s.slices[static_cast<size_t>(sg.tp_dim)];
  const DimSlice b = su.slices[0];
  const DimSlice e = sdn.slices[static_cast<size_t>(sd.tp_dim)];
  Require(a.begin == b.begin && a.size == b.size && a.begin == e.begin && a.size == e.size,
          fmt::format("rank {}: the plan gives the shared gate/up and down different intermediate slices", rank));
  r.shared_f_begin = a.begin;
  r.shared_f_end = a.begin + a.size;
  r.shared_tp_group = GroupAlong(plan.meshes.dense, s.tp_axis, rank);
  if (r.shared_tp_group.size() == 1) {
    r.shared_mode = SharedMode::kLocal;
  } else if (r.shared_tp_group == r.expert_tp_group) {
    r.shared_mode = SharedMode::kPartial;
  } else if (r.expert_tp_group.size() == 1) {
    r.shared_mode = SharedMode::kSequenceParallel;
  } else {
    throw Error(
        fmt::format("rank {}: shared experts are TP-sharded over ranks [{}] while the routed experts' tokens are "
                    "replicated over ranks [{}]; the runtime supports etp = 1 or etp = tp only",
                    rank, fmt::join(r.shared_tp_group, " "), fmt::join(r.expert_tp_group, " ")));
  }
}

// Every rank of the stage from `first_rank`: experts, slices and groups; sets c.ep and c.expert_tp.
void ConfigureRanks(const Plan& plan, const LayerParams& lp, int64_t first_rank, int64_t stage_size, RunConfig& c) {
  int64_t local_experts = -1;
  for (int64_t rank = first_rank; rank < first_rank + stage_size; ++rank) {
    RankConfig r = RoutedExpertsOnRank(plan, lp, c.layer, rank);
    if (local_experts < 0) local_experts = r.num_local_experts;
    Require(local_experts == r.num_local_experts, "every EP rank must hold the same number of experts");
    c.ep = static_cast<int64_t>(r.ep_group.size());
    c.expert_tp = static_cast<int64_t>(r.expert_tp_group.size());
    if (c.shared_intermediate > 0) SharedExpertsOnRank(plan, lp, rank, r);
    c.ranks.push_back(std::move(r));
  }
}

// Deredundency sub-groups (ep = oep x iep, inner index fastest, as the planner).
void SplitDeredundencyGroups(const Plan& plan, const RunOptions& o, RunConfig& c) {
  c.oep = c.dispatcher == Dispatcher::kDeredundency ? o.oep.value_or(DeredundencyOep(plan)) : 1;
  Require(c.oep >= 1 && c.ep % c.oep == 0,
          fmt::format("oep ({}) must divide ep ({}) for the deredundency dispatcher (ep = oep x iep)", c.oep, c.ep));
  c.iep = c.ep / c.oep;
  for (RankConfig& r : c.ranks) {
    r.oep_index = r.ep_index / c.iep;
    r.iep_index = r.ep_index % c.iep;
    for (int64_t x = 0; x < c.oep; ++x) r.oep_group.push_back(r.ep_group[static_cast<size_t>(x * c.iep + r.iep_index)]);
    for (int64_t j = 0; j < c.iep; ++j) r.iep_group.push_back(r.ep_group[static_cast<size_t>(r.oep_index * c.iep + j)]);
  }
}

// The routing model of every MoE layer and this layer's index among them.
void AttachRouting(const ModelSpec& m, const RunOptions& o, RunConfig& c) {
  if (!o.routing) return;
  // One sampler per MoE layer (a trace may list every layer); this layer's is used.
  c.routing_model =
      std::make_shared<RoutingModel>(PrepareRouting(*o.routing, c.num_experts, c.top_k, m.NumMoeLayers(), GroupLimitOf(m.moe)));
  c.routing_layer = 0;
  for (int64_t l = 0; l < c.layer; ++l) c.routing_layer += m.moe_layers[static_cast<size_t>(l)] ? 1 : 0;
}

// Redundant experts: the placement read from the placement file or placed from the routing
// model's expected load; each rank then holds SlotsPerRank slots.
void AttachPlacement(const Plan& plan, const RunOptions& o, RunConfig& c) {
  if (!o.placement_file.empty()) {
    Require(c.dispatcher == Dispatcher::kAllToAll,
            "--placement runs with the all_to_all dispatcher (the deredundency dispatcher has no replicas)");
    std::vector<int64_t> map = ReadPlacementFile(o.placement_file, c.routing_layer, c.ep, c.num_experts);
    const int64_t slots = static_cast<int64_t>(map.size());
    c.placement =
        std::make_shared<ExpertPlacement>(PlacementFromMap(std::move(map), c.num_experts, c.ep, EpGroupNodes(plan), EplbPolicy::kGlobal));
    if (o.redundant) {
      Require(o.redundant->redundant_experts == slots - c.num_experts,
              fmt::format("--redundant-experts ({}) does not match the placement file's {} slots for {} experts",
                          o.redundant->redundant_experts, slots, c.num_experts));
    } else {
      c.options.redundant = RedundantExpertsOptions{};
      c.options.redundant->redundant_experts = slots - c.num_experts;
    }
  } else if (o.redundant) {
    Require(c.routing_model != nullptr,
            "--redundant-experts needs --routing: the placement balances the routing model's expected load of the layer");
    Require(c.dispatcher == Dispatcher::kAllToAll,
            "--redundant-experts runs with the all_to_all dispatcher (the deredundency dispatcher has no replicas)");
    c.placement = std::make_shared<ExpertPlacement>(
        PlaceExperts(ExpectedShare(*c.routing_model, c.routing_layer), EplbOptionsFor(plan, *o.redundant)));
  }
  if (c.placement) {
    for (RankConfig& r : c.ranks) {
      r.num_local_experts = c.placement->SlotsPerRank();
      r.first_expert = r.ep_index * r.num_local_experts;
    }
  }
}

// The token sources and every rank's tokens; checks the equal blocks the allgather dispatcher and
// sequence-parallel shared experts need.
void AssignTokens(const RunOptions& o, int64_t first_rank, RunConfig& c) {
  for (const RankConfig& r : c.ranks) c.sources.push_back(r.source);
  std::sort(c.sources.begin(), c.sources.end());
  c.sources.erase(std::unique(c.sources.begin(), c.sources.end()), c.sources.end());
  for (int64_t s : c.sources) {
    c.tokens_of_source.push_back(o.tokens_per_source.empty() ? o.tokens_per_rank : o.tokens_per_source[static_cast<size_t>(s)]);
  }
  for (RankConfig& r : c.ranks) {
    r.tokens = o.tokens_per_source.empty() ? o.tokens_per_rank : o.tokens_per_source[static_cast<size_t>(r.source)];
  }
  if (c.dispatcher == Dispatcher::kAllGather) {
    // The all-gather and the reduce-scatter move equal blocks: every source the same tokens.
    for (int64_t t : c.tokens_of_source) {
      Require(t == c.tokens_of_source.front(),
              fmt::format("the allgather dispatcher all-gathers equal token blocks: every source needs the same tokens, got {} and {}",
                          c.tokens_of_source.front(), t));
    }
  }
  // Sequence-parallel shared experts all-gather equal slices.
  for (const RankConfig& r : c.ranks) {
    if (r.shared_mode != SharedMode::kSequenceParallel) continue;
    for (int64_t peer : r.shared_tp_group) {
      const RankConfig& p = c.ranks[static_cast<size_t>(peer - first_rank)];
      Require(p.tokens == r.tokens, fmt::format("sequence-parallel shared experts need equal tokens on the tp group of rank {} "
                                                "({} on rank {}, {} on rank {})",
                                                r.rank, r.tokens, r.rank, p.tokens, p.rank));
    }
  }
}

// Memory bound, worst case (every token of the EP group routed to one rank): routed buffers
// T*k*D several times, the deredundency gather and whiteboard oep*T*k*D each, received rows
// ep*T*k*D three times; times the ranks of the stage, in fp32.
void CheckBufferBound(const RunConfig& c, int64_t max_tokens, int64_t stage_size) {
  const int64_t rows = CheckedMul(max_tokens, c.top_k, "tokens x top_k");
  const int64_t per_rank_rows = CheckedAdd(CheckedMul(rows, 8 + 2 * c.oep, "routed rows"),
                                           CheckedMul(CheckedMul(rows, c.ep, "received rows"), 3, "received rows"), "rows");
  const int64_t bytes = CheckedMul(CheckedMul(CheckedMul(per_rank_rows, c.hidden, "buffer elements"), 4, "buffer bytes"), stage_size,
                                   "buffer bytes of all ranks");
  constexpr int64_t kMaxBytes = int64_t{64} << 30;
  Require(bytes <= kMaxBytes,
          fmt::format("{} tokens per rank of hidden {} with top_k {} on {} ranks (ep {}) could need {:.1f} "
                      "GiB of buffers (worst-case routing), more than the {} GiB allowed; use fewer tokens",
                      max_tokens, c.hidden, c.top_k, stage_size, c.ep, static_cast<double>(bytes) / (1 << 30), kMaxBytes >> 30));
}

}  // namespace

RunConfig MakeRunConfig(const Plan& plan, const RunOptions& o) {
  const ModelSpec& m = plan.model;
  RunConfig c;
  c.model_name = m.name;
  c.family = m.family;
  c.options = o;

  // --- What the runtime supports, and the options.
  CheckModelSupported(m);
  CheckOptionRanges(o);
  c.dispatcher = o.dispatcher.value_or(plan.training.dispatcher);
  c.gpus_per_node = plan.machine.gpus_per_node;
  c.fp8_dispatch = plan.training.fp8_dispatch;
  // The planner's FP8 dispatch (Megatron's FP8 all-to-all, DeepEP use_fp8: precision.h
  // DispatchRowBytes) sends 1 byte per element plus a scale per 128; the runtime's dispatchers
  // send the run's float rows, so running it would measure other bytes than the plan predicts.
  Require(!c.fp8_dispatch || !o.runs_dispatch,
          fmt::format("training.fp8_dispatch (--fp8-dispatch) is true, but dockyard-run's {} dispatcher has no FP8 dispatch path "
                      "(it sends the run's float rows, not 1 byte per element + a scale per 128 elements): plan without "
                      "--fp8-dispatch, or time one rank's compute with --replay-rank (its dispatch and combine come from the "
                      "cost model in FP8)",
                      DispatcherName(c.dispatcher)));

  // --- The layer, its parameters and their placements.
  c.layer = ChooseLayer(m, o.layer);
  CopyLayerShape(m, c);
  const LayerParams lp = FindLayerParams(plan, c);
  c.stage = plan.placements[static_cast<size_t>(lp.gate)].stage;
  c.world_size = plan.dims.world_size;

  // --- Degrees and memory bound (before anything is allocated).
  const int64_t stage_size = plan.dims.stage_size();
  const int64_t first_rank = c.stage * stage_size;
  const int64_t max_tokens = MaxTokens(o, c.world_size);

  // --- Every rank of the stage, then the groups, routing, placement and tokens built on them.
  ConfigureRanks(plan, lp, first_rank, stage_size, c);
  SplitDeredundencyGroups(plan, o, c);
  AttachRouting(m, o, c);
  if (c.dispatcher == Dispatcher::kDeepEp || c.dispatcher == Dispatcher::kAllGather) {
    Require(c.expert_tp == 1, fmt::format("the {} dispatcher runs with experts not TP-sharded (expert TP group of 1), got {}",
                                          DispatcherName(c.dispatcher), c.expert_tp));
  }
  AttachPlacement(plan, o, c);
  AssignTokens(o, first_rank, c);
  if (o.check_buffer_bound) CheckBufferBound(c, max_tokens, stage_size);
  return c;
}

std::vector<RankGroup> GroupsOfRank(const RunConfig& config, const RankConfig& rank) {
  std::vector<RankGroup> out = {RankGroup::kEp, RankGroup::kExpertTp};
  if (config.dispatcher == Dispatcher::kDeredundency) {
    out.push_back(RankGroup::kOep);
    out.push_back(RankGroup::kIep);
  }
  if (rank.shared_mode != SharedMode::kNone) out.push_back(RankGroup::kSharedTp);
  return out;
}

const std::vector<int64_t>& GroupMembers(const RankConfig& rank, RankGroup group) {
  switch (group) {
    case RankGroup::kEp:
      return rank.ep_group;
    case RankGroup::kExpertTp:
      return rank.expert_tp_group;
    case RankGroup::kOep:
      return rank.oep_group;
    case RankGroup::kIep:
      return rank.iep_group;
    case RankGroup::kSharedTp:
      break;
  }
  return rank.shared_tp_group;
}

std::vector<RankSpec> RankSpecs(const RunConfig& config) {
  std::vector<RankSpec> out;
  for (const RankConfig& r : config.ranks) {
    RankSpec spec;
    spec.rank = r.rank;
    for (RankGroup g : GroupsOfRank(config, r)) spec.groups.push_back({RankGroupName(g), GroupMembers(r, g)});
    out.push_back(std::move(spec));
  }
  return out;
}

}  // namespace dockyard::runtime
