// Megatron-Bridge run configs (megatron_bridge_config.h). Sources, at kMegatronBridgeCommit:
// src/megatron/bridge/training/config.py (ConfigContainer, runtime_config_update, the ETP default
// _set_moe_expert_tensor_parallel_default), src/megatron/bridge/models/gpt_provider.py
// (should_pad_vocab, make_vocab_size_divisible_by), src/megatron/bridge/training/mixed_precision.py
// (the named recipes), src/megatron/bridge/recipes/common.py (_pretrain_common: bf16_mixed); the
// YAML writer is Megatron-LM's megatron/training/config/container.py (to_yaml, safe_dump).
#include "planner/frameworks/megatron_bridge_config.h"

#include <algorithm>
#include <cctype>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "planner/base/error.h"
#include "planner/base/json_util.h"
#include "planner/base/number_text.h"
#include "planner/frameworks/megatron_args.h"
#include "planner/frameworks/megatron_bridge_fields.h"
#include "planner/frameworks/shell_words.h"
#include "planner/model/run_settings.h"
#include "planner/model/vocab_padding.h"

namespace dockyard {

const char* const kMegatronBridgeCommit = "067f987df03b8355b03192d88d70f1709fedf51a";

const std::map<std::string, std::string>& MegatronBridgeFieldTable() {
  static const std::map<std::string, std::string> table = [] {
    std::map<std::string, std::string> t;
    std::istringstream in(kMegatronBridgeFieldsText);
    std::string line;
    while (std::getline(in, line)) {
      if (line.empty() || line[0] == '#') continue;
      const size_t tab = line.find('\t');
      t[line.substr(0, tab)] = line.substr(tab + 1);
    }
    return t;
  }();
  return table;
}

namespace {

// How a Bridge value becomes Megatron-LM's argument.
enum class Kind {
  kValue,      // the value, as the argument's value
  kSwitch,     // true: the switch; false: nothing
  kNegSwitch,  // false: the switch (add_bias_linear false -> --disable-bias-linear); true: nothing
  kDtype,      // a torch dtype ({_target_: torch.bfloat16}) as Megatron's name (bf16)
  kList,       // a list, one value per element
};

struct Mapping {
  const char* bridge;
  const char* megatron;
  Kind kind;
};

// Bridge keys read, and the Megatron-LM argument each stands for (the field names are
// Megatron-Core's TransformerConfig / ModelParallelConfig / DDP / OptimizerConfig ones, which
// Megatron-LM's arguments.py copies into those configs).
const std::vector<Mapping>& Mappings() {
  static const std::vector<Mapping> m = {
      {"model.tensor_model_parallel_size", "--tensor-model-parallel-size", Kind::kValue},
      {"model.pipeline_model_parallel_size", "--pipeline-model-parallel-size", Kind::kValue},
      {"model.virtual_pipeline_model_parallel_size", "--num-virtual-stages-per-pipeline-rank", Kind::kValue},
      {"model.context_parallel_size", "--context-parallel-size", Kind::kValue},
      {"model.expert_model_parallel_size", "--expert-model-parallel-size", Kind::kValue},
      {"model.expert_tensor_parallel_size", "--expert-tensor-parallel-size", Kind::kValue},
      {"model.sequence_parallel", "--sequence-parallel", Kind::kSwitch},
      {"model.pipeline_model_parallel_layout", "--pipeline-model-parallel-layout", Kind::kValue},
      {"model.account_for_embedding_in_pipeline_split", "--account-for-embedding-in-pipeline-split", Kind::kSwitch},
      {"model.account_for_loss_in_pipeline_split", "--account-for-loss-in-pipeline-split", Kind::kSwitch},
      {"model.num_layers_in_first_pipeline_stage", "--decoder-first-pipeline-num-layers", Kind::kValue},
      {"model.num_layers_in_last_pipeline_stage", "--decoder-last-pipeline-num-layers", Kind::kValue},
      {"model.num_layers", "--num-layers", Kind::kValue},
      {"model.hidden_size", "--hidden-size", Kind::kValue},
      {"model.ffn_hidden_size", "--ffn-hidden-size", Kind::kValue},
      {"model.num_attention_heads", "--num-attention-heads", Kind::kValue},
      {"model.num_query_groups", "--num-query-groups", Kind::kValue},
      {"model.kv_channels", "--kv-channels", Kind::kValue},
      {"model.gated_linear_unit", "--swiglu", Kind::kSwitch},
      {"model.normalization", "--normalization", Kind::kValue},
      {"model.add_bias_linear", "--disable-bias-linear", Kind::kNegSwitch},
      {"model.add_qkv_bias", "--add-qkv-bias", Kind::kSwitch},
      {"model.qk_layernorm", "--qk-layernorm", Kind::kSwitch},
      {"model.position_embedding_type", "--position-embedding-type", Kind::kValue},
      {"model.seq_length", "--seq-length", Kind::kValue},
      {"dataset.seq_length", "--seq-length", Kind::kValue},
      {"model.vocab_size", "--vocab-size", Kind::kValue},
      {"model.share_embeddings_and_output_weights", "--untie-embeddings-and-output-weights", Kind::kNegSwitch},
      {"model.multi_latent_attention", "--multi-latent-attention", Kind::kSwitch},
      {"model.q_lora_rank", "--q-lora-rank", Kind::kValue},
      {"model.kv_lora_rank", "--kv-lora-rank", Kind::kValue},
      {"model.qk_head_dim", "--qk-head-dim", Kind::kValue},
      {"model.qk_pos_emb_head_dim", "--qk-pos-emb-head-dim", Kind::kValue},
      {"model.v_head_dim", "--v-head-dim", Kind::kValue},
      {"model.mtp_num_layers", "--mtp-num-layers", Kind::kValue},
      {"model.num_moe_experts", "--num-experts", Kind::kValue},
      {"model.moe_router_topk", "--moe-router-topk", Kind::kValue},
      {"model.moe_ffn_hidden_size", "--moe-ffn-hidden-size", Kind::kValue},
      {"model.moe_shared_expert_intermediate_size", "--moe-shared-expert-intermediate-size", Kind::kValue},
      {"model.moe_shared_expert_overlap", "--moe-shared-expert-overlap", Kind::kSwitch},
      {"model.moe_layer_freq", "--moe-layer-freq", Kind::kValue},
      {"model.moe_router_score_function", "--moe-router-score-function", Kind::kValue},
      {"model.moe_router_enable_expert_bias", "--moe-router-enable-expert-bias", Kind::kSwitch},
      {"model.moe_router_num_groups", "--moe-router-num-groups", Kind::kValue},
      {"model.moe_router_group_topk", "--moe-router-group-topk", Kind::kValue},
      {"model.moe_router_topk_scaling_factor", "--moe-router-topk-scaling-factor", Kind::kValue},
      {"model.activation_func_clamp_value", "--activation-func-clamp-value", Kind::kValue},
      {"model.window_size", "--window-size", Kind::kList},
      {"model.window_attn_skip_freq", "--window-attn-skip-freq", Kind::kValue},
      {"model.softmax_type", "--softmax-type", Kind::kValue},
      {"model.moe_router_force_load_balancing", "--moe-router-force-load-balancing", Kind::kSwitch},
      {"model.moe_token_dispatcher_type", "--moe-token-dispatcher-type", Kind::kValue},
      {"model.moe_flex_dispatcher_backend", "--moe-flex-dispatcher-backend", Kind::kValue},
      {"model.moe_flex_dispatcher_num_sms", "--moe-flex-dispatcher-num-sms", Kind::kValue},
      {"model.moe_deepep_num_sms", "--moe-deepep-num-sms", Kind::kValue},
      {"model.moe_hybridep_num_sms", "--moe-hybridep-num-sms", Kind::kValue},
      {"model.moe_grouped_gemm", "--moe-grouped-gemm", Kind::kSwitch},
      {"model.moe_permute_fusion", "--moe-permute-fusion", Kind::kSwitch},
      {"model.recompute_granularity", "--recompute-granularity", Kind::kValue},
      {"model.recompute_method", "--recompute-method", Kind::kValue},
      {"model.recompute_num_layers", "--recompute-num-layers", Kind::kValue},
      {"model.recompute_modules", "--recompute-modules", Kind::kList},
      {"model.cp_comm_type", "--cp-comm-type", Kind::kList},
      {"model.tp_comm_overlap", "--tp-comm-overlap", Kind::kSwitch},
      {"model.tp_comm_bulk_dgrad", "--disable-tp-comm-bulk-dgrad", Kind::kNegSwitch},
      {"model.tp_comm_bulk_wgrad", "--disable-tp-comm-bulk-wgrad", Kind::kNegSwitch},
      {"model.tp_comm_overlap_cfg", "--tp-comm-overlap-cfg", Kind::kValue},
      {"comm_overlap.tp_comm_overlap_cfg", "--tp-comm-overlap-cfg", Kind::kValue},
      {"model.overlap_moe_expert_parallel_comm", "--overlap-moe-expert-parallel-comm", Kind::kSwitch},
      {"model.delay_wgrad_compute", "--delay-wgrad-compute", Kind::kSwitch},
      {"model.gradient_accumulation_fusion", "--no-gradient-accumulation-fusion", Kind::kNegSwitch},
      {"model.use_transformer_engine_op_fuser", "--use-transformer-engine-op-fuser", Kind::kSwitch},
      {"model.cuda_graph_impl", "--cuda-graph-impl", Kind::kValue},
      {"model.moe_pad_expert_input_to_capacity", "--moe-pad-expert-input-to-capacity", Kind::kSwitch},
      {"model.moe_expert_capacity_factor", "--moe-expert-capacity-factor", Kind::kValue},
      {"model.bf16", "--bf16", Kind::kSwitch},
      {"model.fp16", "--fp16", Kind::kSwitch},
      {"model.fp8", "--fp8-format", Kind::kValue},
      {"model.fp8_recipe", "--fp8-recipe", Kind::kValue},
      {"model.fp8_param", "--fp8-param-gather", Kind::kSwitch},
      {"model.cross_entropy_loss_fusion", "--cross-entropy-loss-fusion", Kind::kSwitch},
      {"model.cross_entropy_fusion_impl", "--cross-entropy-fusion-impl", Kind::kValue},
      {"model.make_vocab_size_divisible_by", "--make-vocab-size-divisible-by", Kind::kValue},
      {"train.micro_batch_size", "--micro-batch-size", Kind::kValue},
      {"train.global_batch_size", "--global-batch-size", Kind::kValue},
      {"ddp.use_distributed_optimizer", "--use-distributed-optimizer", Kind::kSwitch},
      {"optimizer.use_distributed_optimizer", "--use-distributed-optimizer", Kind::kSwitch},
      {"ddp.overlap_grad_reduce", "--overlap-grad-reduce", Kind::kSwitch},
      {"ddp.overlap_param_gather", "--overlap-param-gather", Kind::kSwitch},
      {"ddp.align_param_gather", "--no-align-param-gather", Kind::kNegSwitch},
      {"ddp.bucket_size", "--ddp-bucket-size", Kind::kValue},
      {"optimizer.overlap_param_gather_with_optimizer_step", "--overlap-param-gather-with-optimizer-step", Kind::kSwitch},
      {"comm_overlap.overlap_grad_reduce", "--overlap-grad-reduce", Kind::kSwitch},
      {"comm_overlap.overlap_param_gather", "--overlap-param-gather", Kind::kSwitch},
      {"comm_overlap.align_param_gather", "--no-align-param-gather", Kind::kNegSwitch},
      {"comm_overlap.bucket_size", "--ddp-bucket-size", Kind::kValue},
      {"comm_overlap.overlap_param_gather_with_optimizer_step", "--overlap-param-gather-with-optimizer-step", Kind::kSwitch},
      {"ddp.grad_reduce_in_fp32", "--grad-reduce-in-bf16", Kind::kNegSwitch},
      {"ddp.use_megatron_fsdp", "--use-megatron-fsdp", Kind::kSwitch},
      {"ddp.data_parallel_sharding_strategy", "--data-parallel-sharding-strategy", Kind::kValue},
      {"ddp.num_distributed_optimizer_instances", "--num-distributed-optimizer-instances", Kind::kValue},
      {"ddp.check_for_nan_in_grad", "--no-check-for-nan-in-loss-and-grad", Kind::kNegSwitch},
      // The loss's NaN check, which Bridge asserts off under a whole-iteration graph (config.py) and
      // its full-iteration recipes turn off: Megatron-LM's one flag covers both checks.
      {"rerun_state_machine.check_for_nan_in_loss", "--no-check-for-nan-in-loss-and-grad", Kind::kNegSwitch},
      {"model.overlap_p2p_comm", "--no-overlap-p2p-communication", Kind::kNegSwitch},
      {"comm_overlap.overlap_p2p_comm", "--no-overlap-p2p-communication", Kind::kNegSwitch},
      {"optimizer.optimizer", "--optimizer", Kind::kValue},
      {"optimizer.clip_grad", "--clip-grad", Kind::kValue},
      {"optimizer.use_precision_aware_optimizer", "--use-precision-aware-optimizer", Kind::kSwitch},
      {"optimizer.exp_avg_dtype", "--exp-avg-dtype", Kind::kDtype},
      {"optimizer.exp_avg_sq_dtype", "--exp-avg-sq-dtype", Kind::kDtype},
      {"comm_overlap.tp_comm_overlap", "--tp-comm-overlap", Kind::kSwitch},
      {"comm_overlap.overlap_moe_expert_parallel_comm", "--overlap-moe-expert-parallel-comm", Kind::kSwitch},
      {"comm_overlap.delay_wgrad_compute", "--delay-wgrad-compute", Kind::kSwitch},
      {"mixed_precision.bf16", "--bf16", Kind::kSwitch},
      {"mixed_precision.fp16", "--fp16", Kind::kSwitch},
      {"mixed_precision.fp8", "--fp8-format", Kind::kValue},
      {"mixed_precision.fp8_recipe", "--fp8-recipe", Kind::kValue},
      {"mixed_precision.fp8_param_gather", "--fp8-param-gather", Kind::kSwitch},
      {"mixed_precision.grad_reduce_in_fp32", "--grad-reduce-in-bf16", Kind::kNegSwitch},
  };
  return m;
}

// A key's value as read: a scalar's text, a list's elements, or null.
struct Entry {
  std::string text;
  std::vector<std::string> items;
  bool list = false, null = false, map = false;
  bool quoted = false;  // a quoted scalar ('yes', "true"): a string to PyYAML, never a boolean
  int line = 0;
};

struct Doc {
  std::string file, form;
  std::map<std::string, Entry> entries;  // "section.key" (model.transformer.x read as model.x)
  std::map<std::string, Entry> env;      // the recipe's env_vars, by variable (recipe-usage.md: serialized with the recipe)
};

[[noreturn]] void Fail(const Doc& d, int line, const std::string& message) {
  throw Error(line > 0 ? fmt::format("{}:{}: {}", d.file, line, message) : fmt::format("{}: {}", d.file, message));
}

int LineOf(const YAML::Node& n) { return n.Mark().line >= 0 ? n.Mark().line + 1 : 0; }

// A value as text: scalars as written; {_target_: torch.bfloat16, _call_: false} (a dtype or a
// function, as to_yaml writes them) as the target; an enum ({_name_: x}) as its name.
Entry EntryOf(const YAML::Node& v, int line) {
  Entry e;
  e.line = line;
  if (v.IsNull()) {
    e.null = true;
  } else if (v.IsScalar()) {
    e.text = v.Scalar();
    e.quoted = v.Tag() == "!";  // yaml-cpp tags a quoted scalar "!", a plain one "?"
    if (e.text == "null" || e.text == "~") e.null = true;
  } else if (v.IsSequence()) {
    e.list = true;
    for (const YAML::Node x : v) {  // copies: yaml-cpp iterates through temporaries
      if (x.IsScalar()) e.items.push_back(x.Scalar());
      else if (x.IsSequence()) {  // a layout as a list of stages
        std::string stage;
        for (const YAML::Node y : x) stage += (stage.empty() ? "" : ",") + (y.IsScalar() ? y.Scalar() : std::string("?"));
        e.items.push_back("[" + stage + "]");
      } else {
        e.items.push_back("<mapping>");
      }
    }
  } else if (v.IsMap()) {
    e.map = true;
    if (v["_name_"] && v["_name_"].IsScalar()) e.text = v["_name_"].Scalar();
    else if (v["_target_"] && v["_target_"].IsScalar()) e.text = v["_target_"].Scalar();
    else e.text = "<mapping>";
  }
  return e;
}

std::vector<std::string> Siblings(const std::string& prefix) {
  std::vector<std::string> out;
  for (const auto& [k, kind] : MegatronBridgeFieldTable()) {
    if (k.rfind(prefix, 0) == 0 && k.find('.', prefix.size()) == std::string::npos) out.push_back(k);
  }
  return out;
}

void CheckKey(const Doc& d, const std::string& key, int line) {
  if (MegatronBridgeFieldTable().count(key)) return;
  const size_t dot = key.rfind('.');
  // A Megatron-LM argument's name (num_experts for --num-experts): the Bridge key that sets it.
  if (dot != std::string::npos) {
    std::string argument = "--" + key.substr(dot + 1);
    std::replace(argument.begin(), argument.end(), '_', '-');
    for (const Mapping& m : Mappings()) {
      if (argument == m.megatron && std::string(m.bridge).rfind(key.substr(0, dot + 1), 0) == 0) {
        Fail(d, line, fmt::format("{}: not a key of Megatron-Bridge's ConfigContainer at {}: Megatron-LM's {} is Bridge's {}", ShownWord(key),
                                  std::string(kMegatronBridgeCommit).substr(0, 9), m.megatron, m.bridge));
      }
    }
  }
  Fail(d, line,
       fmt::format("{}: not a key of Megatron-Bridge's ConfigContainer at {}{}", ShownWord(key), std::string(kMegatronBridgeCommit).substr(0, 9),
                   DidYouMeanText(key, Siblings(dot == std::string::npos ? "" : key.substr(0, dot + 1)))));
}

Doc ReadDoc(const std::string& text, const std::string& file) {
  Doc d;
  d.file = file;
  if (text.find('\0') != std::string::npos) Fail(d, 0, "a NUL byte: not a YAML file");
  // One document: a "---" (or "...") marker at a line's start after the first content line starts
  // a second. (Scanned here: yaml-cpp 0.7's LoadAll loops forever on some malformed input, ",f",
  // found by fuzz/megatron_bridge_fuzzer.cc.)
  // The error names the second document's first line.
  const char* const second = "a second YAML document (after ---): a Megatron-Bridge config is one document";
  bool content = false;
  int marker_line = 0;
  std::istringstream lines(text);
  int number = 0;
  for (std::string line; std::getline(lines, line);) {
    ++number;
    const bool marker = (line.rfind("---", 0) == 0 || line.rfind("...", 0) == 0) &&
                        (line.size() == 3 || line[3] == ' ' || line[3] == '\t' || line[3] == '\r');
    if (marker && content && marker_line == 0) marker_line = line[0] == '-' ? number : -number;  // "..." only ends the document
    const size_t first = line.find_first_not_of(" \t\r");
    if (!marker && first != std::string::npos && line[first] != '#') {
      if (marker_line != 0) Fail(d, number, second);
      content = true;
    }
  }
  if (marker_line > 0) Fail(d, marker_line, second);  // an empty document after ---
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw Error(fmt::format("{}:{}:{}: not a Megatron-Bridge config (YAML: {})", file, e.mark.line + 1, e.mark.column + 1, e.msg));
  }
  if (root.IsNull()) {
    Fail(d, 0, content ? std::string("YAML reads no mapping in it: a Megatron-Bridge config is a mapping of sections (model:, train:, ...)")
                       : std::string("no Megatron-Bridge settings (an empty file?): give a run_config.yaml or an overrides YAML"));
  }
  if (!root.IsMap()) Fail(d, 1, "a Megatron-Bridge config is a YAML mapping of sections (model:, train:, ...)");
  d.form = root["_target_"] ? "run_config.yaml dump" : "overrides YAML";
  std::set<std::string> seen;
  auto once = [&](const std::string& key, int line) {
    // PyYAML keeps the last of two equal keys, OmegaConf (which Bridge loads overrides with) refuses them.
    if (!seen.insert(key).second) Fail(d, line, fmt::format("{}: given twice (OmegaConf, which Bridge reads it with, refuses duplicate keys)", key));
  };
  for (auto it = root.begin(); it != root.end(); ++it) {
    if (!it->first.IsScalar()) Fail(d, LineOf(it->first), "a key must be a name, not a list or a mapping");
    const std::string section = it->first.as<std::string>();
    const int line = LineOf(it->first);
    if (section.rfind("_", 0) == 0) continue;  // _target_
    CheckKey(d, section, line);
    once(section, line);
    const YAML::Node value = it->second;  // a copy: the iterator's pair is a temporary
    if (section == "env_vars" && !value.IsNull() && !value.IsMap()) {
      Fail(d, line, fmt::format("env_vars: must be a mapping of variable: value (CUDA_DEVICE_MAX_CONNECTIONS: 32), got {}",
                                value.IsSequence() ? "a list" : "a value"));
    }
    if (!value.IsMap()) {
      // A section is a mapping; mixed_precision may name a recipe; any section may be null.
      const bool section_kind = MegatronBridgeFieldTable().at(section) == "section";
      if (section_kind && !value.IsNull() && !(section == "mixed_precision" && value.IsScalar())) {
        Fail(d, line, fmt::format("{}: must be a mapping of its settings ({}: then one setting per line), got {}", section, section,
                                  value.IsSequence() ? "a list" : "a value"));
      }
      d.entries[section] = EntryOf(value, line);  // mixed_precision: bf16_mixed, env_vars, null sections
      continue;
    }
    if (MegatronBridgeFieldTable().at(section) != "section") {
      d.entries[section] = EntryOf(value, line);
      if (section == "env_vars" && value.IsMap()) {
        for (auto f = value.begin(); f != value.end(); ++f) {
          if (!f->first.IsScalar()) continue;
          once("env_vars." + f->first.as<std::string>(), LineOf(f->first));
          d.env[f->first.as<std::string>()] = EntryOf(f->second, LineOf(f->first));
        }
      }
      continue;
    }
    for (auto f = value.begin(); f != value.end(); ++f) {
      if (!f->first.IsScalar()) Fail(d, LineOf(f->first), "a key must be a name, not a list or a mapping");
      const std::string name = f->first.as<std::string>();
      if (name.rfind("_", 0) == 0) continue;
      const int fline = LineOf(f->first);
      once(section + "." + name, fline);
      if (section == "model" && name == "transformer" && f->second.IsMap()) {
        // A builder-backed model (BridgeGPTModelConfig): its TransformerConfig under model.transformer.
        for (auto g = f->second.begin(); g != f->second.end(); ++g) {
          if (!g->first.IsScalar()) Fail(d, LineOf(g->first), "a key must be a name, not a list or a mapping");
          const std::string inner = g->first.as<std::string>();
          if (inner.rfind("_", 0) == 0) continue;
          once("model." + inner, LineOf(g->first));
          CheckKey(d, "model.transformer." + inner, LineOf(g->first));
          d.entries["model." + inner] = EntryOf(g->second, LineOf(g->first));
        }
        continue;
      }
      const std::string key = section + "." + name;
      CheckKey(d, key, fline);
      d.entries[key] = EntryOf(f->second, fline);
    }
  }
  return d;
}

// A Bridge dtype as Megatron-LM's name (torch.bfloat16 -> bf16).
std::string DtypeName(const Doc& d, const std::string& key, const Entry& e) {
  static const std::map<std::string, std::string> names = {{"torch.bfloat16", "bf16"}, {"torch.float32", "fp32"}, {"torch.float16", "fp16"},
                                                           {"bf16", "bf16"},           {"fp32", "fp32"},          {"fp16", "fp16"}};
  const auto it = names.find(e.text);
  if (it == names.end()) Fail(d, e.line, fmt::format("{} {}: a dtype dockyard reads is torch.bfloat16, torch.float16 or torch.float32", key, ShownWord(e.text)));
  return it->second;
}

bool IsTrue(const Doc& d, const std::string& key, const Entry& e) {
  // YAML 1.1's booleans, as PyYAML (which Bridge reads with) takes them.
  static const std::set<std::string> yes = {"true", "True", "TRUE", "yes", "Yes", "YES", "on", "On", "ON"},
                                      no = {"false", "False", "FALSE", "no", "No", "NO", "off", "Off", "OFF"};
  if (e.quoted) Fail(d, e.line, fmt::format("{} \"{}\": must be true or false, not a quoted string", key, e.text));
  if (e.list || e.map) Fail(d, e.line, fmt::format("{}: must be true or false, got a {}", key, e.list ? "list" : "mapping"));
  if (yes.count(e.text)) return true;
  if (no.count(e.text) || e.null) return false;
  Fail(d, e.line, fmt::format("{} {}: must be true or false", key, ShownWord(e.text)));
}

// A named mixed-precision recipe (mixed_precision.py) as Megatron-LM's arguments: the delayed,
// current-scaling and MXFP8 recipes set fp8_param_gather = True (and MXFP8 also
// reuse_grad_buf_for_mxfp8_param_ag), the subchannel (blockwise) one False.
std::vector<std::string> RecipeArgs(const Doc& d, const Entry& e) {
  static const std::map<std::string, std::vector<std::string>> recipes = {
      {"bf16_mixed", {"--bf16"}},
      {"fp16_mixed", {"--fp16"}},
      {"bf16_with_fp8_delayed_scaling_mixed", {"--bf16", "--fp8-format hybrid", "--fp8-recipe delayed", "--fp8-param-gather"}},
      {"bf16_with_fp8_current_scaling_mixed", {"--bf16", "--fp8-format e4m3", "--fp8-recipe tensorwise", "--fp8-param-gather"}},
      {"bf16_with_fp8_subchannel_scaling_mixed", {"--bf16", "--fp8-format e4m3", "--fp8-recipe blockwise"}},
      {"bf16_with_mxfp8_mixed", {"--bf16", "--fp8-format e4m3", "--fp8-recipe mxfp8", "--fp8-param-gather"}},
  };
  const auto it = recipes.find(e.text);
  if (it == recipes.end()) {
    std::vector<std::string> names;
    for (const auto& [k, v] : recipes) names.push_back(k);
    Fail(d, e.line, fmt::format("mixed_precision {}: the recipes dockyard reads are {}{}", ShownWord(e.text), fmt::join(names, ", "),
                                DidYouMeanText(e.text, names)));
  }
  return it->second;
}

// One translated argument line and the Bridge key (and YAML line) it came from.
struct Translated {
  std::string arg;  // "--key value"
  std::string bridge_key;
  int line = 0;
};

std::string Quoted(const std::string& v) { return "'" + v + "'"; }

}  // namespace

