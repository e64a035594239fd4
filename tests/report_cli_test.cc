// End-to-end: the memory reserve in check / simulate / search, the exit codes (1 invalid input, 2
// usage, 3 over budget), --routing sizing memory in check and simulate, the report header every
// report opens with, and the memory and communication sections of simulate --json.
#include <array>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <sys/stat.h>
#include <sys/wait.h>

#include <doctest/doctest.h>

#include "tests/run_command.h"

#include "planner/base/json_util.h"

namespace {

using Result = dockyard::testing::CommandResult;  // out: stdout and stderr together

std::string TmpDir() {
  const char* t = std::getenv("TEST_TMPDIR");
  return t ? t : "/tmp";
}

Result Run(const std::string& args, bool with_stderr = true) {
  return dockyard::testing::RunCommand("cli/dockyard-plan " + args,
                                       with_stderr ? dockyard::testing::StderrTo::kOut : dockyard::testing::StderrTo::kDiscard);
}

bool Exists(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0;
}

// Qwen3-30B-A3B on 8 GPUs, EP 8, ZeRO-1: peak 96.30 GiB on every rank (71.51 GiB static,
// memory_test; 24.54 GiB activations, 0.25 GiB buffers). The q/k norms' inputs: 4,096 tokens x
// (4,096 + 512) x 2 B x 48 layers = 1.69 GiB. The logits at the loss: 4,096 tokens x
// 151,936 x (4 B fp32 softmax + 2 B bf16 logits) = 3.48 GiB (memory.h LossBytesPerLogit). Routed experts, Megatron-Core's saved
// tensors (workload.h SavedTensorRules): 32,768 rows x (2,048 x 2 B fc1 input + 3 x 768 x 2 B
// SwiGLU + 4 B probability) x 48 layers = 12.76 GiB.
const char* kQwen8 = "--model testdata/hf/qwen3-30b-a3b.json --world-size 8 --ep 8 --dp-sharding zero1 --convention megatron";

}  // namespace

TEST_CASE("check: the default 2 GiB reserve decides a plan within 2 GiB of its budget; --memory-reserve-gib overrides it") {
  const std::string base = std::string("check ") + kQwen8 + " --gpu-memory-gib 98";
  // 98 - 2 = 96 GiB usable < 96.30 GiB peak: over.
  Result def = Run(base);
  CHECK(def.code == 3);
  CHECK(def.out.find("exceed the 98.00 GiB budget less the 2.00 GiB reserve (96.00 GiB)") != std::string::npos);
  // 98 - 1 = 97 GiB usable: fits, headroom 97 - 96.30 = 0.70 GiB.
  Result one = Run(base + " --memory-reserve-gib 1");
  CHECK(one.code == 0);
  CHECK(one.out.find("budget 98.00 GiB - reserve 1.00 GiB") != std::string::npos);
  CHECK(one.out.find("    0.70\n") != std::string::npos);
  CHECK(Run(base + " --memory-reserve-gib 0").code == 0);
  // A negative reserve is invalid input (1), a malformed one a usage error (2).
  Result neg = Run(base + " --memory-reserve-gib -1");
  CHECK(neg.code == 1);
  CHECK(neg.out.find("--memory-reserve-gib: must be a finite number in [0, 1e6] GiB, got -1") != std::string::npos);
  CHECK(Run(base + " --memory-reserve-gib two").code == 2);
}

TEST_CASE("check and simulate exit 3 over budget, 1 on invalid input; simulate still writes its report") {
  CHECK(Run(std::string("check ") + kQwen8 + " --gpu-memory-gib 40").code == 3);
  // ep 3 does not divide dp_shard 8: invalid input, whatever the budget.
  CHECK(Run("check --model testdata/hf/qwen3-30b-a3b.json --world-size 8 --ep 3 --gpu-memory-gib 40").code == 1);
  const std::string out = TmpDir() + "/over.json";
  Result sim = Run(std::string("simulate ") + kQwen8 + " --seq-len 1024 --gpu-memory-gib 40 --json " + out);
  CHECK(sim.code == 3);
  CHECK(sim.out.find("dockyard-plan simulate: stage 0: 8 of 8 ranks exceed the 40.00 GiB budget") != std::string::npos);
  CHECK(Exists(out));
  // Within budget: 0.
  CHECK(Run(std::string("simulate ") + kQwen8 + " --seq-len 1024 --gpu-memory-gib 1000").code == 0);
}

