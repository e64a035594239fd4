// End-to-end (issue 36, Megatron-LM): launch files from Megatron-LM's own examples
// (testdata/frameworks/README.md) give the same plan as the equivalent dockyard flags; a search
// row written with --emit-row and read back with --from-megatron simulates to the row's step time
// and peak; a plan written with --emit reads back alone (no --model) to the same figures; bad
// input gets one clear error and writes nothing.
#include <fstream>
#include <sstream>
#include <string>

#include <doctest/doctest.h>

#include "tests/cli_test_util.h"

namespace {

using namespace dockyard::testing;
using Result = CommandResult;

const std::string kDir = "testdata/frameworks/";

}  // namespace

TEST_CASE("check --from-megatron on Mixtral 8x7B's launch file = the same plan as dockyard flags") {
  // examples/mixtral/train_mixtral_8x7b_distributed.sh: TP 1, PP 4, EP 8, distributed optimizer,
  // alltoall, micro-batch 1, global batch 256, seq 4096, both DDP overlaps; 4 nodes of 8 GPUs.
  const Result from = Plan("check --from-megatron " + kDir + "megatron-mixtral-8x7b.args --world-size 32 --model testdata/hf/mixtral-8x7b.json "
                           "--gpu-memory-gib 80 --json " + Tmp("mixtral_from.json"));
  REQUIRE_MESSAGE(from.code == 0, from.err);
  CHECK(Has(from.out, "Megatron-LM config testdata/frameworks/megatron-mixtral-8x7b.args: 44 arguments; 13 set dockyard flags"));
  const Result flags = Plan(
      "check --convention megatron --tp 1 --pp 4 --ep 8 --dp-sharding zero1 --dispatcher all_to_all --micro-batch-size 1 "
      "--global-batch-size 256 --seq-len 4096 --overlap-grad-reduce --overlap-param-gather --clip-grad 1.0 --world-size 32 "
      "--model testdata/hf/mixtral-8x7b.json --gpu-memory-gib 80 --json " + Tmp("mixtral_flags.json"));
  REQUIRE_MESSAGE(flags.code == 0, flags.err);
  CheckSamePlan(ReadJson(Tmp("mixtral_from.json")), ReadJson(Tmp("mixtral_flags.json")));
  // The report records the file, what it set and what it left alone.
  const Json provenance = ReadJson(Tmp("mixtral_from.json"))["generator"]["provenance"];
  CHECK(provenance["framework_config"]["framework"] == "Megatron-LM");
  // examples/mixtral sets --moe-grouped-gemm but not --moe-permute-fusion: the one thing said.
  REQUIRE(provenance["framework_config"]["ignored"].size() == 1);
  CHECK(provenance["framework_config"]["ignored"][0].get<std::string>().rfind("(no --moe-permute-fusion)", 0) == 0);
}

TEST_CASE("simulate --from-megatron on DeepSeek-V3's Megatron-FSDP launch file = the same step as dockyard flags") {
  // examples/megatron_fsdp/sbatch_mfsdp_deepseek_v3.sh at its defaults, on 256 H100.
  const std::string common = " --world-size 256 --model testdata/hf/deepseek-v3.json --cluster h100-sxm --json ";
  const Result from = Plan("simulate --from-megatron " + kDir + "megatron-deepseek-v3-fsdp.args" + common + Tmp("ds_from.json"));
  REQUIRE_MESSAGE(from.code == 0, from.err);
  CHECK(Has(from.out, "    --moe-router-force-load-balancing (balanced routing: give --imbalance or --routing)\n"));
  const Result flags = Plan(
      "simulate --convention megatron --tp 1 --ep 8 --etp 1 --cp 1 --dp-sharding fsdp --dispatcher deepep "
      "--moe-flex-dispatcher-backend hybridep --micro-batch-size 4 --global-batch-size 2048 --seq-len 4096 --recompute selective "
      "--recompute-modules mlp,moe,mla_up_proj,layernorm --mtp-layers 1 --make-vocab-size-divisible-by 3232 --clip-grad 1.0 "
      "--no-check-for-nan-in-loss-and-grad --no-gradient-accumulation-fusion --param-dtype bfloat16" + common + Tmp("ds_flags.json"));
  REQUIRE_MESSAGE(flags.code == 0, flags.err);
  CheckSamePlan(ReadJson(Tmp("ds_from.json")), ReadJson(Tmp("ds_flags.json")));
}

