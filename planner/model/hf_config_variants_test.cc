// Tests for the readers of the newer families' attention variants (hf_config_variants.h):
// DeepSeek-V3.2-Exp's lightning indexer and Qwen3-Next's gated attention, Gated DeltaNet layers
// and gated shared expert. The real configs in testdata/hf/ are read through LoadModel, their
// inventories counted by hand (arithmetic in the comments) and compared with the publishers'
// figures at the precision they are published with. Invalid inputs are built in code, one per
// test case. Notation as in hf_config_test.cc.
#include "planner/model/hf_config_variants.h"

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "planner/base/error.h"
#include "planner/model/hf_config.h"
#include "planner/model/inventory.h"
#include "planner/base/json_util.h"
#include "planner/model/model_spec.h"
#include "planner/model/model_file.h"

namespace dockyard {
namespace {

const std::string kHfDir = "testdata/hf/";
constexpr double kB = 1e9;
using Shape = std::vector<int64_t>;

const ParamInfo* Find(const ParamInventory& inv, const std::string& fqn) {
  for (const auto& p : inv.params) {
    if (p.fqn == fqn) return &p;
  }
  return nullptr;
}

Shape ShapeOf(const ParamInventory& inv, const std::string& fqn) {
  const ParamInfo* p = Find(inv, fqn);
  CHECK_MESSAGE(p != nullptr, "missing tensor " << fqn);
  return p != nullptr ? p->shape : Shape{};
}

// A published figure rounded or truncated to `unit` (see hf_config_test.cc).
void CheckPublished(int64_t count, double published, double unit) {
  const double rel = std::fabs(static_cast<double>(count) - published) / published;
  CHECK_MESSAGE(rel < unit / published, "count " << count << " vs published " << published);
}

int64_t SumRole(const ParamInventory& inv, Role role) {
  int64_t n = 0;
  for (const auto& p : inv.params) n += p.role == role ? p.Numel() : 0;
  return n;
}

TEST_CASE("DeepSeek-V3.2-Exp reads as deepseek_v32: DeepSeek-V3 plus a lightning indexer in every layer") {
  ModelSpec m = LoadModel(kHfDir + "deepseek-v3.2-exp.json");
  CHECK(m.family == "deepseek_v32");
  CHECK(m.attention.kind == AttentionKind::kMla);
  CHECK(m.attention.indexer.index_n_heads == 64);
  CHECK(m.attention.indexer.index_head_dim == 128);
  CHECK(m.attention.indexer.index_topk == 2048);
  CHECK(m.attention.q_lora_rank == 1536);
  CHECK(m.moe.num_experts == 256);
  CHECK(m.moe.top_k == 8);
  CHECK(m.moe.score_correction_bias);
  CHECK(m.NumMoeLayers() == 58);
  CHECK(m.linear_attention_layers.empty());

  ParamInventory inv = BuildInventory(m);
  // Indexer per layer (D 7168, q_lora 1536, 64 heads of 128):
  //   wq_b 64·128·1536 = 12,582,912; wk 128·7168 = 917,504; k_norm weight + bias 2·128 = 256;
  //   weights_proj 64·7168 = 458,752                                  = 13,959,424
  // × 61 layers = 851,524,864
  CHECK(ShapeOf(inv, "model.layers.0.self_attn.indexer.wq_b.weight") == Shape{8192, 1536});
  CHECK(ShapeOf(inv, "model.layers.0.self_attn.indexer.wk.weight") == Shape{128, 7168});
  CHECK(ShapeOf(inv, "model.layers.60.self_attn.indexer.k_norm.bias") == Shape{128});
  CHECK(ShapeOf(inv, "model.layers.3.self_attn.indexer.weights_proj.weight") == Shape{64, 7168});
  const ParamInfo* wq_b = Find(inv, "model.layers.3.self_attn.indexer.wq_b.weight");
  REQUIRE(wq_b != nullptr);
  CHECK(wq_b->tp_dim == -1);  // replicated across TP, as vLLM serves it
  CHECK(SumRole(inv, Role::kAttnIndexer) == 851'524'864);
  // Everything else is DeepSeek-V3's main model (hf_config_test.cc): 671,026,419,200 total,
  // 37,552,297,472 active. The indexer runs for every token, so it is active:
  //   total 671,026,419,200 + 851,524,864 = 671,877,944,064
  //   active 37,552,297,472 + 851,524,864 = 38,403,822,336
  CHECK(inv.totals.total_params == 671'877'944'064);
  CHECK(inv.totals.active_params == 38'403'822'336);
  // The MTP layer (num_nextn_predict_layers 1, layer 61) is not part of the main model.
  CHECK(Find(inv, "model.layers.61.self_attn.indexer.wk.weight") == nullptr);
  // Published: "the only architectural modification of DeepSeek-V3.2-Exp is the introduction of
  // DeepSeek Sparse Attention" (DeepSeek-V3.2-Exp tech report, section 1), so DeepSeek keeps
  // V3's "671B total, 37B activated" (DeepSeek-V3 tech report). 671.88B is within one unit of
  // 671B; the published active figure leaves the indexer (0.85B) out: without it the count is
  // V3's 37.55B, truncated to "37B".
  CheckPublished(inv.totals.total_params, 671 * kB, 1 * kB);
  CheckPublished(inv.totals.active_params - SumRole(inv, Role::kAttnIndexer), 37 * kB, 1 * kB);
}

TEST_CASE("Qwen3-Next-80B-A3B reads as qwen3_next: 36 Gated DeltaNet and 12 gated-attention layers") {
  ModelSpec m = LoadModel(kHfDir + "qwen3-next-80b-a3b-instruct.json");
  CHECK(m.family == "qwen3_next");
  CHECK(m.attention.kind == AttentionKind::kGqa);
  CHECK(m.attention.num_attention_heads == 16);
  CHECK(m.attention.num_key_value_heads == 2);
  CHECK(m.attention.head_dim == 256);
  CHECK(m.attention.output_gate);
  CHECK_FALSE(m.attention.qkv_bias);  // attention_bias false (Qwen2-MoE would force q/k/v biases)
  CHECK(m.attention.qk_norm == QkNorm::kPerHead);
  CHECK(m.attention.linear.num_key_heads == 16);
  CHECK(m.attention.linear.num_value_heads == 32);
  CHECK(m.attention.linear.key_head_dim == 128);
  CHECK(m.attention.linear.value_head_dim == 128);
  CHECK(m.attention.linear.conv_kernel_dim == 4);
  CHECK(m.moe.num_experts == 512);
  CHECK(m.moe.top_k == 10);
  CHECK(m.moe.num_shared_experts == 1);
  CHECK(m.moe.shared_expert_intermediate_size == 512);
  CHECK(m.moe.shared_expert_gate);
  CHECK(m.moe.norm_topk_prob);
  CHECK(m.NumMoeLayers() == 48);
  // full_attention_interval 4: layers 3, 7, ..., 47 are full attention, the rest linear.
  REQUIRE(m.linear_attention_layers.size() == 48);
  for (int64_t i = 0; i < 48; ++i) {
    CAPTURE(i);
    CHECK(m.IsLinearAttentionLayer(i) == ((i + 1) % 4 != 0));
  }
  CHECK(m.NumLinearAttentionLayers() == 36);

  ParamInventory inv = BuildInventory(m);
  // Gated DeltaNet layer (D 2048, 16 key heads and 32 value heads of 128: Kd 2048, Vd 4096):
  //   in_proj_qkvz (2·2048 + 2·4096)·2048 = 12288·2048 = 25,165,824; in_proj_ba 64·2048 = 131,072;
  //   conv1d (2·2048 + 4096)·4 = 32,768; dt_bias 32; A_log 32; norm 128;
  //   out_proj 2048·4096 = 8,388,608                                   = 33,718,464
  CHECK(ShapeOf(inv, "model.layers.0.linear_attn.in_proj_qkvz.weight") == Shape{12288, 2048});
  CHECK(ShapeOf(inv, "model.layers.0.linear_attn.in_proj_ba.weight") == Shape{64, 2048});
  CHECK(ShapeOf(inv, "model.layers.0.linear_attn.conv1d.weight") == Shape{8192, 1, 4});
  CHECK(ShapeOf(inv, "model.layers.0.linear_attn.out_proj.weight") == Shape{2048, 4096});
  CHECK(Find(inv, "model.layers.0.self_attn.q_proj.weight") == nullptr);
  // Gated attention layer (H 16, KV 2, hd 256): q_proj with its gate 2·16·256·2048 = 16,777,216;
  //   k, v 512·2048 = 1,048,576 each; o 2048·4096 = 8,388,608; q_norm, k_norm 256 each
  //                                                                     = 27,263,488
  CHECK(ShapeOf(inv, "model.layers.3.self_attn.q_proj.weight") == Shape{8192, 2048});
  CHECK(ShapeOf(inv, "model.layers.3.self_attn.o_proj.weight") == Shape{2048, 4096});
  CHECK(Find(inv, "model.layers.3.linear_attn.in_proj_qkvz.weight") == nullptr);
  CHECK(SumRole(inv, Role::kAttnLinear) == 36 * int64_t{33'718'464});
  // MoE block (E 512, F 512): router 512·2048 = 1,048,576; experts 512 · 3·512·2048 (3,145,728)
  //   = 1,610,612,736; shared expert 3,145,728; shared_expert_gate 2048 = 1,614,809,088;
  //   + norms 2·2048 → 1,614,813,184 per layer, × 48 = 77,511,032,832
  CHECK(ShapeOf(inv, "model.layers.0.mlp.experts.gate_up_proj") == Shape{512, 1024, 2048});
  CHECK(ShapeOf(inv, "model.layers.0.mlp.shared_expert.gate_proj.weight") == Shape{512, 2048});
  CHECK(ShapeOf(inv, "model.layers.0.mlp.shared_expert_gate.weight") == Shape{1, 2048});
  // emb + head + norm = 151936·2048 (311,164,928) · 2 + 2048 = 622,331,904
  // total = 36·33,718,464 (1,213,864,704) + 12·27,263,488 (327,161,856) + 77,511,032,832
  //         + 622,331,904 = 79,674,391,296
  // active: routed experts 10 of 512 per layer, 48 · (512 − 10) · 3,145,728 = 75,799,461,888
  //   fewer: 3,874,929,408; excl. embedding − 311,164,928 = 3,563,764,480
  CHECK(inv.totals.total_params == 79'674'391'296);
  CHECK(inv.totals.active_params == 3'874'929'408);
  CHECK(inv.totals.active_params_excluding_embedding == 3'563'764'480);
  // Published (Qwen3-Next-80B-A3B model card; transformers docs model_doc/qwen3_next.md):
  // "80B total parameters, only 3B active". 79.67B rounds to 80B; the 3.56B active (excl.
  // embedding) is published truncated. The MTP module (mtp.* weights) is not in the config's
  // layers and not in the inventory.
  CheckPublished(inv.totals.total_params, 80 * kB, 1 * kB);
  CheckPublished(inv.totals.active_params_excluding_embedding, 3 * kB, 1 * kB);
}

TEST_CASE("MiniMax-M2.7 reads as minimax_m2: full-width q/k norms, sigmoid routing with a bias, 256 experts") {
  ModelSpec m = LoadModel(kHfDir + "minimax-m2.7-nvfp4.json");
  CHECK(m.family == "minimax_m2");
  CHECK(m.hidden_size == 3072);
  CHECK(m.num_hidden_layers == 62);
  CHECK(m.attention.num_attention_heads == 48);
  CHECK(m.attention.num_key_value_heads == 8);
  CHECK(m.attention.head_dim == 128);
  CHECK(m.attention.qk_norm == QkNorm::kFullWidth);  // qk_norm_type "per_layer"
  CHECK_FALSE(m.attention.qkv_bias);
  CHECK(m.moe.num_experts == 256);
  CHECK(m.moe.top_k == 8);
  CHECK(m.moe.moe_intermediate_size == 1536);
  CHECK(m.moe.score_func == "sigmoid");
  CHECK(m.moe.score_correction_bias);
  CHECK(m.moe.norm_topk_prob);
  CHECK(m.moe.num_shared_experts == 0);
  CHECK(m.NumMoeLayers() == 62);
  CHECK(m.linear_attention_layers.empty());
  CHECK_FALSE(m.attention.indexer.present());

  ParamInventory inv = BuildInventory(m);
  // Attention (D 3072, H 48, KV 8, hd 128): q 6144·3072 = 18,874,368; k, v 1024·3072 = 3,145,728
  //   each; o 3072·6144 = 18,874,368; q_norm 6144, k_norm 1024               = 44,047,360
  // norms 2·3072 = 6,144; router 256·3072 = 786,432; e_score_correction_bias 256;
  // experts 256 · 3·1536·3072 (14,155,776) = 3,623,878,656
  //   → 3,668,718,848 per layer; × 62 = 227,460,568,576
  // emb + head + norm = 200064·3072 (614,596,608) · 2 + 3072 = 1,229,196,288
  // total = 228,689,764,864
  // active layer = 3,668,718,848 − 248·14,155,776 = 158,086,400; × 62 = 9,801,356,800;
  //   + 1,229,196,288 = 11,030,553,088; excl. embedding − 614,596,608 = 10,415,956,480
  CHECK(ShapeOf(inv, "model.layers.0.self_attn.q_norm.weight") == Shape{6144});
  CHECK(ShapeOf(inv, "model.layers.0.self_attn.k_norm.weight") == Shape{1024});
  CHECK(ShapeOf(inv, "model.layers.61.mlp.experts.gate_up_proj") == Shape{256, 3072, 3072});
  CHECK(ShapeOf(inv, "model.layers.0.mlp.gate.e_score_correction_bias") == Shape{256});
  CHECK(Find(inv, "model.layers.62.self_attn.q_proj.weight") == nullptr);  // no MTP module (num_mtp_modules 3)
  CHECK(inv.totals.total_params == 228'689'764'864);
  CHECK(inv.totals.active_params == 11'030'553'088);
  CHECK(inv.totals.active_params_excluding_embedding == 10'415'956'480);
  // The FP8 release of the same architecture (MiniMax-M2.5, quantization_config fp8 with
  // weight_block_size [128, 128], modules_to_not_convert gate, e_score_correction_bias, lm_head)
  // stores one fp32 scale per 128×128 block of every other linear weight: per layer
  //   experts 256 · 3 · (1536/128)·(3072/128) = 221,184; q 48·24 + k 8·24 + v 8·24 + o 24·48 = 2,688
  //   → 223,872; × 62 = 13,880,064.
  // Count + scales = 228,703,644,928, the safetensors parameter total of that checkpoint on the HF
  // Hub (as recorded by a public parameter-count fixture): the checkpoint holds no MTP weights.
  CHECK(inv.totals.total_params + 62 * (256 * 3 * 12 * 24 + (48 + 8 + 8 + 48) * 24) == 228'703'644'928);
  // Published (MiniMax-M2 model card): "230 billion total parameters with 10 billion active". The
  // total is the count rounded up (0.57% above it, checked at ±2B); the active 10.42B (excl.
  // embedding) is published truncated.
  CheckPublished(inv.totals.total_params, 230 * kB, 2 * kB);
  CheckPublished(inv.totals.active_params_excluding_embedding, 10 * kB, 1 * kB);
}

TEST_CASE("ERNIE-4.5-21B-A3B reads as ernie4_5_moe: a dense first layer, 27 MoE layers with 2 shared experts") {
  ModelSpec m = LoadModel(kHfDir + "ernie-4.5-21b-a3b.json");
  CHECK(m.family == "ernie4_5_moe");
  CHECK(m.hidden_size == 2560);
  CHECK(m.attention.num_attention_heads == 20);
  CHECK(m.attention.num_key_value_heads == 4);
  CHECK(m.attention.head_dim == 128);  // 2560 / 20
  CHECK_FALSE(m.attention.qkv_bias);
  CHECK(m.intermediate_size == 12288);
  CHECK(m.moe.num_experts == 64);
  CHECK(m.moe.top_k == 6);
  CHECK(m.moe.moe_intermediate_size == 1536);
  CHECK(m.moe.num_shared_experts == 2);
  CHECK(m.moe.shared_expert_intermediate_size == 3072);
  CHECK(m.moe.score_func == "softmax");
  CHECK(m.moe.score_correction_bias);
  CHECK(m.tie_word_embeddings);
  // moe_layer_start_index 1, moe_layer_end_index 27, interval 1: layer 0 dense, 1..27 MoE.
  CHECK_FALSE(m.moe_layers[0]);
  CHECK(m.NumMoeLayers() == 27);

  ParamInventory inv = BuildInventory(m);
  // Attention (D 2560, H 20, KV 4, hd 128): q, o 2560·2560 = 6,553,600 each; k, v 512·2560 =
  //   1,310,720 each                                                        = 15,728,640
  // norms 2·2560 = 5,120
  // dense layer 0: + MLP 3·12288·2560 = 94,371,840 → 110,105,600
  // MoE layers 1..27: router 64·2560 = 163,840; correction bias 64; experts 64 · 3·1536·2560
  //   (11,796,480) = 754,974,720; shared 3·3072·2560 = 23,592,960 → 794,465,344; × 27 = 21,450,564,288
  // tied embedding 103424·2560 = 264,765,440; final norm 2,560
  // total = 110,105,600 + 21,450,564,288 + 264,765,440 + 2,560 = 21,825,437,888
  // active MoE layer = 794,465,344 − 58·11,796,480 = 110,269,504; × 27 = 2,977,276,608;
  //   + 110,105,600 + 264,765,440 + 2,560 = 3,352,150,208 (the tied embedding is the lm_head, so
  //   it stays in the excl.-embedding count)
  CHECK(ShapeOf(inv, "model.layers.0.mlp.gate_proj.weight") == Shape{12288, 2560});
  CHECK(ShapeOf(inv, "model.layers.1.mlp.experts.gate_up_proj") == Shape{64, 3072, 2560});
  CHECK(ShapeOf(inv, "model.layers.27.mlp.shared_experts.gate_proj.weight") == Shape{3072, 2560});
  CHECK(Find(inv, "lm_head.weight") == nullptr);
  CHECK(inv.totals.total_params == 21'825'437'888);
  CHECK(inv.totals.active_params == 3'352'150'208);
  CHECK(inv.totals.active_params_excluding_embedding == 3'352'150'208);
  // Published (ERNIE-4.5-21B-A3B model card, "21B total parameters, 3B activated"): both truncated.
  CheckPublished(inv.totals.total_params, 21 * kB, 1 * kB);
  CheckPublished(inv.totals.active_params, 3 * kB, 1 * kB);
}

TEST_CASE("Ling-flash-2.0 reads as bailing_moe_v2 and counts the HF safetensors total, 102,889,705,216") {
  ModelSpec m = LoadModel(kHfDir + "ling-flash-2.0.json");
  CHECK(m.family == "bailing_moe_v2");
  CHECK(m.hidden_size == 4096);
  CHECK(m.num_hidden_layers == 32);
  CHECK(m.vocab_size == 157184);
  CHECK_FALSE(m.tie_word_embeddings);
  CHECK(m.attention.kind == AttentionKind::kGqa);
  CHECK(m.attention.num_attention_heads == 32);
  CHECK(m.attention.num_key_value_heads == 4);
  CHECK(m.attention.head_dim == 128);
  CHECK(m.attention.fused_qkv);
  CHECK_FALSE(m.attention.qkv_bias);
  CHECK(m.attention.qk_norm == QkNorm::kPerHead);
  CHECK(m.intermediate_size == 9216);
  CHECK(m.moe.num_experts == 256);
  CHECK(m.moe.top_k == 8);
  CHECK(m.moe.moe_intermediate_size == 1024);
  CHECK(m.moe.num_shared_experts == 1);
  CHECK(m.moe.shared_expert_intermediate_size == 1024);
  CHECK(m.moe.score_func == "sigmoid");
  CHECK(m.moe.score_correction_bias);  // moe_router_enable_expert_bias
  CHECK(m.moe.norm_topk_prob);
  CHECK(m.moe.routed_scaling_factor == 2.5);
  CHECK(m.moe.n_group == 8);
  CHECK(m.moe.topk_group == 4);
  CHECK(m.num_nextn_predict_layers == 0);  // the key is absent: the release holds no MTP weights
  CHECK_FALSE(m.moe_layers[0]);            // first_k_dense_replace 1
  CHECK(m.NumMoeLayers() == 31);

  ParamInventory inv = BuildInventory(m);
  // Attention (D 4096, H 32, KV 4, hd 128): query_key_value (32 + 2·4)·128 = 5120 rows · 4096 =
  //   20,971,520; dense 4096·4096 = 16,777,216; query/key_layernorm 2·128 = 256 → 37,748,992
  // norms 2·4096 = 8,192 → 37,757,184 per layer; × 32 = 1,208,229,888
  // dense layer 0: MLP 3·9216·4096 = 113,246,208
  // MoE layers 1..31: experts 256 · 3·1024·4096 (12,582,912) = 3,221,225,472; shared 3·1024·4096 =
  //   12,582,912; gate 256·4096 = 1,048,576; expert_bias 256 → 3,234,857,216; × 31 = 100,280,573,696
  // word_embeddings + lm_head 2 · 157184·4096 (643,825,664) = 1,287,651,328; final norm 4,096
  // total = 1,208,229,888 + 113,246,208 + 100,280,573,696 + 1,287,651,328 + 4,096 = 102,889,705,216
  // active MoE layer = 3,234,857,216 − 248·12,582,912 = 114,295,040; so active = total − 31·248·12,582,912
  //   = 102,889,705,216 − 96,737,427,456 = 6,152,277,760; excl. the input embedding 5,508,452,096
  CHECK(ShapeOf(inv, "model.word_embeddings.weight") == Shape{157184, 4096});
  CHECK(ShapeOf(inv, "model.layers.0.attention.query_key_value.weight") == Shape{5120, 4096});
  CHECK(ShapeOf(inv, "model.layers.0.attention.dense.weight") == Shape{4096, 4096});
  CHECK(ShapeOf(inv, "model.layers.0.attention.query_layernorm.weight") == Shape{128});
  CHECK(ShapeOf(inv, "model.layers.0.mlp.gate_proj.weight") == Shape{9216, 4096});
  CHECK(ShapeOf(inv, "model.layers.1.mlp.experts.gate_up_proj") == Shape{256, 2048, 4096});
  CHECK(ShapeOf(inv, "model.layers.31.mlp.shared_experts.down_proj.weight") == Shape{4096, 1024});
  CHECK(ShapeOf(inv, "model.layers.31.mlp.gate.expert_bias") == Shape{256});
  CHECK(Find(inv, "model.layers.0.mlp.gate.weight") == nullptr);
  CHECK(inv.totals.total_params == 102'889'705'216);
  CHECK(inv.totals.active_params == 6'152'277'760);
  CHECK(inv.totals.active_params_excluding_embedding == 5'508'452'096);
  // The HF Hub's safetensors total of inclusionAI/Ling-flash-2.0 @ 649f8b94 is 102,889,705,216
  // (BF16 102,889,697,280 + F32 7,936 = 31 expert_bias vectors of 256): equal to the count.
  // Published (model card): "100B total parameters and 6.1B activated parameters (4.8B
  // non-embedding)"; the card's non-embedding figure leaves out the lm_head too:
  // 6,152,277,760 − 1,287,651,328 = 4,864,626,432.
  CheckPublished(inv.totals.total_params, 100 * kB, 3 * kB);
  CheckPublished(inv.totals.active_params, 6.1 * kB, 0.1 * kB);
  CheckPublished(inv.totals.active_params - inv.totals.embedding_params - 157184 * 4096, 4.8 * kB, 0.1 * kB);
}

TEST_CASE("Ling-mini-2.0's sizes on the Ling-flash-2.0 file count its published 16.26B total, 1.43B active, 789M non-embedding") {
  // Ling-mini-2.0 differs from Ling-flash-2.0 in its sizes only (the values public fixtures of
  // its config agree on): 20 layers, hidden 2048, dense 5120, 16 heads, moe and shared 512.
  Json cfg = ReadJsonFile(kHfDir + "ling-flash-2.0.json");
  cfg["num_hidden_layers"] = 20;
  cfg["hidden_size"] = 2048;
  cfg["intermediate_size"] = 5120;
  cfg["num_attention_heads"] = 16;
  cfg["moe_intermediate_size"] = 512;
  cfg["moe_shared_expert_intermediate_size"] = 512;
  ModelSpec m = ModelSpecFromHfConfig(cfg, "ling-mini.json");
  ParamInventory inv = BuildInventory(m);
  // per layer: query_key_value 3072·2048 = 6,291,456; dense 2048·2048 = 4,194,304; q/k norms 256;
  //   norms 4,096 → 10,490,112; × 20 = 209,802,240
  // dense layer 0: 3·5120·2048 = 31,457,280
  // MoE layers 1..19: experts 256 · 3·512·2048 (3,145,728) = 805,306,368; shared 3,145,728; gate
  //   524,288; expert_bias 256 → 808,976,640; × 19 = 15,370,556,160
  // embedding + lm_head 2 · 157184·2048 = 643,825,664; final norm 2,048
  // total = 16,255,643,392; active = total − 19·248·3,145,728 (14,822,670,336) = 1,432,973,056;
  //   without embedding and lm_head: 789,147,392
  CHECK(inv.totals.total_params == 16'255'643'392);
  CHECK(inv.totals.active_params == 1'432'973'056);
  CHECK(inv.totals.active_params - inv.totals.embedding_params - 157184 * 2048 == 789'147'392);
  // Published (inclusionAI Ling-V2 README / model card): 16.26B total, 1.43B activated,
  // "non-embedding 789M".
  CheckPublished(inv.totals.total_params, 16.26 * kB, 0.01 * kB);
  CheckPublished(inv.totals.active_params, 1.43 * kB, 0.01 * kB);
  CheckPublished(inv.totals.active_params - inv.totals.embedding_params - 157184 * 2048, 0.789 * kB, 0.001 * kB);
}

// ---------------------------------------------------------------------------------------------
// Invalid inputs, one per test case.

Json Qwen3NextConfig() {
  return ReadJsonFile(kHfDir + "qwen3-next-80b-a3b-instruct.json");
}
Json DeepseekV32Config() {
  return ReadJsonFile(kHfDir + "deepseek-v3.2-exp.json");
}

TEST_CASE("Qwen3-Next layer_types is used when present, layer by layer") {
  Json cfg = Qwen3NextConfig();
  cfg["num_hidden_layers"] = 4;
  cfg["layer_types"] = Json::array({"full_attention", "linear_attention", "linear_attention", "full_attention"});
  ModelSpec m = ModelSpecFromHfConfig(cfg, "cfg.json");
  CHECK(m.linear_attention_layers == std::vector<bool>{false, true, true, false});
}

TEST_CASE("A Qwen3-Next layer_types entry that is not an attention kind is rejected") {
  Json cfg = Qwen3NextConfig();
  cfg["num_hidden_layers"] = 2;
  cfg["layer_types"] = Json::array({"linear_attention", "sliding_attention"});  // not a Qwen3-Next kind
  CHECK_THROWS_WITH_AS(ModelSpecFromHfConfig(cfg, "cfg.json"),
                       doctest::Contains("cfg.json: /layer_types/1: must be \"linear_attention\" or \"full_attention\", "
                                         "got \"sliding_attention\""),
                       Error);
}

TEST_CASE("A Qwen3-Next layer_types of the wrong length is rejected") {
  Json cfg = Qwen3NextConfig();
  cfg["layer_types"] = Json::array({"linear_attention"});  // 1 entry for 48 layers
  CHECK_THROWS_WITH_AS(ModelSpecFromHfConfig(cfg, "cfg.json"),
                       doctest::Contains("cfg.json: /layer_types: must be an array with one entry per layer "
                                         "(num_hidden_layers = 48)"),
                       Error);
}

TEST_CASE("A zero full_attention_interval is rejected") {
  Json cfg = Qwen3NextConfig();
  cfg["full_attention_interval"] = 0;  // (i + 1) % 0 is undefined
  CHECK_THROWS_WITH_AS(ModelSpecFromHfConfig(cfg, "cfg.json"), doctest::Contains("cfg.json: /full_attention_interval"), Error);
}

TEST_CASE("Linear-attention key heads that do not divide the value heads are rejected") {
  Json cfg = Qwen3NextConfig();
  cfg["linear_num_key_heads"] = 12;  // 32 value heads do not split into 12 groups
  CHECK_THROWS_WITH_AS(ModelSpecFromHfConfig(cfg, "cfg.json"),
                       doctest::Contains("cfg.json: /linear_num_key_heads: linear_num_key_heads (12) must divide "
                                         "linear_num_value_heads (32)"),
                       Error);
}

TEST_CASE("A DeepSeek-V3.2 config without a query latent is rejected: the indexer reads it") {
  Json cfg = DeepseekV32Config();
  cfg["q_lora_rank"] = nullptr;  // DeepSeek-V2-Lite style, no q compression
  CHECK_THROWS_WITH_AS(ModelSpecFromHfConfig(cfg, "cfg.json"),
                       doctest::Contains("cfg.json: /q_lora_rank: the lightning indexer's wq_b reads the query latent"), Error);
}

TEST_CASE("A zero index_topk is rejected") {
  Json cfg = DeepseekV32Config();
  cfg["index_topk"] = 0;  // each query would attend to no key
  CHECK_THROWS_WITH_AS(ModelSpecFromHfConfig(cfg, "cfg.json"), doctest::Contains("cfg.json: /index_topk"), Error);
}

Json MinimaxConfig() {
  return ReadJsonFile(kHfDir + "minimax-m2.7-nvfp4.json");
}

TEST_CASE("A MiniMax attn_type_list with a lightning-attention layer is rejected") {
  Json cfg = MinimaxConfig();
  cfg["attn_type_list"][5] = 0;  // MiniMax-01's linear attention, not modelled
  CHECK_THROWS_WITH_AS(ModelSpecFromHfConfig(cfg, "cfg.json"),
                       doctest::Contains("cfg.json: /attn_type_list/5: 0: only full softmax attention (1) is modelled"), Error);
}

TEST_CASE("A MiniMax sliding_window is rejected rather than planned as full attention") {
  Json cfg = MinimaxConfig();
  cfg["sliding_window"] = 4096;
  CHECK_THROWS_WITH_AS(ModelSpecFromHfConfig(cfg, "cfg.json"),
                       doctest::Contains("cfg.json: /sliding_window: 4096: sliding-window attention is not modelled"), Error);
}

TEST_CASE("A MiniMax shared MLP is rejected") {
  Json cfg = MinimaxConfig();
  cfg["shared_intermediate_size"] = 1536;
  CHECK_THROWS_WITH_AS(ModelSpecFromHfConfig(cfg, "cfg.json"),
                       doctest::Contains("cfg.json: /shared_intermediate_size: 1536: a MiniMax shared MLP is not modelled"), Error);
}

TEST_CASE("ERNIE with use_bias true is rejected: the inventory has no MLP biases") {
  Json cfg = ReadJsonFile(kHfDir + "ernie-4.5-21b-a3b.json");
  cfg["use_bias"] = true;
  CHECK_THROWS_WITH_AS(ModelSpecFromHfConfig(cfg, "cfg.json"),
                       doctest::Contains("cfg.json: /use_bias: true: ERNIE biases on every linear layer"), Error);
}

TEST_CASE("ERNIE moe_k above moe_num_experts is rejected with the ERNIE keys") {
  Json cfg = ReadJsonFile(kHfDir + "ernie-4.5-21b-a3b.json");
  cfg["moe_k"] = 65;  // 64 experts
  CHECK_THROWS_WITH_AS(ModelSpecFromHfConfig(cfg, "cfg.json"),
                       doctest::Contains("cfg.json: /moe_k: moe_k (65) must satisfy 1 <= moe_k <= moe_num_experts (64)"), Error);
}

Json LingConfig() {
  return ReadJsonFile(kHfDir + "ling-flash-2.0.json");
}

TEST_CASE("Ling 1.x (BailingMoeForCausalLM, same model_type) is refused rather than read as Ling 2.0") {
  Json cfg = LingConfig();
  cfg["architectures"] = Json::array({"BailingMoeForCausalLM"});
  CHECK_THROWS_WITH_AS(ModelSpecFromHfConfig(cfg, "cfg.json"),
                       doctest::Contains("cfg.json: /architectures/0: \"BailingMoeForCausalLM\": model_type bailing_moe is read as "
                                         "Ling 2.0 (BailingMoeV2ForCausalLM) only"),
                       Error);
}

TEST_CASE("Ling with use_bias true is rejected: the attention.dense bias is not modelled") {
  Json cfg = LingConfig();
  cfg["use_bias"] = true;
  CHECK_THROWS_WITH_AS(ModelSpecFromHfConfig(cfg, "cfg.json"),
                       doctest::Contains("cfg.json: /use_bias: true: the bias on attention.dense is not modelled"), Error);
}

TEST_CASE("Ling with an unknown score_function is rejected") {
  Json cfg = LingConfig();
  cfg["score_function"] = "sqrtsoftplus";
  CHECK_THROWS_WITH_AS(ModelSpecFromHfConfig(cfg, "cfg.json"),
                       doctest::Contains("cfg.json: /score_function: must be \"softmax\" or \"sigmoid\", got \"sqrtsoftplus\""), Error);
}

TEST_CASE("Ling with use_sliding_window true is rejected rather than planned as full attention") {
  Json cfg = LingConfig();
  cfg["use_sliding_window"] = true;
  CHECK_THROWS_WITH_AS(ModelSpecFromHfConfig(cfg, "cfg.json"),
                       doctest::Contains("cfg.json: /use_sliding_window: true: sliding-window attention is not modelled"), Error);
}

TEST_CASE("Ling num_experts_per_tok above num_experts is rejected with the Ling key") {
  Json cfg = LingConfig();
  cfg["num_experts_per_tok"] = 257;  // 256 experts
  CHECK_THROWS_WITH_AS(ModelSpecFromHfConfig(cfg, "cfg.json"),
                       doctest::Contains("cfg.json: /num_experts_per_tok: top_k (257) must satisfy 1 <= top_k <= num_experts (256)"),
                       Error);
}

TEST_CASE("Ling's MTP layers, shared-expert width and q/k norm keys are read") {
  Json cfg = LingConfig();
  cfg["num_nextn_predict_layers"] = 1;
  cfg["num_shared_experts"] = 2;
  cfg.erase("moe_shared_expert_intermediate_size");  // falls back to moe_intermediate_size (1024)
  cfg["use_qk_norm"] = false;
  cfg["n_group"] = 4;
  cfg["topk_group"] = 2;
  ModelSpec m = ModelSpecFromHfConfig(cfg, "cfg.json");
  CHECK(m.num_nextn_predict_layers == 1);
  CHECK(m.moe.num_shared_experts == 2);
  CHECK(m.moe.shared_expert_intermediate_size == 2048);  // 2 · 1024
  CHECK(m.attention.qk_norm == QkNorm::kNone);
  CHECK(m.moe.n_group == 4);
  CHECK(m.moe.topk_group == 2);
}

TEST_CASE("Ling n_group that does not divide num_experts is rejected with the group rule") {
  Json cfg = LingConfig();
  cfg["n_group"] = 3;  // 256 experts do not split into 3 groups
  CHECK_THROWS_WITH_AS(
      ModelSpecFromHfConfig(cfg, "cfg.json"),
      doctest::Contains("cfg.json: n_group (normalized from the config): n_group (3) must be >= 1 and divide num_experts (256)"), Error);
}

TEST_CASE("Qwen3-Next with use_sliding_window true is rejected") {
  Json cfg = Qwen3NextConfig();
  cfg["use_sliding_window"] = true;
  CHECK_THROWS_WITH_AS(ModelSpecFromHfConfig(cfg, "cfg.json"),
                       doctest::Contains("cfg.json: /use_sliding_window: true: sliding-window attention is not modelled"), Error);
}

TEST_CASE("A dockyard spec with attention_layer_types but no linear_attention block is rejected") {
  Json spec = ModelSpecToJson(LoadModel(kHfDir + "qwen3-next-80b-a3b-instruct.json"));
  spec["attention"].erase("linear_attention");  // the layers name a block that is not described
  CHECK_THROWS_WITH_AS(ModelSpecFromJson(spec, "spec.json"),
                       doctest::Contains("spec.json: /attention_layer_types: lists linear-attention layers, but "
                                         "/attention/linear_attention is absent"),
                       Error);
}

TEST_CASE("A dockyard spec with an indexer on GQA attention is rejected") {
  Json spec = ModelSpecToJson(LoadModel(kHfDir + "qwen3-30b-a3b.json"));
  spec["attention"]["indexer"] = {{"index_n_heads", 64}, {"index_head_dim", 128}, {"index_topk", 2048}};
  CHECK_THROWS_WITH_AS(ModelSpecFromJson(spec, "spec.json"),
                       doctest::Contains("spec.json: /attention/indexer: the DeepSeek Sparse Attention indexer reads "
                                         "the MLA query latent"),
                       Error);
}

TEST_CASE("A MiniMax attn_type_list needs one entry per layer") {
  Json cfg = MinimaxConfig();
  cfg["attn_type_list"] = Json::array({1, 1, 1, 1, 1, 1, 1, 1, 1, 1});  // 10 entries for num_hidden_layers 62
  CHECK_THROWS_WITH_AS(ModelSpecFromHfConfig(cfg, "cfg.json"),
                       doctest::Contains("cfg.json: /attn_type_list: one entry per layer: num_hidden_layers is 62, got 10 elements"),
                       Error);
}

TEST_CASE("ERNIE MoE layer bounds that leave no MoE layer name the field at fault") {
  Json cfg = ReadJsonFile(kHfDir + "ernie-4.5-21b-a3b.json");
  cfg["moe_layer_start_index"] = 20;
  cfg["moe_layer_end_index"] = 5;  // end below start: no layer i with 20 <= i <= 5
  CHECK_THROWS_WITH_AS(ModelSpecFromHfConfig(cfg, "cfg.json"),
                       doctest::Contains("cfg.json: /moe_layer_end_index: 5 is below moe_layer_start_index (20)"), Error);
  cfg["moe_layer_end_index"] = 27;
  cfg["moe_layer_start_index"] = 28;  // num_hidden_layers 28: layers 0..27
  CHECK_THROWS_WITH_AS(ModelSpecFromHfConfig(cfg, "cfg.json"),
                       doctest::Contains("cfg.json: /moe_layer_start_index: 28 leaves no MoE layer: num_hidden_layers is 28"), Error);
}

TEST_CASE("Ling first_k_dense_replace at or past the layer count names the field") {
  Json cfg = ReadJsonFile(kHfDir + "ling-flash-2.0.json");
  cfg["first_k_dense_replace"] = 40;  // num_hidden_layers 32
  CHECK_THROWS_WITH_AS(ModelSpecFromHfConfig(cfg, "cfg.json"),
                       doctest::Contains("cfg.json: /first_k_dense_replace: 40 leaves no MoE layer: the first 40 layers are dense and "
                                         "num_hidden_layers is 32"),
                       Error);
}

}  // namespace
}  // namespace dockyard