TEST_CASE("search takes the reserve: more layouts are over budget with a larger reserve") {
  const std::string base = "search --model testdata/hf/qwen3-30b-a3b.json --world-size 8 --top 1 --json -";
  // h100-sxm budget 79.6 GiB. With no reserve the best layout peaks at 77.28 GiB; the default
  // 2 GiB reserve leaves 77.6 GiB (83 over instead of 82), a 10 GiB one 69.6 GiB: layouts move from
  // ranked to over budget.
  const dockyard::Json none = dockyard::ParseJsonText(Run(base + " --memory-reserve-gib 0", false).out, "stdout");
  const dockyard::Json def = dockyard::ParseJsonText(Run(base, false).out, "stdout");
  const dockyard::Json big = dockyard::ParseJsonText(Run(base + " --memory-reserve-gib 10", false).out, "stdout");
  CHECK(def["over_budget"].get<int64_t>() > none["over_budget"].get<int64_t>());
  CHECK(big["over_budget"].get<int64_t>() > none["over_budget"].get<int64_t>());
  CHECK(big["ranked"].get<int64_t>() + big["over_budget"].get<int64_t>() ==
        none["ranked"].get<int64_t>() + none["over_budget"].get<int64_t>());
  CHECK(def["training"]["memory_reserve_gib"] == 2.0);
  CHECK(big["training"]["memory_reserve_gib"] == 10.0);
  // Every ranked layout's peak is within the usable 69.6 GiB.
  for (const auto& row : big["top"]) CHECK(row["peak_bytes"].get<double>() <= (79.6 - 10) * 1073741824.0);
}

TEST_CASE("check --routing sizes the all-to-all buffers from the sample's largest received rows, by hand") {
  // tiny-mixtral (8 experts, top_k 2, hidden 64, bf16) on 4 GPUs, EP 4, 16 tokens per rank.
  // hot:2:1 sends every token to experts 0 and 1, both on EP rank 0: rank 0 receives 4 ranks x 16
  // tokens x 2 = 128 rows, mean 16 x 2 = 32 (max/mean 4).
  const std::string base = "check --model testdata/specs/tiny-mixtral.json --world-size 4 --ep 4 --seq-len 16 --gpu-memory-gib 80 --json -";
  const dockyard::Json hot = dockyard::ParseJsonText(Run(base + " --routing hot:2:1 --capacity-factor 1.5", false).out, "stdout");
  CHECK(hot["memory"]["workload"]["max_received_rows"] == 128);
  // all_to_all buffers: (send 32 + receive 128 rows) x 64 x 2 B = 20480 B.
  CHECK(hot["memory"]["stages"][0]["comm_buffers_by_use"]["all_to_all"] == 20480);
  CHECK(hot["training"]["imbalance"] == 4.0);
  // The same as --imbalance 4 by hand, and more than the default balanced (32 + 32) x 128 = 8192 B.
  const dockyard::Json by_hand = dockyard::ParseJsonText(Run(base + " --imbalance 4", false).out, "stdout");
  CHECK(by_hand["memory"]["stages"] == hot["memory"]["stages"]);
  const dockyard::Json plain = dockyard::ParseJsonText(Run(base, false).out, "stdout");
  CHECK(plain["memory"]["stages"][0]["comm_buffers_by_use"]["all_to_all"] == 8192);
  CHECK_FALSE(plain.contains("received_rows"));
  // Per layer: max 128, mean 32, p99 128 (nearest rank of 4: sorted[3]).
  const dockyard::Json& rows = hot["received_rows"];
  REQUIRE(rows["layers"].size() == 2);
  CHECK(rows["layers"][0]["max_received_rows"] == 128);
  CHECK(rows["layers"][0]["mean_received_rows"] == 32.0);
  CHECK(rows["layers"][0]["p99_received_rows"] == 128);
  // Capacity 1.5: ceil(16 x 2 / 8 x 1.5) = 6 per expert and source rank; each rank sends 16 to
  // expert 0 and 16 to expert 1: (10 + 10) x 4 ranks x 2 layers = 160 of 16 x 2 x 4 x 2 = 256.
  CHECK(rows["capacity"]["capacity_per_expert_per_rank"] == 6);
  CHECK(rows["capacity"]["dropped_assignments"] == 160);
  CHECK(rows["capacity"]["drop_fraction"] == 0.625);
  // Text: the per-layer table and the drop line.
  const Result text =
      Run("check --model testdata/specs/tiny-mixtral.json --world-size 4 --ep 4 --seq-len 16 --gpu-memory-gib 80 "
          "--routing hot:2:1 --capacity-factor 1.5");
  CHECK(text.code == 0);
  CHECK(text.out.find("memory sized for 128 received rows (imbalance 4.0000") != std::string::npos);
  CHECK(text.out.find("160 of 256 assignments dropped (62.500%)") != std::string::npos);
  // --routing and --imbalance both size the same rows: a usage error.
  CHECK(Run(base + " --routing hot:2:1 --imbalance 2").code == 2);
  // --capacity-factor without --routing: the uniform sample reports its rows and drops, but
  // --imbalance (1 here) sizes memory, and the text says so rather than "memory sized for".
  const dockyard::Json cf = dockyard::ParseJsonText(Run(base + " --capacity-factor 1.5", false).out, "stdout");
  CHECK(cf["received_rows"]["sizes_memory"] == false);
  CHECK(hot["received_rows"]["sizes_memory"] == true);
  CHECK(cf["memory"]["stages"] == plain["memory"]["stages"]);
  const Result cf_text =
      Run("check --model testdata/specs/tiny-mixtral.json --world-size 4 --ep 4 --seq-len 16 --gpu-memory-gib 80 --capacity-factor 1.5");
  CHECK(cf_text.code == 0);
  CHECK(cf_text.out.find("memory sized for") == std::string::npos);
  CHECK(cf_text.out.find("memory is sized by --imbalance, not by this sample (give --routing for that)") != std::string::npos);
}
TEST_CASE("simulate --routing sizes memory from its sample; without --routing memory keeps --imbalance") {
  const std::string base = "simulate --model testdata/specs/tiny-mixtral.json --world-size 4 --ep 4 --seq-len 16 --json -";
  const dockyard::Json hot = dockyard::ParseJsonText(Run(base + " --routing hot:2:1", false).out, "stdout");
  CHECK(hot["memory"]["stages"][0]["comm_buffers_by_use"]["all_to_all"] == 20480);  // as in check, by hand above
  CHECK(hot["received_rows"]["max_received_rows"] == 128);
  const dockyard::Json plain = dockyard::ParseJsonText(Run(base, false).out, "stdout");
  CHECK(plain["memory"]["stages"][0]["comm_buffers_by_use"]["all_to_all"] == 8192);  // uniform sample, --imbalance 1
}