FrameworkConfig ImportMegatronBridgeConfig(const std::string& text, const std::string& file, const std::optional<ModelSpec>& model) {
  const Doc d = ReadDoc(text, file);
  if (d.entries.empty()) Fail(d, 0, "no Megatron-Bridge settings (an empty file?): give a run_config.yaml or an overrides YAML");
  std::vector<Translated> out;
  std::set<std::string> used;
  auto get = [&](const std::string& key) -> const Entry* {
    const auto it = d.entries.find(key);
    return it == d.entries.end() ? nullptr : &it->second;
  };
  // An overrides file leaves the architecture to the recipe, which takes it from the HF config:
  // --model's, first, so that the file's own keys (later) win.
  const bool dump = d.form == "run_config.yaml dump";
  if (!dump) {
    if (!model) Fail(d, 0, "an overrides YAML leaves the model to its recipe: give --model (the HF config.json the recipe builds)");
    const Entry* seq = get("model.seq_length");
    int64_t seq_len = 4096;
    if (seq && !seq->null) ParseStrictInt(seq->text, &seq_len);
    for (const ConfigArg& a : MegatronArchitectureArgs(*model, seq_len)) {
      std::string line = a.key;
      for (const auto& v : a.values) line += " " + Quoted(v);
      out.push_back({line, "(--model)", 0});
    }
  }
  const Entry* dispatcher = get("model.moe_token_dispatcher_type");
  const bool flex = dispatcher && dispatcher->text == "flex";
  const Entry* granularity = get("model.recompute_granularity");
  const bool selective = granularity && granularity->text == "selective";
  const Entry* fp8 = get("model.fp8");
  const Entry* mp = get("mixed_precision");
  const bool fp8_on = (fp8 && !fp8->null) || (get("mixed_precision.fp8") && !get("mixed_precision.fp8")->null);
  const Entry* pa = get("optimizer.use_precision_aware_optimizer");
  const bool precision_aware = pa && IsTrue(d, "optimizer.use_precision_aware_optimizer", *pa);
  const Entry* mf = get("ddp.use_megatron_fsdp");
  const bool megatron_fsdp = mf && IsTrue(d, "ddp.use_megatron_fsdp", *mf);
  // Bridge's GPTDatasetConfig and the model share the sequence length (config.py validate).
  if (const Entry* a = get("model.seq_length"), *b = get("dataset.seq_length"); a && b && !a->null && !b->null && a->text != b->text) {
    Fail(d, b->line, fmt::format("dataset.seq_length {} differs from model.seq_length {}: Megatron-Bridge requires them equal", ShownWord(b->text),
                                 ShownWord(a->text)));
  }
  int te_cross_entropy_line = -1;
  int64_t tp = 1;
  if (const Entry* t = get("model.tensor_model_parallel_size"); t && !t->null) ParseStrictInt(t->text, &tp);
  for (const Mapping& m : Mappings()) {
    const Entry* e = get(m.bridge);
    if (e == nullptr) continue;
    const std::string key = m.bridge;
    // A setting CommOverlapConfig owns (`owned`, e.g. "tp_comm_overlap"): its setup() writes
    // comm_overlap's value over the `section` config's (model, or ddp / optimizer for the
    // data-parallel overlaps, _get_optimizer_overlap_cfgs), so in an overrides YAML comm_overlap.X,
    // where given, decides over section.X; in a run_config dump, written after setup, section.X is
    // what ran. Whether this key (one of the two) is the one that does not decide.
    auto CommOverlapOverridden = [&](const std::string& owned, const std::string& section) {
      const Entry* comm = get("comm_overlap." + owned);
      const Entry* other = get(section + "." + owned);
      const bool comm_given = comm != nullptr && !comm->null, other_given = other != nullptr && !other->null;
      return key == "comm_overlap." + owned ? dump && other_given : !dump && comm_given;
    };
    // Settings Bridge does not apply: the flex backend without flex, modules without selective
    // recompute (post-init writes [core_attn] always), an FP8 recipe without FP8, TP overlap at tp 1
    // (CommOverlapConfig turns it off).
    if (key == "model.moe_flex_dispatcher_backend" && !flex) continue;
    if (key == "model.recompute_modules" && !selective) continue;
    if ((key == "model.fp8_recipe" || key == "mixed_precision.fp8_recipe") && !fp8_on) continue;
    // CommOverlapConfig (comm_overlap.py) turns the overlap off at tp < 2 and without sequence
    // parallelism ("Disabling tensor parallel communication overlap due to sequence_parallel=False")
    // and its setup() writes its own value over the model config's. So in an overrides YAML
    // comm_overlap.tp_comm_overlap, where given, decides; in a run_config dump, written after
    // setup, model.tp_comm_overlap is what ran. A model.tp_comm_overlap with no comm_overlap value
    // reaches Megatron-Core as given (Megatron-LM's rule refuses it without sequence parallelism).
    // The EP overlap and its delayed weight gradients are CommOverlapConfig's the same way
    // (_get_model_comm_overlap_cfgs), without the TP overlap's switch-offs.
    if (key == "model.tp_comm_overlap" || key == "comm_overlap.tp_comm_overlap") {
      IsTrue(d, key, *e);  // a bad value is refused even where the overlap is off
      const Entry* sp = get("model.sequence_parallel");
      const bool switched_off = key == "comm_overlap.tp_comm_overlap" && (sp == nullptr || !IsTrue(d, "model.sequence_parallel", *sp));
      if (tp <= 1 || CommOverlapOverridden("tp_comm_overlap", "model") || switched_off) {
        used.insert(key);
        continue;
      }
    }
    const std::string field = key.substr(key.find('.') + 1);
    if (field == "overlap_moe_expert_parallel_comm" || field == "delay_wgrad_compute") {
      IsTrue(d, key, *e);  // a bad value is refused either way
      if (CommOverlapOverridden(field, "model")) {
        used.insert(key);
        continue;
      }
    }
    // The parameter all-gather's dispatch and buckets, CommOverlapConfig's over the DDP / optimizer
    // config the same way (param_gather.h).
    if (field == "overlap_grad_reduce" || field == "overlap_param_gather" || field == "align_param_gather" || field == "bucket_size" ||
        field == "overlap_param_gather_with_optimizer_step") {
      if (field != "bucket_size") IsTrue(d, key, *e);  // a bad value is refused either way
      if (CommOverlapOverridden(field, field == "overlap_param_gather_with_optimizer_step" ? "optimizer" : "ddp")) {
        used.insert(key);
        continue;
      }
    }
    // Mixed precision has the last word on the gradient reduce's dtype (Bridge copies a
    // MixedPrecisionConfig's, or a named recipe's, grad_reduce_in_fp32 over DDP's at run time): in an
    // overrides YAML that gives it, ddp.grad_reduce_in_fp32 does not decide; a dump holds what ran.
    const Entry* mp_grad = get("mixed_precision.grad_reduce_in_fp32");
    if (key == "ddp.grad_reduce_in_fp32" && !dump &&
        ((mp && !mp->map && !mp->null && !mp->list) || (mp_grad && !mp_grad->null))) {
      IsTrue(d, key, *e);  // a bad value is refused either way
      used.insert(key);
      continue;
    }
    if ((key == "optimizer.exp_avg_dtype" || key == "optimizer.exp_avg_sq_dtype") && !precision_aware) continue;
    if (key == "ddp.data_parallel_sharding_strategy" && !megatron_fsdp) continue;
    if (key == "ddp.num_distributed_optimizer_instances" && e->text == "1") continue;  // the default
    // TransformerEngine's fused loss: Megatron-LM's launcher refuses it from core 0.19
    // (run_settings.h ValidateCrossEntropyFusionImpl), Bridge's does not; priced as native.
    if (key == "model.cross_entropy_fusion_impl" && e->text == "te") {
      te_cross_entropy_line = e->line;
      used.insert(key);
      continue;
    }
    if (key == "model.moe_layer_freq" && e->list) {
      out.push_back({m.megatron + std::string(" ") + Quoted("[" + fmt::format("{}", fmt::join(e->items, ",")) + "]"), key, e->line});
      used.insert(key);
      continue;
    }
    if (key == "model.pipeline_model_parallel_layout" && e->list) {
      // A list of stages, each a list of embedding / decoder / mtp / loss (Megatron-Core's
      // PipelineParallelLayerLayout input): the layout string, E t m L per layer, '|' per stage.
      static const std::map<std::string, std::string> letter = {{"embedding", "E"}, {"decoder", "t"}, {"mtp", "m"}, {"loss", "L"}};
      std::string layout;
      for (const std::string& stage : e->items) {
        if (stage.size() < 2 || stage.front() != '[' || stage.back() != ']') {
          Fail(d, e->line, fmt::format("{}: each stage must be a list of embedding, decoder, mtp and loss, got {}", key, ShownWord(stage)));
        }
        if (!layout.empty()) layout += "|";
        std::stringstream words(stage.substr(1, stage.size() - 2));
        for (std::string w; std::getline(words, w, ',');) {
          const auto l = letter.find(w);
          if (l == letter.end()) {
            Fail(d, e->line, fmt::format("{}: a stage holds embedding, decoder, mtp or loss, got {}", key, ShownWord(w)));
          }
          layout += l->second;
        }
      }
      out.push_back({m.megatron + std::string(" ") + Quoted(layout), key, e->line});
      used.insert(key);
      continue;
    }
    used.insert(key);
    switch (m.kind) {
      case Kind::kValue:
        if (e->null) continue;
        if (e->list || e->map) Fail(d, e->line, fmt::format("{}: must be one value, got {}", key, e->list ? "a list" : "a mapping"));
        out.push_back({m.megatron + std::string(" ") + Quoted(e->text), key, e->line});
        break;
      case Kind::kSwitch:
        if (IsTrue(d, key, *e)) out.push_back({m.megatron, key, e->line});
        break;
      case Kind::kNegSwitch:
        if (!e->null && !IsTrue(d, key, *e)) out.push_back({m.megatron, key, e->line});
        break;
      case Kind::kDtype:
        if (!e->null) out.push_back({m.megatron + std::string(" ") + DtypeName(d, key, *e), key, e->line});
        break;
      case Kind::kList: {
        if (e->null) continue;
        std::string line = m.megatron;
        for (const std::string& v : e->list ? e->items : std::vector<std::string>{e->text}) line += " " + Quoted(v);
        out.push_back({line, key, e->line});
        break;
      }
    }
  }
  // mixed_precision as a recipe name (an overrides file) or absent (the recipes' bf16_mixed).
  if (mp && !mp->map && !mp->null && !mp->list) {
    used.insert("mixed_precision");
    for (const std::string& a : RecipeArgs(d, *mp)) out.push_back({a, "mixed_precision", mp->line});
  } else if (!dump && !get("mixed_precision.bf16") && !get("model.bf16") && !get("model.fp16")) {
    out.push_back({"--bf16", "(no mixed_precision: the recipes' bf16_mixed)", 0});
  }
  // Bridge's defaults where they differ from Megatron-LM's.
  int64_t ep = 1;
  if (const Entry* e = get("model.expert_model_parallel_size"); e && !e->null) ParseStrictInt(e->text, &ep);
  const Entry* etp = get("model.expert_tensor_parallel_size");
  if ((!etp || etp->null) && ep > 1) out.push_back({"--expert-tensor-parallel-size 1", "(no model.expert_tensor_parallel_size: Bridge's 1 with EP)", 0});
  const Entry* pad = get("model.should_pad_vocab");
  if (pad) used.insert("model.should_pad_vocab");
  if (!pad || !IsTrue(d, "model.should_pad_vocab", *pad)) {
    out.push_back({"--make-vocab-size-divisible-by 1", pad ? "model.should_pad_vocab" : "(no model.should_pad_vocab: Bridge pads no vocabulary)", pad ? pad->line : 0});
  }
  // Megatron-LM takes --group-query-attention with --num-query-groups.
  if (const Entry* g = get("model.num_query_groups"); g && !g->null) {
    const Entry* h = get("model.num_attention_heads");
    if (!h || h->text != g->text) out.push_back({"--group-query-attention", "model.num_query_groups", g->line});
  }

  std::string args_text;
  for (const Translated& t : out) args_text += t.arg + "\n";
  FrameworkConfig c;
  try {
    c = ImportMegatronArgs(args_text, file);
  } catch (const Error& e) {
    // "FILE:N: ..." names a line of the translated arguments: name the Bridge key and its line.
    const std::string msg = e.what();
    const std::string prefix = file + ":";
    if (msg.rfind(prefix, 0) == 0) {
      const size_t colon = msg.find(':', prefix.size());
      int64_t n = 0;
      if (colon != std::string::npos && ParseStrictInt(msg.substr(prefix.size(), colon - prefix.size()), &n) && n >= 1 &&
          n <= static_cast<int64_t>(out.size())) {
        const Translated& t = out[static_cast<size_t>(n - 1)];
        throw Error(fmt::format("{}{}: {} (Megatron-LM's {}, which {} sets)", prefix, t.line > 0 ? std::to_string(t.line) : "?",
                                msg.substr(colon + 2), t.arg.substr(0, t.arg.find(' ')), t.bridge_key));
      }
    }
    throw;
  }
  // TransformerEngine's FP8 attention: a TransformerConfig field Megatron-LM has no argument for
  // (arguments.py lists fp8_dot_product_attention among the fields without one), set by Bridge's
  // mixed precision or the model: dockyard's own flag.
  for (const char* key : {"mixed_precision.fp8_dot_product_attention", "model.fp8_dot_product_attention"}) {
    const Entry* e = get(key);
    if (!e) continue;
    used.insert(key);
    if (!e->null && IsTrue(d, key, *e) && !c.FindFlag("--fp8-dot-product-attention")) {
      c.flags.push_back({"--fp8-dot-product-attention", "", key});
    }
  }
  // The job's CUDA_DEVICE_MAX_CONNECTIONS, an environment variable the recipe carries (env_vars;
  // Bridge's performance recipes set 32 with the flex dispatcher or on Blackwell, else 8):
  // run_settings.h cuda_device_max_connections.
  if (const auto e = d.env.find("CUDA_DEVICE_MAX_CONNECTIONS"); e != d.env.end() && !e->second.null) {
    int64_t n = 0;
    if (e->second.list || e->second.map || !ParseStrictInt(e->second.text, &n) || n < 1 || n > kMaxCudaDeviceMaxConnections) {
      Fail(d, e->second.line, fmt::format("env_vars.CUDA_DEVICE_MAX_CONNECTIONS {}: must be an integer from 1 to {} (CUDA's range)",
                                          e->second.list ? "(a list)" : e->second.map ? "(a mapping)" : ShownWord(e->second.text),
                                          kMaxCudaDeviceMaxConnections));
    }
    c.flags.push_back({"--cuda-device-max-connections", std::to_string(n), "env_vars.CUDA_DEVICE_MAX_CONNECTIONS"});
    used.insert("env_vars");
  }
  // The arguments' lines are the translated text's: make them the YAML's (MegatronModel names them).
  for (ConfigArg& a : c.args) {
    if (a.line >= 1 && a.line <= static_cast<int>(out.size())) a.line = out[static_cast<size_t>(a.line - 1)].line;
  }
  // A dump is the whole run: its precision and recompute are settings of the file (a flag that
  // changes them is a contradiction), not Megatron-LM's defaults.
  if (dump) {
    auto set = [&](const char* flag, const char* value, const char* from) {
      if (c.FindFlag(flag)) return;
      c.flags.push_back({flag, value, from});
      // No longer a default a search pins: a setting of the file.
      c.search_defaults.erase(std::remove_if(c.search_defaults.begin(), c.search_defaults.end(), [&](const ConfigFlag& f) { return f.flag == flag; }),
                              c.search_defaults.end());
    };
    set("--precision", "bf16", "mixed_precision.fp8 (null)");
    set("--recompute", "none", "model.recompute_granularity (null)");
  }
  if (te_cross_entropy_line >= 0) {
    c.ignored.push_back("model.cross_entropy_fusion_impl te (TransformerEngine's fused loss, which Bridge runs and Megatron-LM's launcher "
                        "refuses from core 0.19: priced as native, whose fp32 logits copy it does not keep)");
  }
  c.framework = "Megatron-Bridge";
  c.form = d.form;
  c.keys = static_cast<int64_t>(d.entries.size());
  // The keys each flag came from, as Bridge names them.
  std::map<std::string, std::string> bridge_of;
  for (const Translated& t : out) {
    const std::string megatron = t.arg.substr(0, t.arg.find(' '));
    std::string& b = bridge_of[megatron];
    if (b.empty() || b.rfind("(", 0) == 0) b = t.bridge_key;
  }
  auto rename = [&](std::string s) {
    for (const auto& [megatron, bridge] : bridge_of) {
      for (size_t at = s.find(megatron); at != std::string::npos; at = s.find(megatron, at + bridge.size())) {
        const size_t end = at + megatron.size();
        if (end < s.size() && (std::isalnum(static_cast<unsigned char>(s[end])) || s[end] == '-')) {
          at = end;
          continue;
        }
        s.replace(at, megatron.size(), bridge);
      }
    }
    return s;
  };
  for (ConfigFlag& f : c.flags) f.from = rename(f.from);
  for (ConfigFlag& f : c.search_defaults) f.from = rename(f.from);
  for (std::string& s : c.ignored) s = rename(s);
  std::vector<std::string> read;
  for (const std::string& k : used) read.push_back(k);
  c.read = read;
  std::vector<std::string> not_read;
  for (const auto& [key, e] : d.entries) {
    if (!used.count(key) && key.rfind("model.", 0) != 0) not_read.push_back(key);
  }
  // The model's other keys (kernels, initialization, router details, ...) are Megatron-Core's
  // settings that the architecture above does not read.
  for (const auto& [key, e] : d.entries) {
    if (!used.count(key) && key.rfind("model.", 0) == 0) not_read.push_back(key);
  }
  c.not_read = not_read;
  return c;
}

