// A plan written as torchtitan command-line overrides (torchtitan_config.h EmitTorchtitanConfig).
// The reader (torchtitan_config.cc ImportTorchtitanConfig) reads every line written here back to the
// same plan (torchtitan_config_test "round trip").
#include <algorithm>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "planner/base/error.h"
#include "planner/frameworks/torchtitan_config.h"
#include "planner/layout/convention.h"
#include "planner/layout/megatron_split.h"
#include "planner/model/dispatcher.h"
#include "planner/model/training.h"

namespace dockyard {
namespace {

[[noreturn]] void Refuse(const std::string& what) { throw Error("--emit torchtitan: " + what); }

struct Lines {
  std::vector<std::string> out;
  void Add(const std::string& key, const std::string& value) {
    if (TorchtitanFieldTable("current").count(key) == 0) throw Error("internal: " + key + " is not a torchtitan config key");
    out.push_back("--" + key + " " + value);
  }
  void Add(const std::string& key, int64_t value) { Add(key, std::to_string(value)); }
};

// parallelism.module_fqns_per_model_part for `stage_layers` decoder layers per virtual stage (layers
// numbered in virtual-stage order) in tyro's spelling: one word per stage, its modules comma-separated
// (torchtitan/config/manager.py list_str_rule parses each list[str] as "A,B,C"; checked with tyro
// 1.0.17). torchtitan's module names (pipeline_parallel.py _generate_llm_fqn_per_model_part):
// tok_embeddings opens the first stage, norm and lm_head close the last.
std::string TorchtitanModuleSplitWords(const std::vector<int64_t>& stage_layers) {
  std::vector<std::string> stages;
  int64_t layer = 0;
  for (size_t s = 0; s < stage_layers.size(); ++s) {
    std::vector<std::string> names;
    if (s == 0) names.push_back(kTorchtitanEmbedding);
    for (int64_t i = 0; i < stage_layers[s]; ++i) names.push_back(fmt::format("layers.{}", layer++));
    if (s + 1 == stage_layers.size()) {
      names.push_back(kTorchtitanNorm);
      names.push_back(TorchtitanOutputModule(false));
    }
    stages.push_back(fmt::format("{}", fmt::join(names, ",")));
  }
  return fmt::format("{}", fmt::join(stages, " "));
}

}  // namespace

std::string EmitTorchtitanConfig(const Plan& plan, int64_t global_batch_size, const std::vector<std::string>& header_lines) {
  const ParallelDims& d = plan.dims;
  const TrainingConfig& t = plan.training;
  const RunSettings& run = t.run;
  if (d.convention == Convention::kMegatron) {
    Refuse("the plan is under --convention megatron, whose rank order and sharding torchtitan does not use; plan it with --convention torchtitan");
  }
  if (t.dp_sharding.value_or(DpSharding::kFsdp) != DpSharding::kFsdp) Refuse("torchtitan shards data parallelism with FSDP2 only (--dp-sharding fsdp)");
  // torchtitan from PR #4794 refuses ep < tp for an MoE model (a TOML-era plan may have it).
  if (plan.model.moe.num_experts > 0 && d.ep < d.tp) {
    Refuse(fmt::format("ep {} < tp {} (torchtitan at {} requires ep >= tp for an MoE model, PR #4794)", d.ep, d.tp,
                       std::string(kTorchtitanCommit).substr(0, 9)));
  }
  if (d.etp > 1) Refuse(fmt::format("expert TP {} (torchtitan at {} has none)", d.etp, std::string(kTorchtitanCommit).substr(0, 9)));
  if (!run.pipeline_layout.empty() || run.account_for_embedding || run.account_for_loss) Refuse("a Megatron pipeline layout");
  if (run.schedule != "1f1b") Refuse("the " + run.schedule + " pipeline schedule (torchtitan's DualPipeV is another schedule)");
  if (t.precision == "fp8" && t.fp8_recipe == "blockwise") Refuse("blockwise FP8 (torchtitan's Float8 recipes are tensorwise and rowwise)");
  if (t.fp8_dispatch) Refuse("dockyard's --fp8-dispatch");
  if (t.optimizer != Optimizer::kAdamW) Refuse(fmt::format("--optimizer {} (torchtitan's optimizers are Adam / AdamW)", OptimizerName(t.optimizer)));
  if (t.grad_dtype != "float32") Refuse("--grad-dtype " + t.grad_dtype + " (torchtitan reduces in float32)");
  if (t.param_dtype != "bfloat16" && t.param_dtype != "float32") Refuse("--param-dtype " + t.param_dtype);
  if (t.dispatcher == Dispatcher::kDeredundency || t.dispatcher == Dispatcher::kAllGather) {
    Refuse(fmt::format("the {} dispatcher (torchtitan's MoE layers dispatch by all-to-all, DeepEP or HybridEP: --dispatcher all_to_all or deepep)",
                       DispatcherName(t.dispatcher)));
  }
  if (run.overlap_moe_ep_comm) Refuse("Megatron's --overlap-moe-expert-parallel-comm");

  Lines l;
  l.Add("parallelism.data_parallel_replicate_degree", d.dp_replicate);
  l.Add("parallelism.data_parallel_shard_degree", d.dp_shard);
  l.Add("parallelism.tensor_parallel_degree", d.tp);
  l.Add("parallelism.context_parallel_degree", d.cp);
  l.Add("parallelism.pipeline_parallel_degree", d.pp);
  l.Add("parallelism.expert_parallel_degree", d.ep);
  l.Add("parallelism.fsdp_reshard_after_forward", ReshardPolicyName(run.reshard_after_forward));
  const int64_t microbatches = t.num_microbatches.value_or(d.pp);
  bool module_split = false;  // the split written as module lists: torchtitan's generator cannot give it
  if (d.pp > 1) {
    // The stage split: the first / last stage less layers (and layers per stage with vpp) for which
    // torchtitan's generator gives the plan's layers per rank (dockyard's even split: 0 and 0).
    const int64_t n = plan.model.num_hidden_layers;
    const int64_t stages = d.pp * run.vpp;
    // The plan's decoder layers per virtual stage (v x pp + p: rank p's chunk v), or per rank at vpp 1.
    const std::vector<int64_t> want = LayersPerVirtualStage(plan.layer_stage, plan.layer_chunk, d.pp, run.vpp);
    // Stages per rank: 1 for 1F1B, 2 for Interleaved1F1B without pipeline_parallel_layers_per_stage
    // (_get_pipeline_metadata), else stages = ceil((layers + first + last) / layers_per_stage).
    auto layers_per_stage = [&](int64_t first, int64_t last) -> int64_t {
      if (run.vpp <= 2) return 0;
      const int64_t effective = n + first + last;
      for (int64_t k = 1; k <= effective; ++k) {
        if ((effective + k - 1) / k == stages) return k;
      }
      return -1;
    };
    std::optional<std::pair<int64_t, int64_t>> less;
    int64_t lps = 0;
    for (int64_t first = 0; first <= n && !less; ++first) {
      for (int64_t last = 0; last <= n && !less; ++last) {
        std::string refused;
        const std::vector<int64_t> generated = TorchtitanStageLayers(stages, n, first, last, &refused);
        if (!generated.empty() && generated == want && (lps = layers_per_stage(first, last)) >= 0) less = {first, last};
      }
    }
    l.Add("parallelism.pipeline_parallel_schedule", run.vpp > 1 ? "Interleaved1F1B" : "1F1B");
    if (less) {
      l.Add("parallelism.pipeline_parallel_first_stage_less_layers", less->first);
      l.Add("parallelism.pipeline_parallel_last_stage_less_layers", less->second);
      if (lps > 0) l.Add("parallelism.pipeline_parallel_layers_per_stage", lps);
      // torchtitan runs set stage lists in place of the generator (pipeline_llm): none, whatever the
      // config function sets.
      l.Add("parallelism.module_fqns_per_model_part", "None");
    } else {
      // torchtitan runs any split named module by module: _pipeline_module_split makes one stage
      // per list, stage s on rank s % pp.
      l.Add("parallelism.module_fqns_per_model_part", TorchtitanModuleSplitWords(want));
      module_split = true;
    }
    l.Add("parallelism.num_pp_microbatches", microbatches);
  }
  // Token counts: a micro-batch of micro_batch_size sequences; a step of the global batch.
  const int64_t dp = d.dp_replicate * d.dp_shard;
  const int64_t sequences = global_batch_size > 0 ? global_batch_size : t.micro_batch_size * dp * microbatches * run.grad_accumulation_steps;
  l.Add("training.num_tokens_per_microbatch_per_dp_rank", t.micro_batch_size * t.seq_len);
  l.Add("training.max_context_length", t.seq_len);
  l.Add("training.num_tokens_per_train_step", sequences * t.seq_len);
  l.Add("training.mixed_precision_param", t.param_dtype);
  l.Add("training.mixed_precision_reduce", "float32");
  l.Add("training.max_norm", fmt::format("{}", run.clip_grad));
  l.Add("optimizer.implementation", t.optimizer_states_dtype == "bfloat16" ? "fused_opt_states_bf16" : "fused");
  if (t.mtp_layers > 0) Refuse("MTP modules (torchtitan sets them in the model flavor: plan without --mtp-layers)");
  std::string ac;
  switch (t.recompute) {
    case Recompute::kNone: ac = "none"; break;
    case Recompute::kFull: ac = "full"; break;
    case Recompute::kSelective:
      if (t.selective_ac_option != "op") {
        Refuse(t.selective_ac_option.empty() ? std::string("Megatron recompute modules (torchtitan's selective checkpointing is per-op: --selective-ac-option op)")
                                             : "selective_ac_option " + t.selective_ac_option +
                                                   " (every N-th block; removed from torchtitan in 114151ad4: --selective-ac-option op)");
      }
      ac = "selective";
      break;
  }

  std::string out;
  for (const std::string& h : header_lines) out += "# " + h + "\n";
  out += fmt::format("# torchtitan at {}: command-line overrides for {} GPUs; launch as\n", std::string(kTorchtitanCommit).substr(0, 9), d.world_size);
  out += "#   torchrun --nnodes N --nproc-per-node G -m torchtitan.train --module MODEL --config FUNCTION $(grep -v '^#' THIS_FILE)\n";
  out += "# The config function keeps what is not here (model flavor, data, optimizer hyper-parameters).\n";
  // What only the config function sets is not in the overrides: reading them back needs its flags.
  std::vector<std::string> read_back;
  if (t.precision == "fp8" && t.fp8_recipe == "mxfp8") {
    out += "# MXFP8: add MXFP8LinearConverter / MXFP8GroupedExpertsConverter to the function's model_registry(converters=...).\n";
    read_back.push_back("--precision fp8 --fp8-recipe mxfp8");
  } else if (t.precision == "fp8") {
    out += "# FP8: add Float8LinearConverter / Float8GroupedExpertsConverter to the function's model_registry(converters=...).\n";
    read_back.push_back(fmt::format("--precision fp8 --fp8-recipe {}", t.fp8_recipe));
  }
  if (t.dispatcher == Dispatcher::kDeepEp) {
    const bool hybrid = t.moe_flex_dispatcher_backend == FlexBackend::kHybridEp;
    out += fmt::format("# DeepEP: model_registry(moe_comm_backend=\"{}\") in the config function.\n", hybrid ? "hybridep" : "deepep");
    read_back.push_back(hybrid ? "--dispatcher deepep --moe-flex-dispatcher-backend hybridep" : "--dispatcher deepep");
  }
  if (!read_back.empty()) {
    out += fmt::format("# dockyard reads these overrides back (--from-torchtitan) without the config function: add {} to plan this row.\n",
                       fmt::join(read_back, " "));
  }
  if (module_split) {
    out += "# torchtitan's stage generator (first / last stage less layers, pipeline_parallel_layers_per_stage) does not give this\n"
           "# split: parallelism.module_fqns_per_model_part lists each virtual stage's modules (stage s on pipeline rank s % pp).\n";
  }
  for (const std::string& line : l.out) out += line + "\n";
  out += "activation-checkpoint:" + ac + "\n";
  return out;
}

}  // namespace dockyard