TEST_CASE("plan, check, simulate and search open with the same header, in JSON at /header and as the first text lines") {
  const std::string model = "--model testdata/specs/tiny-mixtral.json --world-size 4";
  const std::string layout = model + " --ep 4 --seq-len 16";
  const dockyard::Json plan = dockyard::ParseJsonText(Run(layout + " --json -", false).out, "plan");
  const dockyard::Json check = dockyard::ParseJsonText(Run("check " + layout + " --gpu-memory-gib 80 --json -", false).out, "check");
  const dockyard::Json sim = dockyard::ParseJsonText(Run("simulate " + layout + " --routing zipf:1.2 --json -", false).out, "simulate");
  const dockyard::Json search = dockyard::ParseJsonText(Run("search " + model + " --seq-len 16 --top 1 --json -", false).out, "search");
  for (const dockyard::Json* j : {&plan, &check, &sim, &search}) {
    CHECK((*j)["schema_version"] == 2);
    const dockyard::Json& h = (*j)["header"];
    for (const char* key : {"command", "model", "degrees", "cluster", "calibration", "routing", "imbalance", "provenance"}) {
      CAPTURE(key);
      CHECK(h.contains(key));
    }
    CHECK(h["model"]["name"] == "tiny-mixtral");
    CHECK(h["degrees"]["world_size"] == 4);
    CHECK(h["provenance"]["inputs"][0]["path"] == "testdata/specs/tiny-mixtral.json");
  }
  CHECK(plan["header"]["command"] == "plan");
  CHECK(check["header"]["command"] == "check");
  CHECK(sim["header"]["command"] == "simulate");
  CHECK(search["header"]["command"] == "search");
  // One layout: its degrees (dp_shard 4 / ep 4 = efsdp 1); search ranks many: none.
  CHECK(plan["header"]["degrees"] == check["header"]["degrees"]);
  CHECK(sim["header"]["degrees"]["ep"] == 4);
  CHECK_FALSE(search["header"]["degrees"].contains("ep"));
  CHECK(plan["header"]["routing"].is_null());
  CHECK(plan["header"]["cluster"].is_null());
  CHECK(sim["header"]["routing"]["spec"] == "zipf:1.2");
  CHECK(sim["header"]["cluster"] == "h100-sxm");
  CHECK(search["header"]["routing"]["spec"] == "uniform");
  // Text: every report's first line names it, the next ones are the header's.
  for (const char* cmd : {"", "check ", "simulate "}) {
    const std::string args = std::string(cmd) + layout + (std::string(cmd) == "check " ? " --gpu-memory-gib 80" : "");
    const Result r = Run(args, false);
    CAPTURE(args);
    CHECK(r.out.rfind("Report     dockyard-plan ", 0) == 0);
    CHECK(r.out.find("\nModel      tiny-mixtral (testdata/specs/tiny-mixtral.json)\nDegrees    world_size 4 = pp 1") != std::string::npos);
  }
  CHECK(Run("search " + model + " --seq-len 16 --top 1", false).out.rfind("Report     dockyard-plan search\n", 0) == 0);
  // Under Megatron's convention the Degrees line also gives Megatron's names: 8 GPUs, pp 2, tp 2,
  // ep 2, etp 1: DP = 8 / (2 x 2) = 2, EDP = 8 / (pp 2 x ep 2 x etp 1) = 2.
  const Result megatron = Run("--model testdata/specs/tiny-mixtral.json --world-size 8 --pp 2 --tp 2 --ep 2 --etp 1 --convention megatron", false);
  REQUIRE(megatron.code == 0);
  CHECK(megatron.out.find("(Megatron: TP 2, PP 2, CP 1, DP 2, EP 2, ETP 1, EDP 2), megatron convention\n") != std::string::npos);
  const Result titan = Run(model, false);
  REQUIRE(titan.code == 0);
  CHECK(titan.out.find("(Megatron:") == std::string::npos);
  // The compute model of a predicted time (simulate, search) is named; plan and check predict none.
  const dockyard::Json kernels = {
      {"model", "kernels"}, {"gemm_precision", "bf16"}, {"attention_precision", "bf16"}, {"cuda_graphs", false}, {"cross_entropy", "unfused"}};
  CHECK(sim["header"]["compute"] == kernels);
  CHECK(search["header"]["compute"] == kernels);
  CHECK_FALSE(plan["header"].contains("compute"));
  CHECK_FALSE(check["header"].contains("compute"));
  const dockyard::Json gemm =
      dockyard::ParseJsonText(Run("simulate " + layout + " --compute-model gemm --json -", false).out, "simulate")["header"]["compute"];
  CHECK(gemm["model"] == "gemm");
  const dockyard::Json graphs =
      dockyard::ParseJsonText(Run("search " + model + " --seq-len 16 --top 1 --cuda-graphs --cross-entropy fused --json -", false).out,
                              "search")["header"]["compute"];
  CHECK(graphs == dockyard::Json{{"model", "kernels"},
                                 {"gemm_precision", "bf16"},
                                 {"attention_precision", "bf16"},
                                 {"cuda_graphs", true},
                                 {"cross_entropy", "fused"},
                                 {"cross_entropy_fusion_impl", "native"}});
  CHECK(Run("simulate " + layout, false).out.find("\nCompute    kernels model, GEMMs bf16, attention bf16, CUDA graphs off, cross-entropy unfused\n") !=
        std::string::npos);
  // gpt-oss's YaRN factor (0.1 ln 32 + 1) under Megatron: the rotary runs unfused and the line says
  // so; torchtitan prices one fused kernel (kernels_model.h RotaryRunsUnfused).
  const std::string oss = "simulate --model testdata/hf/gpt-oss-120b.json --world-size 64 --ep 64 --seq-len 256 --global-batch-size 64";
  const dockyard::Json rope =
      dockyard::ParseJsonText(Run(oss + " --convention megatron --json -", false).out, "simulate")["header"]["compute"];
  CHECK(rope["rotary"] == "unfused");
  CHECK(rope["rope_attention_factor"].get<double>() == doctest::Approx(1.34657).epsilon(1e-5));
  CHECK(Run(oss + " --convention megatron", false).out.find(", rotary unfused (YaRN attention factor 1.3466: Megatron-Core's eager RoPE)") !=
        std::string::npos);
  CHECK_FALSE(dockyard::ParseJsonText(Run(oss + " --json -", false).out, "simulate")["header"]["compute"].contains("rotary"));
  // The GEMMs' precision with its recipe (an FP8 recipe is priced by its own rules, docs/cost-model.md 3.14).
  CHECK(Run("simulate " + layout + " --precision fp8 --fp8-recipe blockwise", false).out.find("GEMMs fp8 blockwise,") != std::string::npos);
  // FP8 attention (TransformerEngine's FP8 DPA) shows on the line; without FP8 GEMMs it is refused naming the flag.
  // On h100-sxm (no FP8-attention measurement, fp8_speedup 1) the line says it is priced as BF16;
  // on gb300-nvl72 at DeepSeek-V3's MLA (qk 192) it is cuDNN 9.26's 1.74.
  CHECK(Run("simulate " + layout + " --convention megatron --precision fp8 --fp8-dot-product-attention", false)
            .out.find("GEMMs fp8 tensorwise, attention fp8 (priced as bf16: no measured FP8 gain for this head dim on this cluster),") !=
        std::string::npos);
  CHECK(Run("simulate --model testdata/hf/deepseek-v3.json --cluster gb300-nvl72 --world-size 64 --ep 64 --convention megatron "
            "--precision mxfp8 --fp8-dot-product-attention",
            false)
            .out.find("GEMMs fp8 mxfp8, attention fp8 (core x1.74),") != std::string::npos);
  // --vpp out of range is named before Megatron's layer split reads it (was a crash on an uneven split).
  for (const char* vpp : {"-1", "0"}) {
    const auto bad = Run(std::string("simulate --model testdata/hf/qwen3-235b-a22b.json --world-size 256 --convention megatron --pp 32 --ep 8 --vpp ") + vpp);
    CHECK(bad.code == 1);
    CHECK(bad.out.find(std::string("--vpp: must be in [1, 1024], got ") + vpp) != std::string::npos);
  }
  const auto refused = Run("simulate " + layout + " --convention megatron --fp8-dot-product-attention");
  CHECK(refused.code != 0);
  CHECK(refused.out.find("--fp8-dot-product-attention: FP8 attention needs precision fp8") != std::string::npos);
}

