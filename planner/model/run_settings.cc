// Framework run settings (see run_settings.h).
#include "planner/model/run_settings.h"

#include <fmt/format.h>

#include "planner/base/error.h"

namespace dockyard {

const char* ReshardPolicyName(ReshardPolicy p) {
  switch (p) {
    case ReshardPolicy::kAlways:
      return "always";
    case ReshardPolicy::kNever:
      return "never";
    case ReshardPolicy::kDefault:
      break;
  }
  return "default";
}

bool SharedExpertsOverlapped(const RunSettings& s) {
  if (!s.overlap_shared_experts) {
    throw Error("internal: the shared-expert overlap is read before the convention's default was applied (ApplyConventionDefaults)");
  }
  return *s.overlap_shared_experts;
}

ReshardPolicy ParseReshardPolicy(const std::string& text, const std::string& field) {
  if (text == "default") return ReshardPolicy::kDefault;
  if (text == "always") return ReshardPolicy::kAlways;
  if (text == "never") return ReshardPolicy::kNever;
  throw Error(
      fmt::format("{}: unknown reshard-after-forward policy \"{}\"; allowed: default (= not pp), always, never "
                  "(torchtitan fsdp_reshard_after_forward)",
                  field, text));
}

}  // namespace dockyard
