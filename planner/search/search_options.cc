// A search's options and candidates (see search_options.h).
#include "planner/search/search_options.h"

#include "planner/cost/network.h"

namespace dockyard {

ResolvedSettings ResolveSettings(const TrainingConfig& base, const CandidateSettings& s) {
  ResolvedSettings r;
  r.micro_batch_size = s.micro_batch_size > 0 ? s.micro_batch_size : base.micro_batch_size;
  r.num_microbatches = s.num_microbatches > 0 ? std::optional<int64_t>(s.num_microbatches) : base.num_microbatches;
  r.grad_accumulation_steps = s.grad_accumulation_steps > 0 ? s.grad_accumulation_steps : base.run.grad_accumulation_steps;
  r.vpp = s.vpp > 0 ? s.vpp : base.run.vpp;
  r.recompute = s.recompute.value_or(base.recompute);
  r.dp_sharding = s.dp_sharding ? s.dp_sharding : base.dp_sharding;
  r.overlap_moe_ep_comm = s.overlap_moe_ep_comm.value_or(base.run.overlap_moe_ep_comm);
  return r;
}

TrainingConfig CandidateTraining(const TrainingConfig& base, const LayoutCandidate& c) {
  TrainingConfig t = base;
  t.dispatcher = c.dispatcher;
  if (t.dispatcher != Dispatcher::kDeredundency) t.oep.reset();  // a spec's oep is the deredundency dispatcher's
  // The flex backend (--moe-flex-dispatcher-backend) is the deepep dispatcher's.
  if (t.dispatcher != Dispatcher::kDeepEp) t.moe_flex_dispatcher_backend.reset();
  // --moe-flex-dispatcher-num-sms is the flex dispatcher's: the other candidates run without it
  // rather than being invalid (ValidateSearchOptions refuses it when no candidate is flex).
  if (t.dispatcher != Dispatcher::kDeepEp) t.run.moe_flex_dispatcher_num_sms = 0;
  // FP8 dispatch (--fp8-dispatch) where the candidate's dispatcher has it.
  t.fp8_dispatch = base.fp8_dispatch && (t.dispatcher == Dispatcher::kAllToAll || t.dispatcher == Dispatcher::kDeepEp);
  const ResolvedSettings s = ResolveSettings(base, c.settings);
  t.micro_batch_size = s.micro_batch_size;
  t.num_microbatches = s.num_microbatches;
  t.run.grad_accumulation_steps = s.grad_accumulation_steps;
  t.run.vpp = s.vpp;
  t.recompute = s.recompute;
  // --recompute-modules names what selective recompute re-runs: a searched candidate with none or
  // full has no modules (training_json.h ValidateTraining refuses modules outside selective).
  if (c.settings.recompute && t.recompute != Recompute::kSelective) t.recompute_modules.clear();
  t.dp_sharding = s.dp_sharding;
  t.run.overlap_moe_ep_comm = s.overlap_moe_ep_comm;
  // --delay-wgrad-compute is the EP overlap's (Megatron-Core refuses it without): the candidates
  // that run the overlap take it, the others run without it rather than being invalid.
  t.run.delay_wgrad_compute = base.run.delay_wgrad_compute && s.overlap_moe_ep_comm;
  // --overlap-param-gather-with-optimizer-step is the interleaved schedule's (Megatron-LM refuses it
  // without): the candidates with vpp > 1 take it, as Megatron-Bridge's performance scripts set it.
  t.run.overlap_param_gather_with_optimizer_step = base.run.overlap_param_gather_with_optimizer_step && s.vpp > 1;
  return t;
}

bool VppSearched(const SearchOptions& o) { return o.every_vpp || !o.vpps.empty(); }

double SearchBudgetGib(const SearchOptions& options) {
  return options.gpu_memory_gib > 0 ? options.gpu_memory_gib : options.cluster.memory_gib;
}

Machine SearchPlanMachine(const SearchOptions& options) {
  return MachineOf(options.cluster, options.gpu_memory_gib);
}

}  // namespace dockyard
