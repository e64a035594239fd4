// End-to-end: the dockyard-plan binary's exit codes, messages, atomic output and a golden report.
#include <array>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <string>
#include <sys/stat.h>
#include <unistd.h>
#include <sys/wait.h>

#include <doctest/doctest.h>
#include <fmt/format.h>

#include "planner/base/json_util.h"

namespace {

struct Result {
  int code = -1;
  std::string out;  // stdout and stderr together
};

std::string TmpDir() {
  const char* t = std::getenv("TEST_TMPDIR");
  return t ? t : "/tmp";
}

// Runs a binary of the workspace with `args`, stdout and stderr together.
// Runs `binary args`; Result::out holds stdout and stderr together unless `stderr_too` is false
// (then stderr is dropped: what --json - writes, without warnings or the search's progress lines,
// which come on a slow run).
Result RunBinary(const std::string& binary, const std::string& args, bool stderr_too = true) {
  std::string cmd = binary + " " + args + (stderr_too ? " 2>&1" : " 2>/dev/null");
  Result r;
  FILE* pipe = popen(cmd.c_str(), "r");
  REQUIRE(pipe != nullptr);
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) r.out.append(buf.data(), n);
  int status = pclose(pipe);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

Result Run(const std::string& args) {
  return RunBinary("cli/dockyard-plan", args);
}

// Run with stdout only: for parsing `--json -`.
Result RunStdout(const std::string& args) {
  return RunBinary("cli/dockyard-plan", args, false);
}

bool Exists(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0;
}

}  // namespace

TEST_CASE("dockyard-plan with no arguments plans the embedded DeepSeek-V3 default") {
  Result r = Run("");
  CHECK(r.code == 0);
  CHECK(r.out.find("total 671.03B (671026419200)") !=
        std::string::npos);  // DeepSeek-V3 as published: 671,026,419,200 parameters without MTP
  CHECK(r.out.find("ep 64") != std::string::npos);
  CHECK(r.out.find("4 per EP rank") != std::string::npos);  // 256 experts / ep 64
}

TEST_CASE("dockyard-plan plan is the default command spelled out: the same report") {
  const std::string args = "--model testdata/hf/olmoe-1b-7b-0125-instruct.json --world-size 8 --tp 2 --ep 4";
  Result spelled = Run("plan " + args), implicit = Run(args);
  REQUIRE(spelled.code == 0);
  CHECK(spelled.out.find("Report     dockyard-plan plan") != std::string::npos);
  // The reports differ only in the Command line that echoes the arguments.
  auto without_command = [](std::string s) {
    const size_t at = s.find("Command    ");
    return at == std::string::npos ? s : s.erase(at, s.find('\n', at) - at);
  };
  CHECK(without_command(spelled.out) == without_command(implicit.out));
}

TEST_CASE("simulate takes --no-overlap-moe-expert-parallel-comm as search does: off, the default") {
  const std::string args = "simulate --model testdata/hf/qwen3-30b-a3b.json --world-size 16 --ep 16 --convention megatron --num-microbatches 8";
  auto step = [](const std::string& out) {
    const size_t at = out.find("Predicted  step ");
    return at == std::string::npos ? std::string("<none>") : out.substr(at, out.find('\n', at) - at);
  };
  Result plain = Run(args), off = Run(args + " --no-overlap-moe-expert-parallel-comm"), on = Run(args + " --overlap-moe-expert-parallel-comm");
  REQUIRE(plain.code == 0);
  REQUIRE(off.code == 0);
  REQUIRE(on.code == 0);
  CHECK(step(off.out) == step(plain.out));
  CHECK(step(on.out) != step(plain.out));
}

TEST_CASE("dockyard-plan writes a report equal to the golden JSON") {
  // OLMoE on 8 ranks, tp 2, ep 4 (dp_shard 4, efsdp = 4*2/4 = 2).
  const std::string out = TmpDir() + "/olmoe.json";
  Result r = Run("--model testdata/hf/olmoe-1b-7b-0125-instruct.json --world-size 8 --tp 2 --ep 4 --json " + out);
  REQUIRE(r.code == 0);
  dockyard::Json got = dockyard::ReadJsonFile(out);
  dockyard::Json want = dockyard::ReadJsonFile("testdata/golden/olmoe_ws8_tp2_ep4.json");
  got["model"]["source"] = want["model"]["source"];
  // Provenance names this run's command line; the model's digest must be recorded.
  CHECK(got["generator"]["provenance"]["inputs"][0]["path"] == "testdata/hf/olmoe-1b-7b-0125-instruct.json");
  CHECK(got["generator"]["provenance"]["inputs"][0]["sha256"] == want["generator"]["provenance"]["inputs"][0]["sha256"]);
  got["generator"] = want["generator"];
  CHECK(got["header"]["provenance"]["inputs"] == want["header"]["provenance"]["inputs"]);
  got["header"]["provenance"] = want["header"]["provenance"];  // this run's command line
  // Compare section by section so that a failure names the section instead of printing 1 MB.
  for (auto it = want.begin(); it != want.end(); ++it) {
    CAPTURE(it.key());
    CHECK(got.contains(it.key()));
    CHECK((got.contains(it.key()) && got[it.key()] == it.value()));
  }
  CHECK(got.size() == want.size());
  CHECK(got["model"]["total_params"] == 6919161856);
}

TEST_CASE("dockyard-plan exits 1 on a broken rule, names it, and writes no file") {
  const std::string out = TmpDir() + "/never.json";
  Result r = Run("--model testdata/hf/mixtral-8x7b.json --world-size 6 --ep 3 --json " + out);
  CHECK(r.code == 1);
  CHECK(r.out.find("dockyard-plan: error: ep (3) must divide num_experts (8)") != std::string::npos);
  CHECK_FALSE(Exists(out));
}

TEST_CASE("dockyard-plan exits 1 on a bad model file") {
  Result r = Run("--model testdata/does-not-exist.json --world-size 8");
  CHECK(r.code == 1);
  CHECK(r.out.find("testdata/does-not-exist.json: cannot open: no such file") != std::string::npos);
  Result d = Run("--model testdata --world-size 8");
  CHECK(d.code == 1);
  CHECK(d.out.find("is a directory") != std::string::npos);
}

TEST_CASE("dockyard-plan exits 2 on usage errors") {
  CHECK(Run("--model testdata/hf/mixtral-8x7b.json").code == 2);  // --world-size missing
  CHECK(Run("--world-size eight").code == 2);
  CHECK(Run("--no-such-flag 1").code == 2);
  CHECK(Run("--convention deepspeed").code == 1);  // a value not among the flag's names: invalid input
  CHECK(Run("--help").code == 0);
}

TEST_CASE("Unexpected arguments are named in command-line order") {
  // CLI11 joins its left-over arguments last first (CLI::detail::rjoin); the message gives them as typed.
  const Result r = Run("search --model testdata/hf/qwen3-30b-a3b.json --world-size 64 first second 3");
  CHECK(r.code == 2);
  CHECK(r.out.find("The following arguments were not expected: first second 3\n") != std::string::npos);
}

TEST_CASE("dockyard-plan spec writes a normalized spec that plans like the HF config") {
  const std::string spec = TmpDir() + "/gpt-oss.spec.json";
  REQUIRE(Run("spec --model testdata/hf/gpt-oss-120b.json --out " + spec).code == 0);
  const std::string a = TmpDir() + "/a.json", b = TmpDir() + "/b.json";
  REQUIRE(Run("--model testdata/hf/gpt-oss-120b.json --world-size 16 --ep 8 --json " + a).code == 0);
  REQUIRE(Run("--model " + spec + " --world-size 16 --ep 8 --json " + b).code == 0);
  dockyard::Json ja = dockyard::ReadJsonFile(a), jb = dockyard::ReadJsonFile(b);
  CHECK(ja["parameters"] == jb["parameters"]);
  CHECK(jb["model"]["total_params"] == 116829156672);  // gpt-oss model card: 116.83B
}

TEST_CASE("dockyard-plan --json - prints only JSON") {
  Result r = Run("--model testdata/hf/qwen3-30b-a3b.json --world-size 8 --ep 8 --json -");
  REQUIRE(r.code == 0);
  dockyard::Json j = dockyard::ParseJsonText(r.out, "stdout");
  CHECK(j["model"]["total_params"] == 30532122624);
  CHECK(j["experts"]["num_local_experts"] == 16);  // 128 / 8
}

TEST_CASE("dockyard-plan check exits 3 and names the rank over the budget") {
  // Qwen3-30B-A3B on 8 GPUs, EP 8, ZeRO-1: 71.51 GiB of weights, grads and optimizer alone
  // (memory_test), so a 40 GiB budget must fail and a 1000 GiB one pass.
  const std::string base = "check --model testdata/hf/qwen3-30b-a3b.json --world-size 8 --ep 8 --dp-sharding zero1 --convention megatron";
  Result over = Run(base + " --gpu-memory-gib 40");
  CHECK(over.code == 3);  // does not fit: its own exit code, not invalid input's 1
  // Every rank holds the same shares here (8 ranks, ep 8): all 8 are over.
  CHECK(over.out.find("dockyard-plan check: stage 0: 8 of 8 ranks exceed the 40.00 GiB budget less the 2.00 GiB reserve (38.00 GiB)") !=
        std::string::npos);
  CHECK(over.out.find("ranks over: 0-7") != std::string::npos);
  Result fits = Run(base + " --gpu-memory-gib 1000");
  CHECK(fits.code == 0);
  CHECK(fits.out.find("check: every rank fits in 998.00 GiB (1000.00 GiB budget less the 2.00 GiB reserve)") != std::string::npos);
  CHECK(Run(base).code == 2);  // check without a budget is a usage error
}

TEST_CASE("dockyard-plan --refit-json writes the per-expert map") {
  const std::string out = TmpDir() + "/refit.json";
  Result r = Run("--model testdata/hf/qwen3-30b-a3b.json --world-size 8 --ep 8 --refit-json " + out + " --refit-dtype float8_e4m3fn");
  REQUIRE(r.code == 0);
  dockyard::Json j = dockyard::ReadJsonFile(out);
  CHECK(j["entries"].size() == 48 * 128 * 3);  // MoE layers x experts x (gate, up, down)
  CHECK(j["dtype"] == "float8_e4m3fn");
  CHECK(j["entries"][0]["name"] == "model.layers.0.mlp.experts.0.gate_proj.weight");
}

TEST_CASE("dockyard-plan reads flags as decimal only and quotes out-of-range values") {
  // "010" is decimal 10 (not octal 8): with the default ep 64 -> gcd(64, 10) = 2.
  Result ten = Run("--world-size 010");
  CHECK(ten.code == 0);
  CHECK(ten.out.find("DeepSeek-V3 on 10 GPUs, ep 2") != std::string::npos);
  Result hex = Run("--world-size 0x100");
  CHECK(hex.code == 2);
  CHECK(hex.out.find("expected a decimal integer") != std::string::npos);
  Result big = Run("--world-size 9999999999999999999");
  CHECK(big.code == 2);
  CHECK(big.out.find("\"9999999999999999999\": out of the 64-bit integer range") != std::string::npos);
}

TEST_CASE("dockyard-plan rejects empty paths as usage errors") {
  CHECK(Run("--json ''").code == 2);
  CHECK(Run("--model '' --world-size 8").code == 2);
  CHECK(Run("spec --model testdata/hf/mixtral-8x7b.json --out ''").code == 2);
}

TEST_CASE("dockyard-plan writes through a device and follows a symlink instead of replacing them") {
  CHECK(Run("--model testdata/hf/mixtral-8x7b.json --world-size 8 --json /dev/null").code == 0);
  struct stat st {};
  REQUIRE(stat("/dev/null", &st) == 0);
  CHECK(S_ISCHR(st.st_mode));
  const std::string target = TmpDir() + "/target.json", link = TmpDir() + "/link.json";
  std::remove(link.c_str());
  { std::ofstream(target) << "{}"; }
  REQUIRE(symlink(target.c_str(), link.c_str()) == 0);
  CHECK(Run("--model testdata/hf/mixtral-8x7b.json --world-size 8 --json " + link).code == 0);
  struct stat lst {};
  REQUIRE(lstat(link.c_str(), &lst) == 0);
  CHECK(S_ISLNK(lst.st_mode));
  CHECK(dockyard::ReadJsonFile(target)["model"]["total_params"] == 46702792704);
}

TEST_CASE("dockyard-plan refuses a device as model input instead of reading forever") {
  Result r = Run("--model /dev/zero --world-size 8");
  CHECK(r.code == 1);
  CHECK(r.out.find("/dev/zero: is not a regular file") != std::string::npos);
}

TEST_CASE("dockyard-plan reports a failed write to stdout") {
  // (Run appends 2>&1 after the arguments, so the message goes to /dev/full too: check the code.)
  Result r = Run("--model testdata/hf/mixtral-8x7b.json --world-size 8 --json - > /dev/full");
  CHECK(r.code == 1);
}

TEST_CASE("dockyard-plan writes no file at all when one of two outputs cannot be written") {
  const std::string json = TmpDir() + "/both.json";
  std::remove(json.c_str());
  Result r = Run("--model testdata/hf/qwen3-30b-a3b.json --world-size 8 --ep 8 --json " + json + " --refit-json " + TmpDir() +
                 "/no-such-dir/refit.json");
  CHECK(r.code == 1);
  CHECK_FALSE(Exists(json));
  // The error names the flag whose file failed (QA: "/dev/full: write failed" named no flag).
  CHECK(r.out.find("--refit-json '" + TmpDir() + "/no-such-dir/refit.json': its directory") != std::string::npos);
  Result full = Run("--model testdata/hf/qwen3-30b-a3b.json --world-size 8 --ep 8 --json /dev/full");
  CHECK(full.code == 1);
  CHECK(full.out.find("error: --json /dev/full: write failed: No space left on device") != std::string::npos);
}

