// Private to planner/search's `search` library (not in its hdrs): the parameter classes, layer
// splits, group figures and caches of LayoutEvaluator (layout_eval.h), shared by its sources:
//  - layout_eval.cc: construction, Evaluate, the plan path;
//  - layout_eval_rules.cc: the rules Evaluate checks before memory (training entries, degrees,
//    run settings, the deredundency oep), in BuildPlan's words;
//  - layout_eval_memory.cc: the class sums, layer splits, group statics (static bytes, FSDP
//    units, step-end collectives) and ComputeMemory's worst peak;
//  - layout_eval_step.cc: the cost model's step inputs, the MoE-phase cache and the overflow guard
//    of the communication volumes.
// Every figure is in the units of the plan path's rule it comes from: elements, bytes, us.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "planner/accounting/memory.h"
#include "planner/accounting/workload.h"
#include "planner/layout/parallel_dims.h"
#include "planner/layout/placement.h"
#include "planner/layout/plan.h"
#include "planner/model/recompute.h"
#include "planner/model/seq_len.h"
#include "planner/search/layout_eval.h"
#include "planner/cost/cost.h"
#include "planner/cost/moe_phases.h"

namespace dockyard {
namespace layout_eval_detail {

using Wide = WideInt;  // memory.h: the 128-bit sums of the memory rules
constexpr Wide kInt64Max = static_cast<Wide>(INT64_MAX);
constexpr Wide kExactDouble = static_cast<Wide>(1) << 53;  // integers below are exact as doubles

// RoleGroup names (inventory.h), indexed.
constexpr int kNumGroups = 8;
inline constexpr const char* kGroupNames[kNumGroups] = {"embedding", "attention",      "norm",           "dense_mlp",
                                                        "router",    "routed_experts", "shared_experts", "lm_head"};
// The index of `role`'s group in kGroupNames. Throws dockyard::Error for a group it does not list.
int GroupIndex(Role role);

inline int64_t Ceil(int64_t a, int64_t b) {
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
  int combo = -1;         // index of its (routed, tp_dim) in LayoutEvaluator::Impl::combos
  std::string fqn;        // its first parameter's (the uneven-FSDP message names it)
  bool fp8_gemm = false;  // its group's weights run in FP8 GEMMs (precision.h Fp8GemmGroup)

  bool SameKind(const ParamInfo& p, int g) const {
    return shape == p.shape && tp_dim == p.tp_dim && routed == p.routed_expert && group == g;
  }
};

// Adds `p` to `classes`, merging it into an equal class.
void AddToClasses(std::vector<ParamClass>& classes, const ParamInfo& p);

// A unit's elements on the first rank of a stage, for one candidate.
struct UnitSums {
  Wide local[kNumGroups][2] = {};  // placed elements by role group and mesh (0 dense, 1 sparse)
  Wide mp[2] = {};                 // model-parallel elements by mesh
  // Of `mp`, the weights of FP8 GEMMs (precision.h Fp8GemmGroup): what --fp8-param-gather
  // all-gathers in FP8 (comm.h Fp8ParamGather, cost.h StepInputs::FsdpLayer).
  Wide mp_fp8[2] = {};

