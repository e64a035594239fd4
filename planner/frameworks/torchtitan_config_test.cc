// torchtitan job configs (torchtitan_config.h): the three forms, torchtitan's defaults, its stage
// split and batch arithmetic, the key table, and the written overrides read back.
#include "planner/frameworks/torchtitan_config.h"

#include <algorithm>
#include <fstream>
#include <regex>
#include <sstream>

#include <algorithm>

#include <doctest/doctest.h>
#include <fmt/format.h>

#include "planner/base/error.h"
#include "planner/frameworks/framework_test_util.h"
#include "planner/model/model_file.h"
#include "planner/model/training.h"

namespace dockyard {
namespace {

using testing::FlagFrom;
using testing::FlagValue;
using testing::Qwen;

std::string ErrorOf(const std::string& text, const std::string& file = "t.args") {
  try {
    ImportTorchtitanConfig(text, file, Qwen());
  } catch (const Error& e) {
    return e.what();
  }
  return "<no error>";
}

}  // namespace

TEST_CASE("the key tables hold each era's keys") {
  const auto& current = TorchtitanFieldTable("current");
  const auto& toml = TorchtitanFieldTable("toml");
  CHECK(current.at("parallelism.expert_parallel_degree") == "field");
  CHECK(current.at("training.num_tokens_per_microbatch_per_dp_rank") == "field");
  CHECK(current.count("parallelism.expert_tensor_parallel_degree") == 0);  // removed in c4b409af2
  CHECK(toml.at("parallelism.expert_tensor_parallel_degree") == "field");
  CHECK(toml.at("training.local_batch_size") == "field");
  CHECK(toml.at("quantize.linear.float8") == "section");
  CHECK_THROWS_AS(TorchtitanFieldTable("1999"), std::out_of_range);
}

TEST_CASE("every key the writer emits is one of torchtitan's (a misspelt key fails here)") {
  std::ifstream in("planner/frameworks/torchtitan_emit.cc");
  REQUIRE(in.good());
  std::stringstream text;
  text << in.rdbuf();
  const std::string source = text.str();  // one string for the iterators below
  const std::regex add(R"re(l\.Add\("([a-z_.]+)")re");
  int keys = 0;
  for (std::sregex_iterator it(source.begin(), source.end(), add), end; it != end; ++it) {
    const std::string key = (*it)[1];
    CHECK_MESSAGE(TorchtitanFieldTable("current").count(key) == 1, key);
    ++keys;
  }
  CHECK(keys >= 18);
}

TEST_CASE("overrides: tyro's spellings, torchtitan's defaults where a key is absent") {
  // Hyphens for underscores, --k=v, --section.no_flag; absent: 16384 tokens of 2048 -> micro-batch 8.
  const FrameworkConfig c = ImportTorchtitanConfig(
      "--parallelism.tensor-parallel-degree=2 --parallelism.expert_parallel_degree 4\n--training.no_disable_cuda_graphs\n", "o.args", Qwen());
  CHECK(c.form == "command-line overrides");
  CHECK(FlagValue(c, "--tp") == "2");
  CHECK(FlagValue(c, "--ep") == "4");
  CHECK(FlagValue(c, "--seq-len") == "2048");
  CHECK(FlagValue(c, "--micro-batch-size") == "8");
  CHECK(FlagValue(c, "--recompute") == "selective");  // Trainer.Config's SelectiveAC
  CHECK(FlagValue(c, "--selective-ac-option") == "op");
  CHECK(FlagValue(c, "--convention") == "torchtitan");
}

TEST_CASE("the batch: token slots per micro-batch and per step") {
  // T = 12288 tokens of S = 4096 -> micro-batch 3; a step of 3 x 4096 x 8 ranks x 2 = 196608 tokens.
  const FrameworkConfig c = ImportTorchtitanConfig(
      "--training.num_tokens_per_microbatch_per_dp_rank 12288 --training.max_context_length 4096 "
      "--training.num_tokens_per_train_step 196608\n",
      "b.args", Qwen());
  CHECK(FlagValue(c, "--micro-batch-size") == "3");
  CHECK(FlagValue(c, "--global-batch-tokens") == "196608");
  // T not a multiple of S (and above it): refused; T below S: sequences of T.
  CHECK(ErrorOf("--training.num_tokens_per_microbatch_per_dp_rank 6000 --training.max_context_length 4096\n") ==
        "t.args:1: training.num_tokens_per_microbatch_per_dp_rank 6000: not a multiple of training.max_context_length 4096: dockyard "
        "plans micro-batches of whole sequences");
  const FrameworkConfig short_t =
      ImportTorchtitanConfig("--training.num_tokens_per_microbatch_per_dp_rank 1024 --training.max_context_length 4096\n", "s.args", Qwen());
  CHECK(FlagValue(short_t, "--seq-len") == "1024");
  // Trainer.__init__: T divides by tp (sequence parallel) x 2 cp = 2 x 4 = 8.
  CHECK(ErrorOf("--parallelism.tensor_parallel_degree 2 --parallelism.context_parallel_degree 2 "
                "--training.num_tokens_per_microbatch_per_dp_rank 4100 --training.max_context_length 4100\n") ==
        "t.args:1: training.num_tokens_per_microbatch_per_dp_rank 4100: torchtitan requires a multiple of 8 (tp with sequence "
        "parallelism x 2 cp)");
  // No step size: a search pins T x dp at the file's degrees (world 64 / pp 1 = dp 64).
  const FrameworkConfig pinned = ImportTorchtitanConfig("--parallelism.expert_parallel_degree 8\n", "p.args", Qwen(), int64_t{64});
  bool found = false;
  for (const auto& f : pinned.search_defaults) found = found || (f.flag == "--global-batch-tokens" && f.value == std::to_string(16384 * 64));
  CHECK(found);
}

TEST_CASE("the TOML era: sequences per rank, pipeline micro-batches, digit separators, lines in errors") {
  // local_batch_size 8 with pipeline_parallel_microbatch_size 2 at pp 2: micro-batch 2, 4 per schedule.
  const std::string toml =
      "[training]\nlocal_batch_size = 8\nseq_len = 4_096\nglobal_batch_size = 1_024\n"
      "[parallelism]\npipeline_parallel_degree = 2\npipeline_parallel_microbatch_size = 2\nexpert_tensor_parallel_degree = 1\n"
      "[activation_checkpoint]\nmode = \"selective\"\nselective_ac_option = \"2\"\n";
  const FrameworkConfig c = ImportTorchtitanConfig(toml, "j.toml", Qwen());
  CHECK(c.form == "TOML job file");
  CHECK(FlagValue(c, "--convention") == "torchtitan-2026-03");
  CHECK(FlagValue(c, "--seq-len") == "4096");
  CHECK(FlagValue(c, "--micro-batch-size") == "2");
  CHECK(FlagValue(c, "--num-microbatches") == "4");
  CHECK(FlagValue(c, "--global-batch-size") == "1024");
  CHECK(FlagValue(c, "--selective-ac-option") == "2");
  CHECK(FlagValue(c, "--pp-layer-split") == "24,24");  // 48 + 1 + 1 over 2 stages of 25, less 1 at each end
  CHECK(ErrorOf("[training]\nlocal_batch_size = 7\n[parallelism]\npipeline_parallel_degree = 2\npipeline_parallel_microbatch_size = 2\n", "k.toml") ==
        "k.toml:2: training.local_batch_size 7: not divisible by parallelism.pipeline_parallel_microbatch_size 2 (torchtitan asserts it)");
  CHECK(ErrorOf("[training]\nseq_len = \n", "e.toml").rfind("e.toml:2:", 0) == 0);
}

TEST_CASE("the TOML era's MX converters are the mxfp8 recipe; Float8 and MX together are refused") {
  const FrameworkConfig c = ImportTorchtitanConfig("[model]\nconverters = [\"quantize.linear.mx\", \"quantize.grouped_mm.mx\"]\n", "mx.toml", Qwen());
  CHECK(FlagValue(c, "--precision") == "fp8");
  CHECK(FlagValue(c, "--fp8-recipe") == "mxfp8");
  // One --precision however many converters name it (a command line takes a flag once).
  CHECK(std::count_if(c.flags.begin(), c.flags.end(), [](const ConfigFlag& f) { return f.flag == "--precision"; }) == 1);
  const FrameworkConfig f8 = ImportTorchtitanConfig("[model]\nconverters = [\"quantize.linear.float8\", \"quantize.grouped_mm.float8\"]\n", "f8.toml", Qwen());
  CHECK(std::count_if(f8.flags.begin(), f8.flags.end(), [](const ConfigFlag& f) { return f.flag == "--precision"; }) == 1);
  CHECK(ErrorOf("[model]\nconverters = [\"float8\", \"mx\"]\n", "both.toml").find("Float8 and MX converters together") != std::string::npos);
  CHECK(ErrorOf("[model]\nconverters = [\"mxfp4\"]\n", "x.toml").find("unknown MX converter \"mxfp4\"") != std::string::npos);
}

TEST_CASE("a dump from between the two releases read is refused with the reason") {
  CHECK(ErrorOf("{\"model_spec\": {\"name\": \"qwen3\"}, \"training\": {\"local_batch_size\": 8}}", "m.json").rfind(
            "m.json: a torchtitan dump with model_spec and training.local_batch_size", 0) == 0);
}

TEST_CASE("a written config reads back to the same plan") {
  // Qwen3-30B-A3B, pp 4 x vpp 3 (48 layers, 12 a rank), ep 8, op-SAC, bf16 moments: torchtitan's
  // generator gives 12 per rank with no less layers at 12 stages (4 each), layers_per_stage 4.
  ParallelDimsOptions d;
  d.world_size = 64;
  d.pp = 4;
  d.ep = 8;
  TrainingConfig t;
  t.run.vpp = 3;
  t.num_microbatches = 12;
  t.recompute = Recompute::kSelective;
  t.selective_ac_option = "op";
  t.optimizer_states_dtype = "bfloat16";
  t.micro_batch_size = 2;
  const Plan plan = BuildPlan(Qwen(), d, t);
  const std::string written = EmitTorchtitanConfig(plan, 0, {"test"});
  CHECK(written.find("--parallelism.pipeline_parallel_layers_per_stage 4\n") != std::string::npos);
  CHECK(written.find("--optimizer.implementation fused_opt_states_bf16\n") != std::string::npos);
  const FrameworkConfig back = ImportTorchtitanConfig(written, "w.args", Qwen());
  CHECK(FlagValue(back, "--pp") == "4");
  CHECK(FlagValue(back, "--vpp") == "3");
  // Per virtual stage (v x pp + p), as torchtitan places them: 12 stages of 4.
  CHECK(FlagValue(back, "--pp-layer-split") == "4,4,4,4,4,4,4,4,4,4,4,4");
  CHECK(FlagValue(back, "--num-microbatches") == "12");
  CHECK(FlagValue(back, "--micro-batch-size") == "2");
  CHECK(FlagValue(back, "--optimizer-states-dtype") == "bfloat16");
  CHECK(FlagValue(back, "--recompute") == "selective");
  // 2 x 4096 tokens x dp 16 x 12 micro-batches per step.
  CHECK(FlagValue(back, "--global-batch-tokens") == std::to_string(2 * 4096 * 16 * 12));
  // What torchtitan cannot run: a per-layer selective_ac_option, ZeRO-1.
  t.selective_ac_option = "2";
  d.convention = Convention::kTorchtitan2026_03;
  CHECK_THROWS_WITH_AS(EmitTorchtitanConfig(BuildPlan(Qwen(), d, t), 0, {}),
                       doctest::Contains("selective_ac_option 2 (every N-th block; removed from torchtitan in 114151ad4"), Error);
}

}  // namespace dockyard