TEST_CASE("plan --from-megatron on Qwen3-30B-A3B's modelopt conf: Megatron's defaults (DDP, no EP) over dockyard's") {
  // The conf sets no parallel flags and no --use-distributed-optimizer: DDP, tp = pp = ep = 1.
  const Result from = Plan("--from-megatron " + kDir + "megatron-qwen3-30b-a3b.args --world-size 8 --model testdata/hf/qwen3-30b-a3b.json --json " +
                           Tmp("qwen_from.json"));
  REQUIRE_MESSAGE(from.code == 0, from.err);
  const Result flags = Plan(
      "--convention megatron --dp-sharding ddp --dispatcher all_to_all --micro-batch-size 1 --seq-len 4096 "
      "--make-vocab-size-divisible-by 1187 --param-dtype bfloat16 --world-size 8 --model testdata/hf/qwen3-30b-a3b.json --json " +
      Tmp("qwen_flags.json"));
  REQUIRE_MESSAGE(flags.code == 0, flags.err);
  CheckSamePlan(ReadJson(Tmp("qwen_from.json")), ReadJson(Tmp("qwen_flags.json")));
  CHECK(ReadJson(Tmp("qwen_from.json"))["training"]["dp_sharding"] == "ddp");
}

TEST_CASE("search --emit-row, read back with --from-megatron: the row's step time and peak") {
  // Mixtral 8x7B on 32 H100 around its launch file, degrees and sharding searched. Rows 1 and 2
  // are pp 2 at vpp 4 and vpp 3; at vpp 3 Megatron needs a layout for 16 layers per rank, written
  // as --pipeline-model-parallel-layout and planned the same way by the search.
  const std::string search = "search --from-megatron " + kDir +
                             "megatron-mixtral-8x7b.args --world-size 32 --model testdata/hf/mixtral-8x7b.json --gpu-memory-gib 79 "
                             "--unpin tp,pp,ep,dp-sharding --top 5 --json " + Tmp("rows.json") + " --emit megatron --emit-out ";
  for (int row : {1, 2}) {
    const std::string args = Tmp("row" + std::to_string(row) + ".args");
    const Result s = Plan(search + args + " --emit-row " + std::to_string(row));
    REQUIRE_MESSAGE(s.code == 0, s.err);
    CHECK(Has(s.out, "Megatron-LM arguments of row " + std::to_string(row) + " written to " + args));
    const Json top = ReadJson(Tmp("rows.json"))["top"][row - 1];
    const Result sim = Plan("simulate --from-megatron " + args + " --world-size 32 --cluster h100-sxm --json " + Tmp("sim.json"));
    REQUIRE_MESSAGE(sim.code == 0, sim.err);
    const Json r = ReadJson(Tmp("sim.json"));
    CHECK(r["predicted"]["step_time_us"].get<double>() == doctest::Approx(top["step_time_us"].get<double>()).epsilon(1e-12));
    CHECK(r["memory"]["worst_peak_bytes"].get<int64_t>() == top["peak_bytes"].get<int64_t>());
    std::ifstream in(args);
    std::stringstream text;
    text << in.rdbuf();
    if (top["vpp"] == 3) CHECK(Has(text.str(), "--pipeline-model-parallel-layout 'Et*6|t*6|(t*5|)*3t*5L'"));
  }
}