  // Adds `c.count` parameters of class `c` under `cuts` (the placement policy's cuts for the
  // candidate, ShardCutsOf): `local` after all cuts (its placement), `mp` after model-parallel
  // cuts only (ModelParallelNumel), both on the first rank (placement.h FirstChunkNumel).
  void Add(const ParamClass& c, const ShardCuts& cuts) {
    const FirstChunkElems n = FirstChunkNumel(c.shape, cuts);
    const int sparse = cuts.sparse_mesh ? 1 : 0;
    local[c.group][sparse] += static_cast<Wide>(n.local) * c.count;
    mp[sparse] += static_cast<Wide>(n.model_parallel) * c.count;
    if (c.fp8_gemm) mp_fp8[sparse] += static_cast<Wide>(n.model_parallel) * c.count;
  }
  void AddScaled(const UnitSums& u, int64_t times) {
    if (times == 0) return;
    for (int g = 0; g < kNumGroups; ++g) {
      local[g][0] += u.local[g][0] * times;
      local[g][1] += u.local[g][1] * times;
    }
    for (int k = 0; k < 2; ++k) {
      mp[k] += u.mp[k] * times;
      mp_fp8[k] += u.mp_fp8[k] * times;
    }
  }
};

// One kind of layer by its parameter classes (the layers of identical tensors share one).
struct LayerClasses {
  std::vector<ParamClass> classes;
  bool moe = false;
};

// The layer split of one pp: stage of each layer and per stage the layers of each kind.
struct Split {
  bool valid = true;
  std::string error;  // why not valid (ResolvePipelineStages' message)
  std::vector<int64_t> layer_stage;
  std::vector<int64_t> layer_chunk;               // [num_hidden_layers]: model chunk on its stage (vpp > 1; else empty)
  std::vector<std::vector<int64_t>> kind_count;   // [stage][kind]
  std::vector<int64_t> moe_layers, dense_layers;  // [stage]
  StageLayerRuns runs;                            // of layer_stage (cost.h StageLayerRunsOf; StepInputs::stage_runs)
  // torchtitan's per-layer selective checkpointing at the evaluator's frequency (Impl::sac_every
  // > 0; recompute.h LayerSacCheckpointed over layer_stage), as ComputeMemory counts it per stage
  // (memory.h StageLayers): the checkpointed MoE and dense layers and whether the first of them is
  // an MoE layer. Zeros without it.
  std::vector<int64_t> checkpointed_moe, checkpointed_dense;  // [stage]
  std::vector<char> checkpointed_moe_first;                   // [stage]
  // The MoE and dense layers of each model chunk of each stage when the split gives each layer its
  // chunk (ResolvePipelineStages' layer_chunk: an even split Megatron runs as a layout), the MTP
  // modules in the last stage's last chunk, as ChunkCopiesOfStage counts them; empty otherwise.
  std::vector<std::vector<int64_t>> chunk_moe, chunk_dense;  // [stage][chunk]
};

// A hash of a tuple of integers and enums (the evaluator's cache keys).
struct TupleHash {
  template <class... T>
  size_t operator()(const std::tuple<T...>& t) const {
    size_t h = 0;
    std::apply([&h](const auto&... x) { ((h = h * 1000003u ^ static_cast<size_t>(x)), ...); }, t);
    return h;
  }
};

// Whether two candidates have the same degrees (every field ParallelDims is built from).
inline bool SameDims(const ParallelDimsOptions& a, const ParallelDimsOptions& b) {
  return a.world_size == b.world_size && a.dp_replicate == b.dp_replicate && a.dp_shard == b.dp_shard && a.cp == b.cp && a.tp == b.tp &&
         a.ep == b.ep && a.etp == b.etp && a.pp == b.pp && a.convention == b.convention;
}

// Field-by-field equality of the memo keys (the static_asserts flag a field added to either
// struct, which these must then compare).
inline bool SameWorkload(const Workload& a, const Workload& b) {
  // (The three bools and `saved` share the last 8 bytes: a one-byte field added there passes the
  // assert unnoticed.)
  static_assert(sizeof(Workload) == 8 * sizeof(int64_t) + 8, "a Workload field was added: compare it here");
  return std::tie(a.tokens, a.routed_tokens, a.dispatch_tokens, a.received_rows, a.mean_received_rows, a.act_bytes, a.tp_shards,
                  a.expert_f_local, a.fp8_saved_inputs, a.fp8_scaling,
                  a.saved, a.te_cross_entropy) == std::tie(b.tokens, b.routed_tokens, b.dispatch_tokens, b.received_rows,
                                                           b.mean_received_rows, b.act_bytes, b.tp_shards, b.expert_f_local,
                                                           b.fp8_saved_inputs, b.fp8_scaling, b.saved, b.te_cross_entropy);
}
inline bool SameRecomputeSet(const RecomputeSet& a, const RecomputeSet& b) {
  static_assert(sizeof(RecomputeSet) == 9, "a RecomputeSet field was added: compare it here");
  return std::tie(a.layernorm, a.core_attn, a.moe_act, a.mlp_act, a.shared_act, a.moe, a.mla_up_proj, a.shared_experts, a.mlp) ==
         std::tie(b.layernorm, b.core_attn, b.moe_act, b.mlp_act, b.shared_act, b.moe, b.mla_up_proj, b.shared_experts, b.mlp);
}

inline bool SameSettings(const CandidateSettings& a, const CandidateSettings& b) {
  return a.micro_batch_size == b.micro_batch_size && a.num_microbatches == b.num_microbatches &&
         a.grad_accumulation_steps == b.grad_accumulation_steps && a.vpp == b.vpp && a.recompute == b.recompute &&
         a.dp_sharding == b.dp_sharding && a.overlap_moe_ep_comm == b.overlap_moe_ep_comm;
}

// One stage's figures on its first rank that depend only on the group (below).
struct StageStatics {
  Wide stat = 0;     // params + grads + optimizer (+ FP8 weight copies), bytes (memory.h GroupStaticBytesOf)
  Wide mp = 0;       // model-parallel elements, dense + sparse (StageBuffers' last argument)
  Wide largest = 0;  // the largest FSDP unit (FsdpUnitOf), elements; 0 without FSDP
};

// The precision settings a group's static figures read besides its dp sharding and dtypes.
struct GroupPrecision {
  double fp8_copy = 0;            // FP8 weight copy bytes per element (memory.h Fp8WeightCopyPerElement); 0 = none kept
  bool fp8_params = false;        // the FP8 GEMM weights are the parameters (workload.h Fp8ModelParams)
  bool fp8_param_gather = false;  // --fp8-param-gather: the FP8 GEMM weights are all-gathered in FP8
  double fp8_gather_bytes = 0;    // their bytes per element then (precision.h Fp8ParamGatherBytesPerElement), else 0
  bool operator==(const GroupPrecision& o) const {
    return fp8_copy == o.fp8_copy && fp8_params == o.fp8_params && fp8_param_gather == o.fp8_param_gather &&
           fp8_gather_bytes == o.fp8_gather_bytes;
  }
};

}  // namespace layout_eval_detail

// What a candidate's memory and step-end collectives read that depends only on its degrees, dp
// sharding, dtypes and precision -- not on micro-batch size, recompute, vpp, EP overlap or the
// dispatcher.
struct LayoutEvaluator::GroupStatics {
  using Wide = layout_eval_detail::Wide;
  // Key: the degrees are last_dims' (DimsFor drops the group when they change), then these.
  bool filled = false;
  DpSharding strategy = DpSharding::kFsdp;
  TrainingBytes bytes;
  layout_eval_detail::GroupPrecision precision;
  // Figures.
  bool valid = false;     // the layer split exists and FSDP2 can shard every class
  std::string error;      // why not valid: the split's or UnevenFsdpMessage
  bool overflow = false;  // a static figure beyond int64: the reference path takes the candidate
  const layout_eval_detail::Split* split = nullptr;
  const std::vector<layout_eval_detail::UnitSums>* kind_sums = nullptr;
  const layout_eval_detail::UnitSums* embedding = nullptr;
  layout_eval_detail::UnitSums root;  // the root unit, with the last stage's tied lm_head copy (tied embeddings, pp > 1)
  std::vector<layout_eval_detail::StageStatics> stages;
  // Stages whose figures other than the micro-batches in flight are the same (statics, layers,
  // checkpointed layers, first / last): class_of[s] is stage s's class, class_first[c] the first
  // stage of class c. A class's peak is its stage with the most micro-batches in flight
  // (activations grow with them; nothing else differs).
  std::vector<int32_t> class_of;
  std::vector<int64_t> class_first;
  // Rank 0's (stage 0's) model-parallel elements: dense0 / sparse0 per mesh, fp8_dense0 /
  // fp8_sparse0 their FP8 GEMM weights; `tied` the embedding's when the embedding group all-reduces
  // it (comm.h EmbeddingGroupAllReduces: tied embeddings or MTP, megatron, pp > 1).
  Wide static_worst = 0, grads0 = 0, optimizer_elems0 = 0, dense0 = 0, sparse0 = 0, fp8_dense0 = 0, fp8_sparse0 = 0, tied = 0;
  int64_t expert_bias0 = 0;  // comm.h RouterExpertBiasElems of rank 0's stage
  double dp_step_comm_us = 0;                                    // rank 0's step-end data-parallel collectives
  double param_gather_dense_us = 0, param_gather_sparse_us = 0;  // its parameter all-gather by mesh (StepInputs)
  double grad_reduce_dense_us = 0, grad_reduce_sparse_us = 0;    // the gradient reduce by mesh (StepInputs)

