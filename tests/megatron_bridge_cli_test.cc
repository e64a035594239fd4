// End-to-end (issue 36, Megatron-Bridge): run_config.yaml dumps written by Megatron-Bridge's own
// code for two of its recipes (testdata/frameworks/README.md) give the same plan as the equivalent
// dockyard flags; a search row written with --emit megatron-bridge and read back simulates to the
// row's step time and peak; bad input gets one clear error and writes nothing.
#include <string>

#include <doctest/doctest.h>

#include "tests/cli_test_util.h"

namespace {

using namespace dockyard::testing;
using Result = CommandResult;

const std::string kDir = "testdata/frameworks/";

}  // namespace

TEST_CASE("check --from-megatron-bridge on the Qwen3-30B-A3B recipe's dump = the same plan as dockyard flags") {
  // qwen3_30b_a3b_pretrain_16gpu_h100_bf16_config: EP 16 (ETP 1), flex + HybridEP, distributed
  // optimizer with both overlaps, micro-batch 1, global 1024, seq 4096, bf16 gradients reduced in
  // bf16 (grad_reduce_in_fp32 false), fused cross-entropy; no vocabulary padding; HybridEP on 32 SMs
  // (moe_flex_dispatcher_num_sms, as __post_init__ routed moe_hybridep_num_sms).
  const std::string model = " --model testdata/hf/qwen3-30b-a3b.json --world-size 16 --gpu-memory-gib 80 --json ";
  const Result from = Plan("check --from-megatron-bridge " + kDir + "megatron-bridge-qwen3-30b-a3b.run_config.yaml" + model + Tmp("q_from.json"));
  REQUIRE_MESSAGE(from.code == 0, from.err);
  CHECK(Has(from.out, "Megatron-Bridge config testdata/frameworks/megatron-bridge-qwen3-30b-a3b.run_config.yaml (run_config.yaml dump): "));
  const Result flags = Plan(
      "check --convention megatron --ep 16 --etp 1 --dp-sharding zero1 --micro-batch-size 1 --global-batch-size 1024 --seq-len 4096 "
      "--dispatcher deepep --moe-flex-dispatcher-backend hybridep --moe-flex-dispatcher-num-sms 32 --overlap-grad-reduce --overlap-param-gather "
      "--clip-grad 1.0 --cross-entropy fused --make-vocab-size-divisible-by 1 --grad-dtype bfloat16" + model + Tmp("q_flags.json"));
  REQUIRE_MESSAGE(flags.code == 0, flags.err);
  CheckSamePlan(ReadJson(Tmp("q_from.json")), ReadJson(Tmp("q_flags.json")));
  CHECK(ReadJson(Tmp("q_from.json"))["generator"]["provenance"]["framework_config"]["framework"] == "Megatron-Bridge");
}

TEST_CASE("simulate --from-megatron-bridge on the DeepSeek-V3 recipe's dump: its 16-stage layout, MTP and bf16 moments") {
  // deepseek_v3_pretrain_1024gpu_h100_bf16_config: TP 2, PP 16 with a layout of 4 layers a stage
  // (the embedding on the first, MTP and the loss on the last), EP 64, MTP 1, precision-aware
  // optimizer with bf16 moments, global 4096; the dump alone gives the model.
  const std::string common = " --world-size 1024 --cluster h100-sxm --json ";
  const Result from = Plan("simulate --from-megatron-bridge " + kDir + "megatron-bridge-deepseek-v3.run_config.yaml" + common + Tmp("d_from.json"));
  REQUIRE_MESSAGE(from.code == 0, from.err);
  CHECK(Has(from.out, "--pipeline-model-parallel-layout Etttt|tttt|tttt|tttt|tttt|tttt|tttt|tttt|tttt|tttt|tttt|tttt|tttt|tttt|tttt|tmL"));
  // The dump's DDP settings as CommOverlapConfig wrote them (ddp.bucket_size 128 Mi, align_param_gather false).
  CHECK(Has(from.out, "--ddp-bucket-size 134217728"));
  CHECK(Has(from.out, "--no-align-param-gather"));
  const Result flags = Plan(
      "simulate --model testdata/hf/deepseek-v3.json --convention megatron --tp 2 --pp 16 --ep 64 --etp 1 --dp-sharding zero1 "
      "--micro-batch-size 1 --global-batch-size 4096 --seq-len 4096 "
      "--pipeline-model-parallel-layout 'Etttt|tttt|tttt|tttt|tttt|tttt|tttt|tttt|tttt|tttt|tttt|tttt|tttt|tttt|tttt|tmL' --dispatcher deepep "
      "--moe-flex-dispatcher-backend hybridep --overlap-grad-reduce --overlap-param-gather --clip-grad 1.0 --cross-entropy fused "
      "--make-vocab-size-divisible-by 1 --mtp-layers 1 --grad-dtype bfloat16 --optimizer-states-dtype bfloat16 "
      "--ddp-bucket-size 134217728 --no-align-param-gather" + common + Tmp("d_flags.json"));
  REQUIRE_MESSAGE(flags.code == 0, flags.err);
  const Json a = ReadJson(Tmp("d_from.json")), b = ReadJson(Tmp("d_flags.json"));
  CHECK(a["predicted"] == b["predicted"]);
  CHECK(a["memory"] == b["memory"]);
  CHECK(a["parallel"] == b["parallel"]);
}

