// End-to-end: the dockyard-run binary's exit codes, messages and JSON report, and the issue's
// "done when": Qwen3-30B-A3B's and DeepSeek-V3's MoE layer shapes (real hidden and
// intermediate sizes, scaled-down tokens) validate with zero #wrong on 8- and 16-rank plans with
// both dispatchers. The model runs are split over two test targets by test-case filter
// (run_cli_test: everything but DeepSeek-V3; run_cli_deepseek_test: DeepSeek-V3).
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <sys/stat.h>
#include <sys/wait.h>

#include <doctest/doctest.h>

#include "planner/base/json_util.h"

namespace {

struct Result {
  int code = -1;
  std::string out;  // stdout
  std::string err;  // stderr
  double seconds = 0;
};

std::string TmpDir() {
  const char* t = std::getenv("TEST_TMPDIR");
  return t ? t : "/tmp";
}

std::string ReadAll(FILE* f) {
  std::string s;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), f)) > 0) s.append(buf.data(), n);
  return s;
}

Result RunBinary(const std::string& binary, const std::string& args) {
  const std::string err_path = TmpDir() + "/stderr.txt";
  const std::string cmd = binary + " " + args + " 2>" + err_path;
  Result r;
  const auto t0 = std::chrono::steady_clock::now();
  FILE* pipe = popen(cmd.c_str(), "r");
  REQUIRE(pipe != nullptr);
  r.out = ReadAll(pipe);
  const int status = pclose(pipe);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  FILE* e = fopen(err_path.c_str(), "r");
  if (e != nullptr) {
    r.err = ReadAll(e);
    fclose(e);
  }
  return r;
}

Result Run(const std::string& args) {
  return RunBinary("cli/dockyard-run", args);
}

bool Exists(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0;
}

bool Has(const std::string& text, const std::string& what) {
  return text.find(what) != std::string::npos;
}

// Runs a real-shape case and checks the report: zero #wrong on every rank, the model's real
// sizes, every phase timed.
void RunModel(const std::string& model, const std::string& args, int64_t hidden, int64_t intermediate, int64_t ranks) {
  const std::string json = TmpDir() + "/model_run.json";
  const Result r = Run("--model " + model + " " + args + " --iters 1 --warmup 0 --json " + json);
  MESSAGE("dockyard-run --model " << model << " " << args << ": " << r.seconds << " s");
  CAPTURE(r.out);
  CAPTURE(r.err);
  REQUIRE(r.code == 0);
  CHECK(Has(r.out, "Validation OK: 0 wrong"));
  const dockyard::Json j = dockyard::ReadJsonFile(json);
  CHECK(j["validation"]["passed"] == true);
  CHECK(j["validation"]["wrong"] == 0);
  CHECK(j["model"]["hidden_size"] == hidden);
  CHECK(j["model"]["moe_intermediate_size"] == intermediate);
  REQUIRE(j["per_rank"].size() == static_cast<size_t>(ranks));
  for (const auto& rank : j["per_rank"]) {
    CHECK(rank["wrong"] == 0);
    CHECK(rank["checked"].get<int64_t>() == rank["tokens"].get<int64_t>() * hidden);
  }
  CHECK(j["measured"]["phases"].size() >= 7);
}

}  // namespace

TEST_CASE("dockyard-run validates a tiny plan, prints the tables and writes the JSON report") {
  const std::string json = TmpDir() + "/tiny.json";
  const Result r = Run("--model testdata/specs/tiny-mixtral.json --world-size 4 --ep 4 --tokens-per-rank 8 --json " + json);
  CAPTURE(r.err);
  CHECK(r.code == 0);
  CHECK(Has(r.out, "Validation OK: 0 wrong of 2048 elements"));  // 4 ranks x 8 tokens x hidden 64
  CHECK(Has(r.out, "grouped_gemm"));
  CHECK(Has(r.out, "JSON report written to " + json));
  const dockyard::Json j = dockyard::ReadJsonFile(json);
  CHECK(j["kind"] == "dockyard_run");
  CHECK(j["layout"]["ep"] == 4);
  CHECK(j["run"]["tokens_per_rank"] == 8);
  CHECK(j["validation"]["wrong"] == 0);
  CHECK(j["measured"]["phases"][0]["name"] == "router");
  CHECK(j["measured"]["phases"][0]["per_rank_us"].size() == 4);
}

