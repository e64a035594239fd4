// End-to-end: the messages of issue 31 item 10 as a user meets them -- a preset typed short, a
// mistyped command, a dense HF config, a missing trace file -- and `--version` of both binaries.
#include <array>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <string>
#include <sys/wait.h>

#include <doctest/doctest.h>

#include "tests/run_command.h"

#include "planner/base/json_util.h"

namespace {

using Result = dockyard::testing::CommandResult;  // out: stdout and stderr together unless stderr_too is false

Result Run(const std::string& cmd, bool stderr_too = true) {
  return dockyard::testing::RunCommand(cmd, stderr_too ? dockyard::testing::StderrTo::kOut : dockyard::testing::StderrTo::kDiscard);
}

std::string TmpDir() {
  const char* t = std::getenv("TEST_TMPDIR");
  return t ? t : "/tmp";
}

// The commit a --version line names: 40 hex digits (with "-modified" for a tree with uncommitted
// changes), or "unknown" outside a git checkout (tools/workspace_status.sh).
const std::regex kVersionLine(R"((dockyard-plan|dockyard-run) 0\.1\.0 \(git commit ([0-9a-f]{40}(-modified)?|unknown)\)\n)");

}  // namespace

TEST_CASE("--cluster typed short suggests the presets that start with it, not the nearest by edits") {
  // "h100" is two edits from "b200" and four from "h100-sxm": the prefix is what was meant.
  const Result r = Run("cli/dockyard-plan simulate --model testdata/hf/qwen3-30b-a3b.json --world-size 8 --ep 8 --cluster h100");
  CHECK(r.code == 1);
  CHECK(r.out.find("unknown cluster preset \"h100\"") != std::string::npos);
  CHECK(r.out.find("; did you mean 'h100-sxm' or 'h100-pcie-400g'?") != std::string::npos);
  CHECK(r.out.find("'b200'?") == std::string::npos);
}

TEST_CASE("A mistyped command gets the command it is closest to") {
  // "simulte" is one deletion from "simulate" (planner/base/json_util.h DidYouMean).
  const Result r = Run("cli/dockyard-plan simulte --model testdata/hf/qwen3-30b-a3b.json --world-size 8");
  CHECK(r.code == 2);
  CHECK(r.out.find("dockyard-plan: usage error: The following argument was not expected: simulte;") != std::string::npos);
  CHECK(r.out.find("did you mean 'simulate'? (a command comes first)") != std::string::npos);
}

TEST_CASE("A dense HF config is said to be dense, not an unknown family") {
  // A Llama-3-style config: no key names experts, so there is nothing for dockyard to plan.
  const std::string path = TmpDir() + "/dense-llama.json";
  std::ofstream(path) << R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
    "intermediate_size": 14336, "num_attention_heads": 32, "num_key_value_heads": 8, "num_hidden_layers": 32,
    "vocab_size": 128256, "torch_dtype": "bfloat16"})";
  const Result r = Run("cli/dockyard-plan --model " + path + " --world-size 8");
  CHECK(r.code == 1);
  CHECK(r.out.find("/architectures: 'LlamaForCausalLM' (model_type 'llama') is a dense model: the config has no experts") !=
        std::string::npos);
  CHECK(r.out.find("dockyard plans Mixture-of-Experts models") != std::string::npos);
  CHECK(r.out.find("unknown model family") == std::string::npos);
}

TEST_CASE("A trace that does not exist is said not to exist") {
  const Result r = Run("cli/dockyard-plan simulate --model testdata/hf/qwen3-30b-a3b.json --world-size 8 --ep 8 "
                       "--routing trace:/nonexistent-dir/nope.json");
  CHECK(r.code == 1);
  CHECK(r.out.find("dockyard-plan: error: --routing trace:/nonexistent-dir/nope.json: the file does not exist") != std::string::npos);
  CHECK(r.out.find("cannot read to record its digest") == std::string::npos);
}