std::string EmitMegatronBridgeConfig(const Plan& plan, int64_t global_batch_size, const std::vector<std::string>& header_lines) {
  // FP8 attention has no Megatron-LM argument (EmitMegatronArgs refuses it): Bridge's mixed precision
  // carries it, below.
  const bool fp8_attention = plan.training.fp8_dot_product_attention;
  Plan without_fp8_attention = plan;
  without_fp8_attention.training.fp8_dot_product_attention = false;
  std::string megatron;
  try {
    megatron = EmitMegatronArgs(without_fp8_attention, global_batch_size, {});
  } catch (const Error& e) {
    const std::string msg = e.what();  // "--emit megatron: ..." names this format instead
    throw Error(msg.rfind("--emit megatron:", 0) == 0 ? "--emit megatron-bridge:" + msg.substr(16) : msg);
  }
  const std::vector<ConfigArg> args = ReadMegatronArgs(megatron, "(written)");
  // Megatron-LM argument -> the Bridge key that sets it (the first in Mappings()), except the
  // overlaps CommOverlapConfig owns: its setup() writes its own values over the model config's
  // (comm_overlap.py _apply_cfgs; a recipe's CommOverlapConfig(tp_comm_overlap=False) would undo a
  // model.tp_comm_overlap), so they are written to the comm_overlap section.
  std::map<std::string, const Mapping*> of;
  for (const Mapping& m : Mappings()) {
    const std::string bridge = m.bridge;
    if (bridge.rfind("mixed_precision.", 0) == 0) continue;
    if (bridge.rfind("comm_overlap.", 0) == 0) {
      of[m.megatron] = &m;
      continue;
    }
    of.emplace(m.megatron, &m);
  }
  std::map<std::string, std::map<std::string, std::string>> sections;  // section -> key -> YAML value
  std::string mixed_precision;  // a named recipe, written as the section's value
  auto put = [&](const std::string& dotted, const std::string& value) {
    const bool target = dotted.size() > 8 && dotted.compare(dotted.size() - 8, 8, "_target_") == 0;
    if (!target && !MegatronBridgeFieldTable().count(dotted)) throw Error("internal: " + dotted + " is not a Megatron-Bridge key");
    const size_t dot = dotted.find('.');
    sections[dotted.substr(0, dot)][dotted.substr(dot + 1)] = value;
  };
  bool fp8 = false, grad_bf16 = false;
  std::string fp8_format, fp8_recipe;
  bool fp16 = false, fp8_param_gather = false;
  bool vocab_divisor_written = false;
  for (const ConfigArg& a : args) {
    const std::string value = a.values.empty() ? "" : a.values.front();
    if (a.key == "--bf16") continue;
    if (a.key == "--fp16") { fp16 = true; continue; }
    if (a.key == "--fp8-format") { fp8 = true; fp8_format = value; continue; }
    if (a.key == "--fp8-recipe") { fp8_recipe = value; continue; }
    if (a.key == "--fp8-param-gather") { fp8_param_gather = true; continue; }
    if (a.key == "--grad-reduce-in-bf16") { grad_bf16 = true; continue; }
    if (a.key == "--group-query-attention") continue;  // num_query_groups says it
    if (a.key == "--max-position-embeddings") continue;  // the recipe's (the HF config's); checked at read
    if (a.key == "--make-vocab-size-divisible-by") {
      vocab_divisor_written = true;
      put("model.should_pad_vocab", value == "1" ? "false" : "true");
      if (value != "1") put("model.make_vocab_size_divisible_by", value);
      continue;
    }
    if (a.key == "--seq-length") put("dataset.seq_length", value);
    if (a.key == "--moe-layer-freq") {
      // Megatron's list expression as the list Bridge holds.
      std::string list;
      for (const bool moe : plan.model.moe_layers) list += std::string(list.empty() ? "" : ", ") + (moe ? "1" : "0");
      put("model.moe_layer_freq", "[" + list + "]");
      continue;
    }
    const auto it = of.find(a.key);
    if (it == of.end()) throw Error(fmt::format("--emit megatron-bridge: {} has no Megatron-Bridge key", a.key));
    const Mapping& m = *it->second;
    switch (m.kind) {
      case Kind::kValue: put(m.bridge, value.find_first_of(" :#'\"|*[]{},") == std::string::npos && !value.empty() ? value : "'" + value + "'"); break;
      case Kind::kSwitch: put(m.bridge, "true"); break;
      case Kind::kNegSwitch: put(m.bridge, "false"); break;
      case Kind::kDtype: put(m.bridge, value == "bf16" ? "{_target_: torch.bfloat16, _call_: false}" : "{_target_: torch.float32, _call_: false}"); break;
      case Kind::kList: put(m.bridge, "[" + fmt::format("{}", fmt::join(a.values, ", ")) + "]"); break;
    }
  }
  // Mixed precision, which Bridge applies at run time over the model's, DDP's and the optimizer's
  // fields: a named recipe (mixed_precision.py) where one says it (its gradients reduced in fp32),
  // else a MixedPrecisionConfig.
  // A named recipe also sets fp8_param_gather (RecipeArgs): named only where the plan's agrees.
  std::string recipe;
  if (!fp16 && !grad_bf16 && !fp8_attention) {
    if (!fp8) recipe = "bf16_mixed";
    else if (fp8_recipe == "tensorwise" && fp8_param_gather) recipe = "bf16_with_fp8_current_scaling_mixed";
    else if (fp8_recipe == "blockwise" && !fp8_param_gather) recipe = "bf16_with_fp8_subchannel_scaling_mixed";
    else if (fp8_recipe == "mxfp8" && fp8_param_gather) recipe = "bf16_with_mxfp8_mixed";
    else if (fp8_recipe == "delayed" && fp8_format == "hybrid" && fp8_param_gather) recipe = "bf16_with_fp8_delayed_scaling_mixed";
  }
  if (!recipe.empty()) {
    mixed_precision = recipe;
  } else {
    put("mixed_precision._target_", "megatron.bridge.training.mixed_precision.MixedPrecisionConfig");
    put("mixed_precision.bf16", fp16 ? "false" : "true");
    if (fp16) put("mixed_precision.fp16", "true");
    put("mixed_precision.params_dtype", fp16 ? "{_target_: torch.float16, _call_: false}" : "{_target_: torch.bfloat16, _call_: false}");
    put("mixed_precision.grad_reduce_in_fp32", grad_bf16 ? "false" : "true");
    if (fp8) {
      put("mixed_precision.fp8", fp8_format);
      put("mixed_precision.fp8_recipe", fp8_recipe);
      if (fp8_param_gather) put("mixed_precision.fp8_param_gather", "true");
      if (fp8_attention) put("mixed_precision.fp8_dot_product_attention", "true");
    }
  }
  if (plan.dims.ep > 1) put("model.expert_tensor_parallel_size", std::to_string(plan.dims.etp));
  // The plan padded the vocabulary by Megatron-LM's default divisor (no --make-vocab-size-divisible-by
  // written): Bridge pads nothing unless told (should_pad_vocab false by default).
  if (!vocab_divisor_written) {
    put("model.should_pad_vocab", "true");
    put("model.make_vocab_size_divisible_by", std::to_string(kMegatronVocabDivisor));
  }
  // With the EP overlap on, its delayed weight gradients are written either way: Bridge's
  // performance recipes set comm_overlap.delay_wgrad_compute true, which a plan without it must undo.
  if (plan.training.run.overlap_moe_ep_comm && !plan.training.run.delay_wgrad_compute) put("comm_overlap.delay_wgrad_compute", "false");
  // Bridge asserts the loss's NaN check off with a whole-iteration graph (config.py: "check_for_nan_in_loss
  // must be disabled when using full_iteration CUDA graph"), beside DDP's gradient check.
  if (plan.training.run.full_iteration_cuda_graph) put("rerun_state_machine.check_for_nan_in_loss", "false");
  // CommOverlapConfig's data-parallel settings, written either way under the distributed
  // optimizer: its setup() turns both overlaps on with dp > 1, with 128 Mi buckets and aligned
  // gathers at pp > 1 and vpp > 1 (comm_overlap.py _get_optimizer_overlap_cfgs), and the
  // performance scripts the optimizer-step overlap at vpp > 1; a plan priced otherwise must say so.
  const RunSettings& run = plan.training.run;
  if (plan.training.dp_sharding == DpSharding::kDdp) {
    // Plain DDP: a recipe's distributed optimizer undone; CommOverlapConfig's optimizer overlaps
    // apply only with it, DDP's own gradient-reduce overlap is ddp's.
    put("ddp.use_distributed_optimizer", "false");
    put("optimizer.use_distributed_optimizer", "false");
    put("ddp.overlap_grad_reduce", run.overlap_grad_reduce ? "true" : "false");
  }
  if (plan.training.dp_sharding == DpSharding::kZero1) {
    put("comm_overlap.overlap_grad_reduce", run.overlap_grad_reduce ? "true" : "false");
    put("comm_overlap.overlap_param_gather", run.overlap_param_gather ? "true" : "false");
    put("comm_overlap.bucket_size", std::to_string(DdpBucketElems(run, plan.dims.dp_replicate * plan.dims.dp_shard * plan.dims.cp)));
    if (run.vpp > 1) {
      put("comm_overlap.align_param_gather", run.align_param_gather ? "true" : "false");
      put("comm_overlap.overlap_param_gather_with_optimizer_step", run.overlap_param_gather_with_optimizer_step ? "true" : "false");
    }
  }
  std::string text;
  for (const std::string& h : header_lines) text += "# " + h + "\n";
  text += fmt::format("# Megatron-Bridge at {}: an overrides YAML for {} GPUs, to merge onto the run's recipe (the model from its HF config).\n",
                      std::string(kMegatronBridgeCommit).substr(0, 9), plan.dims.world_size);
  if (!mixed_precision.empty()) text += "mixed_precision: " + mixed_precision + "\n";
  for (const auto& [section, keys] : sections) {
    text += section + ":\n";
    for (const auto& [k, v] : keys) text += "  " + k + ": " + v + "\n";
  }
  // The job's hardware queues: a recipe's env_vars (installed with os.environ.setdefault, so a value
  // the shell exports wins), written where the plan was priced with another than CUDA's 8 (which a
  // performance recipe's 32 or 8 would otherwise replace).
  if (run.cuda_device_max_connections != kCudaDefaultMaxConnections) {
    text += fmt::format("env_vars:\n  CUDA_DEVICE_MAX_CONNECTIONS: {}\n", run.cuda_device_max_connections);
  }
  return text;
}

}  // namespace dockyard
