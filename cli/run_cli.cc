// dockyard-run command line (see run_cli.h).
#include "cli/run_cli.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "planner/error.h"
#include "planner/file_util.h"
#include "planner/model_spec.h"
#include "planner/plan.h"
#include "planner/routing.h"
#include "runtime/config.h"
#include "runtime/cpu/cpu_backend.h"
#include "runtime/run.h"

namespace dockyard {
namespace {

constexpr const char* kExamples = R"(Examples:
  dockyard-run --model testdata/hf/qwen3-30b-a3b.json --world-size 8 --ep 8 --tokens-per-rank 16
  dockyard-run --model testdata/hf/qwen3-30b-a3b.json --world-size 16 --ep 16 --dispatcher deredundency --oep 2
  dockyard-run --model testdata/hf/deepseek-v3.json --world-size 16 --ep 16 --tokens-per-rank 2 --iters 1 --warmup 0
  dockyard-run --model testdata/hf/deepseek-v2-lite.json --world-size 16 --tp 2 --ep 8 --etp 2 --json run.json
  dockyard-run --model testdata/hf/mixtral-8x7b.json --world-size 4 --tp 4 --routing zipf:1.2

Degrees follow dockyard-plan (--dp-shard -1 = infer); the run uses the ranks of the pipeline stage
holding --layer. --routing: by default tokens go to the top-k of the real router GEMM over the
generated tokens; uniform | zipf:S | hot:H:F | trace:PATH instead draws each token's experts from the
planner's routing model (as `dockyard-plan simulate`), and the router's scores at those experts give
the weights. Exit codes: 0 ok, 1 invalid input, 2 usage error, 3 validation failure (#wrong > 0).
)";

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::optional<int64_t> ParseInt(const std::string& flag, const std::string& text) {
  if (text.empty()) return std::nullopt;
  size_t i = text[0] == '-' || text[0] == '+' ? 1 : 0;
  bool digits = i < text.size();
  for (size_t j = i; j < text.size(); ++j) digits = digits && text[j] >= '0' && text[j] <= '9';
  if (!digits) throw UsageError(fmt::format("{} \"{}\": expected a decimal integer", flag, text));
  errno = 0;
  const long long v = std::strtoll(text.c_str(), nullptr, 10);
  if (errno == ERANGE) throw UsageError(fmt::format("{} \"{}\": out of the 64-bit integer range", flag, text));
  return v;
}

std::optional<double> ParseNumber(const std::string& flag, const std::string& text) {
  if (text.empty()) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(text.c_str(), &end);
  if (std::isspace(static_cast<unsigned char>(text.front())) || end != text.c_str() + text.size() || errno == ERANGE ||
      !std::isfinite(v) || text.find_first_of("xXpP") != std::string::npos) {
    throw UsageError(fmt::format("{} \"{}\": expected a finite decimal number", flag, text));
  }
  return v;
}

struct CliOptions {
  std::string model, world_size, dp_replicate, dp_shard, cp, tp, ep, etp, pp;
  std::string convention = "torchtitan";
  std::string backend = "cpu", dispatcher = "all_to_all", oep, gpus_per_node;
  std::string tokens_per_rank = "64", routing, layer, iters = "3", warmup = "1", seed = "0", atol, rtol;
  std::string json_path, fault;
};

int Run(const CliOptions& o, bool json_given, std::ostream& out, std::ostream& err) {
  if (o.backend == "cuda") {
    throw Error("this dockyard-run was built without the CUDA backend (--backend cuda); use --backend cpu");
  }
  if (o.model.empty()) throw UsageError("--model is required");
  if (o.world_size.empty()) throw UsageError("--world-size is required");
  if (json_given && o.json_path.empty()) throw UsageError("--json needs a path or '-', got an empty string");

  ParallelDimsOptions dims;
  dims.world_size = *ParseInt("--world-size", o.world_size);
  dims.dp_replicate = ParseInt("--dp-replicate", o.dp_replicate).value_or(1);
  dims.dp_shard = ParseInt("--dp-shard", o.dp_shard).value_or(-1);
  dims.cp = ParseInt("--cp", o.cp).value_or(1);
  dims.tp = ParseInt("--tp", o.tp).value_or(1);
  dims.ep = ParseInt("--ep", o.ep).value_or(1);
  dims.etp = ParseInt("--etp", o.etp).value_or(1);
  dims.pp = ParseInt("--pp", o.pp).value_or(1);
  dims.convention = o.convention == "megatron" ? Convention::kMegatron : Convention::kTorchtitan;

  runtime::RunOptions run;
  run.dispatcher = o.dispatcher;
  run.oep = ParseInt("--oep", o.oep);
  run.tokens_per_rank = *ParseInt("--tokens-per-rank", o.tokens_per_rank);
  run.iters = *ParseInt("--iters", o.iters);
  run.warmup = *ParseInt("--warmup", o.warmup);
  run.seed = static_cast<uint64_t>(*ParseInt("--seed", o.seed));
  if (*ParseInt("--seed", o.seed) < 0) throw Error(fmt::format("--seed must be >= 0, got {}", o.seed));
  run.layer = ParseInt("--layer", o.layer).value_or(-1);
  if (!o.layer.empty() && run.layer < 0) throw Error(fmt::format("--layer must be >= 0, got {}", run.layer));
  run.atol = ParseNumber("--atol", o.atol).value_or(run.atol);
  run.rtol = ParseNumber("--rtol", o.rtol).value_or(run.rtol);
  if (!o.routing.empty()) {
    RoutingSpec spec = ParseRoutingSpec(o.routing);
    spec.seed = run.seed;
    run.routing = spec;
  }
  if (o.fault == "wrong-expert") run.fault = runtime::Fault::kWrongExpertOwner;

  ModelSpec model = LoadModel(o.model);
  TrainingConfig training = model.training.value_or(TrainingConfig{});
  training.dispatcher = o.dispatcher;
  if (run.oep) training.oep = *run.oep;
  if (auto g = ParseInt("--gpus-per-node", o.gpus_per_node)) training.gpus_per_node = *g;
  ValidateTraining(training, "--");
  const Plan plan = BuildPlan(model, dims, training);
  // Everything that can be rejected is rejected before any thread starts.
  const runtime::RunConfig config = runtime::MakeRunConfig(plan, run);
  runtime::cpu::CpuBackend backend;
  const runtime::RunReport report = runtime::RunMoeLayer(config, backend);

  if (json_given) {
    const std::string text = runtime::RunReportToJson(report, o.model).dump(1, ' ', false, Json::error_handler_t::replace) + "\n";
    if (o.json_path == "-") {
      out << text;
    } else {
      WriteFileAtomically(o.json_path, text);
    }
  }
  if (!json_given || o.json_path != "-") {
    out << runtime::RunReportToText(report, o.model);
    if (json_given) out << "JSON report written to " << o.json_path << "\n";
  }
  if (!report.passed()) {
    err << fmt::format("dockyard-run: validation failed: {} of {} output elements differ from the reference\n", report.wrong,
                       report.checked);
    return 3;
  }
  return 0;
}

}  // namespace

int RunRunCli(int argc, char** argv, std::ostream& out, std::ostream& err) {
  CliOptions o;
  CLI::App app{"dockyard-run: execute one MoE layer of a plan with real tokens (one thread per rank on the cpu backend), "
               "check every output against a single-process reference and time each phase."};
  app.footer(kExamples);
  app.add_option("--model", o.model, "HF config.json or dockyard model spec (required)");
  app.add_option("--world-size", o.world_size, "number of ranks (required)");
  app.add_option("--dp-replicate", o.dp_replicate, "HSDP replicas (default 1)");
  app.add_option("--dp-shard", o.dp_shard, "FSDP degree, -1 = infer (default -1)");
  app.add_option("--cp", o.cp, "context parallel degree (default 1)");
  app.add_option("--tp", o.tp, "tensor parallel degree (default 1)");
  app.add_option("--ep", o.ep, "expert parallel degree (default 1)");
  app.add_option("--etp", o.etp, "expert tensor parallel degree (default 1); torchtitan: 1 or tp");
  app.add_option("--pp", o.pp, "pipeline parallel degree (default 1); the stage holding --layer runs");
  app.add_option("--convention", o.convention, "rank-group convention")->check(CLI::IsMember({"torchtitan", "megatron"}));
  app.add_option("--backend", o.backend, "cpu | cuda (default cpu)")->check(CLI::IsMember({"cpu", "cuda"}));
  app.add_option("--dispatcher", o.dispatcher, "all_to_all | deredundency (default all_to_all)")
      ->check(CLI::IsMember({"all_to_all", "deredundency"}));
  app.add_option("--oep", o.oep, "deredundency outer EP size (default: the nodes an EP group spans)");
  app.add_option("--gpus-per-node", o.gpus_per_node, "ranks per node, for the default --oep (default 8)");
  app.add_option("--tokens-per-rank", o.tokens_per_rank, "tokens of hidden size on every rank (default 64)");
  app.add_option("--routing", o.routing, "uniform | zipf:S | hot:H:F | trace:PATH (default: the router's top-k)");
  app.add_option("--layer", o.layer, "decoder layer to run (default: the first MoE layer)");
  app.add_option("--iters", o.iters, "timed iterations (default 3)");
  app.add_option("--warmup", o.warmup, "untimed warm-up iterations (default 1)");
  app.add_option("--seed", o.seed, "seed of tokens, weights and sampled routing (default 0)");
  app.add_option("--atol", o.atol, "absolute tolerance (default 1e-4)");
  app.add_option("--rtol", o.rtol, "relative tolerance (default 1e-3): wrong when |out - ref| > atol + rtol |ref|");
  app.add_option("--json", o.json_path, "write the JSON report to PATH ('-' = stdout, replaces the tables)");
  // A testing aid, not in --help: a deliberate ownership mistake that validation must catch.
  app.add_option("--inject-fault", o.fault, "")->group("")->check(CLI::IsMember({"wrong-expert"}));

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    out << app.help();
    return 0;
  } catch (const CLI::ParseError& e) {
    err << "dockyard-run: usage error: " << e.what() << "\nRun 'dockyard-run --help' for usage.\n";
    return 2;
  }
  try {
    for (const CLI::Option* opt : app.get_options()) {
      if (opt->count() == 0 || opt->get_type_size() == 0) continue;
      for (const auto& v : opt->results()) {
        if (v.empty()) throw UsageError(fmt::format("{} needs a value, got an empty string", opt->get_name()));
      }
    }
    return Run(o, app.get_option("--json")->count() > 0, out, err);
  } catch (const UsageError& e) {
    err << "dockyard-run: usage error: " << e.what() << "\nRun 'dockyard-run --help' for usage.\n";
    return 2;
  } catch (const Error& e) {
    err << "dockyard-run: error: " << e.what() << "\n";
    return 1;
  } catch (const std::bad_alloc&) {
    err << "dockyard-run: error: out of memory\n";
    return 1;
  } catch (const std::exception& e) {
    err << "dockyard-run: error: internal error: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace dockyard