namespace dockyard {

TEST_CASE("a split torchtitan's generator does not give is written and read as module lists") {
  // Qwen3-30B-A3B's 48 layers at pp 2 x vpp 20: 40 stages, and no layers_per_stage k gives
  // ceil((48 + first + last) / k) = 40 (k 1 gives >= 48, k 2 at most 48). dockyard's even split:
  // 24 a rank in 20 chunks of 2,2,2,2,1,...,1, so virtual stages 0-7 hold 2 layers, 8-39 one.
  ParallelDimsOptions d;
  d.world_size = 16;
  d.pp = 2;
  d.ep = 8;
  TrainingConfig t;
  t.run.vpp = 20;
  t.num_microbatches = 40;
  const Plan plan = BuildPlan(Qwen(), d, t);
  const std::string written = EmitTorchtitanConfig(plan, 0, {});
  // tyro's spelling: one word per stage, its modules comma-separated (stage 8 follows 8 x 2 layers).
  const std::string lists = "--parallelism.module_fqns_per_model_part tok_embeddings,layers.0,layers.1 layers.2,layers.3 ";
  CHECK(written.find(lists) != std::string::npos);
  CHECK(written.find(" layers.14,layers.15 layers.16 layers.17 ") != std::string::npos);
  CHECK(written.find(" layers.46 layers.47,norm,lm_head\n") != std::string::npos);
  CHECK(written.find("--parallelism.pipeline_parallel_schedule Interleaved1F1B\n") != std::string::npos);
  CHECK(written.find("stage_less_layers") == std::string::npos);

  // Read back: the same 40 virtual stages, as the lists say; the schedule's name in any case.
  std::string back_text = written;
  back_text.replace(back_text.find("Interleaved1F1B"), 15, "interleaved1f1b");
  const FrameworkConfig back = ImportTorchtitanConfig(back_text, "m.args", Qwen());
  CHECK(FlagValue(back, "--vpp") == "20");
  CHECK(FlagValue(back, "--pp-layer-split") == "2,2,2,2,2,2,2,2,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1");
  CHECK(FlagFrom(back, "--pp-layer-split") == "parallelism.module_fqns_per_model_part");
  // A split the generator gives is written with its settings, and the lists reset (None), so a
  // config function's lists cannot stand in for it: pp 2 x vpp 2, 12 layers a stage.
  t.run.vpp = 2;
  t.num_microbatches = 4;
  const std::string generated = EmitTorchtitanConfig(BuildPlan(Qwen(), d, t), 0, {});
  CHECK(generated.find("--parallelism.module_fqns_per_model_part None\n") != std::string::npos);
  CHECK(FlagValue(ImportTorchtitanConfig(generated, "g.args", Qwen()), "--pp-layer-split") == "12,12,12,12");

  // A split dockyard does not plan, or torchtitan does not run, is refused with the rule.
  auto refused = [](const std::string& json) {
    return ErrorOf("--parallelism.pipeline_parallel_degree 2\n--parallelism.num_pp_microbatches 2\n--parallelism.module_fqns_per_model_part '" + json + "'\n",
                   "m.args");
  };
  std::string all;  // layers.1 ... layers.47
  for (int i = 1; i < 48; ++i) all += fmt::format(", \"layers.{}\"", i);
  CHECK_MESSAGE(refused("[[\"tok_embeddings\", \"layers.0\"], [" + all.substr(2) + ", \"norm\", \"lm_head\"]]").find("<no error>") == 0, "the 1, 47 split is read");
  CHECK(refused("[[\"tok_embeddings\", \"layers.1\"], [\"layers.0\"" + all.substr(12) + ", \"norm\", \"lm_head\"]]")
            .find("stage 0 lists layers.1 where layers.0 comes next") != std::string::npos);
  CHECK(refused("[[\"layers.0\"], [\"tok_embeddings\"" + all + ", \"norm\", \"lm_head\"]]").find("the first stage lacks tok_embeddings") != std::string::npos);
  CHECK(refused("[[\"tok_embeddings\", \"layers.0\"], [" + all.substr(2) + ", \"norm\"]]").find("the last stage lacks lm_head") != std::string::npos);
  CHECK(refused("[[\"tok_embeddings\", \"layers.0\"], [" + all.substr(2) + "], [\"norm\", \"lm_head\"]]")
            .find("3 stages, which torchtitan requires divisible by the pipeline degree 2") != std::string::npos);
  CHECK(refused("[[\"tok_embeddings\", \"layers.0\"], [\"layers.1\", \"norm\", \"lm_head\"]]").find("lists layers 0 to 1 of the model's 48 decoder layers") !=
        std::string::npos);
  CHECK(refused("[\"tok_embeddings\"]").find("stage 0 is \"tok_embeddings\", not a list of module names") != std::string::npos);
  CHECK(refused("[[\"tok_embeddings\", \"foo\"], [\"layers.0\"" + all + ", \"norm\", \"lm_head\"]]").find("stage 0 lists foo: not one of torchtitan's decoder modules") !=
        std::string::npos);
  // A JSON object's ':' does not end the override's value (only activation-checkpoint:MODE does).
  CHECK(refused("{\"a\": 1}").find("parallelism.module_fqns_per_model_part {\"a\": 1}: needs a list of stages") != std::string::npos);
  CHECK(refused("[[\"tok_embeddings\", \"layers.0\"], [], [" + all.substr(2) + "], [\"norm\", \"lm_head\"]]")
            .find("stage 1 is empty, and torchtitan refuses a model chunk without parameters") != std::string::npos);
  // A weight above the smallest stage is named by its key: Interleaved1F1B without layers_per_stage
  // runs 2 stages a rank, 4 stages of (48 + 20 + 1) / 4 = 17 layers, fewer than the first stage's 20.
  CHECK(ErrorOf("--parallelism.pipeline_parallel_degree 2\n--parallelism.pipeline_parallel_schedule Interleaved1F1B\n"
                "--parallelism.num_pp_microbatches 4\n--parallelism.pipeline_parallel_first_stage_less_layers 20\n")
            .find("parallelism.pipeline_parallel_first_stage_less_layers 20: the first / last stage less layers (20 / 1) exceed the 17 layers "
                  "of the smallest stage") != std::string::npos);
}

}  // namespace dockyard