TEST_CASE("simulate --emit megatron reads back alone, without --model, to the same figures") {
  // Qwen3-30B-A3B (GQA, q/k norms, every layer MoE), tp 2, pp 2 vpp 2, ep 4, selective recompute.
  const std::string layout =
      " --convention megatron --world-size 32 --tp 2 --pp 2 --vpp 2 --ep 4 --recompute selective --recompute-modules moe_act,layernorm "
      "--global-batch-size 64 --cluster h100-sxm";
  const Result a = Plan("simulate --model testdata/hf/qwen3-30b-a3b.json" + layout + " --json " + Tmp("a.json") + " --emit megatron --emit-out " +
                        Tmp("q.args"));
  REQUIRE_MESSAGE(a.code == 0, a.err);
  const Result b = Plan("simulate --from-megatron " + Tmp("q.args") + " --world-size 32 --cluster h100-sxm --json " + Tmp("b.json"));
  REQUIRE_MESSAGE(b.code == 0, b.err);
  const Json ja = ReadJson(Tmp("a.json")), jb = ReadJson(Tmp("b.json"));
  CHECK(ja["predicted"] == jb["predicted"]);
  CHECK(ja["memory"] == jb["memory"]);
  CHECK(ja["parallel"] == jb["parallel"]);
  CHECK(ja["training"] == jb["training"]);
  CHECK(jb["model"]["source"] == Tmp("q.args") + " (Megatron-LM arguments)");
}

TEST_CASE("A per-rank split Megatron's first / last flags cannot give is written as the layout that places every layer alike") {
  // Mixtral 8x7B, pp 4, 11,7,7,7 at vpp 2: 11 does not divide into 2 chunks (transformer_config.py
  // refuses the first-stage flag), so the layout: rank 0's chunks 6 and 5, the others' 4 and 3,
  // virtual stage v x 4 + p (megatron_split.h SplitPipelineLayout).
  const std::string layout =
      " --convention megatron --world-size 32 --pp 4 --vpp 2 --ep 8 --pp-layer-split 11,7,7,7 --global-batch-size 64 --cluster h100-sxm";
  const Result a = Plan("simulate --model testdata/hf/mixtral-8x7b.json" + layout + " --json " + Tmp("split_a.json") +
                        " --emit megatron --emit-out " + Tmp("split.args"));
  REQUIRE_MESSAGE(a.code == 0, a.err);
  const std::string text = ReadText(Tmp("split.args"));
  CHECK(Has(text, "--pipeline-model-parallel-layout 'Et*6|(t*4|)*3t*5|(t*3|)*2t*3L'"));
  CHECK_FALSE(Has(text, "--decoder-first-pipeline-num-layers"));
  const Result b = Plan("simulate --from-megatron " + Tmp("split.args") + " --world-size 32 --cluster h100-sxm --json " + Tmp("split_b.json"));
  REQUIRE_MESSAGE(b.code == 0, b.err);
  const Json ja = ReadJson(Tmp("split_a.json")), jb = ReadJson(Tmp("split_b.json"));
  CHECK(ja["predicted"] == jb["predicted"]);
  CHECK(ja["memory"] == jb["memory"]);
  // The plan's pipeline block alike; rank 0 holds layers 0-5 (chunk 0) and 18-22 (chunk 1).
  const Result pa = Plan("--model testdata/hf/mixtral-8x7b.json" + layout.substr(0, layout.find(" --cluster")) + " --json " + Tmp("split_pa.json"));
  const Result pb = Plan("--from-megatron " + Tmp("split.args") + " --world-size 32 --json " + Tmp("split_pb.json"));
  REQUIRE_MESSAGE(pa.code == 0, pa.err);
  REQUIRE_MESSAGE(pb.code == 0, pb.err);
  const Json qa = ReadJson(Tmp("split_pa.json")), qb = ReadJson(Tmp("split_pb.json"));
  CHECK(qa.at("pipeline").at("layer_stage") == qb.at("pipeline").at("layer_stage"));
  CHECK(qa.at("pipeline").at("stages").at(0).at("layers") == Json::parse("[[0, 5], [18, 22]]"));
}

