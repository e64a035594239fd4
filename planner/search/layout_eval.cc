// Fast evaluation of layout-search candidates (see layout_eval.h).
#include "planner/search/layout_eval.h"

#include "planner/cost/deepep.h"
#include "planner/routing/flex_blocks.h"
#include "planner/cost/gemm_efficiency.h"
#include "planner/model/precision.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <optional>
#include <set>
#include <tuple>
#include <unordered_map>

#include <fmt/format.h>

#include "planner/accounting/comm.h"
#include "planner/base/checked_math.h"
#include "planner/base/error.h"
#include "planner/accounting/memory.h"
#include "planner/cost/network.h"
#include "planner/routing/received_rows.h"
#include "planner/layout/plan.h"
#include "planner/model/seq_len.h"
#include "planner/accounting/workload.h"
#include "planner/cost/moe_phases.h"
#include "planner/routing/flex_counts.h"
#include "planner/model/training_json.h"
#include "planner/model/pipeline_schedule.h"

namespace dockyard {
namespace {

using Wide = WideInt;  // memory.h: the 128-bit sums of the memory rules
constexpr Wide kInt64Max = static_cast<Wide>(INT64_MAX);
constexpr Wide kExactDouble = static_cast<Wide>(1) << 53;  // integers below are exact as doubles

// RoleGroup names (inventory.h), indexed.
constexpr int kNumGroups = 8;
constexpr const char* kGroupNames[kNumGroups] = {"embedding", "attention",      "norm",           "dense_mlp",
                                                 "router",    "routed_experts", "shared_experts", "lm_head"};

int GroupIndex(Role role) {
  const char* group = RoleGroup(role);
  for (int i = 0; i < kNumGroups; ++i) {
    if (std::strcmp(group, kGroupNames[i]) == 0) return i;
  }
  throw Error(fmt::format("internal: role group '{}' unknown to the layout evaluator", group));
}

int64_t Ceil(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

constexpr size_t kMaxMemoizedCuts = 1 << 16;

// Parameters that get the same placement and local shape under any degrees, `count` of them.
struct ParamClass {
  std::vector<int64_t> shape;
  int tp_dim = -1;
  bool routed = false;
  int group = 0;
  int64_t count = 0;
  int combo = -1;   // index of its (routed, tp_dim) in LayoutEvaluator::Impl::combos
  std::string fqn;  // its first parameter's (the uneven-FSDP message names it)

  bool SameKind(const ParamInfo& p, int g) const {
    return shape == p.shape && tp_dim == p.tp_dim && routed == p.routed_expert && group == g;
  }
};

// Adds `p` to `classes`, merging it into an equal class.
void AddToClasses(std::vector<ParamClass>& classes, const ParamInfo& p) {
  const int g = GroupIndex(p.role);
  for (auto& c : classes) {
    if (c.SameKind(p, g)) {
      ++c.count;
      return;
    }
  }
  classes.push_back({p.shape, p.tp_dim, p.routed_expert, g, 1, -1, p.fqn});
}

// Elements of one parameter of class `c` on the first rank of its stage under `cuts` (the
// placement policy's cuts for the candidate, ShardCutsOf): `mp` after model-parallel cuts only
// (ModelParallelNumel), `local` after all cuts (its placement).
struct ClassNumel {
  int64_t mp = 0, local = 0;
  bool sparse = false;
};

ClassNumel NumelOf(const ParamClass& c, const ShardCuts& cuts) {
  ClassNumel out;
  out.sparse = cuts.sparse_mesh;
  const FirstChunkElems n = FirstChunkNumel(c.shape, cuts);
  out.mp = n.model_parallel;
  out.local = n.local;
  return out;
}

// A unit's elements on the first rank of a stage, for one candidate.
struct UnitSums {
  Wide local[kNumGroups][2] = {};  // placed elements by role group and mesh (0 dense, 1 sparse)
  Wide mp[2] = {};                 // model-parallel elements by mesh

  void Add(const ParamClass& c, const ShardCuts& cuts) {
    const ClassNumel n = NumelOf(c, cuts);
    local[c.group][n.sparse] += static_cast<Wide>(n.local) * c.count;
    mp[n.sparse] += static_cast<Wide>(n.mp) * c.count;
  }
  void AddScaled(const UnitSums& u, int64_t times) {
    if (times == 0) return;
    for (int g = 0; g < kNumGroups; ++g) {
      local[g][0] += u.local[g][0] * times;
      local[g][1] += u.local[g][1] * times;
    }
    mp[0] += u.mp[0] * times;
    mp[1] += u.mp[1] * times;
  }
};

struct LayerKind {
  std::vector<ParamClass> classes;
  bool moe = false;
};

// The layer split of one pp: stage of each layer and per stage the layers of each kind.
struct Split {
  bool valid = true;
  std::string error;  // why not valid (ResolvePipelineStages' message)
  std::vector<int64_t> layer_stage;
  std::vector<std::vector<int64_t>> kind_count;   // [stage][kind]
  std::vector<int64_t> moe_layers, dense_layers;  // [stage]
  StageLayerRuns runs;                            // of layer_stage (cost.h StageLayerRunsOf; StepInputs::stage_runs)
};

// Whether two candidates have the same degrees (every field ParallelDims is built from).
// A hash of a tuple of integers and enums (the evaluator's cache keys).
struct TupleHash {
  template <class... T>
  size_t operator()(const std::tuple<T...>& t) const {
    size_t h = 0;
    std::apply([&h](const auto&... x) { ((h = h * 1000003u ^ static_cast<size_t>(x)), ...); }, t);
    return h;
  }
};

bool SameDims(const ParallelDimsOptions& a, const ParallelDimsOptions& b) {
  return a.world_size == b.world_size && a.dp_replicate == b.dp_replicate && a.dp_shard == b.dp_shard && a.cp == b.cp && a.tp == b.tp &&
         a.ep == b.ep && a.etp == b.etp && a.pp == b.pp && a.convention == b.convention;
}

// Field-by-field equality of the memo keys (the static_asserts flag a field added to either
// struct, which these must then compare).
bool SameWorkload(const Workload& a, const Workload& b) {
  static_assert(sizeof(Workload) == 8 * sizeof(int64_t) + 8, "a Workload field was added: compare it here");
  return std::tie(a.tokens, a.routed_tokens, a.dispatch_tokens, a.received_rows, a.mean_received_rows, a.act_bytes, a.tp_shards,
                  a.expert_f_local, a.fp8_saved_inputs,
                  a.fp8_blockwise) == std::tie(b.tokens, b.routed_tokens, b.dispatch_tokens, b.received_rows, b.mean_received_rows,
                                               b.act_bytes, b.tp_shards, b.expert_f_local, b.fp8_saved_inputs, b.fp8_blockwise);
}
bool SameRecomputeSet(const RecomputeSet& a, const RecomputeSet& b) {
  static_assert(sizeof(RecomputeSet) == 9, "a RecomputeSet field was added: compare it here");
  return std::tie(a.layernorm, a.core_attn, a.moe_act, a.mlp_act, a.shared_act, a.moe, a.mla_up_proj, a.shared_experts, a.mlp) ==
         std::tie(b.layernorm, b.core_attn, b.moe_act, b.mlp_act, b.shared_act, b.moe, b.mla_up_proj, b.shared_experts, b.mlp);
}

bool SameSettings(const CandidateSettings& a, const CandidateSettings& b) {
  return a.micro_batch_size == b.micro_batch_size && a.num_microbatches == b.num_microbatches &&
         a.grad_accumulation_steps == b.grad_accumulation_steps && a.vpp == b.vpp && a.recompute == b.recompute &&
         a.dp_sharding == b.dp_sharding && a.overlap_moe_ep_comm == b.overlap_moe_ep_comm;
}

// One stage's figures on its first rank that depend only on the group (below).
struct StageStatics {
  Wide stat = 0;     // params + grads + optimizer (+ FP8 weight copies), bytes (memory.h StaticBytesOf)
  Wide mp = 0;       // model-parallel elements, dense + sparse (StageBuffers' last argument)
  Wide largest = 0;  // the largest FSDP unit (FsdpUnitOf), elements; 0 without FSDP
};

}  // namespace

// What a candidate's memory and step-end collectives read that depends only on its degrees, dp
// sharding and dtypes -- not on micro-batch size, recompute, vpp, EP overlap or the dispatcher.
struct LayoutEvaluator::GroupStatics {
  // Key: the degrees are last_dims' (DimsFor drops the group when they change), then these.
  bool filled = false;
  DpSharding strategy = DpSharding::kFsdp;
  TrainingBytes bytes;
  double fp8_copy = 0;
  // Figures.
  bool valid = false;     // the layer split exists and FSDP2 can shard every class
  std::string error;      // why not valid: the split's or UnevenFsdpMessage
  bool overflow = false;  // a static figure beyond int64: the reference path takes the candidate
  const Split* split = nullptr;
  const std::vector<UnitSums>* kind_sums = nullptr;
  const UnitSums* embedding = nullptr;
  UnitSums root;  // the root unit, with the last stage's tied lm_head copy (tied embeddings, pp > 1)
  std::vector<StageStatics> stages;
  // Stages whose figures other than the micro-batches in flight are the same (statics, layers,
  // first / last): class_of[s] is stage s's class, class_first[c] the first stage of class c.
  // A class's peak is its stage with the most micro-batches in flight (activations grow with
  // them; nothing else differs).
  std::vector<int32_t> class_of;
  std::vector<int64_t> class_first;
  Wide static_worst = 0, static_rank0 = 0, dense0 = 0, sparse0 = 0, tied = 0;
  double dp_step_comm_us = 0, dp_step_param_gather_us = 0;  // rank 0's step-end data-parallel collectives

