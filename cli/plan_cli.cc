// dockyard-plan command line (see plan_cli.h).
#include "cli/plan_cli.h"

#include <optional>
#include <string>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "cli/default_model.h"
#include "planner/error.h"
#include "planner/file_util.h"
#include "planner/hf_config.h"
#include "planner/model_spec.h"
#include "planner/plan.h"
#include "planner/report.h"

namespace dockyard {
namespace {

constexpr const char* kExamples = R"(Examples:
  dockyard-plan                                   # embedded default: DeepSeek-V3 on 256 GPUs, dp_shard 256, ep 64
  dockyard-plan --model testdata/hf/qwen3-30b-a3b.json --world-size 64 --ep 8
  dockyard-plan --model testdata/hf/mixtral-8x7b.json --world-size 16 --tp 4 --ep 1 --json plan.json
  dockyard-plan --model testdata/hf/deepseek-v3.json --world-size 2048 --pp 8 --ep 64 --convention megatron --json -
  dockyard-plan spec --model testdata/hf/gpt-oss-120b.json --out gpt-oss-120b.spec.json
)";

// The embedded default: DeepSeek-V3 on 32 nodes x 8 GPUs; FSDP over all 256 ranks and EP 64
// (DeepSeek-V3's own training used EP 64), giving 4 experts per EP rank and efsdp 4.
constexpr int64_t kDefaultWorldSize = 256;
constexpr int64_t kDefaultEp = 64;
constexpr const char* kDefaultModelName = "<embedded testdata/hf/deepseek-v3.json>";

struct CliOptions {
  std::string model;
  std::optional<int64_t> world_size, dp_replicate, dp_shard, cp, tp, ep, etp, pp;
  std::string convention = "torchtitan";
  std::string json_path;
  std::string spec_out = "-";
};

void WriteOutput(const std::string& path, const std::string& content, std::ostream& out) {
  if (path == "-") {
    out << content;
  } else {
    WriteFileAtomically(path, content);
  }
}

ModelSpec LoadModelOrDefault(const std::string& path) {
  if (!path.empty()) return LoadModel(path);
  return ModelSpecFromHfConfig(ParseJsonText(kDefaultModelJson, kDefaultModelName), kDefaultModelName);
}

}  // namespace

int RunPlanCli(int argc, char** argv, std::ostream& out, std::ostream& err) {
  CliOptions o;
  CLI::App app{"dockyard-plan: a dry run of an MoE sharding layout (meshes, rank groups, placements, local shapes, "
               "expert ownership)."};
  app.footer(kExamples);
  app.add_option("--model", o.model, "HF config.json or dockyard model spec (default: embedded DeepSeek-V3)");
  app.add_option("--world-size", o.world_size, "number of GPUs (required with --model)");
  app.add_option("--dp-replicate", o.dp_replicate, "HSDP replicas (default 1)");
  app.add_option("--dp-shard", o.dp_shard, "FSDP degree, -1 = infer (default -1)");
  app.add_option("--cp", o.cp, "context parallel degree (default 1)");
  app.add_option("--tp", o.tp, "tensor parallel degree (default 1)");
  app.add_option("--ep", o.ep, "expert parallel degree (default 1)");
  app.add_option("--etp", o.etp, "expert tensor parallel degree (default 1); torchtitan: 1 or tp, megatron: any divisor");
  app.add_option("--pp", o.pp, "pipeline parallel degree, outermost axis (default 1)");
  app.add_option("--convention", o.convention, "rank-group convention")
      ->check(CLI::IsMember({"torchtitan", "megatron"}));
  app.add_option("--json", o.json_path, "write the JSON report to PATH ('-' = stdout, replaces the table)");
  CLI::App* spec = app.add_subcommand("spec", "write the normalized dockyard model spec of a model");
  std::string spec_model;
  spec->add_option("--model", spec_model, "HF config.json or dockyard model spec")->required();
  spec->add_option("--out", o.spec_out, "output path ('-' = stdout, the default)");
  app.require_subcommand(0, 1);

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    out << app.help();
    return 0;
  } catch (const CLI::ParseError& e) {
    err << "dockyard-plan: usage error: " << e.what() << "\n" << "Run 'dockyard-plan --help' for usage.\n";
    return 2;
  }

  try {
    if (spec->parsed()) {
      ModelSpec model = LoadModel(spec_model);
      WriteOutput(o.spec_out, ModelSpecToJson(model).dump(2, ' ', false, Json::error_handler_t::replace) + "\n", out);
      return 0;
    }
    const bool use_default = o.model.empty();
    if (!use_default && !o.world_size) {
      err << "dockyard-plan: usage error: --world-size is required with --model\n";
      return 2;
    }
    ParallelDimsOptions dims;
    dims.world_size = o.world_size.value_or(kDefaultWorldSize);
    dims.dp_replicate = o.dp_replicate.value_or(1);
    dims.dp_shard = o.dp_shard.value_or(-1);
    dims.cp = o.cp.value_or(1);
    dims.tp = o.tp.value_or(1);
    dims.ep = o.ep.value_or(use_default ? kDefaultEp : 1);
    dims.etp = o.etp.value_or(1);
    dims.pp = o.pp.value_or(1);
    dims.convention = o.convention == "megatron" ? Convention::kMegatron : Convention::kTorchtitan;

    ModelSpec model = LoadModelOrDefault(o.model);
    const std::string source = use_default ? kDefaultModelName : o.model;
    Plan plan = BuildPlan(model, dims);
    if (!o.json_path.empty()) {
      WriteOutput(o.json_path, PlanToJson(plan, source).dump(1, ' ', false, Json::error_handler_t::replace) + "\n", out);
      if (o.json_path == "-") return 0;
    }
    if (use_default) {
      out << fmt::format("(no --model: the embedded default, DeepSeek-V3 on {} GPUs = 32 nodes x 8, ep {})\n",
                         dims.world_size, dims.ep);
    }
    out << PlanToText(plan, source);
    if (!o.json_path.empty()) out << "JSON report written to " << o.json_path << "\n";
    return 0;
  } catch (const Error& e) {
    err << "dockyard-plan: error: " << e.what() << "\n";
    return 1;
  } catch (const std::bad_alloc&) {
    err << "dockyard-plan: error: out of memory building the plan\n";
    return 1;
  } catch (const std::exception& e) {
    // Not expected: every input error is a dockyard::Error. Still exit cleanly, never abort.
    err << "dockyard-plan: error: internal error: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace dockyard
