// libFuzzer target: BuildPlan + PlanToJson / PlanToText (memory and traffic included) + the
// refit map, on small fuzzed degrees and training settings.
//
// Input: a 16-byte header that decodes into a world of at most 64 ranks, its degrees (mostly
// divisors of what is left, so that most plans are valid; sometimes raw small values, so that
// the rules are exercised too) and training settings; the rest, when present, is a model (an HF
// config.json or a dockyard spec, detected like LoadModel does), else one of the built-in tiny
// models picked by the header. Models with more than 64 layers or 256 experts are skipped to
// keep executions fast (sizes themselves are not limited).
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz/fuzz_util.h"
#include "planner/base/error.h"
#include "planner/model/hf_config.h"
#include "planner/accounting/memory.h"
#include "planner/model/model_spec.h"
#include "planner/layout/plan.h"
#include "planner/accounting/refit.h"
#include "planner/report/report.h"
#include "planner/model/model_file.h"
#include "planner/model/training_json.h"

namespace {

// Tiny models of the main layouts (GQA, MLA with dense layers and shared experts, fused qkv,
// biases and sinks, interleaved MoE layers, shared-expert gate, full-width qk norm, layernorm
// with bias, tied embeddings).
const char* const kModels[] = {
    R"({"architectures":["MixtralForCausalLM"],"hidden_size":64,"intermediate_size":96,"num_attention_heads":8,
        "num_key_value_heads":4,"num_hidden_layers":4,"num_local_experts":8,"num_experts_per_tok":2,"vocab_size":1000})",
    R"({"architectures":["DeepseekV3ForCausalLM"],"hidden_size":64,"intermediate_size":160,"moe_intermediate_size":24,
        "num_attention_heads":4,"num_hidden_layers":5,"first_k_dense_replace":2,"n_routed_experts":16,"n_shared_experts":1,
        "num_experts_per_tok":4,"kv_lora_rank":32,"q_lora_rank":48,"qk_nope_head_dim":16,"qk_rope_head_dim":8,
        "v_head_dim":16,"vocab_size":999,"routed_scaling_factor":2.5})",
    R"({"architectures":["DbrxForCausalLM"],"d_model":96,"n_heads":6,"n_layers":3,"vocab_size":500,
        "attn_config":{"kv_n_heads":2},"ffn_config":{"moe_num_experts":6,"moe_top_k":2,"ffn_hidden_size":40}})",
    R"({"architectures":["GptOssForCausalLM"],"hidden_size":48,"num_attention_heads":8,"num_key_value_heads":2,
        "head_dim":8,"num_hidden_layers":3,"num_local_experts":8,"experts_per_token":2,"intermediate_size":36,
        "vocab_size":700,"tie_word_embeddings":true})",
    R"({"architectures":["Llama4ForCausalLM"],"hidden_size":64,"intermediate_size":32,"intermediate_size_mlp":128,
        "num_attention_heads":8,"num_key_value_heads":2,"head_dim":8,"num_hidden_layers":6,"num_local_experts":4,
        "interleave_moe_layer_step":2,"vocab_size":300})",
    R"({"architectures":["Qwen2MoeForCausalLM"],"hidden_size":64,"intermediate_size":128,"moe_intermediate_size":20,
        "shared_expert_intermediate_size":80,"num_attention_heads":4,"num_key_value_heads":4,"num_hidden_layers":4,
        "num_experts":12,"num_experts_per_tok":3,"decoder_sparse_step":2,"mlp_only_layers":[3],"vocab_size":333})",
    R"({"architectures":["OlmoeForCausalLM"],"hidden_size":32,"num_attention_heads":4,"num_key_value_heads":4,
        "num_hidden_layers":2,"num_experts":64,"num_experts_per_tok":8,"intermediate_size":16,"vocab_size":50})",
    R"({"architectures":["PhiMoEForCausalLM"],"hidden_size":48,"num_attention_heads":4,"num_key_value_heads":2,
        "num_hidden_layers":2,"num_local_experts":4,"num_experts_per_tok":2,"intermediate_size":30,"vocab_size":64,
        "attention_bias":true,"lm_head_bias":true,"torch_dtype":"float32"})",
};

