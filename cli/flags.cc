// Strict flag parsing (see flags.h).
#include "cli/flags.h"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <map>
#include <sstream>
#include <tuple>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "planner/accounting/memory.h"
#include "planner/base/error.h"
#include "planner/base/file_util.h"
#include "planner/model/global_batch.h"

namespace dockyard::cli {

uint64_t ParseSeed(const std::string& text) {
  const int64_t seed = ParseInt("--seed", text).value_or(0);
  if (seed < 0) {
    throw Error(fmt::format("--seed {}: must be >= 0 (the report records the seed as given, to replay the routing sample)", seed));
  }
  return static_cast<uint64_t>(seed);
}

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
  if (std::isspace(static_cast<unsigned char>(text.front())) || end != text.c_str() + text.size() || errno == ERANGE || !std::isfinite(v) ||
      text.find_first_of("xXpP") != std::string::npos) {
    throw UsageError(fmt::format("{} \"{}\": expected a finite decimal number", flag, text));
  }
  return v;
}

void RejectEmptyEquals(const std::vector<std::string>& args) {
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a.size() > 3 && a.rfind("--", 0) == 0 && a.find('=') == a.size() - 1) {
      throw UsageError(fmt::format("{} needs a value after '=', got none (it would take the next argument, \"{}\", as its value)",
                                   a.substr(0, a.size() - 1), i + 1 < args.size() ? args[i + 1] : ""));
    }
  }
}

void RejectEmptyValues(const CLI::App& app) {
  for (const CLI::Option* opt : app.get_options()) {
    if (opt->count() == 0 || opt->get_type_size() == 0) continue;
    for (const auto& v : opt->results()) {
      if (v.empty()) throw UsageError(fmt::format("{} needs a value, got an empty string", opt->get_name()));
    }
  }
}

int RunReportingErrors(const char* program, const char* oom_text, std::ostream& err, const std::function<int()>& body) {
  try {
    return body();
  } catch (const UsageError& e) {
    err << program << ": usage error: " << e.what() << "\nRun '" << program << " --help' for usage.\n";
    return kExitUsage;
  } catch (const Error& e) {
    err << program << ": error: " << e.what() << "\n";
    return kExitInvalidInput;
  } catch (const std::bad_alloc&) {
    err << program << ": error: " << oom_text << "\n";
    return kExitInvalidInput;
  } catch (const std::exception& e) {
    // Not expected: every input error is a dockyard::Error. Still exit cleanly, never abort.
    err << program << ": error: internal error: " << e.what() << "\n";
    return kExitInvalidInput;
  }
}

void WriteOutput(const std::string& path, const std::string& content, std::ostream& out) {
  if (path == "-") {
    out << content;
  } else {
    WriteFileAtomically(path, content);
  }
}

void WriteOutputFiles(const std::vector<OutputFile>& files) {
  std::vector<std::pair<std::string, std::string>> plain;
  for (const OutputFile& f : files) plain.push_back({f.path, f.content});
  try {
    WriteFilesAtomically(plain);
  } catch (const Error& e) {
    const std::string what = e.what();
    for (const OutputFile& f : files) {
      if (what.rfind(f.path + ":", 0) == 0) throw Error(f.flag + " " + what);
    }
    throw;
  }
}

void AddRedundantExpertsFlags(CLI::App* app, RedundantExpertsFlags& f, const std::string& what) {
  app->add_option("--redundant-experts", f.redundant_experts,
                  "R redundant expert slots (num_experts + R divisible by ep): " + what + " (default: off)");
  app->add_option("--eplb-policy", f.eplb_policy, "auto | hierarchical | global | contiguous (default auto)");
  app->add_option("--expert-groups", f.expert_groups, "expert groups for the hierarchical policy (DeepSeek-V3: n_group 8; default 1)");
  app->add_option("--replica-choice", f.replica_choice, "local (same-node replica, then an even split) | random (default local)");
}

std::optional<RedundantExpertsOptions> ParseRedundantExpertsFlags(const RedundantExpertsFlags& f) {
  const std::optional<int64_t> r = ParseInt("--redundant-experts", f.redundant_experts);
  if (!r) return std::nullopt;
  RedundantExpertsOptions o;
  o.redundant_experts = *r;
  o.policy = ParseEplbPolicy(f.eplb_policy);
  o.expert_groups = ParseInt("--expert-groups", f.expert_groups).value_or(1);
  o.choice = ParseReplicaChoice(f.replica_choice);
  return o;
}

void GlobalBatchFlags::AddTo(CLI::App* app, const std::string& default_help) {
  app->add_option("--global-batch-size", size,
                  "sequences per optimizer step (Megatron --global-batch-size, torchtitan global_batch_size); micro-batches per step "
                  "= N / (dp x micro-batch size); " +
                      default_help);
  app->add_option("--global-batch-tokens", tokens, "the global batch in tokens (a multiple of --seq-len); " + default_help);
}