  bool SameKey(DpSharding s, const TrainingBytes& b, double copy) const {
    return filled && strategy == s && bytes.param == b.param && bytes.grad == b.grad && bytes.moments == b.moments &&
           bytes.master == b.master && fp8_copy == copy;
  }
};

struct LayoutEvaluator::Impl {
  Machine machine;  // the plans' node size and budget (search.h SearchPlanMachine)
  std::vector<LayerKind> kinds;
  std::vector<int> layer_kind;        // [num_hidden_layers]
  std::vector<ParamClass> embedding;  // unit of the input embedding, stage 0
  std::vector<ParamClass> root;       // final norm, lm_head (+ bias), stage pp - 1
  ParamClass tied_copy;               // the last stage's lm_head copy (tied embeddings, pp > 1)
  int first_kind[2] = {-1, -1};       // kind of the first MoE [0] / dense [1] layer
  double attention_params = 0;
  int64_t num_moe_layers = 0;
  Wide all_params = 0;  // every inventory element (+ a tied copy), for overflow guards
  // Training settings per (dispatcher, candidate settings), validated and resolved as BuildPlan
  // does (ValidateTraining; dp_sharding's convention default), with their dtype sizes.
  struct TrainingEntry {
    bool ok = false;
    std::string error;  // why not ok (ValidateTraining's message)
    TrainingConfig t;
    TrainingBytes bytes;
    std::unordered_map<std::tuple<int64_t, int64_t, bool>, std::string, TupleHash>
        run_error;  // per (pp, ep, megatron): the run-setting rule broken, empty = they hold
  };
  using TrainingKey = std::tuple<Dispatcher, int64_t, int64_t, int64_t, int64_t, int, int, int>;
  // Hashed, not ordered: looked up once per candidate (references stay valid as it grows).
  std::unordered_map<TrainingKey, TrainingEntry, TupleHash> trainings;
  std::map<int64_t, Split> splits;  // per pp
  // The (routed, tp_dim) combinations of the classes: the placement policy (ShardCutsOf) depends
  // on nothing else of a parameter, so a candidate's cuts are computed once per combination.
  std::vector<std::pair<bool, int>> combos;
  // Unit sums of every class under one set of cuts, memoized by the cuts themselves (their dims,
  // chunks and meshes): the sums are a pure function of the classes and the cuts, and many
  // candidates share cuts (pp, dp_replicate and the dispatcher do not change them).
  struct ClassSums {
    std::vector<UnitSums> kinds;
    UnitSums embedding, root, tied_copy;
    bool uneven_fsdp = false;  // a class FSDP2 cannot shard (FindUnevenFsdpCut): BuildPlan rejects it
  };
  std::unordered_map<std::string, ClassSums> class_sums;
  std::string key;              // scratch
  std::vector<ShardCuts> cuts;  // scratch, per combo

  // The degrees of the last candidate, validated (TryBuildParallelDims, CheckDimsForModel).
  struct DimsCheck {
    bool filled = false;
    ParallelDimsOptions options;
    bool ok = false;
    std::string error;  // why not ok (TryBuildParallelDims, CheckDimsForModel, SeqLenSplitsOverCp)
    ParallelDims d;
  } last_dims;
  // The figures (GroupStatics) of the last degrees' groups, one per (dp sharding, dtypes, FP8
  // copy): the search visits every setting of a group in a row, and the groups of one set of
  // degrees (dispatchers x dp shardings) one after the other, alternating the dp sharding.
  std::array<GroupStatics, 4> groups;
  size_t next_group = 0;  // the slot the next miss fills (round robin)
  // A candidate's training entry and run-setting verdict (RunSettingsError) by its
  // LayoutCandidate::setting_index, without hashing its settings: in one search, the settings at
  // an index depend on its group only through the dispatcher, dp sharding, dp (= dp_replicate x
  // dp_shard: the global batch's schedule), pp (vpp > 1 needs pp > 1) and ep (EP overlap needs
  // ep > 1), and the verdict on the entry, pp and ep. One slot table per such family, found once
  // per group (the search visits every setting of a group in a row).
  struct SettingSlot {
    TrainingEntry* entry = nullptr;
    const std::string* run_error = nullptr;  // null until the run-setting rules were checked
    CandidateSettings settings;              // the settings it was filled for: a candidate of other settings at the index refills it
    // The verdicts behind the pointers, copied here: a candidate whose rules were checked reads
    // only its slot (the entries lie scattered in their maps, a cache miss each).
    bool entry_ok = false;  // entry->ok
    bool run_ok = false;    // run_error->empty(), once run_error is set
    bool oep_ok = false;    // the deredundency oep divides ep, once run_error is set and run_ok
  };
  using SlotFamily = std::tuple<Dispatcher, int, int64_t, int64_t, int64_t>;  // dispatcher, dp sharding (-1 unset), dp, pp, ep
  std::unordered_map<SlotFamily, std::vector<SettingSlot>, TupleHash> slot_families;
  std::string oep_error;  // PreMemoryRuleBroken's scratch for the deredundency oep message
  // WorstPeak's layer activations of the last (workload, recompute set) it met (LayerActivations
  // reads nothing else of a candidate).
  struct ActivationMemo {
    bool filled = false;
    Workload w;
    RecomputeSet recompute;
    LayerActivationTable table;
  } activation_memo;
  std::vector<SettingSlot>* slots = nullptr;  // the family of slot_dims, slot_dispatcher and slot_sharding
  ParallelDimsOptions slot_dims;
  Dispatcher slot_dispatcher = Dispatcher::kAllToAll;
  std::optional<DpSharding> slot_sharding;
  SettingSlot* SlotFor(const LayoutCandidate& c) {
    if (c.setting_index < 0) return nullptr;
    if (slots == nullptr || !SameDims(slot_dims, c.dims) || slot_dispatcher != c.dispatcher || slot_sharding != c.settings.dp_sharding) {
      slot_dims = c.dims;
      slot_dispatcher = c.dispatcher;
      slot_sharding = c.settings.dp_sharding;
      const auto& d = c.dims;
      slots = &slot_families[SlotFamily{c.dispatcher, c.settings.dp_sharding ? static_cast<int>(*c.settings.dp_sharding) : -1,
                                        d.dp_replicate * d.dp_shard, d.pp, d.ep}];
    }
    const size_t i = static_cast<size_t>(c.setting_index);
    if (i >= slots->size()) slots->resize(i + 1);
    return &(*slots)[i];
  }
  // The MoE phases this evaluator has read from the shared cache, by key: a lookup without the
  // shared cache's lock (entries there never move).
  std::unordered_map<SearchEvalCache::MoeKey, const MoePhaseTimes*, TupleHash> moe_seen;

