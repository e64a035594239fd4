// The rules the search's fast path checks before memory (see layout_eval_internal.h): each is the
// plan path's own rule function, called on the candidate's degrees and training entry in
// BuildPlan's order and cached where it depends on nothing else of a candidate, so that an invalid
// candidate carries the message BuildPlan throws first.
#include <string>
#include <tuple>

#include "planner/model/vocab_padding.h"
#include "planner/base/error.h"
#include "planner/layout/plan.h"
#include "planner/model/flex_backend_limits.h"
#include "planner/model/pipeline_schedule.h"
#include "planner/model/muon.h"
#include "planner/model/precision.h"
#include "planner/model/recompute.h"
#include "planner/model/seq_len.h"
#include "planner/search/layout_eval_internal.h"
#include "planner/model/training_json.h"

namespace dockyard {
namespace layout_eval_detail {
namespace {

// BuildPlan's rules after ValidateTraining for the entry `e` under degrees `d` (its pipeline and
// expert degrees and convention), in BuildPlan's order, cached per (pp, ep, etp, convention): they
// depend on nothing else of a candidate. Before the sequence's split over cp (DimsCheck::cp_ok):
// the layer split (ResolvePipelineStages), ValidateFp8ParamGather, ValidateRunSettings,
// ValidateSingleStageMicrobatches, ValidateInterleavedMicrobatches, ValidateSelectiveAcConvention,
// ValidateSeqLenForModel; after it: ValidateOpSac, ValidateRecomputeModulesForModel,
// ValidateEpOverlap, ValidateSharedExpertOverlap, the deredundency oep (DeredundencyOepError), the
// deepep backend's limits (FlexBackendLimitError), ValidateVppChunks. Each part holds the first
// broken rule's message, empty
// when its rules hold (a reference into the cache).
const LayoutEvaluator::Impl::RunVerdict& RunSettingsVerdict(LayoutEvaluator::Impl& im, LayoutEvaluator::Impl::TrainingEntry& e,
                                                            const ParallelDims& d, const ModelSpec& m, int64_t seq_len) {
  const bool megatron = d.convention == Convention::kMegatron;
  const int64_t pp = d.pp, ep = d.ep;
  const auto key = std::make_tuple(pp, ep, d.etp, megatron);
  auto it = e.run_verdict.find(key);
  if (it != e.run_verdict.end()) return it->second;
  LayoutEvaluator::Impl::RunVerdict v;
  try {
    const LayoutEvaluator::Impl::Split& split = im.SplitFor(m, e.t, pp, megatron);
    if (!split.valid) throw Error(split.error);
    ValidateFp8ParamGather(e.t, megatron);
    ValidateMuon(e.t, megatron);
    ValidateRunSettings(e.t.run, static_cast<int>(*e.t.dp_sharding), pp);
    // The entry's micro-batch count is part of its key (TrainingKey); unset, it resolves to pp.
    ValidateSingleStageMicrobatches(e.t.run, pp, e.t.num_microbatches.value_or(pp), megatron);
    ValidateInterleavedMicrobatches(e.t.run, pp, e.t.num_microbatches.value_or(pp), megatron);
    ValidateSelectiveAcConvention(e.t, IsTorchtitan(d.convention));
    ValidateSeqLenForModel(seq_len, m, "--seq-len");
  } catch (const Error& err) {
    v.before_cp = err.what();
  }
  try {
    ValidateOpSac(e.t, m);
    ValidateRecomputeModulesForModel(e.t, m);
    ValidateEpOverlap(e.t, pp, ep);
    ValidateGraphsAndPadding(e.t, megatron);
    ValidateFlexDispatcherNumSms(e.t, megatron);
    ValidateSharedExpertOverlap(e.t, megatron, m.moe.num_shared_experts > 0);
    if (std::string oep = DeredundencyOepError(e.t, ep); !oep.empty()) throw Error(oep);
    if (std::string backend = FlexBackendLimitError(e.t, ep, d.etp, im.machine, megatron); !backend.empty()) throw Error(backend);
    ValidateVppChunks(pp, e.t.run.vpp, m.num_hidden_layers);
  } catch (const Error& err) {
    v.after_cp = err.what();
  }
  return e.run_verdict.emplace(key, std::move(v)).first->second;
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
    VocabDivisor(e.t, c.dims.convention == Convention::kMegatron);  // BuildPlan's next rule (vocab_padding.h)
    e.bytes = TrainingBytesOf(e.t);
    e.ok = true;  // selective_ac_option is digits or "op" (ValidateTraining): sac_every below
  } catch (const Error& err) {
    e.ok = false;
    e.error = err.what();
  }
  // The convention's defaults, as BuildPlan gives them (convention.h ApplyConventionDefaults); a
  // bare selective takes torchtitan's per-layer option.
  ApplyConventionDefaults(o.convention, &e.t);
  if (e.ok) {
    e.sac_every = LayerSacEvery(e.t);
    e.op_sac = OpSac(e.t);
  }
  if (!e.t.num_microbatches) e.t.num_microbatches.reset();  // resolved per pp below (BuildPlan: pp)
  return im.trainings.emplace(key, std::move(e)).first->second;
}

const std::string* PreMemoryRuleBroken(LayoutEvaluator::Impl& im, const SearchOptions& o, const ModelSpec& m, const LayoutCandidate& c,
                                       LayoutEvaluator::Impl::TrainingEntry** entry, const LayoutEvaluator::Impl::DimsCheck** dims) {
  // The degrees first: BuildPlan builds and checks them before it reads the training.
  *dims = &im.DimsFor(c.dims, m, o.training.seq_len);
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
  if (slot == nullptr || slot->run == nullptr) {
    const LayoutEvaluator::Impl::RunVerdict& run = RunSettingsVerdict(im, **entry, d, m, o.training.seq_len);
    if (slot == nullptr) {
      if (!run.before_cp.empty()) return &run.before_cp;
      if (!(*dims)->cp_ok) return &(*dims)->cp_error;
      return run.after_cp.empty() ? nullptr : &run.after_cp;
    }
    slot->run = &run;
    slot->before_cp_ok = run.before_cp.empty();
    slot->after_cp_ok = run.after_cp.empty();
  }
  if (!slot->before_cp_ok) return &slot->run->before_cp;
  if (!(*dims)->cp_ok) return &(*dims)->cp_error;
  return slot->after_cp_ok ? nullptr : &slot->run->after_cp;
}

}  // namespace layout_eval_detail

bool LayoutEvaluator::SettingsHold(const LayoutCandidate& c, std::string* reason) {
  Impl::TrainingEntry* entry = nullptr;
  const Impl::DimsCheck* dims = nullptr;
  const std::string* error = layout_eval_detail::PreMemoryRuleBroken(*impl_, options_, model_, c, &entry, &dims);
  if (error == nullptr) return true;
  if (reason) *reason = *error;
  return false;
}

}  // namespace dockyard
