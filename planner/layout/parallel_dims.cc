// ParallelDims validation (see parallel_dims.h). Rules: torchtitan
// torchtitan/distributed/parallel_dims.py (_validate; its etp rule up to PR #3167), torchtitan PR
// #4794 (ep >= tp for MoE models) and Megatron-Core parallel_state.initialize_model_parallel.
#include "planner/layout/parallel_dims.h"

#include <numeric>

#include <fmt/format.h>

#include "planner/base/checked_math.h"
#include "planner/base/error.h"

namespace dockyard {

int64_t EtpOf(const ParallelDimsOptions& o) {
  return o.etp ? *o.etp : DefaultEtp(o.convention, o.tp);
}

bool CheckEtpForConvention(Convention c, int64_t etp, std::string* error) {
  if (c != Convention::kTorchtitan || etp == 1) return true;
  // pytorch/torchtitan PR #3167 (2026-04-30) removed the etp mesh axis, ExpertTensorParallel and
  // parallelism.expert_tensor_parallel_degree.
  if (error) {
    *error = fmt::format(
        "etp ({}) must be 1 with --convention torchtitan: torchtitan removed expert tensor parallelism (pytorch/torchtitan "
        "PR #3167, 2026-04-30: no etp mesh axis, no expert_tensor_parallel_degree); for a torchtitan release before it use "
        "--convention torchtitan-2026-03 (etp 1 or tp), or --convention megatron",
        etp);
  }
  return false;
}

bool CheckEpAtLeastTp(Convention c, int64_t ep, int64_t tp, const ModelSpec& m, std::string* error) {
  // (The layer count is read only when the degrees break it: this runs for every search candidate.)
  if (c != Convention::kTorchtitan || ep >= tp || m.NumMoeLayers() == 0) return true;
  if (error) {
    *error = fmt::format(
        "ep ({}) must be >= tp ({}) for a MoE model with --convention torchtitan: torchtitan requires EP >= TP for MoE "
        "models (pytorch/torchtitan PR #4794, 2026-09); raise --ep, lower --tp, or for a torchtitan release before it use "
        "--convention torchtitan-2026-03",
        ep, tp);
  }
  return false;
}

namespace {

// A broken rule: formats its message only for a caller that reports it (the layout search counts
// invalid candidates without reporting them) and returns false.
template <typename... Args>
bool Fail(std::string* error, fmt::format_string<Args...> format, Args&&... args) {
  if (error) *error = fmt::format(format, std::forward<Args>(args)...);
  return false;
}

// Each degree in [1, world_size] (dp_shard may be -1: inferred), world_size in [1, kMaxWorldSize].
bool CheckDegreeRanges(const ParallelDimsOptions& o, std::string* error) {
  if (o.world_size < 1) return Fail(error, "world_size must be >= 1, got {}", o.world_size);
  if (o.world_size > kMaxWorldSize) {
    return Fail(error, "world_size ({}) exceeds the largest supported world ({})", o.world_size, kMaxWorldSize);
  }
  const std::pair<const char*, int64_t> degrees[] = {{"dp_replicate", o.dp_replicate}, {"cp", o.cp}, {"tp", o.tp}, {"ep", o.ep},
                                                     {"etp", o.etp.value_or(1)},    {"pp", o.pp}};
  for (const auto& [name, v] : degrees) {
    if (v < 1) return Fail(error, "{} must be >= 1, got {}", name, v);
    if (v > o.world_size) return Fail(error, "{} ({}) cannot exceed world_size ({})", name, v, o.world_size);
  }
  if (o.dp_shard != -1 && o.dp_shard < 1) return Fail(error, "dp_shard must be -1 (infer) or >= 1, got {}", o.dp_shard);
  if (o.dp_shard > o.world_size) return Fail(error, "dp_shard ({}) cannot exceed world_size ({})", o.dp_shard, o.world_size);
  return true;
}

// d.dp_shard (given, or inferred as world / (dp_replicate*cp*tp*pp)); the dense degrees must
// multiply to world_size.
bool ResolveDpShard(const ParallelDimsOptions& o, ParallelDims& d, std::string* error) {
  // Degrees are each <= world_size <= 2^20, so products of up to three fit easily; the full
  // product is checked anyway.
  const int64_t others = CheckedMul(CheckedMul(CheckedMul(o.dp_replicate, o.cp, "degrees"), o.tp, "degrees"), o.pp, "degrees");
  if (o.dp_shard == -1) {
    if (o.world_size % others != 0) {
      return Fail(error,
                  "dp_replicate({}) * cp({}) * tp({}) * pp({}) = {} must divide world_size ({}) to infer dp_shard (default -1: "
                  "world_size / that product)",
                  o.dp_replicate, o.cp, o.tp, o.pp, others, o.world_size);
    }
    d.dp_shard = o.world_size / others;
  } else {
    d.dp_shard = o.dp_shard;
  }
  const int64_t product = CheckedMul(others, d.dp_shard, "degrees");
  if (product != o.world_size) {
    return Fail(error, "Invalid parallel dims: dp_replicate({}) * dp_shard({}) * cp({}) * tp({}) * pp({}) = {} != world_size({})",
                d.dp_replicate, d.dp_shard, d.cp, d.tp, d.pp, product, o.world_size);
  }
  return true;
}

// "etp (2)", or for a defaulted etp "etp (2, Megatron's default: tp, as --etp was not given)".
std::string EtpText(const ParallelDims& d) {
  if (!d.etp_default || d.etp == 1) return fmt::format("etp ({})", d.etp);
  return fmt::format("etp ({}, Megatron's default: tp, as --etp was not given; megatron/training/arguments.py)", d.etp);
}

// torchtitan's expert degrees: no expert TP (torchtitan) or ETP = TP or 1 (torchtitan-2026-03),
// and ep*etp re-factors dp_shard*cp*tp.
bool CheckTorchtitanExpertDims(const ParallelDims& d, int64_t sparse_region, std::string* error) {
  if (!CheckEtpForConvention(d.convention, d.etp, error)) return false;
  // torchtitan before PR #3167: "Currently we only support ETP=TP or ETP=1".
  if (d.etp != 1 && d.etp != d.tp) {
    return Fail(error, "etp ({}) must be 1 or equal to tp ({}) (torchtitan supports ETP=TP or ETP=1)", d.etp, d.tp);
  }
  // The sparse mesh (pp, dp_replicate, efsdp, ep, etp) re-factors dp_shard*cp*tp: EP borrows
  // ranks from dp_shard, cp and tp.
  if (sparse_region % (d.ep * d.etp) != 0) {
    return Fail(error,
                "ep ({}) * etp ({}) = {} must divide dp_shard({}) * cp({}) * tp({}) = {}: expert parallelism borrows its "
                "ranks from dp_shard, cp and tp (torchtitan sparse mesh: efsdp = dp_shard*cp*tp / (ep*etp))",
                d.ep, d.etp, d.ep * d.etp, d.dp_shard, d.cp, d.tp, sparse_region);
  }
  return true;
}

// Megatron-Core's: one data-parallel axis, the expert tensor-model-pipeline size divides the
// world, ep*etp divides one pipeline stage.
bool CheckMegatronExpertDims(const ParallelDims& d, int64_t sparse_region, std::string* error) {
  if (d.dp_replicate != 1) {
    return Fail(error,
                "dp_replicate ({}) must be 1 with the megatron convention: Megatron-Core has one data-parallel axis "
                "(dp = world / (tp*cp*pp)); give it as dp_shard",
                d.dp_replicate);
  }
  // Megatron-Core: world_size must be divisible by expert_tensor_model_pipeline_parallel size.
  const int64_t expert_model = d.etp * d.ep * d.pp;
  if (d.world_size % expert_model != 0) {
    return Fail(error,
                "world_size ({}) must be divisible by {} * ep({}) * pp({}) = {} (Megatron-Core expert "
                "tensor-model-pipeline size)",
                d.world_size, EtpText(d), d.ep, d.pp, expert_model);
  }
  if (sparse_region % (d.ep * d.etp) != 0) {
    return Fail(error, "ep ({}) * {} = {} must divide dp({}) * cp({}) * tp({}) = {} (one pipeline stage)", d.ep, EtpText(d), d.ep * d.etp,
                d.dp_shard, d.cp, d.tp, sparse_region);
  }
  return true;
}

}  // namespace

bool TryBuildParallelDims(const ParallelDimsOptions& o, ParallelDims* out, std::string* error) {
  if (!CheckDegreeRanges(o, error)) return false;
  ParallelDims d;
  d.world_size = o.world_size;
  d.dp_replicate = o.dp_replicate;
  d.cp = o.cp;
  d.tp = o.tp;
  d.ep = o.ep;
  d.etp = EtpOf(o);
  d.etp_default = !o.etp;
  d.pp = o.pp;
  d.convention = o.convention;
  if (!ResolveDpShard(o, d, error)) return false;

  const int64_t sparse_region = d.dp_shard * d.cp * d.tp;  // ranks of one (pp, dp_replicate) slice
  const bool experts_ok = IsTorchtitan(o.convention) ? CheckTorchtitanExpertDims(d, sparse_region, error)
                                                      : CheckMegatronExpertDims(d, sparse_region, error);
  if (!experts_ok) return false;
  d.efsdp = sparse_region / (d.ep * d.etp);
  // Re-check what was derived.
  if (d.pp * d.dp_replicate * d.efsdp * d.ep * d.etp != d.world_size) {
    return Fail(error, "internal: sparse mesh sizes do not multiply to world_size");
  }
  if (out) *out = d;
  return true;
}

bool CheckDimsForModel(const ParallelDims& d, const ModelSpec& m, std::string* error) {
  const auto& e = m.moe;
  if (e.num_experts % d.ep != 0) {
    return Fail(error, "ep ({}) must divide num_experts ({})", d.ep, e.num_experts);
  }
  if (e.top_k < 1 || e.top_k > e.num_experts) {
    return Fail(error, "top_k ({}) must satisfy 1 <= top_k <= num_experts ({})", e.top_k, e.num_experts);
  }
  const auto& a = m.attention;
  if (a.num_attention_heads % d.tp != 0) {
    return Fail(error, "tp ({}) must divide num_attention_heads ({}): attention is sharded by heads", d.tp, a.num_attention_heads);
  }
  if (a.kind == AttentionKind::kGqa && a.num_key_value_heads % d.tp != 0) {
    return Fail(error, "tp ({}) must divide num_key_value_heads ({}): each TP rank holds whole KV heads", d.tp, a.num_key_value_heads);
  }
  // Gated DeltaNet shards its fused projections and conv by key-head groups (vLLM qwen3_next.py,
  // Megatron-Core gated_delta_net.py): each TP rank holds whole key heads and their value heads.
  if (a.linear.present() && a.linear.num_key_heads % d.tp != 0) {
    return Fail(error,
                "tp ({}) must divide the linear-attention key heads ({}): Gated DeltaNet is sharded by key-head "
                "groups",
                d.tp, a.linear.num_key_heads);
  }
  // The TP degree that shards routed experts: torchtitan uses tp when EP is off and etp when it
  // is on; Megatron-Core always uses etp (its expert mesh exists even with ep == 1).
  const bool experts_on_tp = d.ep == 1 && IsTorchtitan(d.convention);
  const int64_t expert_tp = experts_on_tp ? d.tp : d.etp;
  const char* expert_tp_name = experts_on_tp ? "tp" : "etp";
  if (e.moe_intermediate_size % expert_tp != 0) {
    return Fail(error,
                "{} ({}) must divide moe_intermediate_size ({}): routed experts are column/row-sharded on the logical "
                "intermediate size F, not the fused gate_up width 2F ({})",
                expert_tp_name, expert_tp, e.moe_intermediate_size, 2 * e.moe_intermediate_size);
  }
  // (The layer count is read only when the divisibility fails: this runs for every search candidate.)
  if (m.intermediate_size % d.tp != 0 && m.NumMoeLayers() < m.num_hidden_layers) {
    return Fail(error, "tp ({}) must divide intermediate_size ({}) of the dense MLP layers", d.tp, m.intermediate_size);
  }
  if (e.num_shared_experts > 0 && e.shared_expert_intermediate_size % d.tp != 0) {
    return Fail(error, "tp ({}) must divide shared_expert_intermediate_size ({})", d.tp, e.shared_expert_intermediate_size);
  }
  if (d.pp > m.num_hidden_layers) {
    return Fail(error, "pp ({}) cannot exceed num_hidden_layers ({}): every stage needs a layer", d.pp, m.num_hidden_layers);
  }
  if (m.tie_word_embeddings && d.pp > 1 && IsTorchtitan(d.convention)) {
    return Fail(error,
                "tie_word_embeddings (true) with pp ({}) > 1: torchtitan refuses weight tying with pipeline parallelism "
                "(NotImplementedError: Weight tying is not supported with Pipeline Parallel.); use pp 1 or "
                "--convention megatron (its embedding group all-reduces the tied gradient)",
                d.pp);
  }
  // Last: the rules above name what breaks the model's shapes first.
  if (!CheckEpAtLeastTp(d.convention, d.ep, d.tp, m, error)) return false;
  return true;
}

ParallelDims ParallelDims::Build(const ParallelDimsOptions& options) {
  ParallelDims d;
  std::string error;
  if (!TryBuildParallelDims(options, &d, &error)) throw Error(error);
  return d;
}

void ValidateDimsForModel(const ParallelDims& dims, const ModelSpec& model) {
  std::string error;
  if (!CheckDimsForModel(dims, model, &error)) throw Error(error);
}

int64_t DefaultEp(const ParallelDimsOptions& d, int64_t preferred) {
  const bool in_range =
      d.pp >= 1 && d.dp_replicate >= 1 && d.pp <= d.world_size && d.dp_replicate <= d.world_size && d.world_size <= kMaxWorldSize;
  const int64_t slice = in_range ? d.world_size / (d.pp * d.dp_replicate) : 0;
  return slice > 0 ? std::gcd(preferred, slice) : 1;
}

}  // namespace dockyard