TEST_CASE("A message about an input file names the flag that gave it") {
  // Issue 31 new-user check: these named the path only ("/nope.json: cannot open: no such file").
  const std::string qwen = "--model testdata/hf/qwen3-30b-a3b.json --world-size 8 --ep 8";
  Result r = Run("cli/dockyard-plan simulate " + qwen + " --calibration testdata/hf/qwen3-30b-a3b.json");
  CHECK(r.code == 1);
  CHECK(r.out.find("dockyard-plan: error: --calibration: testdata/hf/qwen3-30b-a3b.json: /format: missing: not a dockyard calibration "
                   "file") != std::string::npos);
  r = Run("cli/dockyard-plan --model /nonexistent-dir/m.json --world-size 8");
  CHECK(r.code == 1);
  CHECK(r.out.find("dockyard-plan: error: --model: /nonexistent-dir/m.json: cannot open: no such file") != std::string::npos);
  r = Run("cli/dockyard-plan simulate " + qwen + " --cluster /nonexistent-dir/c.json");
  CHECK(r.code == 1);
  CHECK(r.out.find("dockyard-plan: error: --cluster: /nonexistent-dir/c.json: cannot open: no such file") != std::string::npos);
  // spec checks --out before it reads the model.
  r = Run("cli/dockyard-plan spec --model testdata/hf/qwen3-30b-a3b.json --out /nonexistent-dir/spec.json");
  CHECK(r.code == 1);
  CHECK(r.out.find("dockyard-plan: error: --out '/nonexistent-dir/spec.json': its directory '/nonexistent-dir' does not exist") !=
        std::string::npos);
  r = Run("cli/dockyard-run --plan /nonexistent-dir/plan.json");
  CHECK(r.code == 1);
  CHECK(r.out.find("dockyard-run: error: --plan: /nonexistent-dir/plan.json: cannot open: no such file") != std::string::npos);
}

TEST_CASE("Flags are named in routing, backend and misplaced-flag messages (second new-user check)") {
  const std::string qwen = "--model testdata/hf/qwen3-30b-a3b.json --world-size 16";
  Result r = Run("cli/dockyard-plan simulate " + qwen + " --ep 16 --routing zipf:abc");
  CHECK(r.code != 0);
  CHECK(r.out.find("error: --routing: routing spec 'zipf:abc'") != std::string::npos);
  // search refuses ncclep under torchtitan before it enumerates, as simulate does (it ranked every
  // other dispatcher and dropped the deepep rows silently).
  r = Run("cli/dockyard-plan search " + qwen + " --search-dispatchers deepep --moe-flex-dispatcher-backend ncclep");
  CHECK(r.code == 1);
  CHECK(r.out.find("dockyard-plan: error: --moe-flex-dispatcher-backend ncclep: Megatron-Core's backend") != std::string::npos);
  CHECK(r.out.find("layouts enumerated") == std::string::npos);
  // A flag of another command names the commands by the program's name, not its path.
  r = Run("cli/dockyard-plan " + qwen + " --routing zipf:1.2");
  CHECK(r.code == 2);
  CHECK(r.out.find("--routing is not an option of this command: it belongs to dockyard-plan check, dockyard-plan simulate") !=
        std::string::npos);
}

TEST_CASE("--explain of a layout no candidate has says which values each queried degree takes") {
  // Qwen3-30B-A3B on 256 GPUs at pp 8: a stage holds 256 / 8 = 32 GPUs, and ep divides the
  // stage's dp_shard x cp x tp (torchtitan's sparse mesh), so ep takes the divisors of 32 that the
  // 128 experts allow: 1, 2, 4, 8, 16, 32; ep=64 is none of them.
  const Result r = Run("cli/dockyard-plan search --model testdata/hf/qwen3-30b-a3b.json --world-size 256 --pp 8 --explain ep=64");
  CHECK(r.code != 0);
  CHECK(r.out.find("--explain \"ep=64\": no layout of this search has these values together (world size 256; ") != std::string::npos);
  CHECK(r.out.find("; with the other values given, ep takes 1, 2, 4, 8, 16, 32\n") != std::string::npos);
}