TEST_CASE("simulate --json carries the memory and communication sections of the plan's JSON writers") {
  const std::string layout = "--model testdata/specs/tiny-mixtral.json --world-size 4 --ep 4 --seq-len 16";
  const dockyard::Json plan = dockyard::ParseJsonText(Run(layout + " --json -", false).out, "plan");
  const dockyard::Json sim = dockyard::ParseJsonText(Run("simulate " + layout + " --json -", false).out, "simulate");
  // The same plan (simulate takes gpus_per_node from the h100-sxm preset: 8, the plan's default).
  CHECK(sim["memory"] == plan["memory"]);
  CHECK(sim["communication"] == plan["communication"]);
  CHECK(sim["memory"]["worst_peak_bytes"].get<int64_t>() > 0);
  CHECK(!sim["communication"]["entries"].empty());
}

TEST_CASE("plan --mtp-layers reports the MTP modules beside the model's totals (text and JSON)") {
  // DeepSeek-V3: 671,026,419,200 parameters without MTP; its module is MtpModuleParams
  // (mtp_test.cc: 671B + 14B = 685B, the HF model card), on the last of 8 stages.
  const std::string layout = "--model testdata/hf/deepseek-v3.json --world-size 256 --pp 8 --ep 32";
  const dockyard::Json with = dockyard::ParseJsonText(Run(layout + " --mtp-layers 1 --json -", false).out, "plan");
  const dockyard::Json& mtp = with["model"]["mtp"];
  CHECK(mtp["layers"] == 1);
  CHECK(mtp["stage"] == 7);
  const int64_t per_module = mtp["params_per_module"].get<int64_t>();
  CHECK(per_module / 1e9 == doctest::Approx(14).epsilon(0.05));
  CHECK(mtp["total_params_with_mtp"].get<int64_t>() == 671026419200 + per_module);
  CHECK(with["model"]["total_params"] == 671026419200);  // the published count stays the model's
  const dockyard::Json without = dockyard::ParseJsonText(Run(layout + " --json -", false).out, "plan");
  CHECK_FALSE(without["model"].contains("mtp"));
  CHECK(Run(layout + " --mtp-layers 1", false).out.find("+ 1 MTP module(s) of ") != std::string::npos);
}