TEST_CASE("dockyard-plan rejects the same path for two outputs and empty flag values") {
  const std::string same = TmpDir() + "/same.json";
  CHECK(Run("--model testdata/hf/qwen3-30b-a3b.json --world-size 8 --ep 8 --json " + same + " --refit-json " + same).code == 2);
  Result empty = Run("--model testdata/hf/qwen3-30b-a3b.json --world-size 8 --seq-len ''");
  CHECK(empty.code == 2);
  CHECK(empty.out.find("--seq-len needs a value") != std::string::npos);
  CHECK(Run("--model testdata/hf/qwen3-30b-a3b.json --world-size 8 --imbalance ' 2'").code == 2);
}

TEST_CASE("dockyard-plan rejects --oep without the deredundency dispatcher") {
  Result r = Run("--model testdata/hf/qwen3-30b-a3b.json --world-size 8 --ep 8 --oep 2");
  CHECK(r.code == 1);
  CHECK(r.out.find("--oep: 2 is set, but oep only applies to the deredundency dispatcher") != std::string::npos);
  Result bad = Run("--model testdata/hf/qwen3-30b-a3b.json --world-size 8 --ep 8 --dispatcher deredundency --oep 3");
  CHECK(bad.code == 1);
  CHECK(bad.out.find("oep (3) must divide ep (8)") != std::string::npos);
}

TEST_CASE("dockyard-plan simulate prints a per-phase table and writes the predicted schema") {
  const std::string out = TmpDir() + "/sim.json";
  Result r =
      Run("simulate --model testdata/hf/qwen3-30b-a3b.json --world-size 16 --ep 16 --cluster h200-sxm "
          "--routing zipf:1.2 --seq-len 2048 --json " +
          out);
  REQUIRE(r.code == 0);
  CHECK(r.out.find("grouped_gemm") != std::string::npos);
  dockyard::Json j = dockyard::ReadJsonFile(out);
  CHECK(j["predicted"]["kind"] == "predicted");
  CHECK(j["predicted"]["step_time_us"].get<double>() > 0);
  CHECK(j["cluster"]["hbm_gbps"] == 4800.0);  // the h200-sxm preset
  CHECK(Run("simulate --model testdata/hf/qwen3-30b-a3b.json --world-size 16 --ep 16 --cluster h300").code == 1);
}

TEST_CASE("dockyard-plan simulate --redundant-experts reports the placement before and after, opt-in") {
  const std::string base =
      "simulate --model testdata/hf/qwen3-30b-a3b.json --world-size 16 --ep 16 --cluster h200-sxm "
      "--routing hot:4:0.4 --seq-len 256";
  const std::string out = TmpDir() + "/sim-redundant.json";
  Result r = Run(base + " --redundant-experts 16 --eplb-policy global --json " + out);
  REQUIRE(r.code == 0);
  dockyard::Json j = dockyard::ReadJsonFile(out);
  const auto& x = j["redundant_experts"];
  CHECK(x["num_slots"] == 144);  // 128 experts + 16
  CHECK(x["slots_per_rank"] == 9);
  CHECK(x["policy"] == "global");
  CHECK(x["after"]["imbalance"].get<double>() < x["before"]["imbalance"].get<double>());
  CHECK(x["layers"][0]["physical_to_logical"].size() == 144);
  // Text: the section follows the phase table.
  r = Run(base + " --redundant-experts 16");
  REQUIRE(r.code == 0);
  CHECK(r.out.find("Redundant experts  R = 16") != std::string::npos);
  // The refit map then targets the physical slots: each layer's entries cover the 144 slots,
  // gate, up and down once per slot.
  const std::string refit = TmpDir() + "/refit-redundant.json";
  REQUIRE(Run(base + " --redundant-experts 16 --refit-json " + refit).code == 0);
  dockyard::Json rj = dockyard::ReadJsonFile(refit);
  CHECK(rj["num_slots"] == 144);
  int64_t layer0_slots = 0;
  for (const auto& e : rj["entries"]) {
    if (e["layer"] == 0) layer0_slots += static_cast<int64_t>(e["physical_slots"].size());
  }
  CHECK(layer0_slots == 3 * 144);
  // Without the flag there is no such block.
  REQUIRE(Run(base + " --json " + out).code == 0);
  CHECK(!dockyard::ReadJsonFile(out).contains("redundant_experts"));
  // 128 + 8 = 136 slots do not split over 16 ranks.
  r = Run(base + " --redundant-experts 8");
  CHECK(r.code == 1);
  CHECK(r.out.find("--redundant-experts (8)") != std::string::npos);
}

namespace {
Result RunRun(const std::string& args) {
  return RunBinary("cli/dockyard-run", args);
}
}  // namespace

TEST_CASE("dockyard-run --placement runs the placement a simulate report chose") {
  const std::string sim = TmpDir() + "/sim-placement.json";
  REQUIRE(Run("simulate --model testdata/specs/tiny-mixtral.json --world-size 4 --ep 4 --seq-len 16 --routing zipf:1.5 "
              "--redundant-experts 4 --json " +
              sim)
              .code == 0);
  const dockyard::Json want = dockyard::ReadJsonFile(sim)["redundant_experts"]["layers"][0]["physical_to_logical"];
  const std::string out = TmpDir() + "/run-placement.json";
  Result r = RunRun(
      "--model testdata/specs/tiny-mixtral.json --world-size 4 --ep 4 --tokens-per-rank 16 --routing zipf:1.5 "
      "--iters 1 --warmup 0 --placement " +
      sim + " --json " + out);
  REQUIRE(r.code == 0);
  const dockyard::Json j = dockyard::ReadJsonFile(out);
  CHECK(j["redundant_experts"]["physical_to_logical"] == want);
  CHECK(j["redundant_experts"]["rows_mismatched_ranks"] == 0);
  CHECK(j["validation"]["wrong"] == 0);
}

TEST_CASE("dockyard-run --plan executes a plan file and puts predicted beside measured") {
  const std::string sim = TmpDir() + "/sim-plan.json";
  REQUIRE(Run("simulate --model testdata/hf/qwen3-30b-a3b.json --world-size 8 --ep 8 --seq-len 16 --json " + sim).code == 0);
  const std::string out = TmpDir() + "/run.json";
  Result r = RunRun("--plan " + sim + " --tokens-per-rank 16 --iters 1 --warmup 0 --json " + out);
  CHECK(r.code == 0);
  CHECK(r.out.find("Validation OK") != std::string::npos);
  // Costed for an H100 cluster, measured on the CPU backend: said once; the token counts agree (16).
  CHECK(r.out.find("dockyard-run: warning: the plan's prediction was costed for cluster \"h100-sxm\"") != std::string::npos);
  CHECK(r.out.find("routed tokens per rank") == std::string::npos);
  const Result other = RunRun("--plan " + sim + " --tokens-per-rank 32 --iters 1 --warmup 0");
  CHECK(other.code == 0);
  CHECK(other.out.find("costed for 16 routed tokens per rank (seq_len 16 x micro_batch_size 1), the run routes 32") != std::string::npos);
  dockyard::Json j = dockyard::ReadJsonFile(out);
  bool paired = false;
  for (const auto& p : j["measured"]["phases"]) paired = paired || (p["name"] == "grouped_gemm" && p.contains("predicted_us"));
  CHECK(paired);
}

TEST_CASE("dockyard-run --plan refuses another schema version, changed placements and extra degrees") {
  const std::string plan = TmpDir() + "/plan-for-run.json";
  REQUIRE(Run("--model testdata/hf/qwen3-30b-a3b.json --world-size 8 --ep 8 --json " + plan).code == 0);
  dockyard::Json j = dockyard::ReadJsonFile(plan);
  dockyard::Json v2 = j;
  v2["schema_version"] = 3;  // a version this dockyard does not read
  const std::string bad_version = TmpDir() + "/plan-v2.json";
  { std::ofstream(bad_version) << v2.dump(); }
  Result rv = RunRun("--plan " + bad_version);
  CHECK(rv.code == 1);
  CHECK(rv.out.find("/schema_version: this plan file has schema version 3") != std::string::npos);
  // A file that says the routed experts are replicated: the runtime must not silently re-decide.
  dockyard::Json tampered = j;
  for (auto& p : tampered["parameters"]) {
    if (p["fqn"] == "model.layers.0.mlp.experts.gate_up_proj")
      p["placements"] = dockyard::Json::array({"Replicate()", "Replicate()", "Replicate()"});
  }
  const std::string bad_placement = TmpDir() + "/plan-tampered.json";
  { std::ofstream(bad_placement) << tampered.dump(); }
  Result rp = RunRun("--plan " + bad_placement);
  CHECK(rp.code == 1);
  CHECK(rp.out.find("the file places \"model.layers.0.mlp.experts.gate_up_proj\"") != std::string::npos);
  CHECK(RunRun("--plan " + plan + " --ep 4").code == 2);
}

TEST_CASE("search: a layout whose default oep would not divide ep is still searched (qwen1.5 at 120 GPUs)") {
  // ep 60 on 8-GPU nodes: the EP group spans ceil(60 / 8) = 8 nodes, rounded up to the divisor 10
  // of 60 (oep 10 x iep 6). Before, oep was 60 / 8 = 7, and the whole search failed.
  const Result r = Run("search --model testdata/hf/qwen1.5-moe-a2.7b.json --world-size 120 --top 3");
  CHECK(r.code == 0);
  CHECK(r.out.find("ranked") != std::string::npos);
  const Result d =
      Run("simulate --model testdata/hf/qwen1.5-moe-a2.7b.json --world-size 120 --ep 60 --dispatcher "
          "deredundency --seq-len 256 --json -");
  CHECK(d.code == 0);
}

TEST_CASE("search: flag values are checked like the plan's; outputs never replace inputs; no fit is exit 1 and no file") {
  Result r = Run("search --model testdata/hf/qwen3-30b-a3b.json --world-size 8 --dp-sharding ZERO1");
  CHECK(r.code == 1);  // a value not among the flag's names: invalid input (README "Exit codes")
  CHECK(r.out.find("--dp-sharding: ZERO1 not in {fsdp,zero1,ddp}") != std::string::npos);
  CHECK(Run("search --model testdata/hf/qwen3-30b-a3b.json --world-size 8 --recompute FULL").code == 1);
  CHECK(Run("search --model testdata/hf/qwen3-30b-a3b.json --world-size 8 --optimizer adam").code == 1);

  const std::string model = TmpDir() + "/model_copy.json";
  {
    std::ifstream in("testdata/hf/qwen3-30b-a3b.json");
    std::ofstream out(model);
    out << in.rdbuf();
  }
  r = Run("search --model " + model + " --world-size 8 --json " + model);
  CHECK(r.code == 1);
  CHECK(r.out.find("--json '" + model + "' is the input '" + model + "': refusing to overwrite it") != std::string::npos);
  CHECK(Run("simulate --model " + model + " --world-size 8 --ep 8 --json " + model).code == 1);
  std::ifstream check(model);
  const std::string first((std::istreambuf_iterator<char>(check)), std::istreambuf_iterator<char>());
  CHECK(first.find("\"architectures\"") != std::string::npos);  // still the HF config

  const std::string json = TmpDir() + "/nofit.json";
  r = Run("search --model testdata/hf/qwen3-30b-a3b.json --world-size 8 --gpu-memory-gib 3 --json " + json);
  CHECK(r.code == 1);
  CHECK(r.out.find("no valid layout fits the budget") != std::string::npos);
  CHECK_FALSE(Exists(json));
  r = Run("search --model testdata/hf/qwen3-30b-a3b.json --world-size 8 --gpu-memory-gib 3 --json -");
  CHECK(r.code == 1);
  CHECK(r.out.find("\"top\"") == std::string::npos);
}

TEST_CASE("search: --redundant-experts re-ranks the best layouts with each R, opt-in") {
  const std::string base =
      "search --model testdata/hf/qwen3-30b-a3b.json --world-size 16 --cluster h200-sxm --routing "
      "zipf:1.2 --top 3 --ep 8 --json -";  // ep pinned: the best layouts of the full search have ep 1
  Result r = Run(base + " --redundant-experts 0,ep");
  REQUIRE(r.code == 0);
  dockyard::Json j = dockyard::ParseJsonText(r.out, "stdout");
  // 3 layouts x 2 values of R; 128 + ep is divisible by every ep dividing 128.
  CHECK(j["redundant_experts"]["ranked"].size() + j["redundant_experts"]["over_budget"].get<size_t>() == 6);
  r = Run(base);
  REQUIRE(r.code == 0);
  CHECK(!dockyard::ParseJsonText(r.out, "stdout").contains("redundant_experts"));
  CHECK(Run(base + " --redundant-experts 0,x").code == 1);
}