TEST_CASE("Bad input: one clear error, the exit code, nothing written") {
  const std::string mixtral = kDir + "megatron-mixtral-8x7b.args --model testdata/hf/mixtral-8x7b.json";
  // A flag that contradicts the file (exit 2, naming both).
  const Result contradiction = Plan("check --from-megatron " + mixtral + " --world-size 32 --gpu-memory-gib 80 --pp 2");
  CHECK(contradiction.code == 2);
  CHECK(Has(contradiction.err, "--pp 2 on the command line contradicts --pipeline-model-parallel-size in testdata/frameworks/megatron-mixtral-8x7b.args, "
                               "which sets --pp 4: give one"));
  // The same thing set another way on the command line (a global batch in tokens, a micro-batch count).
  const Result tokens = Plan("check --from-megatron " + mixtral + " --world-size 32 --gpu-memory-gib 80 --global-batch-tokens 1048576");
  CHECK(tokens.code == 2);
  CHECK(Has(tokens.err, "--global-batch-tokens on the command line and --global-batch-size in testdata/frameworks/megatron-mixtral-8x7b.args "
                        "(as --global-batch-size) set the same thing two ways: give one"));
  // The same value given twice is one setting.
  CHECK(Plan("check --from-megatron " + mixtral + " --world-size 32 --gpu-memory-gib 80 --pp 4").code == 0);
  // An uneven first / last stage in the file and virtual stages on the command line: Megatron-LM
  // raises unless every stage's layers divide into them (QA: --vpp 3 passed check). 32 layers over
  // pp 4 with the first 9 and the last 5: middle stages (32 - 14) / 2 = 9; 9 % 2 != 0.
  {
    std::ifstream in(kDir + "megatron-mixtral-8x7b.args");
    std::stringstream text;
    text << in.rdbuf();
    std::ofstream(Tmp("uneven.args")) << text.str() << " --decoder-first-pipeline-num-layers 9 --decoder-last-pipeline-num-layers 5\n";
    std::ofstream(Tmp("even.args")) << text.str() << " --decoder-first-pipeline-num-layers 10 --decoder-last-pipeline-num-layers 6\n";
    std::ofstream(Tmp("first.args")) << text.str() << " --decoder-first-pipeline-num-layers 11\n";  // 11, then (32 - 11) / 3 = 7
  }
  const std::string uneven = "check --from-megatron " + Tmp("uneven.args") + " --model testdata/hf/mixtral-8x7b.json --world-size 32 --gpu-memory-gib 80";
  REQUIRE(Plan(uneven).code == 0);  // no virtual stages: Megatron takes 9, 9, 9, 5
  const Result chunks = Plan(uneven + " --vpp 2");
  CHECK(chunks.code == 2);
  CHECK(Has(chunks.err, "(stages of 9,9,9,5 layers): a stage of 9 layers does not divide into 2 virtual stages, which Megatron-LM refuses"));
  // The file's split spelled the other way ("first 9, then 9 per stage" is not it; 9,9,9,5 is) is the
  // same split, not a contradiction (QA round 3: "15+11" against 15,11,11,11 was refused).
  CHECK(Plan(uneven + " --pp-layer-split 9,9,9,5").code == 0);
  CHECK(Plan("--from-megatron " + Tmp("first.args") + " --model testdata/hf/mixtral-8x7b.json --world-size 32 --pp-layer-split 11+7").code == 0);
  const Result other = Plan(uneven + " --pp-layer-split 8+8");
  CHECK(other.code == 2);
  CHECK(Has(other.err, "--pp-layer-split 8+8 on the command line contradicts"));
  // 10, 8, 8, 6 divide into 2 chunks each: taken.
  CHECK(Plan("--from-megatron " + Tmp("even.args") + " --model testdata/hf/mixtral-8x7b.json --world-size 32 --vpp 2").code == 0);
  // No world size.
  const Result world = Plan("--from-megatron " + mixtral);
  CHECK(world.code == 2);
  CHECK(Has(world.err, "--world-size is required with --from-megatron"));
  // A missing file, a file that is not Megatron's arguments.
  const Result missing = Plan("--from-megatron nope.args --world-size 8");
  CHECK(missing.code == 1);
  CHECK(Has(missing.err, "dockyard-plan: error: --from-megatron: nope.args: cannot open the file"));
  const Result json = Plan("--from-megatron testdata/hf/mixtral-8x7b.json --world-size 8");
  CHECK(json.code == 1);
  CHECK(Has(json.err, "--from-megatron: testdata/hf/mixtral-8x7b.json:1: '{' is not an argument"));
  // --unpin of a setting the file does not set; on a command that is not search it is unknown.
  const Result unpin = Plan("search --from-megatron " + mixtral + " --world-size 32 --unpin seq-len");
  CHECK(unpin.code == 2);
  CHECK(Has(unpin.err, "--unpin seq-len: not a setting the search varies (it varies tp, pp, cp, ep, etp, dp-replicate, dp-shard, vpp, "
                       "micro-batch-size, recompute, dp-sharding, dispatcher, overlap-moe-expert-parallel-comm)"));
  CHECK(Plan("search --model testdata/hf/mixtral-8x7b.json --world-size 32 --unpin tp").code == 2);  // nothing to unpin
  // A directory, a device: refused before reading.
  CHECK(Has(Plan("--from-megatron testdata/frameworks --world-size 8").err, "testdata/frameworks: is a directory, not a file of arguments"));
  CHECK(Has(Plan("--from-megatron /dev/zero --world-size 8").err, "/dev/zero: not a regular file"));
  // Two documents on stdout.
  CHECK(Plan("--from-megatron " + mixtral + " --world-size 32 --emit megatron --json -").code == 2);
  // --emit-out over the file read, --emit-row past the ranking, a torchtitan plan: refused, nothing written.
  const Result over = Plan("--from-megatron " + mixtral + " --world-size 32 --emit megatron --emit-out " + kDir + "megatron-mixtral-8x7b.args");
  CHECK(over.code == 1);
  CHECK(Has(over.err, "--emit-out 'testdata/frameworks/megatron-mixtral-8x7b.args' is the input 'testdata/frameworks/megatron-mixtral-8x7b.args': "
                      "refusing to overwrite it"));
  const Result past = Plan("search --from-megatron " + mixtral + " --world-size 32 --unpin tp,pp --top 3 --emit megatron --emit-row 4 --emit-out " +
                           Tmp("past.args"));
  CHECK(past.code == 1);
  CHECK(Has(past.err, "--emit-row 4: the ranking shows rows 1 to 3 (--top 3)"));
  CHECK_FALSE(Exists(Tmp("past.args")));
  const Result torchtitan = Plan("--model testdata/hf/mixtral-8x7b.json --world-size 8 --ep 8 --emit megatron --emit-out " + Tmp("tt.args"));
  CHECK(torchtitan.code == 1);
  CHECK(Has(torchtitan.err, "--emit megatron: the plan is under --convention torchtitan"));
  CHECK_FALSE(Exists(Tmp("tt.args")));
  // --emit-out without --emit.
  CHECK(Plan("--model testdata/hf/mixtral-8x7b.json --world-size 8 --emit-out " + Tmp("x.args")).code == 2);
}

