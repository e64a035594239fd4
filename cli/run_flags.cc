// dockyard-run's options and flag registration (see run_flags.h).
#include "cli/run_flags.h"

#include <fmt/format.h>

#include "planner/base/file_util.h"

namespace dockyard::cli {

const char* const kRunExamples = R"(Examples:
  dockyard-run --model testdata/hf/qwen3-30b-a3b.json --world-size 8 --ep 8 --tokens-per-rank 16
  dockyard-run --model testdata/hf/qwen3-30b-a3b.json --world-size 16 --ep 16 --dispatcher deredundency --oep 2
  dockyard-run --model testdata/hf/deepseek-v3.json --world-size 16 --ep 16 --tokens-per-rank 2 --iters 1 --warmup 0
  dockyard-run --model testdata/hf/deepseek-v2-lite.json --world-size 16 --tp 2 --ep 8 --etp 2 --json run.json
  dockyard-run --model testdata/hf/mixtral-8x7b.json --world-size 4 --tp 4 --routing zipf:1.2
  dockyard-run --model testdata/hf/qwen3-30b-a3b.json --world-size 8 --ep 8 --routing zipf:1.2 --redundant-experts 8

Degrees follow dockyard-plan (--dp-shard -1 = infer); the run uses the ranks of the pipeline stage
holding --layer. --routing: by default tokens go to the top-k of the real router GEMM over the
generated tokens; uniform | zipf:S | hot:H:F | trace:PATH instead draws each token's experts from the
planner's routing model (as `dockyard-plan simulate`), and the router's scores at those experts give
the weights. Exit codes: 0 ok, 1 invalid input, 2 usage error, 3 validation failure (#wrong > 0).
)";

void AddRunFlags(CLI::App& app, RunCliOptions& o) {
  app.add_option("--plan", o.plan_path,
                 "a plan file from dockyard-plan --json or dockyard-plan simulate --json: degrees, "
                 "training settings and placements come from it (placements are verified)");
  app.add_option("--model", o.model, "HF config.json or dockyard model spec (required without --plan; with --plan, overrides its model)");
  o.degrees.AddTo(&app, "number of ranks (required without --plan)",
                  "pipeline parallel degree (default 1); the stage holding --layer runs");
  app.add_option("--backend", o.backend, "cpu | cuda (default cpu)")->check(CLI::IsMember({"cpu", "cuda"}));
  app.add_option("--gemm-precision", o.gemm_precision,
                 "cuda: expert GEMM precision fp32 | tf32 | bf16 (bf16 inputs, fp32 accumulation; default fp32)")
      ->check(CLI::IsMember({"fp32", "tf32", "bf16"}));
  app.add_option("--grouped-gemm", o.grouped_gemm,
                 "cuda: auto (the loop from 128 rows per expert on, where it measured faster on H100; kernels/grouped_gemm_path.h) | "
                 "grouped (cublasGemmGroupedBatchedEx) | loop (cublasGemmEx per expert) (default auto)")
      ->check(CLI::IsMember({"auto", "grouped", "loop"}));
  app.add_option("--nccl-id-dir", o.nccl_id_dir,
                 "cuda, one process per GPU (torchrun/srun/mpirun): a directory every process sees, for the NCCL ids");
  app.add_option("--nccl-job-id", o.nccl_job_id,
                 "cuda, one process per GPU: a name unique to this run for its NCCL id files (default: the launcher's "
                 "job id: TORCHELASTIC_RUN_ID, SLURM_JOB_ID, PMIX_NAMESPACE)");
  app.add_flag("--overlap-shared-experts", o.overlap_shared,
               "run the shared experts while the combine all-to-all is in flight (all_to_all dispatcher; the combine "
               "phase then reports its exposed time)");
  app.add_option("--replay-rank", o.replay_rank,
                 "single-GPU replay: run only this rank's share of the plan (its experts, the rows routing sends it) on "
                 "one device; dispatch/combine from the cost model (docs/runtime.md)");
  app.add_option("--cluster", o.cluster, "replay: cluster preset or JSON for the cost model (default h100-sxm)");
  o.training.AddRunTo(&app);
  app.add_option("--tokens-per-rank", o.tokens_per_rank, "tokens of hidden size on every rank (default 64)");
  app.add_option("--routing", o.routing, "uniform | zipf:S | hot:H:F | trace:PATH (default: the router's top-k)");
  AddRedundantExpertsFlags(&app, o.redundant,
                           "run the EPLB placement of the layer (needs --routing), replicas holding identical "
                           "weights, and compare rows per rank with the planner's");
  app.add_option("--placement", o.placement,
                 "placement file: {\"physical_to_logical\": [...]} or a simulate --redundant-experts --json report "
                 "(its map of the layer); runs that layout of replicated experts (default: none)");
  app.add_option("--layer", o.layer, "decoder layer to run (default: the first MoE layer)");
  app.add_option("--iters", o.iters, "timed iterations (default 3)");
  app.add_option("--warmup", o.warmup, "untimed warm-up iterations (default 1)");
  app.add_option("--seed", o.seed, "seed of tokens, weights and sampled routing (default 0)");
  app.add_option("--atol", o.atol, "absolute tolerance (default 1e-4)");
  app.add_option("--rtol", o.rtol, "relative tolerance (default 1e-3): wrong when |out - ref| > atol + rtol |ref|");
  app.add_option("--json", o.json_path,
                 "write the JSON report to PATH ('-' = stdout, replaces the tables); "
                 "'{rank}' in PATH becomes the process's rank in a multi-process launch");
  app.add_option("--html", o.html_path, "write a self-contained HTML page of the run's figures to PATH (docs/html-report.md)");
  // A testing aid, not in --help: a deliberate ownership mistake that validation must catch.
  app.add_option("--inject-fault", o.fault, "")->group("")->check(CLI::IsMember({"wrong-expert"}));
}

void RecordRunFlagsGiven(const CLI::App& app, RunCliOptions& o) {
  o.convention_given = app.get_option("--convention")->count() > 0;
  o.tokens_per_rank_given = app.get_option("--tokens-per-rank")->count() > 0;
  for (const char* flag : {"--gemm-precision", "--grouped-gemm", "--nccl-id-dir", "--nccl-job-id"}) {
    if (app.get_option(flag)->count() > 0) o.cuda_flags_given.insert(flag);
  }
}

// --json and --html: writable, not the same file, not over an input (model, plan, cluster,
// placement, routing trace); checked before the run, not after it.
void CheckRunOutputs(const RunCliOptions& o, bool json_given) {
  if (json_given && o.json_path.empty()) throw UsageError("--json needs a path or '-', got an empty string");
  if (json_given) {
    std::vector<std::string> inputs = {o.model, o.plan_path, o.cluster, o.placement};
    if (o.routing.rfind("trace:", 0) == 0) inputs.push_back(o.routing.substr(6));
    RejectOutputOverInputs(o.json_path, "--json", inputs);
    CheckOutputPath(o.json_path, "--json");  // before the run, not after it
  }
  if (!o.html_path.empty()) {
    if (o.html_path == "-") throw UsageError("--html needs a file path ('-' is not supported)");
    if (json_given && SameOutputPath(o.html_path, o.json_path)) {
      throw UsageError(fmt::format("--html and --json name the same output ({} and {})", o.html_path, o.json_path));
    }
    CheckOutputPath(o.html_path, "--html");
    if (!o.replay_rank.empty()) throw UsageError("--html applies to a multi-rank run, not to --replay-rank");
    std::vector<std::string> inputs = {o.model, o.plan_path, o.cluster, o.placement};
    if (o.routing.rfind("trace:", 0) == 0) inputs.push_back(o.routing.substr(6));
    RejectOutputOverInputs(o.html_path, "--html", inputs);
  }
}

}  // namespace dockyard::cli