TEST_CASE("search: --routing-layers is echoed, and the JSON gives the training settings as evaluated") {
  const Result r = RunStdout(
      "search --model testdata/hf/qwen3-30b-a3b.json --world-size 16 --routing-layers 3 --cluster "
      "h200-sxm --top 2 --json -");
  REQUIRE(r.code == 0);
  const dockyard::Json j = dockyard::Json::parse(r.out);
  CHECK(j["routing_layers_sampled"] == 3);
  CHECK(j["training"]["gpus_per_node"] == 8);
  CHECK(j["training"]["gpu_memory_gib"].get<double>() == j["budget_gib"].get<double>());
  CHECK(Run("search --model testdata/hf/qwen3-30b-a3b.json --world-size 16 --routing-layers 49").code == 1);  // 48 MoE layers
}

namespace {
std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}
}  // namespace

TEST_CASE("--html writes one self-contained page per report kind, beside an unchanged --json") {
  const std::string dir = TmpDir();
  // plan: the JSON written with --html equals the JSON written without it.
  Result r = Run("--model testdata/hf/qwen3-30b-a3b.json --world-size 8 --ep 8 --json " + dir + "/a.json");
  REQUIRE(r.code == 0);
  r = Run("--model testdata/hf/qwen3-30b-a3b.json --world-size 8 --ep 8 --json " + dir + "/b.json --html " + dir + "/p.html");
  REQUIRE(r.code == 0);
  CHECK(r.out.find("HTML report written to " + dir + "/p.html") != std::string::npos);
  dockyard::Json a = dockyard::ReadJsonFile(dir + "/a.json"), b = dockyard::ReadJsonFile(dir + "/b.json");
  a["generator"].erase("provenance");
  b["generator"].erase("provenance");  // the command lines differ
  a["header"].erase("provenance");
  b["header"].erase("provenance");
  CHECK(a == b);
  const std::string plan = ReadAll(dir + "/p.html");
  CHECK(plan.rfind("<!DOCTYPE html>", 0) == 0);
  for (const char* id : {"fig-mesh-dense", "fig-mesh-sparse", "fig-experts", "fig-tokens", "fig-memory", "fig-traffic"}) {
    CHECK_MESSAGE(plan.find(std::string("id=\"") + id + "\"") != std::string::npos, id);
  }
  // simulate, search and a run from the simulate plan (measured beside predicted).
  r = Run("simulate --model testdata/hf/qwen3-30b-a3b.json --world-size 8 --ep 8 --seq-len 64 --json " + dir + "/sim.json --html " + dir +
          "/sim.html");
  REQUIRE(r.code == 0);
  const std::string sim = ReadAll(dir + "/sim.html");
  CHECK(sim.find("id=\"fig-pipeline\"") != std::string::npos);
  CHECK(sim.find("id=\"fig-phases\"") != std::string::npos);
  // search: the page plots every ranked layout, the JSON keeps the first --top 5.
  r = Run("search --model testdata/hf/qwen3-30b-a3b.json --world-size 16 --cluster h200-sxm --top 5 --json " + dir +
          "/search.json --html " + dir + "/search.html");
  REQUIRE(r.code == 0);
  const dockyard::Json found = dockyard::ReadJsonFile(dir + "/search.json");
  CHECK(found["top"].size() == 5);
  const std::string search = ReadAll(dir + "/search.html");
  size_t points = 0, top_points = 0, front_points = 0;
  for (size_t at = search.find("<circle class=\"pt"); at != std::string::npos; at = search.find("<circle class=\"pt", at + 1)) {
    ++points;
    const std::string top_mark = "<circle class=\"pt top";
    top_points += search.compare(at, top_mark.size(), top_mark) == 0;
    front_points += search.substr(at, search.find('>', at) - at).find(" pareto") != std::string::npos;
  }
  // The page plots the best max(1000, --top) ranked layouts and every later one on the Pareto front
  // (search_command.h kHtmlSearchRows): here 7006 are ranked, so 1000 plus the front's later rows.
  REQUIRE(found["ranked"].get<size_t>() > 1000);
  CHECK(points >= 1000);
  CHECK(points <= 1000 + found["pareto"].size());
  CHECK(front_points >= found["pareto"].size());  // the whole front is on the page (JSON: one row per point)
  CHECK(top_points == 5);
  r = RunRun("--plan " + dir + "/sim.json --tokens-per-rank 8 --iters 1 --warmup 0 --json " + dir + "/run.json --html " + dir +
             "/run.html");
  REQUIRE(r.code == 0);
  const std::string run = ReadAll(dir + "/run.html");
  CHECK(run.find("id=\"fig-phases\"") != std::string::npos);
  CHECK(run.find("predicted beside it") != std::string::npos);
  // Every measured phase's bar carries the JSON's time, and its predicted bar the plan's.
  const dockyard::Json measured = dockyard::ReadJsonFile(dir + "/run.json")["measured"]["phases"];
  REQUIRE(!measured.empty());
  for (const auto& ph : measured) {
    CAPTURE(ph["name"]);
    CHECK(run.find(fmt::format("class=\"pbar\" data-us=\"{}\"", ph["time_us"].get<double>())) != std::string::npos);
    if (ph.contains("predicted_us")) {
      CHECK(run.find(fmt::format("class=\"pbar\" data-us=\"{}\"", ph["predicted_us"].get<double>())) != std::string::npos);
    }
  }
}

TEST_CASE("--html refuses to replace an input, '-' and a path another output uses, and writes nothing then") {
  const std::string model = TmpDir() + "/html-model.json";
  {
    std::ifstream in("testdata/hf/qwen3-30b-a3b.json");
    std::ofstream out(model);
    out << in.rdbuf();
  }
  Result r = Run("--model " + model + " --world-size 8 --ep 8 --html " + model);
  CHECK(r.code == 1);
  CHECK(r.out.find("--html '" + model + "' is the input '" + model + "': refusing to overwrite it") != std::string::npos);
  CHECK(ReadAll(model).find("\"architectures\"") != std::string::npos);  // still the HF config
  CHECK(Run("--model " + model + " --world-size 8 --ep 8 --html -").code == 2);
  CHECK(Run("--model " + model + " --world-size 8 --ep 8 --json " + TmpDir() + "/x.html --html " + TmpDir() + "/x.html").code == 2);
  CHECK(RunRun("--model " + model + " --world-size 2 --ep 2 --tokens-per-rank 2 --html " + model).code == 1);
  // Invalid degrees (ep 3 does not divide 128 experts): exit 1 and no page.
  const std::string page = TmpDir() + "/bad.html";
  CHECK(Run("--model " + model + " --world-size 3 --ep 3 --html " + page).code == 1);
  CHECK_FALSE(Exists(page));
}

TEST_CASE("simulate and search --calibration: the shipped file changes no figure and is named with its SHA-256") {
  const std::string base = "simulate --model testdata/hf/qwen3-30b-a3b.json --world-size 16 --ep 16";
  const std::string a = TmpDir() + "/cal_a.json", b = TmpDir() + "/cal_b.json";
  REQUIRE(Run(base + " --json " + a).code == 0);
  const Result r = Run(base + " --calibration calibration/h100-sxm.json --json " + b);
  REQUIRE(r.code == 0);
  CHECK(r.out.find("Calibration h100-sxm-prior (preset h100-sxm, calibration/h100-sxm.json, sha256 ") != std::string::npos);
  dockyard::Json ja = dockyard::ReadJsonFile(a), jb = dockyard::ReadJsonFile(b);
  const dockyard::Json cal = jb["calibration"];
  CHECK(cal["name"] == "h100-sxm-prior");
  CHECK(cal["sha256"].get<std::string>().size() == 64);
  ja.erase("generator");
  jb.erase("generator");
  jb.erase("calibration");
  ja.erase("header");  // the header names the calibration and the command line
  jb.erase("header");
  CHECK(ja == jb);  // the shipped calibration holds today's defaults

  // A calibration with the GEMM-by-shape ceiling halved (the default kernel-level model's GEMMs):
  // a slower step, and the search names the file.
  dockyard::Json slow = dockyard::ReadJsonFile("calibration/h100-sxm.json");
  slow["name"] = "h100-sxm-slow-gemm";
  slow["knobs"]["compute"]["gemm"]["shape_efficiency"]["value"] = 0.36;
  const std::string slow_path = TmpDir() + "/slow.json";
  std::ofstream(slow_path) << slow.dump(1);
  const std::string c = TmpDir() + "/cal_c.json";
  REQUIRE(Run(base + " --calibration " + slow_path + " --json " + c).code == 0);
  CHECK(dockyard::ReadJsonFile(c)["predicted"]["step_time_us"].get<double>() >
        dockyard::ReadJsonFile(a)["predicted"]["step_time_us"].get<double>());
  const Result s = Run("search --model testdata/hf/qwen3-30b-a3b.json --world-size 16 --top 1 --calibration " + slow_path);
  CHECK(s.code == 0);
  CHECK(s.out.find("Calibration h100-sxm-slow-gemm") != std::string::npos);

  // A calibration made for another preset: exit 1, the rule named, no file.
  const std::string d = TmpDir() + "/cal_d.json";
  const Result m = Run(base + " --cluster h200-sxm --calibration calibration/h100-sxm.json --json " + d);
  CHECK(m.code == 1);
  CHECK(m.out.find("calibration \"h100-sxm-prior\" (calibration/h100-sxm.json) is for preset \"h100-sxm\", the cluster is preset "
                   "\"h200-sxm\" (its calibration: h200-sxm.json)") != std::string::npos);
  CHECK(!Exists(d));
}

TEST_CASE("Outputs are compared as files, not spellings; the calibration is an input; dockyard-run checks outputs first") {
  const std::string dir = TmpDir();
  const std::string base = "--model testdata/hf/qwen3-30b-a3b.json --world-size 8 --ep 8";
  // The same file under two spellings: refused before anything is written (exit 2).
  Result r = Run(base + " --json " + dir + "/same.json --html " + dir + "/./same.json");
  CHECK(r.code == 2);
  CHECK(r.out.find("--html and --json name the same output") != std::string::npos);
  CHECK_FALSE(Exists(dir + "/same.json"));
  r = Run(base + " --json " + dir + "/same2.json --refit-json " + dir + "/../" + dir.substr(dir.find_last_of('/') + 1) + "/same2.json");
  CHECK(r.code == 2);
  CHECK_FALSE(Exists(dir + "/same2.json"));
  // A hard link is the same file too: search refuses it before searching, both files untouched.
  std::ofstream(dir + "/hard-a.json") << "old";
  unlink((dir + "/hard-b.html").c_str());
  REQUIRE(link((dir + "/hard-a.json").c_str(), (dir + "/hard-b.html").c_str()) == 0);
  r = Run("search --model testdata/hf/qwen3-30b-a3b.json --world-size 8 --json " + dir + "/hard-a.json --html " + dir + "/hard-b.html");
  CHECK(r.code == 2);
  CHECK(r.out.find("--html and --json name the same output (" + dir + "/hard-b.html and " + dir + "/hard-a.json)") != std::string::npos);
  CHECK(r.out.find("Rank") == std::string::npos);  // nothing searched
  CHECK(ReadAll(dir + "/hard-a.json") == "old");
  // --calibration names an input file: no output may replace it.
  const std::string cal = dir + "/cal.json";
  {
    std::ifstream in("calibration/h100-sxm.json");
    std::ofstream out(cal);
    out << in.rdbuf();
  }
  const std::string before = ReadAll(cal);
  r = Run("simulate " + base + " --calibration " + cal + " --html " + cal);
  CHECK(r.code == 1);
  CHECK(r.out.find("is the input") != std::string::npos);
  r = Run("simulate " + base + " --calibration " + cal + " --json " + cal);
  CHECK(r.code == 1);
  CHECK(ReadAll(cal) == before);
  // dockyard-run refuses an output it could not write before running the layer.
  r = RunRun("--model testdata/hf/qwen3-30b-a3b.json --world-size 2 --ep 2 --tokens-per-rank 2 --html " + dir);
  CHECK(r.code == 1);
  CHECK(r.out.find("--html '" + dir + "' is a directory") != std::string::npos);
  CHECK(r.out.find("Tokens ") == std::string::npos);  // nothing ran: no run report
  r = RunRun("--model testdata/hf/qwen3-30b-a3b.json --world-size 2 --ep 2 --tokens-per-rank 2 --json /nonexistent-dir/r.json");
  CHECK(r.code == 1);
  CHECK(r.out.find("--json '/nonexistent-dir/r.json': its directory '/nonexistent-dir' does not exist") != std::string::npos);
}

