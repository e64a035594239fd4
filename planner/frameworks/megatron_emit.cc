// A plan written as Megatron-LM arguments (megatron_args.h EmitMegatronArgs). The reader
// (megatron_args.cc ImportMegatronArgs, MegatronModel) reads every line written here back to the
// same plan (megatron_args_test "round trip").
#include <algorithm>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <cctype>

#include <fmt/format.h>

#include "planner/base/error.h"
#include "planner/frameworks/megatron_args.h"
#include "planner/layout/convention.h"
#include "planner/layout/megatron_split.h"
#include "planner/model/dispatcher.h"
#include "planner/model/recompute.h"
#include "planner/model/training.h"

namespace dockyard {
namespace {

struct Lines {
  std::vector<std::string> out;
  std::set<std::string> keys;
  void Add(const std::string& key, const std::string& value = "") {
    if (MegatronArgTable().count(key) == 0) throw Error("internal: " + key + " is not a Megatron-LM argument");
    keys.insert(key);
    out.push_back(value.empty() ? key : key + " " + value);
  }
  void Add(const std::string& key, int64_t value) { Add(key, std::to_string(value)); }
};

// Runs of equal values as a Megatron list expression: [1,1,1,0] -> "[1]*3+[0]*1".
std::string FreqExpressionOf(const std::vector<bool>& moe_layers) {
  std::vector<std::string> parts;
  for (size_t i = 0; i < moe_layers.size();) {
    size_t j = i;
    while (j < moe_layers.size() && moe_layers[j] == moe_layers[i]) ++j;
    parts.push_back(fmt::format("[{}]*{}", moe_layers[i] ? 1 : 0, j - i));
    i = j;
  }
  return fmt::format("{}", fmt::join(parts, "+"));
}

// A value as a word of the bash fragment: bare when it holds only plain characters, else quoted.
std::string ShellWord(const std::string& v) {
  const bool plain = !v.empty() && std::all_of(v.begin(), v.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || std::string("._/:=+,@%-").find(c) != std::string::npos;
  });
  if (plain) return v;
  // A leading ~ stays unquoted, so that bash expands it on launch as it did in the file.
  if (v[0] == '~' && v.size() > 1 && ShellWord(v.substr(1))[0] != '\'' && ShellWord(v.substr(1))[0] != '"') return v;
  if (v.find('\'') == std::string::npos) return "'" + v + "'";
  std::string out = "\"";  // a single quote inside: double quotes, with " \ $ ` escaped as bash reads them
  for (const char c : v) {
    if (std::string("\"\\$`").find(c) != std::string::npos) out += '\\';
    out += c;
  }
  return out + "\"";
}

// The value `key` has in `config` (its first value), or nullopt.
std::optional<std::string> ConfigValue(const FrameworkConfig* config, const std::string& key) {
  if (config == nullptr) return std::nullopt;
  const ConfigArg* a = config->Find(key);
  if (a == nullptr || a->values.empty()) return std::nullopt;
  return a->values.front();
}

// Megatron's data-parallel degree: what the world leaves after tp, cp and pp.
int64_t DataParallel(const ParallelDims& d) { return d.world_size / (d.tp * d.cp * d.pp); }

[[noreturn]] void Refuse(const std::string& what) {
  throw Error("--emit megatron: " + what + " has no Megatron-LM argument");
}

// `vocab`: the unpadded vocabulary; `seq_len`: the job's sequence length (a floor for the position table).
void EmitArchitecture(const ModelSpec& m, int64_t vocab, int64_t seq_len, const FrameworkConfig* config, Lines& l) {
  const AttentionSpec& att = m.attention;
  if (att.sinks) {
    // The reader takes --softmax-type learnable and --window-size; the writer does not yet write them,
    // nor gpt-oss's --quick-geglu activation (docs/frameworks.md).
    throw Error("--emit megatron: attention sinks (" + m.family +
                "): not written yet (with its window and quick-GeGLU activation; --from-megatron reads --softmax-type learnable and "
                "--window-size)");
  }
  if (att.linear.present()) Refuse("linear attention (" + m.family + ")");
  if (att.indexer.present()) Refuse("DeepSeek Sparse Attention's indexer");
  if (att.output_gate) Refuse("a gated attention output (" + m.family + ")");
  if (att.qk_norm == QkNorm::kFullWidth) Refuse("q/k normalization over the full projection width (" + m.family + ")");
  if (m.moe.router_bias || m.lm_head_bias) Refuse("a router or lm_head bias (" + m.family + ")");
  if (m.norm == NormKind::kLayerNorm && !m.norm_bias) Refuse("LayerNorm without a bias (" + m.family + "; Megatron's LayerNorm has one)");
  l.Add("--num-layers", m.num_hidden_layers);
  l.Add("--hidden-size", m.hidden_size);
  l.Add("--ffn-hidden-size", m.intermediate_size > 0 ? m.intermediate_size : m.moe.moe_intermediate_size);
  l.Add("--num-attention-heads", att.num_attention_heads);
  if (att.kind == AttentionKind::kMla) {
    l.Add("--multi-latent-attention");
    if (att.q_lora_rank > 0) l.Add("--q-lora-rank", att.q_lora_rank);
    l.Add("--kv-lora-rank", att.kv_lora_rank);
    l.Add("--qk-head-dim", att.qk_nope_head_dim);
    l.Add("--qk-pos-emb-head-dim", att.qk_rope_head_dim);
    l.Add("--v-head-dim", att.v_head_dim);
    l.Add("--qk-layernorm");  // MLA's q_a / kv_a latent norms: Megatron builds them only with it
  } else {
    if (att.num_key_value_heads != att.num_attention_heads) {
      l.Add("--group-query-attention");
      l.Add("--num-query-groups", att.num_key_value_heads);
    }
    l.Add("--kv-channels", att.head_dim);
    if (att.qk_norm == QkNorm::kPerHead) l.Add("--qk-layernorm");
  }
  l.Add("--normalization", m.norm == NormKind::kRmsNorm ? "RMSNorm" : "LayerNorm");
  l.Add("--swiglu");
  if (!att.o_bias && !m.moe.expert_bias) {
    l.Add("--disable-bias-linear");
    if (att.qkv_bias) l.Add("--add-qkv-bias");
  } else if (!(att.o_bias && m.moe.expert_bias && (att.qkv_bias || att.kind == AttentionKind::kMla))) {
    Refuse("biases on some linear layers only (" + m.family + ")");
  }
  if (!m.tie_word_embeddings) l.Add("--untie-embeddings-and-output-weights");
  l.Add("--vocab-size", vocab);
  l.Add("--position-embedding-type", "rope");
  // The job's own position table, when the config gives one (carried over), else the model's.
  if (!ConfigValue(config, "--max-position-embeddings")) {
    l.Add("--max-position-embeddings", std::max(m.max_position_embeddings, seq_len));
  }
  l.Add("--num-experts", m.moe.num_experts);
  l.Add("--moe-router-topk", m.moe.top_k);
  l.Add("--moe-ffn-hidden-size", m.moe.moe_intermediate_size);
  if (m.moe.num_shared_experts > 0) {
    l.Add("--moe-shared-expert-intermediate-size", m.moe.shared_expert_intermediate_size);
    if (m.moe.shared_expert_gate) l.Add("--moe-shared-expert-gate");
  }
  if (std::find(m.moe_layers.begin(), m.moe_layers.end(), false) != m.moe_layers.end()) {
    l.Add("--moe-layer-freq", "'" + FreqExpressionOf(m.moe_layers) + "'");
  }
  l.Add("--moe-router-score-function", m.moe.score_func);
  if (m.moe.score_correction_bias) l.Add("--moe-router-enable-expert-bias");
  if (m.moe.routed_scaling_factor != 1.0) l.Add("--moe-router-topk-scaling-factor", fmt::format("{}", m.moe.routed_scaling_factor));
  if (m.moe.n_group > 1) {
    l.Add("--moe-router-num-groups", m.moe.n_group);
    l.Add("--moe-router-group-topk", m.moe.topk_group);
  }
}

void EmitLayout(const Plan& plan, int64_t global_batch_size, Lines& l) {
  if (plan.training.run.grad_accumulation_steps > 1) Refuse("torchtitan's outer gradient-accumulation loop (--grad-accumulation-steps)");
  const ParallelDims& d = plan.dims;
  const TrainingConfig& t = plan.training;
  const RunSettings& run = t.run;
  l.Add("--tensor-model-parallel-size", d.tp);
  l.Add("--pipeline-model-parallel-size", d.pp);
  l.Add("--context-parallel-size", d.cp);
  l.Add("--expert-model-parallel-size", d.ep);
  l.Add("--expert-tensor-parallel-size", d.etp);
  if (d.tp > 1) l.Add("--sequence-parallel");
  switch (t.dp_sharding.value_or(DpSharding::kZero1)) {
    case DpSharding::kZero1:
      l.Add("--use-distributed-optimizer");
      if (d.dp_replicate > 1) l.Add("--num-distributed-optimizer-instances", d.dp_replicate);
      break;
    case DpSharding::kFsdp:
      if (d.dp_replicate > 1) Refuse("FSDP with dp_replicate > 1 (HSDP)");
      l.Add("--use-megatron-fsdp");
      l.Add("--data-parallel-sharding-strategy", "optim_grads_params");
      l.Add("--use-distributed-optimizer");
      break;
    case DpSharding::kDdp:
      if (d.dp_replicate > 1) Refuse("DDP with dp_replicate > 1");
      break;
  }
  const int64_t dp = DataParallel(d);
  const int64_t microbatches = t.num_microbatches.value_or(d.pp);
  l.Add("--micro-batch-size", t.micro_batch_size);
  // Megatron: global batch = micro batch x dp x micro-batches per step (one schedule).
  l.Add("--global-batch-size", global_batch_size > 0 ? global_batch_size : t.micro_batch_size * dp * microbatches);
  l.Add("--seq-length", t.seq_len);
  // Where Megatron refuses dockyard's even split without a split flag, the flag that reproduces it.
  const std::optional<MegatronSplitFlag> split =
      MegatronEvenSplitFlag(t, plan.model.num_hidden_layers, d.pp, d.convention == Convention::kMegatron);
  // A per-rank split (--pp-layer-split) Megatron's first / last stage flags cannot give: middle
  // stages of unequal layers, or with virtual stages a stage whose layers do not divide into them
  // (transformer_config.py raises). The layout places every layer where the plan does
  // (megatron_split.h SplitPipelineLayout, InterleavedLayerSplit).
  const std::vector<int64_t>& s = t.pp_layer_split;
  const size_t n = s.size();
  std::string split_layout;
  if (IsVirtualStageSplit(s, d.pp, run.vpp) && run.pipeline_layout.empty()) {
    split_layout = VirtualStagesPipelineLayout(s, t.mtp_layers);  // one entry per virtual stage: only a layout lists them
  } else if (n >= 2 && run.pipeline_layout.empty()) {
    bool flags_give_it = true;
    for (size_t i = 2; i + 1 < n; ++i) flags_give_it = flags_give_it && s[i] == s[1];
    for (int64_t layers : s) flags_give_it = flags_give_it && (run.vpp <= 1 || layers % run.vpp == 0);
    if (!flags_give_it) split_layout = SplitPipelineLayout(s, run.vpp, t.mtp_layers);
  }
  if (!run.pipeline_layout.empty()) {
    l.Add("--pipeline-model-parallel-layout", "'" + run.pipeline_layout + "'");
  } else if (!split_layout.empty()) {
    l.Add("--pipeline-model-parallel-layout", "'" + split_layout + "'");
  } else if (split && split->key == "--pipeline-model-parallel-layout") {
    l.Add(split->key, "'" + split->value + "'");
  } else {
    if (run.vpp > 1) l.Add("--num-virtual-stages-per-pipeline-rank", run.vpp);
    if (split) l.Add(split->key, split->value);
  }
  if (n >= 2 && run.pipeline_layout.empty() && split_layout.empty()) {
    // Megatron splits unevenly only at the first and last stage: the middle stages are equal.
    const int64_t middle = n > 2 ? s[1] : -1;
    if (middle < 0 || s[0] != middle) l.Add("--decoder-first-pipeline-num-layers", s[0]);
    if (middle < 0 || s[n - 1] != middle) l.Add("--decoder-last-pipeline-num-layers", s[n - 1]);
  }
  if (run.account_for_embedding) l.Add("--account-for-embedding-in-pipeline-split");
  if (run.account_for_loss) l.Add("--account-for-loss-in-pipeline-split");
  if (run.schedule != "1f1b") Refuse("the " + run.schedule + " pipeline schedule");
}

void EmitSettings(const Plan& plan, const FrameworkConfig* config, Lines& l) {
  const TrainingConfig& t = plan.training;
  const RunSettings& run = t.run;
  if (t.recompute == Recompute::kFull) {
    // The config's method and layer count when it recomputes fully too (dockyard prices every layer).
    const bool config_full = ConfigValue(config, "--recompute-granularity") == std::optional<std::string>("full");
    l.Add("--recompute-granularity", "full");
    l.Add("--recompute-method", config_full ? ConfigValue(config, "--recompute-method").value_or("uniform") : "uniform");
    l.Add("--recompute-num-layers", config_full ? ConfigValue(config, "--recompute-num-layers").value_or("1") : "1");
  } else if (t.recompute == Recompute::kSelective) {
    if (!t.selective_ac_option.empty()) Refuse("torchtitan's selective_ac_option");
    if (t.recompute_modules.empty()) Refuse("dockyard's default selective set (give --recompute-modules)");
    l.Add("--recompute-granularity", "selective");
    l.Add("--recompute-modules", fmt::format("{}", fmt::join(t.recompute_modules, " ")));
  }
  switch (t.dispatcher) {
    case Dispatcher::kAllToAll: l.Add("--moe-token-dispatcher-type", "alltoall"); break;
    case Dispatcher::kAllGather: l.Add("--moe-token-dispatcher-type", "allgather"); break;
    case Dispatcher::kDeepEp:
      l.Add("--moe-token-dispatcher-type", "flex");
      l.Add("--moe-flex-dispatcher-backend", FlexBackendName(t.moe_flex_dispatcher_backend.value_or(FlexBackend::kDeepEp)));
      if (run.moe_flex_dispatcher_num_sms > 0) l.Add("--moe-flex-dispatcher-num-sms", std::to_string(run.moe_flex_dispatcher_num_sms));
      break;
    case Dispatcher::kDeredundency: Refuse("the deredundency dispatcher");
  }
  // What dockyard prices (both off by default in Megatron-LM; the import says when a file lacks them).
  l.Add("--moe-grouped-gemm");
  l.Add("--moe-permute-fusion");
  // Megatron-FSDP overlaps its collectives with these two, as dockyard prices FSDP.
  const bool fsdp = t.dp_sharding == DpSharding::kFsdp;
  if (run.overlap_grad_reduce || fsdp) l.Add("--overlap-grad-reduce");
  if (run.overlap_param_gather || fsdp) l.Add("--overlap-param-gather");
  // The DDP's parameter-gather settings (param_gather.h) where they differ from Megatron-LM's defaults.
  if (!fsdp) {
    if (run.overlap_param_gather_with_optimizer_step) l.Add("--overlap-param-gather-with-optimizer-step");
    if (!run.align_param_gather && run.vpp > 1) l.Add("--no-align-param-gather");
    if (run.ddp_bucket_size > 0) l.Add("--ddp-bucket-size", std::to_string(run.ddp_bucket_size));
  }
  if (!run.gradient_accumulation_fusion) l.Add("--no-gradient-accumulation-fusion");
  if (run.use_transformer_engine_op_fuser) l.Add("--use-transformer-engine-op-fuser");
  if (run.overlap_moe_ep_comm) l.Add("--overlap-moe-expert-parallel-comm");
  if (run.delay_wgrad_compute) l.Add("--delay-wgrad-compute");
  if (run.overlap_shared_experts.value_or(false) && plan.model.moe.num_shared_experts > 0) l.Add("--moe-shared-expert-overlap");
  if (plan.dims.cp > 1) l.Add("--cp-comm-type", run.cp_comm);
  if (run.moe_pad_expert_input_to_capacity) {
    // Megatron-LM asserts a capacity factor with the padding: the file's, else 1 (what dockyard prices).
    l.Add("--moe-expert-capacity-factor", ConfigValue(config, "--moe-expert-capacity-factor").value_or("1.0"));
    l.Add("--moe-pad-expert-input-to-capacity");
  }
  if (run.full_iteration_cuda_graph) {
    l.Add("--cuda-graph-impl", "full_iteration");
  } else if (run.cuda_graphs) {
    // The file's spelling (--cuda-graph-impl local / full_iteration, or the older --enable-cuda-graph), else TE's graphs.
    if (config && config->Find("--enable-cuda-graph")) l.Add("--enable-cuda-graph");
    else l.Add("--cuda-graph-impl", ConfigValue(config, "--cuda-graph-impl").value_or("transformer_engine"));
  }
  if (t.param_dtype == "bfloat16") l.Add("--bf16");
  else if (t.param_dtype == "float16") l.Add("--fp16");
  else Refuse("--param-dtype " + t.param_dtype);
  if (t.precision == "fp8") {
    // The config's format and recipe where they price as the plan's (hybrid as e4m3, delayed as tensorwise).
    const std::string recipe = ConfigValue(config, "--fp8-recipe").value_or("delayed");
    const bool same_recipe = (recipe == "delayed" ? "tensorwise" : recipe) == t.fp8_recipe;
    l.Add("--fp8-format", ConfigValue(config, "--fp8-format").value_or("e4m3"));
    l.Add("--fp8-recipe", config && config->Find("--fp8-format") && same_recipe ? recipe : t.fp8_recipe);
    if (t.fp8_param_gather) l.Add("--fp8-param-gather");
  }
  if (t.fp8_dispatch) Refuse("dockyard's --fp8-dispatch (an FP8 dispatch all-to-all)");
  if (t.fp8_dot_product_attention) {
    Refuse("--fp8-dot-product-attention (TransformerEngine's FP8 attention, TransformerConfig.fp8_dot_product_attention: set by "
           "Megatron-Bridge's mixed precision, --emit megatron-bridge)");
  }
  if (t.grad_dtype == "bfloat16") l.Add("--grad-reduce-in-bf16");
  else if (t.grad_dtype != "float32") Refuse("--grad-dtype " + t.grad_dtype);
  if (t.optimizer == Optimizer::kAdamW) {
    l.Add("--optimizer", "adam");
    if (t.optimizer_states_dtype == "bfloat16") {
      l.Add("--use-precision-aware-optimizer");
      l.Add("--exp-avg-dtype", "bf16");
      l.Add("--exp-avg-sq-dtype", "bf16");
    }
  } else if (t.optimizer == Optimizer::kMuon) {
    l.Add("--optimizer", "muon");
  } else {
    l.Add("--optimizer", "sgd");
  }
  // The file's spelling of the same threshold ("1.0"), else the shortest.
  const std::optional<std::string> clip = ConfigValue(config, "--clip-grad");
  l.Add("--clip-grad", clip && std::stod(*clip) == run.clip_grad ? *clip : fmt::format("{}", run.clip_grad));
  if (!run.check_for_nan_in_grad) l.Add("--no-check-for-nan-in-loss-and-grad");
  if (!run.overlap_p2p_comm) l.Add("--no-overlap-p2p-communication");
  // Megatron asserts --tp-comm-overlap needs sequence parallelism, which it turns off at tp 1.
  if (TpCommOverlapped(run, plan.dims.tp)) l.Add("--tp-comm-overlap");
  if (run.fused_cross_entropy) {
    l.Add("--cross-entropy-loss-fusion");
    l.Add("--cross-entropy-fusion-impl", run.cross_entropy_fusion_impl);
  }
  if (t.make_vocab_size_divisible_by) l.Add("--make-vocab-size-divisible-by", *t.make_vocab_size_divisible_by);
  if (t.mtp_layers > 0) l.Add("--mtp-num-layers", t.mtp_layers);
}

}  // namespace