// The divisors of n (n >= 1), ascending.
std::vector<int64_t> Divisors(int64_t n) {
  std::vector<int64_t> out;
  for (int64_t d = 1; d <= n; ++d) {
    if (n % d == 0) out.push_back(d);
  }
  return out;
}

// A degree for what is left of the world: usually a divisor of `left`; for bytes >= 0xF0 a
// raw value in [-8, 7] (zero and negatives included, to exercise the rules).
int64_t PickDegree(uint8_t b, int64_t left) {
  if (b >= 0xF0) return static_cast<int64_t>(b) - 0xF8;
  const std::vector<int64_t> d = Divisors(left < 1 ? 1 : left);
  return d[b % d.size()];
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  uint8_t h[16] = {};
  for (size_t i = 0; i < 16 && i < size; ++i) h[i] = data[i];
  const std::string text = size > 16 ? std::string(reinterpret_cast<const char*>(data) + 16, size - 16) : "";

  dockyard::ModelSpec model;
  try {
    if (text.empty()) {
      const char* m = kModels[h[15] % (sizeof(kModels) / sizeof(kModels[0]))];
      model = dockyard::ModelSpecFromHfConfig(dockyard::ParseJsonText(m, "builtin.json"), "builtin.json");
    } else {
      const dockyard::Json json = dockyard::ParseJsonText(text, "fuzz.json");
      model = dockyard::IsDockyardModelSpec(json) ? dockyard::ModelSpecFromJson(json, "fuzz.json")
                                                  : dockyard::ModelSpecFromHfConfig(json, "fuzz.json");
    }
  } catch (const dockyard::Error&) {
    return 0;
  }
  if (model.num_hidden_layers > 64 || model.moe.num_experts > 256) return 0;

  dockyard::ParallelDimsOptions o;
  o.world_size = 1 + h[0] % 64;
  int64_t left = o.world_size;
  o.pp = PickDegree(h[1], left);
  if (o.pp >= 1) left /= o.pp;
  o.dp_replicate = PickDegree(h[2], left);
  if (o.dp_replicate >= 1) left /= o.dp_replicate;
  o.cp = PickDegree(h[3], left);
  if (o.cp >= 1) left /= o.cp;
  o.tp = PickDegree(h[4], left);
  if (o.tp >= 1) left /= o.tp;
  o.dp_shard = (h[5] & 1) ? left : -1;
  if ((h[5] & 6) == 6) o.dp_shard = static_cast<int64_t>(h[5] >> 3) - 4;  // sometimes wrong
  const int64_t sparse = left * (o.cp >= 1 ? o.cp : 1) * (o.tp >= 1 ? o.tp : 1);
  // All three conventions: megatron, torchtitan as it is, and torchtitan before PR #3167 (etp 1 or tp).
  o.convention = (h[6] & 1)      ? dockyard::Convention::kMegatron
                 : (h[6] & 0x80) ? dockyard::Convention::kTorchtitan2026_03
                                 : dockyard::Convention::kTorchtitan;
  const int64_t etp = (h[6] & 2) ? (o.convention == dockyard::Convention::kMegatron ? PickDegree(h[6] >> 2, sparse) : o.tp) : 1;
  o.etp = etp;
  o.ep = PickDegree(h[7], sparse / (etp >= 1 && sparse % etp == 0 ? etp : 1));

  dockyard::TrainingConfig t = model.training.value_or(dockyard::TrainingConfig{});
  static const int64_t kSeqLens[] = {1, 7, 4096, 131072, int64_t{1} << 31, 3};
  static const int64_t kMicroBatch[] = {1, 2, 3, 8, int64_t{1} << 20, 0};
  static const double kImbalance[] = {1.0, 1.5, 3.0, 1e6, 0.5, 2.0};
  static const int64_t kGpusPerNode[] = {8, 1, 2, 4, 16, 3, int64_t{1} << 20, 0};
  static const char* const kDtypes[] = {"bfloat16", "float32", "float8_e4m3fn", "float16", "float64", "int4"};
  if (h[8] & 0x80) {
    t.seq_len = kSeqLens[h[8] % 6];
    t.micro_batch_size = kMicroBatch[(h[8] >> 3) % 6];
  }
  if (h[9] & 0x80) {
    t.recompute = static_cast<dockyard::Recompute>(h[9] % 3);
    t.optimizer = (h[9] & 4) ? dockyard::Optimizer::kSgd : dockyard::Optimizer::kAdamW;
    const int s = (h[9] >> 3) % 4;
    if (s < 3) t.dp_sharding = static_cast<dockyard::DpSharding>(s);
  }
  if (h[10] & 0x80) t.imbalance = kImbalance[h[10] % 6];
  dockyard::Machine machine;
  if (h[10] & 0x40) machine.gpu_memory_gib = (h[10] & 0x3f) * 4.0;
  if (h[11] & 0x80) machine.gpus_per_node = kGpusPerNode[h[11] % 8];
  if (h[12] & 0x80) {
    t.dispatcher = dockyard::Dispatcher::kDeredundency;
    if (h[12] & 0x40) t.oep = static_cast<int64_t>(h[12] & 0x3f) - 1;
  }
  if (h[13] & 0x80) {
    t.param_dtype = kDtypes[h[13] % 6];
    t.grad_dtype = kDtypes[(h[13] >> 3) % 6];
  }
  if (h[14] & 0x80) t.num_microbatches = static_cast<int64_t>(h[14] & 0x3f);
  if (h[14] & 0x40) t.refit_dtype = "float8_e4m3fn";

  dockyard::Plan plan;
  std::vector<int64_t> param_bytes_per_rank;
  try {
    dockyard::ValidateTraining(t, "training.");
    dockyard::ValidateMachine(machine, "training.");
    plan = dockyard::BuildPlan(model, o, t, machine);
    param_bytes_per_rank = dockyard::ParamBytesPerRank(plan);
  } catch (const dockyard::Error&) {
    return 0;
  }
  // Invariants of a built plan.
  if (plan.dims.world_size != o.world_size) dockyard_fuzz::Fail("world size changed");
  if (static_cast<int64_t>(param_bytes_per_rank.size()) != o.world_size) dockyard_fuzz::Fail("bytes per rank size");
  if (plan.experts.num_local_experts * plan.dims.ep != model.moe.num_experts) dockyard_fuzz::Fail("experts do not cover");
  for (int64_t b : param_bytes_per_rank) {
    if (b < 0) dockyard_fuzz::Fail("negative parameter bytes on a rank");
  }
  try {
    const dockyard::Json report = dockyard::PlanToJson(plan, "fuzz.json");
    dockyard_fuzz::CheckFinite(report);
    const std::string dumped = report.dump(1, ' ', false, dockyard::Json::error_handler_t::replace);
    dockyard::ParseJsonText(dumped, "report.json");
    (void)dockyard::PlanToText(plan, "fuzz.json");
    const dockyard::MemoryReport memory = dockyard::ComputeMemory(plan);
    (void)dockyard::MemoryToText(plan, memory);
    if (model.num_hidden_layers * model.moe.num_experts <= 4096) {
      const dockyard::Json refit = dockyard::RefitMapToJson(dockyard::BuildRefitMap(plan, plan.training.refit_dtype));
      dockyard_fuzz::CheckFinite(refit);
    }
  } catch (const dockyard::Error&) {
    // Overflow of a product of sizes is reported as an Error; that is fine.
  }
  return 0;
}