TEST_CASE("The newer families plan and check; simulate and search refuse what the cost model does not price") {
  // DeepSeek-V3.2-Exp: 671,877,944,064 parameters (planner/model/hf_config_variants_test.cc).
  const std::string plan = TmpDir() + "/dsv32-plan.json";
  Result r = Run("--model testdata/hf/deepseek-v3.2-exp.json --world-size 64 --ep 64 --json " + plan);
  REQUIRE(r.code == 0);
  CHECK(r.out.find("(671877944064)") != std::string::npos);
  dockyard::Json j = dockyard::ReadJsonFile(plan);
  CHECK(j["model"]["family"] == "deepseek_v32");
  // Qwen3-Next-80B-A3B: 79,674,391,296 parameters; 512 experts / ep 8 = 64 per EP rank.
  r = Run("--model testdata/hf/qwen3-next-80b-a3b-instruct.json --world-size 8 --ep 8");
  REQUIRE(r.code == 0);
  CHECK(r.out.find("(79674391296)") != std::string::npos);
  CHECK(r.out.find("64 per EP rank") != std::string::npos);
  CHECK(Run("check --model testdata/hf/qwen3-next-80b-a3b-instruct.json --world-size 8 --ep 8 --gpu-memory-gib 4000").code == 0);

  // simulate refuses, names the field, and writes nothing.
  const std::string sim = TmpDir() + "/next-sim.json";
  r = Run("simulate --model testdata/hf/qwen3-next-80b-a3b-instruct.json --world-size 8 --ep 8 --json " + sim);
  CHECK(r.code == 1);
  CHECK(r.out.find("/attention_layer_types/0 (HF layer_types / full_attention_interval) = \"linear_attention\"") != std::string::npos);
  CHECK_FALSE(Exists(sim));
  r = Run("simulate --model testdata/hf/deepseek-v3.2-exp.json --world-size 64 --ep 64 --json " + sim);
  CHECK(r.code == 1);
  CHECK(r.out.find("/attention/indexer/index_topk (HF index_topk) = 2048") != std::string::npos);
  CHECK_FALSE(Exists(sim));
  r = Run("search --model testdata/hf/qwen3-next-80b-a3b-instruct.json --world-size 8 --top 3");
  CHECK(r.code == 1);
  CHECK(r.out.find("Gated DeltaNet linear attention (36 of 48 layers) is not in the cost model") != std::string::npos);

  // MiniMax-M2 and ERNIE-4.5 are full softmax attention in every layer: simulate prices them.
  r = Run("--model testdata/hf/minimax-m2.7-nvfp4.json --world-size 16 --ep 16");
  REQUIRE(r.code == 0);
  CHECK(r.out.find("(228689764864)") != std::string::npos);
  r = Run("simulate --model testdata/hf/minimax-m2.7-nvfp4.json --world-size 16 --ep 16 --seq-len 4096 --json " + sim);
  REQUIRE(r.code == 0);
  CHECK(dockyard::ReadJsonFile(sim)["predicted"]["step_time_us"].get<double>() > 0);
  r = Run("simulate --model testdata/hf/ernie-4.5-21b-a3b.json --world-size 8 --ep 8 --seq-len 4096 --json " + sim);
  REQUIRE(r.code == 0);
  CHECK(dockyard::ReadJsonFile(sim)["predicted"]["step_time_us"].get<double>() > 0);

  // Ling 2.0 is GQA in every layer with group-limited sigmoid routing: plan counts the HF
  // safetensors total, simulate prices it, and its MTP modules (--mtp-layers) add time.
  r = Run("--model testdata/hf/ling-flash-2.0.json --world-size 8 --ep 8");
  REQUIRE(r.code == 0);
  CHECK(r.out.find("(102889705216)") != std::string::npos);
  CHECK(r.out.find("model.layers.{L}.attention.query_key_value.weight") != std::string::npos);
  r = Run("simulate --model testdata/hf/ling-flash-2.0.json --world-size 8 --ep 8 --seq-len 4096 --json " + sim);
  REQUIRE(r.code == 0);
  const double ling_step = dockyard::ReadJsonFile(sim)["predicted"]["step_time_us"].get<double>();
  CHECK(ling_step > 0);
  r = Run("simulate --model testdata/hf/ling-flash-2.0.json --world-size 8 --ep 8 --seq-len 4096 --mtp-layers 1 --json " + sim);
  REQUIRE(r.code == 0);
  CHECK(dockyard::ReadJsonFile(sim)["predicted"]["step_time_us"].get<double>() > ling_step);
}

TEST_CASE("dockyard-plan simulate counts node crossings in the memory and traffic tables by the NVLink domain, as the time model does") {
  // gb200-nvl72: trays of 4 GPUs in one 72-GPU NVLink domain (network.h NvlinkDomainGpus = 72).
  // The plan takes 72 as its node: the 16 ranks of EP 16 sit in one domain, so the deepep
  // dispatcher's RDMA receive buffer holds (ceil(16 / 72) - 1) = 0 rows of other nodes (counted by
  // trays of 4 it would be 3 x the dispatched tokens), and the deepep routing sample agrees with
  // the plan (counted by trays the run stopped: "give --gpus-per-node 72"). The flex dispatcher runs
  // the hybridep backend: DeepEP's own kernels need nodes of 8 NVLink peers, so they cannot run 16
  // ranks of one 72-GPU domain (flex_backend_limits.h; issue 31 item 2 changed this from deepep).
  const std::string nvl = TmpDir() + "/nvl72.json", given = TmpDir() + "/nvl72-given.json", h100 = TmpDir() + "/h100.json";
  const std::string base =
      "simulate --model testdata/hf/qwen3-30b-a3b.json --world-size 16 --ep 16 --seq-len 1024 --dispatcher deepep "
      "--moe-flex-dispatcher-backend hybridep ";
  const Result r = Run(base + "--cluster gb200-nvl72 --json " + nvl);
  REQUIRE(r.code == 0);
  dockyard::Json j = dockyard::ReadJsonFile(nvl);
  CHECK(j["training"]["gpus_per_node"] == 72);
  CHECK(j["cluster"]["gpus_per_node"] == 4);
  // The same plan as with --gpus-per-node 72 given: the same predictions and memory table.
  const Result g = Run(base + "--cluster gb200-nvl72 --gpus-per-node 72 --json " + given);
  REQUIRE(g.code == 0);
  CHECK(dockyard::ReadJsonFile(given)["predicted"] == j["predicted"]);
  // Text reports equal but for the header's "Command" line (this run's command line).
  auto without_command = [](const std::string& text) {
    std::istringstream in(text);
    std::string line, kept;
    while (std::getline(in, line)) {
      if (line.rfind("Command ", 0) != 0) kept += line + "\n";
    }
    return kept;
  };
  CHECK(without_command(Run(base + "--cluster gb200-nvl72").out) ==
        without_command(Run(base + "--cluster gb200-nvl72 --gpus-per-node 72").out));
  // h100-sxm (its NVLink domain is its 8-GPU node): unchanged.
  REQUIRE(Run(base + "--cluster h100-sxm --json " + h100).code == 0);
  CHECK(dockyard::ReadJsonFile(h100)["training"]["gpus_per_node"] == 8);
}

TEST_CASE("the deepep dispatcher's backend: DeepEP's rank limits refuse alike in plan, check, simulate and search --explain") {
  // DeepSeek-V3 at ep 256: DeepEP's Buffer takes at most 8 x 20 = 160 ranks (csrc/legacy/buffer.hpp).
  const std::string v3 = "--model testdata/hf/deepseek-v3.json --world-size 256 --ep 256 --dispatcher deepep";
  const std::string limit =
      "dockyard-plan: error: --dispatcher deepep (torchtitan comm_backend deepep) with --ep 256: DeepEP's "
      "normal-mode Buffer takes at most 160 ranks (8 NVLink peers x 20 RDMA nodes; DeepEP csrc/legacy/buffer.hpp)";
  const std::string json = TmpDir() + "/deepep-256.json";
  for (const std::string& command : {v3, "check " + v3 + " --gpu-memory-gib 141", "simulate " + v3 + " --cluster h200-sxm"}) {
    CAPTURE(command);
    const Result r = Run(command + " --json " + json);
    CHECK(r.code == 1);
    CHECK(r.out.find(limit) != std::string::npos);
    CHECK(access(json.c_str(), F_OK) != 0);  // no report written
  }
  // Kimi-K2 (384 experts) at ep 192: over 160 too.
  Result r = Run("--model testdata/hf/kimi-k2-instruct.json --world-size 192 --ep 192 --dispatcher deepep");
  CHECK(r.code == 1);
  CHECK(r.out.find("with --ep 192: DeepEP's normal-mode Buffer takes at most 160 ranks") != std::string::npos);
  // Qwen3-30B on 4-GPU nodes, ep 8 over two nodes: 4 NVLink peers per node, DeepEP's intranode mode needs 8.
  r = Run("check --model testdata/hf/qwen3-30b-a3b.json --world-size 8 --ep 8 --dispatcher deepep --gpus-per-node 4 --gpu-memory-gib 141");
  CHECK(r.code == 1);
  CHECK(r.out.find("with --ep 8: DeepEP's intranode mode needs all 8 ranks NVLink peers in one node, but a node holds 4") !=
        std::string::npos);
  // ep 40 = 5 nodes of 8: launch.cuh instantiates 2, 3, 4, 6, 8, 12, 16, 18, 20 nodes (a 2-layer Qwen3 with 80 experts).
  dockyard::Json q = dockyard::ReadJsonFile("testdata/hf/qwen3-30b-a3b.json");
  q["num_hidden_layers"] = 2;
  q["num_experts"] = 80;
  const std::string q80 = TmpDir() + "/qwen3-80-experts.json";
  { std::ofstream(q80) << q.dump(); }
  r = Run("--model " + q80 + " --world-size 40 --ep 40 --dispatcher deepep");
  CHECK(r.code == 1);
  CHECK(r.out.find("with --ep 40: 40 / 8 = 5 nodes, but DeepEP's internode kernels are instantiated for 2, 3, 4, 6, 8, 12, 16, 18 or 20 "
                   "nodes only (DeepEP csrc/kernels/legacy/launch.cuh)") != std::string::npos);
  // ncclep: no DeepEP limits, Megatron-Core's backend only (torchtitan's comm_backend has none such).
  CHECK(Run("--model " + q80 + " --world-size 40 --ep 40 --dispatcher deepep --moe-flex-dispatcher-backend ncclep --convention megatron")
            .code == 0);
  r = Run("--model " + q80 + " --world-size 40 --ep 40 --dispatcher deepep --moe-flex-dispatcher-backend ncclep");
  CHECK(r.code == 1);
  CHECK(r.out.find("--moe-flex-dispatcher-backend ncclep: Megatron-Core's backend (transformer_config.py moe_flex_dispatcher_backend); "
                   "torchtitan's EP comm_backend takes standard, deepep, hybridep or minimal_async_ep") != std::string::npos);
  // ep 64 = 8 nodes of 8: runs, and the report names the backend beside the dispatcher.
  r = Run("--model testdata/hf/deepseek-v3.json --world-size 256 --ep 64 --dispatcher deepep");
  CHECK(r.code == 0);
  CHECK(r.out.find("dispatcher deepep (backend deepep): sent") != std::string::npos);
  r = Run("--model testdata/hf/deepseek-v3.json --world-size 256 --ep 64 --dispatcher deepep --moe-flex-dispatcher-backend ncclep "
          "--convention megatron --json -");
  REQUIRE(r.code == 0);
  const dockyard::Json plan = dockyard::ParseJsonText(r.out, "stdout");
  CHECK(plan["training"]["moe_flex_dispatcher_backend"] == "ncclep");
  CHECK(plan["communication"]["moe_flex_dispatcher_backend"] == "ncclep");
  // The backend belongs to the deepep dispatcher.
  r = Run("--model testdata/hf/deepseek-v3.json --world-size 256 --ep 64 --moe-flex-dispatcher-backend hybridep");
  CHECK(r.code == 1);
  CHECK(r.out.find("--moe-flex-dispatcher-backend: \"hybridep\" is set, but the backend only applies to the deepep dispatcher") !=
        std::string::npos);
  r = Run("--model testdata/hf/deepseek-v3.json --world-size 256 --ep 64 --dispatcher deepep --moe-flex-dispatcher-backend hybrid");
  CHECK(r.code == 1);  // not a backend name: bad input, as --dispatcher bogus
  CHECK(r.out.find("dockyard-plan: error: --moe-flex-dispatcher-backend: hybrid not in {deepep,hybridep,ncclep}") != std::string::npos);
  // search --explain gives the plan path's verdict: on gb200-nvl72 DeepEP cannot span the 72-GPU domain.
  const std::string search = "search --model testdata/hf/qwen3-30b-a3b.json --world-size 16 --cluster gb200-nvl72 --dispatcher deepep";
  r = Run(search + " --explain ep=16,etp=1");
  CHECK(r.code == 0);
  CHECK(r.out.find("no ranked layout matches") != std::string::npos);
  CHECK(r.out.find("with --ep 16: DeepEP's internode mode needs exactly 8 of the group's ranks per node, its NVLink peers "
                   "(NUM_MAX_NVL_PEERS; DeepEP csrc/legacy/buffer.hpp), but a node of 72 ranks (--gpus-per-node / the cluster's NVLink "
                   "domain) holds 16; only hybridep spans a multi-node NVLink domain") != std::string::npos);
  // hybridep ranks it, and its rows name the backend.
  r = Run(search + " --moe-flex-dispatcher-backend hybridep --explain ep=16,etp=1 --json -");
  REQUIRE(r.code == 0);
  const dockyard::Json found = dockyard::ParseJsonText(r.out, "stdout");
  CHECK(found["explain"]["layout"]["ep"] == 16);
  CHECK(found["explain"]["layout"]["dispatcher"] == "deepep");
  CHECK(found["explain"]["layout"]["moe_flex_dispatcher_backend"] == "hybridep");
  for (const auto& row : found["top"]) CHECK(row["moe_flex_dispatcher_backend"] == "hybridep");  // every row here is deepep (pinned)
  CHECK(Run(search + " --moe-flex-dispatcher-backend hybridep --top 3").out.find("deepep[hybridep]") != std::string::npos);
}

