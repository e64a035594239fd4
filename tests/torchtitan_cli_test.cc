// End-to-end (issue 36, torchtitan): configs from torchtitan's own repository and runs
// (testdata/frameworks/README.md) give the same plan as the equivalent dockyard flags; a search row
// written with --emit torchtitan and read back with --from-torchtitan simulates to the row's step
// time and peak; bad input gets one clear error and writes nothing.
#include <string>

#include <doctest/doctest.h>

#include "tests/cli_test_util.h"

namespace {

using namespace dockyard::testing;
using Result = CommandResult;

const std::string kDir = "testdata/frameworks/";
const std::string kQwen = " --model testdata/hf/qwen3-30b-a3b.json";
const std::string kDsv2Lite = " --model testdata/hf/deepseek-v2-lite.json";

}  // namespace

TEST_CASE("check --from-torchtitan on qwen3_30b_a3b's JSON dump = the same plan as dockyard flags") {
  // qwen3_30b_a3b (config_registry.py): num_tokens_per_microbatch_per_dp_rank 2 x 4096 with
  // max_context_length 4096 -> micro-batch 2 of 4096; FullAC; dp_shard -1, no EP; 64 GPUs.
  const Result from = Plan("check --from-torchtitan " + kDir + "torchtitan-qwen3-30b-a3b.json" + kQwen +
                           " --world-size 64 --gpu-memory-gib 80 --json " + Tmp("q_from.json"));
  REQUIRE_MESSAGE(from.code == 0, from.err);
  CHECK(Has(from.out, "torchtitan config testdata/frameworks/torchtitan-qwen3-30b-a3b.json (JSON dump): "));
  CHECK(Has(from.out, "    loss.num_chunks 8 (the chunked loss: priced as one logits tensor)\n"));
  const Result flags = Plan("check --convention torchtitan --seq-len 4096 --micro-batch-size 2 --recompute full --fsdp-reshard-after-forward default "
                            "--clip-grad 1" + kQwen + " --world-size 64 --gpu-memory-gib 80 --json " + Tmp("q_flags.json"));
  REQUIRE_MESSAGE(flags.code == 0, flags.err);
  CheckSamePlan(ReadJson(Tmp("q_from.json")), ReadJson(Tmp("q_flags.json")));
  const Json provenance = ReadJson(Tmp("q_from.json"))["generator"]["provenance"];
  CHECK(provenance["framework_config"]["framework"] == "torchtitan");
  CHECK(provenance["framework_config"]["form"] == "JSON dump");
}

TEST_CASE("the deepseek_v3_16b job, as a current JSON dump and as its TOML-era job file = the same plan as dockyard flags") {
  // deepseek_v3_16b: EP 8, selective (per-op) checkpointing, 4 x 4096 tokens per micro-batch
  // (JSON: num_tokens_per_microbatch_per_dp_rank 16384 / max_context_length 4096; TOML:
  // local_batch_size 4, seq_len 4096). The TOML era predates expert-TP's removal: torchtitan-2026-03.
  const std::string common = kDsv2Lite + " --world-size 64 --gpu-memory-gib 80 --json ";
  const Result json = Plan("check --from-torchtitan " + kDir + "torchtitan-deepseek-v3-16b.json" + common + Tmp("d_json.json"));
  REQUIRE_MESSAGE(json.code == 0, json.err);
  const Result json_flags = Plan("check --convention torchtitan --ep 8 --seq-len 4096 --micro-batch-size 4 --recompute selective "
                                 "--selective-ac-option op --clip-grad 1" + common + Tmp("d_json_flags.json"));
  REQUIRE_MESSAGE(json_flags.code == 0, json_flags.err);
  CheckSamePlan(ReadJson(Tmp("d_json.json")), ReadJson(Tmp("d_json_flags.json")));
  const Result toml = Plan("check --from-torchtitan " + kDir + "torchtitan-deepseek-v3-16b.toml" + common + Tmp("d_toml.json"));
  REQUIRE_MESSAGE(toml.code == 0, toml.err);
  CHECK(Has(toml.out, "(TOML job file)"));
  const Result toml_flags = Plan("check --convention torchtitan-2026-03 --ep 8 --etp 1 --seq-len 4096 --micro-batch-size 4 --recompute selective "
                                 "--selective-ac-option op" + common + Tmp("d_toml_flags.json"));
  REQUIRE_MESSAGE(toml_flags.code == 0, toml_flags.err);
  CheckSamePlan(ReadJson(Tmp("d_toml.json")), ReadJson(Tmp("d_toml_flags.json")));
}