TEST_CASE("dockyard-run --json - prints only the JSON report") {
  const Result r = Run("--model testdata/specs/tiny-mixtral.json --world-size 2 --ep 2 --tokens-per-rank 4 --json -");
  CHECK(r.code == 0);
  const dockyard::Json j = dockyard::ParseJsonText(r.out, "stdout");
  CHECK(j["validation"]["passed"] == true);
}

TEST_CASE("dockyard-run exits 3 on a validation failure, prints the first mismatches, and still writes the report") {
  const std::string json = TmpDir() + "/fault.json";
  const Result r =
      Run("--model testdata/specs/tiny-mixtral.json --world-size 4 --ep 4 --tokens-per-rank 8 "
          "--inject-fault wrong-expert --json " +
          json);
  CHECK(r.code == 3);
  CHECK(Has(r.out, "Validation FAILED"));
  CHECK(Has(r.out, "rank 0 token 0 dim 0: got"));
  CHECK(Has(r.err, "dockyard-run: validation failed:"));
  const dockyard::Json j = dockyard::ReadJsonFile(json);
  CHECK(j["validation"]["passed"] == false);
  CHECK(j["validation"]["wrong"].get<int64_t>() > 0);
  CHECK(j["validation"]["first_mismatches"].size() == 10);
}

TEST_CASE("dockyard-run --backend cuda without the GPUs it needs says why and exits 1") {
  // 64 ranks in one process need 64 visible GPUs: no machine this test runs on has them. Which
  // reason depends on the build and the machine: no CUDA at build time, no driver/GPU, or too few.
  const Result r = Run("--model testdata/specs/tiny-mixtral.json --world-size 64 --ep 8 --backend cuda");
  CHECK(r.code == 1);
  const bool explained = Has(r.err, "dockyard-run: error: this dockyard-run was built without the CUDA backend") ||
                         Has(r.err, "dockyard-run: error: --backend cuda: no GPU visible: ") || Has(r.err, "the run has 64 ranks, ");
  CHECK_MESSAGE(explained, r.err);
  CHECK(r.out.empty());
}

TEST_CASE("cuda-only flags are usage errors with the cpu backend") {
  for (const char* flag : {"--gemm-precision bf16", "--grouped-gemm loop", "--nccl-id-dir /tmp"}) {
    const Result r = Run(std::string("--model testdata/specs/tiny-mixtral.json --world-size 2 --ep 2 ") + flag);
    CHECK(r.code == 2);
    CHECK(Has(r.err, "applies to --backend cuda only"));
  }
  // A precision the flag does not name is invalid input, exit 1 (README "Exit codes").
  const Result bad = Run("--model testdata/specs/tiny-mixtral.json --world-size 2 --backend cuda --gemm-precision fp8");
  CHECK(bad.code == 1);
  CHECK(Has(bad.err, "--gemm-precision: fp8 not in {fp32,tf32,bf16}"));
}

TEST_CASE("dockyard-run --replay-rank runs one rank's share on the cpu backend and validates it") {
  const Result r =
      Run("--model testdata/specs/tiny-mixtral.json --world-size 4 --ep 4 --replay-rank 2 --seq-len 32 "
          "--cluster h200-sxm --json -");
  REQUIRE(r.code == 0);
  const dockyard::Json j = dockyard::Json::parse(r.out)["replay"];
  CHECK(j["ep_rank"] == 2);
  CHECK(j["first_expert"] == 4);  // 8 experts over ep 4: rank 2 holds experts 4 and 5
  CHECK(j["num_local_experts"] == 2);
  CHECK(j["tokens"] == 32);
  CHECK(j["validation"]["wrong"] == 0);
  int64_t rows = 0;
  for (const auto& n : j["rows_per_local_expert"]) rows += n.get<int64_t>();
  CHECK(rows == j["received_rows"].get<int64_t>());
  for (const auto& p : j["phases"]) {
    if (p["name"] == "dispatch" || p["name"] == "combine") CHECK(p["source"] == "cost model");
  }
  const Result out_of_range = Run("--model testdata/specs/tiny-mixtral.json --world-size 4 --ep 4 --replay-rank 4");
  CHECK(out_of_range.code == 1);
  CHECK(Has(out_of_range.err, "--replay-rank must be in [0, 4) (the plan's world size), got 4"));
  const Result cluster_alone = Run("--model testdata/specs/tiny-mixtral.json --world-size 4 --ep 4 --cluster h200-sxm");
  CHECK(cluster_alone.code == 2);
  // Flags a replay does not use are usage errors, not silently ignored.
  for (const char* flag : {"--tokens-per-rank 8", "--overlap-shared-experts", "--inject-fault wrong-expert"}) {
    const Result r2 = Run(std::string("--model testdata/specs/tiny-mixtral.json --world-size 4 --ep 4 --replay-rank 0 ") + flag);
    CHECK_MESSAGE(r2.code == 2, flag);
    CHECK(Has(r2.err, "does not apply to --replay-rank"));
  }
  const Result seq = Run("--model testdata/specs/tiny-mixtral.json --world-size 4 --ep 4 --replay-rank 0 --seq-len 0");
  CHECK(seq.code == 1);
  CHECK(Has(seq.err, "--seq-len must be in [1, 2^24], got 0"));
}