TEST_CASE("hybridep spans gb200-nvl72's NVLink domain in whole domains: ep 72 and 144 run, ep 96 is refused") {
  // A 2-layer Qwen3 with 288 experts (72, 96 and 144 divide it).
  dockyard::Json q = dockyard::ReadJsonFile("testdata/hf/qwen3-30b-a3b.json");
  q["num_hidden_layers"] = 2;
  q["num_experts"] = 288;
  const std::string q288 = TmpDir() + "/qwen3-288-experts.json";
  { std::ofstream(q288) << q.dump(); }
  const std::string base = "simulate --model " + q288 + " --seq-len 1024 --cluster gb200-nvl72 --dispatcher deepep --moe-flex-dispatcher-backend hybridep";
  CHECK(Run(base + " --world-size 144 --ep 72").code == 0);   // one domain per EP group
  CHECK(Run(base + " --world-size 144 --ep 144").code == 0);  // 144 = 2 x 72
  // 96 ranks: 72 in one domain, 24 in the next (96 % 72 = 24; hybrid_ep_buffer.py).
  const Result r = Run(base + " --world-size 96 --ep 96");
  CHECK(r.code == 1);
  CHECK(r.out.find("--moe-flex-dispatcher-backend hybridep with --ep 96: HybridEP splits a group spanning NVLink domains into domains of "
                   "72 ranks") != std::string::npos);
  // The default backend, DeepEP, refuses ep 72 on the domain: 72 / 8 = 9 nodes are not instantiated (launch.cuh).
  CHECK(Run("simulate --model " + q288 + " --seq-len 1024 --cluster gb200-nvl72 --dispatcher deepep --world-size 144 --ep 72").code == 1);
}

TEST_CASE("search --global-batch-size: every row runs it; a batch that divides no layout is exit 1 with the counts and no file") {
  const std::string base = "search --model testdata/hf/qwen3-30b-a3b.json --world-size 16 --cluster h200-sxm --top 5";
  Result r = Run(base + " --global-batch-size 64 --tp 2 --recompute full --dispatcher all_to_all --json -");
  REQUIRE(r.code == 0);
  const dockyard::Json j = dockyard::ParseJsonText(r.out, "stdout");
  CHECK(j["global_batch_size"] == 64);
  CHECK(j["global_batch_tokens"] == 64 * 4096);
  REQUIRE(!j["top"].empty());
  for (const auto& row : j["top"]) {
    CHECK(row["sequences_per_step"] == 64);  // dp x mbs x micro-batches per step
    CHECK(row["tp"] == 2);                   // pinned
    CHECK(row["recompute"] == "full");
    CHECK(row["dispatcher"] == "all_to_all");
    CHECK(row["phase_breakdown_us"].size() > 0);
  }
  CHECK(!j["pareto"].empty());
  // 4M tokens = 1024 sequences of 4096.
  r = Run(base + " --global-batch-tokens 4194304 --pp 2 --json -");
  REQUIRE(r.code == 0);
  const dockyard::Json tokens_report = dockyard::ParseJsonText(r.out, "stdout");  // kept alive for the loop
  for (const auto& row : tokens_report["top"]) {
    CHECK(row["sequences_per_step"] == 1024);
    CHECK(row["pp"] == 2);
  }
  // 3 sequences at micro-batch 2 divide no layout.
  const std::string json = TmpDir() + "/gbs_none.json";
  r = Run(base + " --global-batch-size 3 --micro-batch-size 2 --json " + json);
  CHECK(r.code == 1);
  CHECK(r.out.find("global batch not divisible") != std::string::npos);
  CHECK(r.out.find("0 ranked") != std::string::npos);
  // No candidate broke a rule or the budget: the message names the batch, not the budget.
  CHECK(r.out.find("the global batch (3 sequences) divides no layout: it must be a multiple of dp x micro_batch_size") !=
        std::string::npos);
  CHECK_FALSE(Exists(json));
  // A pin of 0 would silently mean "searched": refused, like simulate's degrees.
  r = Run(base + " --tp 0");
  CHECK(r.code == 1);  // a value out of range is invalid input (exit 1); a malformed one is a usage error (2)
  CHECK(r.out.find("--tp: a pinned degree must be >= 1, got 0") != std::string::npos);
  // tp 3 does not divide 16 GPUs: refused before the search, naming the pin and the rule.
  r = Run(base + " --tp 3");
  CHECK(r.code == 1);
  CHECK(r.out.find("--tp 3 does not divide --world-size 16 (every degree is a factor of the world size)") != std::string::npos);
  r = Run("search --model testdata/hf/qwen3-30b-a3b.json --world-size -1");
  CHECK(r.code != 0);
  CHECK(r.out.find("--world-size") != std::string::npos);
  CHECK(r.out.find("--global-batch-size") == std::string::npos);
  CHECK(Run(base + " --global-batch-size 64 --global-batch-tokens 262144").code == 2);  // one of them
  CHECK(Run(base + " --global-batch-tokens 4097").code == 1);                           // not whole sequences
}

TEST_CASE("search --explain: the winner says rank 1") {
  const std::string base = "search --model testdata/hf/qwen3-30b-a3b.json --world-size 16 --cluster h200-sxm --top 1 --json -";
  Result r = Run(base);
  REQUIRE(r.code == 0);
  const dockyard::Json w = dockyard::ParseJsonText(r.out, "stdout")["top"][0];
  const std::string query = fmt::format(
      "pp={},dpr={},dps={},cp={},tp={},ep={},etp={},vpp={},mbs={},recompute={},dispatcher={},dp_sharding={}", w["pp"].get<int64_t>(),
      w["dp_replicate"].get<int64_t>(), w["dp_shard"].get<int64_t>(), w["cp"].get<int64_t>(), w["tp"].get<int64_t>(),
      w["ep"].get<int64_t>(), w["etp"].get<int64_t>(), w["vpp"].get<int64_t>(), w["micro_batch_size"].get<int64_t>(),
      w["recompute"].get<std::string>(), w["dispatcher"].get<std::string>(), w["dp_sharding"].get<std::string>());
  r = Run(base + " --explain " + query);
  REQUIRE(r.code == 0);
  CHECK(dockyard::ParseJsonText(r.out, "stdout")["explain"]["rank"] == 1);
  r = Run("search --model testdata/hf/qwen3-30b-a3b.json --world-size 16 --cluster h200-sxm --top 1 --explain " + query);
  REQUIRE(r.code == 0);
  CHECK(r.out.find("rank 1 of") != std::string::npos);
  CHECK(Run("search --model testdata/hf/qwen3-30b-a3b.json --world-size 16 --explain tpp=2").code == 1);
  // overlap= takes the words the flag takes (CLI11's flag parser: yes is on), under Megatron,
  // where the EP overlap is searched; a word the flag refuses is exit 1 naming the item.
  const std::string megatron = "search --model testdata/hf/qwen3-30b-a3b.json --world-size 16 --convention megatron --top 1 --explain ";
  r = Run(megatron + "tp=1,pp=1,ep=8,overlap=yes");
  REQUIRE(r.code == 0);
  CHECK(r.out.find("Explain    \"tp=1,pp=1,ep=8,overlap=yes\": rank ") != std::string::npos);
  r = Run(megatron + "tp=1,overlap=maybe");
  CHECK(r.code == 1);
  CHECK(r.out.find("overlap=maybe: expected on or off") != std::string::npos);
}

TEST_CASE("check --global-batch-size: the micro-batches in flight follow the global batch, as simulate and search count them") {
  // 16 GPUs, pp 4, ep 4: dp_shard 4. 8 sequences / (4 dp x micro-batch 1) = 2 micro-batches, so
  // stage 0 holds 2 in flight (1F1B: min(pp - stage, M)) instead of the default M = pp = 4 --
  // the same plan as --num-microbatches 2. Under megatron: torchtitan's 1F1B refuses 2 micro-batches
  // on 4 stages (PyTorch's Schedule1F1B; ValidateSingleStageMicrobatches), Megatron's takes them.
  const std::string base =
      "check --model testdata/hf/qwen3-30b-a3b.json --world-size 16 --pp 4 --ep 4 --gpu-memory-gib 80 --convention megatron";
  Result gbs = Run(base + " --global-batch-size 8");
  REQUIRE(gbs.code == 0);
  CHECK(gbs.out.find("Global batch 8 sequences (32768 tokens): 2 micro-batches of 1 per data-parallel rank") != std::string::npos);
  const Result pinned = Run(base + " --num-microbatches 2");
  REQUIRE(pinned.code == 0);
  auto memory = [](const std::string& out) { return out.substr(out.find("Memory     per rank")); };
  CHECK(memory(gbs.out) == memory(pinned.out));
  CHECK(memory(gbs.out) != memory(Run(base).out));  // the default (4 micro-batches) holds more
  CHECK(Run(base + " --global-batch-tokens 32768").out.find("Global batch 8 sequences") != std::string::npos);  // 8 x 4096
  // 7 sequences do not divide over 4 data-parallel ranks: exit 1 naming the rule.
  const Result bad = Run(base + " --global-batch-size 7");
  CHECK(bad.code == 1);
  CHECK(bad.out.find("global batch size 7 is not a multiple of dp (4) x micro_batch_size (1)") != std::string::npos);
}

TEST_CASE("simulate --global-batch-size: Megatron fills one schedule; torchtitan too, or accumulates schedules of --num-microbatches") {
  const std::string base = "simulate --model testdata/hf/qwen3-30b-a3b.json --world-size 16 --pp 2 --ep 8 --seq-len 1024";
  // dp = 16 / 2 = 8; 128 sequences / (8 x 1) = 16 micro-batches.
  Result r = Run(base + " --convention megatron --global-batch-size 128");
  REQUIRE(r.code == 0);
  CHECK(r.out.find("16 micro-batches of 1 per data-parallel rank = 1 schedule(s) of 16") != std::string::npos);
  r = Run(base + " --global-batch-size 128");  // torchtitan: local_batch_size 128 / 8 = 16, one schedule
  REQUIRE(r.code == 0);
  CHECK(r.out.find("16 micro-batches of 1 per data-parallel rank = 1 schedule(s) of 16") != std::string::npos);
  r = Run(base + " --global-batch-size 128 --num-microbatches 2");  // schedules of 2: 16 / 2 = 8 accumulation steps
  REQUIRE(r.code == 0);
  CHECK(r.out.find("16 micro-batches of 1 per data-parallel rank = 8 schedule(s) of 2") != std::string::npos);
  r = Run(base + " --global-batch-size 100");  // 100 / 8 is not whole
  CHECK(r.code == 1);
  CHECK(r.out.find("global batch size 100 is not a multiple of dp (8) x micro_batch_size (1)") != std::string::npos);
}

TEST_CASE("search: Megatron's EP overlap is searched off and on (deepep too), and pinned on or off") {
  const std::string base =
      "search --model testdata/hf/qwen3-30b-a3b.json --world-size 8 --convention megatron --search-dispatchers deepep --top 100000 "
      "--json -";
  // Counts rows by (dispatcher, overlap).
  auto rows = [&](const std::string& extra) {
    const Result r = RunStdout(base + extra);
    REQUIRE(r.code == 0);
    std::map<std::pair<std::string, bool>, int> n;
    const dockyard::Json j = dockyard::Json::parse(r.out);
    for (const auto& row : j.at("top")) ++n[{row.at("dispatcher").get<std::string>(), row.at("overlap_moe_ep_comm").get<bool>()}];
    return n;
  };
  const auto searched = rows("");
  CHECK(searched.count({"all_to_all", false}) == 1);
  CHECK(searched.count({"all_to_all", true}) == 1);
  CHECK(searched.count({"deepep", false}) == 1);
  CHECK(searched.count({"deepep", true}) == 1);  // Megatron allows the overlap with the flex dispatcher
  for (const std::string off : {" --no-overlap-moe-expert-parallel-comm", " --overlap-moe-expert-parallel-comm=false"}) {
    const auto n = rows(off);
    CHECK(n.count({"all_to_all", true}) == 0);
    CHECK(n.count({"deepep", true}) == 0);
    CHECK(n.at({"all_to_all", false}) == searched.at({"all_to_all", false}));  // exactly the unpinned search's off rows
    CHECK(n.at({"deepep", false}) == searched.at({"deepep", false}));
  }
  for (const std::string on : {" --overlap-moe-expert-parallel-comm", " --overlap-moe-expert-parallel-comm=true"}) {
    const auto n = rows(on);
    CHECK(n.count({"all_to_all", false}) == 0);
    CHECK(n.count({"deepep", false}) == 0);
    CHECK(n.at({"deepep", true}) == searched.at({"deepep", true}));
  }
  const Result both = Run(base + " --overlap-moe-expert-parallel-comm --no-overlap-moe-expert-parallel-comm");
  CHECK(both.code == 2);
  CHECK(both.out.find("--overlap-moe-expert-parallel-comm: pinned more than once") != std::string::npos);
}

TEST_CASE("dockyard-plan simulate --recompute selective --selective-ac-option op: between none and full, torchtitan only") {
  // torchtitan's per-op policy keeps more than full recomputation and less than none, and re-runs
  // less than full in backward (planner/model/op_sac_test.cc has the figures by hand).
  auto sim = [](const std::string& recompute, const std::string& name) {
    const std::string out = TmpDir() + "/" + name + ".json";
    Result r =
        Run("simulate --model testdata/hf/qwen3-30b-a3b.json --world-size 16 --ep 16 --seq-len 2048 --convention torchtitan "
            "--recompute " +
            recompute + " --json " + out);
    REQUIRE(r.code == 0);
    return dockyard::ReadJsonFile(out);
  };
  const dockyard::Json none = sim("none", "op_none"), op = sim("selective --selective-ac-option op", "op_op"),
                       full = sim("full", "op_full");
  CHECK(op["training"]["selective_ac_option"] == "op");
  auto peak = [](const dockyard::Json& j) { return j["memory"]["worst_peak_bytes"].get<int64_t>(); };
  auto step = [](const dockyard::Json& j) { return j["predicted"]["step_time_us"].get<double>(); };
  CHECK(peak(none) > peak(op));
  CHECK(peak(op) > peak(full));
  CHECK(step(none) < step(op));
  CHECK(step(op) < step(full));
  Result mega =
      Run("simulate --model testdata/hf/qwen3-30b-a3b.json --world-size 16 --ep 16 --convention megatron --recompute selective "
          "--selective-ac-option op");
  CHECK(mega.code == 1);
  CHECK(mega.out.find("per-op selective activation checkpointing needs --convention torchtitan") != std::string::npos);
}