TEST_CASE("--emit after --from-megatron carries the file's other arguments over; a search names what it did not price") {
  // DeepSeek-V3's Megatron-FSDP file: the written file keeps its learning rate, YaRN and router
  // keys (dockyard does not read them) and writes MLA's --qk-layernorm; read back with the same
  // model it is the same step.
  const std::string ds = "--from-megatron " + kDir + "megatron-deepseek-v3-fsdp.args --world-size 256 --model testdata/hf/deepseek-v3.json --cluster h100-sxm";
  const Result a = Plan("simulate " + ds + " --json " + Tmp("ds_a.json") + " --emit megatron --emit-out " + Tmp("ds_a.args"));
  REQUIRE_MESSAGE(a.code == 0, a.err);
  std::ifstream in(Tmp("ds_a.args"));
  std::stringstream text;
  text << in.rdbuf();
  for (const char* kept : {"    --qk-layernorm \\\n", "    --lr 3.9e-6 \\\n", "    --rotary-scaling-factor 40 \\\n", "    --mscale 1.0 \\\n",
                           "    --moe-router-force-load-balancing \\\n", "    --tokenizer-model deepseek-ai/DeepSeek-V3 \\\n"}) {
    CHECK_MESSAGE(Has(text.str(), kept), kept);
  }
  CHECK(Has(text.str(), "arguments are testdata/frameworks/megatron-deepseek-v3-fsdp.args's that dockyard does not read, carried over unchanged"));
  const Result b = Plan("simulate --from-megatron " + Tmp("ds_a.args") +
                        " --world-size 256 --model testdata/hf/deepseek-v3.json --cluster h100-sxm --json " + Tmp("ds_b.json"));
  REQUIRE_MESSAGE(b.code == 0, b.err);
  CHECK(ReadJson(Tmp("ds_a.json"))["predicted"] == ReadJson(Tmp("ds_b.json"))["predicted"]);
  CHECK(ReadJson(Tmp("ds_a.json"))["memory"] == ReadJson(Tmp("ds_b.json"))["memory"]);
  // The search does not take --mtp-layers: its row keeps the file's --mtp-num-layers, said unpriced.
  const Result s = Plan("search " + ds + " --unpin pp,micro-batch-size,recompute --top 2 --emit megatron --emit-row 1 --emit-out " + Tmp("ds_row.args"));
  REQUIRE_MESSAGE(s.code == 0, s.err);
  const std::string row = ReadText(Tmp("ds_row.args"));
  CHECK(Has(row, "# Not taken by this command, so not priced here: --mtp-num-layers"));
  CHECK(Has(row, "    --mtp-num-layers 1 \\\n"));
  // On 512 GPUs at 79 GiB the best row fits without MTP (76.67 GiB) and not with it: said on stderr
  // and in the file's header.
  const Result over = Plan("search --from-megatron " + kDir + "megatron-deepseek-v3-fsdp.args --world-size 512 --model testdata/hf/deepseek-v3.json "
                           "--gpu-memory-gib 79 --cluster h100-sxm --unpin tp,pp,ep,dp-sharding,micro-batch-size,vpp --emit megatron "
                           "--emit-row 1 --emit-out " + Tmp("ds_over.args"));
  REQUIRE_MESSAGE(over.code == 0, over.err);
  CHECK(Has(over.err, "dockyard-plan search: warning: --emit-row 1: with the file's 1 MTP layer(s) this layout peaks at 88.41 GiB, over the "
                      "77.00 GiB limit (79.00 GiB budget less the 2.00 GiB reserve)"));
  std::ifstream over_in(Tmp("ds_over.args"));
  std::stringstream over_text;
  over_text << over_in.rdbuf();
  CHECK(Has(over_text.str(), "# WARNING: with the file's 1 MTP layer(s) this layout peaks at 88.41 GiB"));
}