TEST_CASE("overrides from torchtitan's MoE tests: pp 2 with torchtitan's stage split") {
  // Qwen3-30B-A3B's 48 layers over 2 stages, the embedding and the output each weighing one layer
  // (pipeline_parallel_first/last_stage_less_layers 1): 50 effective layers, 25 a stage -> 24 and
  // 24 decoder layers. Absent keys take torchtitan's defaults: 16384 tokens per micro-batch of
  // max_context_length 2048 -> micro-batch 8 of 2048; SelectiveAC.
  const Result from = Plan("--from-torchtitan " + kDir + "torchtitan-overrides-pp2-ep2.args" + kQwen + " --world-size 8 --json " + Tmp("o_from.json"));
  REQUIRE_MESSAGE(from.code == 0, from.err);
  CHECK(Has(from.out, "--pp-layer-split 24,24"));
  const Result flags = Plan("--convention torchtitan --pp 2 --ep 2 --num-microbatches 2 --pp-layer-split 24,24 --seq-len 2048 "
                            "--micro-batch-size 8 --recompute selective --selective-ac-option op" + kQwen + " --world-size 8 --json " + Tmp("o_flags.json"));
  REQUIRE_MESSAGE(flags.code == 0, flags.err);
  CheckSamePlan(ReadJson(Tmp("o_from.json")), ReadJson(Tmp("o_flags.json")));
  // Interleaved with 3 stages per rank (layers_per_stage 9: ceil(50 / 9) = 6 stages of 9,9,8,8,8,8
  // effective layers less 1 on the first and last: 8,9,8,8,8,7; rank 0 = 8+8+8, rank 1 = 9+8+7).
  WriteText(Tmp("i.args"), ReadText(kDir + "torchtitan-overrides-pp2-ep2.args") +
                               "--parallelism.pipeline_parallel_schedule Interleaved1F1B\n--parallelism.pipeline_parallel_layers_per_stage 9\n");
  const Result interleaved = Plan("--from-torchtitan " + Tmp("i.args") + kQwen + " --world-size 8");
  REQUIRE_MESSAGE(interleaved.code == 0, interleaved.err);
  // Written per virtual stage (stage s on rank s mod 2, torchtitan's loop style): rank 0 holds
  // stages 0, 2, 4 = layers 0-7, 17-24, 33-40 (QA: placed by rank totals, the chunks were off).
  CHECK(Has(interleaved.out, "--pp-layer-split 8,9,8,8,8,7 --vpp 3"));
  CHECK(Has(interleaved.out, "Stage 0    layers 0-7, 17-24, 33-40:"));
  CHECK(Has(interleaved.out, "Stage 1    layers 8-16, 25-32, 41-47:"));
}

