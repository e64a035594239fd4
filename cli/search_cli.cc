// dockyard-plan search (see search_cli.h).
#include "cli/search_cli.h"

#include <algorithm>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unistd.h>
#include <utility>
#include <vector>

#include <CLI/TypeTools.hpp>
#include <fmt/format.h>

#include "cli/flags.h"
#include "cli/progress_lines.h"
#include "planner/base/error.h"
#include "planner/model/flex_backend_limits.h"
#include "planner/base/file_util.h"
#include "planner/layout/default_layout.h"
#include "planner/model/model_spec.h"
#include "planner/layout/plan.h"
#include "planner/accounting/memory.h"
#include "cli/framework_flags.h"
#include "planner/model/recompute.h"
#include "planner/model/seq_len.h"
#include "planner/report/search_command.h"
#include "planner/search/explain.h"
#include "planner/search/redundant_search.h"
#include "planner/search/search_space.h"
#include "planner/calibration/calibration.h"
#include "planner/cost/compute_model.h"
#include "planner/cost/network.h"

namespace dockyard {
namespace {

using CliOptions = cli::PlanCliOptions;
using cli::ApplyComputeFlags;
using cli::kDefaultProgressIntervalS;
using cli::ParseInt;
using cli::ParseNumber;
using cli::ProgressLines;
using cli::ProgressTicker;
using cli::ReportProvenance;
using cli::ResolveTraining;
using cli::UsageError;
using cli::WriteOutput;

// The search's scope and machine from the flags: world size and convention, --top, --max-pp, the
// budget flag, the cluster with the calibration applied (returned), the compute flags and the
// routing.
std::optional<Calibration> ReadSearchMachine(const CliOptions& o, SearchOptions* s) {
  cli::RequireWorldSize(o);
  const ParallelDimsOptions given = o.degrees.Parse(kDefaultWorldSize);
  s->world_size = given.world_size;
  s->convention = given.convention;
  s->top = ParseInt("--top", o.top).value_or(10);
  if (s->top < 1) throw Error(fmt::format("--top must be >= 1, got {}", s->top));
  s->max_pp = ParseInt("--max-pp", o.max_pp).value_or(16);
  if (s->max_pp < 1) throw Error(fmt::format("--max-pp must be >= 1, got {}", s->max_pp));
  ValidateSearchBudgetFlag(ParseNumber("--gpu-memory-gib", o.training.gpu_memory_gib));
  s->cluster = WithFlag("--cluster", [&] { return LoadCluster(o.cluster); });
  std::optional<Calibration> calibration;
  if (!o.calibration.empty()) {
    calibration = WithFlag("--calibration", [&] { return LoadCalibration(o.calibration); });
    ApplyCalibration(*calibration, &s->cluster);
  }
  s->routing = WithFlag("--routing", [&] { return ParseRoutingSpec(o.routing); });
  s->routing.seed = cli::ParseSeed(o.seed);
  cli::RejectImbalanceWithRouting(o.search_routing_given, o.training.imbalance);
  s->routing_sizes_memory = o.search_routing_given;  // as check and simulate: the sample sizes memory
  return calibration;
}

// The training every candidate starts from (the model's block with the flags over it), its
// sequence length, budget and node size warned about on `err` (and kept in `warnings`) and its
// memory reserve checked against the budget.
void ReadSearchTraining(const CliOptions& o, const ModelSpec& model, SearchOptions* s, std::vector<std::string>* warnings, std::ostream& err) {
  // --fp8-dispatch reaches the candidates whose dispatcher has it (all_to_all, deepep).
  cli::TrainingFlags training_flags = o.training;
  training_flags.fp8_dispatch = false;
  // --moe-flex-dispatcher-backend likewise reaches the deepep candidates (search_options.h CandidateTraining).
  training_flags.moe_flex_dispatcher_backend.clear();
  // torchtitan's selective_ac_option is a form of selective recompute: it pins that dimension
  // (search_space.h ApplySearchedSettings), so the training it is validated with has it.
  if (!training_flags.selective_ac_option.empty() && training_flags.recompute.empty()) training_flags.recompute = "selective";
  // Likewise --recompute-modules without --recompute: the list is validated as selective's and
  // applies to the selective candidates (recompute stays searched; search_options.h CandidateTraining).
  if (!training_flags.recompute_modules.empty() && training_flags.recompute.empty()) training_flags.recompute = "selective";
  RejectMegatronOnlyOverrides(training_flags.Parse(), IsTorchtitan(s->convention));  // before their own rules
  s->training = ResolveTraining(training_flags, model, 1);
  RejectMegatronOnlyRunSettings(s->training, IsTorchtitan(s->convention));
  ApplyComputeFlags(o, &s->compute_model, &s->training.run);
  s->gpu_memory_gib = cli::ResolveMachine(training_flags, model).gpu_memory_gib;  // the node size is the cluster's
  // The bound first (RunSearch holds it too, naming the flag): a bad value is blamed on where it came from.
  ValidateSeqLenForModel(s->training.seq_len, model, cli::SeqLenName(o.training.seq_len));
  cli::Warn(SeqLenWarning(s->training.seq_len, model, cli::SeqLenName(o.training.seq_len)), warnings, err);
  s->training.fp8_dispatch = o.training.fp8_dispatch;
  if (!o.training.moe_flex_dispatcher_backend.empty()) {
    s->training.moe_flex_dispatcher_backend = ParseFlexBackend(o.training.moe_flex_dispatcher_backend, "--moe-flex-dispatcher-backend");
    // A backend the convention refuses (ncclep under torchtitan) fails here, as in simulate, not
    // as every deepep candidate invalid by rule.
    if (std::string refused = FlexBackendConventionError(s->training, s->convention == Convention::kMegatron); !refused.empty()) {
      throw Error(refused);
    }
  }
  cli::Warn(cli::BudgetAboveClusterWarning(s->gpu_memory_gib, s->cluster), warnings, err);
  cli::Warn(cli::NodeSizeClusterWarning(o.training, model, s->cluster, "search"), warnings, err);
  cli::Warn(cli::PartialNodeWarning(s->world_size, s->cluster), warnings, err);
  ValidateMemoryReserve(
      SearchBudgetGib(*s), s->training.memory_reserve_gib.value_or(0),
      s->gpu_memory_gib > 0 ? cli::MemoryBudgetName(o.training.gpu_memory_gib) : "memory_gib of cluster " + s->cluster.name,
      cli::MemoryReserveName(o.training.memory_reserve_gib));
}

// What the search varies and how: the opt-in dispatchers, the pinned degrees and settings, the
// threads and the global batch (default: one sequence per GPU).
void ReadSearchSpace(const CliOptions& o, SearchOptions* s) {
  ParseSearchDispatchers(o.search_dispatchers, s);
  s->pins = o.degrees.ParsePins();
  ApplySearchedSettings(o.training.SearchPinned(), s);
  s->threads = static_cast<int>(std::clamp<int64_t>(ParseInt("--threads", o.threads).value_or(1), -1, 1 << 20));
  if (s->threads < 1 || s->threads > 1024) throw Error(fmt::format("--threads: must be in [1, 1024], got {}", o.threads));
  if (s->world_size < 1) throw Error(fmt::format("--world-size: must be >= 1, got {}", s->world_size));
  s->global_batch_size = o.global_batch.Sequences(s->training.seq_len).value_or(s->world_size);
}

// A progress bar on `err`, redrawn in place (for a terminal).
std::function<void(int64_t, int64_t)> ProgressBar(std::ostream& err) {
  return [&err](int64_t done, int64_t total) {
    const int width = 40;
    const int filled = static_cast<int>(width * done / std::max<int64_t>(1, total));
    err << "\r[" << std::string(filled, '#') << std::string(width - filled, ' ') << "] " << done << "/" << total << std::flush;
    if (done == total) err << "\n";
  };
}

// --progress-interval: seconds >= 0, default kDefaultProgressIntervalS. Throws UsageError for a
// malformed number, dockyard::Error (exit 1) for a negative one.
double ProgressInterval(const std::string& text) {
  const double v = ParseNumber("--progress-interval", text).value_or(kDefaultProgressIntervalS);
  if (v < 0) throw Error(fmt::format("--progress-interval: must be >= 0 seconds, got {}", text));
  return v;
}

// Writes the search's documents (files all-or-nothing; '-' goes to stdout) and its text. Returns
// the exit status: 1 when nothing ranked (why, on `err`).
int WriteSearchOutputs(const CliOptions& o, const SearchCommandResult& result, const std::string& emitted, std::ostream& out,
                       std::ostream& err) {
  if (result.empty) {
    err << result.empty_text;
    return 1;
  }
  const bool emit_stdout = !o.emit.empty() && (o.emit_out.empty() || o.emit_out == "-");
  std::vector<cli::OutputFile> files;
  if (!o.emit.empty() && !emit_stdout) files.push_back({"--emit-out", o.emit_out, emitted});
  if (o.html_given) files.push_back({"--html", o.html_path, result.html_text});
  if (o.json_given && o.json_path != "-") files.push_back({"--json", o.json_path, result.report_text});
  cli::WriteOutputFiles(files);
  if (o.json_given && o.json_path == "-") {
    WriteOutput("-", result.report_text, out);
    return 0;
  }
  if (emit_stdout) {
    out << emitted;
    return 0;
  }
  if (o.framework_config) out << FrameworkConfigText(*o.framework_config);
  out << result.text;
  if (o.html_given) out << "HTML report written to " << o.html_path << "\n";
  if (!o.emit.empty()) out << cli::EmitFormatName(o.emit) << " of row " << o.emit_row << " written to " << o.emit_out << "\n";
  return 0;
}

// --emit-row N: the ranking's row N (1 = the best) planned again and written as a launch config.
// Throws dockyard::Error for a row the ranking does not show.
std::string EmitSearchRow(const CliOptions& o, const ModelSpec& model, const SearchOptions& s, const SearchCommandResult& result,
                          std::ostream& err) {
  if (o.emit.empty() || result.empty) return "";
  const int64_t row = ParseInt("--emit-row", o.emit_row).value_or(0);
  const int64_t shown = static_cast<int64_t>(result.result.top.size());
  if (row < 1 || row > shown) {
    throw Error(fmt::format("--emit-row {}: the ranking shows rows 1 to {} (--top {})", o.emit_row, shown, s.top));
  }
  const LayoutCandidate& c = result.result.top[static_cast<size_t>(row - 1)].layout;
  TrainingConfig training = CandidateTraining(s.training, c);
  // The file's MTP modules, which a search does not take, are written with the row (its layout
  // places them), and the header says the row was priced without them.
  if (o.framework_config) {
    for (const ConfigFlag& f : o.framework_config->untaken) {
      if (f.flag == "--mtp-layers") training.mtp_layers = ParseInt("--mtp-layers", f.value).value_or(0);
    }
  }
  const Plan plan = BuildPlan(model, c.dims, training, SearchPlanMachine(s));
  std::vector<std::string> notes;
  if (training.mtp_layers > 0) {
    // The ranking did not price them: said whenever they are written with a row.
    err << "dockyard-plan search: warning: --emit-row " << row << ": the ranking priced no MTP; the row is written with the file's "
        << training.mtp_layers << " MTP layer(s), whose time and memory it lacks (check it with simulate and the same --from-* file)\n";
    // The row was ranked without them: say so where the layout does not fit with them.
    const MemoryReport memory = ComputeMemory(plan);
    const double budget = SearchBudgetGib(s);
    const double reserve = s.training.memory_reserve_gib.value_or(kDefaultMemoryReserveGib);
    if (OverBudget(static_cast<double>(memory.worst_peak_bytes), budget, reserve)) {
      notes.push_back(fmt::format("WARNING: with the file's {} MTP layer(s) this layout peaks at {:.2f} GiB, over the {:.2f} GiB limit "
                                  "({:.2f} GiB budget less the {:.2f} GiB reserve): check it with check and the same --from-* file before launching",
                                  training.mtp_layers, static_cast<double>(memory.worst_peak_bytes) / (1 << 30), budget - reserve, budget,
                                  reserve));
      err << "dockyard-plan search: warning: --emit-row " << row << ": " << notes.back().substr(9) << "\n";
    }
  }
  const bool carried = o.framework_config && o.framework_config->framework == "Megatron-LM" && o.emit == "megatron";
  if (training.mtp_layers > 0 && !carried) {
    notes.push_back(fmt::format("NOTE: the ranking priced no MTP; this row is written with the file's {} MTP layer(s), whose time and memory "
                                "the row's figures lack (simulate this file for them)",
                                training.mtp_layers));
  }
  // The file's settings the search did not take and that the written row does not carry (a
  // Megatron-LM file's are carried over by --emit megatron itself).
  if (o.framework_config && !carried) {
    for (const ConfigFlag& f : o.framework_config->untaken) {
      if (f.flag == "--mtp-layers") continue;
      notes.push_back(fmt::format("NOTE: not in this row (the search does not take it): {}{} from {}", f.flag, f.value.empty() ? "" : " " + f.value,
                                  f.from));
    }
  }
  return cli::EmitText(o, plan, result.result.global_batch_size, notes);
}

}  // namespace

int cli::RunSearch(const CliOptions& o, std::ostream& out, std::ostream& err) {
  const double progress_interval = ProgressInterval(o.progress_interval);  // before any work
  SearchOptions s;
  SearchCommandRequest request;
  request.calibration = ReadSearchMachine(o, &s);
  RejectUnsearchableRunSettings(o.training.pipeline_layout, o.training.pipeline_schedule);
  const ModelSpec model = cli::LoadPlanModel(o);
  ReadSearchTraining(o, model, &s, &request.warnings, err);
  ReadSearchSpace(o, &s);
  if (!o.explain.empty()) {
    // overlap=VALUE takes the words --overlap-moe-expert-parallel-comm=VALUE takes (CLI11's flag parser).
    request.explain = ParseLayoutQuery(o.explain, [](const std::string& v) { return CLI::detail::to_flag_value(v) > 0; });
    s.keep_all = true;
  }
  ValidateSelectiveAcConvention(s.training, IsTorchtitan(s.convention));  // else every layout is invalid
  ValidateRecomputeModulesForModel(s.training, model);                                 // the fast path builds no plan
  s.routing_layers = SearchRoutingLayers(model, s.routing, ParseInt("--routing-layers", o.routing_layers));
  err << PinnedLayerSplitNote(s.training);
  // A terminal gets the bar; a log, file or pipe a plain line now and then (progress_lines.h).
  std::unique_ptr<ProgressLines> lines;
  std::unique_ptr<ProgressTicker> ticker;
  if (isatty(2)) {
    s.progress = ProgressBar(err);
  } else {
    lines = std::make_unique<ProgressLines>(err, progress_interval);
    s.progress = [&lines](int64_t done, int64_t total) { lines->Update(done, total); };
    ticker = std::make_unique<ProgressTicker>(lines.get(), 1.0);
  }
  if (!o.redundant.redundant_experts.empty()) {  // search --redundant-experts LIST (opt-in)
    request.redundant_counts = ParseRedundantCounts(o.redundant.redundant_experts);
    cli::RedundantExpertsFlags rest = o.redundant;
    rest.redundant_experts = "0";  // the list is parsed above; the policy, groups and choice here
    request.redundant = cli::ParseRedundantExpertsFlags(rest);
  }
  request.model_source = cli::PlanModelSource(o);
  request.provenance = ReportProvenance(o);
  request.json = o.json_given;
  request.html = o.html_given;
  const SearchCommandResult result = RunSearchCommand(model, s, request);
  ticker.reset();  // no progress line after the search, among its outputs
  const std::string emitted = EmitSearchRow(o, model, s, result, err);  // before any file is written
  return WriteSearchOutputs(o, result, emitted, out, err);
}

}  // namespace dockyard
