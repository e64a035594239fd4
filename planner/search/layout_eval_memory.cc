// The search's fast path, memory (see layout_eval_internal.h): the parameter classes' sums under a
// candidate's cuts, the layer splits, the figures of a group of candidates (static bytes, FSDP
// units, rank 0's step-end collectives) and ComputeMemory's worst peak, each by the memory.h and
// comm.h rule the plan path applies per tensor.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "planner/accounting/comm.h"
#include "planner/accounting/memory.h"
#include "planner/base/error.h"
#include "planner/model/pipeline_schedule.h"
#include "planner/model/precision.h"
#include "planner/model/recompute.h"
#include "planner/search/layout_eval_internal.h"

#include "planner/cost/network.h"

namespace dockyard {
namespace layout_eval_detail {

int GroupIndex(Role role) {
  const char* group = RoleGroup(role);
  for (int i = 0; i < kNumGroups; ++i) {
    if (std::strcmp(group, kGroupNames[i]) == 0) return i;
  }
  throw Error(fmt::format("internal: role group '{}' unknown to the layout evaluator", group));
}

void AddToClasses(std::vector<ParamClass>& classes, const ParamInfo& p) {
  const int g = GroupIndex(p.role);
  for (auto& c : classes) {
    if (c.SameKind(p, g)) {
      ++c.count;
      return;
    }
  }
  classes.push_back({p.shape, p.tp_dim, p.routed_expert, g, 1, -1, p.fqn, Fp8GemmGroup(kGroupNames[g])});
}

Wide WorstPeak(LayoutEvaluator::Impl& im, const ModelSpec& m, const LayoutEvaluator::GroupStatics& g,
               const LayoutEvaluator::Impl::TrainingEntry& entry, const Workload& w, const ParallelDims& d, const TrainingConfig& t,
               bool* fallback) {
  auto fits = [&](Wide v) {
    if (v > kInt64Max) *fallback = true;
    return v;
  };
  // The stages' checkpointed layers (Split) were counted at the evaluator's frequency.
  if (entry.sac_every > 0 && entry.sac_every != im.sac_every) {
    throw Error(fmt::format("internal: a candidate checkpoints every {} layers, the layout evaluator counted every {}", entry.sac_every,
                            im.sac_every));
  }
  // Activations of one layer of each kind present (the last candidate's when its workload, recompute
  // set and per-op checkpointing were the same: its vpp and EP overlap variants), and with per-op
  // checkpointing what each layer keeps (memory.h OpSacSavedActivations; the layers dispatch with ep > 1).
  const RecomputeSet recompute = RecomputeSetOf(t);
  const bool dispatches = d.ep > 1;
  LayoutEvaluator::Impl::ActivationMemo& memo = im.activation_memo;
  if (!(memo.filled && SameWorkload(memo.w, w) && SameRecomputeSet(memo.recompute, recompute) && memo.op_sac == entry.op_sac &&
        (!entry.op_sac || memo.dispatches == dispatches))) {
    LayerActivationBytes act_layer[2], op_saved[2];  // [0] MoE, [1] dense
    for (int which = 0; which < 2; ++which) {
      if (im.first_kind[which] < 0) continue;
      act_layer[which] = LayerActivations(m, recompute, w, which == 0);
      if (entry.op_sac) op_saved[which] = OpSacSavedActivations(m, w, which == 0, dispatches);
    }
    memo.filled = true;
    memo.w = w;
    memo.recompute = recompute;
    memo.op_sac = entry.op_sac;
    memo.dispatches = dispatches;
    memo.table = ActivationTable(act_layer[0], act_layer[1]);
    memo.op_saved = entry.op_sac ? ActivationTable(op_saved[0], op_saved[1]) : LayerActivationTable{};
  }
  const LayerActivationTable& act_table = memo.table;
  const int64_t h = m.hidden_size;
  const Wide layer_input = static_cast<Wide>(Ceil(w.tokens, w.tp_shards)) * h * w.act_bytes;
  const Wide logits = LossLogitsBytes(m, w, d.tp, 0);  // no MTP: the search refuses --mtp-layers (layout_eval.h)
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
    most = std::max(most, InFlightChunks(d, t, s));
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
    if (entry.sac_every > 0) {  // torchtitan's per-layer selective checkpointing (ComputeMemory's LayersOfStage)
      layers.checkpointed_moe = g.split->checkpointed_moe[s];
      layers.checkpointed_dense = g.split->checkpointed_dense[s];
      layers.checkpointed_moe_first = g.split->checkpointed_moe_first[s] != 0;
    }
    if (entry.op_sac) layers.op_saved = &memo.op_saved;  // per-op checkpointing (ComputeMemory's PlanStageActivations)
    layers.first_stage = s == 0;
    layers.last_stage = s == d.pp - 1;
    layers.in_flight = in_flight[c];
    layers.chunks_per_microbatch = ChunksPerMicrobatch(t);
    layers.pp = d.pp;
    layers.extra_layers = ExtraLayersInFlight(d, t, s);
    if (!g.split->chunk_moe.empty()) SetChunkCopies(g.split->chunk_moe[s], g.split->chunk_dense[s], layers);
    const Wide act = StageActivationsTotal(act_table, layers, t.recompute, layer_input, logits);
    if (!(st.largest == buf_largest && st.mp == buf_mp && (layers.moe_layers > 0) == buf_moe)) {
      buf_largest = st.largest, buf_mp = st.mp, buf_moe = layers.moe_layers > 0;
      buf = StageBuffersTotal(st.largest, buf_moe, w, d, t, im.machine, g.bytes, oep, h, st.mp);
    }
    worst_peak = std::max(worst_peak, fits(fits(st.stat) + fits(act) + fits(buf)));
  }
  return worst_peak;
}

}  // namespace layout_eval_detail