TEST_CASE("A bare --recompute selective follows the convention's framework, and the report says which default it took") {
  const std::string qwen = "cli/dockyard-plan --model testdata/hf/qwen3-30b-a3b.json --world-size 16 --ep 16 --recompute selective";
  // torchtitan as it is: per-op SAC (SelectiveAC), its only selective policy.
  const Result titan = Run(qwen);
  CHECK(titan.code == 0);
  CHECK(titan.out.find("Defaults   --recompute selective = --selective-ac-option op: torchtitan's selective activation "
                       "checkpointing is its per-op policy") != std::string::npos);
  // Releases up to v0.2.2: torchtitan/config/job_config.py ActivationCheckpoint: selective_ac_option: str = "2".
  const Result old_titan = Run(qwen + " --convention torchtitan-2026-03");
  CHECK(old_titan.code == 0);
  CHECK(old_titan.out.find("Defaults   --recompute selective = --selective-ac-option 2: torchtitan's default") != std::string::npos);
  // Per-op checkpointing is not modelled with fp8 linears: a bare selective says it is the per-op policy.
  const Result fp8 = Run(qwen + " --precision fp8");
  CHECK(fp8.code == 1);
  CHECK(fp8.out.find("selective_ac_option (op; torchtitan's per-op selective AC: --selective-ac-option op, or a bare --recompute "
                     "selective under --convention torchtitan) with precision fp8") != std::string::npos);
  // Megatron-Core transformer_config.py: recompute_modules defaults to ["core_attn"].
  const Result megatron = Run(qwen + " --convention megatron");
  CHECK(megatron.code == 0);
  CHECK(megatron.out.find("Defaults   --recompute selective = core_attn: Megatron-Core's default") != std::string::npos);
  // A module list given: no default taken, no line.
  const Result listed = Run(qwen + " --recompute-modules layernorm,moe_act");
  CHECK(listed.code == 0);
  CHECK(listed.out.find("Defaults   --recompute selective") == std::string::npos);
}

TEST_CASE("--version prints the version and the commit of both binaries, and the JSON report carries the commit") {
  const Result plan = Run("cli/dockyard-plan --version");
  CHECK(plan.code == 0);
  std::smatch m;
  REQUIRE_MESSAGE(std::regex_match(plan.out, m, kVersionLine), plan.out);
  const std::string commit = m[2];
  const Result run = Run("cli/dockyard-run --version");
  CHECK(run.code == 0);
  CHECK(run.out == "dockyard-run 0.1.0 (git commit " + commit + ")\n");
  const Result json = Run("cli/dockyard-plan --model testdata/hf/qwen3-30b-a3b.json --world-size 8 --ep 8 --json -", false);
  REQUIRE(json.code == 0);
  const dockyard::Json report = dockyard::Json::parse(json.out);
  CHECK(report["generator"]["provenance"]["git_commit"] == commit);
  CHECK(report["generator"]["provenance"]["dockyard_version"] == "0.1.0");
}

TEST_CASE("The workspace status says 'unknown' in a tree without .git") {
  // A copy of the script in a directory outside any git checkout (the ceiling stops git's search
  // for a parent repository), as in an exported tarball.
  const std::string dir = TmpDir() + "/no-git";
  REQUIRE(Run("mkdir -p " + dir + "/tools && cp tools/workspace_status.sh " + dir + "/tools/").code == 0);
  const Result r = Run("GIT_CEILING_DIRECTORIES=" + TmpDir() + " " + dir + "/tools/workspace_status.sh");
  CHECK(r.code == 0);
  CHECK(r.out == "STABLE_DOCKYARD_GIT_COMMIT unknown\n");
}