  const DimsCheck& DimsFor(const ParallelDimsOptions& o, const ModelSpec& m, int64_t seq_len) {
    DimsCheck& c = last_dims;
    if (c.filled && SameDims(c.options, o)) return c;
    c.filled = true;
    c.options = o;
    for (GroupStatics& g : groups) g.filled = false;  // their figures were for other degrees
    c.error.clear();
    c.ok = TryBuildParallelDims(o, &c.d, &c.error) && CheckDimsForModel(c.d, m, &c.error) && SeqLenSplitsOverCp(seq_len, c.d.cp, &c.error);
    return c;
  }

  // The group figures of the degrees DimsFor checked last (valid: `d`) under training `t` (its dp sharding, dtypes
  // and precision), by the rules of memory.h and comm.h on the first rank of each stage.
  const GroupStatics& StaticsFor(const ModelSpec& m, const ClusterSpec& cluster, const ParallelDims& d, const TrainingConfig& t,
                                 const TrainingBytes& tb) {
    const DpSharding strategy = *t.dp_sharding;
    const double fp8_copy = Fp8WeightCopyPerElement(t, d.convention);  // FP8 weight copies (megatron)
    for (const GroupStatics& g : groups) {
      if (g.SameKey(strategy, tb, fp8_copy)) return g;
    }
    GroupStatics& g = groups[next_group];
    next_group = (next_group + 1) % groups.size();
    g = GroupStatics{};
    g.filled = true;
    g.strategy = strategy;
    g.bytes = tb;
    g.fp8_copy = fp8_copy;
    g.split = &SplitFor(m, t, d.pp);
    if (!g.split->valid) {
      g.error = g.split->error;
      return g;
    }
    const ClassSums& sums = SumsFor(d, m.moe.num_experts, strategy == DpSharding::kFsdp);
    if (sums.uneven_fsdp) {  // BuildPlan rejects it
      g.error = UnevenFsdpError();
      return g;
    }
    g.valid = true;
    g.kind_sums = &sums.kinds;
    g.embedding = &sums.embedding;
    g.root = sums.root;
    if (m.tie_word_embeddings && d.pp > 1) g.root.AddScaled(sums.tied_copy, 1);
    auto fits = [&](Wide v) {
      if (v > kInt64Max) g.overflow = true;
      return v;
    };
    const size_t nk = kinds.size();
    for (int64_t s = 0; s < d.pp; ++s) {
      UnitSums st;
      for (size_t i = 0; i < nk; ++i) st.AddScaled(sums.kinds[i], g.split->kind_count[s][i]);
      if (s == 0) st.AddScaled(sums.embedding, 1);
      if (s == d.pp - 1) st.AddScaled(g.root, 1);
      StageStatics out;
      for (int k = 0; k < kNumGroups; ++k) {
        const StaticBytes b = StaticBytesOf(st.local[k][0], st.local[k][1], d, strategy, tb);
        out.stat += fits(b.params) + fits(b.grads) + fits(b.optimizer) +
                    fits(Fp8WeightCopyBytes(kGroupNames[k], st.local[k][0] + st.local[k][1], fp8_copy));
      }
      g.static_worst = std::max(g.static_worst, out.stat);
      if (s == 0) {
        g.static_rank0 = out.stat;
        g.dense0 = st.mp[0];
        g.sparse0 = st.mp[1];
      }
      out.mp = st.mp[0] + st.mp[1];
      // The largest FSDP unit (FsdpUnitOf): a layer's dense part or its experts on the sparse mesh,
      // the embedding, the root.
      if (strategy == DpSharding::kFsdp) {
        for (size_t i = 0; i < nk; ++i) {
          if (g.split->kind_count[s][i] == 0) continue;
          out.largest = std::max({out.largest, sums.kinds[i].mp[0], sums.kinds[i].mp[1]});
        }
        if (s == 0) out.largest = std::max(out.largest, sums.embedding.mp[0] + sums.embedding.mp[1]);
        if (s == d.pp - 1) out.largest = std::max(out.largest, g.root.mp[0] + g.root.mp[1]);
      }
      g.stages.push_back(out);
    }
    for (int64_t s = 0; s < d.pp; ++s) {
      const StageStatics& a = g.stages[static_cast<size_t>(s)];
      int32_t c = 0;
      for (; c < static_cast<int32_t>(g.class_first.size()); ++c) {
        const int64_t f = g.class_first[static_cast<size_t>(c)];
        const StageStatics& b = g.stages[static_cast<size_t>(f)];
        if (f != 0 && s != d.pp - 1 && a.stat == b.stat && a.mp == b.mp && a.largest == b.largest &&
            g.split->moe_layers[s] == g.split->moe_layers[f] && g.split->dense_layers[s] == g.split->dense_layers[f]) {
          break;
        }
      }
      if (c == static_cast<int32_t>(g.class_first.size())) g.class_first.push_back(s);
      g.class_of.push_back(c);
    }
    if (g.overflow || g.dense0 > kInt64Max || g.sparse0 > kInt64Max) {
      g.overflow = true;
      return g;
    }
    // Rank 0 is on stage 0: with tied embeddings and pp > 1 it holds the embedding (comm.h).
    g.tied = m.tie_word_embeddings && d.pp > 1 ? sums.embedding.mp[0] + sums.embedding.mp[1] : 0;
    StepCollectiveTimes(d, strategy, tb, cluster, &g);
    return g;
  }

