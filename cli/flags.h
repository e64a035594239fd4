// Flag parsing shared by the command-line front ends: values are read as text and parsed
// strictly (decimal only: no octal "010" or hex "0x10"; no leading spaces; the value given is
// quoted back when it is out of range), and every failure is a UsageError (exit 2).
#pragma once

#include <cstdint>
#include <functional>
#include <ostream>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "planner/layout/parallel_dims.h"
#include "planner/model/training_overrides.h"
#include "planner/search/search.h"
#include "planner/search/search_space.h"
#include "planner/cost/redundant_experts.h"

namespace dockyard::cli {

// Exit codes of dockyard-plan (README "Exit codes", docs/report.md): success; invalid input (the
// message names the field, its value and the rule; no output file is written); a malformed
// command line; a plan that does not fit its memory budget (check, simulate: the reports are
// still written, the ranks over are listed on stderr).
constexpr int kExitOk = 0;
constexpr int kExitInvalidInput = 1;
constexpr int kExitUsage = 2;
constexpr int kExitOverBudget = 3;

// A malformed command line: the front ends print it as "usage error" and exit 2.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// nullopt for an empty text (flag not given).
std::optional<int64_t> ParseInt(const std::string& flag, const std::string& text);
std::optional<double> ParseNumber(const std::string& flag, const std::string& text);
// --seed: 0 when not given; a negative seed is exit 1 (dockyard::Error) naming it, since the report
// records the seed as the unsigned number the sampler uses and a negative one could not be replayed.
uint64_t ParseSeed(const std::string& text);

// Throws UsageError for any given option of `app` whose value is an empty string.
void RejectEmptyValues(const CLI::App& app);
// Throws UsageError for an argument "--flag=" with nothing after the '=' (argv[0] skipped): CLI11
// then takes the next argument as the value, so "--html= --cuda-graphs" wrote a page named
// "--cuda-graphs" and dropped the setting (QA). "--flag ''" is RejectEmptyValues's case.
void RejectEmptyEquals(const std::vector<std::string>& args);

// Runs `body` and maps what it throws to the front ends' exit codes: UsageError -> 2 ("usage
// error", with a pointer to --help), dockyard::Error -> 1, out of memory and any other exception
// -> 1 (never an abort). `program` prefixes every message; `oom_text` follows "error: ".
int RunReportingErrors(const char* program, const char* oom_text, std::ostream& err, const std::function<int()>& body);

// The parallel-degree flags of both front ends (torchtitan ParallelDims names; --convention picks
// Megatron-Core's rank groups), kept as text until parsed so that errors quote the value given.
struct DegreeFlags {
  std::string world_size, dp_replicate, dp_shard, cp, tp, ep, etp, pp;
  std::string convention = "torchtitan";

  // Registers --world-size ... --pp and --convention on `app`; `world_size_help` and `pp_help`
  // describe what the front end does with them.
  void AddTo(CLI::App* app, const std::string& world_size_help, const std::string& pp_help);
  // Whether any degree flag (not --convention) was given.
  bool AnyDegreeGiven() const;
  // The degrees given, defaults otherwise (world_size `default_world_size`, dp_shard -1 = infer,
  // the others 1). Throws UsageError for a malformed value; ranges are ParallelDims::Build's.
  ParallelDimsOptions Parse(int64_t default_world_size) const;
  // search: a degree flag given pins its degree, any other is searched (0; docs/search.md).
  // Throws UsageError for a malformed value, dockyard::Error (exit 1, out of range) for a pinned
  // degree < 1 (0 would silently mean "searched").
  DegreePins ParsePins() const;
};

// The training flags of both front ends, kept as text until parsed so that errors quote the value
// given; Parse turns them into typed overrides of a spec's training block
// (planner/model/training_overrides.h, ApplyTrainingOverrides). Empty text / false = not given.
struct TrainingFlags {
  std::string dp_sharding, pp_layer_split, param_dtype, grad_dtype, optimizer, seq_len, micro_batch_size, num_microbatches, recompute,
      recompute_modules, precision, fp8_recipe, optimizer_states_dtype, gpu_memory_gib, imbalance, gpus_per_node, dispatcher, oep,
      refit_dtype, memory_reserve_gib, selective_ac_option;
  std::string moe_flex_dispatcher_backend;  // Megatron --moe-flex-dispatcher-backend (planner/model/dispatcher.h FlexBackend)
  bool fp8_dispatch = false;
  bool fp8_param_gather = false;
  bool fp8_dot_product_attention = false;
  std::string mtp_layers;
  std::string make_vocab_size_divisible_by;  // Megatron-LM --make-vocab-size-divisible-by (vocab_padding.h)
  // Schedule settings (planner/model/pipeline_schedule.h RunSettings).
  std::string fsdp_reshard, grad_accumulation_steps, vpp, cp_comm;
  std::string pipeline_layout;  // Megatron --pipeline-model-parallel-layout (planner/model/pipeline_layout.h)
  bool account_for_embedding = false, account_for_loss = false;
  std::string pipeline_schedule;  // --pipeline-schedule (pipeline_schedule.h)
  std::string megatron_core_version;  // --megatron-core-version (planner/model/run_settings.h)
  // --cross-entropy unfused | fused and --cross-entropy-fusion-impl native | te (run_settings.h).
  std::string cross_entropy, cross_entropy_fusion_impl;
  std::string clip_grad;
  bool no_check_for_nan_in_grad = false;
  bool no_overlap_p2p_comm = false;
  bool delay_wgrad_compute = false;  // Megatron --delay-wgrad-compute (run_settings.h)
  bool moe_pad_expert_input_to_capacity = false;  // Megatron --moe-pad-expert-input-to-capacity (run_settings.h)
  bool no_gradient_accumulation_fusion = false;  // Megatron --no-gradient-accumulation-fusion (run_settings.h)
  bool use_transformer_engine_op_fuser = false;  // Megatron --use-transformer-engine-op-fuser (run_settings.h)
  bool tp_comm_overlap = false;  // Megatron --tp-comm-overlap[=true|false] (run_settings.h)
  bool tp_comm_overlap_given = false;  // given at all (RecordGivenFlags): then it overrides a spec's training block
  bool overlap_grad_reduce = false, overlap_param_gather = false, overlap_moe_ep_comm = false;
  bool overlap_param_gather_with_optimizer_step = false, no_align_param_gather = false;  // run_settings.h
  std::string ddp_bucket_size;  // Megatron --ddp-bucket-size (run_settings.h)
  std::string moe_flex_dispatcher_num_sms;  // Megatron --moe-flex-dispatcher-num-sms (run_settings.h)
  std::string cuda_device_max_connections;  // CUDA_DEVICE_MAX_CONNECTIONS (run_settings.h)
  bool moe_shared_expert_overlap = false;  // Megatron --moe-shared-expert-overlap
  bool overlap_moe_ep_comm_pinned = false;  // search: the flag given, on or off

