// Framework run settings (see run_settings.h).
#include "planner/model/run_settings.h"

#include <algorithm>
#include <vector>

#include <cstdlib>

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

int64_t DdpBucketElems(const RunSettings& s, int64_t dp_cp) {
  if (s.ddp_bucket_size > 0) return s.ddp_bucket_size;
  return std::max<int64_t>(40000000, 1000000 * dp_cp);
}

bool ParamGatherAligned(const RunSettings& s) {
  return s.align_param_gather && s.vpp > 1;
}

bool P2pOverlapped(const RunSettings& s) {
  return s.overlap_p2p_comm && s.vpp > 1;
}

bool TpCommOverlapped(const RunSettings& s, int64_t tp) {
  return s.tp_comm_overlap && tp > 1;
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

void ValidateClipGrad(double clip_grad, const std::string& field) {
  if (!(clip_grad >= 0) || clip_grad > 1e300) {
    throw Error(fmt::format("{}: must be a finite number >= 0 (the gradient norm's clipping threshold; 0 = no norm and no clipping, "
                            "Megatron --clip-grad), got {}",
                            field, clip_grad));
  }
}

namespace {

// The numbers of "MAJOR.MINOR[.PATCH]", or an empty vector when `text` is not of that form.
std::vector<long> VersionParts(const std::string& text) {
  std::vector<long> parts;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t dot = std::min(text.find('.', start), text.size());
    const std::string part = text.substr(start, dot - start);
    if (part.empty() || part.size() > 6 || part.find_first_not_of("0123456789") != std::string::npos) return {};
    if (part.size() > 1 && part[0] == '0') return {};  // "012": a tag never writes one
    parts.push_back(std::strtol(part.c_str(), nullptr, 10));
    start = dot + 1;
  }
  if (parts.size() < 2 || parts.size() > 3) return {};
  return parts;
}

// Whether the release `v` (VersionParts, non-empty) is 0.`minor` or later.
bool AtLeastZeroPoint(const std::vector<long>& v, long minor) {
  return v[0] > 0 || v[1] >= minor;
}

}  // namespace

void ValidateMegatronCoreVersion(const std::string& version, const std::string& field) {
  if (version.empty() || !VersionParts(version).empty()) return;
  throw Error(fmt::format(
      "{}: must be a Megatron-Core release MAJOR.MINOR or MAJOR.MINOR.PATCH without leading zeros (its tag core_v0.12.0 written "
      "0.12.0 or 0.12), got \"{}\"",
      field, version));
}

void ValidateCrossEntropyFusionImpl(const RunSettings& s, const std::string& impl_field, const std::string& fused_field,
                                    const std::string& version_field) {
  const std::string& impl = s.cross_entropy_fusion_impl;
  if (impl == "native") return;
  if (impl != "te") {
    throw Error(fmt::format("{}: must be native (Megatron-Core's fused cross-entropy) or te (TransformerEngine's), got \"{}\"",
                            impl_field, impl));
  }
  if (!s.fused_cross_entropy) {
    throw Error(fmt::format(
        "{} te: names the implementation of the fused cross-entropy, which Megatron reads only with --cross-entropy-loss-fusion "
        "(language_module.py compute_language_model_loss); add {} fused",
        impl_field, fused_field));
  }
  const std::vector<long> v = VersionParts(s.megatron_core_version);
  if (v.empty()) {
    throw Error(fmt::format(
        "{} te: Megatron-LM refuses TransformerEngine's cross-entropy from core_v0.19.0 on (\"disabled due to stability issues\", "
        "megatron/training/arguments.py, NVIDIA/Megatron-LM#5115), and the current release is assumed; give {} with the "
        "release the run used (0.12 to 0.18), or use native",
        impl_field, version_field));
  }
  const bool before_0_12 = !AtLeastZeroPoint(v, 12), from_0_19 = AtLeastZeroPoint(v, 19);
  if (before_0_12 || from_0_19) {
    throw Error(fmt::format(
        "{} te with {} {}: Megatron-Core has TransformerEngine's cross-entropy from core_v0.12.0 (ADLR/megatron-lm!2707) and "
        "Megatron-LM refuses it from core_v0.19.0 (NVIDIA/Megatron-LM#5115): a release from 0.12 to 0.18, or native",
        impl_field, version_field, s.megatron_core_version));
  }
}

void ValidateTeOpFuser(const RunSettings& s, const std::string& fuser_field, const std::string& version_field) {
  if (!s.use_transformer_engine_op_fuser) return;
  const std::vector<long> v = VersionParts(s.megatron_core_version);
  if (v.empty() || AtLeastZeroPoint(v, 18)) return;
  throw Error(fmt::format("{} with {} {}: Megatron-Core has TransformerEngine's op fuser for the experts "
                          "(use_transformer_engine_op_fuser) from core_v0.18.0 on; a release from 0.18, or drop the flag",
                          fuser_field, version_field, s.megatron_core_version));
}

bool TeCrossEntropy(const RunSettings& s) { return s.fused_cross_entropy && s.cross_entropy_fusion_impl == "te"; }

bool MegatronProbsInActivation(const RunSettings& s) {
  if (s.megatron_core_version.empty()) return true;
  const std::vector<long> v = VersionParts(s.megatron_core_version);
  if (v.empty()) return true;  // refused by ValidateMegatronCoreVersion before anything reads it
  return AtLeastZeroPoint(v, 13);
}

}  // namespace dockyard