TEST_CASE("A switch given twice is refused as an option is; --tp-comm-overlap from a spec, the flag over it") {
  // CLI11 takes the last of a repeated flag by default; dockyard refuses it (README "Exit codes").
  const std::string base = "cli/dockyard-plan simulate --model testdata/hf/qwen3-30b-a3b.json --world-size 16 --ep 8 --tp 2";
  Result r = Run(base + " --convention megatron --tp-comm-overlap --tp-comm-overlap=false");
  CHECK(r.code == 2);
  CHECK(r.out.find("--tp-comm-overlap is given 2 times ('true', 'false'): give it once") != std::string::npos);
  r = Run(base + " --cuda-graphs --cuda-graphs");
  CHECK(r.code == 2);
  CHECK(r.out.find("--cuda-graphs is given 2 times") != std::string::npos);
  // A model spec's training block turns it on; under torchtitan that is refused, naming the key.
  const std::string spec = TmpDir() + "/tp-overlap-spec.json";
  r = Run("cli/dockyard-plan spec --model testdata/hf/qwen3-30b-a3b.json --out " + TmpDir() + "/qwen3.spec.json");
  REQUIRE(r.code == 0);
  dockyard::Json j = dockyard::Json::parse(std::ifstream(TmpDir() + "/qwen3.spec.json"));
  j["training"]["tp_comm_overlap"] = true;
  std::ofstream(spec) << j.dump();
  const std::string with_spec = "cli/dockyard-plan simulate --model " + spec + " --world-size 16 --ep 8 --tp 2";
  r = Run(with_spec);
  CHECK(r.code == 1);
  CHECK(r.out.find("training.tp_comm_overlap: true is TransformerEngine's userbuffers overlap, a Megatron-LM setting") != std::string::npos);
  // Under megatron it holds, and the flag overrides it either way (the Compute line says which).
  r = Run(with_spec + " --convention megatron");
  CHECK(r.code == 0);
  CHECK(r.out.find("TP communication overlapped where tp > 1") != std::string::npos);
  r = Run(with_spec + " --convention megatron --tp-comm-overlap=false");
  CHECK(r.code == 0);
  CHECK(r.out.find("TP communication overlapped") == std::string::npos);
  // A value that is not a boolean is named with what it was.
  j["training"]["tp_comm_overlap"] = nullptr;
  std::ofstream(spec) << j.dump();
  r = Run(with_spec + " --convention megatron");
  CHECK(r.code == 1);
  CHECK(r.out.find("tp_comm_overlap: must be true or false, got null") != std::string::npos);
}