  // dockyard-plan (plan, check, simulate): every training flag, --dp-sharding ... --overlap-param-gather.
  void AddTo(CLI::App* app);
  // dockyard-plan search: the subset a search takes, with the plan's descriptions from `plan`
  // (AddTo first) except where the flag pins a searched setting; --vpp, --dispatcher and
  // --overlap-moe-expert-parallel-comm as pins.
  void AddSearchPinsTo(CLI::App* search, const CLI::App& plan);
  // dockyard-run: --seq-len (replay), --dispatcher, --oep, --moe-flex-dispatcher-backend, --gpus-per-node.
  void AddRunTo(CLI::App* app);
  // The flags given, typed. Throws UsageError for a malformed number (ranges are
  // ApplyTrainingOverrides' / ValidateTraining's).
  TrainingOverrides Parse() const;
  // search: the settings searched beside the degrees that these flags pin
  // (planner/search/search_space.h ApplySearchedSettings).
  SearchSettingsPinned SearchPinned() const;
};

// The global batch of simulate and search (planner/model/global_batch.h): --global-batch-size N
// sequences or --global-batch-tokens N tokens (a whole number of --seq-len sequences), not both.
struct GlobalBatchFlags {
  std::string size, tokens;

  // Registers both options on `app`; `default_help` ends their help ("default: ...").
  void AddTo(CLI::App* app, const std::string& default_help);
  bool Given() const { return !size.empty() || !tokens.empty(); }
  // The global batch in sequences, nullopt when neither flag is given. Throws UsageError when both
  // are given or a value is malformed; dockyard::Error (exit 1) for a value < 1 or tokens that are
  // not whole sequences.
  std::optional<int64_t> Sequences(int64_t seq_len) const;
};

// Writes a report: "-" prints `content` to `out`, any other path is written atomically
// (planner/base/file_util.h). Throws dockyard::Error naming the path.
void WriteOutput(const std::string& path, const std::string& content, std::ostream& out);

// One output file of a command: the flag that asked for it (e.g. "--json"), its path and content.
struct OutputFile {
  std::string flag, path, content;
};
// Writes every file all-or-nothing (file_util.h WriteFilesAtomically); an error about a file is
// rethrown with its flag in front ("--json /dev/full: write failed: ..."), so the user knows which
// output failed.
void WriteOutputFiles(const std::vector<OutputFile>& files);

// The redundant-experts flags of both front ends, as text: --redundant-experts R, --eplb-policy,
// --expert-groups, --replica-choice (docs/redundant-experts.md).
struct RedundantExpertsFlags {
  std::string redundant_experts, eplb_policy = "auto", expert_groups = "1", replica_choice = "local";
};
// Adds the four options to `app`; `what` ends the --redundant-experts help text.
void AddRedundantExpertsFlags(CLI::App* app, RedundantExpertsFlags& flags, const std::string& what);
// nullopt when --redundant-experts is not given. Throws UsageError for a malformed number,
// dockyard::Error for an unknown policy or choice.
std::optional<RedundantExpertsOptions> ParseRedundantExpertsFlags(const RedundantExpertsFlags& flags);

// --memory-reserve-gib, the one definition check, simulate and search register: GiB of the
// budget held back for the CUDA context, NCCL buffers and allocator fragmentation
// (planner/accounting/memory.h OverBudget, kDefaultMemoryReserveGib).
void AddMemoryReserveFlag(CLI::App* app, std::string& value);
// The reserve in force: the flag's value when given, else `from_spec` (a model spec's training
// block), else kDefaultMemoryReserveGib. Throws UsageError for a malformed number; the range is
// ValidateTraining's.
double ResolveMemoryReserve(const std::string& value, std::optional<double> from_spec);
// How an error names the reserve: "--memory-reserve-gib" when the flag was given, else where the
// value came from (kDefaultMemoryReserveGib or the model spec's training.memory_reserve_gib).
std::string MemoryReserveName(const std::string& value);
// How an error names the budget: "--gpu-memory-gib" when the flag was given, else the model
// spec's training.gpu_memory_gib.
std::string MemoryBudgetName(const std::string& value);
// How an error or warning names the sequence length: "--seq-len" when the flag was given, else the
// model spec's training.seq_len, by its JSON path (the only other source a bad value can have).
std::string SeqLenName(const std::string& value);

}  // namespace dockyard::cli