TEST_CASE("search --emit megatron-bridge --emit-row, read back with --from-megatron-bridge: the row's step time and peak") {
  const std::string model = " --model testdata/hf/qwen3-30b-a3b.json --world-size 16 --cluster h100-sxm";
  const std::string search = "search --from-megatron-bridge " + kDir + "megatron-bridge-qwen3-30b-a3b.run_config.yaml" + model +
                             " --gpu-memory-gib 79 --unpin ep,tp,recompute --top 3 --json " + Tmp("rows.json") + " --emit megatron-bridge --emit-out ";
  for (int row : {1, 2}) {
    const std::string yaml = Tmp("row" + std::to_string(row) + ".yaml");
    const Result s = Plan(search + yaml + " --emit-row " + std::to_string(row));
    REQUIRE_MESSAGE(s.code == 0, s.err);
    CHECK(Has(s.out, "Megatron-Bridge overrides of row " + std::to_string(row) + " written to " + yaml));
    const Json top = ReadJson(Tmp("rows.json"))["top"][row - 1];
    const Result sim = Plan("simulate --from-megatron-bridge " + yaml + model + " --json " + Tmp("sim.json"));
    REQUIRE_MESSAGE(sim.code == 0, sim.err);
    const Json r = ReadJson(Tmp("sim.json"));
    CHECK(r["predicted"]["step_time_us"].get<double>() == doctest::Approx(top["step_time_us"].get<double>()).epsilon(1e-12));
    CHECK(r["memory"]["worst_peak_bytes"].get<int64_t>() == top["peak_bytes"].get<int64_t>());
  }
}

TEST_CASE("Megatron-Bridge bad input: one clear error, the exit code, nothing written") {
  const std::string model = " --model testdata/hf/qwen3-30b-a3b.json --world-size 16";
  WriteText(Tmp("typo.yaml"), "model:\n  expert_model_paralel_size: 8\n");
  const Result typo = Plan("--from-megatron-bridge " + Tmp("typo.yaml") + model);
  CHECK(typo.code == 1);
  CHECK(Has(typo.err, "typo.yaml:2: model.expert_model_paralel_size: not a key of Megatron-Bridge's ConfigContainer at 067f987df; did you mean "
                      "'model.expert_model_parallel_size'?"));
  // An overrides YAML without --model; a contradiction with the command line (exit 2).
  WriteText(Tmp("ep.yaml"), "model:\n  expert_model_parallel_size: 8\n");
  CHECK(Has(Plan("--from-megatron-bridge " + Tmp("ep.yaml") + " --world-size 16").err, "an overrides YAML leaves the model to its recipe: give --model"));
  const Result contradiction = Plan("--from-megatron-bridge " + Tmp("ep.yaml") + model + " --ep 4");
  CHECK(contradiction.code == 2);
  CHECK(Has(contradiction.err, "--ep 4 on the command line contradicts model.expert_model_parallel_size in"));
  // A rule of the plan names the Bridge key that set the degree.
  WriteText(Tmp("ep3.yaml"), "model:\n  expert_model_parallel_size: 3\n");
  const Result ep3 = Plan("--from-megatron-bridge " + Tmp("ep3.yaml") + model);
  CHECK(ep3.code == 1);
  CHECK(Has(ep3.err, "(--ep 3 came from model.expert_model_parallel_size in "));
  // Two job configs at once; --emit-out over the file read.
  CHECK(Plan("--from-megatron-bridge " + Tmp("ep.yaml") + " --from-torchtitan " + Tmp("ep.yaml") + model).code == 2);
  const Result over = Plan("--from-megatron-bridge " + Tmp("ep.yaml") + model + " --emit megatron-bridge --emit-out " + Tmp("ep.yaml"));
  CHECK(over.code == 1);
  CHECK(Has(over.err, "refusing to overwrite it"));
  // A torchtitan plan has no Megatron-Bridge form; nothing written.
  const Result titan = Plan("--model testdata/hf/qwen3-30b-a3b.json --world-size 8 --ep 8 --emit megatron-bridge --emit-out " + Tmp("t.yaml"));
  CHECK(titan.code == 1);
  CHECK(Has(titan.err, "--emit megatron-bridge: the plan is under --convention torchtitan"));
  CHECK_FALSE(Exists(Tmp("t.yaml")));
}