TEST_CASE("--full-iteration-cuda-graph and --moe-pad-expert-input-to-capacity: the MoE layers' host synchronization removed, said on "
          "the Compute line; refused where they mean nothing") {
  const std::string base = "cli/dockyard-plan simulate --model testdata/hf/qwen3-30b-a3b.json --world-size 16 --ep 16 --convention megatron";
  auto step = [&](const std::string& flags) {
    const Result x = Run(base + " --global-batch-size 64 --json -" + flags, false);
    REQUIRE(x.code == 0);
    return dockyard::Json::parse(x.out)["predicted"]["step_time_us"].get<double>();
  };
  // 48 MoE layers x 4 micro-batches x 616 us (knobs.h HostKnobs::moe_sync_idle_us) = 118,272 us of idle
  // without either; the per-layer graphs (--cuda-graphs) keep it, the whole-iteration one removes it.
  const double graphs = step(" --cuda-graphs --no-check-for-nan-in-loss-and-grad --dispatcher deepep --moe-flex-dispatcher-backend hybridep"),
               full = step(" --full-iteration-cuda-graph --no-check-for-nan-in-loss-and-grad --dispatcher deepep --moe-flex-dispatcher-backend hybridep");
  CHECK(graphs - full == doctest::Approx(48 * 4 * 616.0).epsilon(1e-6));
  CHECK(step("") - step(" --moe-pad-expert-input-to-capacity") == doctest::Approx(48 * 4 * 616.0).epsilon(1e-6));
  Result r = Run(base + " --full-iteration-cuda-graph --no-check-for-nan-in-loss-and-grad --moe-pad-expert-input-to-capacity");
  CHECK(r.code == 0);
  CHECK(r.out.find("CUDA graphs on (the whole iteration: no host synchronization)") != std::string::npos);
  CHECK(r.out.find("expert inputs padded to capacity (no host synchronization; the rows priced as dropless routing)") != std::string::npos);
  // Megatron-Core's rules (pipeline_schedule.h ValidateGraphsAndPadding): the NaN check off, a dispatcher without a host
  // synchronization, per-layer graphs not with full recomputation, no padding with the flex DeepEP backend.
  r = Run(base + " --full-iteration-cuda-graph --moe-pad-expert-input-to-capacity");
  CHECK(r.code == 1);
  CHECK(r.out.find("--no-check-for-nan-in-loss-and-grad should be set with --cuda-graph-impl=full_iteration") != std::string::npos);
  r = Run(base + " --full-iteration-cuda-graph --no-check-for-nan-in-loss-and-grad");
  CHECK(r.code == 1);
  CHECK(r.out.find("a whole-iteration graph cannot capture the dispatcher's host synchronization") != std::string::npos);
  r = Run(base + " --cuda-graphs --recompute full");
  CHECK(r.code == 1);
  CHECK(r.out.find("full recompute is only supported with full iteration CUDA graph") != std::string::npos);
  r = Run(base + " --dispatcher deepep --moe-pad-expert-input-to-capacity");
  CHECK(r.code == 1);
  CHECK(r.out.find("does not support moe_pad_expert_input_to_capacity") != std::string::npos);
  r = Run("cli/dockyard-plan simulate --model testdata/hf/qwen3-30b-a3b.json --world-size 16 --ep 16 --full-iteration-cuda-graph");
  CHECK(r.code == 1);
  CHECK(r.out.find("--full-iteration-cuda-graph: Megatron-LM's --cuda-graph-impl full_iteration; torchtitan has no") != std::string::npos);
  r = Run(base + " --full-iteration-cuda-graph --compute-model gemm");
  CHECK(r.code == 1);
  CHECK(r.out.find("--full-iteration-cuda-graph: a whole-iteration CUDA graph removes the launch gaps") != std::string::npos);
  r = Run("cli/dockyard-plan simulate --model testdata/hf/qwen3-30b-a3b.json --world-size 16 --ep 16 --moe-pad-expert-input-to-capacity");
  CHECK(r.code == 1);
  CHECK(r.out.find("--moe-pad-expert-input-to-capacity: a Megatron-Core dispatcher option") != std::string::npos);
}