std::optional<int64_t> GlobalBatchFlags::Sequences(int64_t seq_len) const {
  if (!size.empty() && !tokens.empty()) throw UsageError("--global-batch-size and --global-batch-tokens: give one, not both");
  if (const auto n = ParseInt("--global-batch-size", size)) {
    if (*n < 1) throw Error(fmt::format("--global-batch-size: must be >= 1, got {}", *n));  // out of range: exit 1
    CheckGlobalBatchTokens(*n, seq_len, "--global-batch-size");
    return n;
  }
  if (const auto n = ParseInt("--global-batch-tokens", tokens)) {
    if (*n < 1) throw Error(fmt::format("--global-batch-tokens: must be >= 1, got {}", *n));
    const int64_t sequences = GlobalBatchSequencesFromTokens(*n, seq_len);
    CheckGlobalBatchTokens(sequences, seq_len, "--global-batch-tokens");
    return sequences;
  }
  return std::nullopt;
}

void DegreeFlags::AddTo(CLI::App* app, const std::string& world_size_help, const std::string& pp_help) {
  app->add_option("--world-size", world_size, world_size_help);
  app->add_option("--dp-replicate", dp_replicate, "HSDP replicas (default 1)");
  app->add_option("--dp-shard", dp_shard, "FSDP degree, -1 = infer (default -1)");
  app->add_option("--cp", cp, "context parallel degree (default 1)");
  app->add_option("--tp", tp, "tensor parallel degree (default 1)");
  app->add_option("--ep", ep, "expert parallel degree (default 1)");
  app->add_option("--etp", etp,
                  "expert tensor parallel degree (default: 1; megatron: tp, Megatron-LM's default); torchtitan: 1 (expert TP "
                  "removed), torchtitan-2026-03: 1 or tp, megatron: any divisor");
  app->add_option("--pp", pp, pp_help);
  app->add_option("--convention", convention,
                  "whose rules and defaults: torchtitan (as it is: no expert TP, ep >= tp), torchtitan-2026-03 (before torchtitan "
                  "PR #3167: etp 1 or tp) or megatron (default torchtitan)")
      ->check(CLI::IsMember(ConventionNames()));
}

bool DegreeFlags::AnyDegreeGiven() const {
  for (const std::string* v : {&world_size, &dp_replicate, &dp_shard, &cp, &tp, &ep, &etp, &pp}) {
    if (!v->empty()) return true;
  }
  return false;
}

ParallelDimsOptions DegreeFlags::Parse(int64_t default_world_size) const {
  ParallelDimsOptions d;
  d.world_size = ParseInt("--world-size", world_size).value_or(default_world_size);
  d.dp_replicate = ParseInt("--dp-replicate", dp_replicate).value_or(1);
  d.dp_shard = ParseInt("--dp-shard", dp_shard).value_or(-1);
  d.cp = ParseInt("--cp", cp).value_or(1);
  d.tp = ParseInt("--tp", tp).value_or(1);
  d.ep = ParseInt("--ep", ep).value_or(1);
  d.etp = ParseInt("--etp", etp);  // unset: the convention's default (ParallelDims::Build, DefaultEtp)
  d.pp = ParseInt("--pp", pp).value_or(1);
  d.convention = ParseConvention(convention, "--convention");
  return d;
}

DegreePins DegreeFlags::ParsePins() const {
  DegreePins pins;
  pins.dp_replicate = ParseInt("--dp-replicate", dp_replicate).value_or(0);
  pins.dp_shard = ParseInt("--dp-shard", dp_shard).value_or(0);
  pins.cp = ParseInt("--cp", cp).value_or(0);
  pins.tp = ParseInt("--tp", tp).value_or(0);
  pins.ep = ParseInt("--ep", ep).value_or(0);
  pins.etp = ParseInt("--etp", etp).value_or(0);
  pins.pp = ParseInt("--pp", pp).value_or(0);
  // A given flag pins its degree (0 would silently mean "searched"): it must be >= 1.
  for (const auto& [flag, raw, value] :
       {std::tuple<const char*, const std::string&, int64_t>{"--dp-replicate", dp_replicate, pins.dp_replicate},
        {"--dp-shard", dp_shard, pins.dp_shard},
        {"--cp", cp, pins.cp},
        {"--tp", tp, pins.tp},
        {"--ep", ep, pins.ep},
        {"--etp", etp, pins.etp},
        {"--pp", pp, pins.pp}}) {
    if (!raw.empty() && value < 1) throw Error(fmt::format("{}: a pinned degree must be >= 1, got {}", flag, value));
  }
  return pins;
}

void AddMemoryReserveFlag(CLI::App* app, std::string& value) {
  app->add_option("--memory-reserve-gib", value,
                  fmt::format("GiB of the budget held back for the CUDA context, NCCL buffers and allocator fragmentation "
                              "(default {:.1f}; docs/memory-model.md)",
                              kDefaultMemoryReserveGib));
}

double ResolveMemoryReserve(const std::string& value, std::optional<double> from_spec) {
  if (const std::optional<double> v = ParseNumber("--memory-reserve-gib", value)) return *v;
  return from_spec.value_or(kDefaultMemoryReserveGib);
}

std::string MemoryBudgetName(const std::string& value) {
  return value.empty() ? "the model spec's training.gpu_memory_gib" : "--gpu-memory-gib";
}

std::string SeqLenName(const std::string& value) {
  return value.empty() ? "the model spec's /training/seq_len" : "--seq-len";
}

std::string MemoryReserveName(const std::string& value) {
  if (!value.empty()) return "--memory-reserve-gib";
  return fmt::format(
      "the memory reserve (--memory-reserve-gib not given: the default {:.1f} GiB or the model spec's "
      "training.memory_reserve_gib)",
      kDefaultMemoryReserveGib);
}

}  // namespace dockyard::cli