  bool SameKey(DpSharding s, const TrainingBytes& b, const layout_eval_detail::GroupPrecision& p, const layout_eval_detail::Split* sp) const {
    return filled && strategy == s && bytes.param == b.param && bytes.grad == b.grad && bytes.moments == b.moments &&
           bytes.master == b.master && bytes.muon_momentum == b.muon_momentum && precision == p && split == sp;
  }
};

struct LayoutEvaluator::Impl {
  using Wide = layout_eval_detail::Wide;
  using ParamClass = layout_eval_detail::ParamClass;
  using UnitSums = layout_eval_detail::UnitSums;
  using LayerClasses = layout_eval_detail::LayerClasses;
  using Split = layout_eval_detail::Split;
  using TupleHash = layout_eval_detail::TupleHash;

  Machine machine;  // the plans' node size and budget (search.h SearchPlanMachine)
  std::vector<LayerClasses> kinds;
  std::vector<int> layer_kind;        // [num_hidden_layers]
  std::vector<ParamClass> embedding;  // unit of the input embedding, stage 0
  std::vector<ParamClass> root;       // final norm, lm_head (+ bias), stage pp - 1
  ParamClass tied_copy;               // the last stage's lm_head copy (tied embeddings, pp > 1)
  int first_kind[2] = {-1, -1};       // kind of the first MoE [0] / dense [1] layer
  double attention_params = 0;
  int64_t num_moe_layers = 0;
  Wide all_params = 0;  // every inventory element (+ a tied copy), for overflow guards
  // torchtitan's per-layer selective checkpointing frequency of the options' selective_ac_option
  // (recompute.h LayerSacEvery under recompute selective; 0: none or "op"): the splits count the
  // checkpointed layers at it. Set by the constructor.
  int64_t sac_every = 0;
  // The verdict of BuildPlan's rules after ValidateTraining on a training entry at (pp, ep,
  // convention) (layout_eval_rules.cc RunSettingsVerdict), in two parts around the one rule that
  // reads cp (ValidateSeqLenSplits, DimsCheck::cp_ok): each the first broken rule's message, empty
  // when its rules hold.
  struct RunVerdict {
    std::string before_cp, after_cp;
  };
  // Training settings per (dispatcher, candidate settings), validated and resolved as BuildPlan
  // does (ValidateTraining; dp_sharding's convention default), with their dtype sizes.
  struct TrainingEntry {
    bool ok = false;
    std::string error;  // why not ok (ValidateTraining's message)
    TrainingConfig t;
    TrainingBytes bytes;
    // Of `t` (once ok): per-layer selective checkpointing's frequency (LayerSacEvery; 0 = off) and
    // whether per-op checkpointing is on (OpSac).
    int64_t sac_every = 0;
    bool op_sac = false;
    std::unordered_map<std::tuple<int64_t, int64_t, int64_t, bool>, RunVerdict, TupleHash> run_verdict;  // per (pp, ep, etp, megatron)
  };
  using TrainingKey = std::tuple<Dispatcher, int64_t, int64_t, int64_t, int64_t, int, int, int>;
  // Hashed, not ordered: looked up once per candidate (references stay valid as it grows).
  std::unordered_map<TrainingKey, TrainingEntry, TupleHash> trainings;
  std::map<std::pair<int64_t, int64_t>, Split> splits;  // per (pp, vpp where the split depends on it, else 0)
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
    std::string error;  // why not ok (TryBuildParallelDims, CheckDimsForModel)
    ParallelDims d;
    // Whether the sequence splits over cp (seq_len.h SeqLenSplits; BuildPlan checks it
    // later than the degrees: between the two parts of a RunVerdict), and why not.
    bool cp_ok = false;
    std::string cp_error;
  } last_dims;
  // The figures (GroupStatics) of the last degrees' groups, one per (dp sharding, dtypes,
  // precision): the search visits every setting of a group in a row, and the groups of one set of
  // degrees (dispatchers x dp shardings) one after the other, alternating the dp sharding.
  std::array<GroupStatics, 4> groups;
  size_t next_group = 0;  // the slot the next miss fills (round robin)
  // A candidate's training entry and run-setting verdict (RunSettingsError) by its
  // LayoutCandidate::setting_index, without hashing its settings: in one search, the settings at
  // an index depend on its group only through the dispatcher, dp sharding, dp (= dp_replicate x
  // dp_shard: the global batch's schedule), pp (vpp > 1 needs pp > 1) and ep (EP overlap needs
  // ep > 1), and the verdict on the entry, pp, ep and etp (the deepep backend's limits). One slot table per such family, found once
  // per group (the search visits every setting of a group in a row).
  struct SettingSlot {
    TrainingEntry* entry = nullptr;
    const RunVerdict* run = nullptr;  // null until the rules after ValidateTraining were checked
    CandidateSettings settings;       // the settings it was filled for: a candidate of other settings at the index refills it
    // The verdicts behind the pointers, copied here: a candidate whose rules were checked reads
    // only its slot (the entries lie scattered in their maps, a cache miss each).
    bool entry_ok = false;      // entry->ok
    bool before_cp_ok = false;  // run->before_cp.empty(), once run is set
    bool after_cp_ok = false;   // run->after_cp.empty(), once run is set
  };
  using SlotFamily = std::tuple<Dispatcher, int, int64_t, int64_t, int64_t, int64_t>;  // dispatcher, dp sharding (-1 unset), dp, pp, ep, etp
  std::unordered_map<SlotFamily, std::vector<SettingSlot>, TupleHash> slot_families;
  // WorstPeak's layer activations of the last (workload, recompute set, per-op checkpointing and
  // whether its layers dispatch) it met (LayerActivations and OpSacSavedActivations read nothing
  // else of a candidate).
  struct ActivationMemo {
    bool filled = false;
    Workload w;
    RecomputeSet recompute;
    bool op_sac = false, dispatches = false;
    LayerActivationTable table;
    LayerActivationTable op_saved;  // per-op checkpointing's kept bytes (memory.h OpSacSavedActivations), when op_sac
  } activation_memo;
  std::vector<SettingSlot>* slots = nullptr;  // the family of slot_dims, slot_dispatcher and slot_sharding
  ParallelDimsOptions slot_dims;
  Dispatcher slot_dispatcher = Dispatcher::kAllToAll;
  std::optional<DpSharding> slot_sharding;
  // The MoE phases this evaluator has read from the shared cache, by key: a lookup without the
  // shared cache's lock (entries there never move).
  std::unordered_map<SearchEvalCache::MoeKey, const MoePhaseTimes*, TupleHash> moe_seen;