std::string EmitMegatronArgs(const Plan& plan, int64_t global_batch_size, const std::vector<std::string>& header_lines,
                             const FrameworkConfig* config) {
  if (plan.dims.convention != Convention::kMegatron) {
    throw Error(fmt::format("--emit megatron: the plan is under --convention {}, whose rank order Megatron-LM does not use; plan it "
                            "with --convention megatron",
                            ConventionName(plan.dims.convention)));
  }
  Lines l;
  EmitArchitecture(plan.model, plan.unpadded_vocab_size, plan.training.seq_len, config, l);
  EmitLayout(plan, global_batch_size, l);
  EmitSettings(plan, config, l);
  // The config's other arguments, unchanged: the keys dockyard did not read, and those the command
  // did not take (a search's --mtp-num-layers), except the pipeline split the layout above replaces.
  std::vector<std::string> carried, unpriced, dropped;
  if (config) {
    const std::set<std::string>& split_keys = MegatronSplitKeys();
    const std::set<std::string> read(config->read.begin(), config->read.end());
    std::set<std::string> not_taken;
    for (const ConfigFlag& f : config->untaken) not_taken.insert(f.from);
    const bool fsdp = plan.training.dp_sharding == DpSharding::kFsdp;
    for (const ConfigArg& a : config->args) {
      const bool untaken = not_taken.count(a.key) > 0;
      if (untaken && !split_keys.count(a.key)) unpriced.push_back(a.key);  // a split key is replaced by the priced layout
      if (l.keys.count(a.key) || split_keys.count(a.key)) continue;
      // Megatron-FSDP's own keys leave with it (Megatron asserts fsdp_dtensor checkpoints need it).
      const std::string name = a.key.substr(2);  // without the dashes: the prefixes below are not keys
      const bool fsdp_only = name.rfind("megatron-fsdp", 0) == 0 || name.rfind("fsdp-", 0) == 0 || name == "use-nccl-ub" ||
                             (name == "ckpt-format" && !a.values.empty() && a.values.front() == "fsdp_dtensor");
      if (fsdp_only && !fsdp) {
        dropped.push_back(a.key);
        continue;
      }
      if (read.count(a.key) && !untaken) continue;
      // Megatron asserts --tp-comm-overlap needs sequence parallelism, which it turns off at tp 1.
      if (a.key == "--tp-comm-overlap" && plan.dims.tp == 1) continue;
      std::string line = a.key;
      for (const auto& v : a.values) line += " " + ShellWord(v);
      l.out.push_back(line);
      carried.push_back(a.key);
    }
  }
  std::string out;
  for (const auto& h : header_lines) out += "# " + h + "\n";
  const ParallelDims& d = plan.dims;
  out += fmt::format("# Megatron-LM arguments (checked against its argument list at {}) for {} GPUs: tp {} x cp {} x pp {} x dp {}.\n",
                     std::string(kMegatronLmCommit).substr(0, 12), d.world_size, d.tp, d.cp, d.pp, DataParallel(d));
  if (config) {
    if (!carried.empty()) {
      out += fmt::format("# {} {}'s that dockyard does not read, carried over unchanged.\n",
                         carried.size() == 1 ? "The last argument is" : fmt::format("The last {} arguments are", carried.size()), config->file);
    }
    if (!dropped.empty()) {
      out += fmt::format("# Left out with Megatron-FSDP (this layout is {}): {}.\n", DpShardingName(*plan.training.dp_sharding), fmt::join(dropped, ", "));
    }
    const bool file_fsdp = config->Find("--use-megatron-fsdp") || config->Find("--use-torch-fsdp2");
    std::vector<std::string> fsdp_overlaps;
    for (const char* key : {"--overlap-grad-reduce", "--overlap-param-gather"}) {
      if (file_fsdp && config->Find(key) && !l.keys.count(key)) fsdp_overlaps.push_back(key);
    }
    if (!fsdp_overlaps.empty()) {
      out += fmt::format("# Left out: {} (the file's Megatron-FSDP overlaps; this {} layout was priced without them: add them to run them).\n",
                         fmt::join(fsdp_overlaps, " "), DpShardingName(*plan.training.dp_sharding));
    }
    if (config->Find("--multi-latent-attention") && !config->Find("--qk-layernorm")) {
      out += "# --qk-layernorm added: dockyard counts MLA's latent norms, which the file's job did not build.\n";
    }
    if (!unpriced.empty()) {
      out += fmt::format("# Not taken by this command, so not priced here: {}; check the file with simulate --from-megatron.\n",
                         fmt::join(unpriced, ", "));
    }
  } else {
    out += "# Add the tokenizer, data, learning-rate, checkpoint, dropout, rotary-base and aux-loss arguments; launch it on that many GPUs.\n";
  }
  // dockyard's own settings of the plan that no Megatron argument carries: read back, give them again.
  std::vector<std::string> own;
  if (!plan.training.run.megatron_core_version.empty()) own.push_back("--megatron-core-version " + plan.training.run.megatron_core_version);
  if (plan.training.imbalance != 1.0) own.push_back(fmt::format("--imbalance {}", plan.training.imbalance));
  // The job's hardware queues are its environment, not an argument (run_settings.h).
  const int64_t queues = plan.training.run.cuda_device_max_connections;
  if (queues != kCudaDefaultMaxConnections) own.push_back(fmt::format("--cuda-device-max-connections {}", queues));
  if (!own.empty()) out += fmt::format("# Planned with {} (no Megatron argument): give it again with --from-megatron.\n", fmt::join(own, " "));
  if (queues != kCudaDefaultMaxConnections) out += fmt::format("# Export CUDA_DEVICE_MAX_CONNECTIONS={} before the launch.\n", queues);
  for (size_t i = 0; i < l.out.size(); ++i) out += "    " + l.out[i] + (i + 1 < l.out.size() ? " \\\n" : "\n");
  return out;
}

std::vector<ConfigArg> MegatronArchitectureArgs(const ModelSpec& model, int64_t seq_len) {
  Lines l;
  EmitArchitecture(model, model.vocab_size, seq_len, nullptr, l);
  std::string text;
  for (const std::string& line : l.out) text += line + "\n";
  return ReadMegatronArgs(text, model.source.empty() ? model.name : model.source);
}

}  // namespace dockyard
