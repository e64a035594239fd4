// RunConfig from a Plan (config.h).
#include "runtime/config.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "planner/base/checked_math.h"
#include "planner/base/error.h"
#include "planner/accounting/workload.h"

namespace dockyard::runtime {

const char* DispatcherName(Dispatcher d) {
  return d == Dispatcher::kDeredundency ? "deredundency"
         : d == Dispatcher::kDeepEp     ? "deepep"
         : d == Dispatcher::kAllGather  ? "allgather"
                                        : "all_to_all";
}

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

namespace {

// The forward slices of a parameter on a rank (ModelParallelSliceOnRank, the planner's chunk
// rule) and the mesh axes of its TP and EP steps.
struct ForwardShards {
  std::vector<DimSlice> slices;
  int tp_axis = -1;
  int ep_axis = -1;
};

ForwardShards ShardsOnRank(const ParamInfo& p, const ParamPlacement& pl, const Mesh& mesh, int64_t rank) {
  ForwardShards out;
  if (!p.fused_sections.empty() && p.tp_dim >= 0) {
    // Fused gate | up: TP shards each section alike, so the runtime slices one section.
    for (int64_t s : p.fused_sections) {
      if (s != p.fused_sections.front()) {
        throw Error(fmt::format("{}: fused sections of different sizes are not supported by the runtime", p.fqn));
      }
    }
    ParamInfo section = p;
    section.shape[static_cast<size_t>(p.tp_dim)] = p.fused_sections.front();
    out.slices = ModelParallelSliceOnRank(section, pl, mesh, rank);
  } else {
    out.slices = ModelParallelSliceOnRank(p, pl, mesh, rank);
  }
  for (const ShardStep& step : pl.steps) {
    if (step.kind == ShardKind::kData) continue;  // FSDP: all-gathered before the forward
    if (step.axes.size() != 1) {
      throw Error(fmt::format("{}: a TP or EP shard step over several mesh axes is not supported by the runtime", p.fqn));
    }
    (step.kind == ShardKind::kTensor ? out.tp_axis : out.ep_axis) = step.axes.front();
  }
  return out;
}

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

}  // namespace

std::vector<DimSlice> ForwardSliceOnRank(const ParamInfo& param, const ParamPlacement& placement, const Mesh& mesh, int64_t rank) {
  return ShardsOnRank(param, placement, mesh, rank).slices;
}

RunConfig MakeRunConfig(const Plan& plan, const RunOptions& o) {
  const ModelSpec& m = plan.model;
  const MoeSpec& moe = m.moe;
  RunConfig c;
  c.model_name = m.name;
  c.family = m.family;
  c.options = o;

  // --- What the runtime supports.
  Require(!moe.expert_bias && !moe.router_bias,
          fmt::format("the runtime supports SwiGLU experts without biases; {} has expert or router biases (gpt-oss's clamped "
                      "SwiGLU) and is not supported yet",
                      m.family));
  Require(moe.score_func == "softmax" || moe.score_func == "sigmoid",
          fmt::format("moe.score_func must be \"softmax\" or \"sigmoid\", got \"{}\"", moe.score_func));

  // --- Options.
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
  const std::string dispatcher = o.dispatcher.empty() ? plan.training.dispatcher : o.dispatcher;
  if (dispatcher == "all_to_all") {
    c.dispatcher = Dispatcher::kAllToAll;
  } else if (dispatcher == "deredundency") {
    c.dispatcher = Dispatcher::kDeredundency;
  } else if (dispatcher == "deepep") {
    c.dispatcher = Dispatcher::kDeepEp;
  } else if (dispatcher == "allgather") {
    c.dispatcher = Dispatcher::kAllGather;
  } else {
    throw Error(fmt::format("dispatcher must be \"all_to_all\", \"deredundency\", \"deepep\" or \"allgather\", got \"{}\"", dispatcher));
  }
  c.gpus_per_node = plan.training.gpus_per_node;
  c.fp8_dispatch = plan.training.fp8_dispatch;
  // The planner's FP8 dispatch (Megatron's FP8 all-to-all, DeepEP use_fp8: precision.h
  // DispatchRowBytes) sends 1 byte per element plus a scale per 128; the runtime's dispatchers
  // send the run's float rows, so running it would measure other bytes than the plan predicts.
  Require(!c.fp8_dispatch || !o.runs_dispatch,
          fmt::format("training.fp8_dispatch (--fp8-dispatch) is true, but dockyard-run's {} dispatcher has no FP8 dispatch path "
                      "(it sends the run's float rows, not 1 byte per element + a scale per 128 elements): plan without "
                      "--fp8-dispatch, or time one rank's compute with --replay-rank (its dispatch and combine come from the "
                      "cost model in FP8)",
                      dispatcher));

  // --- The layer.
  const int64_t num_layers = m.num_hidden_layers;
  if (o.layer < 0) {
    c.layer = -1;
    for (int64_t l = 0; l < num_layers; ++l) {
      if (m.moe_layers[static_cast<size_t>(l)]) {
        c.layer = l;
        break;
      }
    }
    Require(c.layer >= 0, fmt::format("{} has no MoE layer", m.name));
  } else {
    Require(o.layer < num_layers, fmt::format("layer ({}) must be in [0, {})", o.layer, num_layers));
    Require(m.moe_layers[static_cast<size_t>(o.layer)], fmt::format("layer {} of {} is a dense layer, not MoE", o.layer, m.name));
    c.layer = o.layer;
  }
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

  // --- The layer's parameters and their placements.
  const int64_t gate_up = FindParam(plan, c.layer, Role::kExpertGateUp);
  const int64_t gate = gate_up >= 0 ? gate_up : FindParam(plan, c.layer, Role::kExpertGate);
  const int64_t up = gate_up >= 0 ? gate_up : FindParam(plan, c.layer, Role::kExpertUp);
  const int64_t down = FindParam(plan, c.layer, Role::kExpertDown);
  Require(gate >= 0 && up >= 0 && down >= 0, fmt::format("layer {}: the plan lists no routed gate/up/down expert tensors", c.layer));
  const int64_t shared_gate = c.shared_intermediate > 0 ? FindParam(plan, c.layer, Role::kSharedExpertGate) : -1;
  const int64_t shared_up = c.shared_intermediate > 0 ? FindParam(plan, c.layer, Role::kSharedExpertUp) : -1;
  const int64_t shared_down = c.shared_intermediate > 0 ? FindParam(plan, c.layer, Role::kSharedExpertDown) : -1;
  Require(c.shared_intermediate == 0 || (shared_gate >= 0 && shared_up >= 0 && shared_down >= 0),
          fmt::format("layer {}: the plan lists no shared-expert gate/up/down tensors", c.layer));
  const auto& params = plan.inventory.params;
  const auto& placements = plan.placements;
  Require(placements.size() == params.size(), "plan: placements are not aligned with the inventory");
  const ParamPlacement& gate_pl = placements[static_cast<size_t>(gate)];
  c.stage = gate_pl.stage;
  c.world_size = plan.dims.world_size;
  const Mesh& expert_mesh = plan.MeshOf(static_cast<size_t>(gate));
  const Mesh& dense_mesh = plan.meshes.dense;

  // --- Degrees and memory bound (before anything is allocated).
  const int64_t stage_size = plan.dims.stage_size();
  const int64_t first_rank = c.stage * stage_size;
  int64_t max_tokens = o.tokens_per_rank;
  if (!o.tokens_per_source.empty()) {
    Require(static_cast<int64_t>(o.tokens_per_source.size()) == c.world_size,
            fmt::format("tokens per source: {} entries for a world of {}", o.tokens_per_source.size(), c.world_size));
    for (int64_t t : o.tokens_per_source) {
      Require(t >= 0 && t <= (int64_t{1} << 24), fmt::format("tokens per source must be in [0, 2^24], got {}", t));
      max_tokens = std::max(max_tokens, t);
    }
  }

  // --- Every rank of the stage.
  int64_t local_experts = -1;
  for (int64_t rank = first_rank; rank < first_rank + stage_size; ++rank) {
    RankConfig r;
    r.rank = rank;
    const ForwardShards g = ShardsOnRank(params[static_cast<size_t>(gate)], gate_pl, expert_mesh, rank);
    const ForwardShards u =
        ShardsOnRank(params[static_cast<size_t>(up)], placements[static_cast<size_t>(up)], plan.MeshOf(static_cast<size_t>(up)), rank);
    const ForwardShards d = ShardsOnRank(params[static_cast<size_t>(down)], placements[static_cast<size_t>(down)],
                                         plan.MeshOf(static_cast<size_t>(down)), rank);
    const ParamInfo& gp = params[static_cast<size_t>(gate)];
    const ParamInfo& up_p = params[static_cast<size_t>(up)];
    const ParamInfo& dp = params[static_cast<size_t>(down)];
    Require(gp.tp_dim >= 0 && up_p.tp_dim >= 0 && dp.tp_dim >= 0,
            fmt::format("layer {}: routed expert tensors without a TP dim are not supported", c.layer));
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
    if (local_experts < 0) local_experts = r.num_local_experts;
    Require(local_experts == r.num_local_experts, "every EP rank must hold the same number of experts");
    c.ep = ep;
    c.expert_tp = static_cast<int64_t>(r.expert_tp_group.size());
    r.source = *std::min_element(r.expert_tp_group.begin(), r.expert_tp_group.end());

    // Shared experts.
    if (c.shared_intermediate > 0) {
      const ParamInfo& sg = params[static_cast<size_t>(shared_gate)];
      const ParamInfo& sd = params[static_cast<size_t>(shared_down)];
      const ForwardShards s =
          ShardsOnRank(sg, placements[static_cast<size_t>(shared_gate)], plan.MeshOf(static_cast<size_t>(shared_gate)), rank);
      const ForwardShards su = ShardsOnRank(params[static_cast<size_t>(shared_up)], placements[static_cast<size_t>(shared_up)],
                                            plan.MeshOf(static_cast<size_t>(shared_up)), rank);
      const ForwardShards sdn =
          ShardsOnRank(sd, placements[static_cast<size_t>(shared_down)], plan.MeshOf(static_cast<size_t>(shared_down)), rank);
      const DimSlice a = s.slices[static_cast<size_t>(sg.tp_dim)];
      const DimSlice b = su.slices[0];
      const DimSlice e = sdn.slices[static_cast<size_t>(sd.tp_dim)];
      Require(a.begin == b.begin && a.size == b.size && a.begin == e.begin && a.size == e.size,
              fmt::format("rank {}: the plan gives the shared gate/up and down different intermediate slices", rank));
      r.shared_f_begin = a.begin;
      r.shared_f_end = a.begin + a.size;
      r.shared_tp_group = GroupAlong(dense_mesh, s.tp_axis, rank);
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
    c.ranks.push_back(std::move(r));
  }

  // --- Deredundency sub-groups (ep = oep x iep, inner index fastest, as the planner).
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

  if (o.routing) {
    // One sampler per MoE layer (a trace may list every layer); this layer's is used.
    c.routing_model =
        std::make_shared<RoutingModel>(PrepareRouting(*o.routing, c.num_experts, c.top_k, m.NumMoeLayers(), GroupLimitOf(m.moe)));
    c.routing_layer = 0;
    for (int64_t l = 0; l < c.layer; ++l) c.routing_layer += m.moe_layers[static_cast<size_t>(l)] ? 1 : 0;
  }
  if (c.dispatcher == Dispatcher::kDeepEp || c.dispatcher == Dispatcher::kAllGather) {
    Require(c.expert_tp == 1, fmt::format("the {} dispatcher runs with experts not TP-sharded (expert TP group of 1), got {}",
                                          DispatcherName(c.dispatcher), c.expert_tp));
  }
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

  // --- Token sources.
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

  // Memory bound, worst case (every token of the EP group routed to one rank): routed buffers
  // T*k*D several times, the deredundency gather and whiteboard oep*T*k*D each, received rows
  // ep*T*k*D three times; times the ranks of the stage, in fp32.
  if (!o.check_buffer_bound) return c;
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
  return c;
}

std::vector<RankSpec> RankSpecs(const RunConfig& config) {
  std::vector<RankSpec> out;
  for (const RankConfig& r : config.ranks) {
    RankSpec spec;
    spec.rank = r.rank;
    spec.groups.push_back({"ep", r.ep_group});
    spec.groups.push_back({"expert_tp", r.expert_tp_group});
    if (config.dispatcher == Dispatcher::kDeredundency) {
      spec.groups.push_back({"oep", r.oep_group});
      spec.groups.push_back({"iep", r.iep_group});
    }
    if (r.shared_mode != SharedMode::kNone) spec.groups.push_back({"shared_tp", r.shared_tp_group});
    out.push_back(std::move(spec));
  }
  return out;
}

}  // namespace dockyard::runtime