TEST_CASE("dockyard-run --tokens-per-rank 0 is refused instead of passing with 0 elements checked") {
  const std::string json = TmpDir() + "/zero-tokens.json";
  const Result r = Run("--model testdata/specs/tiny-mixtral.json --world-size 4 --ep 4 --tokens-per-rank 0 --json " + json);
  CHECK(r.code == 1);
  CHECK(Has(r.err, "--tokens-per-rank 0: tokens per rank must be in [1, 2^24]"));
  CHECK(r.out.empty());
  CHECK_FALSE(std::ifstream(json).good());  // no report written
}

TEST_CASE("replay from a simulate plan uses the plan's cluster and layer; --layer picks a later stage") {
  const std::string dir = TmpDir();
  const std::string plan = dir + "/sim.json";
  // The simulate report carries its cluster (h200-sxm), which the replay's cost model then uses.
  REQUIRE(RunBinary("cli/dockyard-plan",
                    "simulate --model testdata/specs/tiny-mixtral.json --world-size 4 --ep 2 --pp 2 "
                    "--seq-len 16 --cluster h200-sxm --json " +
                        plan)
              .code == 0);
  const Result r = Run("--plan " + plan + " --replay-rank 3 --layer 1 --json -");
  REQUIRE(r.code == 0);
  const dockyard::Json j = dockyard::Json::parse(r.out);
  CHECK(j["schema_version"] == 1);
  CHECK(j["kind"] == "replay");
  CHECK(j["replay"]["cluster"] == "h200-sxm");
  CHECK(j["replay"]["layer"] == 1);
  CHECK(j["replay"]["ep_rank"] == 1);
  CHECK(j["replay"]["tokens"] == 16);
  const Result wrong_stage = Run("--plan " + plan + " --replay-rank 3 --layer 0");
  CHECK(wrong_stage.code == 1);
  CHECK(Has(wrong_stage.err, "not a rank of pipeline stage 0"));
}

TEST_CASE("a plan's FP8 dispatch is carried: the run refuses it by name, the replay's cost model sends FP8") {
  const std::string dir = TmpDir();
  const std::string fp8 = dir + "/fp8.json", bf16 = dir + "/bf16.json";
  const std::string sim = "simulate --model testdata/specs/tiny-mixtral.json --world-size 4 --ep 4 --seq-len 16 --cluster h200-sxm ";
  REQUIRE(RunBinary("cli/dockyard-plan", sim + "--fp8-dispatch --json " + fp8).code == 0);
  REQUIRE(RunBinary("cli/dockyard-plan", sim + "--json " + bf16).code == 0);
  // Multi-rank runs dispatch: no runtime dispatcher sends FP8 rows, so the plan is refused
  // (it used to run in float rows, silently).
  for (const char* d : {"", " --dispatcher deepep"}) {
    const Result r = Run("--plan " + fp8 + d + " --tokens-per-rank 8 --iters 1 --warmup 0");
    CHECK_MESSAGE(r.code == 1, d);
    CHECK(Has(r.err, "training.fp8_dispatch (--fp8-dispatch) is true"));
    CHECK(Has(r.err, "has no FP8 dispatch path"));
  }
  CHECK(Run("--plan " + bf16 + " --tokens-per-rank 8 --iters 1 --warmup 0").code == 0);
  // The replay runs no dispatch: its dispatch phase is the cost model's, with the plan's FP8
  // rows (hidden 64: 64 + 4 bytes per row instead of 64 x 2 = 128), so it is faster than BF16's.
  auto dispatch_us = [&](const std::string& plan) {
    const Result r = Run("--plan " + plan + " --replay-rank 1 --json -");
    REQUIRE(r.code == 0);
    const dockyard::Json j = dockyard::Json::parse(r.out);
    for (const auto& p : j["replay"]["phases"]) {
      if (p["name"] == "dispatch") return p["time_us"].get<double>();
    }
    FAIL("no dispatch phase");
    return 0.0;
  };
  CHECK(dispatch_us(fp8) < dispatch_us(bf16));
}