TEST_CASE("search's header lists the pinned dimensions; the training block names the searched ones") {
  const std::string base = "search --model testdata/specs/tiny-mixtral.json --world-size 4 --seq-len 16 --top 1";
  const Result all = Run(base);
  CHECK(all.code == 0);
  CHECK(all.out.find("Degrees    world_size 4 (every layout searched), torchtitan convention") != std::string::npos);
  const Result pinned = Run(base + " --tp 2 --recompute full --dispatcher all_to_all");
  CHECK(pinned.code == 0);
  CHECK(pinned.out.find("Degrees    world_size 4 (layouts searched; pinned: dispatcher all_to_all, recompute full, tp 2), torchtitan "
                        "convention") != std::string::npos);
  const dockyard::Json j = dockyard::ParseJsonText(Run(base + " --tp 2 --recompute full --json -", false).out, "stdout");
  CHECK(j["header"]["degrees"]["pinned"] == dockyard::Json{{"tp", 2}, {"recompute", "full"}});
  CHECK(j["training"]["searched"] == dockyard::Json{"micro_batch_size", "vpp", "dp_sharding", "dispatcher"});
  // Every row holds the pins.
  REQUIRE(j["top"].size() == 1);
  for (const auto& row : j["top"]) {
    CHECK(row["tp"] == 2);
    CHECK(row["recompute"] == "full");
  }
}

