// Tests for Megatron-LM argument files (megatron_args.h): the word rules, the import of three
// launch files taken from Megatron-LM's own examples (testdata/frameworks/README.md), the model
// against the published HF configs, and the emitter's keys against Megatron's argument list.
#include "planner/frameworks/megatron_args.h"

#include <fstream>
#include <map>
#include <regex>
#include <sstream>

#include <doctest/doctest.h>

#include "planner/base/error.h"
#include "planner/frameworks/framework_test_util.h"
#include "planner/model/model_file.h"
#include "planner/model/training.h"

namespace dockyard {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  REQUIRE_MESSAGE(in.good(), path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string Flag(const FrameworkConfig& c, const std::string& flag) {
  std::string value = "<absent>";
  for (const auto& f : c.flags) {
    if (f.flag == flag) value = f.value;
  }
  return value;
}

bool Contains(const std::vector<std::string>& v, const std::string& prefix) {
  for (const auto& s : v) {
    if (s.rfind(prefix, 0) == 0) return true;
  }
  return false;
}

// The message ImportMegatronArgs throws for `text` ("" when it reads it).
std::string ImportErrorOf(const std::string& text) {
  try {
    ImportMegatronArgs(text, "m.args");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

std::string ErrorOf(const std::string& text) {
  try {
    ReadMegatronArgs(text, "a.args");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

const std::string kDir = "testdata/frameworks/";

}  // namespace

TEST_CASE("The argument list is Megatron-LM's at the pinned commit") {
  // megatron-lm-args.txt was extracted at d98e8a6 (tools/extract_megatron_args.py); arities as
  // arguments.py / transformer_config.py declare them.
  CHECK(std::string(kMegatronLmCommit) == "d98e8a64ddf34856e74b24714e3bedb2f5a39553");
  const auto& t = MegatronArgTable();
  CHECK(t.at("--num-layers") == '1');                 // TransformerConfig.num_layers: int
  CHECK(t.at("--swiglu") == '0');                     // add_argument('--swiglu', action='store_true')
  CHECK(t.at("--recompute-modules") == '+');          // Optional[List[str]] -> nargs '+'
  CHECK(t.at("--no-check-for-nan-in-loss-and-grad") == '0');
  CHECK(t.at("--moe-layer-freq") == '1');             // type=moe_freq_type, one value
  CHECK(t.count("--expert-model-parallel-size") == 1);
  CHECK(t.count("--moe-router-top-k") == 0);
}

TEST_CASE("Words: a key quoted in part or whole is a key, as bash and argparse see it") {
  const auto args = ReadMegatronArgs("--expert-model-parallel-size 64\n--pipeline-model-parallel-layout=\"Et|(tt|)*30mL\"\n'--swiglu' \"--num-layers=4\"\n",
                                     "q.args");
  REQUIRE(args.size() == 4);
  CHECK(args[1].key == "--pipeline-model-parallel-layout");
  CHECK(args[1].values == std::vector<std::string>{"Et|(tt|)*30mL"});
  CHECK(args[2].key == "--swiglu");
  CHECK(args[3].values == std::vector<std::string>{"4"});
}

TEST_CASE("Words: continuations, comments, quotes, --key=value, the last of a key wins") {
  const auto args = ReadMegatronArgs(
      "# a comment\n--num-layers 4 \\\n  --hidden-size=64  # trailing\n--pipeline-model-parallel-layout 'Et|(t|)*2L'\n"
      "--recompute-modules core_attn moe_act\n--num-layers 8\n",
      "a.args");
  REQUIRE(args.size() == 4);
  CHECK(args[0].key == "--hidden-size");
  CHECK(args[0].values == std::vector<std::string>{"64"});
  CHECK(args[0].line == 3);  // continued from line 2
  CHECK(args[1].values == std::vector<std::string>{"Et|(t|)*2L"});
  CHECK(args[2].values == std::vector<std::string>{"core_attn", "moe_act"});
  CHECK(args[3].key == "--num-layers");  // given again: argparse keeps the last
  CHECK(args[3].values == std::vector<std::string>{"8"});
}

TEST_CASE("Words: shell variables, arrays, unknown keys and arities are refused, naming the line") {
  CHECK(ErrorOf("--num-layers 4\n--tensor-model-parallel-size ${TP}\n") ==
        "a.args:2: '${TP}': a shell variable or command substitution; dockyard reads the arguments as written: put its value in the file");
  CHECK(ErrorOf("MODEL_ARGS=(\n--num-layers 4\n)\n").find("a.args:1: 'MODEL_ARGS=(': a bash array or subshell") == std::string::npos);
  CHECK(ErrorOf("MODEL_ARGS=(\n--num-layers 4\n)\n").find("a.args:1: '(': a bash array or subshell") == 0);
  CHECK(ErrorOf("--moe-router-top-k 8\n") ==
        "a.args:1: --moe-router-top-k: not a Megatron-LM argument (its argument list at d98e8a64ddf3); did you mean '--moe-router-topk'?");
  CHECK(ErrorOf("--swiglu true\n") == "a.args:1: --swiglu is a switch and takes no value, got 'true'");
  CHECK(ErrorOf("--num-layers\n--swiglu\n") == "a.args:1: --num-layers needs a value");
  CHECK(ErrorOf("--num-layers 4 5\n") == "a.args:1: --num-layers takes one value, got '4' and then '5'");
  // A stray word on its own line is named there, not blamed on the key before it.
  CHECK(ErrorOf("--num-layers 4\n--qk-layernorm\npython pretrain_gpt.py\n").find("a.args:3: 'python' is not an argument") == 0);
  CHECK(ErrorOf(std::string("--num-layers 4\n\0\n", 17)) == "a.args:2: a NUL byte: not a text file of Megatron-LM arguments");
  // A long word is quoted by its start and length.
  CHECK(ErrorOf("--swiglu " + std::string(200, 'x') + "\n") ==
        "a.args:1: --swiglu is a switch and takes no value, got '" + std::string(60, 'x') + "... (200 characters)'");
  CHECK(ErrorOf("pretrain_gpt.py --num-layers 4\n").find("a.args:1: 'pretrain_gpt.py' is not an argument") == 0);
  CHECK(ErrorOf("--pipeline-model-parallel-layout 'Et|L\n") == "a.args:1: a single quote is not closed");
}

TEST_CASE("Mixtral 8x7B (Megatron-LM examples/mixtral): flags, Megatron's defaults, only the unfused permute said") {
  const FrameworkConfig c = ImportMegatronArgs(ReadFile(kDir + "megatron-mixtral-8x7b.args"), "mixtral.args");
  CHECK(Flag(c, "--convention") == "megatron");
  CHECK(Flag(c, "--tp") == "1");
  CHECK(Flag(c, "--pp") == "4");
  CHECK(Flag(c, "--ep") == "8");
  CHECK(Flag(c, "--etp") == "<absent>");  // ETP = TP: the megatron convention's default
  CHECK(Flag(c, "--dp-sharding") == "zero1");  // --use-distributed-optimizer
  CHECK(Flag(c, "--dispatcher") == "all_to_all");
  CHECK(Flag(c, "--micro-batch-size") == "1");
  CHECK(Flag(c, "--global-batch-size") == "256");
  CHECK(Flag(c, "--seq-len") == "4096");
  CHECK(Flag(c, "--overlap-grad-reduce") == "");
  CHECK(Flag(c, "--overlap-param-gather") == "");
  CHECK(Flag(c, "--clip-grad") == "1.0");
  CHECK(Flag(c, "--param-dtype") == "bfloat16");
  // The example sets --moe-grouped-gemm but not --moe-permute-fusion (off by default): Megatron-LM
  // permutes with PyTorch ops there, which dockyard prices as fused, and says so.
  REQUIRE(c.ignored.size() == 1);
  CHECK(c.ignored[0] ==
        "(no --moe-permute-fusion): Megatron-LM then permutes with unfused PyTorch ops (argsort, index_select, scatter_add); dockyard "
        "prices TransformerEngine's fused permute and unpermute");
  CHECK(Contains(c.read, "--moe-grouped-gemm"));
  CHECK(Contains(c.not_read, "--lr"));
  CHECK(Contains(c.not_read, "--moe-aux-loss-coeff"));

  // Its architecture agrees with the published config (testdata/hf/mixtral-8x7b.json).
  const ModelSpec hf = LoadModel("testdata/hf/mixtral-8x7b.json");
  CHECK(MegatronModel(c, hf).num_hidden_layers == 32);
  // Alone it lacks the vocabulary, which Megatron takes from the tokenizer.
  CHECK_THROWS_WITH_AS(MegatronModel(c, std::nullopt),
                       "mixtral.args: no --vocab-size: Megatron takes the vocabulary from the tokenizer, which dockyard does not "
                       "read; add --vocab-size N to the file, or give --model (the HF config.json) for the architecture",
                       Error);
  // With it (Llama2Tokenizer: 32000), the file alone gives Mixtral's shapes.
  const FrameworkConfig v =
      ImportMegatronArgs(ReadFile(kDir + "megatron-mixtral-8x7b.args") + "--vocab-size 32000\n", "mixtral.args");
  const ModelSpec m = MegatronModel(v, std::nullopt);
  CHECK(m.hidden_size == hf.hidden_size);
  CHECK(m.attention.num_key_value_heads == 8);
  CHECK(m.attention.head_dim == 128);  // --kv-channels absent: 4096 / 32
  CHECK(m.moe.moe_intermediate_size == 14336);  // --moe-ffn-hidden-size absent: --ffn-hidden-size
  CHECK(m.moe.top_k == 2);
  CHECK(m.tie_word_embeddings == false);
  CHECK(m.vocab_size == 32000);
  CHECK(m.intermediate_size == 14336);  // kept as HF configs keep it, though every layer is MoE
  CHECK(m.norm == NormKind::kRmsNorm);
  CHECK(m.attention.o_bias == false);  // --disable-bias-linear
}

TEST_CASE("Qwen3-30B-A3B (Megatron-LM modelopt conf): Megatron's DDP and allgather defaults, continuations read") {
  const FrameworkConfig c = ImportMegatronArgs(ReadFile(kDir + "megatron-qwen3-30b-a3b.args"), "qwen3.args");
  CHECK(Flag(c, "--tp") == "<absent>");
  CHECK(Flag(c, "--dp-sharding") == "ddp");  // no --use-distributed-optimizer: Megatron's DDP
  CHECK(Flag(c, "--dispatcher") == "all_to_all");
  CHECK(Flag(c, "--make-vocab-size-divisible-by") == "1187");
  const ModelSpec hf = LoadModel("testdata/hf/qwen3-30b-a3b.json");
  const ModelSpec m = MegatronModel(c, hf);
  CHECK(m.moe.num_experts == 128);
  // The same file naming another model's sizes is refused, naming both values.
  const ModelSpec other = LoadModel("testdata/hf/mixtral-8x7b.json");
  CHECK_THROWS_WITH_AS(MegatronModel(c, other),
                       "qwen3.args:11: --num-layers 48 but --model testdata/hf/mixtral-8x7b.json has num_hidden_layers 32: the file "
                       "and the model disagree",
                       Error);
}

TEST_CASE("DeepSeek-V3 on Megatron-FSDP (Megatron-LM examples/megatron_fsdp): flex/HybridEP, modules, MTP, ignored keys named") {
  const FrameworkConfig c = ImportMegatronArgs(ReadFile(kDir + "megatron-deepseek-v3-fsdp.args"), "dsv3.args");
  CHECK(Flag(c, "--dp-sharding") == "fsdp");  // --use-megatron-fsdp, strategy optim_grads_params
  CHECK(Flag(c, "--dispatcher") == "deepep");
  CHECK(Flag(c, "--moe-flex-dispatcher-backend") == "hybridep");
  CHECK(Flag(c, "--recompute") == "selective");
  CHECK(Flag(c, "--recompute-modules") == "mlp,moe,mla_up_proj,layernorm");
  CHECK(Flag(c, "--mtp-layers") == "1");
  CHECK(Flag(c, "--ep") == "8");
  CHECK(Flag(c, "--etp") == "1");
  CHECK(Flag(c, "--micro-batch-size") == "4");
  CHECK(Flag(c, "--global-batch-size") == "2048");
  CHECK(Flag(c, "--no-check-for-nan-in-loss-and-grad") == "");
  CHECK(Contains(c.ignored, "--moe-router-force-load-balancing (balanced routing"));
  CHECK(Contains(c.ignored, "--fsdp-double-buffer"));
  CHECK(Contains(c.ignored, "--megatron-fsdp-main-grads-dtype"));
  // [0]*3+[1]*58 is DeepSeek-V3's first_k_dense_replace 3.
  const ModelSpec hf = LoadModel("testdata/hf/deepseek-v3.json");
  CHECK(MegatronModel(c, hf).NumMoeLayers() == 58);
}

TEST_CASE("--moe-layer-freq list expressions and bad values") {
  auto model = [](const std::string& freq) {
    const FrameworkConfig c = ImportMegatronArgs("--num-layers 8 --hidden-size 64 --num-attention-heads 4 --position-embedding-type rope --num-experts 8 --swiglu --bf16 "
                                                 "--vocab-size 1000 --moe-layer-freq " + freq + "\n",
                                                 "f.args");
    return MegatronModel(c, std::nullopt);
  };
  CHECK(model("'([0]+[1]*3)*2'").moe_layers == std::vector<bool>{false, true, true, true, false, true, true, true});
  CHECK(model("2").moe_layers == std::vector<bool>{true, false, true, false, true, false, true, false});  // i % 2 == 0
  CHECK(model("[1,1,0,0,1,1,0,0]").NumMoeLayers() == 4);
  CHECK_THROWS_WITH_AS(model("[1]*7"), "f.args:1: --moe-layer-freq '[1]*7' gives 7 layers, --num-layers 8", Error);
  CHECK_THROWS_WITH_AS(model("[1]*4+[2]*4"), "f.args:1: --moe-layer-freq '[1]*4+[2]*4': layer 4 is 2, not 0 or 1", Error);
  CHECK_THROWS_AS(model("[1]*x"), Error);
  // Python refuses a leading zero; a repeat past 2^20 and nesting past 64 are refused, not run.
  CHECK_THROWS_WITH_AS(model("[01]*8"), doctest::Contains("a number with a leading zero, which Python refuses"), Error);
  CHECK_THROWS_WITH_AS(model("[1]*1000000000"), doctest::Contains("a number above 2^20"), Error);
  CHECK_THROWS_WITH_AS(model("'" + std::string(50000, '(') + "[1]" + std::string(50000, ')') + "'"),
                       doctest::Contains("brackets nested more than 64 deep"), Error);
}

TEST_CASE("Values: ranges and settings dockyard cannot plan are refused, naming the key") {
  auto import = [](const std::string& extra) {
    ImportMegatronArgs("--num-layers 8 --hidden-size 64 --num-attention-heads 4 --position-embedding-type rope --bf16\n" + extra + "\n", "v.args");
  };
  CHECK_THROWS_WITH_AS(import("--tensor-model-parallel-size 0"), "v.args:2: --tensor-model-parallel-size 0: must be >= 1", Error);
  CHECK_THROWS_WITH_AS(import("--pipeline-model-parallel-size two"), "v.args:2: --pipeline-model-parallel-size 'two': not a whole number", Error);
  CHECK_THROWS_WITH_AS(import("--fp8-format e4m3 --fp8-recipe custom"),
                       "v.args:2: --fp8-recipe custom: not modelled (dockyard prices tensorwise, delayed, blockwise and mxfp8 scaling)", Error);
  CHECK_THROWS_WITH_AS(import("--optimizer lion"), "v.args:2: --optimizer lion: dockyard plans adam, sgd and muon", Error);
  CHECK_THROWS_WITH_AS(import("--moe-token-dispatcher-type all2all"), "v.args:2: --moe-token-dispatcher-type 'all2all': Megatron-LM takes allgather | alltoall | flex", Error);
  // 8 layers, pp 2, 3 layers per virtual stage: 8 % 6 != 0 (arguments.py's rule).
  CHECK_THROWS_WITH_AS(import("--pipeline-model-parallel-size 2 --num-layers-per-virtual-pipeline-stage 3"),
                       "v.args:2: --num-layers-per-virtual-pipeline-stage 3: --num-layers 8 is not a multiple of pp (2) x 3", Error);
  CHECK_THROWS_WITH_AS(ImportMegatronArgs("--num-layers 8 --hidden-size 64 --num-attention-heads 4 --position-embedding-type rope\n", "v.args"),
                       "v.args: neither --bf16 nor --fp16: Megatron would train in float32, which dockyard does not plan", Error);
  // Megatron-LM's own refusals, named by the file's keys.
  CHECK_THROWS_WITH_AS(import("--fp16"), "v.args:2: --bf16 and --fp16: Megatron-LM trains in one of them (arguments.py asserts not both)", Error);
  // An empty layout is said as such (it reached the command line as a switch before).
  CHECK_THROWS_WITH_AS(import("--pipeline-model-parallel-layout ''"), doctest::Contains("v.args:2: --pipeline-model-parallel-layout '': an empty layout places no stage"),
                       Error);
  CHECK_THROWS_WITH_AS(import("--pipeline-model-parallel-layout 'Et|tL' --decoder-first-pipeline-num-layers 1"),
                       doctest::Contains("--decoder-first-pipeline-num-layers with --pipeline-model-parallel-layout: Megatron-LM refuses"), Error);
  CHECK_THROWS_WITH_AS(import("--recompute-granularity full"),
                       doctest::Contains("--recompute-granularity full needs --recompute-method uniform|block and --recompute-num-layers N"), Error);
  CHECK_THROWS_WITH_AS(import("--recompute-granularity selective --recompute-method block"),
                       doctest::Contains("--recompute-method with --recompute-granularity selective: Megatron-LM refuses it"), Error);
  CHECK_THROWS_WITH_AS(import("--seq-length 8192 --max-position-embeddings 4096"),
                       doctest::Contains("--max-position-embeddings 4096 is below --seq-length 8192"), Error);
}

TEST_CASE("--fp8-recipe mxfp8 is dockyard's mxfp8 recipe; delayed is priced as tensorwise") {
  auto flags = [](const std::string& extra) {
    return ImportMegatronArgs("--num-layers 8 --hidden-size 64 --num-attention-heads 4 --position-embedding-type rope --bf16\n" + extra + "\n",
                              "m.args");
  };
  const FrameworkConfig mx = flags("--fp8-format e4m3 --fp8-recipe mxfp8 --fp8-param-gather");
  CHECK(Flag(mx, "--precision") == "fp8");
  CHECK(Flag(mx, "--fp8-recipe") == "mxfp8");
  CHECK(Flag(mx, "--fp8-param-gather") == "");
  CHECK(Flag(flags("--fp8-format hybrid"), "--fp8-recipe") == "tensorwise");  // Megatron's default recipe, delayed
  // Muon; dist_muon is Megatron's deprecated spelling of muon with the distributed optimizer.
  CHECK(Flag(flags("--optimizer muon"), "--optimizer") == "muon");
  CHECK(Flag(flags("--optimizer muon"), "--dp-sharding") == "ddp");
  CHECK(Flag(flags("--optimizer dist_muon"), "--optimizer") == "muon");
  CHECK(Flag(flags("--optimizer dist_muon"), "--dp-sharding") == "zero1");
}

TEST_CASE("A search pins what the file leaves at Megatron's default; MLA without --qk-layernorm is named") {
  const FrameworkConfig c = ImportMegatronArgs(
      "--num-layers 8 --hidden-size 64 --num-attention-heads 4 --position-embedding-type rope --bf16 --tensor-model-parallel-size 2 --multi-latent-attention\n", "d.args");
  std::map<std::string, std::string> d;
  for (const auto& f : c.search_defaults) d[f.flag] = f.value;
  // tp is given (2): not a default; etp follows it (Megatron: etp = tp); the others are 1 / none / off.
  CHECK(d.count("--tp") == 0);
  CHECK(d.at("--etp") == "2");
  CHECK(d.at("--pp") == "1");
  CHECK(d.at("--cp") == "1");
  CHECK(d.at("--ep") == "1");
  CHECK(d.at("--micro-batch-size") == "1");
  CHECK(d.at("--recompute") == "none");
  CHECK(d.at("--vpp") == "1");
  CHECK(d.count("--no-overlap-moe-expert-parallel-comm") == 1);
  CHECK(Contains(c.ignored, "(no --qk-layernorm) with --multi-latent-attention"));
}

TEST_CASE("Layer split and VPP: first / last stage layers, layers per virtual stage") {
  const FrameworkConfig c = ImportMegatronArgs(
      "--num-layers 10 --hidden-size 64 --num-attention-heads 4 --position-embedding-type rope --bf16 --pipeline-model-parallel-size 4 "
      "--decoder-first-pipeline-num-layers 1 --decoder-last-pipeline-num-layers 3\n",
      "s.args");
  CHECK(Flag(c, "--pp-layer-split") == "1,3,3,3");  // (10 - 1 - 3) / 2 = 3 per middle stage
  const FrameworkConfig v = ImportMegatronArgs(
      "--num-layers 16 --hidden-size 64 --num-attention-heads 4 --position-embedding-type rope --bf16 --pipeline-model-parallel-size 4 "
      "--num-layers-per-virtual-pipeline-stage 2\n",
      "s.args");
  CHECK(Flag(v, "--vpp") == "2");  // 16 / 4 / 2
}

TEST_CASE("Every key the emitter writes is a Megatron-LM argument") {
  // Every "--key" literal in megatron_emit.cc, against the list at the pinned commit: a misspelt
  // key fails here even on a branch no other test reaches.
  const std::string source = ReadFile("planner/frameworks/megatron_emit.cc");
  const std::regex key("\"(--[a-z0-9-]+)\"");
  int keys = 0;
  for (auto it = std::sregex_iterator(source.begin(), source.end(), key); it != std::sregex_iterator(); ++it) {
    const std::string k = (*it)[1];
    CHECK_MESSAGE(MegatronArgTable().count(k) == 1, k);
    ++keys;
  }
  CHECK(keys > 50);
}

}  // namespace dockyard

namespace dockyard {

TEST_CASE("Words as bash reads them: backslash escapes, escaped quotes, command substitution refused") {
  const auto args = ReadMegatronArgs("--data-path a\\ b --tokenizer-model \"x\\\"y\\\\z\" --split 'p\"q'\n", "b.args");
  REQUIRE(args.size() == 3);
  CHECK(args[0].values == std::vector<std::string>{"a b"});
  CHECK(args[1].values == std::vector<std::string>{"x\"y\\z"});
  CHECK(args[2].values == std::vector<std::string>{"p\"q"});
  CHECK(ErrorOf("--data-path `pwd`\n") ==
        "a.args:1: '`': a command substitution; dockyard reads the arguments as written: put its output in the file");
  CHECK(ErrorOf("--data-path \"$(pwd)\"\n").find("a.args:1: '$(pwd)' in double quotes: a shell variable or command substitution") == 0);
  // Control characters are shown escaped.
  CHECK(ErrorOf("--num\x01layers 4\n").find("a.args:1: --num\\x01layers: not a Megatron-LM argument") == 0);
}

TEST_CASE("--recompute-activations is selective recomputation, whatever --recompute-granularity says (arguments.py)") {
  const FrameworkConfig c = ImportMegatronArgs(
      "--num-layers 8 --hidden-size 64 --num-attention-heads 4 --position-embedding-type rope --bf16 --recompute-activations --recompute-granularity full\n", "r.args");
  std::string recompute;
  for (const auto& f : c.flags) {
    if (f.flag == "--recompute") recompute = f.value;
  }
  CHECK(recompute == "selective");
}

TEST_CASE("A written config carries the file's other arguments, quoted so that the reader gets them back") {
  // Tiny Mixtral-like model from the arguments alone, 8 GPUs, ep 8, Megatron.
  const std::string text =
      "--num-layers 4 --hidden-size 64 --num-attention-heads 4 --position-embedding-type rope --num-experts 8 --moe-router-topk 2 --swiglu --disable-bias-linear "
      "--normalization RMSNorm --vocab-size 1000 --bf16 --use-distributed-optimizer --expert-model-parallel-size 8 "
      "--moe-token-dispatcher-type alltoall --fp8-format hybrid --fp8-recipe delayed --lr 1e-4 "
      "--tokenizer-model \"it's \\\"q\\\" \\$\\\\\" --max-position-embeddings 8192 --seq-length 4096 --load ~/ckpt "
      "--fsdp-double-buffer --ckpt-format fsdp_dtensor\n";
  const FrameworkConfig c = ImportMegatronArgs(text, "w.args");
  const ModelSpec m = MegatronModel(c, std::nullopt);
  ParallelDimsOptions d;
  d.world_size = 8;
  d.ep = 8;
  d.convention = Convention::kMegatron;
  TrainingConfig t;
  t.dp_sharding = DpSharding::kZero1;
  t.precision = "fp8";
  t.fp8_recipe = "tensorwise";
  t.dispatcher = Dispatcher::kAllToAll;
  const Plan plan = BuildPlan(m, d, t);
  const std::string written = EmitMegatronArgs(plan, 0, {"test"}, &c);
  const auto back = ReadMegatronArgs(written, "back.args");
  auto value = [&](const std::string& key) {
    for (const auto& a : back) {
      if (a.key == key) return a.values.empty() ? std::string("<switch>") : a.values.front();
    }
    return std::string("<absent>");
  };
  CHECK(value("--tokenizer-model") == "it's \"q\" $\\");  // carried over, quoted for bash
  CHECK(value("--lr") == "1e-4");
  CHECK(value("--fp8-format") == "hybrid");      // the file's, which prices as e4m3
  CHECK(value("--fp8-recipe") == "delayed");     // the file's, which prices as tensorwise
  CHECK(value("--max-position-embeddings") == "8192");  // the job's own table, not the model's
  CHECK(value("--expert-model-parallel-size") == "8");
  // The grouped GEMM and the fused permute: what dockyard prices, both off by default in Megatron-LM.
  CHECK(value("--moe-grouped-gemm") == "<switch>");
  CHECK(value("--moe-permute-fusion") == "<switch>");
  CHECK(written.find("# The last 4 arguments are w.args's that dockyard does not read, carried over unchanged.\n") != std::string::npos);
  CHECK(value("--load") == "~/ckpt");
  CHECK(written.find("    --load ~/ckpt") != std::string::npos);  // unquoted: bash expands it on launch, as in the file
  // Megatron-FSDP's own keys leave with it: this layout is zero1.
  CHECK(written.find("# Left out with Megatron-FSDP (this layout is zero1): --fsdp-double-buffer, --ckpt-format.\n") != std::string::npos);
  CHECK(value("--ckpt-format") == "<absent>");
}

}  // namespace dockyard

namespace dockyard {

TEST_CASE("With --model, the job the file describes must be the model: an absent key is Megatron's default, not the model's") {
  // Qwen3-30B-A3B's conf without --moe-ffn-hidden-size: Megatron builds experts of --ffn-hidden-size 6144.
  std::string text = ReadFile(kDir + "megatron-qwen3-30b-a3b.args");
  const size_t at = text.find("    --moe-ffn-hidden-size 768 \\\n");
  REQUIRE(at != std::string::npos);
  text.erase(at, std::string("    --moe-ffn-hidden-size 768 \\\n").size());
  const ModelSpec hf = LoadModel("testdata/hf/qwen3-30b-a3b.json");
  CHECK_THROWS_WITH_AS(MegatronModel(ImportMegatronArgs(text, "q.args"), hf),
                       "q.args: no --moe-ffn-hidden-size: Megatron-LM's default gives moe_intermediate_size 6144, but --model "
                       "testdata/hf/qwen3-30b-a3b.json has 768: add --moe-ffn-hidden-size to the file (the job is what it says, not the model)",
                       Error);
  // Without --qk-layernorm Megatron builds no q/k norms, which Qwen3 has.
  std::string no_norm = ReadFile(kDir + "megatron-qwen3-30b-a3b.args");
  no_norm.erase(no_norm.find("    --qk-layernorm \\\n"), std::string("    --qk-layernorm \\\n").size());
  CHECK_THROWS_WITH_AS(MegatronModel(ImportMegatronArgs(no_norm, "q.args"), hf), doctest::Contains("q.args: no --qk-layernorm"), Error);
}

TEST_CASE("Megatron-LM's refusals of a launch file: MLA with GQA, TP overlap without SP, uneven pp, learned positions, delayed FP8") {
  const std::string base = "--num-layers 8 --hidden-size 64 --num-attention-heads 4 --bf16 --position-embedding-type rope ";
  auto error = [&](const std::string& extra) { return ImportErrorOf(base + extra + "\n"); };
  CHECK(error("--multi-latent-attention --group-query-attention").find("mutually exclusive") != std::string::npos);
  CHECK(error("--tensor-model-parallel-size 2 --tp-comm-overlap").find("--tp-comm-overlap needs --sequence-parallel") != std::string::npos);
  CHECK(error("--pipeline-model-parallel-size 3").find("--num-layers 8 is not divisible by --pipeline-model-parallel-size 3") != std::string::npos);
  CHECK(error("--pipeline-model-parallel-size 2 --num-virtual-stages-per-pipeline-rank 3").find("do not divide into 3 model chunks") !=
        std::string::npos);
  CHECK(error("--fp8-format e4m3 --recompute-granularity selective --recompute-modules moe_act")
            .find("Delayed scaling does not support moe_act and layernorm recompute") != std::string::npos);
  CHECK(error("--cuda-graph-impl bogus").find("--cuda-graph-impl 'bogus': Megatron-LM takes none | local | transformer_engine | full_iteration") !=
        std::string::npos);
  CHECK_THROWS_WITH_AS(ImportMegatronArgs("--num-layers 8 --hidden-size 64 --num-attention-heads 4 --bf16\n", "m.args"),
                       doctest::Contains("no --position-embedding-type (Megatron's default learned_absolute): dockyard plans rotary"), Error);
  CHECK(error("--data-path a;b").find("a shell operator") != std::string::npos);
  CHECK(error("--tokenizer-model -foo").find("'-foo' after --tokenizer-model: argparse reads a word starting with '-' as an option") !=
        std::string::npos);
  CHECK(error("--lr -1e-4").empty());  // a negative number is a value
}

}  // namespace dockyard

namespace dockyard {

TEST_CASE("First / last stage layers must divide into the virtual stages; recompute module names are Megatron's") {
  const std::string base = "--num-layers 40 --hidden-size 64 --num-attention-heads 4 --bf16 --position-embedding-type rope "
                           "--pipeline-model-parallel-size 4 ";
  // (40 - 10) / 3 = 10 layers on the other stages; 10 % 4 != 0 (transformer_config.py).
  CHECK_THROWS_WITH_AS(ImportMegatronArgs(base + "--decoder-first-pipeline-num-layers 10 --num-virtual-stages-per-pipeline-rank 4\n", "v.args"),
                       doctest::Contains("v.args:1: a pipeline stage of 10 layers does not divide into 4 virtual stages"), Error);
  CHECK_NOTHROW(ImportMegatronArgs(base + "--decoder-first-pipeline-num-layers 10 --num-virtual-stages-per-pipeline-rank 2\n", "v.args"));
  CHECK_THROWS_WITH_AS(ImportMegatronArgs(base + "--recompute-granularity selective --recompute-modules core_attn mlpx\n", "v.args"),
                       doctest::Contains("v.args:1: --recompute-modules 'mlpx': Megatron-LM takes core_attn"), Error);
}

TEST_CASE("--no-overlap-p2p-communication is read (run_settings.h overlap_p2p_comm), and written back by the emitter") {
  const FrameworkConfig c = ImportMegatronArgs(
      "--num-layers 8 --hidden-size 64 --num-attention-heads 4 --position-embedding-type rope --bf16\n"
      "--pipeline-model-parallel-size 2 --num-layers-per-virtual-pipeline-stage 2 --no-overlap-p2p-communication\n",
      "p.args");
  CHECK(Flag(c, "--vpp") == "2");  // 8 / 2 / 2
  CHECK(Flag(c, "--no-overlap-p2p-communication") == "");
  CHECK_FALSE(Contains(c.ignored, "--no-overlap-p2p-communication"));
  // A plan with the overlap off writes the switch back.
  const FrameworkConfig moe = ImportMegatronArgs(
      "--num-layers 8 --hidden-size 64 --num-attention-heads 4 --position-embedding-type rope --num-experts 8 --moe-router-topk 2 "
      "--swiglu --vocab-size 1000 --bf16 --use-distributed-optimizer\n",
      "q.args");
  ParallelDimsOptions d;
  d.world_size = 2;
  d.pp = 2;
  d.convention = Convention::kMegatron;
  TrainingConfig t;
  t.dp_sharding = DpSharding::kZero1;
  t.run.vpp = 2;
  t.run.overlap_p2p_comm = false;
  const Plan plan = BuildPlan(MegatronModel(moe, std::nullopt), d, t);
  CHECK(EmitMegatronArgs(plan, 0, {"test"}, &moe).find("--no-overlap-p2p-communication") != std::string::npos);
  t.run.overlap_p2p_comm = true;
  CHECK(EmitMegatronArgs(BuildPlan(MegatronModel(moe, std::nullopt), d, t), 0, {"test"}, &moe).find("--no-overlap-p2p-communication") ==
        std::string::npos);
}

TEST_CASE("--delay-wgrad-compute is read (run_settings.h delay_wgrad_compute), and written back by the emitter") {
  const std::string moe_args =
      "--num-layers 8 --hidden-size 64 --num-attention-heads 4 --position-embedding-type rope --num-experts 8 --moe-router-topk 2 "
      "--swiglu --vocab-size 1000 --bf16 --use-distributed-optimizer --expert-model-parallel-size 2 "
      "--moe-token-dispatcher-type alltoall --overlap-moe-expert-parallel-comm --delay-wgrad-compute\n";
  const FrameworkConfig c = ImportMegatronArgs(moe_args, "d.args");
  CHECK(Flag(c, "--delay-wgrad-compute") == "");
  CHECK_FALSE(Contains(c.ignored, "--delay-wgrad-compute"));  // was listed as ignored ("delayed weight gradients")
  ParallelDimsOptions d;
  d.world_size = 2;
  d.ep = 2;
  d.convention = Convention::kMegatron;
  TrainingConfig t;
  t.dp_sharding = DpSharding::kZero1;
  t.run.overlap_moe_ep_comm = true;
  t.run.delay_wgrad_compute = true;
  CHECK(EmitMegatronArgs(BuildPlan(MegatronModel(c, std::nullopt), d, t), 0, {"test"}, &c).find("--delay-wgrad-compute") !=
        std::string::npos);
  // Megatron-Core's rule: not without the EP overlap.
  t.run.overlap_moe_ep_comm = false;
  CHECK_THROWS_WITH_AS(BuildPlan(MegatronModel(c, std::nullopt), d, t),
                       doctest::Contains("--delay-wgrad-compute: needs --overlap-moe-expert-parallel-comm"), Error);
}

TEST_CASE("--cuda-graph-impl full_iteration and --moe-pad-expert-input-to-capacity are read and written back (no host synchronization "
          "in the MoE layers, kernels_model.h MoeSyncIdleUs)") {
  const std::string base =
      "--num-layers 8 --hidden-size 64 --num-attention-heads 4 --position-embedding-type rope --num-experts 8 --moe-router-topk 2 "
      "--swiglu --vocab-size 1000 --bf16 --use-distributed-optimizer --expert-model-parallel-size 2 --moe-token-dispatcher-type alltoall ";
  // The whole iteration in one graph: --full-iteration-cuda-graph, not the per-layer graphs' --cuda-graphs.
  FrameworkConfig c = ImportMegatronArgs(base + "--cuda-graph-impl full_iteration\n", "g.args");
  CHECK(Flag(c, "--full-iteration-cuda-graph") == "");
  CHECK(Flag(c, "--cuda-graphs") == "<absent>");
  // The older spellings Megatron-LM converts to a whole-iteration graph (cuda_graph_config.py).
  c = ImportMegatronArgs(base + "--cuda-graph-impl local --cuda-graph-scope full_iteration\n", "g.args");
  CHECK(Flag(c, "--full-iteration-cuda-graph") == "");
  CHECK(Flag(c, "--cuda-graphs") == "<absent>");
  c = ImportMegatronArgs(base + "--cuda-graph-impl transformer_engine\n", "g.args");
  CHECK(Flag(c, "--cuda-graphs") == "");
  CHECK(Flag(c, "--full-iteration-cuda-graph") == "<absent>");
  // Padding to capacity: read (was listed as ignored, "padding to capacity"); the capacity factor
  // itself stays listed (dockyard prices dropless rows).
  c = ImportMegatronArgs(base + "--moe-expert-capacity-factor 1.25 --moe-pad-expert-input-to-capacity\n", "p.args");
  CHECK(Flag(c, "--moe-pad-expert-input-to-capacity") == "");
  CHECK_FALSE(Contains(c.ignored, "--moe-pad-expert-input-to-capacity"));
  CHECK(Contains(c.ignored, "--moe-expert-capacity-factor"));
  // Megatron-Core asserts a capacity factor with the padding, and a factor is a positive number.
  CHECK(ImportErrorOf(base + "--moe-pad-expert-input-to-capacity\n").find("without --moe-expert-capacity-factor: Megatron-Core asserts") !=
        std::string::npos);
  CHECK(ImportErrorOf(base + "--moe-expert-capacity-factor -1 --moe-pad-expert-input-to-capacity\n")
            .find("--moe-expert-capacity-factor -1: must be a positive number") != std::string::npos);
  CHECK(ImportErrorOf(base + "--moe-expert-capacity-factor abc --moe-pad-expert-input-to-capacity\n").find("not a number") !=
        std::string::npos);
  ParallelDimsOptions d;
  d.world_size = 2;
  d.ep = 2;
  d.convention = Convention::kMegatron;
  TrainingConfig t;
  t.dp_sharding = DpSharding::kZero1;
  t.run.moe_pad_expert_input_to_capacity = true;
  t.run.cuda_graphs = t.run.full_iteration_cuda_graph = true;
  t.run.check_for_nan_in_grad = false;  // Megatron-LM asserts it off with full_iteration
  // Written with the file's capacity factor (Megatron-LM asserts one with the padding), else 1.0.
  const std::string with_file = EmitMegatronArgs(BuildPlan(MegatronModel(c, std::nullopt), d, t), 0, {"test"}, &c);
  CHECK(with_file.find("--moe-expert-capacity-factor 1.25") != std::string::npos);
  CHECK(with_file.find("--moe-pad-expert-input-to-capacity") != std::string::npos);
  CHECK(with_file.find("--cuda-graph-impl full_iteration") != std::string::npos);
  const std::string without_file = EmitMegatronArgs(BuildPlan(MegatronModel(c, std::nullopt), d, t), 0, {"test"}, nullptr);
  CHECK(without_file.find("--moe-expert-capacity-factor 1.0") != std::string::npos);
  // Read back: the same two settings.
  const FrameworkConfig back = ImportMegatronArgs(without_file, "back.args");
  CHECK(Flag(back, "--moe-pad-expert-input-to-capacity") == "");
  CHECK(Flag(back, "--full-iteration-cuda-graph") == "");
}

TEST_CASE("--attention-backend: flash, fused and auto are what dockyard prices; unfused and local are said; no grouped GEMM is said") {
  const std::string base =
      "--num-layers 8 --hidden-size 64 --num-attention-heads 4 --position-embedding-type rope --num-experts 8 --moe-router-topk 2 "
      "--swiglu --vocab-size 1000 --bf16 --expert-model-parallel-size 2 --moe-permute-fusion";
  for (const char* backend : {"flash", "fused", "auto"}) {
    const FrameworkConfig c = ImportMegatronArgs(base + " --moe-grouped-gemm --attention-backend " + backend + "\n", "a.args");
    CHECK(c.ignored.empty());
    CHECK(Contains(c.not_read, "--attention-backend"));
  }
  const FrameworkConfig unfused = ImportMegatronArgs(base + " --moe-grouped-gemm --attention-backend unfused\n", "a.args");
  REQUIRE(unfused.ignored.size() == 1);
  CHECK(unfused.ignored[0] == "--attention-backend unfused (attention is priced as a fused flash-attention kernel: flash, fused or auto)");
  // Without --moe-grouped-gemm Megatron-LM runs SequentialMLP (QA: priced as grouped, silently).
  const FrameworkConfig sequential = ImportMegatronArgs(base + "\n", "a.args");
  REQUIRE(sequential.ignored.size() == 1);
  CHECK(sequential.ignored[0].rfind("(no --moe-grouped-gemm): Megatron-LM then runs SequentialMLP", 0) == 0);
}

TEST_CASE("the DDP's parameter-gather flags are read (run_settings.h) and written back where they differ from Megatron-LM's defaults") {
  const std::string moe_args =
      "--num-layers 8 --hidden-size 64 --num-attention-heads 4 --position-embedding-type rope --num-experts 8 --moe-router-topk 2 "
      "--swiglu --vocab-size 1000 --bf16 --use-distributed-optimizer --expert-model-parallel-size 2 --overlap-grad-reduce "
      "--overlap-param-gather --overlap-param-gather-with-optimizer-step --no-align-param-gather --ddp-bucket-size 50000000 "
      "--moe-grouped-gemm --moe-permute-fusion\n";
  const FrameworkConfig c = ImportMegatronArgs(moe_args, "g.args");
  CHECK(Flag(c, "--overlap-param-gather-with-optimizer-step") == "");
  CHECK(Flag(c, "--no-align-param-gather") == "");
  CHECK(Flag(c, "--ddp-bucket-size") == "50000000");
  CHECK(c.ignored.empty());
  std::string zero = moe_args;
  zero.replace(zero.find("50000000"), 8, "0");
  CHECK_THROWS_WITH_AS(ImportMegatronArgs(zero, "g.args"), doctest::Contains("--ddp-bucket-size 0: must be >= 1"), Error);
  ParallelDimsOptions d;
  d.world_size = 8;
  d.pp = 2;
  d.ep = 2;
  d.convention = Convention::kMegatron;
  TrainingConfig t;
  t.dp_sharding = DpSharding::kZero1;
  t.run.vpp = 2;
  t.run.overlap_grad_reduce = t.run.overlap_param_gather = true;
  const std::string plain = EmitMegatronArgs(BuildPlan(MegatronModel(c, std::nullopt), d, t), 0, {"test"}, &c);
  CHECK(plain.find("--overlap-param-gather-with-optimizer-step") == std::string::npos);
  CHECK(plain.find("--no-align-param-gather") == std::string::npos);
  CHECK(plain.find("--ddp-bucket-size") == std::string::npos);
  t.run.overlap_param_gather_with_optimizer_step = true;
  t.run.align_param_gather = false;
  t.run.ddp_bucket_size = 50000000;
  const std::string set = EmitMegatronArgs(BuildPlan(MegatronModel(c, std::nullopt), d, t), 0, {"test"}, &c);
  CHECK(set.find("--overlap-param-gather-with-optimizer-step") != std::string::npos);
  CHECK(set.find("--no-align-param-gather") != std::string::npos);
  CHECK(set.find("--ddp-bucket-size 50000000") != std::string::npos);
  // --no-gradient-accumulation-fusion: read (it prices the grouped weight gradient's main-grad
  // traffic, docs/cost-model.md §3.12) and written back.
  const FrameworkConfig unfused = ImportMegatronArgs(moe_args + "--no-gradient-accumulation-fusion\n", "u.args");
  CHECK(Flag(unfused, "--no-gradient-accumulation-fusion") == "");
  CHECK_FALSE(Contains(unfused.not_read, "--no-gradient-accumulation-fusion"));
  t.run.gradient_accumulation_fusion = false;
  CHECK(EmitMegatronArgs(BuildPlan(MegatronModel(c, std::nullopt), d, t), 0, {"test"}, &c).find("--no-gradient-accumulation-fusion") !=
        std::string::npos);
}

TEST_CASE("The router's settings are checked against --model like its shapes (QA: a softmax file passed against a sigmoid model)") {
  const std::string base =
      "--num-layers 8 --hidden-size 64 --num-attention-heads 4 --position-embedding-type rope --num-experts 8 --moe-router-topk 2 "
      "--swiglu --vocab-size 1000 --bf16 --expert-model-parallel-size 2";
  const std::string deepseek_like =
      base + " --moe-router-score-function sigmoid --moe-router-enable-expert-bias --moe-router-num-groups 4 --moe-router-group-topk 2 "
             "--moe-router-topk-scaling-factor 2.5";
  ModelSpec model = MegatronModel(ImportMegatronArgs(deepseek_like + "\n", "d.args"), std::nullopt);
  model.source = "m.json";
  CHECK(model.moe.score_func == "sigmoid");
  CHECK(model.moe.score_correction_bias);
  CHECK(model.moe.n_group == 4);
  CHECK(model.moe.routed_scaling_factor == 2.5);
  CHECK(MegatronModel(ImportMegatronArgs(deepseek_like + "\n", "d.args"), model).moe.n_group == 4);
  auto without = [&](const std::string& key) {
    std::string text = deepseek_like;
    const size_t at = text.find(key);
    const size_t end = text.find(" --", at + key.size());
    text.erase(at, end == std::string::npos ? std::string::npos : end - at);
    return ImportMegatronArgs(text + "\n", "w.args");
  };
  // Megatron's defaults where a key is absent: softmax, no expert bias, no groups, a factor of 1.
  CHECK_THROWS_WITH_AS(MegatronModel(without("--moe-router-score-function sigmoid"), model),
                       doctest::Contains("w.args: no --moe-router-score-function: Megatron-LM's default gives a sigmoid router score (1 = yes; "
                                         "Megatron's default softmax) 0, but --model m.json has 1"),
                       Error);
  CHECK_THROWS_WITH_AS(MegatronModel(without("--moe-router-enable-expert-bias"), model),
                       doctest::Contains("no --moe-router-enable-expert-bias"), Error);
  // Without both group keys: Megatron's default, no group limit (without one, the other is refused on its own).
  std::string ungrouped = deepseek_like;
  ungrouped.erase(ungrouped.find(" --moe-router-num-groups 4 --moe-router-group-topk 2"), std::string(" --moe-router-num-groups 4 --moe-router-group-topk 2").size());
  CHECK_THROWS_WITH_AS(MegatronModel(ImportMegatronArgs(ungrouped + "\n", "u.args"), model),
                       doctest::Contains("u.args: no --moe-router-num-groups: Megatron-LM's default gives n_group (1 = no group limit) 1, but "
                                         "--model m.json has 4"),
                       Error);
  CHECK_THROWS_WITH_AS(MegatronModel(without("--moe-router-topk-scaling-factor 2.5"), model),
                       doctest::Contains("w.args: no --moe-router-topk-scaling-factor: Megatron-LM's default scales by 1, but --model m.json "
                                         "has routed_scaling_factor 2.5"),
                       Error);
  // A value that differs is named with its line.
  std::string other = deepseek_like;
  other.replace(other.find("2.5"), 3, "3.0");
  CHECK_THROWS_WITH_AS(MegatronModel(ImportMegatronArgs(other + "\n", "o.args"), model),
                       doctest::Contains("--moe-router-topk-scaling-factor 3.0 but --model m.json has routed_scaling_factor 2.5"), Error);
}

TEST_CASE("gpt-oss's window and sinks: --window-size, --window-attn-skip-freq, --softmax-type read and checked against --model") {
  ModelSpec hf = LoadModel("testdata/hf/gpt-oss-120b.json");  // sliding_window 128 on even layers, sinks
  hf.source = "gpt-oss.json";
  // Megatron-Bridge's gpt_oss_bridge.py: window_size (sliding_window - 1, 0), skip freq 2, learnable softmax.
  const std::string args =
      "--num-layers 36 --hidden-size 2880 --ffn-hidden-size 2880 --num-attention-heads 64 --group-query-attention --num-query-groups 8 "
      "--kv-channels 64 --position-embedding-type rope --normalization RMSNorm --swiglu --activation-func-clamp-value 7.0 "
      "--untie-embeddings-and-output-weights --add-qkv-bias --vocab-size 201088 --num-experts 128 --moe-router-topk 4 "
      "--moe-ffn-hidden-size 2880 --bf16";
  const std::string window = " --window-size \"(127, 0)\" --window-attn-skip-freq 2 --softmax-type learnable";
  const FrameworkConfig c = ImportMegatronArgs(args + window + "\n", "g.args");
  CHECK_FALSE(Contains(c.ignored, "--window-size"));
  const ModelSpec job = MegatronModel(c, std::nullopt);
  CHECK(job.attention.sliding_window == 128);  // 127 keys before the query, and the query
  // transformer/utils.py: 1-based layer l is windowed unless l % 2 == 0: 0-based layers 0, 2, ... 34.
  REQUIRE(job.sliding_attention_layers.size() == 36);
  CHECK(job.sliding_attention_layers[0]);
  CHECK_FALSE(job.sliding_attention_layers[1]);
  CHECK(job.sliding_attention_layers[34]);
  CHECK_FALSE(job.sliding_attention_layers[35]);
  CHECK(job.attention.sinks);
  CHECK(job.sliding_attention_layers == hf.sliding_attention_layers);
  // A list expression: 1 = window, 0 = full; the same pattern.
  CHECK(MegatronModel(ImportMegatronArgs(args + " --window-size 127,0 --window-attn-skip-freq '[1,0]*18' --softmax-type learnable\n", "l.args"),
                      std::nullopt)
            .sliding_attention_layers == hf.sliding_attention_layers);
  // QA: a file without the window, which Megatron runs over the full context, was priced with the model's.
  CHECK_THROWS_WITH_AS(MegatronModel(ImportMegatronArgs(args + " --softmax-type learnable\n", "n.args"), hf),
                       doctest::Contains("n.args: no --window-size: Megatron-LM's default gives sliding_window"), Error);
  // (128, 0) is a window of 129: named, with the convention.
  CHECK_THROWS_WITH_AS(MegatronModel(ImportMegatronArgs(args + " --window-size 128,0 --window-attn-skip-freq 2 --softmax-type learnable\n",
                                                        "w.args"),
                                     hf),
                       doctest::Contains("--window-size 128,0 but --model gpt-oss.json has sliding_window"), Error);
  // No sinks: Megatron's vanilla softmax.
  CHECK_THROWS_WITH_AS(MegatronModel(ImportMegatronArgs(args + " --window-size 127,0 --window-attn-skip-freq 2\n", "s.args"), hf),
                       doctest::Contains("no --softmax-type"), Error);
  // Every layer windowed (no skip frequency) against a model with full layers: the first full layer named.
  CHECK_THROWS_WITH_AS(MegatronModel(ImportMegatronArgs(args + " --window-size 127,0 --softmax-type learnable\n", "f.args"), hf),
                       doctest::Contains("layer 1 (Megatron's layer_number 2) over the sliding window (1 = yes) 1, but --model gpt-oss.json has 0"), Error);
  // A huge layer count is refused before anything is sized per layer (QA: 8589934592 took 2 GB, then "exceeds").
  std::string huge = args;
  huge.replace(huge.find("--num-layers 36"), 15, "--num-layers 8589934592");
  CHECK_THROWS_WITH_AS(MegatronModel(ImportMegatronArgs(huge + window + "\n", "h.args"), std::nullopt),
                       doctest::Contains("h.args:1: --num-layers 8589934592: exceeds 100000"), Error);
  // Not modelled: a right context; a skip frequency without a window.
  CHECK_THROWS_WITH_AS(MegatronModel(ImportMegatronArgs(args + " --window-size 127,4\n", "r.args"), std::nullopt),
                       doctest::Contains("--window-size (127, 4): dockyard models causal windows"), Error);
  CHECK_THROWS_WITH_AS(MegatronModel(ImportMegatronArgs(args + " --window-attn-skip-freq 2\n", "k.args"), std::nullopt),
                       doctest::Contains("--window-attn-skip-freq without --window-size"), Error);
  // The whole file matches --model.
  CHECK(MegatronModel(c, hf).attention.sliding_window == 128);
  // MLA has no window in dockyard: said, not dropped.
  std::string mla = args;
  mla.erase(mla.find(" --group-query-attention --num-query-groups 8"), std::string(" --group-query-attention --num-query-groups 8").size());
  CHECK_THROWS_WITH_AS(MegatronModel(ImportMegatronArgs(mla + " --multi-latent-attention --window-size 127,0\n", "m.args"), std::nullopt),
                       doctest::Contains("--window-size with --multi-latent-attention: dockyard reads a sliding window for GQA attention only"),
                       Error);
}

TEST_CASE("--activation-func-clamp-value is the experts' clamp (ModelSpec moe.swiglu_limit); --use-transformer-engine-op-fuser is read") {
  const std::string base =
      "--num-layers 8 --hidden-size 64 --num-attention-heads 4 --position-embedding-type rope --num-experts 8 --moe-router-topk 2 "
      "--swiglu --vocab-size 1000 --bf16 --use-distributed-optimizer --expert-model-parallel-size 2";
  const FrameworkConfig c = ImportMegatronArgs(base + " --activation-func-clamp-value 7.0 --use-transformer-engine-op-fuser\n", "c.args");
  CHECK_FALSE(Contains(c.ignored, "--activation-func-clamp-value"));
  CHECK(Flag(c, "--use-transformer-engine-op-fuser") == "");
  const ModelSpec job = MegatronModel(c, std::nullopt);
  CHECK(job.moe.swiglu_limit == 7.0);
  // Megatron's default is no clamp: a file without the key builds none.
  CHECK(MegatronModel(ImportMegatronArgs(base + "\n", "n.args"), std::nullopt).moe.swiglu_limit == 0.0);
  // Against --model: a file with another limit, or none, disagrees with a model that clamps.
  ModelSpec model = job;
  model.source = "m.json";
  CHECK(MegatronModel(c, model).moe.swiglu_limit == 7.0);
  CHECK_THROWS_WITH_AS(MegatronModel(ImportMegatronArgs(base + " --activation-func-clamp-value 5\n", "f.args"), model),
                       doctest::Contains("--activation-func-clamp-value 5 but --model m.json has swiglu_limit 7: the file and the model disagree"),
                       Error);
  CHECK_THROWS_WITH_AS(MegatronModel(ImportMegatronArgs(base + "\n", "n.args"), model),
                       doctest::Contains("n.args: no --activation-func-clamp-value: Megatron-LM's default is no clamp, but --model m.json has "
                                         "swiglu_limit 7"),
                       Error);
  // Megatron-Core refuses a limit that is not a finite number > 0.
  CHECK_THROWS_WITH_AS(MegatronModel(ImportMegatronArgs(base + " --activation-func-clamp-value -1\n", "b.args"), std::nullopt),
                       doctest::Contains("--activation-func-clamp-value -1: must be a finite number > 0"), Error);
}

TEST_CASE("--moe-flex-dispatcher-num-sms and its deprecated spellings, as transformer_config.py routes them; written back") {
  const std::string base =
      "--num-layers 8 --hidden-size 64 --num-attention-heads 4 --position-embedding-type rope --num-experts 8 --moe-router-topk 2 "
      "--swiglu --vocab-size 1000 --bf16 --use-distributed-optimizer --expert-model-parallel-size 2";
  const std::string flex = base + " --moe-token-dispatcher-type flex --moe-flex-dispatcher-backend hybridep";
  CHECK(Flag(ImportMegatronArgs(flex + " --moe-flex-dispatcher-num-sms 24\n", "a.args"), "--moe-flex-dispatcher-num-sms") == "24");
  // __post_init__ routes a deprecated knob to it; an explicit one wins over them.
  CHECK(Flag(ImportMegatronArgs(flex + " --moe-hybridep-num-sms 16\n", "h.args"), "--moe-flex-dispatcher-num-sms") == "16");
  CHECK(Flag(ImportMegatronArgs(flex + " --moe-deepep-num-sms 20 --moe-hybridep-num-sms 20\n", "s.args"), "--moe-flex-dispatcher-num-sms") ==
        "20");
  const FrameworkConfig both = ImportMegatronArgs(flex + " --moe-flex-dispatcher-num-sms 32 --moe-hybridep-num-sms 16\n", "b.args");
  CHECK(Flag(both, "--moe-flex-dispatcher-num-sms") == "32");
  CHECK_FALSE(Contains(both.not_read, "--moe-hybridep-num-sms"));
  // Two different deprecated values are Megatron-Core's ValueError.
  CHECK_THROWS_WITH_AS(ImportMegatronArgs(flex + " --moe-deepep-num-sms 20 --moe-hybridep-num-sms 16\n", "c.args"),
                       doctest::Contains("--moe-deepep-num-sms 20 and --moe-hybridep-num-sms 16: Megatron-Core raises \"Conflicting "
                                         "deprecated SM-count knobs\""),
                       Error);
  // Without the flex dispatcher the SMs change nothing: not set, said so.
  const FrameworkConfig a2a = ImportMegatronArgs(base + " --moe-token-dispatcher-type alltoall --moe-hybridep-num-sms 16\n", "x.args");
  CHECK(Flag(a2a, "--moe-flex-dispatcher-num-sms") == "<absent>");
  CHECK(Contains(a2a.ignored, "--moe-hybridep-num-sms 16 (the flex dispatcher's SMs; this run's dispatcher is alltoall)"));
  // Written back with the flex dispatcher.
  const FrameworkConfig c = ImportMegatronArgs(flex + " --moe-flex-dispatcher-num-sms 24\n", "a.args");
  const ParallelDimsOptions d = testing::MegatronDims(2, 2);
  TrainingConfig t = testing::HybridEpTraining(24);
  CHECK(EmitMegatronArgs(BuildPlan(MegatronModel(c, std::nullopt), d, t), 0, {"test"}).find("--moe-flex-dispatcher-num-sms 24") !=
        std::string::npos);
  // CUDA_DEVICE_MAX_CONNECTIONS is the job's environment, not an argument: the header says to export it.
  t.run.cuda_device_max_connections = 1;
  CHECK(EmitMegatronArgs(BuildPlan(MegatronModel(c, std::nullopt), d, t), 0, {"test"})
            .find("# Planned with --cuda-device-max-connections 1 (no Megatron argument): give it again with --from-megatron.\n"
                  "# Export CUDA_DEVICE_MAX_CONNECTIONS=1 before the launch.") != std::string::npos);
}

}  // namespace dockyard