TEST_CASE("search and simulate give the same step time for the same layout and flags (one routing-layer default)") {
  // Both sample the same MoE layers by default (cost.h kDefaultRoutingLayers), so a search row
  // is what simulate predicts for that layout: the same double, for every dispatcher.
  struct Layout {
    std::string flags;
  };
  const std::vector<Layout> layouts = {
      {"--world-size 16 --pp 2 --tp 2 --ep 4 --micro-batch-size 1 --recompute selective --dispatcher all_to_all --global-batch-size 32"},
      {"--world-size 32 --pp 1 --tp 1 --ep 16 --micro-batch-size 2 --recompute full --dispatcher deepep --global-batch-size 64"},
      {"--world-size 32 --pp 1 --tp 1 --ep 16 --micro-batch-size 2 --recompute full --dispatcher allgather --global-batch-size 64"},
  };
  for (const Layout& l : layouts) {
    CAPTURE(l.flags);
    const std::string flags =
        "--model testdata/hf/qwen3-30b-a3b.json --cluster h200-sxm --routing zipf:1.2 --cp 1 --etp 1 --dp-replicate 1 "
        "--dp-sharding fsdp " +
        l.flags;
    Result s = Run("search " + flags + " --vpp 1 --json -");
    REQUIRE(s.code == 0);
    const dockyard::Json searched = dockyard::ParseJsonText(s.out, "stdout");
    REQUIRE(searched["top"].size() == 1);  // every dimension pinned: one layout
    Result m = Run("simulate " + flags + " --json -");
    REQUIRE(m.code == 0);
    const dockyard::Json simulated = dockyard::ParseJsonText(m.out, "stdout");
    CHECK(simulated["routing_layers_sampled"] == 4);
    // Exact: the same routing draws priced by the same cost model (JSON doubles round-trip).
    CHECK(searched["top"][0]["step_time_us"].get<double>() == simulated["predicted"]["step_time_us"].get<double>());
  }
}

// `search` with every dimension pinned by `flags` (plus `search_only`: flags simulate does not
// take) and `simulate` with `flags`: the search's JSON (one row) and simulate's.
std::pair<dockyard::Json, dockyard::Json> SearchBesideSimulate(const std::string& flags, const std::string& search_only) {
  const Result s = RunStdout("search " + flags + search_only + " --json -");
  REQUIRE(s.code == 0);
  dockyard::Json searched = dockyard::Json::parse(s.out);
  REQUIRE(searched.at("top").size() == 1);
  const Result m = RunStdout("simulate " + flags + " --json -");
  REQUIRE(m.code == 0);
  return {std::move(searched), dockyard::Json::parse(m.out)};
}

TEST_CASE("search takes the FP8 settings: a row has simulate's step time and peak under megatron FP8") {
  // Megatron (TransformerEngine) keeps FP8 weight copies and FP8-saved inputs; --fp8-dispatch and
  // --fp8-param-gather (zero1) change the dispatch rows and the step's parameter all-gather.
  const std::string flags =
      "--model testdata/hf/qwen3-30b-a3b.json --world-size 16 --convention megatron --pp 2 --tp 2 --ep 4 --cp 1 --etp 1 "
      "--dp-replicate 1 --vpp 1 --micro-batch-size 1 --recompute selective --dp-sharding zero1 --dispatcher all_to_all "
      "--global-batch-size 32 --precision fp8 --fp8-recipe blockwise --fp8-dispatch --fp8-param-gather";
  const auto [searched, simulated] = SearchBesideSimulate(flags, " --no-overlap-moe-expert-parallel-comm");
  CHECK(searched["top"][0]["step_time_us"].get<double>() == simulated["predicted"]["step_time_us"].get<double>());
  CHECK(searched["top"][0]["peak_bytes"] == simulated["memory"]["worst_peak_bytes"]);
  // The FP8 settings reach the search: in BF16 the same layout has another step time and peak.
  const std::string bf16 = flags.substr(0, flags.find(" --precision fp8"));
  const dockyard::Json plain = dockyard::Json::parse(RunStdout("search " + bf16 + " --no-overlap-moe-expert-parallel-comm --json -").out);
  CHECK(plain["top"][0]["step_time_us"].get<double>() != searched["top"][0]["step_time_us"].get<double>());
  CHECK(plain["top"][0]["peak_bytes"] != searched["top"][0]["peak_bytes"]);
}

TEST_CASE("search takes --overlap-grad-reduce / --overlap-param-gather: a row has simulate's step time with them") {
  // Megatron-Core DDP hides the step-end gradient reduce under the last backward and the zero1
  // parameter all-gather under the first forward (cost/step.cc ExposedDpStepCommUs): dp_shard 2 here, so the
  // step-end DP communication is real and the overlapped row is faster than the plain one.
  const std::string plain_flags =
      "--model testdata/hf/qwen3-30b-a3b.json --world-size 16 --convention megatron --pp 2 --tp 2 --ep 4 --cp 1 --etp 1 "
      "--dp-replicate 1 --vpp 1 --micro-batch-size 1 --recompute selective --dp-sharding zero1 --dispatcher all_to_all "
      "--global-batch-size 32";
  const std::string flags = plain_flags + " --overlap-grad-reduce --overlap-param-gather";
  const auto [searched, simulated] = SearchBesideSimulate(flags, " --no-overlap-moe-expert-parallel-comm");
  CHECK(searched["top"][0]["step_time_us"].get<double>() == simulated["predicted"]["step_time_us"].get<double>());
  const dockyard::Json plain =
      dockyard::Json::parse(RunStdout("search " + plain_flags + " --no-overlap-moe-expert-parallel-comm --json -").out);
  CHECK(plain["top"][0]["step_time_us"].get<double>() > searched["top"][0]["step_time_us"].get<double>());
  // --overlap-param-gather needs zero1 (megatron/training/arguments.py): a ddp-pinned search has no valid layout.
  const std::string ddp = flags.substr(0, flags.find(" --dp-sharding")) + " --dp-sharding ddp" + flags.substr(flags.find(" --dispatcher"));
  const Result refused = Run("search " + ddp + " --no-overlap-moe-expert-parallel-comm");
  CHECK(refused.code != 0);
  CHECK(refused.out.find("--overlap-param-gather: only supported with the distributed optimizer") != std::string::npos);
}

TEST_CASE("search --routing sizes each layout's memory by its own sample, as simulate does") {
  // Zipf routing on Qwen3-30B-A3B, ep 8: the sample's most loaded rank receives about 2.4x the mean
  // rows. simulate sizes the all-to-all buffers and expert activations by that (SampleImbalance);
  // the search row of the same layout must have simulate's peak and step time.
  const std::string flags =
      "--model testdata/hf/qwen3-30b-a3b.json --world-size 32 --pp 2 --tp 1 --ep 8 --cp 8 --etp 1 --dp-replicate 1 --vpp 4 "
      "--micro-batch-size 4 --recompute selective --dp-sharding fsdp --dispatcher all_to_all --global-batch-size 32 "
      "--routing zipf:1.2";
  const auto [searched, simulated] = SearchBesideSimulate(flags, "");
  CHECK(searched["top"][0]["step_time_us"].get<double>() == simulated["predicted"]["step_time_us"].get<double>());
  CHECK(searched["top"][0]["peak_bytes"] == simulated["memory"]["worst_peak_bytes"]);
  CHECK(searched["header"]["imbalance_per_layout"] == true);
  // Without --routing the same layout is sized by --imbalance 1.0: a lower peak.
  const std::string uniform = flags.substr(0, flags.find(" --routing"));
  const dockyard::Json plain = dockyard::Json::parse(RunStdout("search " + uniform + " --json -").out);
  CHECK(plain["top"][0]["peak_bytes"].get<int64_t>() < searched["top"][0]["peak_bytes"].get<int64_t>());
  // --imbalance beside --routing is refused by search as by simulate.
  const Result both = Run("search " + flags + " --imbalance 2");
  CHECK(both.code == 2);
  CHECK(both.out.find("--imbalance and --routing both size the received rows") != std::string::npos);
}

TEST_CASE("a --gpu-memory-gib above the cluster's memory per GPU is warned about in search and simulate") {
  // h100-sxm holds 79.6 GiB per GPU (planner/cost/cluster.cc): a 200 GiB budget is none of its GPUs'.
  for (const std::string cmd : {"search --world-size 256 --top 1", "simulate --world-size 256 --ep 64"}) {
    CAPTURE(cmd);
    const Result over = Run(cmd + " --gpu-memory-gib 200");
    CHECK(over.out.find("warning: --gpu-memory-gib 200 is above h100-sxm's 79.6 GiB per GPU") != std::string::npos);
    const Result within = Run(cmd + " --gpu-memory-gib 79");
    CHECK(within.out.find("warning: --gpu-memory-gib") == std::string::npos);
  }
}

TEST_CASE("search --selective-ac-option without --recompute searches selective recompute only") {
  // torchtitan's per-layer and per-op options are forms of selective recompute: they pin it.
  for (const std::string option : {"op", "2"}) {
    CAPTURE(option);
    const Result r = RunStdout(
        "search --model testdata/hf/qwen3-30b-a3b.json --world-size 16 --global-batch-size 64 --top 5 --json - "
        "--selective-ac-option " +
        option);
    REQUIRE(r.code == 0);
    const dockyard::Json j = dockyard::Json::parse(r.out);
    REQUIRE(!j.at("top").empty());
    for (const auto& row : j.at("top")) CHECK(row.at("recompute") == "selective");
  }
}

TEST_CASE("search takes Megatron's account-for flags: each candidate's layers split as simulate splits them") {
  // Qwen3-235B-A22B, 94 layers: + embedding + loss = 96 = 8 stages x 12 (Megatron-Bridge's uneven
  // split); without the flags the 94 layers split 12 x 6 + 11 x 2.
  const std::string flags =
      "--model testdata/fidelity/models/qwen3-235b-a22b.json --world-size 256 --convention megatron --pp 8 --tp 2 --ep 8 --cp 1 "
      "--etp 1 --dp-replicate 1 --vpp 4 --micro-batch-size 1 --recompute full --dp-sharding zero1 --dispatcher all_to_all "
      "--global-batch-size 512 --account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split";
  const auto [searched, simulated] = SearchBesideSimulate(flags, " --no-overlap-moe-expert-parallel-comm");
  // 32 virtual stages of 3: the first holds E + layers 0 and 1 (stage 0), the next layers 2 to 4
  // (stage 1's first chunk).
  const dockyard::Json plan =
      dockyard::Json::parse(RunStdout(flags.substr(0, flags.find(" --global-batch-size")) + " --account-for-embedding-in-pipeline-split "
                                                                                            "--account-for-loss-in-pipeline-split --json -")
                                .out);
  CHECK(plan["pipeline"]["layer_stage"][1] == 0);
  CHECK(plan["pipeline"]["layer_stage"][2] == 1);
  CHECK(plan["pipeline"]["layer_stage"][4] == 1);
  CHECK(plan["pipeline"]["layer_stage"][5] == 2);
  CHECK(searched["top"][0]["step_time_us"].get<double>() == simulated["predicted"]["step_time_us"].get<double>());
}

TEST_CASE("search refuses an output it cannot write before the search, naming the flag and the path") {
  const std::string base = "search --model testdata/hf/qwen3-30b-a3b.json --world-size 8";
  for (const std::string flag : {"--json", "--html"}) {
    CAPTURE(flag);
    const std::string path = TmpDir() + "/no-such-dir/out";
    Result r = Run(base + " " + flag + " " + path);
    CHECK(r.code == 1);
    CHECK(r.out.find(fmt::format("dockyard-plan: error: {} '{}': its directory '{}/no-such-dir' does not exist", flag, path, TmpDir())) !=
          std::string::npos);
    CHECK(r.out.find("layouts enumerated") == std::string::npos);  // refused before the search ran
    CHECK_FALSE(Exists(path));
  }
  // simulate and check refuse it before the plan too.
  Result r = Run("simulate --model testdata/hf/qwen3-30b-a3b.json --world-size 8 --ep 8 --json " + TmpDir());
  CHECK(r.code == 1);
  CHECK(r.out.find(fmt::format("--json '{}' is a directory: name a file", TmpDir())) != std::string::npos);
}