TEST_CASE("--precision mxfp8: priced on Blackwell, refused on Hopper with the rule, nothing written") {
  const std::string layout = "simulate --model testdata/specs/tiny-mixtral.json --world-size 4 --ep 4 --seq-len 16 --precision mxfp8";
  const Result b200 = Run(layout + " --cluster b200");
  CHECK(b200.code == 0);
  CHECK(b200.out.find("GEMMs fp8 mxfp8,") != std::string::npos);
  const std::string out = TmpDir() + "/mxfp8_h100.json";
  std::remove(out.c_str());
  const Result h100 = Run(layout + " --cluster h100-sxm --json " + out);
  CHECK(h100.code == 1);
  CHECK(h100.out.find("fp8_recipe: \"mxfp8\" needs Blackwell tensor cores") != std::string::npos);
  CHECK(h100.out.find("cluster \"h100-sxm\"") != std::string::npos);
  CHECK_FALSE(Exists(out));
  // Another recipe beside it is a contradiction, named by its flag, even the default's name.
  for (const char* recipe : {"blockwise", "tensorwise"}) {
    CAPTURE(recipe);
    const Result clash = Run(layout + " --cluster b200 --fp8-recipe " + recipe);
    CHECK(clash.code == 1);
    CHECK(clash.out.find("--fp8-recipe") != std::string::npos);
  }
  CHECK(Run(layout + " --cluster b200 --fp8-recipe mxfp8").code == 0);
  // A search fails before it enumerates: no layout runs MXFP8 on Hopper, or Muon under torchtitan.
  const std::string search = "search --model testdata/specs/tiny-mixtral.json --world-size 4 --seq-len 16";
  const Result mx = Run(search + " --precision mxfp8");
  CHECK(mx.code == 1);
  CHECK(mx.out.find("needs Blackwell tensor cores") != std::string::npos);
  CHECK(mx.out.find("layouts") == std::string::npos);
  const Result muon = Run(search + " --optimizer muon");
  CHECK(muon.code == 1);
  CHECK(muon.out.find("torchtitan's optimizers are Adam / AdamW") != std::string::npos);
}

TEST_CASE("The warnings on stderr are in the JSON report too, without their labels") {
  // Qwen3-30B-A3B at EP 8: a 96.30 GiB peak (above) + the 2 GiB reserve > h100-sxm's 79.6 GiB.
  const Result sim = Run(std::string("simulate ") + kQwen8 + " --json -", false);
  REQUIRE(sim.code == 0);
  const dockyard::Json j = dockyard::ParseJsonText(sim.out, "simulate");
  REQUIRE(j.contains("warnings"));
  REQUIRE(j["warnings"].size() == 1);
  CHECK(j["warnings"][0].get<std::string>().rfind("the worst rank's peak, 96.", 0) == 0);
  // search on 12 GPUs of 8-GPU nodes: the partly used node.
  const Result search = Run("search --model testdata/specs/tiny-mixtral.json --world-size 12 --seq-len 16 --top 1 --json -", false);
  REQUIRE(search.code == 0);
  const dockyard::Json s = dockyard::ParseJsonText(search.out, "search");
  REQUIRE(s.contains("warnings"));
  CHECK(s["warnings"][0].get<std::string>().rfind("world_size 12 is not a multiple of h100-sxm's gpus_per_node 8", 0) == 0);
  // A plan with nothing to warn about has no key.
  CHECK_FALSE(dockyard::ParseJsonText(Run("--model testdata/specs/tiny-mixtral.json --world-size 4 --ep 4 --seq-len 16 --json -", false).out,
                                      "plan")
                  .contains("warnings"));
}
