// The rules the search's fast path checks before memory (see layout_eval_internal.h): each is the
// plan path's own rule function, called on the candidate's degrees and training entry in
// BuildPlan's order and cached where it depends on nothing else of a candidate, so that an invalid
// candidate carries the message BuildPlan throws first.
#include <string>
#include <tuple>

#include "planner/base/error.h"
#include "planner/layout/parallel_dims.h"
#include "planner/layout/plan.h"
#include "planner/model/pipeline_schedule.h"
#include "planner/model/precision.h"
#include "planner/model/recompute.h"
#include "planner/model/seq_len.h"
#include "planner/search/layout_eval_internal.h"

namespace dockyard {
namespace layout_eval_detail {
namespace {

// BuildPlan's rules after ValidateTraining for the entry `e` under degrees `d` (its pipeline and
// expert degrees, its cp and convention), in BuildPlan's order: the layer split
// (ResolvePipelineStages), ValidateFp8ParamGather, ValidateRunSettings,
// ValidateInterleavedMicrobatches, ValidateSelectiveAcConvention, ValidateSeqLenForModel,
// ValidateSeqLenForCp, ValidateOpSac, ValidateRecomputeModulesForModel, ValidateEpOverlap, the
// deredundency oep (DeredundencyOepError), ValidateVppChunks; cached per (pp, ep, cp, convention):
// they depend on nothing else of a candidate. Returns the message of the rule broken, empty when
// they hold (a reference into the cache).
const std::string& RunSettingsError(LayoutEvaluator::Impl& im, LayoutEvaluator::Impl::TrainingEntry& e, const ParallelDims& d,
                                    const ModelSpec& m, int64_t seq_len) {
  const bool megatron = d.convention == Convention::kMegatron;
  const int64_t pp = d.pp, ep = d.ep;
  const auto key = std::make_tuple(pp, ep, d.cp, megatron);
  auto it = e.run_error.find(key);
  if (it != e.run_error.end()) return it->second;
  std::string error;
  try {
    const LayoutEvaluator::Impl::Split& split = im.SplitFor(m, e.t, pp);
    if (!split.valid) throw Error(split.error);
    ValidateFp8ParamGather(e.t, megatron);
    ValidateRunSettings(e.t.run, static_cast<int>(*e.t.dp_sharding), pp);
    // The entry's micro-batch count is part of its key (TrainingKey); unset, it resolves to pp.
    ValidateInterleavedMicrobatches(e.t.run, pp, e.t.num_microbatches.value_or(pp), megatron);
    ValidateSelectiveAcConvention(e.t, !megatron);
    ValidateSeqLenForModel(seq_len, m, "--seq-len");
    ValidateSeqLenForCp(seq_len, d.cp);
    ValidateOpSac(e.t, m);
    ValidateRecomputeModulesForModel(e.t, m);
    ValidateEpOverlap(e.t, pp, ep);
    if (std::string oep = DeredundencyOepError(e.t, ep); !oep.empty()) throw Error(oep);
    ValidateVppChunks(pp, e.t.run.vpp, m.num_hidden_layers);
  } catch (const Error& err) {
    error = err.what();
  }
  return e.run_error.emplace(key, std::move(error)).first->second;
}

}  // namespace

LayoutEvaluator::Impl::TrainingEntry& TrainingEntryOf(LayoutEvaluator::Impl& im, const SearchOptions& o, const LayoutCandidate& c) {
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
    e.sac_every = LayerSacEvery(e.t);  // selective_ac_option is digits or "op" (ValidateTraining)
    e.op_sac = OpSac(e.t);
    e.ok = true;
  } catch (const Error& err) {
    e.ok = false;
    e.error = err.what();
  }
  if (!e.t.dp_sharding) e.t.dp_sharding = o.convention == Convention::kMegatron ? DpSharding::kZero1 : DpSharding::kFsdp;
  if (!e.t.num_microbatches) e.t.num_microbatches.reset();  // resolved per pp below (BuildPlan: pp)
  return im.trainings.emplace(key, std::move(e)).first->second;
}

const std::string* PreMemoryRuleBroken(LayoutEvaluator::Impl& im, const SearchOptions& o, const ModelSpec& m, const LayoutCandidate& c,
                                       LayoutEvaluator::Impl::TrainingEntry** entry, const LayoutEvaluator::Impl::DimsCheck** dims) {
  // The degrees first: BuildPlan builds and checks them before it reads the training.
  *dims = &im.DimsFor(c.dims, m);
  if (!(*dims)->ok) return &(*dims)->error;
  const ParallelDims& d = (*dims)->d;
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
  if (slot != nullptr && slot->run_error != nullptr) return slot->run_ok ? nullptr : slot->run_error;
  const std::string& run_error = RunSettingsError(im, **entry, d, m, o.training.seq_len);
  if (slot != nullptr) {
    slot->run_error = &run_error;
    slot->run_ok = run_error.empty();
  }
  return run_error.empty() ? nullptr : &run_error;
}

}  // namespace layout_eval_detail

LayoutEvaluator::Impl::SettingSlot* LayoutEvaluator::Impl::SlotFor(const LayoutCandidate& c) {
  if (c.setting_index < 0) return nullptr;
  if (slots == nullptr || !layout_eval_detail::SameDims(slot_dims, c.dims) || slot_dispatcher != c.dispatcher ||
      slot_sharding != c.settings.dp_sharding) {
    slot_dims = c.dims;
    slot_dispatcher = c.dispatcher;
    slot_sharding = c.settings.dp_sharding;
    const auto& d = c.dims;
    slots = &slot_families[SlotFamily{c.dispatcher, c.settings.dp_sharding ? static_cast<int>(*c.settings.dp_sharding) : -1,
                                      d.dp_replicate * d.dp_shard, d.pp, d.ep, d.cp}];
  }
  const size_t i = static_cast<size_t>(c.setting_index);
  if (i >= slots->size()) slots->resize(i + 1);
  return &(*slots)[i];
}

const LayoutEvaluator::Impl::DimsCheck& LayoutEvaluator::Impl::DimsFor(const ParallelDimsOptions& o, const ModelSpec& m) {
  DimsCheck& c = last_dims;
  if (c.filled && layout_eval_detail::SameDims(c.options, o)) return c;
  c.filled = true;
  c.options = o;
  for (GroupStatics& g : groups) g.filled = false;  // their figures were for other degrees
  c.error.clear();
  c.ok = TryBuildParallelDims(o, &c.d, &c.error) && CheckDimsForModel(c.d, m, &c.error);
  return c;
}

bool LayoutEvaluator::SettingsHold(const LayoutCandidate& c, std::string* reason) {
  Impl::TrainingEntry* entry = nullptr;
  const Impl::DimsCheck* dims = nullptr;
  const std::string* error = layout_eval_detail::PreMemoryRuleBroken(*impl_, options_, model_, c, &entry, &dims);
  if (error == nullptr) return true;
  if (reason) *reason = *error;
  return false;
}

}  // namespace dockyard
