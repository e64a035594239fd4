// The convention's names, rules text and defaults (see convention.h).
#include "planner/layout/convention.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "planner/base/name_table.h"

namespace dockyard {
namespace {

constexpr NameTable<Convention, 3> kConventions{{{{Convention::kTorchtitan, "torchtitan"},
                                                  {Convention::kMegatron, "megatron"},
                                                  {Convention::kTorchtitan2026_03, "torchtitan-2026-03"}}}};

}  // namespace

const char* ConventionName(Convention c) {
  return kConventions.Name(c);
}

std::vector<std::string> ConventionNames() {
  return kConventions.Names();
}

Convention ParseConvention(const std::string& text, const std::string& field) {
  return kConventions.Parse(text, field, true);
}

bool IsTorchtitan(Convention c) {
  return c != Convention::kMegatron;
}

std::string ConventionRulesText(Convention c) {
  switch (c) {
    case Convention::kMegatron:
      return "Megatron-Core (parallel_state) with Megatron-LM's defaults: etp = tp when --etp is not given (arguments.py), "
             "--recompute selective = core_attn, --moe-shared-expert-overlap off (transformer_config.py); zero1, as its MoE recipes "
             "set --use-distributed-optimizer";
    case Convention::kTorchtitan2026_03:
      return "torchtitan before PR #3167 (releases up to v0.2.2, main until 2026-04-30): etp 1 or tp, ep < tp allowed; shared "
             "experts overlap the combine";
    case Convention::kTorchtitan:
      break;
  }
  return "torchtitan as of PR #4794 (2026-09): no expert tensor parallelism (etp 1; PR #3167), ep >= tp for MoE models; shared "
         "experts overlap the combine; --convention torchtitan-2026-03 for releases before PR #3167";
}

int64_t DefaultEtp(Convention c, int64_t tp) {
  return c == Convention::kMegatron ? tp : 1;
}

DpSharding DefaultDpSharding(Convention c) {
  return c == Convention::kMegatron ? DpSharding::kZero1 : DpSharding::kFsdp;
}

bool DefaultSharedExpertOverlap(Convention c) {
  return c != Convention::kMegatron;
}

std::vector<std::string> DefaultSelectiveModules(Convention c) {
  if (c == Convention::kMegatron) return {"core_attn"};
  return {};
}

std::string DefaultSelectiveAcOption(Convention c) {
  switch (c) {
    case Convention::kTorchtitan:
      return "op";
    case Convention::kTorchtitan2026_03:
      return "2";
    case Convention::kMegatron:
      break;
  }
  return "";
}

DefaultsApplied ApplyConventionDefaults(Convention c, TrainingConfig* t) {
  DefaultsApplied applied;
  if (!t->dp_sharding) {
    t->dp_sharding = DefaultDpSharding(c);
    applied.dp_sharding = true;
  }
  if (!t->run.overlap_shared_experts) {
    t->run.overlap_shared_experts = DefaultSharedExpertOverlap(c);
    applied.shared_expert_overlap = true;
  }
  if (t->recompute == Recompute::kSelective && t->recompute_modules.empty() && t->selective_ac_option.empty()) {
    t->recompute_modules = DefaultSelectiveModules(c);
    applied.selective_modules = !t->recompute_modules.empty();
    t->selective_ac_option = DefaultSelectiveAcOption(c);
    applied.selective_ac_option = !t->selective_ac_option.empty();
  }
  return applied;
}

std::vector<std::string> DefaultsAppliedLines(Convention c, const DefaultsApplied& applied, const TrainingConfig& t, int64_t tp,
                                              bool has_shared_experts) {
  std::vector<std::string> lines;
  const bool megatron = c == Convention::kMegatron;
  if (applied.etp && megatron) {
    lines.push_back(
        fmt::format("etp {} = tp: Megatron-LM sets --expert-tensor-parallel-size to --tensor-model-parallel-size when it is not "
                    "given (megatron/training/arguments.py){}",
                    tp, tp > 1 ? "; --etp 1 keeps the experts unsharded" : ""));
  }
  if (applied.selective_modules) {
    lines.push_back(fmt::format("--recompute selective = {}: Megatron-Core's default recompute_modules (transformer_config.py); "
                                "--recompute-modules chooses others",
                                fmt::join(t.recompute_modules, ",")));
  }
  if (applied.selective_ac_option) {
    lines.push_back(t.selective_ac_option == "op"
                        ? "--recompute selective = --selective-ac-option op: torchtitan's selective activation checkpointing is its "
                          "per-op policy (SelectiveAC, torchtitan/distributed/activation_checkpoint.py; the per-layer option went in "
                          "commit 114151ad4); --selective-ac-option N (earlier releases) or --recompute-modules chooses others"
                        : fmt::format("--recompute selective = --selective-ac-option {}: torchtitan's default "
                                      "activation_checkpoint.selective_ac_option \"{}\" up to v0.2.2 (torchtitan/config/job_config.py), "
                                      "1 block in {} of each stage fully checkpointed; --selective-ac-option N or op, or "
                                      "--recompute-modules, chooses others",
                                      t.selective_ac_option, t.selective_ac_option, t.selective_ac_option));
  }
  if (applied.dp_sharding && megatron) {
    lines.push_back("dp_sharding zero1: the distributed optimizer (--use-distributed-optimizer), as Megatron-LM's MoE examples and "
                    "Megatron-Bridge's recipes set it; Megatron-LM without the flag is plain DDP (--dp-sharding ddp)");
  }
  if (applied.shared_expert_overlap && has_shared_experts) {
    lines.push_back(megatron ? "shared experts not overlapped: Megatron-Core's moe_shared_expert_overlap defaults to False, the shared "
                               "experts run before the router (transformer_config.py); --moe-shared-expert-overlap turns it on"
                             : "shared experts overlap the combine all-to-all: torchtitan's MoE.forward runs them before it uses the "
                               "combined output (torchtitan/models/common/moe.py); simulate --no-overlap turns it off");
  }
  return lines;
}

}  // namespace dockyard