TEST_CASE("--nccl-id-dir in a single-process cuda run is an error, not ignored") {
  const Result r = Run("--model testdata/specs/tiny-mixtral.json --world-size 2 --ep 2 --backend cuda --nccl-id-dir /tmp");
  CHECK(r.code == 1);
  CHECK((Has(r.err, "--nccl-id-dir '/tmp': this process was not started") || Has(r.err, "built without the CUDA backend")));
}

TEST_CASE("dockyard-run exits 1 on a broken rule and writes no file") {
  const std::string json = TmpDir() + "/never.json";
  // ep 3 does not divide 8 experts.
  Result r = Run("--model testdata/specs/tiny-mixtral.json --world-size 3 --ep 3 --json " + json);
  CHECK(r.code == 1);
  CHECK(Has(r.err, "ep (3) must divide num_experts (8)"));
  CHECK_FALSE(Exists(json));
  // oep 3 does not divide ep 4.
  r = Run("--model testdata/specs/tiny-mixtral.json --world-size 4 --ep 4 --dispatcher deredundency --oep 3");
  CHECK(r.code == 1);
  CHECK(Has(r.err, "oep (3) must divide ep (4)"));
  // A routing spec the planner's parser rejects.
  r = Run("--model testdata/specs/tiny-mixtral.json --world-size 2 --ep 2 --routing zipf:-1");
  CHECK(r.code == 1);
}

TEST_CASE("dockyard-run exits 2 on usage errors") {
  CHECK(Run("--world-size 2").code == 2);                                                  // no --model
  CHECK(Run("--model testdata/specs/tiny-mixtral.json").code == 2);                        // no --world-size
  CHECK(Run("--model testdata/specs/tiny-mixtral.json --world-size 2 --ep x").code == 2);  // not a number
  CHECK(Run("--model testdata/specs/tiny-mixtral.json --world-size 2 --bogus").code == 2);
  // A value that is not one of the flag's names is invalid input, exit 1, as in dockyard-plan.
  CHECK(Run("--model testdata/specs/tiny-mixtral.json --world-size 2 --dispatcher nccl").code == 1);
  const Result help = Run("--help");
  CHECK(help.code == 0);
  CHECK(Has(help.out, "--tokens-per-rank"));
  CHECK_FALSE(Has(help.out, "inject-fault"));
}

TEST_CASE("dockyard-run draws experts from the planner's routing model with --routing") {
  const Result r =
      Run("--model testdata/specs/tiny-mixtral.json --world-size 4 --ep 4 --tokens-per-rank 16 "
          "--routing trace:testdata/routing/tiny_trace.json --json -");
  CAPTURE(r.err);
  REQUIRE(r.code == 0);
  const dockyard::Json j = dockyard::ParseJsonText(r.out, "stdout");
  CHECK(j["run"]["routing"] == "trace:testdata/routing/tiny_trace.json");
  CHECK(j["validation"]["passed"] == true);
  // The trace gives expert 0 40% of the assignments and expert 7 2%.
  CHECK(j["tokens_per_expert"][0].get<int64_t>() > j["tokens_per_expert"][7].get<int64_t>());
}