  // The slot of candidate `c` (null without a setting_index).
  SettingSlot* SlotFor(const LayoutCandidate& c) {
    if (c.setting_index < 0) return nullptr;
    if (slots == nullptr || !layout_eval_detail::SameDims(slot_dims, c.dims) || slot_dispatcher != c.dispatcher ||
        slot_sharding != c.settings.dp_sharding) {
      slot_dims = c.dims;
      slot_dispatcher = c.dispatcher;
      slot_sharding = c.settings.dp_sharding;
      const auto& d = c.dims;
      slots = &slot_families[SlotFamily{c.dispatcher, c.settings.dp_sharding ? static_cast<int>(*c.settings.dp_sharding) : -1,
                                        d.dp_replicate * d.dp_shard, d.pp, d.ep, EtpOf(d)}];
    }
    const size_t i = static_cast<size_t>(c.setting_index);
    if (i >= slots->size()) slots->resize(i + 1);
    return &(*slots)[i];
  }
  // The check of degrees `o` under `seq_len` (cached for the last degrees; drops the group figures
  // when they change).
  const DimsCheck& DimsFor(const ParallelDimsOptions& o, const ModelSpec& m, int64_t seq_len) {
    DimsCheck& c = last_dims;
    if (c.filled && layout_eval_detail::SameDims(c.options, o)) return c;
    c.filled = true;
    c.options = o;
    for (GroupStatics& g : groups) g.filled = false;  // their figures were for other degrees
    c.error.clear();
    c.cp_error.clear();
    c.ok = TryBuildParallelDims(o, &c.d, &c.error) && CheckDimsForModel(c.d, m, &c.error);
    c.cp_ok = c.ok && SeqLenSplits(seq_len, c.d.cp, c.d.tp, c.d.convention == Convention::kMegatron, &c.cp_error);
    return c;
  }