TEST_CASE("search: the count line names the reserve; --gpu-memory-gib 0, a repeated dispatcher refused; --layout is --explain") {
  const std::string base = "search --model testdata/hf/qwen3-30b-a3b.json --world-size 8 --cluster h200-sxm --top 1";
  // h200-sxm memory_gib 140.4 (141 GB HBM3e as GiB); the default reserve 2 GiB (docs/memory-model.md §5.1).
  Result r = Run(base);
  REQUIRE(r.code == 0);
  CHECK(r.out.find("over the 140.4 GiB budget less the 2.0 GiB reserve (") != std::string::npos);
  r = Run(base + " --gpu-memory-gib 80 --memory-reserve-gib 5");
  REQUIRE(r.code == 0);
  CHECK(r.out.find("over the 80.0 GiB budget less the 5.0 GiB reserve (") != std::string::npos);
  r = Run(base + " --json -");
  REQUIRE(r.code == 0);
  CHECK(dockyard::ParseJsonText(r.out, "stdout")["memory_reserve_gib"] == 2.0);
  r = Run(base + " --gpu-memory-gib 0");
  CHECK(r.code == 1);
  CHECK(r.out.find("--gpu-memory-gib: must be > 0 in search, got 0") != std::string::npos);
  r = Run(base + " --search-dispatchers deepep,deepep");
  CHECK(r.code == 1);
  CHECK(r.out.find("--search-dispatchers deepep,deepep: 'deepep' is given twice") != std::string::npos);
  CHECK(Run(base + " --search-dispatchers deepep,allgather").code == 0);
  const Result explain = Run(base + " --explain tp=1 --json -");
  const Result layout = Run(base + " --layout tp=1 --json -");
  REQUIRE(explain.code == 0);
  REQUIRE(layout.code == 0);
  dockyard::Json a = dockyard::ParseJsonText(explain.out, "explain"), b = dockyard::ParseJsonText(layout.out, "layout");
  CHECK(a["explain"]["rank"] == b["explain"]["rank"]);
  CHECK(a["explain"]["rank"].get<int64_t>() >= 1);
}

TEST_CASE("search names the rule a pin breaks: --ep against num_experts, --num-microbatches against the global batch") {
  // Qwen3-30B-A3B has 128 experts: ep 256 cannot hold whole experts.
  Result r = Run("search --model testdata/hf/qwen3-30b-a3b.json --world-size 512 --ep 256");
  CHECK(r.code == 1);
  CHECK(r.out.find("--ep 256: ep (256) must divide num_experts (128)") != std::string::npos);
  // Global batch 16 (= --world-size) over dp x mbs is 16, 8, 4, 2 or 1 micro-batches: none a multiple of 7
  // (torchtitan) nor equal to 7 (Megatron). The message names the schedule rule, not dp x micro_batch_size.
  r = Run("search --model testdata/hf/qwen3-30b-a3b.json --world-size 16 --num-microbatches 7");
  CHECK(r.code == 1);
  CHECK(r.out.find("--num-microbatches 7 meets the global batch (16 sequences) in no layout: torchtitan accumulates whole schedules") !=
        std::string::npos);
  CHECK(r.out.find("must be a multiple of dp x micro_batch_size") == std::string::npos);
  r = Run("search --model testdata/hf/qwen3-30b-a3b.json --world-size 16 --num-microbatches 7 --convention megatron");
  CHECK(r.code == 1);
  CHECK(r.out.find("num_microbatches must equal global batch / (dp x micro_batch_size)") != std::string::npos);
}

TEST_CASE("Megatron-only features are refused under --convention torchtitan (torchtitan/config/parallelism.py)") {
  const std::string base = "simulate --model testdata/hf/qwen3-30b-a3b.json --world-size 8 --ep 8";
  Result r = Run(base + " --dp-sharding zero1");
  CHECK(r.code == 1);
  CHECK(r.out.find("--dp-sharding zero1: Megatron's distributed optimizer; torchtitan has FSDP") != std::string::npos);
  r = Run(base + " --overlap-moe-expert-parallel-comm");
  CHECK(r.code == 1);
  CHECK(r.out.find("--overlap-moe-expert-parallel-comm: a Megatron-Core feature") != std::string::npos);
  CHECK(Run(base + " --dp-sharding zero1 --convention megatron").code == 0);
  CHECK(Run(base + " --dp-sharding ddp").code == 0);  // torchtitan's DDP
  r = Run("search --model testdata/hf/qwen3-30b-a3b.json --world-size 8 --overlap-moe-expert-parallel-comm");
  CHECK(r.code == 1);
  CHECK(r.out.find("--overlap-moe-expert-parallel-comm: a Megatron-Core feature") != std::string::npos);
  CHECK(Run("search --model testdata/hf/qwen3-30b-a3b.json --world-size 8 --no-overlap-moe-expert-parallel-comm --top 1").code == 0);
}

TEST_CASE("A memory reserve with no budget is refused in the plan, not silently ignored; simulate holds it against its cluster") {
  // simulate always has a cluster: the reserve moves its warning. Qwen3-30B-A3B on 8 GPUs, EP 8:
  // peak 97.06 GiB; h200-sxm's memory_gib 140.4: 97.06 + 30 = 127.06 fits, 97.06 + 50 = 147.06 does not.
  Result r = Run("simulate --model testdata/hf/qwen3-30b-a3b.json --world-size 8 --ep 8 --cluster h200-sxm --memory-reserve-gib 30");
  CHECK(r.code == 0);
  CHECK(r.out.find("warning: the worst rank's peak") == std::string::npos);
  r = Run("simulate --model testdata/hf/qwen3-30b-a3b.json --world-size 8 --ep 8 --cluster h200-sxm --memory-reserve-gib 50");
  CHECK(r.code == 0);
  CHECK(r.out.find("warning: the worst rank's peak, 97.06 GiB, with the 50.00 GiB reserve is above h200-sxm's 140.4 GiB per GPU") !=
        std::string::npos);
  // A reserve that leaves nothing of the cluster's 140.4 GiB is invalid input, as under a budget.
  r = Run("simulate --model testdata/hf/qwen3-30b-a3b.json --world-size 8 --ep 8 --cluster h200-sxm --memory-reserve-gib 150");
  CHECK(r.code == 1);
  CHECK(r.out.find("h200-sxm's memory_gib") != std::string::npos);
  CHECK(Run("--model testdata/hf/qwen3-30b-a3b.json --world-size 8 --ep 8 --memory-reserve-gib 5").code == 1);
  CHECK(Run("--model testdata/hf/qwen3-30b-a3b.json --world-size 8 --ep 8 --memory-reserve-gib 5 --gpu-memory-gib 200").code == 0);
}

TEST_CASE("--seq-len: 2^20 tokens at most (exit 1 at once, not a long run); beyond max_position_embeddings a warning") {
  // 10,000,000 tokens: refused before any work, naming the flag, the value and the bound.
  Result r = Run("simulate --model testdata/hf/olmoe-1b-7b-0125-instruct.json --world-size 8 --seq-len 10000000");
  CHECK(r.code == 1);
  CHECK(r.out.find("--seq-len 10000000: above dockyard's bound of 1048576 tokens per sequence") != std::string::npos);
  r = Run("search --model testdata/specs/tiny-mixtral.json --world-size 8 --seq-len 1048577");
  CHECK(r.code == 1);
  CHECK(r.out.find("--seq-len 1048577: above dockyard's bound of 1048576 tokens per sequence") != std::string::npos);
  // OLMoE's config: max_position_embeddings 4096, no rope_scaling: planned, with a warning.
  r = Run("--model testdata/hf/olmoe-1b-7b-0125-instruct.json --world-size 8 --seq-len 8192");
  CHECK(r.code == 0);
  CHECK(r.out.find("dockyard-plan: warning: --seq-len 8192 is above the model's max_position_embeddings (4096) and its config has no rope_scaling") !=
        std::string::npos);
  // DeepSeek-V3 has YaRN rope_scaling.
  r = Run("--model testdata/hf/deepseek-v3.json --world-size 64 --ep 64 --seq-len 262144");
  CHECK(r.code == 0);
  CHECK(r.out.find("warning: --seq-len 262144 is above the model's max_position_embeddings (163840); the config's rope_scaling must "
                   "cover it") != std::string::npos);
}

TEST_CASE("search on a stderr that is not a terminal: plain progress lines at most every --progress-interval, the outputs unchanged") {
  const std::string dir = TmpDir();
  const std::string base = "search --model testdata/hf/qwen3-30b-a3b.json --world-size 8 --top 3";
  // The default interval (10 s) is longer than this search: no progress line, no '\r' bar.
  const Result quiet = Run(base + " --json " + dir + "/progress-a.json");
  REQUIRE(quiet.code == 0);
  CHECK(quiet.out.find("layout groups") == std::string::npos);
  CHECK(quiet.out.find('\r') == std::string::npos);
  // --progress-interval 0: a line at every update of the search, on stderr only.
  const Result lines = Run(base + " --json " + dir + "/progress-b.json --progress-interval 0");
  REQUIRE(lines.code == 0);
  CHECK(lines.out.find("dockyard-plan search: 1/") != std::string::npos);
  CHECK(lines.out.find(" layout groups, 0 s elapsed\n") != std::string::npos);
  // The same ranking (the command lines and the seconds taken differ).
  const dockyard::Json a = dockyard::ReadJsonFile(dir + "/progress-a.json"), b = dockyard::ReadJsonFile(dir + "/progress-b.json");
  for (const char* key : {"top", "pareto", "enumerated", "ranked", "invalid", "over_budget"}) CHECK(a.at(key) == b.at(key));
  // Out of range: exit 1 before the search, naming the flag.
  const Result bad = Run(base + " --progress-interval -1");
  CHECK(bad.code == 1);
  CHECK(bad.out.find("--progress-interval: must be >= 0 seconds, got -1") != std::string::npos);
}

TEST_CASE("A value outside a flag's names is invalid input (exit 1) in every form; a flag given twice is named") {
  const std::string m = "--model testdata/hf/qwen3-30b-a3b.json --world-size 8";
  // The same mistake, one exit code: a single name (CLI11's check) or one of a list (the library's parser).
  Result r = Run("simulate " + m + " --ep 8 --dispatcher bogus");
  CHECK(r.code == 1);
  CHECK(r.out.find("dockyard-plan: error: --dispatcher: must be \"all_to_all\", \"deredundency\", \"deepep\" or \"allgather\", got "
                   "\"bogus\"") != std::string::npos);
  // Megatron's spellings are named: flex is deepep, alltoall all_to_all.
  r = Run("simulate " + m + " --ep 8 --dispatcher flex");
  CHECK(r.code == 1);
  CHECK(r.out.find("Megatron's --moe-token-dispatcher-type flex is dockyard's deepep") != std::string::npos);
  CHECK(Run("plan " + m + " --ep 8 --dispatcher alltoall").out.find("alltoall is dockyard's all_to_all") != std::string::npos);
  // Megatron's space-separated --recompute-modules: the left-over module is named, with the comma form.
  r = Run(m + " --recompute selective --recompute-modules layernorm moe_act");
  CHECK(r.code == 2);
  CHECK(r.out.find("'moe_act' is a recompute module: --recompute-modules takes one comma-separated list here") != std::string::npos);
  CHECK(Run("search " + m + " --dispatcher bogus").code == 1);
  r = Run("search " + m + " --search-dispatchers deepep,bogus");
  CHECK(r.code == 1);
  CHECK(r.out.find("--search-dispatchers: unknown dispatcher 'bogus'") != std::string::npos);
  CHECK(Run("simulate " + m + " --ep 8 --redundant-experts 8 --eplb-policy bogus").code == 1);
  CHECK(Run("simulate " + m + " --ep 8 --cp-comm-type ring").code == 1);
  CHECK(RunRun("--model testdata/hf/qwen3-30b-a3b.json --world-size 2 --ep 2 --tokens-per-rank 2 --backend tpu").code == 1);
  // A malformed command line stays a usage error: a flag given twice, said so, with both values.
  r = Run("simulate " + m + " --ep 8 --tp 2 --tp 4");
  CHECK(r.code == 2);
  CHECK(r.out.find("dockyard-plan: usage error: --tp is given 2 times ('2', '4'): give it once") != std::string::npos);
  r = Run("search " + m + " --json a.json --json b.json");
  CHECK(r.code == 2);
  CHECK(r.out.find("--json is given 2 times ('a.json', 'b.json'): give it once") != std::string::npos);
  r = RunRun("--model testdata/hf/qwen3-30b-a3b.json --world-size 2 --ep 2 --ep 2 --tokens-per-rank 2");
  CHECK(r.code == 2);
  CHECK(r.out.find("dockyard-run: usage error: --ep is given 2 times ('2', '2'): give it once") != std::string::npos);
}

TEST_CASE("search rows show AxM only for accumulation steps of a pipeline schedule; with pp 1 the micro-batch count") {
  const std::string base =
      "search --model testdata/hf/qwen3-30b-a3b.json --world-size 16 --global-batch-size 1024 --num-microbatches 16 --top 40";
  // pp 1: 1024 sequences / (dp x mbs) micro-batches per rank, one after another (no "64x16").
  Result r = Run(base + " --pp 1 --html " + TmpDir() + "/mb-pp1.html");
  REQUIRE(r.code == 0);
  CHECK(r.out.find("x16 ") == std::string::npos);
  CHECK(r.out.find(" 1024 ") != std::string::npos);  // dp 1, mbs 1: 1024 micro-batches
  const std::string html = ReadAll(TmpDir() + "/mb-pp1.html");
  CHECK(html.find("x16<") == std::string::npos);
  // pp 2: torchtitan's accumulation loop of schedules of 16, each with its bubble: AxM.
  r = Run(base + " --pp 2");
  REQUIRE(r.code == 0);
  CHECK(r.out.find("x16 ") != std::string::npos);
}