  // Rank 0's step-end data-parallel collectives (comm.h StepCollectives, in ComputeComm's order)
  // and their time, into g.dp_step_comm_us (the zero1 parameter all-gather also in
  // g.dp_step_param_gather_us). Rank 0's groups {0, s, ..., (n-1)s} span NVLink domains when the
  // last member is on another one.
  static void StepCollectiveTimes(const ParallelDims& d, DpSharding strategy, const TrainingBytes& tb, const ClusterSpec& cluster,
                                  GroupStatics* g) {
    const int64_t domain = NvlinkDomainGpus(cluster);
    const StepCollectiveList step =
        StepCollectives(d, strategy, tb, static_cast<int64_t>(g->dense0), static_cast<int64_t>(g->sparse0), static_cast<int64_t>(g->tied));
    for (int i = 0; i < step.size; ++i) {
      const StepCollective& e = step.items[i];
      if (e.group_size < 2 || e.bytes == 0) continue;
      const double wire = CollectiveWireBytes(e.collective, e.group_size, 1, e.bytes);
      const double us =
          StepCollectiveUs(static_cast<double>(static_cast<int64_t>(wire)), e.group_size,
                           MembersPerDomainStrided(e.group_size, e.stride, domain), (e.group_size - 1) * e.stride / domain > 0, cluster);
      g->dp_step_comm_us += us;
      if (std::strcmp(e.purpose, "zero1_all_gather_params") == 0) g->dp_step_param_gather_us += us;
    }
  }

  int ComboOf(bool routed, int tp_dim) {
    for (size_t i = 0; i < combos.size(); ++i) {
      if (combos[i] == std::make_pair(routed, tp_dim)) return static_cast<int>(i);
    }
    combos.push_back({routed, tp_dim});
    return static_cast<int>(combos.size()) - 1;
  }

  // BuildPlan's message for the first class FSDP2 cannot shard under the cuts SumsFor computed last
  // (the memoized sums are shared by cuts of other meshes, whose names the message carries).
  std::string UnevenFsdpError() const {
    auto message = [&](const ParamClass& pc) -> std::string {
      const UnevenFsdpCut uneven = FindUnevenFsdpCut(pc.shape, cuts[pc.combo]);
      return uneven.cut < 0 ? "" : UnevenFsdpMessage(pc.fqn, cuts[pc.combo].cuts[uneven.cut], uneven.size);
    };
    // The inventory's order: the embedding, the layers, the root unit.
    for (const auto& pc : embedding) {
      if (std::string m = message(pc); !m.empty()) return m;
    }
    for (const auto& kind : kinds) {
      for (const auto& pc : kind.classes) {
        if (std::string m = message(pc); !m.empty()) return m;
      }
    }
    for (const auto& pc : root) {
      if (std::string m = message(pc); !m.empty()) return m;
    }
    return "internal: an FSDP cut the search found uneven is even";
  }

  const ClassSums& SumsFor(const ParallelDims& d, int64_t num_experts, bool fsdp) {
    key.clear();
    for (size_t i = 0; i < combos.size(); ++i) {
      cuts[i] = ShardCutsOf(combos[i].first, combos[i].second, d, num_experts, fsdp);
      const ShardCuts& c = cuts[i];
      key.push_back(static_cast<char>(c.sparse_mesh));
      key.push_back(static_cast<char>(c.size));
      for (int j = 0; j < c.size; ++j) {
        key.push_back(static_cast<char>(c.cuts[j].dim));
        key.push_back(static_cast<char>(c.cuts[j].kind));
        key.append(reinterpret_cast<const char*>(&c.cuts[j].num_chunks), sizeof(int64_t));
      }
    }
    auto it = class_sums.find(key);
    if (it != class_sums.end()) return it->second;
    if (class_sums.size() >= kMaxMemoizedCuts) class_sums.clear();  // bounds the memory of huge searches
    ClassSums sums;
    sums.kinds.resize(kinds.size());
    auto check = [&](const ParamClass& pc) {
      if (fsdp && FindUnevenFsdpCut(pc.shape, cuts[pc.combo]).cut >= 0) sums.uneven_fsdp = true;
    };
    for (size_t i = 0; i < kinds.size(); ++i) {
      for (const auto& pc : kinds[i].classes) {
        sums.kinds[i].Add(pc, cuts[pc.combo]);
        check(pc);
      }
    }
    for (const auto& pc : embedding) {
      sums.embedding.Add(pc, cuts[pc.combo]);
      check(pc);
    }
    for (const auto& pc : root) {
      sums.root.Add(pc, cuts[pc.combo]);
      check(pc);
    }
    if (tied_copy.combo >= 0) sums.tied_copy.Add(tied_copy, cuts[tied_copy.combo]);
    return class_sums.emplace(key, std::move(sums)).first->second;
  }