TEST_CASE("search --emit torchtitan --emit-row, read back with --from-torchtitan: the row's step time and peak") {
  // Around qwen3_30b_a3b's dump on 64 H200, pp, ep and checkpointing searched; the file gives no
  // step size, so the search pins torchtitan's default at the file's degrees: 8192 tokens x dp 64.
  const std::string search = "search --from-torchtitan " + kDir + "torchtitan-qwen3-30b-a3b.json" + kQwen +
                             " --world-size 64 --cluster h200-sxm --gpu-memory-gib 140 --unpin ep,pp,recompute --top 5 --json " + Tmp("rows.json") +
                             " --emit torchtitan --emit-out ";
  for (int row : {1, 3}) {
    const std::string args = Tmp("row" + std::to_string(row) + ".tt");
    const Result s = Plan(search + args + " --emit-row " + std::to_string(row));
    REQUIRE_MESSAGE(s.code == 0, s.err);
    CHECK(Has(s.out, "Global batch 128 sequences x 4096 tokens = 524288 tokens per step"));
    CHECK(Has(s.out, "torchtitan overrides of row " + std::to_string(row) + " written to " + args));
    const Json top = ReadJson(Tmp("rows.json"))["top"][row - 1];
    const Result sim = Plan("simulate --from-torchtitan " + args + kQwen + " --world-size 64 --cluster h200-sxm --json " + Tmp("sim.json"));
    REQUIRE_MESSAGE(sim.code == 0, sim.err);
    const Json r = ReadJson(Tmp("sim.json"));
    CHECK(r["predicted"]["step_time_us"].get<double>() == doctest::Approx(top["step_time_us"].get<double>()).epsilon(1e-12));
    CHECK(r["memory"]["worst_peak_bytes"].get<int64_t>() == top["peak_bytes"].get<int64_t>());
    CHECK(Has(ReadText(args), "--training.num_tokens_per_train_step 524288\n"));
  }
}

TEST_CASE("a pipelined plan written with --emit torchtitan reads back to the same figures") {
  // DeepSeek-V2-Lite's 27 layers, pp 4 vpp 2 (even split 7,7,7,6): torchtitan's generator gives it
  // with first / last stage less layers 0 (8 stages: 4,4,4,3,3,3,3,3 -> ranks 7,7,7,6).
  const std::string layout = kDsv2Lite + " --world-size 64 --pp 4 --vpp 2 --ep 8 --num-microbatches 8 --recompute full --cluster h200-sxm";
  const Result a = Plan("simulate" + layout + " --json " + Tmp("a.json") + " --emit torchtitan --emit-out " + Tmp("p.tt"));
  REQUIRE_MESSAGE(a.code == 0, a.err);
  const std::string text = ReadText(Tmp("p.tt"));
  CHECK(Has(text, "--parallelism.pipeline_parallel_schedule Interleaved1F1B\n"));
  CHECK(Has(text, "--parallelism.pipeline_parallel_first_stage_less_layers 0\n--parallelism.pipeline_parallel_last_stage_less_layers 0\n"));
  CHECK(Has(text, "\nactivation-checkpoint:full\n"));
  const Result b = Plan("simulate --from-torchtitan " + Tmp("p.tt") + kDsv2Lite + " --world-size 64 --cluster h200-sxm --json " + Tmp("b.json"));
  REQUIRE_MESSAGE(b.code == 0, b.err);
  const Json ja = ReadJson(Tmp("a.json")), jb = ReadJson(Tmp("b.json"));
  CHECK(ja["predicted"] == jb["predicted"]);
  CHECK(ja["memory"] == jb["memory"]);
}