TEST_CASE("--emit refuses a model Megatron-LM cannot build: DBRX's LayerNorm has no bias") {
  const Result r = Plan("--model testdata/hf/dbrx-instruct.json --world-size 16 --ep 16 --convention megatron --emit megatron --emit-out " +
                        Tmp("dbrx.args"));
  CHECK(r.code == 1);
  CHECK(Has(r.err, "--emit megatron: LayerNorm without a bias (dbrx; Megatron's LayerNorm has one) has no Megatron-LM argument"));
  CHECK_FALSE(Exists(Tmp("dbrx.args")));
  // gpt-oss: its sinks are read from --softmax-type learnable, not yet written: said so, not "no argument".
  const Result oss = Plan("simulate --model testdata/hf/gpt-oss-120b.json --world-size 64 --ep 64 --convention megatron --cluster gb200-nvl72 "
                          "--emit megatron --emit-out " + Tmp("oss.args"));
  CHECK(oss.code == 1);
  CHECK(Has(oss.err, "--emit megatron: attention sinks (gpt_oss): not written yet"));
}

TEST_CASE("--precision mxfp8 on the command line is the same setting as a file's --fp8-recipe mxfp8; torchtitan's two converters are one") {
  // Megatron-LM's Qwen3-30B-A3B conf (testdata/frameworks) with MXFP8 added.
  const std::string args = Tmp("mx.args");
  std::ifstream in(kDir + "megatron-qwen3-30b-a3b.args");
  std::stringstream text;
  text << in.rdbuf() << "\n--fp8-format e4m3 --fp8-recipe mxfp8\n";
  WriteText(args, text.str());
  const std::string layout = " --model testdata/hf/qwen3-30b-a3b.json --world-size 64 --ep 8 --cluster b200";
  const Result same = Plan("simulate --from-megatron " + args + layout + " --precision mxfp8");
  CHECK_MESSAGE(same.code == 0, same.err);
  CHECK(Has(same.out, "GEMMs fp8 mxfp8,"));
  // Another precision is still a contradiction.
  const Result other = Plan("simulate --from-megatron " + args + layout + " --precision fp8 --fp8-recipe blockwise");
  CHECK(other.code == 2);
  CHECK(Has(other.err, "contradicts --fp8-recipe"));
  const std::string toml = Tmp("mx.toml");
  WriteText(toml, "[model]\nconverters = [\"quantize.linear.mx\", \"quantize.grouped_mm.mx\"]\n");
  const Result tt = Plan("simulate --from-torchtitan " + toml + " --model testdata/hf/qwen3-30b-a3b.json --world-size 16 --ep 8 --cluster b200");
  CHECK_MESSAGE(tt.code == 0, tt.err);
  CHECK(Has(tt.out, "GEMMs fp8 mxfp8,"));
}

