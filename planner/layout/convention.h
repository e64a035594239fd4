// The convention: which framework's -- and which release's -- rules and defaults a plan follows
// (--convention). One home for the convention's names, the release whose rules it applies, and the
// defaults it gives a setting the user left unset; the degrees' rules themselves are in
// parallel_dims.cc, the schedule's in planner/model/pipeline_schedule.cc.
//
//  - torchtitan (default): torchtitan as it is -- no expert tensor parallelism (pytorch/torchtitan
//    PR #3167, "[MoE][4/n] deprecate expert tensor parallel (ETP)", merged 2026-04-30: the etp mesh
//    axis and expert_tensor_parallel_degree removed) and, for MoE models, ep >= tp (PR #4794,
//    2026-09).
//  - torchtitan-2026-03: torchtitan before PR #3167 (releases up to v0.2.2 of 2026-02-20, and main
//    until 2026-04-30): expert tensor parallelism of ETP = TP or ETP = 1 (its parallel_dims.py:
//    "Currently we only support ETP=TP or ETP=1"), no ep >= tp rule; everything else as torchtitan.
//    The design notes' expert-TP styles (TensorParallel on experts, ExpertTensorParallel) plan here.
//  - megatron: Megatron-Core's parallel_state and Megatron-LM's argument defaults.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "planner/model/training.h"

namespace dockyard {

// Values are stable (the search's caches key on them); kTorchtitan2026_03 came last.
enum class Convention { kTorchtitan, kMegatron, kTorchtitan2026_03 };

// "torchtitan", "megatron", "torchtitan-2026-03".
const char* ConventionName(Convention c);
// Every name, in table order (the CLIs' --convention choices).
std::vector<std::string> ConventionNames();
// The convention spelled `text`; throws dockyard::Error "{field}: must be ..., got \"...\"" with a
// did-you-mean suggestion otherwise.
Convention ParseConvention(const std::string& text, const std::string& field);
// Either torchtitan convention (the current one or a named earlier release): torchtitan's meshes,
// FSDP, schedules and per-layer / per-op checkpointing.
bool IsTorchtitan(Convention c);

// Which release's rules the convention applies, one line for reports (header "rules"), e.g.
// "torchtitan as of PR #4794 (2026-09): no expert tensor parallelism (PR #3167), ep >= tp for MoE
// models; --convention torchtitan-2026-03 for releases before PR #3167".
std::string ConventionRulesText(Convention c);

// Expert tensor parallelism when --etp is not given: Megatron-LM sets
// expert_tensor_parallel_size = tensor_model_parallel_size when --expert-tensor-parallel-size is
// unset (megatron/training/arguments.py validate_args); torchtitan: 1 (no expert TP, or, before PR
// #3167, expert_tensor_parallel_degree's default 1).
int64_t DefaultEtp(Convention c, int64_t tp);

// The data-parallel strategy when --dp-sharding is not given: megatron zero1 (its distributed
// optimizer), torchtitan fsdp (FSDP2 over dp_shard).
DpSharding DefaultDpSharding(Convention c);

// Whether the shared experts' forward overlaps the combine all-to-all when no flag says so:
//  - megatron: off. Megatron-Core's moe_shared_expert_overlap defaults to False ("Without this,
//    the shared experts execute before the router"; megatron/core/transformer/transformer_config.py);
//    --moe-shared-expert-overlap turns it on.
//  - torchtitan: on. torchtitan's MoE runs the shared experts before scoring the routed experts'
//    output, so that they overlap the token combine (torchtitan/models/moe/moe.py MoE.forward).
bool DefaultSharedExpertOverlap(Convention c);

// The modules a bare `--recompute selective` (no --recompute-modules, no --selective-ac-option)
// recomputes: megatron ["core_attn"] (TransformerConfig.__post_init__: "if self.recompute_modules
// is None: self.recompute_modules = ['core_attn']"); torchtitan none (it selects by
// DefaultSelectiveAcOption instead).
std::vector<std::string> DefaultSelectiveModules(Convention c);

// torchtitan's selective_ac_option for a bare `--recompute selective`: torchtitan (as it is) "op",
// per-op selective AC, its only selective policy since commit 114151ad4 (March 2026) removed the
// per-layer option (torchtitan/distributed/activation_checkpoint.py SelectiveAC);
// torchtitan-2026-03 "2", the releases' default up to v0.2.2 (ActivationCheckpoint.selective_ac_option
// = "2" in torchtitan/config/job_config.py: every second block of each stage fully checkpointed);
// megatron "" (none: it selects by modules).
std::string DefaultSelectiveAcOption(Convention c);

// Which of the convention's defaults a plan took because the setting was not given.
struct DefaultsApplied {
  bool etp = false;                    // --etp not given (ParallelDims::etp_default)
  bool shared_expert_overlap = false;  // neither --moe-shared-expert-overlap nor simulate --no-overlap
  bool selective_modules = false;      // a bare --recompute selective took DefaultSelectiveModules
  bool selective_ac_option = false;    // a bare --recompute selective took DefaultSelectiveAcOption
  bool dp_sharding = false;            // --dp-sharding not given (DefaultDpSharding)
};

// Gives each setting `training` leaves unset the convention's default: dp_sharding
// (DefaultDpSharding), run.overlap_shared_experts (DefaultSharedExpertOverlap) and, with recompute
// selective and neither recompute_modules nor selective_ac_option given, recompute_modules
// (DefaultSelectiveModules) or selective_ac_option (DefaultSelectiveAcOption). Returns which were
// applied. BuildPlan and the layout search's training entries call it, so both price the same
// settings.
DefaultsApplied ApplyConventionDefaults(Convention c, TrainingConfig* training);

// The report lines of the defaults `applied` under `c` that change what is planned (the "Defaults"
// lines and the header's "defaults_applied"): etp = tp (megatron, also at tp 1), the shared-expert overlap
// (only for a model with shared experts: Megatron's flag is "Only effective when
// moe-shared-expert-intermediate-size is set"), the bare selective recompute's modules or
// torchtitan's selective_ac_option, megatron's zero1 (torchtitan's fsdp goes unsaid: it is what
// torchtitan does with a dp_shard axis). Each line
// names the framework's flag and the file the default comes from.
std::vector<std::string> DefaultsAppliedLines(Convention c, const DefaultsApplied& applied, const TrainingConfig& resolved, int64_t tp,
                                              bool has_shared_experts);

}  // namespace dockyard