TEST_CASE("--delay-wgrad-compute: needs the EP overlap, refused under torchtitan, and moves an overlapped step") {
  const std::string base = "cli/dockyard-plan simulate --model testdata/hf/qwen3-30b-a3b.json --world-size 16 --ep 16";
  Result r = Run(base + " --convention megatron --delay-wgrad-compute");
  CHECK(r.code == 1);
  CHECK(r.out.find("--delay-wgrad-compute: needs --overlap-moe-expert-parallel-comm") != std::string::npos);
  r = Run(base + " --delay-wgrad-compute");
  CHECK(r.code == 1);
  CHECK(r.out.find("--delay-wgrad-compute: a Megatron-Core switch of its EP overlap") != std::string::npos);
  // DualPipe splits its weight-gradient step already: no "add the overlap" dead end.
  r = Run("cli/dockyard-plan simulate --model testdata/hf/qwen3-30b-a3b.json --world-size 16 --ep 8 --pp 2 --num-microbatches 4 "
          "--convention megatron --pipeline-schedule dualpipe --delay-wgrad-compute");
  CHECK(r.code == 1);
  CHECK(r.out.find("DualPipe (--pipeline-schedule dualpipe) runs its weight-gradient step apart already") != std::string::npos);
  // With the overlap the delay shortens a step whose backward dispatch is neither hidden anyway nor
  // the whole pair (ep_overlap_test has the hand arithmetic): a 100 GB/s network per GPU puts this
  // layout there (at the preset's 48 GB/s the pair is communication-bound and the delay changes nothing).
  dockyard::Json cal = dockyard::ReadJsonFile("calibration/h100-sxm.json");
  cal["knobs"]["links"]["network_gbps"]["value"] = 100.0;
  const std::string cal_file = TmpDir() + "/h100-100g.json";
  std::ofstream(cal_file) << cal.dump();
  auto moe_layer = [&](const std::string& flags) {
    const Result x = Run(base + " --global-batch-size 512 --convention megatron --overlap-moe-expert-parallel-comm --calibration " +
                             cal_file + " --json -" + flags,
                         false);
    REQUIRE(x.code == 0);
    return dockyard::Json::parse(x.out)["predicted"]["moe_layer_us"].get<double>();
  };
  CHECK(moe_layer(" --delay-wgrad-compute") < moe_layer("") - 10.0);  // 5,586 against 5,611 us
  // The report's Compute line (and JSON header.compute) says which pairing was priced.
  r = Run(base + " --global-batch-size 512 --convention megatron --overlap-moe-expert-parallel-comm --delay-wgrad-compute");
  CHECK(r.code == 0);
  CHECK(r.out.find(", EP all-to-alls overlapped (combined 1F1B, expert weight gradients delayed)") != std::string::npos);
  r = Run(base + " --global-batch-size 512 --convention megatron --overlap-moe-expert-parallel-comm");
  CHECK(r.out.find(", EP all-to-alls overlapped (combined 1F1B)") != std::string::npos);
}

TEST_CASE("--moe-flex-dispatcher-num-sms and --cuda-device-max-connections move an overlapped step as ep_overlap_test prices them") {
  const std::string base =
      "cli/dockyard-plan simulate --model testdata/hf/qwen3-30b-a3b.json --world-size 16 --ep 16 --convention megatron --global-batch-size 512 "
      "--overlap-moe-expert-parallel-comm --json -";
  auto predicted = [&](const std::string& flags, const char* what) {
    const Result x = Run(base + flags, false);
    REQUIRE(x.code == 0);
    return dockyard::Json::parse(x.out)["predicted"][what].get<double>();
  };
  // HybridEP on gb200-nvl72: its kernels hold 32 of 148 SMs by default (0.216 of the compute beside
  // them); 16 SMs take 0.108, 74 take 0.5 (ep_overlap.h FlexDispatcherSmShare): the MoE layer
  // shortens and lengthens with them (2,690 / 2,780 / 3,018 us).
  const std::string hybridep = " --dispatcher deepep --moe-flex-dispatcher-backend hybridep --cluster gb200-nvl72";
  const double at32 = predicted(hybridep, "moe_layer_us");
  CHECK(predicted(hybridep + " --moe-flex-dispatcher-num-sms 32", "moe_layer_us") == doctest::Approx(at32));
  CHECK(predicted(hybridep + " --moe-flex-dispatcher-num-sms 16", "moe_layer_us") < at32 - 50.0);
  CHECK(predicted(hybridep + " --moe-flex-dispatcher-num-sms 74", "moe_layer_us") > at32 + 150.0);
  // One hardware queue: the forward dispatch (no delayed weight gradient) waits for the MLP
  // backward issued before it, so the layer lengthens (8,405 -> 8,971 us); without the overlap the
  // queues change nothing dockyard prices.
  const std::string a2a = " --dispatcher all_to_all --cluster h100-sxm";
  CHECK(predicted(a2a + " --cuda-device-max-connections 1", "moe_layer_us") > predicted(a2a, "moe_layer_us") + 300.0);
  const std::string plain =
      "cli/dockyard-plan simulate --model testdata/hf/qwen3-30b-a3b.json --world-size 16 --ep 16 --convention megatron --global-batch-size 512 "
      "--dispatcher all_to_all --cluster h100-sxm";
  Result r = Run(plain + " --cuda-device-max-connections 1");
  REQUIRE(r.code == 0);
  CHECK(r.out.find(", CUDA_DEVICE_MAX_CONNECTIONS=1") != std::string::npos);
  const Result r8 = Run(plain);
  CHECK(r.out.substr(r.out.find("Predicted")) == r8.out.substr(r8.out.find("Predicted")));
  // The Compute line names both.
  r = Run(plain + " --overlap-moe-expert-parallel-comm --cuda-device-max-connections 1");
  CHECK(r.out.find("EP all-to-alls overlapped (combined 1F1B, one hardware queue: CUDA_DEVICE_MAX_CONNECTIONS=1)") != std::string::npos);
  r = Run("cli/dockyard-plan simulate --model testdata/hf/qwen3-30b-a3b.json --world-size 16 --ep 16 --convention megatron "
          "--dispatcher deepep --moe-flex-dispatcher-num-sms 16 --cluster h100-sxm");
  CHECK(r.out.find(", flex dispatcher on 16 SMs") != std::string::npos);
  // Past the GPU's SMs, even without the overlap.
  r = Run("cli/dockyard-plan simulate --model testdata/hf/qwen3-30b-a3b.json --world-size 16 --ep 16 --convention megatron "
          "--dispatcher deepep --moe-flex-dispatcher-num-sms 200 --cluster h100-sxm");
  CHECK(r.code == 1);
  CHECK(r.out.find("--moe-flex-dispatcher-num-sms 200: the dispatcher's kernels would hold all of the 132 SMs of h100-sxm's GPU") !=
        std::string::npos);
}