TEST_CASE("FP8 attention: no Megatron-LM argument (--emit megatron refuses it), Bridge's mixed precision carries it both ways") {
  const std::string layout =
      " --model testdata/hf/qwen3-30b-a3b.json --cluster gb200-nvl72 --world-size 16 --ep 16 --convention megatron --precision mxfp8";
  const Result megatron = Plan("simulate" + layout + " --fp8-dot-product-attention --emit megatron --emit-out " + Tmp("dpa.args"));
  CHECK(megatron.code == 1);
  CHECK(Has(megatron.err, "--emit megatron: --fp8-dot-product-attention (TransformerEngine's FP8 attention"));
  CHECK_FALSE(Exists(Tmp("dpa.args")));
  // Bridge pads no vocabulary (should_pad_vocab false): the same as --make-vocab-size-divisible-by 1.
  const Result bridge = Plan("simulate" + layout + " --make-vocab-size-divisible-by 1 --fp8-dot-product-attention --emit megatron-bridge --emit-out " +
                             Tmp("dpa.yaml") + " --json " + Tmp("dpa_flags.json"));
  REQUIRE_MESSAGE(bridge.code == 0, bridge.err);
  std::ifstream in(Tmp("dpa.yaml"));
  std::stringstream yaml;
  yaml << in.rdbuf();
  CHECK(Has(yaml.str(), "  fp8_dot_product_attention: true\n"));
  const Result back = Plan("simulate --from-megatron-bridge " + Tmp("dpa.yaml") +
                           " --model testdata/hf/qwen3-30b-a3b.json --cluster gb200-nvl72 --world-size 16 --json " + Tmp("dpa_back.json"));
  REQUIRE_MESSAGE(back.code == 0, back.err);
  CHECK(Has(back.out, "attention fp8 (core x1.20)"));
  CheckSamePlan(ReadJson(Tmp("dpa_back.json")), ReadJson(Tmp("dpa_flags.json")));
}