namespace {

// testdata/hf/qwen3-30b-a3b.json as a model spec (the spec command) with `training` as its training
// block, written to `name` under the test's temp dir; returns the path.
std::string QwenSpecWithTraining(const std::string& name, const dockyard::Json& training) {
  const std::string path = TmpDir() + "/" + name;
  REQUIRE(Run("spec --model testdata/hf/qwen3-30b-a3b.json --out " + path).code == 0);
  std::ifstream in(path);
  dockyard::Json spec = dockyard::Json::parse(in);
  in.close();
  spec["training"] = training;
  std::ofstream(path) << spec.dump(2);
  return path;
}

}  // namespace

TEST_CASE("check takes its budget from the spec's training.gpu_memory_gib when --gpu-memory-gib is not given") {
  const std::string spec = QwenSpecWithTraining("q4.spec.json", {{"gpus_per_node", 4}, {"gpu_memory_gib", 40}});
  const std::string base = "check --model " + spec + " --world-size 16 --ep 8 --convention megatron";
  // The spec's 40 GiB is the budget (the same figure as the flag): less the 2 GiB default reserve, 38 GiB.
  Result from_spec = Run(base);
  Result from_flag = Run(base + " --gpu-memory-gib 40");
  CHECK(from_spec.code == from_flag.code);
  CHECK(from_spec.code != 2);
  CHECK(from_spec.out.find("40.00 GiB budget less the 2.00 GiB reserve") != std::string::npos);
  // The flag is over the spec: 1000 GiB fits.
  Result fits = Run(base + " --gpu-memory-gib 1000");
  CHECK(fits.code == 0);
  CHECK(fits.out.find("1000.00 GiB budget") != std::string::npos);
  // Neither the flag nor the spec: still a usage error.
  Result none = Run("check --model testdata/hf/qwen3-30b-a3b.json --world-size 16 --ep 8 --convention megatron");
  CHECK(none.code == 2);
  CHECK(none.out.find("check needs a budget: --gpu-memory-gib GiB (> 0) or the model spec's training.gpu_memory_gib") != std::string::npos);
}

TEST_CASE("A negative or too large --gpu-memory-gib is one exit-1 message in every command; a non-number one usage error") {
  const std::string model = " --model testdata/hf/qwen3-30b-a3b.json --world-size 8 --ep 8";
  for (const char* command : {"", "check", "simulate", "search"}) {
    CAPTURE(command);
    Result r = Run(std::string(command) + model + " --gpu-memory-gib -3");
    CHECK(r.code == 1);
    CHECK(r.out.find("--gpu-memory-gib: must be a finite number in [0, 1e6] GiB, got -3") != std::string::npos);
    r = Run(std::string(command) + model + " --gpu-memory-gib 2e6");
    CHECK(r.code == 1);
    CHECK(r.out.find("--gpu-memory-gib: must be a finite number in [0, 1e6] GiB, got 2000000") != std::string::npos);
    // inf is not a finite decimal number: the flag parser's usage error (exit 2), the same in every command.
    r = Run(std::string(command) + model + " --gpu-memory-gib inf");
    CHECK(r.code == 2);
    CHECK(r.out.find("--gpu-memory-gib \"inf\": expected a finite decimal number") != std::string::npos);
  }
  // 0 is in range: "no budget" for plan and simulate, a usage error for check, refused by search.
  CHECK(Run("check" + model + " --gpu-memory-gib 0").code == 2);
  Result r = Run("search" + model + " --gpu-memory-gib 0");
  CHECK(r.code == 1);
  CHECK(r.out.find("--gpu-memory-gib: must be > 0 in search, got 0") != std::string::npos);
}

TEST_CASE("A sequence length from the spec's training block is blamed on /training/seq_len, not on --seq-len") {
  const std::string spec = QwenSpecWithTraining("qseq.spec.json", {{"seq_len", 2000000}});
  for (const char* command : {"", "check", "simulate", "search"}) {
    CAPTURE(command);
    Result r = Run(std::string(command) + " --model " + spec + " --world-size 8 --ep 8 --gpu-memory-gib 70");
    CHECK(r.code == 1);
    CHECK(r.out.find("the model spec's /training/seq_len 2000000: above dockyard's bound of 1048576 tokens") != std::string::npos);
    CHECK(r.out.find("--seq-len") == std::string::npos);
    // Given, the flag is over the spec and is the one named.
    r = Run(std::string(command) + " --model " + spec + " --world-size 8 --ep 8 --gpu-memory-gib 70 --seq-len 1048577");
    CHECK(r.code == 1);
    CHECK(r.out.find("--seq-len 1048577: above dockyard's bound") != std::string::npos);
  }
}

TEST_CASE("A node size that differs from the cluster's NVLink domain is named with both values and sources, once") {
  // h100-sxm: 8 GPUs per node, nvlink_domain_gpus 0, so its NVLink domain is 8 (network.h NvlinkDomainGpus).
  const std::string spec = QwenSpecWithTraining("q4node.spec.json", {{"gpus_per_node", 4}});
  const std::string from_spec =
      "the model spec's training.gpus_per_node 4 differs from h100-sxm's NVLink domain of 8 GPUs (the cluster's node size): ";
  Result r = Run("simulate --model " + spec + " --world-size 16 --ep 8 --cluster h100-sxm");
  CHECK(r.code == 0);
  CHECK(r.out.find(from_spec + "simulate uses 8 (the cluster is over the spec); --gpus-per-node 4 would use the spec's") !=
        std::string::npos);
  r = Run("search --model " + spec + " --world-size 16 --cluster h100-sxm --top 1");
  CHECK(r.code == 0);
  CHECK(r.out.find(from_spec + "search uses 8 (the cluster is over the spec)\n") != std::string::npos);
  // The flag is over the cluster in simulate: said, with both numbers.
  r = Run("simulate --model testdata/hf/qwen3-30b-a3b.json --world-size 16 --ep 8 --cluster h100-sxm --gpus-per-node 4");
  CHECK(r.code == 0);
  CHECK(r.out.find("warning: --gpus-per-node 4 differs from h100-sxm's NVLink domain of 8 GPUs (the cluster's node size): simulate "
                   "counts the memory and traffic tables' node crossings by 4") != std::string::npos);
  // The same number, or no node size given (a training block without gpus_per_node included: its
  // default 8 is not the spec's to warn about, even against gb200-nvl72's 72): no warning.
  const std::string no_node = QwenSpecWithTraining("qnonode.spec.json", {{"seq_len", 4096}});
  for (const std::string& args :
       {"simulate --model " + spec + " --world-size 16 --ep 8 --cluster h100-sxm --gpus-per-node 8",
        std::string("simulate --model testdata/hf/qwen3-30b-a3b.json --world-size 16 --ep 8 --cluster h100-sxm"),
        "simulate --model " + no_node + " --world-size 16 --ep 8 --cluster gb200-nvl72"}) {
    r = Run(args);
    CHECK(r.code == 0);
    CHECK(r.out.find("NVLink domain of") == std::string::npos);
  }
}

TEST_CASE("The text reports of check, simulate and search state the node size and budget they used; plan's are unchanged") {
  const std::string spec = QwenSpecWithTraining("q4machine.spec.json", {{"gpus_per_node", 4}, {"gpu_memory_gib", 40}});
  // check: the spec's 4 GPUs per node and 40 GiB (no cluster to override them).
  Result r = Run("check --model " + spec + " --world-size 16 --ep 8 --convention megatron");
  CHECK(r.out.find("\nMachine    4 GPUs per node, budget 40.00 GiB per GPU\n") != std::string::npos);
  // simulate and search on h100-sxm: the cluster's NVLink domain, 8, over the spec's 4 (the warning says so).
  r = Run("simulate --model " + spec + " --world-size 16 --ep 8 --cluster h100-sxm");
  CHECK(r.out.find("\nMachine    8 GPUs per node, budget 40.00 GiB per GPU\n") != std::string::npos);
  r = Run("search --model " + spec + " --world-size 16 --cluster h100-sxm --top 1");
  CHECK(r.out.find("\nMachine    8 GPUs per node, budget 40.00 GiB per GPU\n") != std::string::npos);
  // search without a budget holds layouts to the cluster's memory_gib: h100-sxm's 79.6 GiB (planner/cost/cluster.cc).
  r = Run("search --model testdata/hf/qwen3-30b-a3b.json --world-size 16 --cluster h100-sxm --top 1");
  CHECK(r.out.find("\nMachine    8 GPUs per node, budget 79.60 GiB per GPU\n") != std::string::npos);
  // simulate without a budget says so; plan has no Machine line.
  r = Run("simulate --model testdata/hf/qwen3-30b-a3b.json --world-size 16 --ep 8 --gpus-per-node 8");
  CHECK(r.out.find("\nMachine    8 GPUs per node, no memory budget\n") != std::string::npos);
  CHECK(Run("--model " + spec + " --world-size 16 --ep 8").out.find("\nMachine ") == std::string::npos);
}

TEST_CASE("search under torchtitan never ranks a layout torchtitan refuses; torchtitan-2026-03 keeps expert TP and ep < tp") {
  // Qwen3-30B-A3B on 16 GPUs (issue 31 item 4): tp 2 / ep 1 ranked first to third before; torchtitan
  // as it is has no expert TP (PR #3167) and needs ep >= tp for MoE models (PR #4794).
  const std::string base = "search --model testdata/hf/qwen3-30b-a3b.json --world-size 16 --cluster h200-sxm --top 100000 --json ";
  auto rows = [&](const std::string& convention) {
    const std::string out = TmpDir() + "/search_" + convention + ".json";
    Result r = Run(base + out + " --convention " + convention);
    REQUIRE(r.code == 0);
    return dockyard::ReadJsonFile(out);
  };
  const dockyard::Json tt = rows("torchtitan");
  CHECK(tt["header"]["rules"].get<std::string>().find("torchtitan as of PR #4794") == 0);
  REQUIRE(tt["top"].size() > 0);
  for (const auto& x : tt["top"]) {
    CHECK(x["etp"] == 1);
    CHECK(x["ep"].get<int64_t>() >= x["tp"].get<int64_t>());
    // 1F1B (vpp 1) with pp > 1 needs M >= pp (PyTorch Schedule1F1B).
    if (x["pp"].get<int64_t>() > 1 && x["vpp"] == 1) CHECK(x["num_microbatches"].get<int64_t>() >= x["pp"].get<int64_t>());
  }
  const dockyard::Json old = rows("torchtitan-2026-03");
  CHECK(old["header"]["rules"].get<std::string>().find("torchtitan before PR #3167") == 0);
  // The earlier release's rules rank tp 2 / ep 1 first, as dockyard did for torchtitan before.
  CHECK(old["top"][0]["tp"] == 2);
  CHECK(old["top"][0]["ep"] == 1);
  bool expert_tp = false;
  for (const auto& x : old["top"]) expert_tp = expert_tp || x["etp"].get<int64_t>() > 1;
  CHECK(expert_tp);
  CHECK(old["ranked"].get<int64_t>() > tt["ranked"].get<int64_t>());
}

TEST_CASE("megatron applies Megatron-LM's defaults and says which: etp = tp, selective = core_attn, shared experts not overlapped") {
  // DeepSeek-V2-Lite (2 shared experts) on 16 GPUs, tp 2, ep 8, megatron, --etp not given.
  const std::string base =
      "--model testdata/hf/deepseek-v2-lite.json --world-size 16 --tp 2 --ep 8 --recompute selective --convention megatron";
  Result r = Run(base);
  REQUIRE(r.code == 0);
  // etp 2 = tp: Megatron-LM arguments.py; ep 8 x etp 2 = 16 ranks, edp = 16 / (2 x 8 x 1) = 1.
  CHECK(r.out.find("ep 8  etp 2  efsdp 1") != std::string::npos);
  CHECK(r.out.find("Defaults   etp 2 = tp: Megatron-LM sets --expert-tensor-parallel-size to --tensor-model-parallel-size") !=
        std::string::npos);
  CHECK(r.out.find("Defaults   --recompute selective = core_attn: Megatron-Core's default recompute_modules") != std::string::npos);
  CHECK(r.out.find("Defaults   shared experts not overlapped: Megatron-Core's moe_shared_expert_overlap defaults to False") !=
        std::string::npos);
  // zero1: the distributed optimizer, which Megatron's MoE recipes set (bare Megatron-LM is DDP).
  CHECK(r.out.find("Defaults   dp_sharding zero1: the distributed optimizer (--use-distributed-optimizer)") != std::string::npos);
  // Given flags take no default line.
  r = Run(base + " --etp 1 --recompute-modules core_attn --moe-shared-expert-overlap --dp-sharding zero1");
  REQUIRE(r.code == 0);
  CHECK(r.out.find("ep 8  etp 1  efsdp 2") != std::string::npos);
  CHECK(r.out.find("Defaults") == std::string::npos);
  // The shared-expert overlap default changes the simulated MoE layer: off (Megatron's default) is
  // slower than on (the shared experts' time is added to the combine's instead of hidden under it).
  auto moe_layer_us = [](const std::string& out) {
    const size_t at = out.find("MoE layer ");
    REQUIRE(at != std::string::npos);
    return std::stod(out.substr(at + 10));
  };
  const std::string sim = "simulate --cluster h200-sxm " + base;
  const Result off = Run(sim), on = Run(sim + " --moe-shared-expert-overlap");
  REQUIRE(off.code == 0);
  REQUIRE(on.code == 0);
  CHECK(moe_layer_us(off.out) > moe_layer_us(on.out));
}