TEST_CASE("torchtitan bad input: one clear error, the exit code, nothing written") {
  const std::string qwen_dump = kDir + "torchtitan-qwen3-30b-a3b.json";
  // A misspelt key: the nearest of its section.
  WriteText(Tmp("typo.args"), "--parallelism.expert_paralel_degree 8\n");
  const Result typo = Plan("--from-torchtitan " + Tmp("typo.args") + kQwen + " --world-size 8");
  CHECK(typo.code == 1);
  CHECK(Has(typo.err, "typo.args:1: parallelism.expert_paralel_degree: not a key of torchtitan at b5bcd76c6; did you mean "
                      "'parallelism.expert_parallel_degree'?"));
  // A TOML key that the TOML-era JobConfig does not have, with its line.
  WriteText(Tmp("bad.toml"), "[parallelism]\nexpert_parallel_degree = 8\ntensor_paralel_degree = 2\n");
  const Result toml = Plan("--from-torchtitan " + Tmp("bad.toml") + kQwen + " --world-size 8");
  CHECK(toml.code == 1);
  CHECK(Has(toml.err, "bad.toml:3: parallelism.tensor_paralel_degree: not a key of torchtitan's TOML-era JobConfig at 238fa9953"));
  // A dump of another model than --model's.
  const Result other = Plan("--from-torchtitan " + qwen_dump + kDsv2Lite + " --world-size 8");
  CHECK(other.code == 1);
  CHECK(Has(other.err, "model_spec.model has layers 48, but --model has num_hidden_layers 27"));
  // No model: the dump's hf_assets_path holds no config.json here.
  const Result nomodel = Plan("--from-torchtitan " + qwen_dump + " --world-size 8");
  CHECK(nomodel.code == 1);
  CHECK(Has(nomodel.err, "the model: give --model (an HF config.json); the job's hf_assets_path './assets/hf/Qwen3-30B-A3B' holds no config.json"));
  // A schedule dockyard does not plan; torchtitan's own stage check.
  WriteText(Tmp("gpipe.args"), "--parallelism.pipeline_parallel_degree 2\n--parallelism.pipeline_parallel_schedule GPipe\n");
  CHECK(Has(Plan("--from-torchtitan " + Tmp("gpipe.args") + kQwen + " --world-size 8").err,
            "parallelism.pipeline_parallel_schedule GPipe: dockyard plans 1F1B and Interleaved1F1B"));
  // ceil((48 + 1 + 1) / 6) = 9 stages, not a multiple of pp 2.
  WriteText(Tmp("lps.args"), "--parallelism.pipeline_parallel_degree 2\n--parallelism.pipeline_parallel_layers_per_stage 6\n");
  CHECK(Has(Plan("--from-torchtitan " + Tmp("lps.args") + kQwen + " --world-size 8").err,
            "lps.args:2: parallelism.pipeline_parallel_layers_per_stage 6: gives 9 virtual stages (48 layers + 1 + 1), which torchtitan "
            "requires divisible by the pipeline degree 2"));
  // Two job configs; a contradiction with the command line (exit 2, naming both).
  CHECK(Plan("--from-torchtitan " + qwen_dump + " --from-megatron " + kDir + "megatron-mixtral-8x7b.args" + kQwen + " --world-size 8").code == 2);
  const Result contradiction = Plan("--from-torchtitan " + qwen_dump + kQwen + " --world-size 64 --recompute none");
  CHECK(contradiction.code == 2);
  CHECK(Has(contradiction.err, "--recompute none on the command line contradicts activation_checkpoint in " + qwen_dump + ", which sets --recompute full"));
  // An empty file; a quoted number; null for a section; a value past the model's layers; a value
  // outside torchtitan's choices (QA round 1).
  WriteText(Tmp("empty.json"), "");
  CHECK(Has(Plan("--from-torchtitan " + Tmp("empty.json") + kQwen + " --world-size 8").err, "no torchtitan settings in the TOML job file"));
  WriteText(Tmp("quoted.json"), "{\"parallelism\": {\"expert_parallel_degree\": \"8\"}}");
  CHECK(Has(Plan("--from-torchtitan " + Tmp("quoted.json") + kQwen + " --world-size 8").err,
            "parallelism.expert_parallel_degree 8: a string: torchtitan's field is a whole number"));
  WriteText(Tmp("null.json"), "{\"training\": null}");
  CHECK(Has(Plan("--from-torchtitan " + Tmp("null.json") + kQwen + " --world-size 8").err, "training: must be a table of settings, got null"));
  WriteText(Tmp("less.args"), "--parallelism.pipeline_parallel_degree 2\n--parallelism.pipeline_parallel_first_stage_less_layers 9223372036854775807\n");
  CHECK(Has(Plan("--from-torchtitan " + Tmp("less.args") + kQwen + " --world-size 8").err,
            "less.args:2: parallelism.pipeline_parallel_first_stage_less_layers 9223372036854775807: must be <= 48"));
  // toml++ 3.3's own assertion on a table header broken over lines is an error, not an abort.
  WriteText(Tmp("header.toml"), "[\n  {m\"\n  \"mododel_els");
  const Result header = Plan("--from-torchtitan " + Tmp("header.toml") + kQwen + " --world-size 8");
  CHECK(header.code == 1);
  CHECK(Has(header.err, "header.toml: not a TOML file dockyard can read"));
  // A TOML-era row with ep < tp: current torchtitan refuses it, so --emit does too.
  const Result ep_tp = Plan("--convention torchtitan-2026-03 --tp 2 --ep 1" + kQwen + " --world-size 8 --emit torchtitan --emit-out " + Tmp("eptp.tt"));
  CHECK(ep_tp.code == 1);
  CHECK(Has(ep_tp.err, "--emit torchtitan: ep 1 < tp 2 (torchtitan at b5bcd76c6 requires ep >= tp for an MoE model, PR #4794)"));
  CHECK_FALSE(Exists(Tmp("eptp.tt")));
  // A job config's plan is written in its own framework's form only (exit 2, before any work).
  const Result cross = Plan("--from-torchtitan " + qwen_dump + kQwen + " --world-size 64 --emit megatron-bridge --emit-out " + Tmp("x.yaml"));
  CHECK(cross.code == 2);
  CHECK(Has(cross.err, "--emit megatron-bridge with --from-torchtitan: the file's job runs under torchtitan's convention, which Megatron does "
                       "not launch; write it with --emit torchtitan, or plan the model with --model and --convention megatron (without "
                       "--from-torchtitan)"));
  CHECK_FALSE(Exists(Tmp("x.yaml")));
  // --emit torchtitan refuses a Megatron plan; nothing written.
  const Result megatron = Plan("--convention megatron" + kQwen + " --world-size 8 --ep 8 --emit torchtitan --emit-out " + Tmp("m.tt"));
  CHECK(megatron.code == 1);
  CHECK(Has(megatron.err, "--emit torchtitan: the plan is under --convention megatron"));
  CHECK_FALSE(Exists(Tmp("m.tt")));
}