TEST_CASE("The Compute line and header.compute.dp_overlap say how the DDP's gradient reduce and parameter gather ran") {
  const std::string base =
      "cli/dockyard-plan simulate --model testdata/hf/qwen3-30b-a3b.json --world-size 16 --ep 8 --pp 2 --convention megatron "
      "--global-batch-size 64 --overlap-grad-reduce --overlap-param-gather";
  Result r = Run(base + " --vpp 2");
  REQUIRE(r.code == 0);
  CHECK(r.out.find(", DP overlap: gradient reduce, parameter gather (aligned, Megatron-LM's bucket)") != std::string::npos);
  r = Run(base + " --ddp-bucket-size 50000000");
  REQUIRE(r.code == 0);
  CHECK(r.out.find(", DP overlap: gradient reduce, parameter gather (each later chunk on the first micro-batch's path, bucket 50000000)") !=
        std::string::npos);
  r = Run(base + " --vpp 2 --overlap-param-gather-with-optimizer-step --json -", false);
  REQUIRE(r.code == 0);
  const dockyard::Json o = dockyard::Json::parse(r.out)["header"]["compute"]["dp_overlap"];
  CHECK(o["grad_reduce"] == true);
  CHECK(o["param_gather_with_optimizer_step"] == true);
  CHECK(o["aligned_param_gather"] == true);
  CHECK(o["ddp_bucket_size"].is_null());
  // The weight gradients accumulated outside the GEMMs (--no-gradient-accumulation-fusion).
  r = Run(base + " --no-gradient-accumulation-fusion");
  REQUIRE(r.code == 0);
  CHECK(r.out.find(", weight gradients accumulated outside the GEMMs") != std::string::npos);
  r = Run(base + " --no-gradient-accumulation-fusion --json -", false);
  REQUIRE(r.code == 0);
  CHECK(dockyard::Json::parse(r.out)["header"]["compute"]["gradient_accumulation_fusion"] == false);
}
