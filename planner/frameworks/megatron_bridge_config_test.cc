// Megatron-Bridge configs (megatron_bridge_config.h): the key table, an overrides YAML over --model,
// a run_config.yaml dump alone, Bridge's defaults, errors named by the Bridge key, and the written
// overrides read back.
#include "planner/frameworks/megatron_bridge_config.h"

#include <fstream>
#include <regex>
#include <sstream>

#include <doctest/doctest.h>

#include "planner/base/error.h"
#include "planner/frameworks/framework_test_util.h"
#include "planner/frameworks/megatron_args.h"
#include "planner/model/model_file.h"
#include "planner/model/training.h"

namespace dockyard {
namespace {

using testing::FlagFrom;
using testing::FlagValue;
using testing::HybridEpTraining;
using testing::MegatronDims;
using testing::Qwen;

std::string ErrorOf(const std::string& yaml, const std::optional<ModelSpec>& model = Qwen()) {
  try {
    ImportMegatronBridgeConfig(yaml, "b.yaml", model);
  } catch (const Error& e) {
    return e.what();
  }
  return "<no error>";
}

}  // namespace

TEST_CASE("the key table holds Bridge's and Megatron-Core's fields") {
  const auto& t = MegatronBridgeFieldTable();
  CHECK(t.at("model") == "section");
  CHECK(t.at("model.num_moe_experts") == "field");            // GPTModelProvider
  CHECK(t.at("model.expert_tensor_parallel_size") == "field");  // ModelParallelConfig
  CHECK(t.at("ddp.use_distributed_optimizer") == "field");      // Megatron-Core's DDP config
  CHECK(t.at("mixed_precision.grad_reduce_in_fp32") == "field");
  CHECK(t.at("model.transformer") == "section");  // a builder-backed model's TransformerConfig
  CHECK(t.count("model.num_experts") == 0);       // Megatron-LM's argument name, not Bridge's key
}

TEST_CASE("every Bridge key the reader and the writer name is one of Bridge's (a misspelt key fails here)") {
  // The translation table of megatron_bridge_config.cc: {"section.key", "--megatron-argument", Kind}.
  std::ifstream in("planner/frameworks/megatron_bridge_config.cc");
  REQUIRE(in.good());
  std::stringstream text;
  text << in.rdbuf();
  const std::string source = text.str();  // one string for the iterators below
  const std::regex row(R"re(\{"([a-z_]+\.[a-z_0-9]+)", "--)re");
  int rows = 0;
  for (std::sregex_iterator it(source.begin(), source.end(), row), end; it != end; ++it) {
    const std::string key = (*it)[1];
    CHECK_MESSAGE(MegatronBridgeFieldTable().count(key) == 1, key);
    ++rows;
  }
  CHECK(rows >= 80);
}

TEST_CASE("an overrides YAML over --model: the file's keys, Bridge's defaults where absent") {
  const FrameworkConfig c = ImportMegatronBridgeConfig(
      "model:\n  tensor_model_parallel_size: 2\n  sequence_parallel: true\n  expert_model_parallel_size: 8\n  seq_length: 4096\n"
      "  moe_token_dispatcher_type: flex\n  moe_flex_dispatcher_backend: hybridep\ntrain:\n  micro_batch_size: 1\n  global_batch_size: 512\n"
      "ddp:\n  use_distributed_optimizer: true\nmixed_precision: bf16_with_fp8_current_scaling_mixed\n",
      "b.yaml", Qwen());
  CHECK(c.framework == "Megatron-Bridge");
  CHECK(c.form == "overrides YAML");
  CHECK(c.keys == 10);  // 6 under model, 2 under train, 1 under ddp, mixed_precision
  CHECK(FlagValue(c, "--tp") == "2");
  CHECK(FlagFrom(c, "--tp") == "model.tensor_model_parallel_size");
  CHECK(FlagValue(c, "--ep") == "8");
  CHECK(FlagValue(c, "--etp") == "1");  // Bridge: 1 with EP (Megatron-LM's default would be tp)
  CHECK(FlagValue(c, "--make-vocab-size-divisible-by") == "1");  // should_pad_vocab false
  CHECK(FlagValue(c, "--dispatcher") == "deepep");
  CHECK(FlagValue(c, "--moe-flex-dispatcher-backend") == "hybridep");
  CHECK(FlagValue(c, "--precision") == "fp8");
  CHECK(FlagValue(c, "--fp8-recipe") == "tensorwise");
  // The current-scaling recipe also sets fp8_param_gather (Bridge's mixed_precision.py).
  CHECK(FlagValue(c, "--fp8-param-gather") == "");
  CHECK(FlagValue(c, "--global-batch-size") == "512");
  CHECK(FlagValue(c, "--dp-sharding") == "zero1");
  // The model is --model's: a key of the file that disagrees with it is an error on its line.
  std::string mismatch;
  try {
    MegatronModel(ImportMegatronBridgeConfig("model:\n  num_layers: 40\n", "b.yaml", Qwen()), Qwen());
  } catch (const Error& e) {
    mismatch = e.what();
  }
  CHECK(mismatch.rfind("b.yaml:2: --num-layers 40 but --model testdata/hf/qwen3-30b-a3b.json has num_hidden_layers 48", 0) == 0);
  CHECK(ErrorOf("model:\n  tensor_model_parallel_size: 2\n", std::nullopt) ==
        "b.yaml: an overrides YAML leaves the model to its recipe: give --model (the HF config.json the recipe builds)");
}

TEST_CASE("bad input: the Bridge key, its line and the rule") {
  CHECK(ErrorOf("model:\n  num_moe_expert: 8\n") ==
        "b.yaml:2: model.num_moe_expert: not a key of Megatron-Bridge's ConfigContainer at 067f987df; did you mean 'model.num_moe_experts'?");
  CHECK(ErrorOf("trian:\n  micro_batch_size: 1\n").rfind("b.yaml:1: trian: not a key of Megatron-Bridge's ConfigContainer", 0) == 0);
  CHECK(ErrorOf("model:\n  seq_length: 4096\ndataset:\n  seq_length: 2048\n") ==
        "b.yaml:4: dataset.seq_length 2048 differs from model.seq_length 4096: Megatron-Bridge requires them equal");
  CHECK(ErrorOf("model:\n  sequence_parallel: maybe\n") == "b.yaml:2: model.sequence_parallel maybe: must be true or false");
  CHECK(ErrorOf("mixed_precision: bf16_mixd\n").find("mixed_precision bf16_mixd: the recipes dockyard reads are") != std::string::npos);
  CHECK(ErrorOf("model: [1, 2\n").rfind("b.yaml:", 0) == 0);  // YAML syntax, with its line
  CHECK(ErrorOf("").find("no Megatron-Bridge settings") != std::string::npos);
  // QA round 3: a section as a list, a key twice, a second document, Megatron-LM's name for a key.
  CHECK(ErrorOf("model:\n  - tensor_model_parallel_size: 2\n") ==
        "b.yaml:1: model: must be a mapping of its settings (model: then one setting per line), got a list");
  CHECK(ErrorOf("model:\n  tensor_model_parallel_size: 2\n  tensor_model_parallel_size: 4\n") ==
        "b.yaml:3: model.tensor_model_parallel_size: given twice (OmegaConf, which Bridge reads it with, refuses duplicate keys)");
  CHECK(ErrorOf("model:\n  tensor_model_parallel_size: 2\n---\nmodel:\n  expert_model_parallel_size: 8\n") ==
        "b.yaml:4: a second YAML document (after ---): a Megatron-Bridge config is one document");
  CHECK(ErrorOf("model:\n  num_experts: 128\n") ==
        "b.yaml:2: model.num_experts: not a key of Megatron-Bridge's ConfigContainer at 067f987df: Megatron-LM's --num-experts is Bridge's "
        "model.num_moe_experts");
  CHECK(ErrorOf("ddp:\n  use_distributed_optimizer: Yes\n") == "<no error>");  // YAML 1.1's boolean, as PyYAML reads it
  // Quoted, a YAML boolean is a string to PyYAML: refused, with the value; a list likewise.
  CHECK(ErrorOf("comm_overlap:\n  tp_comm_overlap: \"yes\"\n") ==
        "b.yaml:2: comm_overlap.tp_comm_overlap \"yes\": must be true or false, not a quoted string");
  CHECK(ErrorOf("ddp:\n  use_distributed_optimizer: [true]\n") == "b.yaml:2: ddp.use_distributed_optimizer: must be true or false, got a list");
}

TEST_CASE("TP communication overlap as Bridge's CommOverlapConfig applies it") {
  auto overlap = [](const std::string& yaml) { return FlagValue(ImportMegatronBridgeConfig(yaml, "b.yaml", Qwen()), "--tp-comm-overlap"); };
  // On with tp > 1 and sequence parallelism.
  CHECK(overlap("model:\n  tensor_model_parallel_size: 2\n  sequence_parallel: true\ncomm_overlap:\n  tp_comm_overlap: true\n") == "");
  // CommOverlapConfig turns it off without sequence parallelism or at tp 1 ("Disabling tensor
  // parallel communication overlap due to sequence_parallel=False" / "TP size < 2", comm_overlap.py).
  CHECK(overlap("model:\n  tensor_model_parallel_size: 2\n  sequence_parallel: false\ncomm_overlap:\n  tp_comm_overlap: true\n") ==
        "<absent>");
  CHECK(overlap("model:\n  tensor_model_parallel_size: 1\ncomm_overlap:\n  tp_comm_overlap: true\n") == "<absent>");
  // Its setup() writes its value over the model config's: in an overrides YAML comm_overlap decides.
  CHECK(overlap("model:\n  tensor_model_parallel_size: 2\n  sequence_parallel: true\n  tp_comm_overlap: false\n"
                "comm_overlap:\n  tp_comm_overlap: true\n") == "");
  CHECK(overlap("model:\n  tensor_model_parallel_size: 2\n  sequence_parallel: true\n  tp_comm_overlap: true\n"
                "comm_overlap:\n  tp_comm_overlap: false\n") == "<absent>");
  // model.tp_comm_overlap with no comm_overlap value reaches Megatron-Core as given: Megatron-LM's
  // rule refuses it without sequence parallelism, named by the Bridge key and its line.
  const std::string refused = ErrorOf("model:\n  tensor_model_parallel_size: 2\n  tp_comm_overlap: true\n");
  CHECK(refused.rfind("b.yaml:3: ", 0) == 0);
  CHECK(refused.find("--tp-comm-overlap needs --sequence-parallel, which the file does not set at tp 2") != std::string::npos);
  CHECK(refused.find("(Megatron-LM's --tp-comm-overlap, which model.tp_comm_overlap sets)") != std::string::npos);
}

TEST_CASE("delayed weight gradients: comm_overlap.delay_wgrad_compute (or model.) is Megatron's --delay-wgrad-compute") {
  auto delay = [](const std::string& yaml) { return FlagValue(ImportMegatronBridgeConfig(yaml, "b.yaml", Qwen()), "--delay-wgrad-compute"); };
  // Bridge's performance scripts: moe_a2a_overlap sets both (scripts/performance/utils/overrides.py).
  CHECK(delay("comm_overlap:\n  overlap_moe_expert_parallel_comm: true\n  delay_wgrad_compute: true\n") == "");
  CHECK(delay("model:\n  delay_wgrad_compute: true\n") == "");
  CHECK(delay("comm_overlap:\n  overlap_moe_expert_parallel_comm: true\n") == "<absent>");
  // CommOverlapConfig owns both keys: in an overrides YAML comm_overlap's value wins over the
  // model's (setup() writes it over); in a run_config dump the model's is what ran.
  CHECK(delay("comm_overlap:\n  overlap_moe_expert_parallel_comm: true\n  delay_wgrad_compute: false\nmodel:\n"
              "  delay_wgrad_compute: true\n") == "<absent>");
  CHECK(delay("comm_overlap:\n  overlap_moe_expert_parallel_comm: true\n  delay_wgrad_compute: true\nmodel:\n"
              "  delay_wgrad_compute: false\n") == "");
  auto overlap = [](const std::string& yaml) {
    return FlagValue(ImportMegatronBridgeConfig(yaml, "b.yaml", Qwen()), "--overlap-moe-expert-parallel-comm");
  };
  CHECK(overlap("comm_overlap:\n  overlap_moe_expert_parallel_comm: false\nmodel:\n  overlap_moe_expert_parallel_comm: true\n") ==
        "<absent>");
  // Written back under comm_overlap, and with the overlap on written either way: a performance
  // recipe's comm_overlap.delay_wgrad_compute true would otherwise survive a plan without it.
  ParallelDimsOptions d;
  d.world_size = 64;
  d.ep = 8;
  d.convention = Convention::kMegatron;
  TrainingConfig t;
  t.dp_sharding = DpSharding::kZero1;
  t.run.overlap_moe_ep_comm = true;
  const std::string off = EmitMegatronBridgeConfig(BuildPlan(Qwen(), d, t), 256, {"test"});
  CHECK(off.find("  overlap_moe_expert_parallel_comm: true\n") != std::string::npos);
  CHECK(off.find("  delay_wgrad_compute: false\n") != std::string::npos);
  CHECK(FlagValue(ImportMegatronBridgeConfig(off, "w.yaml", Qwen()), "--delay-wgrad-compute") == "<absent>");
  t.run.delay_wgrad_compute = true;
  const std::string on = EmitMegatronBridgeConfig(BuildPlan(Qwen(), d, t), 256, {"test"});
  CHECK(on.find("  delay_wgrad_compute: true\n") != std::string::npos);
  CHECK(FlagValue(ImportMegatronBridgeConfig(on, "w.yaml", Qwen()), "--delay-wgrad-compute") == "");
}

TEST_CASE("a run_config.yaml dump plans alone: _target_ keys, dtypes as mappings, a builder-backed model") {
  // The shape ConfigContainer.to_yaml writes (Megatron-LM megatron/training/config/container.py):
  // a _target_ per section, torch dtypes as {_call_: false, _target_: torch.bfloat16}.
  const std::string dump =
      "_target_: megatron.bridge.training.config.ConfigContainer\n"
      "ddp:\n  _target_: megatron.bridge.training.config.DistributedDataParallelConfig\n  grad_reduce_in_fp32: false\n"
      "  use_distributed_optimizer: true\n"
      "mixed_precision:\n  _target_: megatron.bridge.training.mixed_precision.MixedPrecisionConfig\n  bf16: true\n"
      "  grad_reduce_in_fp32: false\n  params_dtype: {_call_: false, _target_: torch.bfloat16}\n"
      "model:\n  _target_: megatron.bridge.models.gpt_provider.GPTModelProvider\n  add_bias_linear: false\n  bf16: true\n"
      "  expert_model_parallel_size: 4\n  ffn_hidden_size: 1024\n  gated_linear_unit: true\n  hidden_size: 512\n  kv_channels: 64\n"
      "  moe_ffn_hidden_size: 256\n  moe_layer_freq: [0, 1, 1, 1]\n  moe_router_topk: 2\n  normalization: RMSNorm\n  num_attention_heads: 8\n"
      "  num_layers: 4\n  num_moe_experts: 8\n  num_query_groups: 2\n  params_dtype: {_call_: false, _target_: torch.bfloat16}\n"
      "  position_embedding_type: rope\n  recompute_granularity: null\n  recompute_modules: [core_attn]\n  seq_length: 2048\n"
      "  share_embeddings_and_output_weights: false\n  vocab_size: 32000\n  should_pad_vocab: true\n  make_vocab_size_divisible_by: 128\n"
      "optimizer:\n  _target_: megatron.bridge.training.config.OptimizerConfig\n  optimizer: adam\n  use_precision_aware_optimizer: true\n"
      "  exp_avg_dtype: {_call_: false, _target_: torch.bfloat16}\n  exp_avg_sq_dtype: {_call_: false, _target_: torch.bfloat16}\n"
      "train:\n  _target_: megatron.bridge.training.config.TrainingConfig\n  global_batch_size: 64\n  micro_batch_size: 2\n";
  const FrameworkConfig c = ImportMegatronBridgeConfig(dump, "run_config.yaml", std::nullopt);
  CHECK(c.form == "run_config.yaml dump");
  CHECK(FlagValue(c, "--grad-dtype") == "bfloat16");
  CHECK(FlagValue(c, "--optimizer-states-dtype") == "bfloat16");
  CHECK(FlagValue(c, "--make-vocab-size-divisible-by") == "128");
  // recompute_modules without a granularity: no recompute, a setting of the dump (a flag that changes it contradicts it)
  CHECK(FlagValue(c, "--recompute") == "none");
  CHECK(FlagFrom(c, "--recompute") == "model.recompute_granularity (null)");
  const ModelSpec m = MegatronModel(c, std::nullopt);
  CHECK(m.num_hidden_layers == 4);
  CHECK(m.NumMoeLayers() == 3);  // moe_layer_freq [0, 1, 1, 1]
  CHECK(m.attention.num_key_value_heads == 2);
  CHECK(m.moe.num_experts == 8);
  CHECK(!m.tie_word_embeddings);
  // The same model, builder-backed: the TransformerConfig under model.transformer.
  const std::string builder =
      "_target_: megatron.bridge.training.config.ConfigContainer\nmodel:\n  seq_length: 2048\n  vocab_size: 32000\n"
      "  share_embeddings_and_output_weights: false\n  position_embedding_type: rope\n  transformer:\n    num_layers: 4\n"
      "    hidden_size: 512\n    ffn_hidden_size: 1024\n    num_attention_heads: 8\n    num_query_groups: 2\n    kv_channels: 64\n"
      "    gated_linear_unit: true\n    add_bias_linear: false\n    normalization: RMSNorm\n    num_moe_experts: 8\n    moe_router_topk: 2\n"
      "    moe_ffn_hidden_size: 256\n    bf16: true\n";
  CHECK(MegatronModel(ImportMegatronBridgeConfig(builder, "b.yaml", std::nullopt), std::nullopt).moe.num_experts == 8);
  // Bridge's moe_grouped_gemm and moe_permute_fusion (off in Megatron-Core's TransformerConfig, on in
  // Bridge's MoE recipes): set, nothing is said; unset, the import says what dockyard prices instead.
  auto said = [](const FrameworkConfig& f, const std::string& prefix) {
    for (const std::string& line : f.ignored) {
      if (line.rfind(prefix, 0) == 0) return true;
    }
    return false;
  };
  CHECK(said(c, "(no --moe-grouped-gemm)"));
  CHECK(said(c, "(no --moe-permute-fusion)"));
  std::string fused = dump;
  fused.replace(fused.find("  moe_ffn_hidden_size: 256\n"), 0, "  moe_grouped_gemm: true\n  moe_permute_fusion: true\n");
  const FrameworkConfig f = ImportMegatronBridgeConfig(fused, "run_config.yaml", std::nullopt);
  CHECK_FALSE(said(f, "(no --moe-grouped-gemm)"));
  CHECK_FALSE(said(f, "(no --moe-permute-fusion)"));
}

TEST_CASE("a written overrides YAML reads back to the same settings") {
  // Qwen3-30B-A3B, tp 2 (sequence parallel), pp 2, ep 8, FP8 blockwise with bf16 gradient reduce:
  // no named recipe says that, so mixed precision is written as a MixedPrecisionConfig.
  ParallelDimsOptions d;
  d.world_size = 64;
  d.tp = 2;
  d.pp = 2;
  d.ep = 8;
  d.etp = 1;
  d.convention = Convention::kMegatron;
  TrainingConfig t;
  t.dp_sharding = DpSharding::kZero1;
  t.precision = "fp8";
  t.fp8_recipe = "blockwise";
  t.grad_dtype = "bfloat16";
  t.recompute = Recompute::kSelective;
  t.recompute_modules = {"moe_act", "layernorm"};
  t.run.tp_comm_overlap = true;
  const Plan plan = BuildPlan(Qwen(), d, t);
  const std::string written = EmitMegatronBridgeConfig(plan, 256, {"test"});
  // TP overlap under comm_overlap, which CommOverlapConfig.setup() writes over the model config.
  CHECK(written.find("comm_overlap:\n") != std::string::npos);
  CHECK(written.find("  tp_comm_overlap: true\n") != std::string::npos);
  CHECK(written.find("mixed_precision:\n  _target_: megatron.bridge.training.mixed_precision.MixedPrecisionConfig\n") != std::string::npos);
  CHECK(written.find("  fp8_recipe: blockwise\n") != std::string::npos);
  CHECK(written.find("  recompute_modules: [moe_act, layernorm]\n") != std::string::npos);
  const FrameworkConfig back = ImportMegatronBridgeConfig(written, "w.yaml", Qwen());
  CHECK(FlagValue(back, "--tp") == "2");
  CHECK(FlagValue(back, "--pp") == "2");
  CHECK(FlagValue(back, "--ep") == "8");
  CHECK(FlagValue(back, "--etp") == "1");
  CHECK(FlagValue(back, "--precision") == "fp8");
  CHECK(FlagValue(back, "--fp8-recipe") == "blockwise");
  CHECK(FlagValue(back, "--grad-dtype") == "bfloat16");
  CHECK(FlagValue(back, "--recompute") == "selective");
  CHECK(FlagValue(back, "--recompute-modules") == "moe_act,layernorm");
  CHECK(FlagValue(back, "--global-batch-size") == "256");
  CHECK(FlagValue(back, "--tp-comm-overlap") == "");
  CHECK(FlagFrom(back, "--tp-comm-overlap") == "comm_overlap.tp_comm_overlap");
}

TEST_CASE("MXFP8: bf16_with_mxfp8_mixed is MXFP8 with the parameter all-gather; without it a MixedPrecisionConfig is written") {
  const FrameworkConfig c = ImportMegatronBridgeConfig(
      "model:\n  expert_model_parallel_size: 8\nddp:\n  use_distributed_optimizer: true\nmixed_precision: bf16_with_mxfp8_mixed\n", "mx.yaml",
      Qwen());
  CHECK(FlagValue(c, "--precision") == "fp8");
  CHECK(FlagValue(c, "--fp8-recipe") == "mxfp8");
  CHECK(FlagValue(c, "--fp8-param-gather") == "");  // mixed_precision.py: fp8_param_gather = True
  ParallelDimsOptions d;
  d.world_size = 64;
  d.ep = 8;
  d.convention = Convention::kMegatron;
  TrainingConfig t;
  t.dp_sharding = DpSharding::kZero1;
  t.precision = "fp8";
  t.fp8_recipe = "mxfp8";
  // Without --fp8-param-gather no named recipe says it.
  const std::string plain = EmitMegatronBridgeConfig(BuildPlan(Qwen(), d, t), 256, {"test"});
  CHECK(plain.find("mixed_precision: bf16_with_mxfp8_mixed") == std::string::npos);
  CHECK(plain.find("  fp8_recipe: mxfp8\n") != std::string::npos);
  CHECK(plain.find("fp8_param_gather") == std::string::npos);
  // With it, the named recipe.
  t.fp8_param_gather = true;
  const std::string named = EmitMegatronBridgeConfig(BuildPlan(Qwen(), d, t), 256, {"test"});
  CHECK(named.find("mixed_precision: bf16_with_mxfp8_mixed\n") != std::string::npos);
  const FrameworkConfig back = ImportMegatronBridgeConfig(named, "w.yaml", Qwen());
  CHECK(FlagValue(back, "--fp8-recipe") == "mxfp8");
  CHECK(FlagValue(back, "--fp8-param-gather") == "");
}

TEST_CASE("the parameter all-gather's settings: CommOverlapConfig's over the ddp / optimizer keys, read and written") {
  auto flag = [](const std::string& yaml, const char* key) { return FlagValue(ImportMegatronBridgeConfig(yaml, "b.yaml", Qwen()), key); };
  // Megatron-Core DDP's keys (a run_config dump's ddp section: CommOverlapConfig wrote 128 Mi and,
  // without interleaving, align_param_gather false).
  CHECK(flag("ddp:\n  bucket_size: 134217728\n", "--ddp-bucket-size") == "134217728");
  CHECK(flag("ddp:\n  align_param_gather: false\n", "--no-align-param-gather") == "");
  CHECK(flag("ddp:\n  align_param_gather: true\n", "--no-align-param-gather") == "<absent>");
  CHECK(flag("ddp:\n  bucket_size: null\n", "--ddp-bucket-size") == "<absent>");  // Megatron-LM's default
  CHECK(flag("optimizer:\n  overlap_param_gather_with_optimizer_step: true\n", "--overlap-param-gather-with-optimizer-step") == "");
  // Bridge's performance scripts set it on comm_overlap (scripts/performance/utils/overrides.py);
  // CommOverlapConfig's value wins over the ddp / optimizer one in an overrides YAML (its setup()
  // writes it over them), the ddp / optimizer one is what ran in a dump.
  CHECK(flag("comm_overlap:\n  overlap_param_gather_with_optimizer_step: true\n", "--overlap-param-gather-with-optimizer-step") == "");
  CHECK(flag("comm_overlap:\n  bucket_size: 1000000\nddp:\n  bucket_size: 2000000\n", "--ddp-bucket-size") == "1000000");
  CHECK(flag("comm_overlap:\n  overlap_param_gather_with_optimizer_step: false\noptimizer:\n"
             "  overlap_param_gather_with_optimizer_step: true\n",
             "--overlap-param-gather-with-optimizer-step") == "<absent>");
  CHECK(flag("comm_overlap:\n  align_param_gather: null\n", "--no-align-param-gather") == "<absent>");  // CommOverlapConfig's unset
  // The two overlaps likewise: comm_overlap's switch over ddp's in an overrides YAML.
  const std::string both = "comm_overlap:\n  overlap_grad_reduce: true\n  overlap_param_gather: true\nddp:\n  overlap_grad_reduce: false\n"
                           "  overlap_param_gather: false\n";
  CHECK(flag(both, "--overlap-grad-reduce") == "");
  CHECK(flag(both, "--overlap-param-gather") == "");
  CHECK(ErrorOf("ddp:\n  align_param_gather: maybe\n").find("ddp.align_param_gather maybe: must be true or false") != std::string::npos);
  // Written under comm_overlap and read back.
  ParallelDimsOptions d;
  d.world_size = 64;
  d.pp = 2;
  d.ep = 8;
  d.convention = Convention::kMegatron;
  TrainingConfig t;
  t.dp_sharding = DpSharding::kZero1;
  t.run.vpp = 2;
  t.run.overlap_grad_reduce = t.run.overlap_param_gather = true;
  t.run.overlap_param_gather_with_optimizer_step = true;
  t.run.align_param_gather = false;
  t.run.ddp_bucket_size = 134217728;
  const std::string yaml = EmitMegatronBridgeConfig(BuildPlan(Qwen(), d, t), 256, {"test"});
  CHECK(yaml.find("  overlap_param_gather_with_optimizer_step: true\n") != std::string::npos);
  CHECK(yaml.find("  align_param_gather: false\n") != std::string::npos);
  CHECK(yaml.find("  bucket_size: 134217728\n") != std::string::npos);
  const FrameworkConfig back = ImportMegatronBridgeConfig(yaml, "w.yaml", Qwen());
  CHECK(FlagValue(back, "--overlap-param-gather-with-optimizer-step") == "");
  CHECK(FlagValue(back, "--no-align-param-gather") == "");
  CHECK(FlagValue(back, "--ddp-bucket-size") == "134217728");
  // A plan without the overlaps says so, and its bucket (Megatron-LM's default: dp 64 / pp 2 = 32,
  // max(40M, 32M) = 40M): CommOverlapConfig would otherwise turn them on with 128 Mi buckets.
  t.run = {};
  t.run.vpp = 2;
  const std::string plain = EmitMegatronBridgeConfig(BuildPlan(Qwen(), d, t), 256, {"test"});
  CHECK(plain.find("  overlap_grad_reduce: false\n") != std::string::npos);
  CHECK(plain.find("  overlap_param_gather: false\n") != std::string::npos);
  CHECK(plain.find("  bucket_size: 40000000\n") != std::string::npos);
  CHECK(plain.find("  overlap_param_gather_with_optimizer_step: false\n") != std::string::npos);
  CHECK(plain.find("  align_param_gather: true\n") != std::string::npos);
  // The vocabulary padded by Megatron-LM's default divisor 128 (no flag for it): Bridge is told,
  // since it pads nothing by default.
  CHECK(plain.find("  should_pad_vocab: true\n") != std::string::npos);
  CHECK(plain.find("  make_vocab_size_divisible_by: 128\n") != std::string::npos);
  CHECK(FlagValue(ImportMegatronBridgeConfig(plain, "w.yaml", Qwen()), "--make-vocab-size-divisible-by") == "128");
  // A plain-DDP plan undoes a recipe's distributed optimizer and says DDP's own overlap.
  t.dp_sharding = DpSharding::kDdp;
  t.run = {};
  const std::string ddp = EmitMegatronBridgeConfig(BuildPlan(Qwen(), d, t), 256, {"test"});
  CHECK(ddp.find("ddp:\n") != std::string::npos);
  CHECK(ddp.find("  use_distributed_optimizer: false\n") != std::string::npos);
  CHECK(ddp.find("  overlap_grad_reduce: false\n") != std::string::npos);
  CHECK(FlagValue(ImportMegatronBridgeConfig(ddp, "w.yaml", Qwen()), "--dp-sharding") == "ddp");
}

TEST_CASE("mixed precision has the last word on the gradient reduce's dtype over ddp.grad_reduce_in_fp32") {
  auto bf16 = [](const std::string& yaml) { return FlagValue(ImportMegatronBridgeConfig(yaml, "b.yaml", Qwen()), "--grad-dtype"); };
  CHECK(bf16("ddp:\n  grad_reduce_in_fp32: false\n") == "bfloat16");  // alone it decides
  // A named recipe (grad_reduce_in_fp32 true in each) or a MixedPrecisionConfig saying fp32 overrides it.
  CHECK(bf16("ddp:\n  grad_reduce_in_fp32: false\nmixed_precision: bf16_mixed\n") == "<absent>");
  CHECK(bf16("ddp:\n  grad_reduce_in_fp32: false\nmixed_precision:\n  bf16: true\n  grad_reduce_in_fp32: true\n") == "<absent>");
  CHECK(bf16("ddp:\n  grad_reduce_in_fp32: true\nmixed_precision:\n  bf16: true\n  grad_reduce_in_fp32: false\n") == "bfloat16");
  CHECK(ErrorOf("ddp:\n  grad_reduce_in_fp32: maybe\nmixed_precision: bf16_mixed\n").find("must be true or false") != std::string::npos);
}

TEST_CASE("the flex dispatcher's SMs: model.moe_flex_dispatcher_num_sms and the deprecated per-backend keys, read and written") {
  auto flag = [](const std::string& yaml) {
    return FlagValue(ImportMegatronBridgeConfig(yaml, "b.yaml", Qwen()), "--moe-flex-dispatcher-num-sms");
  };
  const std::string flex = "model:\n  moe_token_dispatcher_type: flex\n  moe_flex_dispatcher_backend: hybridep\n";
  CHECK(flag(flex + "  moe_flex_dispatcher_num_sms: 24\n") == "24");
  // Megatron-Bridge's gpt-oss recipes set the deprecated moe_hybridep_num_sms (16; its performance
  // scripts 32): Megatron-Core routes it to moe_flex_dispatcher_num_sms.
  CHECK(flag(flex + "  moe_hybridep_num_sms: 16\n") == "16");
  CHECK(flag(flex + "  moe_hybridep_num_sms: null\n") == "<absent>");
  // Under alltoall the recipes' value changes nothing: not set (listed as ignored); two different
  // deprecated values are still Megatron-Core's error (__post_init__ checks them whatever the dispatcher).
  CHECK(flag("model:\n  moe_token_dispatcher_type: alltoall\n  moe_hybridep_num_sms: 16\n") == "<absent>");
  CHECK(ErrorOf("model:\n  moe_token_dispatcher_type: alltoall\n  moe_deepep_num_sms: 16\n  moe_hybridep_num_sms: 24\n")
            .find("Conflicting deprecated SM-count knobs") != std::string::npos);
  // env_vars is a mapping of variables.
  CHECK(ErrorOf("env_vars:\n  - CUDA_DEVICE_MAX_CONNECTIONS=1\n")
            .find("b.yaml:1: env_vars: must be a mapping of variable: value (CUDA_DEVICE_MAX_CONNECTIONS: 32), got a list") != std::string::npos);
  // Written as the current key.
  const ParallelDimsOptions d = MegatronDims(16, 16);
  TrainingConfig t = HybridEpTraining(16);
  t.dp_sharding = DpSharding::kZero1;
  const std::string yaml = EmitMegatronBridgeConfig(BuildPlan(Qwen(), d, t), 256, {"test"});
  CHECK(yaml.find("  moe_flex_dispatcher_num_sms: 16\n") != std::string::npos);
  // The recipe's env_vars carry CUDA_DEVICE_MAX_CONNECTIONS (Bridge's performance recipes: 32 with
  // the flex dispatcher or on Blackwell, else 8): the job's hardware queues.
  const FrameworkConfig env = ImportMegatronBridgeConfig(flex + "env_vars:\n  CUDA_DEVICE_MAX_CONNECTIONS: 1\n  NCCL_NVLS_ENABLE: 0\n",
                                                         "e.yaml", Qwen());
  CHECK(FlagValue(env, "--cuda-device-max-connections") == "1");
  // Written back in env_vars where it is not CUDA's 8, and read again.
  t.run.cuda_device_max_connections = 1;
  const std::string with_env = EmitMegatronBridgeConfig(BuildPlan(Qwen(), d, t), 256, {"test"});
  CHECK(with_env.find("env_vars:\n  CUDA_DEVICE_MAX_CONNECTIONS: 1\n") != std::string::npos);
  CHECK(FlagValue(ImportMegatronBridgeConfig(with_env, "w.yaml", Qwen()), "--cuda-device-max-connections") == "1");
  CHECK(ErrorOf("env_vars:\n  CUDA_DEVICE_MAX_CONNECTIONS: 64\n")
            .find("b.yaml:2: env_vars.CUDA_DEVICE_MAX_CONNECTIONS 64: must be an integer from 1 to 32 (CUDA's range)") != std::string::npos);
  CHECK(ErrorOf("env_vars:\n  CUDA_DEVICE_MAX_CONNECTIONS: [1]\n").find("CUDA_DEVICE_MAX_CONNECTIONS (a list): must be an integer") !=
        std::string::npos);
  // OmegaConf refuses a key given twice, in env_vars too.
  CHECK(ErrorOf("env_vars:\n  CUDA_DEVICE_MAX_CONNECTIONS: 1\n  CUDA_DEVICE_MAX_CONNECTIONS: 8\n")
            .find("b.yaml:3: env_vars.CUDA_DEVICE_MAX_CONNECTIONS: given twice") != std::string::npos);
  CHECK(FlagValue(ImportMegatronBridgeConfig(yaml, "w.yaml", Qwen()), "--moe-flex-dispatcher-num-sms") == "16");
}

}  // namespace dockyard