TEST_CASE("a search row whose split torchtitan's generator does not give reads back through its module lists; a training rule names the file's key") {
  // Qwen3-30B-A3B at pp 2 x vpp 20 (40 stages; no layers_per_stage gives them): the row is written
  // with parallelism.module_fqns_per_model_part and reads back to its step time and placement.
  const std::string search = "search" + kQwen + " --world-size 64 --cluster h200-sxm --pp 2 --vpp 20 --global-batch-size 256 --top 1";
  const Result row = Plan(search + " --json " + Tmp("vpp20.json") + " --emit torchtitan --emit-row 1 --emit-out " + Tmp("vpp20.tt"));
  REQUIRE_MESSAGE(row.code == 0, row.err);
  CHECK(Has(ReadText(Tmp("vpp20.tt")), "--parallelism.module_fqns_per_model_part tok_embeddings,layers.0,layers.1 layers.2,layers.3 "));
  const Result back = Plan("simulate --from-torchtitan " + Tmp("vpp20.tt") + kQwen + " --world-size 64 --cluster h200-sxm --json " + Tmp("back.json"));
  REQUIRE_MESSAGE(back.code == 0, back.err);
  CHECK(Has(back.out, "--vpp 20"));
  const double ranked = ReadJson(Tmp("vpp20.json"))["top"][0]["step_time_us"].get<double>();
  CHECK(ReadJson(Tmp("back.json"))["predicted"]["step_time_us"].get<double>() == doctest::Approx(ranked).epsilon(1e-12));

  // The file's num_pp_microbatches, named by its key where a batch rule refuses it: 128 sequences
  // over dp 8 x micro-batch 8 are 2 micro-batches, not a multiple of 3.
  WriteText(Tmp("nm.args"), "--parallelism.pipeline_parallel_degree 2\n--parallelism.num_pp_microbatches 3\n--parallelism.expert_parallel_degree 8\n");
  const Result nm = Plan("simulate --from-torchtitan " + Tmp("nm.args") + kQwen + " --world-size 16 --global-batch-size 128");
  CHECK(nm.code == 1);
  CHECK(Has(nm.err, "is not a multiple of num_microbatches 3\n  (--num-microbatches 3 came from parallelism.num_pp_microbatches in "));
}