using layout_eval_detail::GroupPrecision;
using layout_eval_detail::kGroupNames;
using layout_eval_detail::kInt64Max;
using layout_eval_detail::kMaxMemoizedCuts;
using layout_eval_detail::kNumGroups;
using layout_eval_detail::StageStatics;

const LayoutEvaluator::GroupStatics& LayoutEvaluator::Impl::StaticsFor(const ModelSpec& m, const ClusterSpec& cluster,
                                                                       const ParallelDims& d, const TrainingConfig& t,
                                                                       const TrainingBytes& tb) {
  const DpSharding strategy = *t.dp_sharding;
  GroupPrecision precision;
  precision.fp8_copy = Fp8WeightCopyPerElement(t, d.convention);  // FP8 weight copies (megatron)
  precision.fp8_params = Fp8ModelParams(t);                       // --fp8-param-gather under zero1: FP8 GEMM weights as parameters
  precision.fp8_param_gather = t.fp8_param_gather;
  precision.fp8_gather_bytes =
      t.fp8_param_gather ? Fp8ParamGatherBytesPerElement(t, static_cast<double>(DtypeBytes(t.param_dtype, "param_dtype"))) : 0.0;
  const Split* split = &SplitFor(m, t, d.pp, d.convention == Convention::kMegatron);
  for (const GroupStatics& g : groups) {
    if (g.SameKey(strategy, tb, precision, split)) return g;
  }
  GroupStatics& g = groups[next_group];
  next_group = (next_group + 1) % groups.size();
  g = GroupStatics{};
  g.filled = true;
  g.strategy = strategy;
  g.bytes = tb;
  g.precision = precision;
  g.split = split;
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
    Wide grads = 0, optimizer_elems = 0;
    for (int k = 0; k < kNumGroups; ++k) {
      const StaticBytes b = GroupStaticBytesOf(kGroupNames[k], st.local[k][0], st.local[k][1], d, strategy, tb, precision.fp8_params);
      out.stat += fits(b.params) + fits(b.grads) + fits(b.optimizer) +
                  fits(Fp8WeightCopyBytes(kGroupNames[k], st.local[k][0] + st.local[k][1], precision.fp8_copy));
      grads += b.grads;
      optimizer_elems += b.shard_elems;
    }
    g.static_worst = std::max(g.static_worst, out.stat);
    if (s == 0) {
      g.grads0 = fits(grads);
      g.optimizer_elems0 = fits(optimizer_elems);
      g.dense0 = st.mp[0];
      g.sparse0 = st.mp[1];
      g.fp8_dense0 = st.mp_fp8[0];
      g.fp8_sparse0 = st.mp_fp8[1];
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
  const Split& sp = *g.split;
  for (int64_t s = 0; s < d.pp; ++s) {
    const StageStatics& a = g.stages[static_cast<size_t>(s)];
    int32_t c = 0;
    for (; c < static_cast<int32_t>(g.class_first.size()); ++c) {
      const int64_t f = g.class_first[static_cast<size_t>(c)];
      const StageStatics& b = g.stages[static_cast<size_t>(f)];
      if (f != 0 && s != d.pp - 1 && a.stat == b.stat && a.mp == b.mp && a.largest == b.largest && sp.moe_layers[s] == sp.moe_layers[f] &&
          sp.dense_layers[s] == sp.dense_layers[f] && sp.checkpointed_moe[s] == sp.checkpointed_moe[f] &&
          sp.checkpointed_dense[s] == sp.checkpointed_dense[f] && sp.checkpointed_moe_first[s] == sp.checkpointed_moe_first[f]) {
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
  // Rank 0 is on stage 0: when the embedding group all-reduces (comm.h EmbeddingGroupAllReduces:
  // tied embeddings or MTP under megatron, pp > 1) it holds the word embedding.
  g.tied = EmbeddingGroupAllReduces(d, m.tie_word_embeddings, t.mtp_layers) ? sums.embedding.mp[0] + sums.embedding.mp[1] : 0;
  g.expert_bias0 = RouterExpertBiasElems(m, g.split->runs.CountsOf(0).moe);
  StepCollectiveTimes(d, strategy, tb, cluster, &g);
  return g;
}

// Rank 0's groups {0, s, ..., (n-1)s} span NVLink domains when the last member is on another one.
void LayoutEvaluator::Impl::StepCollectiveTimes(const ParallelDims& d, DpSharding strategy, const TrainingBytes& tb,
                                                const ClusterSpec& cluster, GroupStatics* g) {
  const int64_t domain = NvlinkDomainGpus(cluster);
  // --fp8-param-gather: the FP8 GEMM weights of rank 0's stage, all-gathered in FP8 (ComputeComm's CollectDpUnits).
  Fp8ParamGather fp8;
  if (g->precision.fp8_param_gather) {
    fp8.dense_elems = static_cast<int64_t>(g->fp8_dense0);  // <= dense0 / sparse0, which fit int64 (StaticsFor)
    fp8.sparse_elems = static_cast<int64_t>(g->fp8_sparse0);
    fp8.bytes_per_element = g->precision.fp8_gather_bytes;
  }
  const StepCollectiveList step = StepCollectives(d, strategy, tb, static_cast<int64_t>(g->dense0), static_cast<int64_t>(g->sparse0),
                                                  static_cast<int64_t>(g->tied), fp8, g->expert_bias0);
  for (int i = 0; i < step.size; ++i) {
    const StepCollective& e = step.items[i];
    if (e.group_size < 2 || e.bytes == 0) continue;
    const double wire = CollectiveWireBytes(e.collective, e.group_size, 1, e.bytes);
    const double us =
        StepCollectiveUs(static_cast<double>(static_cast<int64_t>(wire)), e.group_size,
                         MembersPerDomainStrided(e.group_size, e.stride, domain), (e.group_size - 1) * e.stride / domain > 0, cluster);
    g->dp_step_comm_us += us;
    if (std::strcmp(e.purpose, "zero1_all_gather_params") == 0) (e.sparse ? g->param_gather_sparse_us : g->param_gather_dense_us) += us;
    if (std::strcmp(e.purpose, "zero1_reduce_scatter_grads") == 0 || std::strcmp(e.purpose, "ddp_all_reduce_grads") == 0) {
      (e.sparse ? g->grad_reduce_sparse_us : g->grad_reduce_dense_us) += us;
    }
  }
}

int LayoutEvaluator::Impl::ComboOf(bool routed, int tp_dim) {
  for (size_t i = 0; i < combos.size(); ++i) {
    if (combos[i] == std::make_pair(routed, tp_dim)) return static_cast<int>(i);
  }
  combos.push_back({routed, tp_dim});
  return static_cast<int>(combos.size()) - 1;
}

// The memoized sums are shared by cuts of other meshes, whose names the message carries: the
// message is formed from the cuts SumsFor computed last.
std::string LayoutEvaluator::Impl::UnevenFsdpError() const {
  auto message = [&](const ParamClass& pc) -> std::string {
    const UnevenFsdpCut uneven = FindUnevenFsdpCut(pc.shape, cuts[pc.combo]);
    return uneven.cut < 0 ? "" : UnevenFsdpMessage(pc.fqn, cuts[pc.combo].cuts[uneven.cut], uneven.size);
  };
  // The inventory's order: the embedding, the layers, the root unit.
  for (const auto& pc : embedding) {
    if (std::string msg = message(pc); !msg.empty()) return msg;
  }
  for (const auto& kind : kinds) {
    for (const auto& pc : kind.classes) {
      if (std::string msg = message(pc); !msg.empty()) return msg;
    }
  }
  for (const auto& pc : root) {
    if (std::string msg = message(pc); !msg.empty()) return msg;
  }
  return "internal: an FSDP cut the search found uneven is even";
}

const LayoutEvaluator::Impl::ClassSums& LayoutEvaluator::Impl::SumsFor(const ParallelDims& d, int64_t num_experts, bool fsdp) {
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

const LayoutEvaluator::Impl::Split& LayoutEvaluator::Impl::SplitFor(const ModelSpec& m, const TrainingConfig& t, int64_t pp, bool megatron) {
  // Once per pp and vpp (interleaving places the layers by chunk: ResolvePipelineStages): the
  // result is cached.
  const auto key = std::make_pair(pp, t.run.vpp);
  auto it = splits.find(key);
  if (it != splits.end()) return it->second;
  Split s;
  std::vector<int64_t> layer_chunk;
  try {
    // The account-for-embedding / loss split and the even split's layout keep the embedding on
    // stage 0 and the loss and MTP on stage pp - 1, as the rest of this evaluator assumes (a
    // --pipeline-model-parallel-layout is refused by the search's front end).
    const PipelineStages stages = ResolvePipelineStages(t, m.num_hidden_layers, pp, megatron);
    s.layer_stage = stages.layer_stage;
    s.layer_chunk = layer_chunk = stages.layer_chunk;
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
    if (!layer_chunk.empty()) {
      const int64_t vpp = t.run.vpp;
      s.chunk_moe.assign(pp, std::vector<int64_t>(vpp, 0));
      s.chunk_dense.assign(pp, std::vector<int64_t>(vpp, 0));
      for (int64_t l = 0; l < m.num_hidden_layers; ++l) {
        ++(m.moe_layers[l] ? s.chunk_moe : s.chunk_dense)[s.layer_stage[l]][layer_chunk[l]];
      }
      if (t.mtp_layers > 0) (m.moe_layers.back() ? s.chunk_moe : s.chunk_dense)[pp - 1][vpp - 1] += t.mtp_layers;
    }
    // Per-layer selective checkpointing: each stage's checkpointed layers as ComputeMemory's
    // LayersOfStage counts them (the first one's kind included).
    s.checkpointed_moe.assign(pp, 0);
    s.checkpointed_dense.assign(pp, 0);
    s.checkpointed_moe_first.assign(pp, 0);
    if (sac_every > 0) {
      const std::vector<bool> checkpointed = LayerSacCheckpointed(s.layer_stage, sac_every);
      for (int64_t l = 0; l < m.num_hidden_layers; ++l) {
        if (!checkpointed[l]) continue;
        const int64_t st = s.layer_stage[l];
        const bool moe = m.moe_layers[l];
        if (s.checkpointed_moe[st] + s.checkpointed_dense[st] == 0) s.checkpointed_moe_first[st] = moe;
        ++(moe ? s.checkpointed_moe : s.checkpointed_dense)[st];
      }
    }
  }
  return splits.emplace(key, std::move(s)).first->second;
}

}  // namespace dockyard