TEST_CASE("dockyard-run --redundant-experts runs the replicated placement with the planner's rows per rank") {
  const Result r =
      Run("--model testdata/specs/tiny-mixtral.json --world-size 4 --ep 4 --tokens-per-rank 16 "
          "--routing zipf:1.5 --redundant-experts 4 --eplb-policy global --json -");
  CAPTURE(r.err);
  REQUIRE(r.code == 0);
  const dockyard::Json j = dockyard::ParseJsonText(r.out, "stdout");
  CHECK(j["validation"]["wrong"] == 0);
  const auto& x = j["redundant_experts"];
  CHECK(x["physical_to_logical"].size() == 12);  // 8 experts + 4, 3 slots per rank
  CHECK(x["rows_mismatched_ranks"] == 0);
  int64_t rows = 0;
  for (const auto& rank : x["measured_rows_per_local_slot"]) {
    for (const auto& v : rank) rows += v.get<int64_t>();
  }
  CHECK(rows == 4 * 16 * 2);  // every assignment computed once: 4 ranks x 16 tokens x top_k 2
  // Without a routing model there is no load to place by.
  const Result bad = Run("--model testdata/specs/tiny-mixtral.json --world-size 4 --ep 4 --redundant-experts 4");
  CHECK(bad.code == 1);
  CHECK(bad.err.find("--redundant-experts needs --routing") != std::string::npos);
}

// ---- The "done when": real MoE layer shapes, 8 and 16 ranks, both dispatchers.

TEST_CASE("Qwen3-30B-A3B: 8 ranks, ep 8, all_to_all") {
  RunModel("testdata/hf/qwen3-30b-a3b.json", "--world-size 8 --ep 8 --tokens-per-rank 32", 2048, 768, 8);
}
TEST_CASE("Qwen3-30B-A3B: 8 ranks, ep 8, deredundency oep 2") {
  RunModel("testdata/hf/qwen3-30b-a3b.json", "--world-size 8 --ep 8 --tokens-per-rank 32 --dispatcher deredundency --oep 2", 2048, 768, 8);
}
TEST_CASE("Qwen3-30B-A3B: 16 ranks, ep 16, all_to_all") {
  RunModel("testdata/hf/qwen3-30b-a3b.json", "--world-size 16 --ep 16 --tokens-per-rank 16", 2048, 768, 16);
}
TEST_CASE("Qwen3-30B-A3B: 16 ranks, ep 16, deredundency oep 2") {
  RunModel("testdata/hf/qwen3-30b-a3b.json", "--world-size 16 --ep 16 --tokens-per-rank 16 --dispatcher deredundency --oep 2", 2048, 768,
           16);
}
TEST_CASE("DeepSeek-V3: 8 ranks, ep 8, all_to_all") {
  RunModel("testdata/hf/deepseek-v3.json", "--world-size 8 --ep 8 --tokens-per-rank 2", 7168, 2048, 8);
}
TEST_CASE("DeepSeek-V3: 8 ranks, ep 8, deredundency oep 2") {
  RunModel("testdata/hf/deepseek-v3.json", "--world-size 8 --ep 8 --tokens-per-rank 2 --dispatcher deredundency --oep 2", 7168, 2048, 8);
}
TEST_CASE("DeepSeek-V3: 16 ranks, ep 16, all_to_all") {
  RunModel("testdata/hf/deepseek-v3.json", "--world-size 16 --ep 16 --tokens-per-rank 2", 7168, 2048, 16);
}
TEST_CASE("DeepSeek-V3: 16 ranks, ep 16, deredundency oep 2") {
  RunModel("testdata/hf/deepseek-v3.json", "--world-size 16 --ep 16 --tokens-per-rank 2 --dispatcher deredundency --oep 2", 7168, 2048, 16);
}

TEST_CASE("dockyard-run --json never overwrites an input") {
  const std::string model = TmpDir() + "/tiny_copy.json";
  {
    std::ifstream in("testdata/specs/tiny-mixtral.json");
    std::ofstream out(model);
    out << in.rdbuf();
  }
  const Result r = Run("--model " + model + " --world-size 2 --json " + model);
  CHECK(r.code == 1);
  CHECK(Has(r.err, "is the input '" + model + "': refusing to overwrite it"));
  std::ifstream check(model);
  const std::string text((std::istreambuf_iterator<char>(check)), std::istreambuf_iterator<char>());
  CHECK(text.find("\"moe\"") != std::string::npos);  // still the model spec
}