  const Split& SplitFor(const ModelSpec& m, const TrainingConfig& t, int64_t pp) {
    auto it = splits.find(pp);
    if (it != splits.end()) return it->second;
    Split s;
    try {
      // Once per pp: the result is cached. The account-for-embedding / loss split keeps the
      // embedding on stage 0 and the loss and MTP on stage pp - 1, as the rest of this evaluator
      // assumes (a --pipeline-model-parallel-layout is refused by the search's front end).
      s.layer_stage = ResolvePipelineStages(t, m.num_hidden_layers, pp).layer_stage;
    } catch (const Error& e) {
      s.valid = false;
      s.error = e.what();
    }
    if (s.valid) {
      s.kind_count.assign(pp, std::vector<int64_t>(kinds.size(), 0));
      s.moe_layers.assign(pp, 0);
      s.dense_layers.assign(pp, 0);
      for (int64_t l = 0; l < m.num_hidden_layers; ++l) {
        const int64_t st = s.layer_stage[l];
        ++s.kind_count[st][layer_kind[l]];
        ++(m.moe_layers[l] ? s.moe_layers : s.dense_layers)[st];
      }
      s.runs = StageLayerRunsOf(m.moe_layers, s.layer_stage, nullptr, pp);
    }
    return splits.emplace(pp, std::move(s)).first->second;
  }
};

std::shared_ptr<SearchEvalCache> LayoutEvaluator::MakeCache(const ModelSpec& model, const SearchOptions& options) {
  int64_t layers = std::min<int64_t>(options.routing_layers, model.NumMoeLayers());
  if (options.routing.kind == RoutingKind::kTrace) layers = model.NumMoeLayers();
  return std::make_shared<SearchEvalCache>(
      PrepareRouting(options.routing, model.moe.num_experts, model.moe.top_k, layers, GroupLimitOf(model.moe)));
}

LayoutEvaluator::LayoutEvaluator(const ModelSpec& model, const SearchOptions& options, std::shared_ptr<SearchEvalCache> cache)
    : model_(model), options_(options), cache_(std::move(cache)), impl_(std::make_unique<Impl>()) {
  inventory_ = BuildInventory(model_);
  if (!cache_) cache_ = MakeCache(model_, options_);
  budget_bytes_ = UsableBudgetBytes(SearchBudgetGib(options_), options_.training.memory_reserve_gib.value_or(0));

  Impl& im = *impl_;
  im.machine = SearchPlanMachine(options_);
  const int64_t L = model_.num_hidden_layers;
  if (static_cast<int64_t>(model_.moe_layers.size()) != L) {
    throw Error(fmt::format("internal: moe_layers has {} entries for {} layers", model_.moe_layers.size(), L));
  }
  // Classes per layer, then layers with equal class lists merged into kinds.
  std::vector<LayerKind> per_layer(L);
  for (int64_t l = 0; l < L; ++l) per_layer[l].moe = model_.moe_layers[l];
  for (const auto& p : inventory_.params) {
    im.all_params += p.Numel();
    if (p.layer >= 0) {
      AddToClasses(per_layer[p.layer].classes, p);
    } else {
      AddToClasses(p.role == Role::kEmbedding ? im.embedding : im.root, p);
    }
    if (p.layer == 0 && RoleGroup(p.role) == std::string("attention")) im.attention_params += static_cast<double>(p.Numel());
  }
  if (!inventory_.params.empty()) {
    const ParamInfo& e = inventory_.params.front();
    im.tied_copy = {e.shape, e.tp_dim, e.routed_expert, GroupIndex(Role::kLmHead), 1};
    im.all_params += e.Numel();
  }
  auto same = [](const LayerKind& a, const LayerKind& b) {
    if (a.moe != b.moe || a.classes.size() != b.classes.size()) return false;
    for (size_t i = 0; i < a.classes.size(); ++i) {
      const auto& x = a.classes[i];
      const auto& y = b.classes[i];
      if (x.shape != y.shape || x.tp_dim != y.tp_dim || x.routed != y.routed || x.group != y.group || x.count != y.count) return false;
    }
    return true;
  };
  im.layer_kind.assign(L, -1);
  for (int64_t l = 0; l < L; ++l) {
    int kind = -1;
    for (size_t k = 0; k < im.kinds.size() && kind < 0; ++k) {
      if (same(im.kinds[k], per_layer[l])) kind = static_cast<int>(k);
    }
    if (kind < 0) {
      kind = static_cast<int>(im.kinds.size());
      im.kinds.push_back(std::move(per_layer[l]));
    }
    im.layer_kind[l] = kind;
    const int which = model_.moe_layers[l] ? 0 : 1;
    if (im.first_kind[which] < 0) im.first_kind[which] = kind;
    if (model_.moe_layers[l]) ++im.num_moe_layers;
  }
  for (auto& kind : im.kinds) {
    for (auto& pc : kind.classes) pc.combo = im.ComboOf(pc.routed, pc.tp_dim);
  }
  for (auto* unit : {&im.embedding, &im.root}) {
    for (auto& pc : *unit) pc.combo = im.ComboOf(pc.routed, pc.tp_dim);
  }
  if (!inventory_.params.empty()) im.tied_copy.combo = im.ComboOf(im.tied_copy.routed, im.tied_copy.tp_dim);
  im.cuts.resize(im.combos.size());
}

// The candidate's training (CandidateTraining), validated and resolved as BuildPlan does, cached.
static LayoutEvaluator::Impl::TrainingEntry& TrainingEntryOf(LayoutEvaluator::Impl& im, const SearchOptions& o, const LayoutCandidate& c) {
  const CandidateSettings& cs = c.settings;
  const LayoutEvaluator::Impl::TrainingKey key{c.dispatcher,
                                               cs.micro_batch_size,
                                               cs.num_microbatches,
                                               cs.grad_accumulation_steps,
                                               cs.vpp,
                                               cs.recompute ? static_cast<int>(*cs.recompute) : -1,
                                               cs.dp_sharding ? static_cast<int>(*cs.dp_sharding) : -1,
                                               cs.overlap_moe_ep_comm ? static_cast<int>(*cs.overlap_moe_ep_comm) : -1};
  auto it = im.trainings.find(key);
  if (it != im.trainings.end()) return it->second;
  LayoutEvaluator::Impl::TrainingEntry e;
  e.t = CandidateTraining(o.training, c);
  try {
    ValidateTraining(e.t, "training.");
    e.bytes = TrainingBytesOf(e.t);
    e.ok = true;
  } catch (const Error& err) {
    e.ok = false;
    e.error = err.what();
  }
  if (!e.t.dp_sharding) e.t.dp_sharding = o.convention == Convention::kMegatron ? DpSharding::kZero1 : DpSharding::kFsdp;
  if (!e.t.num_microbatches) e.t.num_microbatches.reset();  // resolved per pp below (BuildPlan: pp)
  return im.trainings.emplace(key, std::move(e)).first->second;
}

// BuildPlan's run-setting rules (ValidateRunSettings, ValidateEpOverlap, ValidateVppChunks,
// ValidateInterleavedMicrobatches) for the entry at (pp, ep) under the candidate's convention
// (`megatron`), cached: they depend on nothing else of a candidate. Returns the message of the
// rule broken, empty when they hold (a reference into the cache).
static const std::string& RunSettingsError(LayoutEvaluator::Impl::TrainingEntry& e, int64_t pp, int64_t ep, bool megatron,
                                           int64_t num_layers) {
  const auto key = std::make_tuple(pp, ep, megatron);
  auto it = e.run_error.find(key);
  if (it != e.run_error.end()) return it->second;
  std::string error;
  try {
    ValidateRunSettings(e.t.run, static_cast<int>(*e.t.dp_sharding), pp);
    ValidateEpOverlap(e.t, pp, ep);
    ValidateVppChunks(pp, e.t.run.vpp, num_layers);
    // The entry's micro-batch count is part of its key (TrainingKey); unset, it resolves to pp.
    ValidateInterleavedMicrobatches(e.t.run, pp, e.t.num_microbatches.value_or(pp), megatron);
  } catch (const Error& err) {
    error = err.what();
  }
  return e.run_error.emplace(key, std::move(error)).first->second;
}

LayoutEvaluator::~LayoutEvaluator() = default;

int64_t LayoutEvaluator::num_layer_kinds() const {
  return static_cast<int64_t>(impl_->kinds.size());
}

int64_t LayoutEvaluator::num_classes() const {
  size_t n = impl_->embedding.size() + impl_->root.size();
  for (const auto& k : impl_->kinds) n += k.classes.size();
  return static_cast<int64_t>(n);
}

void LayoutEvaluator::ExpectCandidates(const std::vector<LayoutCandidate>& candidates) {
  const TrainingConfig& t = options_.training;
  const std::vector<Dispatcher>& pinned = options_.dispatchers;
  const bool deepep = options_.include_deepep || std::find(pinned.begin(), pinned.end(), Dispatcher::kDeepEp) != pinned.end();
  std::vector<int64_t> tokens;
  std::vector<FlexBlockNeed> block_needs;
  int64_t max_ep = 1;
  std::set<std::pair<int64_t, int64_t>> flex_groups;  // (ep, etp) of the candidates deepep may dispatch
  for (const auto& c : candidates) {
    const auto& d = c.dims;
    const int64_t mbs = c.settings.micro_batch_size > 0 ? c.settings.micro_batch_size : t.micro_batch_size;
    if (mbs < 1 || t.seq_len < 1 || mbs > (int64_t{1} << 31) / t.seq_len) continue;
    const int64_t seq_tokens = mbs * t.seq_len;
    if (d.cp < 1 || d.tp < 1) continue;
    tokens.push_back(RoutedTokens((seq_tokens + d.cp - 1) / d.cp, d.tp, d.ep, d.etp, d.convention));
    // The deepep counts of rank 0's EP group (Evaluate's ep_group), read from block counts.
    if (deepep && d.ep > 1 && d.etp >= 1 && model_.moe.num_experts % d.ep == 0) flex_groups.insert({d.ep, d.etp});
    if (d.ep >= 1 && model_.moe.num_experts % d.ep == 0) max_ep = std::max(max_ep, d.ep);
  }
  for (const auto& [ep, etp] : flex_groups) {
    std::vector<int64_t> ep_group(static_cast<size_t>(ep));
    for (int64_t i = 0; i < ep; ++i) ep_group[static_cast<size_t>(i)] = i * etp;
    for (const FlexBlockNeed& need : FlexBlockSizes(model_.moe.num_experts, MakeFlexCounts(ep_group, impl_->machine.gpus_per_node))) {
      block_needs.push_back(need);
    }
  }
  std::sort(tokens.begin(), tokens.end());
  tokens.erase(std::unique(tokens.begin(), tokens.end()), tokens.end());
  cache_->ExpectTokenCounts(tokens);
  if (flex_groups.empty()) return;
  // Block size 1 for every rank of every EP size: the routing samples' per-expert counts come from
  // the same draws (SearchEvalCache::Routing).
  block_needs.push_back({1, max_ep});
  cache_->ExpectFlexGroups(tokens, block_needs);
}

int64_t LayoutEvaluator::flex_from_blocks() const {
  return cache_->flex_from_blocks();
}

int64_t LayoutEvaluator::routing_from_blocks() const {
  return cache_->routing_from_blocks();
}

LayoutEvaluation LayoutEvaluator::HandToReference(const LayoutCandidate& c, bool simulate_over_budget, CostBreakdown* detail) {
  ++handed_to_reference_;
  return EvaluateReference(c, simulate_over_budget, detail);
}

CostBreakdown LayoutEvaluator::Breakdown(const LayoutCandidate& c) {
  CostBreakdown cost;
  const LayoutEvaluation e = Evaluate(c, true, &cost);
  if (!e.simulated) throw Error("internal: Breakdown of a layout the plan path rejects");
  return cost;
}

LayoutEvaluation LayoutEvaluator::EvaluateReference(const LayoutCandidate& c, bool simulate_over_budget, CostBreakdown* detail) {
  try {
    return EvaluatePlanPath(c, simulate_over_budget, detail);
  } catch (const OverflowError&) {
    LayoutEvaluation r;
    r.status = LayoutEvaluation::Status::kInvalid;
    r.reason = kOverflowReason;
    return r;
  }
}

LayoutEvaluation LayoutEvaluator::EvaluatePlanPath(const LayoutCandidate& c, bool simulate_over_budget, CostBreakdown* detail) {
  LayoutEvaluation r;
  TrainingConfig t = CandidateTraining(options_.training, c);
  Plan plan;
  try {
    plan = BuildPlan(model_, inventory_, c.dims, t, impl_->machine);
  } catch (const OverflowError&) {
    throw;  // EvaluateReference's one reason
  } catch (const Error& e) {
    r.status = LayoutEvaluation::Status::kInvalid;
    r.reason = e.what();
    return r;
  }
  r.dims = plan.dims;
  // The routing sample of this layout (SampleRouting, as simulate draws it), looked up or drawn
  // on first use; the cache holds one per key.
  const RoutingResult* sampled = nullptr;
  auto sample = [&]() -> const RoutingResult& {
    if (sampled) return *sampled;
    const int64_t routed_tokens = ComputeWorkload(plan).routed_tokens, oep = DispatchOep(plan);
    const auto key = std::make_tuple(plan.dims.ep, routed_tokens, oep);
    auto it = reference_routing_cache_.find(key);
    if (it == reference_routing_cache_.end()) {
      it = reference_routing_cache_.emplace(key, SampleRouting(cache_->model(), plan.dims.ep, routed_tokens, oep)).first;
    }
    sampled = &it->second;
    return *sampled;
  };
  // With --routing, the sample sizes the received rows (plan_command.cc: check and simulate).
  if (options_.routing_sizes_memory) plan.training.imbalance = AnalyzeReceivedRows(cache_->model(), sample(), std::nullopt).imbalance;
  const MemoryReport memory = ComputeMemory(plan);
  r.peak_bytes = memory.worst_peak_bytes;
  for (const auto& st : memory.stages) {
    r.static_peak_bytes = std::max(r.static_peak_bytes, st.worst.params_bytes + st.worst.grads_bytes + st.worst.optimizer_bytes);
  }
  const bool over = static_cast<double>(memory.worst_peak_bytes) > budget_bytes_;
  r.status = over ? LayoutEvaluation::Status::kOverBudget : LayoutEvaluation::Status::kRanked;
  if (over && !simulate_over_budget) return r;
  const RoutingResult& routing = sample();
  // deepep: the per-token node counts of this layout's EP group (its members' nodes), not cached.
  std::optional<RoutingResult> flex;
  if (plan.dims.ep > 1 && plan.training.dispatcher == Dispatcher::kDeepEp) {
    flex = routing;
    AddFlexCounts(cache_->model(), plan.meshes.sparse.GroupOf(0, plan.meshes.sparse.AxisIndex("ep")), plan.machine.gpus_per_node, *flex);
  }
  const CostBreakdown cost = SimulateStep(plan, options_.cluster, flex ? *flex : routing, options_.compute_model);
  if (detail) *detail = cost;
  r.simulated = true;
  r.step_time_us = cost.step_time_us;
  r.tokens_per_s_per_gpu = cost.tokens_per_s_per_gpu;
  r.mfu = cost.mfu;
  r.dominant_phase = cost.dominant_phase;
  return r;
}

// The rules Evaluate checks before memory, in BuildPlan's order: ValidateTraining (the entry), the
// degrees (DimsFor), the run settings and the deredundency oep. Returns the first broken rule's
// message (in the evaluator's caches, valid until its next call), null when they hold; sets
// *entry and *dims for the caller.
static const std::string* PreMemoryRuleBroken(LayoutEvaluator::Impl& im, const SearchOptions& o, const ModelSpec& m,
                                              const LayoutCandidate& c, LayoutEvaluator::Impl::TrainingEntry** entry,
                                              const LayoutEvaluator::Impl::DimsCheck** dims) {
  LayoutEvaluator::Impl::SettingSlot* slot = im.SlotFor(c);
  if (slot != nullptr && slot->entry != nullptr && !SameSettings(slot->settings, c.settings)) *slot = {};  // another search's index
  if (slot != nullptr && slot->entry != nullptr) {
    *entry = slot->entry;
    if (!slot->entry_ok) return &slot->entry->error;
  } else {
    *entry = &TrainingEntryOf(im, o, c);
    if (slot != nullptr) {
      slot->entry = *entry;
      slot->settings = c.settings;
      slot->entry_ok = (*entry)->ok;
    }
    if (!(*entry)->ok) return &(*entry)->error;
  }
  *dims = &im.DimsFor(c.dims, m, o.training.seq_len);
  if (!(*dims)->ok) return &(*dims)->error;
  const ParallelDims& d = (*dims)->d;
  if (slot != nullptr && slot->run_error != nullptr) {
    if (!slot->run_ok) return slot->run_error;
    if (slot->oep_ok) return nullptr;
  } else {
    const std::string& run_error = RunSettingsError(**entry, d.pp, d.ep, d.convention == Convention::kMegatron, m.num_hidden_layers);
    if (slot != nullptr) {
      slot->run_error = &run_error;
      slot->run_ok = run_error.empty();
    }
    if (!run_error.empty()) return &run_error;
  }
  const TrainingConfig& t = (*entry)->t;
  const bool oep_broken = t.dispatcher == Dispatcher::kDeredundency && t.oep && d.ep % *t.oep != 0;
  if (slot != nullptr) slot->oep_ok = !oep_broken;
  if (oep_broken) {
    im.oep_error = DeredundencyOepError(t, d.ep);
    return &im.oep_error;
  }
  return nullptr;
}

bool LayoutEvaluator::SettingsHold(const LayoutCandidate& c, std::string* reason) {
  Impl::TrainingEntry* entry = nullptr;
  const Impl::DimsCheck* dims = nullptr;
  const std::string* error = PreMemoryRuleBroken(*impl_, options_, model_, c, &entry, &dims);
  if (error == nullptr) return true;
  if (reason) *reason = *error;
  return false;
}

// ComputeMemory's worst peak of a candidate of group `g` (its settings in `w` and `t`): per stage,
// the group's static bytes, the activations and the communication buffers (memory.h rules).
// Sets *fallback when a figure passes int64.
static Wide WorstPeak(LayoutEvaluator::Impl& im, const ModelSpec& m, const LayoutEvaluator::GroupStatics& g, const Workload& w,
                      const ParallelDims& d, const TrainingConfig& t, bool* fallback) {
  auto fits = [&](Wide v) {
    if (v > kInt64Max) *fallback = true;
    return v;
  };
  // Activations of one layer of each kind present (the last candidate's when its workload and
  // recompute set were the same: its vpp and EP overlap variants).
  const RecomputeSet recompute = RecomputeSetOf(t);
  LayoutEvaluator::Impl::ActivationMemo& memo = im.activation_memo;
  if (!(memo.filled && SameWorkload(memo.w, w) && SameRecomputeSet(memo.recompute, recompute))) {
    LayerActivationBytes act_layer[2];  // [0] MoE, [1] dense
    for (int which = 0; which < 2; ++which) {
      if (im.first_kind[which] >= 0) act_layer[which] = LayerActivations(m, recompute, w, which == 0);
    }
    memo = {true, w, recompute, ActivationTable(act_layer[0], act_layer[1])};
  }
  const LayerActivationTable& act_table = memo.table;
  const int64_t h = m.hidden_size;
  const Wide layer_input = static_cast<Wide>(Ceil(w.tokens, w.tp_shards)) * h * w.act_bytes;
  const Wide logits = static_cast<Wide>(w.tokens) * Ceil(m.vocab_size, d.tp) * 4;
  const int64_t oep = DispatchOep(t, im.machine, d.ep);
  Wide worst_peak = -1;
  // The most micro-batches in flight on a stage of each class (GroupStatics::class_of).
  const size_t classes = g.class_first.size();
  constexpr size_t kInline = 64;
  int64_t inline_flight[kInline];
  std::vector<int64_t> heap_flight;
  int64_t* const in_flight = classes > kInline ? (heap_flight.resize(classes), heap_flight.data()) : inline_flight;
  std::fill(in_flight, in_flight + classes, int64_t{0});
  for (int64_t s = 0; s < d.pp; ++s) {
    int64_t& most = in_flight[static_cast<size_t>(g.class_of[static_cast<size_t>(s)])];
    most = std::max(most, InFlightMicrobatches(d, t, s));
  }
  // The buffers of a stage read only its largest FSDP unit, whether it has MoE layers and its
  // model-parallel elements: interior stages repeat the previous stage's.
  Wide buf = 0, buf_largest = -1, buf_mp = -1;
  bool buf_moe = false;
  for (size_t c = 0; c < classes; ++c) {
    const int64_t s = g.class_first[c];
    const StageStatics& st = g.stages[static_cast<size_t>(s)];
    StageLayers layers;
    layers.moe_layers = g.split->moe_layers[s];
    layers.dense_layers = g.split->dense_layers[s];
    layers.first_stage = s == 0;
    layers.last_stage = s == d.pp - 1;
    layers.in_flight = in_flight[c];
    const Wide act = StageActivationsTotal(act_table, layers, t.recompute, layer_input, logits);
    if (!(st.largest == buf_largest && st.mp == buf_mp && (layers.moe_layers > 0) == buf_moe)) {
      buf_largest = st.largest, buf_mp = st.mp, buf_moe = layers.moe_layers > 0;
      buf = StageBuffersTotal(st.largest, buf_moe, w, d, t, im.machine, g.bytes, oep, h, st.mp);
    }
    worst_peak = std::max(worst_peak, fits(fits(st.stat) + fits(act) + fits(buf)));
  }
  return worst_peak;
}

// Whether the communication volumes of the reference's ComputeComm (every entry, not only those
// the cost model uses) could come near its overflow checks: true unless a generous bound of their
// sum stays below 4e18 (then the reference path takes the candidate).
static bool CommVolumesNearLimit(const LayoutEvaluator::Impl& im, const ModelSpec& m, const Workload& w, const ParallelDims& d,
                                 const TrainingConfig& t) {
  const int64_t oep = DispatchOep(t, im.machine, d.ep);
  const double M = static_cast<double>(t.num_microbatches.value_or(d.pp)) * static_cast<double>(t.run.grad_accumulation_steps);
  const double L = static_cast<double>(m.num_hidden_layers), T = static_cast<double>(w.tokens);
  const double H = static_cast<double>(m.hidden_size), P8 = 8.0 * static_cast<double>(im.all_params);
  const auto& a = m.attention;
  const double kv = static_cast<double>(a.num_attention_heads) *
                        static_cast<double>(a.qk_nope_head_dim + a.qk_rope_head_dim + a.v_head_dim + a.head_dim) +
                    2.0 * static_cast<double>(a.num_key_value_heads) * static_cast<double>(a.head_dim);
  const double rows = static_cast<double>(w.mean_received_rows) * H * 8.0;
  const double bound = 2.0 * (3.0 * M * P8 + 10.0 * P8 + 8.0 * L * M * T * H * 8.0 + 3.0 * L * d.cp * M * T * kv * 8.0 +
                              L * M * (4.0 * rows * (oep + 1) + 2.0 * 8.0 * m.moe.num_experts * oep) + 2.0 * M * T * H * 8.0);
  return !(bound < 4.0e18);
}

LayoutEvaluation LayoutEvaluator::Evaluate(const LayoutCandidate& c, bool simulate_over_budget, CostBreakdown* detail) {
  Impl& im = *impl_;
  const ModelSpec& m = model_;
  LayoutEvaluation r;
  r.status = LayoutEvaluation::Status::kInvalid;

  // --- Validation (BuildPlan's rules, no messages).
  // --fp8-param-gather splits each FSDP unit by precision: SimulateStep's path (opt-in).
  if (options_.training.fp8_param_gather) return HandToReference(c, simulate_over_budget, detail);
  // torchtitan's per-layer selective checkpointing counts layers per stage: SimulateStep's path (opt-in).
  if (!options_.training.selective_ac_option.empty()) return HandToReference(c, simulate_over_budget, detail);
  // Each broken rule's message goes to r.reason (the search counts candidates per reason).
  auto invalid = [&r](const std::string& reason) -> LayoutEvaluation& {
    r.reason = reason;
    return r;
  };
  Impl::TrainingEntry* entry_ptr = nullptr;
  const Impl::DimsCheck* dims = nullptr;
  if (const std::string* broken = PreMemoryRuleBroken(im, options_, m, c, &entry_ptr, &dims)) return invalid(*broken);
  Impl::TrainingEntry& entry = *entry_ptr;
  const ParallelDims& d = dims->d;
  const GroupStatics& g = im.StaticsFor(m, options_.cluster, d, entry.t, entry.bytes);
  if (!g.valid) return invalid(g.error);
  r.dims = d;
  // With --routing, the candidate's own routing sample sizes its received rows (as simulate does).
  // (Only then a copy: a TrainingConfig holds strings.)
  std::optional<TrainingConfig> sized;
  if (options_.routing_sizes_memory) {
    sized = entry.t;
    const int64_t routed_tokens = ComputeWorkload(m, d, *sized).routed_tokens;
    sized->imbalance = cache_->SampleImbalance(d.ep, routed_tokens, DispatchOep(*sized, im.machine, d.ep));
  }
  const TrainingConfig& t = sized ? *sized : entry.t;

  // --- Memory (ComputeMemory's worst peak): the group's static bytes, then the activations and
  // communication buffers of this candidate's settings.
  const Workload w = ComputeWorkload(m, d, t);
  bool fallback = g.overflow;
  const Wide worst_peak = fallback ? 0 : WorstPeak(im, m, g, w, d, t, &fallback);
  if (!fallback) fallback = CommVolumesNearLimit(im, m, w, d, t);
  if (fallback) {
    ++fallbacks_;
    return HandToReference(c, simulate_over_budget, detail);
  }
  r.peak_bytes = static_cast<int64_t>(worst_peak);
  r.static_peak_bytes = static_cast<int64_t>(g.static_worst);
  const bool over = static_cast<double>(r.peak_bytes) > budget_bytes_;
  r.status = over ? LayoutEvaluation::Status::kOverBudget : LayoutEvaluation::Status::kRanked;
  if (over && !simulate_over_budget) return r;

  // --- The cost model (what SimulateStep gathers from a plan).
  StepInputs in;
  if (!FillStepInputs(g, w, d, t, &in)) {
    ++fallbacks_;
    return HandToReference(c, simulate_over_budget, detail);
  }
  CostBreakdown cost = SimulateStepFromInputs(m, inventory_.totals, d, t, options_.cluster, in, options_.compute_model, detail != nullptr);
  r.simulated = true;
  r.step_time_us = cost.step_time_us;
  r.tokens_per_s_per_gpu = cost.tokens_per_s_per_gpu;
  r.mfu = cost.mfu;
  r.dominant_phase = cost.dominant_phase;
  if (detail) *detail = std::move(cost);
  return r;
}

bool LayoutEvaluator::FillStepInputs(const GroupStatics& g, const Workload& w, const ParallelDims& d, const TrainingConfig& t,
                                     StepInputs* out) {
  const Impl& im = *impl_;
  StepInputs& in = *out;
  // Rank 0's group {0, s, ..., (n-1)s}: spans nodes when its last member is on another node.
  const int64_t domain = NvlinkDomainGpus(options_.cluster);
  auto strided = [&](int64_t n, int64_t stride) {
    return CollectiveGroup{n, (n - 1) * stride / domain > 0, MembersPerDomainStrided(n, stride, domain)};
  };
  const bool megatron = d.convention == Convention::kMegatron;
  in.workload = w;
  in.kernel_memo = kernel_memo_.get();
  in.attention_params = im.attention_params;
  in.tp_group = strided(d.tp, 1);
  const int64_t dense_dp_n = (megatron ? d.dp_replicate * d.dp_shard : d.dp_shard) * d.cp;
  const int64_t sparse_dp_n = megatron ? d.edp() : d.efsdp;
  in.dense_dp_group = strided(dense_dp_n, d.tp);
  in.sparse_dp_group = strided(sparse_dp_n, d.ep * d.etp);
  for (int which = 0; which < 2; ++which) {
    if (im.first_kind[which] < 0) continue;
    const UnitSums& u = (*g.kind_sums)[static_cast<size_t>(im.first_kind[which])];
    if (u.mp[0] >= kExactDouble || u.mp[1] >= kExactDouble) return false;
    in.fsdp_layer[which] = {true, static_cast<double>(static_cast<int64_t>(u.mp[0])), static_cast<double>(static_cast<int64_t>(u.mp[1]))};
  }
  in.moe_phases = &MoePhasesOf(w, d, t);
  in.num_moe_layers = im.num_moe_layers;
  in.layer_stage = &g.split->layer_stage;
  in.stage_runs = &g.split->runs;
  in.dp_step_comm_us = g.dp_step_comm_us;
  in.dp_step_param_gather_us = g.dp_step_param_gather_us;
  in.static_bytes_rank0 = static_cast<int64_t>(g.static_rank0);
  return true;
}

const MoePhaseTimes& LayoutEvaluator::MoePhasesOf(const Workload& w, const ParallelDims& d, const TrainingConfig& t) {
  // Routing-dependent MoE phases, cached: they depend on the routing sample (ep, T_r, oep), the
  // EP group of rank 0 ({0, etp, 2 etp, ...}: the ep axis has stride etp), F / expert TP and the
  // dispatcher (with deepep, on the per-token node counts of that group).
  const ModelSpec& m = model_;
  const int64_t oep = DispatchOep(t, impl_->machine, d.ep);
  const bool deredundency = d.ep > 1 && t.dispatcher == Dispatcher::kDeredundency;
  const SearchEvalCache::MoeKey key{
      d.ep, w.routed_tokens, oep, d.etp, w.expert_f_local, d.ep > 1 ? t.dispatcher : Dispatcher::kAllToAll, t.fp8_dispatch};
  const MoePhaseTimes*& seen = impl_->moe_seen[key];
  if (seen) return *seen;
  seen = &cache_->MoePhases(key, [&] {
    const auto start = std::chrono::steady_clock::now();
    std::vector<int64_t> ep_group(d.ep);
    for (int64_t i = 0; i < d.ep; ++i) ep_group[i] = i * d.etp;
    const bool flex = d.ep > 1 && t.dispatcher == Dispatcher::kDeepEp;
    const FlexRoutingResult* flex_routing = flex ? &cache_->FlexRouting(ep_group, impl_->machine.gpus_per_node, w.routed_tokens) : nullptr;
    const RoutingResult& routing = flex ? *flex_routing->routing : cache_->Routing(d.ep, w.routed_tokens, oep);
    // The shape as SimulateStep forms it (MoePhaseShapeOf), summed in integers where exact.
    MoePhaseShape shape = MoePhaseShapeOf(m, w, t, d.ep);
    shape.integer_sums = true;
    MoePhaseTimes phases =
        SimulateMoePhases(routing, ep_group, shape, options_.cluster, options_.compute_model, flex ? &flex_routing->layers : nullptr);
    cache_fill_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return phases;
  });
  return *seen;
}

}  // namespace dockyard