  // The group figures of the degrees DimsFor checked last (valid: `d`) under training `t` (its dp
  // sharding, dtypes and precision), by the rules of memory.h and comm.h on the first rank of each
  // stage. layout_eval_memory.cc.
  const GroupStatics& StaticsFor(const ModelSpec& m, const ClusterSpec& cluster, const ParallelDims& d, const TrainingConfig& t,
                                 const TrainingBytes& tb);
  // Rank 0's step-end data-parallel collectives (comm.h StepCollectives, in ComputeComm's order)
  // and their time, into g.dp_step_comm_us (the zero1 parameter all-gather and the gradient reduce
  // also by mesh, g.param_gather_* and g.grad_reduce_*). layout_eval_memory.cc.
  static void StepCollectiveTimes(const ParallelDims& d, DpSharding strategy, const TrainingBytes& tb, const ClusterSpec& cluster,
                                  GroupStatics* g);
  // The index of (routed, tp_dim) in `combos`, added when new.
  int ComboOf(bool routed, int tp_dim);
  // BuildPlan's message for the first class FSDP2 cannot shard under the cuts SumsFor computed last.
  std::string UnevenFsdpError() const;
  // The unit sums of every class under degrees `d` (memoized by the cuts).
  const ClassSums& SumsFor(const ParallelDims& d, int64_t num_experts, bool fsdp);
  // The layer split of `pp` (cached per pp).
  const Split& SplitFor(const ModelSpec& m, const TrainingConfig& t, int64_t pp, bool megatron);
};

