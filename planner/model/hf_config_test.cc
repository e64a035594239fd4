// Tests for the HuggingFace config.json reader (hf_config.h): every real config in testdata/hf/ is
// loaded through LoadModel, its normalized fields checked, and its BuildInventory totals compared
// with a hand count (the per-layer arithmetic is in the comment above each assertion) and, where a
// publisher gives one, the published figure at the precision it is published with. Invalid inputs
// are built in code, one per test case.
//
// Notation in the comments: D hidden size, L layers, H attention heads, KV key/value heads, hd
// head_dim, V vocab, E routed experts, F routed-expert intermediate size, k top-k. A SwiGLU expert
// (gate, up, down) holds 3·F·D parameters. "emb + head + norm" is the input embedding, the untied
// lm_head and the final norm. Active = everything but routed experts, plus k of E experts per MoE
// layer; "active excl. embedding" drops the input embedding (the DeepSeek / gpt-oss convention).
#include "planner/model/hf_config.h"

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "planner/base/error.h"
#include "planner/model/inventory.h"
#include "planner/base/json_util.h"
#include "planner/model/model_spec.h"
#include "planner/model/model_file.h"

namespace dockyard {
namespace {

// Relative to the Bazel runfiles working directory, which is the workspace root.
const std::string kHfDir = "testdata/hf/";

ModelSpec Load(const std::string& file) {
  return LoadModel(kHfDir + file);
}

const ParamInfo* Find(const ParamInventory& inv, const std::string& fqn) {
  for (const auto& p : inv.params) {
    if (p.fqn == fqn) return &p;
  }
  return nullptr;
}

// Shape of a tensor that must be in the inventory (empty, and a failed check, when it is not).
std::vector<int64_t> ShapeOf(const ParamInventory& inv, const std::string& fqn) {
  const ParamInfo* p = Find(inv, fqn);
  CHECK_MESSAGE(p != nullptr, "missing tensor " << fqn);
  return p != nullptr ? p->shape : std::vector<int64_t>{};
}

using Shape = std::vector<int64_t>;

// A published figure is rounded (or, by some publishers, truncated) to the digits it shows, so the
// exact count lies within one unit of its last digit: |count - published| < unit, i.e. a relative
// error below unit / published. Example: "15.7B" has unit 0.1e9, a relative tolerance of 0.64%.
void CheckPublished(int64_t count, double published, double unit) {
  const double rel = std::fabs(static_cast<double>(count) - published) / published;
  CHECK_MESSAGE(rel < unit / published,
                "count " << count << " vs published " << published << ": relative error " << rel << ", allowed " << unit / published);
}

constexpr double kB = 1e9;

// ---------------------------------------------------------------------------------------------
// The set of real configs.

TEST_CASE("Every config in testdata/hf is one of the configs tested here") {
  // Adding a config without a test below (or removing one) fails here.
  const std::set<std::string> tested = {
      "dbrx-instruct.json", "deepseek-v2-lite.json", "deepseek-v3.json", "glm-4.5-air.json", "glm-4.5.json", "gpt-oss-120b.json",
      "kimi-k2-instruct.json", "llama4-maverick-17b-128e.json", "llama4-scout-17b-16e.json", "mixtral-8x7b.json",
      "olmoe-1b-7b-0125-instruct.json", "phi-3.5-moe-instruct.json", "qwen1.5-moe-a2.7b.json", "qwen2-57b-a14b.json", "qwen3-30b-a3b.json",
      "qwen3-235b-a22b.json",
      // Newer families, counted in hf_config_variants_test.cc.
      "deepseek-v3.2-exp.json", "qwen3-next-80b-a3b-instruct.json", "minimax-m2.7-nvfp4.json", "ernie-4.5-21b-a3b.json",
      // Ling 2.0, counted in hf_config_variants_test.cc.
      "ling-flash-2.0.json"};
  std::set<std::string> present;
  for (const auto& entry : std::filesystem::directory_iterator(kHfDir)) {
    if (entry.path().extension() == ".json") present.insert(entry.path().filename().string());
  }
  CHECK(present == tested);
  for (const auto& file : tested) {
    CAPTURE(file);
    ModelSpec m = Load(file);
    CHECK(m.name == kHfDir + file);
    ParamInventory inv = BuildInventory(m);
    CHECK(inv.totals.total_params == inv.totals.non_expert_params + inv.totals.routed_expert_params);
    CHECK(inv.totals.active_params < inv.totals.total_params);
  }
}

// ---------------------------------------------------------------------------------------------
// Exact counts from a tensor-by-tensor count of each published checkpoint.

TEST_CASE("Mixtral-8x7B reads as mixtral and counts 46,702,792,704 parameters, 12,879,925,248 active") {
  ModelSpec m = Load("mixtral-8x7b.json");
  CHECK(m.family == "mixtral");
  CHECK(m.hidden_size == 4096);
  CHECK(m.num_hidden_layers == 32);
  CHECK(m.vocab_size == 32000);
  CHECK(m.attention.kind == AttentionKind::kGqa);
  CHECK(m.attention.num_attention_heads == 32);
  CHECK(m.attention.num_key_value_heads == 8);
  CHECK(m.attention.head_dim == 128);  // 4096 / 32, no head_dim key
  CHECK_FALSE(m.attention.qkv_bias);
  CHECK(m.moe.num_experts == 8);
  CHECK(m.moe.top_k == 2);
  CHECK(m.moe.moe_intermediate_size == 14336);
  CHECK(m.moe.num_shared_experts == 0);
  CHECK(m.intermediate_size == 0);
  CHECK(m.NumMoeLayers() == 32);
  CHECK_FALSE(m.tie_word_embeddings);
  CHECK(m.dtype == "bfloat16");

  ParamInventory inv = BuildInventory(m);
  // Per layer (D 4096, H 32, KV 8, hd 128, E 8, F 14336):
  //   attention q 4096·4096 = 16,777,216; k, v 1024·4096 = 4,194,304 each; o 16,777,216
  //             = 41,943,040
  //   norms 2·4096 = 8,192; router 8·4096 = 32,768
  //   experts 8 · 3·14336·4096 (176,160,768) = 1,409,286,144
  //   layer = 1,451,270,144; × 32 = 46,440,644,608
  // emb + head + norm = 131,072,000 + 131,072,000 + 4,096 = 262,148,096
  // total = 46,440,644,608 + 262,148,096 = 46,702,792,704
  // active per layer = 1,451,270,144 − 6·176,160,768 = 394,305,536; × 32 = 12,617,777,152;
  //   + 262,148,096 = 12,879,925,248
  CHECK(inv.totals.total_params == 46'702'792'704);
  CHECK(inv.totals.active_params == 12'879'925'248);
  CHECK(inv.totals.routed_expert_params == 32LL * 1'409'286'144);
  CHECK(inv.totals.embedding_params == 131'072'000);
  // Published: 46.7B total, 12.9B per token (Mistral AI, "Mixtral of experts", Dec 2023).
  CheckPublished(inv.totals.total_params, 46.7 * kB, 0.1 * kB);
  CheckPublished(inv.totals.active_params, 12.9 * kB, 0.1 * kB);
  CHECK(ShapeOf(inv, "model.layers.0.mlp.gate.weight") == Shape{8, 4096});
  CHECK(ShapeOf(inv, "model.layers.0.mlp.experts.gate_up_proj") == Shape{8, 28672, 4096});
  CHECK(ShapeOf(inv, "model.layers.0.mlp.experts.down_proj") == Shape{8, 4096, 14336});
}

TEST_CASE("Qwen3-30B-A3B reads as qwen3_moe and counts 30,532,122,624 parameters, 3,353,032,704 active") {
  ModelSpec m = Load("qwen3-30b-a3b.json");
  CHECK(m.family == "qwen3_moe");
  CHECK(m.hidden_size == 2048);
  CHECK(m.num_hidden_layers == 48);
  CHECK(m.attention.num_attention_heads == 32);
  CHECK(m.attention.num_key_value_heads == 4);
  CHECK(m.attention.head_dim == 128);  // explicit head_dim; 32·128 = 4096 != hidden 2048
  CHECK(m.attention.qk_norm == QkNorm::kPerHead);
  CHECK(m.moe.num_experts == 128);
  CHECK(m.moe.top_k == 8);
  CHECK(m.moe.moe_intermediate_size == 768);
  CHECK(m.moe.norm_topk_prob);
  CHECK(m.NumMoeLayers() == 48);  // mlp_only_layers [] and decoder_sparse_step 1

  ParamInventory inv = BuildInventory(m);
  // Per layer (D 2048, H 32, KV 4, hd 128, E 128, F 768):
  //   attention q 4096·2048 = 8,388,608; k, v 512·2048 = 1,048,576 each; o 2048·4096 = 8,388,608;
  //             q_norm, k_norm 128 each = 18,874,624
  //   norms 4,096; router 128·2048 = 262,144
  //   experts 128 · 3·768·2048 (4,718,592) = 603,979,776
  //   layer = 623,120,640; × 48 = 29,909,790,720
  // emb + head + norm = 311,164,928 · 2 + 2,048 = 622,331,904
  // total = 29,909,790,720 + 622,331,904 = 30,532,122,624
  // active per layer = 623,120,640 − 120·4,718,592 = 56,889,600; × 48 = 2,730,700,800;
  //   + 622,331,904 = 3,353,032,704
  CHECK(inv.totals.total_params == 30'532'122'624);
  CHECK(inv.totals.active_params == 3'353'032'704);
  // Published (Qwen3-30B-A3B model card): 30.5B total, 29.9B without embeddings, 3.3B activated.
  CheckPublished(inv.totals.total_params, 30.5 * kB, 0.1 * kB);
  CheckPublished(inv.totals.total_params - 2 * inv.totals.embedding_params, 29.9 * kB, 0.1 * kB);
  CheckPublished(inv.totals.active_params, 3.3 * kB, 0.1 * kB);
  CHECK(ShapeOf(inv, "model.layers.0.self_attn.q_norm.weight") == Shape{128});
  CHECK(ShapeOf(inv, "model.layers.0.self_attn.q_proj.weight") == Shape{4096, 2048});
}

TEST_CASE("Qwen3-235B-A22B reads as qwen3_moe and counts 235,093,634,560 parameters, 22,190,763,520 active") {
  ModelSpec m = Load("qwen3-235b-a22b.json");
  CHECK(m.family == "qwen3_moe");
  CHECK(m.hidden_size == 4096);
  CHECK(m.num_hidden_layers == 94);
  CHECK(m.attention.num_attention_heads == 64);
  CHECK(m.attention.num_key_value_heads == 4);
  CHECK(m.moe.num_experts == 128);
  CHECK(m.moe.top_k == 8);
  CHECK(m.moe.moe_intermediate_size == 1536);
  CHECK(m.NumMoeLayers() == 94);

  ParamInventory inv = BuildInventory(m);
  // Per layer (D 4096, H 64, KV 4, hd 128, E 128, F 1536):
  //   attention q 8192·4096 = 33,554,432; k, v 512·4096 = 2,097,152 each; o 4096·8192 = 33,554,432;
  //             q_norm, k_norm 128 each = 71,303,424
  //   norms 8,192; router 128·4096 = 524,288
  //   experts 128 · 3·1536·4096 (18,874,368) = 2,415,919,104
  //   layer = 2,487,755,008; × 94 = 233,848,970,752
  // emb + head + norm = 151,936·4096 (622,329,856) · 2 + 4,096 = 1,244,663,808
  // total = 233,848,970,752 + 1,244,663,808 = 235,093,634,560
  // active per layer = 2,487,755,008 − 120·18,874,368 = 222,830,848; × 94 = 20,946,099,712;
  //   + 1,244,663,808 = 22,190,763,520
  CHECK(inv.totals.total_params == 235'093'634'560);
  CHECK(inv.totals.active_params == 22'190'763'520);
  // Published (Qwen3-235B-A22B model card): 235B total, 234B without embeddings, 22B activated.
  CheckPublished(inv.totals.total_params, 235 * kB, 1 * kB);
  CheckPublished(inv.totals.total_params - 2 * inv.totals.embedding_params, 234 * kB, 1 * kB);
  CheckPublished(inv.totals.active_params, 22 * kB, 1 * kB);
}

TEST_CASE("DeepSeek-V3 reads as deepseek_v3 and counts 671,026,419,200 parameters, 37,552,297,472 active") {
  ModelSpec m = Load("deepseek-v3.json");
  CHECK(m.family == "deepseek_v3");
  CHECK(m.attention.kind == AttentionKind::kMla);
  CHECK(m.attention.num_attention_heads == 128);
  CHECK(m.attention.q_lora_rank == 1536);
  CHECK(m.attention.kv_lora_rank == 512);
  CHECK(m.moe.num_experts == 256);
  CHECK(m.moe.top_k == 8);
  CHECK(m.moe.num_shared_experts == 1);
  CHECK(m.moe.shared_expert_intermediate_size == 2048);
  CHECK(m.moe.score_func == "sigmoid");
  CHECK(m.moe.score_correction_bias);
  CHECK(m.moe.norm_topk_prob);
  CHECK(m.moe.routed_scaling_factor == 2.5);
  CHECK(m.moe.n_group == 8);  // config.json n_group 8, topk_group 4, topk_method noaux_tc
  CHECK(m.moe.topk_group == 4);
  CHECK(GroupLimitOf(m.moe).active());
  CHECK(GroupLimitOf(m.moe).top2_sum);
  // The spec file keeps the limit.
  const ModelSpec back = ModelSpecFromJson(ModelSpecToJson(m), "round-trip");
  CHECK(back.moe.n_group == 8);
  CHECK(back.moe.topk_group == 4);
  CHECK(m.intermediate_size == 18432);
  CHECK(m.NumMoeLayers() == 58);
  for (int i = 0; i < 3; ++i) CHECK_FALSE(m.moe_layers[i]);  // first_k_dense_replace 3

  ParamInventory inv = BuildInventory(m);
  // MLA attention (D 7168, H 128, q_lora 1536, kv_lora 512, nope 128, rope 64, v 128):
  //   q_a 1536·7168 = 11,010,048; q_a_layernorm 1,536; q_b 128·192·1536 = 37,748,736;
  //   kv_a (512+64)·7168 = 4,128,768; kv_a_layernorm 512; kv_b 128·256·512 = 16,777,216;
  //   o 7168·128·128 = 117,440,512                                       = 187,107,328
  // norms 2·7168 = 14,336
  // dense layer (0..2): + MLP 3·18432·7168 = 396,361,728 → 583,483,392; × 3 = 1,750,450,176
  // MoE layer (3..60): router 256·7168 = 1,835,008; e_score_correction_bias 256;
  //   experts 256 · 3·2048·7168 (44,040,192) = 11,274,289,152; shared 44,040,192
  //   → 187,107,328 + 14,336 + 11,320,164,608 = 11,507,286,272; × 58 = 667,422,603,776
  // emb + head + norm = 926,679,040 · 2 + 7,168 = 1,853,365,248
  // total = 1,750,450,176 + 667,422,603,776 + 1,853,365,248 = 671,026,419,200
  // active MoE layer = 187,107,328 + 14,336 + 1,835,008 + 256 + 9·44,040,192 = 585,318,656;
  //   × 58 = 33,948,482,048; + 1,750,450,176 + 1,853,365,248 = 37,552,297,472
  CHECK(inv.totals.total_params == 671'026'419'200);
  CHECK(inv.totals.active_params == 37'552'297'472);
  // Published (DeepSeek-V3 technical report): 671B total, 37B activated; the MTP module (layer 61,
  // +11.5B, 685B in the HF checkpoint) is not part of the main model and not in the inventory.
  CheckPublished(inv.totals.total_params, 671 * kB, 1 * kB);
  CheckPublished(inv.totals.active_params, 37 * kB, 1 * kB);
  CHECK(Find(inv, "model.layers.61.self_attn.q_a_proj.weight") == nullptr);
  CHECK(ShapeOf(inv, "model.layers.3.self_attn.q_a_proj.weight") == Shape{1536, 7168});
  const ParamInfo* bias = Find(inv, "model.layers.3.mlp.gate.e_score_correction_bias");
  REQUIRE(bias != nullptr);
  CHECK(bias->shape == Shape{256});
  CHECK(bias->dtype == "float32");
  CHECK(Find(inv, "model.layers.2.mlp.gate.weight") == nullptr);  // layer 2 is dense
}

// ---------------------------------------------------------------------------------------------
// Published figures (rounded): the hand count is asserted exactly, the published figure at its
// precision.

TEST_CASE("DeepSeek-V2-Lite reads as deepseek_v2 with MLA and no q compression") {
  ModelSpec m = Load("deepseek-v2-lite.json");
  CHECK(m.family == "deepseek_v2");
  CHECK_FALSE(GroupLimitOf(m.moe).active());  // topk_method greedy, n_group 1
  CHECK(m.attention.kind == AttentionKind::kMla);
  CHECK(m.attention.q_lora_rank == 0);  // "q_lora_rank": null
  CHECK(m.attention.num_attention_heads == 16);
  CHECK(m.moe.num_experts == 64);
  CHECK(m.moe.top_k == 6);
  CHECK(m.moe.num_shared_experts == 2);
  CHECK(m.moe.shared_expert_intermediate_size == 2816);
  CHECK(m.moe.score_func == "softmax");
  CHECK_FALSE(m.moe.score_correction_bias);  // v2: topk_method greedy, no bias
  CHECK(m.NumMoeLayers() == 26);
  CHECK_FALSE(m.moe_layers[0]);

  ParamInventory inv = BuildInventory(m);
  // q_proj instead of q_a_proj / q_a_layernorm / q_b_proj.
  CHECK(ShapeOf(inv, "model.layers.0.self_attn.q_proj.weight") == Shape{16 * 192, 2048});
  CHECK(Find(inv, "model.layers.0.self_attn.q_a_proj.weight") == nullptr);
  CHECK(Find(inv, "model.layers.0.self_attn.q_a_layernorm.weight") == nullptr);
  CHECK(Find(inv, "model.layers.0.self_attn.q_b_proj.weight") == nullptr);
  CHECK(ShapeOf(inv, "model.layers.0.self_attn.kv_b_proj.weight") == Shape{16 * 256, 512});
  CHECK(ShapeOf(inv, "model.layers.0.mlp.gate_proj.weight") == Shape{10944, 2048});
  CHECK(ShapeOf(inv, "model.layers.1.mlp.shared_experts.gate_proj.weight") == Shape{2816, 2048});

  // MLA attention (D 2048, H 16, nope 128, rope 64, v 128, kv_lora 512):
  //   q 16·192·2048 = 6,291,456; kv_a 576·2048 = 1,179,648; kv_a_layernorm 512;
  //   kv_b 16·256·512 = 2,097,152; o 2048·2048 = 4,194,304                = 13,763,072
  // dense layer 0: + norms 4,096 + MLP 3·10944·2048 = 67,239,936 → 81,007,104
  // MoE layers 1..26: router 64·2048 = 131,072; experts 64 · 3·1408·2048 (8,650,752) = 553,648,128;
  //   shared (2·1408 = 2816) 3·2816·2048 = 17,301,504
  //   → 13,763,072 + 4,096 + 571,080,704 = 584,847,872; × 26 = 15,206,044,672
  // emb + head + norm = 209,715,200 · 2 + 2,048 = 419,432,448
  // total = 81,007,104 + 15,206,044,672 + 419,432,448 = 15,706,484,224
  // active MoE layer = 584,847,872 − 58·8,650,752 = 83,104,256; × 26 = 2,160,710,656
  // active = 2,160,710,656 + 81,007,104 + 419,432,448 = 2,661,150,208; excl. embedding
  //   2,661,150,208 − 209,715,200 = 2,451,435,008
  CHECK(inv.totals.total_params == 15'706'484'224);
  CHECK(inv.totals.active_params == 2'661'150'208);
  CHECK(inv.totals.active_params_excluding_embedding == 2'451'435'008);
  // Published (DeepSeek-V2 paper, arXiv:2405.04434, V2-Lite): 15.7B total, 2.4B activated. The
  // activated figure excludes the input embedding; 2.451B is shown truncated as "2.4B".
  CheckPublished(inv.totals.total_params, 15.7 * kB, 0.1 * kB);
  CheckPublished(inv.totals.active_params_excluding_embedding, 2.4 * kB, 0.1 * kB);
}

TEST_CASE("OLMoE-1B-7B reads as olmoe with q/k norms over the full projection width") {
  ModelSpec m = Load("olmoe-1b-7b-0125-instruct.json");
  CHECK(m.family == "olmoe");
  CHECK(m.attention.qk_norm == QkNorm::kFullWidth);
  CHECK(m.attention.num_key_value_heads == 16);
  CHECK(m.moe.num_experts == 64);
  CHECK(m.moe.top_k == 8);
  CHECK(m.moe.moe_intermediate_size == 1024);
  CHECK(m.NumMoeLayers() == 16);

  ParamInventory inv = BuildInventory(m);
  CHECK(ShapeOf(inv, "model.layers.0.self_attn.q_norm.weight") == Shape{2048});  // 16 heads · 128
  CHECK(ShapeOf(inv, "model.layers.0.self_attn.k_norm.weight") == Shape{2048});  // 16 KV heads · 128
  // Per layer (D 2048, H = KV = 16, hd 128, E 64, F 1024):
  //   attention 4·2048·2048 = 16,777,216 + q_norm 2,048 + k_norm 2,048 = 16,781,312
  //   norms 4,096; router 64·2048 = 131,072
  //   experts 64 · 3·1024·2048 (6,291,456) = 402,653,184
  //   layer = 419,569,664; × 16 = 6,713,114,624
  // emb + head + norm = 103,022,592 · 2 + 2,048 = 206,047,232
  // total = 6,713,114,624 + 206,047,232 = 6,919,161,856
  // active per layer = 16,781,312 + 4,096 + 131,072 + 8·6,291,456 = 67,248,128; × 16 = 1,075,970,048
  // active = 1,075,970,048 + 206,047,232 = 1,282,017,280
  CHECK(inv.totals.total_params == 6'919'161'856);
  CHECK(inv.totals.active_params == 1'282'017'280);
  // Published (OLMoE paper, arXiv:2409.02060): 6.9B total, 1.3B active (embedding counted).
  CheckPublished(inv.totals.total_params, 6.9 * kB, 0.1 * kB);
  CheckPublished(inv.totals.active_params, 1.3 * kB, 0.1 * kB);
}

TEST_CASE("YaRN's attention factor (the scale on cos and sin) from rope_scaling, as transformers computes it") {
  // gpt-oss-120b: rope_type yarn, factor 32, no mscale and no attention_factor: 0.1 ln 32 + 1 = 1.34657.
  CHECK(Load("gpt-oss-120b.json").attention.rope_attention_factor == doctest::Approx(0.1 * std::log(32.0) + 1.0));
  CHECK(Load("gpt-oss-120b.json").attention.rope_attention_factor == doctest::Approx(1.34657).epsilon(1e-5));
  // DeepSeek-V3 (factor 40) and Kimi-K2 (factor 32): mscale = mscale_all_dim = 1, so the ratio is 1.
  CHECK(Load("deepseek-v3.json").attention.rope_attention_factor == 1.0);
  CHECK(Load("kimi-k2-instruct.json").attention.rope_attention_factor == 1.0);
  // No YaRN: 1.
  CHECK(Load("qwen3-30b-a3b.json").attention.rope_attention_factor == 1.0);
  CHECK(Load("mixtral-8x7b.json").attention.rope_attention_factor == 1.0);
  // A given attention_factor wins; mscale 0.707 over mscale_all_dim 1 at factor 40 is
  // (0.0707 ln 40 + 1) / (0.1 ln 40 + 1) = 1.2608 / 1.3689 = 0.9211; out of range is refused by name.
  Json j = ReadJsonFile(kHfDir + "gpt-oss-120b.json");
  j["rope_scaling"]["attention_factor"] = 1.5;
  CHECK(ModelSpecFromHfConfig(j, "yarn.json").attention.rope_attention_factor == 1.5);
  j["rope_scaling"].erase("attention_factor");
  j["rope_scaling"]["factor"] = 40;
  j["rope_scaling"]["mscale"] = 0.707;
  j["rope_scaling"]["mscale_all_dim"] = 1.0;
  CHECK(ModelSpecFromHfConfig(j, "yarn.json").attention.rope_attention_factor ==
        doctest::Approx((0.0707 * std::log(40.0) + 1.0) / (0.1 * std::log(40.0) + 1.0)));
  j["rope_scaling"]["attention_factor"] = -1;
  CHECK_THROWS_WITH(ModelSpecFromHfConfig(j, "yarn.json"), doctest::Contains("/rope_scaling/attention_factor: must be in (0, 16]"));
  // Each mscale in [0, 10], named; a yarn block without its factor, or a block that is no object, refused.
  j["rope_scaling"].erase("attention_factor");
  j["rope_scaling"]["mscale_all_dim"] = -3;
  CHECK_THROWS_WITH(ModelSpecFromHfConfig(j, "yarn.json"), doctest::Contains("/rope_scaling/mscale_all_dim: must be in [0, 10]"));
  j["rope_scaling"]["mscale_all_dim"] = 1.0;
  j["rope_scaling"].erase("factor");
  CHECK_THROWS_WITH(ModelSpecFromHfConfig(j, "yarn.json"), doctest::Contains("/rope_scaling/factor: missing: YaRN needs"));
  j["rope_scaling"] = "yarn";
  CHECK_THROWS_WITH(ModelSpecFromHfConfig(j, "yarn.json"), doctest::Contains("/rope_scaling: must be an object"));
  // transformers v5's rope_parameters is read the same way; a gpt-oss config without any rope
  // block takes transformers' GptOssConfig default (YaRN, factor 32).
  Json v5 = ReadJsonFile(kHfDir + "gpt-oss-120b.json");
  v5["rope_parameters"] = v5["rope_scaling"];
  v5.erase("rope_scaling");
  CHECK(ModelSpecFromHfConfig(v5, "v5.json").attention.rope_attention_factor == doctest::Approx(1.34657).epsilon(1e-5));
  v5.erase("rope_parameters");
  CHECK(ModelSpecFromHfConfig(v5, "none.json").attention.rope_attention_factor == doctest::Approx(1.34657).epsilon(1e-5));
  Json qwen = ReadJsonFile(kHfDir + "qwen3-30b-a3b.json");
  qwen["rope_parameters"] = Json{{"rope_type", "yarn"}, {"factor", 4.0}};
  CHECK(ModelSpecFromHfConfig(qwen, "qwen.json").attention.rope_attention_factor == doctest::Approx(0.1 * std::log(4.0) + 1.0));
  // A model spec carries it (written only where it is not 1) and reads it back.
  const ModelSpec oss = Load("gpt-oss-120b.json");
  const Json spec = ModelSpecToJson(oss);
  CHECK(spec["attention"]["rope_attention_factor"].get<double>() == doctest::Approx(1.34657).epsilon(1e-5));
  CHECK_FALSE(ModelSpecToJson(Load("qwen3-30b-a3b.json"))["attention"].contains("rope_attention_factor"));
  CHECK(ModelSpecFromJson(spec, "spec.json").attention.rope_attention_factor == oss.attention.rope_attention_factor);
  Json bad = spec;
  bad["attention"]["rope_attention_factor"] = 0;
  CHECK_THROWS_WITH(ModelSpecFromJson(bad, "spec.json"), doctest::Contains("/attention/rope_attention_factor: must be in (0, 16]"));
}

TEST_CASE("gpt-oss-120b reads as gpt_oss with sinks, router bias and expert biases") {
  ModelSpec m = Load("gpt-oss-120b.json");
  CHECK(m.family == "gpt_oss");
  CHECK(m.hidden_size == 2880);
  CHECK(m.attention.num_attention_heads == 64);
  CHECK(m.attention.num_key_value_heads == 8);
  CHECK(m.attention.head_dim == 64);
  CHECK(m.attention.qkv_bias);
  CHECK(m.attention.o_bias);
  CHECK(m.attention.sinks);
  CHECK(m.moe.num_experts == 128);
  CHECK(m.moe.top_k == 4);
  CHECK(m.moe.moe_intermediate_size == 2880);
  CHECK(m.moe.expert_bias);
  CHECK(m.moe.swiglu_limit == 7.0);  // the config's swiglu_limit
  CHECK(m.moe.router_bias);
  CHECK(m.NumMoeLayers() == 36);
  // layer_types: sliding_attention on the even layers from 0, full_attention on the odd ones;
  // sliding_window 128.
  CHECK(m.attention.sliding_window == 128);
  CHECK(m.NumSlidingAttentionLayers() == 18);
  CHECK(m.sliding_attention_layers[0]);
  CHECK_FALSE(m.sliding_attention_layers[1]);
  CHECK(m.sliding_attention_layers[34]);
  CHECK_FALSE(m.sliding_attention_layers[35]);

  ParamInventory inv = BuildInventory(m);
  const std::string l = "model.layers.0.";
  CHECK(ShapeOf(inv, l + "self_attn.sinks") == Shape{64});
  CHECK(ShapeOf(inv, l + "mlp.router.weight") == Shape{128, 2880});
  CHECK(ShapeOf(inv, l + "mlp.router.bias") == Shape{128});
  CHECK(ShapeOf(inv, l + "mlp.experts.gate_up_proj") == Shape{128, 2880, 5760});  // [E, D, 2F]
  CHECK(ShapeOf(inv, l + "mlp.experts.gate_up_proj_bias") == Shape{128, 5760});
  CHECK(ShapeOf(inv, l + "mlp.experts.down_proj") == Shape{128, 2880, 2880});  // [E, F, D]
  CHECK(ShapeOf(inv, l + "mlp.experts.down_proj_bias") == Shape{128, 2880});
  CHECK(ShapeOf(inv, l + "self_attn.o_proj.bias") == Shape{2880});
  // Per layer (D 2880, H 64, KV 8, hd 64, E 128, F 2880):
  //   attention q 4096·2880 = 11,796,480; k, v 512·2880 = 1,474,560 each; o 2880·4096 = 11,796,480;
  //             biases 4,096 + 512 + 512 + 2,880; sinks 64              = 26,550,144
  //   norms 5,760; router 128·2880 + 128 = 368,768
  //   experts gate_up 128·2880·5760 = 2,123,366,400; gate_up bias 128·5760 = 737,280;
  //           down 128·2880·2880 = 1,061,683,200; down bias 128·2880 = 368,640
  //           = 3,186,155,520 (24,891,840 per expert)
  //   layer = 3,213,080,192; × 36 = 115,670,886,912
  // emb + head + norm = 579,133,440 · 2 + 2,880 = 1,158,269,760
  // total = 115,670,886,912 + 1,158,269,760 = 116,829,156,672
  // active per layer = 26,550,144 + 5,760 + 368,768 + 4·24,891,840 = 126,492,032; × 36 = 4,553,713,152
  // active = 4,553,713,152 + 1,158,269,760 = 5,711,982,912; excl. embedding − 579,133,440
  //   = 5,132,849,472
  CHECK(inv.totals.total_params == 116'829'156'672);
  CHECK(inv.totals.active_params == 5'711'982'912);
  CHECK(inv.totals.active_params_excluding_embedding == 5'132'849'472);
  // Published (OpenAI gpt-oss model card, Table 1): 116.83B total, 5.13B active per token
  // (unembedding counted, embedding not).
  CheckPublished(inv.totals.total_params, 116.83 * kB, 0.01 * kB);
  CheckPublished(inv.totals.active_params_excluding_embedding, 5.13 * kB, 0.01 * kB);
}

TEST_CASE("Qwen1.5-MoE-A2.7B reads as qwen2_moe with a gated shared expert and q/k/v biases") {
  ModelSpec m = Load("qwen1.5-moe-a2.7b.json");
  CHECK(m.family == "qwen2_moe");
  CHECK(m.attention.qkv_bias);
  CHECK_FALSE(m.attention.o_bias);
  CHECK(m.moe.num_experts == 60);
  CHECK(m.moe.top_k == 4);
  CHECK(m.moe.moe_intermediate_size == 1408);
  CHECK(m.moe.num_shared_experts == 1);
  CHECK(m.moe.shared_expert_intermediate_size == 5632);
  CHECK(m.moe.shared_expert_gate);
  CHECK(m.NumMoeLayers() == 24);

  ParamInventory inv = BuildInventory(m);
  CHECK(ShapeOf(inv, "model.layers.0.mlp.shared_expert_gate.weight") == Shape{1, 2048});
  CHECK(ShapeOf(inv, "model.layers.0.mlp.shared_expert.gate_proj.weight") == Shape{5632, 2048});
  CHECK(ShapeOf(inv, "model.layers.0.self_attn.q_proj.bias") == Shape{2048});
  CHECK(Find(inv, "model.layers.0.self_attn.o_proj.bias") == nullptr);
  // Per layer (D 2048, H = KV = 16, hd 128, E 60, F 1408, shared F 5632):
  //   attention 4·2048·2048 = 16,777,216 + q/k/v biases 3·2048 = 16,783,360
  //   norms 4,096; router 60·2048 = 122,880
  //   experts 60 · 3·1408·2048 (8,650,752) = 519,045,120
  //   shared expert 3·5632·2048 = 34,603,008; shared_expert_gate 2,048
  //   layer = 570,560,512; × 24 = 13,693,452,288
  // emb + head + norm = 311,164,928 · 2 + 2,048 = 622,331,904
  // total = 13,693,452,288 + 622,331,904 = 14,315,784,192
  // active per layer = 570,560,512 − 56·8,650,752 = 86,118,400; × 24 = 2,066,841,600
  // active = 2,066,841,600 + 622,331,904 = 2,689,173,504
  CHECK(inv.totals.total_params == 14'315'784'192);
  CHECK(inv.totals.active_params == 2'689'173'504);
  // Published (Qwen blog, "Qwen1.5-MoE: Matching 7B Model Performance with 1/3 Activated
  // Parameters"): 14.3B total, 2.7B activated.
  CheckPublished(inv.totals.total_params, 14.3 * kB, 0.1 * kB);
  CheckPublished(inv.totals.active_params, 2.7 * kB, 0.1 * kB);
}

TEST_CASE("DBRX reads its nested attn_config and ffn_config and fuses q/k/v into Wqkv") {
  ModelSpec m = Load("dbrx-instruct.json");
  CHECK(m.family == "dbrx");
  CHECK(m.hidden_size == 6144);
  CHECK(m.num_hidden_layers == 40);
  CHECK(m.vocab_size == 100352);
  CHECK(m.norm == NormKind::kLayerNorm);
  CHECK_FALSE(m.norm_bias);  // DBRX LayerNorms have no bias
  CHECK(m.attention.fused_qkv);
  CHECK(m.attention.num_attention_heads == 48);
  CHECK(m.attention.num_key_value_heads == 8);
  CHECK(m.attention.head_dim == 128);  // 6144 / 48
  CHECK(m.moe.num_experts == 16);
  CHECK(m.moe.top_k == 4);
  CHECK(m.moe.moe_intermediate_size == 10752);
  CHECK(m.moe.norm_topk_prob);  // moe_normalize_expert_weights 1
  CHECK(m.NumMoeLayers() == 40);

  ParamInventory inv = BuildInventory(m);
  const std::string b = "transformer.blocks.0.";
  // Wqkv rows: q 48·128 = 6144, k and v 8·128 = 1024 each → 8192.
  CHECK(ShapeOf(inv, b + "norm_attn_norm.attn.Wqkv.weight") == Shape{8192, 6144});
  CHECK(ShapeOf(inv, b + "norm_attn_norm.attn.out_proj.weight") == Shape{6144, 6144});
  CHECK(ShapeOf(inv, b + "norm_attn_norm.norm_1.weight") == Shape{6144});
  CHECK(Find(inv, b + "norm_attn_norm.norm_1.bias") == nullptr);
  CHECK(ShapeOf(inv, b + "ffn.router.layer.weight") == Shape{16, 6144});
  CHECK(ShapeOf(inv, b + "ffn.experts.mlp.w1") == Shape{16, 10752, 6144});
  CHECK(ShapeOf(inv, "transformer.wte.weight") == Shape{100352, 6144});
  // Per layer (D 6144, H 48, KV 8, hd 128, E 16, F 10752):
  //   Wqkv 8192·6144 = 50,331,648; out_proj 6144·6144 = 37,748,736
  //   norms 2·6144 = 12,288; router 16·6144 = 98,304
  //   experts 16 · 3·10752·6144 (198,180,864) = 3,170,893,824
  //   layer = 3,259,084,800; × 40 = 130,363,392,000
  // emb + head + norm = 616,562,688 · 2 + 6,144 = 1,233,131,520
  // total = 130,363,392,000 + 1,233,131,520 = 131,596,523,520
  // active per layer = 3,259,084,800 − 12·198,180,864 = 880,914,432; × 40 = 35,236,577,280
  // active = 35,236,577,280 + 1,233,131,520 = 36,469,708,800
  CHECK(inv.totals.total_params == 131'596'523'520);
  CHECK(inv.totals.active_params == 36'469'708'800);
  // Published (Databricks DBRX model card): 132B total, 36B active.
  CheckPublished(inv.totals.total_params, 132 * kB, 1 * kB);
  CheckPublished(inv.totals.active_params, 36 * kB, 1 * kB);
}

TEST_CASE("DBRX without moe_normalize_expert_weights normalizes the top-k weights (transformers default 1.0)") {
  // DbrxFFNConfig defaults the key to 1.0 (a p-norm exponent; only null turns normalization off).
  Json cfg = ReadJsonFile(kHfDir + "dbrx-instruct.json");
  cfg["ffn_config"].erase("moe_normalize_expert_weights");
  CHECK(ModelSpecFromHfConfig(cfg, "cfg.json").moe.norm_topk_prob);
}

TEST_CASE("Phi-3.5-MoE reads as phimoe with LayerNorm biases, attention biases and an lm_head bias") {
  ModelSpec m = Load("phi-3.5-moe-instruct.json");
  CHECK(m.family == "phimoe");
  CHECK(m.norm == NormKind::kLayerNorm);
  CHECK(m.norm_bias);
  CHECK(m.lm_head_bias);
  CHECK(m.attention.qkv_bias);
  CHECK(m.attention.o_bias);
  CHECK(m.attention.head_dim == 128);  // 4096 / 32
  CHECK(m.moe.num_experts == 16);
  CHECK(m.moe.top_k == 2);
  CHECK(m.moe.moe_intermediate_size == 6400);
  CHECK_FALSE(m.moe.norm_topk_prob);  // sparsemixer
  CHECK(m.NumMoeLayers() == 32);

  ParamInventory inv = BuildInventory(m);
  CHECK(ShapeOf(inv, "lm_head.bias") == Shape{32064});
  CHECK(ShapeOf(inv, "model.norm.bias") == Shape{4096});
  CHECK(ShapeOf(inv, "model.layers.0.input_layernorm.bias") == Shape{4096});
  CHECK(ShapeOf(inv, "model.layers.0.post_attention_layernorm.bias") == Shape{4096});
  CHECK(ShapeOf(inv, "model.layers.0.self_attn.o_proj.bias") == Shape{4096});
  CHECK(ShapeOf(inv, "model.layers.0.self_attn.k_proj.bias") == Shape{1024});
  // Per layer (D 4096, H 32, KV 8, hd 128, E 16, F 6400):
  //   attention q, o 4096·4096 = 16,777,216 each; k, v 1024·4096 = 4,194,304 each;
  //             biases 4,096 + 1,024 + 1,024 + 4,096                    = 41,953,280
  //   norms 2 · (weight + bias) · 4096 = 16,384; router 16·4096 = 65,536
  //   experts 16 · 3·6400·4096 (78,643,200) = 1,258,291,200
  //   layer = 1,300,326,400; × 32 = 41,610,444,800
  // emb 131,334,144 + head 131,334,144 + head bias 32,064 + final norm (weight + bias) 8,192
  //   = 262,708,544
  // total = 41,610,444,800 + 262,708,544 = 41,873,153,344
  // active per layer = 1,300,326,400 − 14·78,643,200 = 199,321,600; × 32 = 6,378,291,200
  // active = 6,378,291,200 + 262,708,544 = 6,640,999,744
  CHECK(inv.totals.total_params == 41'873'153'344);
  CHECK(inv.totals.active_params == 6'640'999'744);
  // Published (Phi-3.5-MoE-instruct model card): 41.9B total ("16x3.8B"), 6.6B active.
  CheckPublished(inv.totals.total_params, 41.9 * kB, 0.1 * kB);
  CheckPublished(inv.totals.active_params, 6.6 * kB, 0.1 * kB);
}

TEST_CASE("Qwen2-57B-A14B reads as qwen2_moe with a 20480-wide gated shared expert") {
  ModelSpec m = Load("qwen2-57b-a14b.json");
  CHECK(m.family == "qwen2_moe");
  CHECK(m.hidden_size == 3584);
  CHECK(m.attention.num_attention_heads == 28);
  CHECK(m.attention.num_key_value_heads == 4);
  CHECK(m.attention.head_dim == 128);  // 3584 / 28
  CHECK(m.intermediate_size == 18944);
  CHECK(m.moe.num_experts == 64);
  CHECK(m.moe.top_k == 8);
  CHECK(m.moe.moe_intermediate_size == 2560);
  CHECK(m.moe.shared_expert_intermediate_size == 20480);
  CHECK(m.moe.shared_expert_gate);
  CHECK_FALSE(m.moe.norm_topk_prob);
  CHECK(m.NumMoeLayers() == 28);

  ParamInventory inv = BuildInventory(m);
  CHECK(ShapeOf(inv, "model.layers.0.mlp.shared_expert.down_proj.weight") == Shape{3584, 20480});
  CHECK(ShapeOf(inv, "model.layers.0.mlp.shared_expert_gate.weight") == Shape{1, 3584});
  // Per layer (D 3584, H 28, KV 4, hd 128, E 64, F 2560, shared F 20480):
  //   attention q, o 3584·3584 = 12,845,056 each; k, v 512·3584 = 1,835,008 each;
  //             q/k/v biases 3,584 + 512 + 512                          = 29,364,736
  //   norms 7,168; router 64·3584 = 229,376
  //   experts 64 · 3·2560·3584 (27,525,120) = 1,761,607,680
  //   shared expert 3·20480·3584 = 220,200,960; shared_expert_gate 3,584
  //   layer = 2,011,413,504; × 28 = 56,319,578,112
  // emb + head + norm = 544,538,624 · 2 + 3,584 = 1,089,080,832
  // total = 56,319,578,112 + 1,089,080,832 = 57,408,658,944
  // active per layer = 2,011,413,504 − 56·27,525,120 = 470,006,784; × 28 = 13,160,189,952
  // active = 13,160,189,952 + 1,089,080,832 = 14,249,270,784
  CHECK(inv.totals.total_params == 57'408'658'944);
  CHECK(inv.totals.active_params == 14'249'270'784);
  // Published (Qwen2 technical report, arXiv:2407.10671): 57B total, 14B activated.
  CheckPublished(inv.totals.total_params, 57 * kB, 1 * kB);
  CheckPublished(inv.totals.active_params, 14 * kB, 1 * kB);
}

TEST_CASE("Kimi-K2 (DeepseekV3ForCausalLM, model_type kimi_k2) reads as deepseek_v3 with 384 experts") {
  ModelSpec m = Load("kimi-k2-instruct.json");
  CHECK(m.family == "deepseek_v3");
  CHECK(m.attention.kind == AttentionKind::kMla);
  CHECK(m.attention.num_attention_heads == 64);
  CHECK(m.attention.q_lora_rank == 1536);
  CHECK(m.moe.num_experts == 384);
  CHECK(m.moe.top_k == 8);
  CHECK(m.moe.num_shared_experts == 1);
  CHECK(m.moe.score_func == "sigmoid");
  CHECK(m.moe.score_correction_bias);
  CHECK(m.moe.routed_scaling_factor == 2.827);
  CHECK(m.NumMoeLayers() == 60);
  CHECK_FALSE(m.moe_layers[0]);  // first_k_dense_replace 1

  ParamInventory inv = BuildInventory(m);
  CHECK(ShapeOf(inv, "model.layers.1.mlp.gate.e_score_correction_bias") == Shape{384});
  CHECK(ShapeOf(inv, "model.layers.1.self_attn.q_b_proj.weight") == Shape{64 * 192, 1536});
  // MLA attention (D 7168, H 64, q_lora 1536, kv_lora 512, nope 128, rope 64, v 128):
  //   q_a 1536·7168 = 11,010,048; q_a_layernorm 1,536; q_b 64·192·1536 = 18,874,368;
  //   kv_a 576·7168 = 4,128,768; kv_a_layernorm 512; kv_b 64·256·512 = 8,388,608;
  //   o 7168·64·128 = 58,720,256                                          = 101,124,096
  // dense layer 0: + norms 14,336 + MLP 3·18432·7168 = 396,361,728 → 497,500,160
  // MoE layers 1..60: router 384·7168 = 2,752,512; e_score_correction_bias 384;
  //   experts 384 · 3·2048·7168 (44,040,192) = 16,911,433,728; shared 44,040,192
  //   → 101,124,096 + 14,336 + 16,958,226,816 = 17,059,365,248; × 60 = 1,023,561,914,880
  // emb + head + norm = 1,174,405,120 · 2 + 7,168 = 2,348,817,408
  // total = 497,500,160 + 1,023,561,914,880 + 2,348,817,408 = 1,026,408,232,448
  // active MoE layer = 17,059,365,248 − 376·44,040,192 = 500,253,056; × 60 = 30,015,183,360
  // active = 30,015,183,360 + 497,500,160 + 2,348,817,408 = 32,861,500,928; excl. embedding
  //   − 1,174,405,120 = 31,687,095,808
  CHECK(inv.totals.total_params == 1'026'408'232'448);
  CHECK(inv.totals.active_params == 32'861'500'928);
  CHECK(inv.totals.active_params_excluding_embedding == 31'687'095'808);
  // Published (Moonshot Kimi-K2 model card): 1T total, 32B activated. A "1.04T" total also
  // circulates; the hand count is 1.026T (1.3% lower, beyond that figure's 0.01T unit), and no
  // tensor of the published config accounts for the difference (there is no MTP layer:
  // num_nextn_predict_layers 0), so only the model card's "1T" is checked.
  CheckPublished(inv.totals.total_params, 1.0e12, 0.1e12);
  CheckPublished(inv.totals.active_params, 32 * kB, 1 * kB);
}

TEST_CASE("Llama-4 Scout reads its text_config as llama4_text with 16 experts in every layer") {
  ModelSpec m = Load("llama4-scout-17b-16e.json");
  CHECK(m.family == "llama4_text");
  CHECK(m.hidden_size == 5120);
  CHECK(m.num_hidden_layers == 48);  // text_config, not vision_config (34)
  CHECK(m.vocab_size == 202048);
  CHECK(m.attention.num_attention_heads == 40);
  CHECK(m.attention.num_key_value_heads == 8);
  CHECK(m.attention.head_dim == 128);
  CHECK(m.attention.qk_norm == QkNorm::kNone);  // use_qk_norm is a weightless L2 norm
  CHECK(m.moe.num_experts == 16);
  CHECK(m.moe.top_k == 1);
  CHECK(m.moe.moe_intermediate_size == 8192);
  CHECK(m.moe.num_shared_experts == 1);
  CHECK(m.moe.shared_expert_intermediate_size == 8192);
  CHECK(m.moe.score_func == "sigmoid");
  CHECK(m.NumMoeLayers() == 48);  // interleave_moe_layer_step 1

  ParamInventory inv = BuildInventory(m);
  CHECK(Find(inv, "model.layers.0.self_attn.q_norm.weight") == nullptr);
  // Per layer (D 5120, H 40, KV 8, hd 128, E 16, F 8192, shared F 8192):
  //   attention q, o 5120·5120 = 26,214,400 each; k, v 1024·5120 = 5,242,880 each = 62,914,560
  //   norms 10,240; router 16·5120 = 81,920
  //   experts gate_up 16·5120·16384 = 1,342,177,280 + down 16·8192·5120 = 671,088,640
  //           = 2,013,265,920 (125,829,120 per expert); shared expert 125,829,120
  //   layer = 2,202,101,760; × 48 = 105,700,884,480
  // emb + head + norm = 1,034,485,760 · 2 + 5,120 = 2,068,976,640
  // total = 105,700,884,480 + 2,068,976,640 = 107,769,861,120
  // active per layer = 2,202,101,760 − 15·125,829,120 = 314,664,960; × 48 = 15,103,918,080
  // active = 15,103,918,080 + 2,068,976,640 = 17,172,894,720
  CHECK(inv.totals.total_params == 107'769'861'120);
  CHECK(inv.totals.active_params == 17'172'894'720);
  // Published (Meta Llama 4 model card): 17B active, 109B total. The 109B includes the vision
  // encoder, which dockyard does not plan: its 34 layers alone hold 34 · (4·1408² + 2·1408·5632)
  // = 808,845,312 parameters, before the patch embedding, the vision adapter and the projector
  // (≈0.9B in all: 107.8B + ≈0.9B ≈ 109B). So only the active figure is checked.
  CheckPublished(inv.totals.active_params, 17 * kB, 1 * kB);
  CHECK(inv.totals.total_params < 109 * kB);
}

TEST_CASE("Llama-4 Maverick has 24 MoE layers at odd indices and dense MLPs of intermediate_size_mlp") {
  ModelSpec m = Load("llama4-maverick-17b-128e.json");
  CHECK(m.family == "llama4_text");
  CHECK(m.moe.num_experts == 128);
  CHECK(m.moe.top_k == 1);
  CHECK(m.intermediate_size == 16384);
  REQUIRE(m.moe_layers.size() == 48);
  CHECK(m.NumMoeLayers() == 24);
  for (size_t i = 0; i < m.moe_layers.size(); ++i) {
    CAPTURE(i);
    CHECK(m.moe_layers[i] == (i % 2 == 1));  // interleave_moe_layer_step 2: layers 1, 3, ..., 47
  }

  ParamInventory inv = BuildInventory(m);
  CHECK(ShapeOf(inv, "model.layers.0.feed_forward.gate_proj.weight") == Shape{16384, 5120});
  CHECK(Find(inv, "model.layers.0.feed_forward.router.weight") == nullptr);
  CHECK(ShapeOf(inv, "model.layers.1.feed_forward.router.weight") == Shape{128, 5120});
  CHECK(ShapeOf(inv, "model.layers.1.feed_forward.experts.gate_up_proj") == Shape{128, 5120, 16384});
  CHECK(ShapeOf(inv, "model.layers.1.feed_forward.experts.down_proj") == Shape{128, 8192, 5120});
  CHECK(ShapeOf(inv, "model.layers.1.feed_forward.shared_expert.gate_proj.weight") == Shape{8192, 5120});
  CHECK(Find(inv, "model.layers.1.feed_forward.gate_proj.weight") == nullptr);
  // Attention and norms as Scout: 62,914,560 + 10,240 per layer.
  // dense layers (even): + MLP 3·16384·5120 = 251,658,240 → 314,583,040; × 24 = 7,549,992,960
  // MoE layers (odd): router 128·5120 = 655,360; experts 128 · 125,829,120 = 16,106,127,360;
  //   shared 125,829,120 → 16,295,536,640; × 24 = 391,092,879,360
  // emb + head + norm = 2,068,976,640
  // total = 7,549,992,960 + 391,092,879,360 + 2,068,976,640 = 400,711,848,960
  // active MoE layer = 16,295,536,640 − 127·125,829,120 = 315,238,400; × 24 = 7,565,721,600
  // active = 7,565,721,600 + 7,549,992,960 + 2,068,976,640 = 17,184,691,200
  CHECK(inv.totals.total_params == 400'711'848'960);
  CHECK(inv.totals.active_params == 17'184'691'200);
  // Published (Meta Llama 4 model card): 400B total, 17B active. The vision encoder (≈0.9B, see
  // Scout) is inside the 400B's rounding.
  CheckPublished(inv.totals.total_params, 400 * kB, 10 * kB);
  CheckPublished(inv.totals.active_params, 17 * kB, 1 * kB);
}

TEST_CASE("GLM-4.5 has 3 dense layers first, then 89 MoE layers with a shared expert") {
  ModelSpec m = Load("glm-4.5.json");
  CHECK(m.family == "glm4_moe");
  CHECK(m.hidden_size == 5120);
  CHECK(m.num_hidden_layers == 92);
  CHECK(m.attention.num_attention_heads == 96);
  CHECK(m.attention.num_key_value_heads == 8);
  CHECK(m.attention.head_dim == 128);
  CHECK(m.attention.qkv_bias);
  CHECK_FALSE(m.attention.o_bias);
  CHECK(m.attention.qk_norm == QkNorm::kPerHead);
  CHECK(m.intermediate_size == 12288);
  CHECK(m.moe.num_experts == 160);
  CHECK(m.moe.top_k == 8);
  CHECK(m.moe.moe_intermediate_size == 1536);
  CHECK(m.moe.num_shared_experts == 1);
  CHECK(m.moe.shared_expert_intermediate_size == 1536);
  CHECK(m.moe.score_func == "sigmoid");
  CHECK(m.moe.score_correction_bias);
  CHECK(m.moe.norm_topk_prob);
  CHECK(m.moe.routed_scaling_factor == 2.5);
  REQUIRE(m.moe_layers.size() == 92);
  for (size_t i = 0; i < m.moe_layers.size(); ++i) {
    CAPTURE(i);
    CHECK(m.moe_layers[i] == (i >= 3));
  }

  ParamInventory inv = BuildInventory(m);
  CHECK(ShapeOf(inv, "model.layers.2.mlp.gate_proj.weight") == Shape{12288, 5120});
  CHECK(ShapeOf(inv, "model.layers.3.mlp.experts.gate_up_proj") == Shape{160, 3072, 5120});
  CHECK(ShapeOf(inv, "model.layers.3.mlp.gate.e_score_correction_bias") == Shape{160});
  CHECK(ShapeOf(inv, "model.layers.3.mlp.shared_experts.gate_proj.weight") == Shape{1536, 5120});
  CHECK(ShapeOf(inv, "model.layers.0.self_attn.q_norm.weight") == Shape{128});
  CHECK(ShapeOf(inv, "model.layers.0.self_attn.q_proj.bias") == Shape{12288});
  CHECK(Find(inv, "model.layers.0.self_attn.o_proj.bias") == nullptr);
  CHECK(Find(inv, "model.layers.92.self_attn.q_proj.weight") == nullptr);  // MTP layer not planned
  // Attention (D 5120, H 96, KV 8, hd 128): q 12288·5120 = 62,914,560; k, v 1024·5120 = 5,242,880
  //   each; o 5120·12288 = 62,914,560; q/k/v biases 12,288 + 1,024 + 1,024; q_norm, k_norm 128 each
  //   = 136,329,472; norms 10,240
  // dense layers 0..2: + MLP 3·12288·5120 = 188,743,680 → 325,083,392; × 3 = 975,250,176
  // MoE layers 3..91: router 160·5120 = 819,200; e_score_correction_bias 160;
  //   experts 160 · 3·1536·5120 (23,592,960) = 3,774,873,600; shared 23,592,960
  //   → 3,935,625,632; × 89 = 350,270,681,248
  // emb + head + norm = 775,946,240 · 2 + 5,120 = 1,551,897,600
  // total = 975,250,176 + 350,270,681,248 + 1,551,897,600 = 352,797,829,024
  // active MoE layer = 3,935,625,632 − 152·23,592,960 = 349,495,712; × 89 = 31,105,118,368
  // active = 31,105,118,368 + 975,250,176 + 1,551,897,600 = 33,632,266,144; excl. embedding
  //   − 775,946,240 = 32,856,319,904
  CHECK(inv.totals.total_params == 352'797'829'024);
  CHECK(inv.totals.active_params == 33'632'266'144);
  CHECK(inv.totals.active_params_excluding_embedding == 32'856'319'904);
  // Published (Z.ai GLM-4.5 model card): 355B total, 32B active. 355B is 0.6% above the hand
  // count of the main model (352.8B) and below main model + the one MTP layer
  // (num_nextn_predict_layers 1: a 3,935,625,632 MoE layer + eh_proj 5120·10240 + 3 norms ≈ 356.8B),
  // so it matches neither exactly; it is checked at ±5B. The active 32.86B (excl. embedding) is
  // published truncated as "32B".
  CheckPublished(inv.totals.total_params, 355 * kB, 5 * kB);
  CheckPublished(inv.totals.active_params_excluding_embedding, 32 * kB, 1 * kB);
}

TEST_CASE("GLM-4.5-Air has 1 dense layer first and no q/k norm") {
  ModelSpec m = Load("glm-4.5-air.json");
  CHECK(m.family == "glm4_moe");
  CHECK(m.hidden_size == 4096);
  CHECK(m.num_hidden_layers == 46);
  CHECK(m.attention.qk_norm == QkNorm::kNone);
  CHECK(m.moe.num_experts == 128);
  CHECK(m.moe.moe_intermediate_size == 1408);
  CHECK(m.moe.routed_scaling_factor == 1.0);
  CHECK(m.NumMoeLayers() == 45);
  CHECK_FALSE(m.moe_layers[0]);
  CHECK(m.moe_layers[1]);

  ParamInventory inv = BuildInventory(m);
  CHECK(Find(inv, "model.layers.0.self_attn.q_norm.weight") == nullptr);
  // Attention (D 4096, H 96, KV 8, hd 128): q 12288·4096 = 50,331,648; k, v 1024·4096 = 4,194,304
  //   each; o 4096·12288 = 50,331,648; q/k/v biases 12,288 + 1,024 + 1,024 = 109,066,240;
  //   norms 8,192
  // dense layer 0: + MLP 3·10944·4096 = 134,479,872 → 243,554,304
  // MoE layers 1..45: router 128·4096 = 524,288; e_score_correction_bias 128;
  //   experts 128 · 3·1408·4096 (17,301,504) = 2,214,592,512; shared 17,301,504
  //   → 2,341,492,864; × 45 = 105,367,178,880
  // emb + head + norm = 620,756,992 · 2 + 4,096 = 1,241,518,080
  // total = 243,554,304 + 105,367,178,880 + 1,241,518,080 = 106,852,251,264
  // active MoE layer = 2,341,492,864 − 120·17,301,504 = 265,312,384; × 45 = 11,939,057,280
  // active = 11,939,057,280 + 243,554,304 + 1,241,518,080 = 13,424,129,664; excl. embedding
  //   − 620,756,992 = 12,803,372,672
  CHECK(inv.totals.total_params == 106'852'251'264);
  CHECK(inv.totals.active_params == 13'424'129'664);
  CHECK(inv.totals.active_params_excluding_embedding == 12'803'372'672);
  // Published (Z.ai GLM-4.5-Air model card): 106B total, 12B active, without the MTP layer. Both
  // are truncated (106.85B, 12.80B excl. embedding), so they are within one unit of the count.
  CheckPublished(inv.totals.total_params, 106 * kB, 1 * kB);
  CheckPublished(inv.totals.active_params_excluding_embedding, 12 * kB, 1 * kB);
}

// ---------------------------------------------------------------------------------------------
// Invalid inputs, one per test case, built in code.

// Mixtral-8x7B's config.json (a subset: the keys the reader uses and a few it ignores).
Json MixtralConfig() {
  return Json::parse(R"({
    "architectures": ["MixtralForCausalLM"],
    "model_type": "mixtral",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "num_hidden_layers": 32,
    "num_local_experts": 8,
    "num_experts_per_tok": 2,
    "vocab_size": 32000,
    "rope_theta": 1000000.0,
    "tie_word_embeddings": false,
    "torch_dtype": "bfloat16"
  })");
}

TEST_CASE("The in-code Mixtral config used by the error tests is itself valid") {
  ModelSpec m = ModelSpecFromHfConfig(MixtralConfig(), "cfg.json");
  CHECK(m.family == "mixtral");
  CHECK(m.name == "cfg.json");
  CHECK(BuildInventory(m).totals.total_params == 46'702'792'704);
}

TEST_CASE("An unknown architecture is rejected with the list of supported families") {
  Json cfg = MixtralConfig();
  cfg["architectures"] = Json::array({"GrokForCausalLM"});  // no reader for Grok
  cfg["model_type"] = "grok";
  CHECK_THROWS_WITH_AS(ModelSpecFromHfConfig(cfg, "cfg.json"),
                       doctest::Contains("cfg.json: /architectures: unknown model family 'GrokForCausalLM'"), Error);
  CHECK_THROWS_WITH_AS(ModelSpecFromHfConfig(cfg, "cfg.json"), doctest::Contains(SupportedFamiliesText().c_str()), Error);
  CHECK_THROWS_WITH_AS(ModelSpecFromHfConfig(cfg, "cfg.json"),
                       doctest::Contains("Llama4ForConditionalGeneration (llama4, via text_config)"), Error);
}

TEST_CASE("A misspelled architecture gets a did-you-mean suggestion") {
  Json cfg = MixtralConfig();
  cfg["architectures"] = Json::array({"MixtralForCausalLm"});  // lower-case m
  cfg["model_type"] = "mixtrall";                              // and no model_type to fall back on
  CHECK_THROWS_WITH_AS(ModelSpecFromHfConfig(cfg, "cfg.json"), doctest::Contains("did you mean 'MixtralForCausalLM'?"), Error);
}

TEST_CASE("A dense HF config is said to have no experts, not to be an unknown family") {
  // Llama-3-8B's published config.json has no expert keys: a dense model, which dockyard does not plan.
  Json cfg = MixtralConfig();
  cfg.erase("num_local_experts");
  cfg.erase("num_experts_per_tok");
  cfg["architectures"] = Json::array({"LlamaForCausalLM"});
  cfg["model_type"] = "llama";
  CHECK_THROWS_WITH_AS(ModelSpecFromHfConfig(cfg, "cfg.json"),
                       doctest::Contains("cfg.json: /architectures: 'LlamaForCausalLM' (model_type 'llama') is a dense model: "
                                         "the config has no experts"),
                       Error);
  CHECK_THROWS_WITH_AS(ModelSpecFromHfConfig(cfg, "cfg.json"), doctest::Contains("dockyard plans Mixture-of-Experts models"), Error);
  bool unknown_family = true;
  try {
    ModelSpecFromHfConfig(cfg, "cfg.json");
  } catch (const Error& e) {
    unknown_family = std::string(e.what()).find("unknown model family") != std::string::npos;
  }
  CHECK_FALSE(unknown_family);
}

TEST_CASE("A dense Llama config is not taken for a misspelt Llama 4: it is told how to write a spec") {
  // LlamaForCausalLM is one edit from Llama4ForCausalLM, but its model_type 'llama' names another
  // model (Llama 4's is 'llama4_text'): no suggestion, the way to plan it instead.
  Json cfg = MixtralConfig();
  cfg["architectures"] = Json::array({"LlamaForCausalLM"});
  cfg["model_type"] = "llama";
  CHECK_THROWS_WITH_AS(ModelSpecFromHfConfig(cfg, "cfg.json"),
                       doctest::Contains("; to plan another architecture, write a dockyard model spec (docs/model-spec.md, "
                                         "\"dockyard_model_spec\": 1, with its attention and moe sections) and pass it "
                                         "with --model"),
                       Error);
  bool suggested = true;
  try {
    ModelSpecFromHfConfig(cfg, "cfg.json");
  } catch (const Error& e) {
    suggested = std::string(e.what()).find("did you mean") != std::string::npos;
  }
  CHECK_FALSE(suggested);
}

TEST_CASE("A config with neither architectures nor model_type is rejected") {
  Json cfg = MixtralConfig();
  cfg.erase("architectures");  // nothing left to tell the family by
  cfg.erase("model_type");
  CHECK_THROWS_WITH_AS(ModelSpecFromHfConfig(cfg, "cfg.json"),
                       doctest::Contains("cfg.json: /architectures: required key is missing (and so is /model_type)"), Error);
}

TEST_CASE("architectures that is not an array of strings is rejected") {
  Json cfg = MixtralConfig();
  cfg["architectures"] = "MixtralForCausalLM";  // a string, not ["..."]
  CHECK_THROWS_WITH_AS(ModelSpecFromHfConfig(cfg, "cfg.json"),
                       doctest::Contains("cfg.json: /architectures: must be a non-empty array of strings"), Error);
}

TEST_CASE("A missing required key is named with its JSON pointer and the family") {
  Json cfg = MixtralConfig();
  cfg.erase("num_local_experts");  // Mixtral has no default expert count
  CHECK_THROWS_WITH_AS(ModelSpecFromHfConfig(cfg, "cfg.json"),
                       doctest::Contains("cfg.json: /num_local_experts: required key is missing (family mixtral)"), Error);
}

TEST_CASE("A missing key inside Llama-4's text_config is named with its nested pointer") {
  Json cfg = ReadJsonFile(kHfDir + "llama4-scout-17b-16e.json");
  cfg["text_config"].erase("num_local_experts");  // the expert count lives in text_config
  CHECK_THROWS_WITH_AS(ModelSpecFromHfConfig(cfg, "cfg.json"),
                       doctest::Contains("cfg.json: /text_config/num_local_experts: required key is missing (family llama4_text)"), Error);
}

TEST_CASE("A missing key inside DBRX's ffn_config is named with its nested pointer") {
  Json cfg = ReadJsonFile(kHfDir + "dbrx-instruct.json");
  cfg["ffn_config"].erase("moe_top_k");  // DBRX keeps top-k in ffn_config
  CHECK_THROWS_WITH_AS(ModelSpecFromHfConfig(cfg, "cfg.json"),
                       doctest::Contains("cfg.json: /ffn_config/moe_top_k: required key is missing (family dbrx)"), Error);
}

TEST_CASE("A string where an integer is expected names the field and the value") {
  Json cfg = MixtralConfig();
  cfg["hidden_size"] = "4096";  // quoted number
  CHECK_THROWS_WITH_AS(ModelSpecFromHfConfig(cfg, "cfg.json"),
                       doctest::Contains("cfg.json: /hidden_size: must be an integer, got string \"4096\""), Error);
}

TEST_CASE("top_k larger than the number of experts is rejected") {
  Json cfg = MixtralConfig();
  cfg["num_experts_per_tok"] = 9;  // only 8 experts to choose from
  CHECK_THROWS_WITH_AS(ModelSpecFromHfConfig(cfg, "cfg.json"), doctest::Contains("top_k (9) must satisfy 1 <= top_k <= num_experts (8)"),
                       Error);
  CHECK_THROWS_WITH_AS(ModelSpecFromHfConfig(cfg, "cfg.json"), doctest::Contains("cfg.json"), Error);
}

TEST_CASE("Zero experts is rejected") {
  Json cfg = MixtralConfig();
  cfg["num_local_experts"] = 0;  // an MoE layer needs at least one expert
  CHECK_THROWS_WITH_AS(ModelSpecFromHfConfig(cfg, "cfg.json"), doctest::Contains("cfg.json: /num_local_experts: must be >= 1, got 0"),
                       Error);
}

TEST_CASE("Zero experts per token is rejected") {
  Json cfg = MixtralConfig();
  cfg["num_experts_per_tok"] = 0;  // every token must go to at least one expert
  CHECK_THROWS_WITH_AS(ModelSpecFromHfConfig(cfg, "cfg.json"), doctest::Contains("cfg.json: /num_experts_per_tok: must be >= 1, got 0"),
                       Error);
}

TEST_CASE("A float with a fractional part where an integer is expected is rejected") {
  Json cfg = MixtralConfig();
  cfg["hidden_size"] = 4096.5;  // not a whole number of channels
  CHECK_THROWS_WITH_AS(ModelSpecFromHfConfig(cfg, "cfg.json"), doctest::Contains("cfg.json: /hidden_size: must be an integer, got 4096.5"),
                       Error);
}

TEST_CASE("A float with no fractional part is accepted as an integer") {
  Json cfg = MixtralConfig();
  cfg["hidden_size"] = 4096.0;  // some exporters write integers as floats
  CHECK(ModelSpecFromHfConfig(cfg, "cfg.json").hidden_size == 4096);
}

TEST_CASE("An unsigned value beyond int64 is rejected") {
  Json cfg = MixtralConfig();
  cfg["vocab_size"] = std::numeric_limits<uint64_t>::max();  // 2^64 - 1 does not fit in int64
  CHECK_THROWS_WITH_AS(ModelSpecFromHfConfig(cfg, "cfg.json"),
                       doctest::Contains("cfg.json: /vocab_size: value 18446744073709551615 does not fit in a signed 64-bit integer"),
                       Error);
}

TEST_CASE("KV heads that do not divide the attention heads are rejected") {
  Json cfg = MixtralConfig();
  cfg["num_key_value_heads"] = 3;  // 32 query heads cannot be grouped over 3 KV heads
  CHECK_THROWS_WITH_AS(ModelSpecFromHfConfig(cfg, "cfg.json"),
                       doctest::Contains("num_key_value_heads (3) must divide num_attention_heads (32)"), Error);
}

TEST_CASE("A Qwen mlp_only_layers entry beyond the last layer is rejected") {
  Json cfg = ReadJsonFile(kHfDir + "qwen3-30b-a3b.json");
  cfg["mlp_only_layers"] = Json::array({48});  // layers are 0..47
  CHECK_THROWS_WITH_AS(ModelSpecFromHfConfig(cfg, "cfg.json"),
                       doctest::Contains("cfg.json: /mlp_only_layers: layer 48 is out of range [0, num_hidden_layers (48))"), Error);
}

TEST_CASE("A Llama-4 moe_layers entry beyond the last layer is rejected") {
  Json cfg = ReadJsonFile(kHfDir + "llama4-maverick-17b-128e.json");
  cfg["text_config"]["moe_layers"] = Json::array({1, 48});  // layers are 0..47
  CHECK_THROWS_WITH_AS(ModelSpecFromHfConfig(cfg, "cfg.json"),
                       doctest::Contains("cfg.json: /text_config/moe_layers: layer 48 is out of range [0, num_hidden_layers (48))"), Error);
}

TEST_CASE("An unknown torch_dtype is rejected with the supported list") {
  Json cfg = MixtralConfig();
  cfg["torch_dtype"] = "bfloat17";  // no such dtype
  CHECK_THROWS_WITH_AS(ModelSpecFromHfConfig(cfg, "cfg.json"), doctest::Contains("cfg.json: /torch_dtype: unknown dtype \"bfloat17\""),
                       Error);
}

TEST_CASE("An unknown DeepSeek topk_method is refused (it decides the score bias and the group limit)") {
  Json cfg = ReadJsonFile(kHfDir + "deepseek-v3.json");
  cfg["topk_method"] = "random";
  CHECK_THROWS_WITH_AS(ModelSpecFromHfConfig(cfg, "cfg.json"),
                       doctest::Contains("cfg.json: /topk_method: must be \"greedy\", \"group_limited_greedy\" or \"noaux_tc\""), Error);
  cfg["topk_method"] = "group_limited_greedy";  // V2's method on V3: group limit kept, no score bias
  ModelSpec m = ModelSpecFromHfConfig(cfg, "cfg.json");
  CHECK_FALSE(m.moe.score_correction_bias);
  CHECK(m.moe.n_group == 8);
}

}  // namespace
}  // namespace dockyard

namespace dockyard {

TEST_CASE("gpt-oss's sliding-window layers: the spec round trip, the default without layer_types, and bad input") {
  const ModelSpec m = Load("gpt-oss-120b.json");
  // The spec writes the window and one attention_layer_types entry per layer, and reads them back.
  const Json spec = ModelSpecToJson(m);
  CHECK(spec["attention"]["sliding_window"] == 128);
  CHECK(spec["attention_layer_types"][0] == "sliding_attention");
  CHECK(spec["attention_layer_types"][1] == "full_attention");
  const ModelSpec back = ModelSpecFromJson(spec, "round-trip");
  CHECK(back.attention.sliding_window == 128);
  CHECK(back.sliding_attention_layers == m.sliding_attention_layers);
  CHECK(back.linear_attention_layers.empty());
  // Without layer_types, transformers' default: sliding on every other layer from layer 0.
  Json hf = ReadJsonFile(kHfDir + "gpt-oss-120b.json");
  hf.erase("layer_types");
  const ModelSpec alt = ModelSpecFromHfConfig(hf, "no-layer-types.json");
  CHECK(alt.sliding_attention_layers == m.sliding_attention_layers);
  // A layer kind the family does not have, and a list of the wrong length.
  Json bad = ReadJsonFile(kHfDir + "gpt-oss-120b.json");
  bad["layer_types"][3] = "linear_attention";
  CHECK_THROWS_WITH_AS(ModelSpecFromHfConfig(bad, "bad.json"), doctest::Contains("must be \"sliding_attention\" or \"full_attention\""),
                       dockyard::Error);
  bad = ReadJsonFile(kHfDir + "gpt-oss-120b.json");
  bad["layer_types"].erase(0);
  CHECK_THROWS_WITH_AS(ModelSpecFromHfConfig(bad, "bad.json"), doctest::Contains("has 35 entries, must be an array with one entry per layer (num_hidden_layers = 36)"),
                       dockyard::Error);
  // Without sliding_window, transformers' GptOssConfig default, 128; null is refused.
  Json no_window = ReadJsonFile(kHfDir + "gpt-oss-120b.json");
  no_window.erase("sliding_window");
  CHECK(ModelSpecFromHfConfig(no_window, "no-window.json").attention.sliding_window == 128);
  no_window["sliding_window"] = nullptr;
  CHECK_THROWS_WITH_AS(ModelSpecFromHfConfig(no_window, "null-window.json"), doctest::Contains("/sliding_window: null"), dockyard::Error);
  // A window with every layer full: the spec the writer produces reads back (no linear mask).
  Json all_full = ReadJsonFile(kHfDir + "gpt-oss-120b.json");
  for (auto& t : all_full["layer_types"]) t = "full_attention";
  const ModelSpec full = ModelSpecFromHfConfig(all_full, "all-full.json");
  CHECK(full.NumSlidingAttentionLayers() == 0);
  const ModelSpec full_back = ModelSpecFromJson(ModelSpecToJson(full), "round-trip");
  CHECK(full_back.linear_attention_layers.empty());
  CHECK(full_back.NumSlidingAttentionLayers() == 0);
  CHECK(full_back.attention.sliding_window == 128);
  // The spec: sliding layers without a window, a window without per-layer kinds, a negative window.
  Json s = spec;
  s["attention"].erase("sliding_window");
  CHECK_THROWS_WITH_AS(ModelSpecFromJson(s, "spec.json"), doctest::Contains("/attention/sliding_window is absent"), dockyard::Error);
  s = spec;
  s.erase("attention_layer_types");
  CHECK_THROWS_WITH_AS(ModelSpecFromJson(s, "spec.json"), doctest::Contains("must have one per layer (num_hidden_layers = 36)"),
                       dockyard::Error);
  s = spec;
  s["attention"]["sliding_window"] = -4;
  CHECK_THROWS_AS(ModelSpecFromJson(s, "spec.json"), dockyard::Error);
  s = spec;
  s["attention_layer_types"][2] = "window";
  CHECK_THROWS_WITH_AS(ModelSpecFromJson(s, "spec.json"), doctest::Contains("/attention_layer_types/2"), dockyard::Error);
}

TEST_CASE("gpt-oss's activation clamp (swiglu_limit): read, transformers' default, written to the spec and read back, bad values") {
  Json hf = ReadJsonFile(kHfDir + "gpt-oss-120b.json");
  hf["swiglu_limit"] = 5.5;
  const ModelSpec m = ModelSpecFromHfConfig(hf, "limit.json");
  CHECK(m.moe.swiglu_limit == 5.5);
  // The spec carries it under moe and reads it back; a model without a clamp writes no key.
  const Json spec = ModelSpecToJson(m);
  CHECK(spec["moe"]["swiglu_limit"] == 5.5);
  CHECK(ModelSpecFromJson(spec, "round-trip").moe.swiglu_limit == 5.5);
  CHECK_FALSE(ModelSpecToJson(Load("mixtral-8x7b.json"))["moe"].contains("swiglu_limit"));
  // Absent: transformers' GptOssConfig default, 7.0.
  hf.erase("swiglu_limit");
  CHECK(ModelSpecFromHfConfig(hf, "no-limit.json").moe.swiglu_limit == 7.0);
  // Zero, negative or not a number: refused, naming the key.
  hf["swiglu_limit"] = 0;
  CHECK_THROWS_WITH_AS(ModelSpecFromHfConfig(hf, "zero.json"), doctest::Contains("swiglu_limit"), dockyard::Error);
  hf["swiglu_limit"] = nullptr;  // transformers would clamp at nothing (torch.clamp refuses both bounds None)
  CHECK_THROWS_WITH_AS(ModelSpecFromHfConfig(hf, "null.json"), doctest::Contains("/swiglu_limit: null"), dockyard::Error);
  hf["swiglu_limit"] = "seven";
  CHECK_THROWS_WITH_AS(ModelSpecFromHfConfig(hf, "text.json"), doctest::Contains("swiglu_limit"), dockyard::Error);
  Json s = spec;
  s["moe"]["swiglu_limit"] = nullptr;  // not "none": the key left out is
  CHECK_THROWS_WITH_AS(ModelSpecFromJson(s, "spec.json"), doctest::Contains("/moe/swiglu_limit: null"), dockyard::Error);
  s["moe"]["swiglu_limit"] = -1;
  CHECK_THROWS_WITH_AS(ModelSpecFromJson(s, "spec.json"), doctest::Contains("/moe/swiglu_limit"), dockyard::Error);
}

}  // namespace dockyard