namespace layout_eval_detail {

// The candidate's training (CandidateTraining), validated and resolved as BuildPlan does, cached.
// layout_eval_rules.cc.
LayoutEvaluator::Impl::TrainingEntry& TrainingEntryOf(LayoutEvaluator::Impl& im, const SearchOptions& o, const LayoutCandidate& c);

// The rules Evaluate checks before memory, in BuildPlan's order: the degrees (DimsFor),
// ValidateTraining (the entry), then the layer split and the run-setting, sequence, recompute,
// EP-overlap, deredundency-oep and vpp rules (a RunVerdict around DimsCheck::cp_ok). Returns the
// first broken rule's message (in the evaluator's caches, valid until its next call), null when
// they hold; sets *entry (once the degrees hold) and *dims for the caller. layout_eval_rules.cc.
const std::string* PreMemoryRuleBroken(LayoutEvaluator::Impl& im, const SearchOptions& o, const ModelSpec& m, const LayoutCandidate& c,
                                       LayoutEvaluator::Impl::TrainingEntry** entry, const LayoutEvaluator::Impl::DimsCheck** dims);

// ComputeMemory's worst peak (bytes) of a candidate of group `g` under `entry` (its settings in
// `w` and `t`; `t` is entry.t or its copy sized by --routing): per stage, the group's static
// bytes, the activations (per-layer or per-op selective checkpointing included) and the
// communication buffers (memory.h rules). Sets *fallback when a figure passes int64.
// layout_eval_memory.cc.
Wide WorstPeak(LayoutEvaluator::Impl& im, const ModelSpec& m, const LayoutEvaluator::GroupStatics& g,
               const LayoutEvaluator::Impl::TrainingEntry& entry, const Workload& w, const ParallelDims& d, const TrainingConfig& t,
               bool* fallback);

// Whether the communication volumes of the reference's ComputeComm (every entry, not only those
// the cost model uses) could come near its overflow checks: true unless a generous bound of their
// sum stays below 4e18 (then the reference path takes the candidate). layout_eval_step.cc.
bool CommVolumesNearLimit(const LayoutEvaluator::Impl& im, const ModelSpec& m, const Workload& w, const ParallelDims& d,
                          const TrainingConfig& t);

}  // namespace layout_eval_detail
}  // namespace dockyard
