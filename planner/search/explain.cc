// Why a layout ranks where it does (see explain.h).
#include "planner/search/explain.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "planner/base/error.h"
#include "planner/base/json_util.h"
#include "planner/layout/plan.h"
#include "planner/search/layout_eval.h"
#include "planner/model/pipeline_schedule.h"

namespace dockyard {
namespace {

int64_t ParseQueryInt(const std::string& key, const std::string& value) {
  const bool all_digits = !value.empty() && std::all_of(value.begin(), value.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
  if (all_digits && value.size() > 12) {
    throw Error(fmt::format("--explain: {}={}: out of range (a whole number below 10^12 expected)", key, value));
  }
  if (!all_digits || std::stoll(value) < 1) {
    const bool separator = value.find_first_of(";:& ") != std::string::npos;  // "tp=2;pp=2": one item to this parser
    throw Error(fmt::format("--explain: {}={}: expected a whole number >= 1{}", key, value,
                            separator ? " (items are separated by commas: \"tp=2,pp=2\")" : ""));
  }
  return std::stoll(value);
}

std::string OneOf(const std::string& key, const std::string& value, const std::vector<std::string>& allowed) {
  if (std::find(allowed.begin(), allowed.end(), value) != allowed.end()) return value;
  std::string list;
  for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
  throw Error(fmt::format("--explain: {}={}: expected one of {}", key, value, list));
}

// A yes/no value: `parse_bool` (the front end's flag parser, so the query and the flag take the
// same words), else on/off. Any exception of the parser is the query's error.
bool ParseQueryBool(const std::string& key, const std::string& value, const QueryBoolParser& parse_bool) {
  try {
    if (parse_bool) return parse_bool(value);
  } catch (const std::exception&) {
    throw Error(fmt::format("--explain: {}={}: expected on or off (or true/false, yes/no, 1/0, as the flag takes)", key, value));
  }
  if (value == "on" || value == "off") return value == "on";
  throw Error(fmt::format("--explain: {}={}: expected on or off", key, value));
}

std::string DpShardingOf(const TrainingConfig& t, Convention convention) {
  return DpShardingName(t.dp_sharding.value_or(DefaultDpSharding(convention)));
}

template <typename T>
bool Holds(const std::optional<T>& want, const T& have) {
  return !want || *want == have;
}

// Throws unless `value` is among `values` (a searched setting's values, or its one pinned value
// when `pin_flag` names the flag that pins it).
void RequireSearched(const std::string& where, const char* key, const std::string& value, const std::vector<std::string>& values,
                     const std::string& pin_flag) {
  if (std::find(values.begin(), values.end(), value) != values.end()) return;
  if (values.size() == 1 && !pin_flag.empty()) {
    throw Error(fmt::format("{}: {}={} is outside the search: {} pins it to {}", where, key, value, pin_flag, values.front()));
  }
  throw Error(fmt::format("{}: {}={} is not searched (searched: {})", where, key, value, fmt::join(values, ", ")));
}

// Each number as text, in order.
std::vector<std::string> Numbers(const std::vector<int64_t>& v) {
  std::vector<std::string> out;
  for (int64_t x : v) out.push_back(std::to_string(x));
  return out;
}

// The query's degrees against the pins (DegreePins: 0 = searched), the world size and --max-pp.
void CheckQueryDegrees(const LayoutQuery& q, const SearchOptions& o, const std::string& where) {
  const std::tuple<const char*, const char*, const std::optional<int64_t>&, int64_t> degrees[] = {
      {"pp", "--pp", q.pp, o.pins.pp},
      {"dp_replicate", "--dp-replicate", q.dp_replicate, o.pins.dp_replicate},
      {"dp_shard", "--dp-shard", q.dp_shard, o.pins.dp_shard},
      {"cp", "--cp", q.cp, o.pins.cp},
      {"tp", "--tp", q.tp, o.pins.tp},
      {"ep", "--ep", q.ep, o.pins.ep},
      {"etp", "--etp", q.etp, o.pins.etp}};
  int64_t product = 1;  // of the mesh degrees given: pp x dp_replicate x dp_shard x cp x tp
  for (const auto& [key, flag, want, pin] : degrees) {
    if (!want) continue;
    if (pin != 0 && *want != pin) {
      throw Error(fmt::format("{}: {}={} is outside the search: {} pins it to {}", where, key, *want, flag, pin));
    }
    if (*want > o.world_size || o.world_size % *want != 0) {
      throw Error(
          fmt::format("{}: {}={} does not divide the world size {} (every degree is a factor of it)", where, key, *want, o.world_size));
    }
    if (std::string(key) != "ep" && std::string(key) != "etp") {
      product *= *want;
      if (o.world_size % product != 0) {
        throw Error(
            fmt::format("{}: the degrees given multiply to {} (by {}={}), which does not divide the world size {} (world = pp x "
                        "dp_replicate x dp_shard x cp x tp)",
                        where, product, key, *want, o.world_size));
      }
    }
  }
  if (q.pp && *q.pp > o.max_pp) throw Error(fmt::format("{}: pp={} is above --max-pp {}", where, *q.pp, o.max_pp));
}

// The query's mbs, vpp, recompute and dp_sharding: one of the searched values, or the training
// config's value when the list is empty (pinned).
void CheckQuerySettings(const LayoutQuery& q, const SearchOptions& o, const std::string& where) {
  if (q.micro_batch_size) {
    const bool pinned = o.micro_batch_sizes.empty();
    RequireSearched(where, "mbs", std::to_string(*q.micro_batch_size),
                    Numbers(pinned ? std::vector<int64_t>{o.training.micro_batch_size} : o.micro_batch_sizes),
                    pinned ? "--micro-batch-size" : "");
  }
  if (q.vpp) {
    if (*q.vpp > 1 && q.pp && *q.pp == 1) {
      throw Error(
          fmt::format("{}: vpp={} needs pp > 1 (interleaved 1F1B runs vpp model chunks per pipeline rank), got pp=1", where, *q.vpp));
    }
    if (*q.vpp > 1 || o.training.run.vpp > 1) {  // vpp 1 is every pp = 1 layout's
      const bool pinned = !VppSearched(o);
      if (!o.every_vpp) RequireSearched(where, "vpp", std::to_string(*q.vpp), Numbers(pinned ? std::vector<int64_t>{o.training.run.vpp} : o.vpps),
                      pinned ? "--vpp" : "");
    }
  }
  if (q.recompute) {
    std::vector<std::string> names;
    for (Recompute r : o.recomputes) names.push_back(RecomputeName(r));
    const bool pinned = names.empty();
    if (pinned) names.push_back(RecomputeName(o.training.recompute));
    RequireSearched(where, "recompute", *q.recompute, names, pinned ? "--recompute" : "");
  }
  if (q.dp_sharding) {
    std::vector<std::string> names;
    for (DpSharding d : o.dp_shardings) names.push_back(DpShardingName(d));
    const bool pinned = names.empty();
    if (pinned) names.push_back(DpShardingOf(o.training, o.convention));
    RequireSearched(where, "dp_sharding", *q.dp_sharding, names, pinned ? "--dp-sharding" : "");
  }
}

// The query's dispatcher: pinned by --dispatcher, searched (the opt-in ones only when asked for),
// and not with ep 1 unless it is the all-to-all.
void CheckQueryDispatcher(const LayoutQuery& q, const SearchOptions& o, const std::string& where) {
  if (!q.dispatcher) return;
  const Dispatcher want = *q.dispatcher;
  const std::string name = DispatcherName(want);
  if (!o.dispatchers.empty()) {
    std::vector<std::string> names;
    for (Dispatcher d : o.dispatchers) names.push_back(DispatcherName(d));
    RequireSearched(where, "dispatcher", name, names, o.dispatchers.size() == 1 ? "--dispatcher" : "");
  } else if ((want == Dispatcher::kDeepEp && !o.include_deepep) || (want == Dispatcher::kAllGather && !o.include_allgather) ||
             (want == Dispatcher::kDeredundency && !o.include_deredundency)) {
    throw Error(
        fmt::format("{}: dispatcher={} is not searched (add --search-dispatchers {} or pin --dispatcher {})", where, name, name, name));
  }
  if (want != Dispatcher::kAllToAll && q.ep && *q.ep == 1) {
    throw Error(fmt::format("{}: dispatcher={} needs ep > 1 (with ep 1 no token leaves its rank), got ep=1", where, name));
  }
}

// The query's EP overlap: searched (or pinned to it), and, when on, Megatron's rules on the keys
// the query fixes.
void CheckQueryOverlap(const LayoutQuery& q, const SearchOptions& o, const std::string& where) {
  if (!q.overlap_moe_ep_comm) return;
  const bool on = *q.overlap_moe_ep_comm;
  if (o.ep_overlaps.empty() && on != o.training.run.overlap_moe_ep_comm) {
    throw Error(fmt::format("{}: overlap={} is outside the search: EP overlap is {} ({})", where, on ? "on" : "off",
                            o.training.run.overlap_moe_ep_comm ? "on" : "off",
                            o.convention == Convention::kMegatron ? "pinned by --overlap-moe-expert-parallel-comm"
                                                                  : "searched under --convention megatron only"));
  }
  if (!on) return;
  // Megatron's rules (ValidateEpOverlap) on the keys the query fixes; a key not given takes a
  // value that passes, so only the query's own values can break them.
  TrainingConfig t = o.training;
  t.run.overlap_moe_ep_comm = true;
  t.run.vpp = q.vpp.value_or(2);
  t.dispatcher = q.dispatcher.value_or(Dispatcher::kAllToAll);
  if (q.recompute) t.recompute = ParseRecompute(*q.recompute, "--explain: recompute");
  if (!q.recompute && !o.recomputes.empty()) t.recompute = Recompute::kNone;  // searched: none is among them
  try {
    ValidateEpOverlap(t, q.pp.value_or(o.pins.pp != 0 ? o.pins.pp : 1), q.ep.value_or(o.pins.ep != 0 ? o.pins.ep : 2));
  } catch (const Error& error) {
    throw Error(fmt::format("{}: overlap=on breaks Megatron's rule: {}", where, error.what()));
  }
}

}  // namespace

LayoutQuery ParseLayoutQuery(const std::string& text, const QueryBoolParser& parse_bool) {
  LayoutQuery q;
  q.text = text;
  const std::vector<std::string> keys = {"pp",        "dp_replicate", "dpr",         "dp_shard", "dps", "cp",
                                         "tp",        "ep",           "etp",         "vpp",      "mbs", "micro_batch_size",
                                         "recompute", "dispatcher",   "dp_sharding", "overlap"};
  std::map<std::string, bool> seen;
  size_t start = 0;
  int items = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    const std::string item = TrimSpaces(text.substr(start, comma - start));  // " tp = 2 " is tp=2
    start = comma + 1;
    if (item.empty()) {
      if (comma == text.size() && items > 0) break;  // a trailing comma
      throw Error(fmt::format("--explain \"{}\": an empty item (expected key=value, comma-separated)", text));
    }
    ++items;
    const size_t eq = item.find('=');
    if (eq == std::string::npos) throw Error(fmt::format("--explain: \"{}\" is not key=value", item));
    std::string key = TrimSpaces(item.substr(0, eq));
    if (key.empty()) throw Error(fmt::format("--explain: \"{}\": an empty key (expected key=value)", item));
    std::transform(key.begin(), key.end(), key.begin(), [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
    const std::string value = TrimSpaces(item.substr(eq + 1));
    if (std::find(keys.begin(), keys.end(), key) == keys.end()) {
      // A value that only one key takes names that key ("dp=zero1": dp_sharding); else the closest spelling.
      std::optional<std::string> hint;
      for (const auto& [named, values] : {std::pair<const char*, std::vector<std::string>>{"recompute", RecomputeNames()},
                                          {"dispatcher", DispatcherNames()},
                                          {"dp_sharding", DpShardingNames()}}) {
        if (std::find(values.begin(), values.end(), value) != values.end()) hint = named;
      }
      if (!hint) hint = DidYouMean(key, keys);
      throw Error(
          fmt::format("--explain: unknown key \"{}\"{} (keys: pp, dp_replicate, dp_shard, cp, tp, ep, etp, vpp, mbs, recompute, "
                      "dispatcher, dp_sharding, overlap)",
                      key, hint ? fmt::format(", did you mean '{}'?", *hint) : ""));
    }
    if (key == "dpr") key = "dp_replicate";
    if (key == "dps") key = "dp_shard";
    if (key == "micro_batch_size") key = "mbs";
    if (seen[key]) throw Error(fmt::format("--explain: {} given twice", key));
    seen[key] = true;
    if (key == "pp") q.pp = ParseQueryInt(key, value);
    if (key == "dp_replicate") q.dp_replicate = ParseQueryInt(key, value);
    if (key == "dp_shard") q.dp_shard = ParseQueryInt(key, value);
    if (key == "cp") q.cp = ParseQueryInt(key, value);
    if (key == "tp") q.tp = ParseQueryInt(key, value);
    if (key == "ep") q.ep = ParseQueryInt(key, value);
    if (key == "etp") q.etp = ParseQueryInt(key, value);
    if (key == "vpp") q.vpp = ParseQueryInt(key, value);
    if (key == "mbs") q.micro_batch_size = ParseQueryInt(key, value);
    if (key == "recompute") q.recompute = OneOf(key, value, RecomputeNames());
    if (key == "dispatcher") q.dispatcher = ParseDispatcher(OneOf(key, value, DispatcherNames()), "--explain: dispatcher");
    if (key == "dp_sharding") q.dp_sharding = OneOf(key, value, DpShardingNames());
    if (key == "overlap") q.overlap_moe_ep_comm = ParseQueryBool(key, value, parse_bool);
  }
  if (items == 0) throw Error("--explain: an empty layout (expected e.g. \"tp=2,pp=8,vpp=4,ep=32\")");
  return q;
}

// A candidate as an --explain query that matches it alone (degrees as validated, settings as it runs).
static std::string CandidateQueryText(const ParallelDims& d, const LayoutCandidate& c, const TrainingConfig& base) {
  const TrainingConfig t = CandidateTraining(base, c);
  return fmt::format("pp={},dp_replicate={},dp_shard={},cp={},tp={},ep={},etp={},vpp={},mbs={},recompute={},dp_sharding={},dispatcher={},overlap={}",
                     d.pp, d.dp_replicate, d.dp_shard, d.cp, d.tp, d.ep, d.etp, t.run.vpp, t.micro_batch_size, RecomputeName(t.recompute),
                     DpShardingOf(t, d.convention), DispatcherName(c.dispatcher), t.run.overlap_moe_ep_comm ? "on" : "off");
}

// The same for a candidate whose degrees did not validate: as enumerated (dp_shard -1 = inferred).
static std::string CandidateQueryText(const LayoutCandidate& c, const TrainingConfig& base) {
  const TrainingConfig t = CandidateTraining(base, c);
  const auto& d = c.dims;
  return fmt::format("pp={},dp_replicate={},dp_shard={},cp={},tp={},ep={},etp={},vpp={},mbs={},recompute={},dp_sharding={},dispatcher={},overlap={}",
                     d.pp, d.dp_replicate, d.dp_shard, d.cp, d.tp, d.ep, EtpOf(d), t.run.vpp, t.micro_batch_size, RecomputeName(t.recompute),
                     DpShardingOf(t, d.convention), DispatcherName(c.dispatcher), t.run.overlap_moe_ep_comm ? "on" : "off");
}

static double GiBOf(int64_t bytes) { return static_cast<double>(bytes) / static_cast<double>(int64_t{1} << 30); }

bool LayoutQuery::Matches(const RankedLayout& x) const {
  const auto& d = x.layout.dims;
  return Holds(pp, d.pp) && Holds(dp_replicate, d.dp_replicate) && Holds(dp_shard, d.dp_shard) && Holds(cp, d.cp) && Holds(tp, d.tp) &&
         Holds(ep, d.ep) && Holds(etp, EtpOf(d)) && Holds(vpp, x.vpp) && Holds(micro_batch_size, x.micro_batch_size) &&
         Holds(recompute, x.recompute) && Holds(dispatcher, x.layout.dispatcher) && Holds(dp_sharding, x.dp_sharding) &&
         Holds(overlap_moe_ep_comm, x.overlap_moe_ep_comm);
}

bool LayoutQuery::Matches(const LayoutCandidate& c, const TrainingConfig& base) const {
  const TrainingConfig t = CandidateTraining(base, c);
  const auto& d = c.dims;
  return Holds(pp, d.pp) && Holds(dp_replicate, d.dp_replicate) && Holds(dp_shard, d.dp_shard) && Holds(cp, d.cp) && Holds(tp, d.tp) &&
         Holds(ep, d.ep) && Holds(etp, EtpOf(d)) && Holds(vpp, t.run.vpp) && Holds(micro_batch_size, t.micro_batch_size) &&
         Holds(recompute, std::string(RecomputeName(t.recompute))) && Holds(dispatcher, c.dispatcher) &&
         Holds(dp_sharding, DpShardingOf(t, d.convention)) && Holds(overlap_moe_ep_comm, t.run.overlap_moe_ep_comm);
}

void ValidateLayoutQuery(const LayoutQuery& q, const SearchOptions& o) {
  const std::string where = fmt::format("--explain \"{}\"", q.text);
  CheckQueryDegrees(q, o, where);
  CheckQuerySettings(q, o, where);
  CheckQueryDispatcher(q, o, where);
  CheckQueryOverlap(q, o, where);
}

namespace {

// For a query no candidate matches: each queried degree's values among the candidates that match
// the query's other keys, e.g. "; with the other values given, ep takes 1, 2, 4, 8, 16, 32" (ep=64
// at pp=8 on 256 GPUs: a stage of 32 GPUs holds at most ep 32). Empty when no degree was queried.
std::string ValuesTakenText(const ModelSpec& model, const SearchOptions& options, const LayoutQuery& query) {
  struct Key {
    const char* name;
    std::optional<int64_t> LayoutQuery::*field;
    int64_t (*value)(const LayoutCandidate&, const TrainingConfig&);
  };
  const Key keys[] = {
      {"pp", &LayoutQuery::pp, [](const LayoutCandidate& c, const TrainingConfig&) { return c.dims.pp; }},
      {"dp_replicate", &LayoutQuery::dp_replicate, [](const LayoutCandidate& c, const TrainingConfig&) { return c.dims.dp_replicate; }},
      {"dp_shard", &LayoutQuery::dp_shard, [](const LayoutCandidate& c, const TrainingConfig&) { return c.dims.dp_shard; }},
      {"cp", &LayoutQuery::cp, [](const LayoutCandidate& c, const TrainingConfig&) { return c.dims.cp; }},
      {"tp", &LayoutQuery::tp, [](const LayoutCandidate& c, const TrainingConfig&) { return c.dims.tp; }},
      {"ep", &LayoutQuery::ep, [](const LayoutCandidate& c, const TrainingConfig&) { return c.dims.ep; }},
      {"etp", &LayoutQuery::etp, [](const LayoutCandidate& c, const TrainingConfig&) { return EtpOf(c.dims); }},
      {"vpp", &LayoutQuery::vpp, [](const LayoutCandidate& c, const TrainingConfig& base) { return CandidateTraining(base, c).run.vpp; }},
  };
  std::vector<std::string> parts;
  for (const Key& k : keys) {
    if (!(query.*k.field)) continue;
    LayoutQuery others = query;
    others.*k.field = std::nullopt;
    std::set<int64_t> values;
    ForEachLayout(model, options, [&](const LayoutCandidate& c) {
      if (others.Matches(c, options.training)) values.insert(k.value(c, options.training));
    });
    parts.push_back(values.empty() ? fmt::format("{} takes no value", k.name) : fmt::format("{} takes {}", k.name, fmt::join(values, ", ")));
  }
  if (parts.empty()) return "";
  return fmt::format("; with the other values given, {}", fmt::join(parts, "; "));
}

}  // namespace

ExplainResult ExplainLayout(const ModelSpec& model, const SearchOptions& options, const SearchResult& result, const LayoutQuery& query) {
  if (!options.keep_all) throw Error("internal: ExplainLayout needs a search run with keep_all");
  ValidateLayoutQuery(query, options);
  if (options.every_vpp && query.vpp && query.pp) {
    // vpp is searched over what the chunk rule allows at each pp: a value past it is no candidate.
    try {
      ValidateVppChunks(*query.pp, *query.vpp, model.num_hidden_layers);
    } catch (const Error& error) {
      throw Error(fmt::format("--explain \"{}\": vpp={} is not searched at pp={} (the search takes vpp 1..{}): {}", query.text, *query.vpp,
                              *query.pp, MaxVpp(*query.pp, model.num_hidden_layers), error.what()));
    }
  }
  ExplainResult e;
  e.query = query;
  e.ranked = result.ranked;
  for (size_t i = 0; i < result.all.size(); ++i) {
    if (query.Matches(result.all[i])) {
      e.rank = static_cast<int64_t>(i) + 1;
      e.layout = result.all[i];
      break;
    }
  }
  if (!e.layout) {
    // Why nothing matching ranks: the outcome of every matching candidate.
    LayoutEvaluator evaluator(model, options);
    std::optional<LayoutCandidate> first_invalid;
    ForEachLayout(model, options, [&](const LayoutCandidate& c) {
      if (!query.Matches(c, options.training)) return;
      ++e.matching;
      if (!c.batch_divides) {
        ++e.matching_not_divisible;
        if (e.example_reason.empty()) e.example_reason = c.batch_reason;
        return;
      }
      const LayoutEvaluation ev = evaluator.Evaluate(c);
      if (ev.status == LayoutEvaluation::Status::kInvalid) {
        if (e.matching_invalid++ == 0) first_invalid = c;
        auto it = std::find_if(e.rules_broken.begin(), e.rules_broken.end(),
                               [&](const ExplainResult::RuleBroken& r) { return r.message == ev.reason; });
        if (it == e.rules_broken.end()) {
          e.rules_broken.push_back({ev.reason, 0, CandidateQueryText(c, options.training)});
          it = e.rules_broken.end() - 1;
        }
        ++it->candidates;
      }
      if (ev.status == LayoutEvaluation::Status::kOverBudget) {
        ++e.matching_over_budget;
        e.over_budget.push_back({CandidateQueryText(ev.dims, c, options.training), ev.peak_bytes});
      }
    });
    std::stable_sort(e.rules_broken.begin(), e.rules_broken.end(),
                     [](const ExplainResult::RuleBroken& a, const ExplainResult::RuleBroken& b) { return a.candidates > b.candidates; });
    std::stable_sort(e.over_budget.begin(), e.over_budget.end(),
                     [](const ExplainResult::OverBudget& a, const ExplainResult::OverBudget& b) { return a.peak_bytes < b.peak_bytes; });
    e.budget_gib = SearchBudgetGib(options);
    e.reserve_gib = options.training.memory_reserve_gib.value_or(0);
    if (e.matching == 0) {
      // A query the convention's degree rules refuse outright (the search enumerates no such
      // layout): the rule, as BuildPlan words it (parallel_dims.h).
      std::string why;
      if ((query.etp && !CheckEtpForConvention(options.convention, *query.etp, &why)) ||
          (query.ep && query.tp && !CheckEpAtLeastTp(options.convention, *query.ep, *query.tp, model, &why))) {
        throw Error(fmt::format("--explain \"{}\": {}", query.text, why));
      }
      throw Error(
          fmt::format("--explain \"{}\": no layout of this search has these values together (world size {}; the degrees must factor it as "
                      "the mesh rules require: docs/search.md){}",
                      query.text, options.world_size, ValuesTakenText(model, options, query)));
    }
    if (e.matching == e.matching_invalid) {
      // Every matching candidate breaks a rule: name one, as BuildPlan words it.
      std::string rule = "a framework rule";
      try {
        BuildPlan(model, first_invalid->dims, CandidateTraining(options.training, *first_invalid), SearchPlanMachine(options));
      } catch (const Error& error) {
        rule = error.what();
      }
      throw Error(fmt::format("--explain \"{}\": all {} matching layouts are invalid by rule, e.g. {}", query.text, e.matching, rule));
    }
    return e;
  }
  e.winner = result.all.front();
  std::vector<RankedLayout> rows = {*e.winner, *e.layout};
  DescribeRows(model, options, &rows);
  e.winner = rows[0];
  e.layout = rows[1];
  std::map<std::string, PhaseDifference> by_phase;
  for (const auto& [name, us] : rows[0].phase_us) by_phase[name].winner_us = us;
  for (const auto& [name, us] : rows[1].phase_us) by_phase[name].layout_us = us;
  // The step time no phase's share covers ("other": pipeline sends, what the shares leave of the
  // bubble) or, when the shares add up to more than the step, the time they count twice
  // ("overlapped": phases hidden under others, subtracted): listed so that the differences add up
  // to the step's, and no line is negative.
  auto unattributed = [](const RankedLayout& r) {
    double attributed = 0;
    for (const auto& [name, us] : r.phase_us) attributed += us;
    return r.step_time_us - attributed;
  };
  const double rest[2] = {unattributed(rows[0]), unattributed(rows[1])};
  by_phase["other"].winner_us = std::max(rest[0], 0.0);
  by_phase["other"].layout_us = std::max(rest[1], 0.0);
  if (rest[0] < 0 || rest[1] < 0) {
    PhaseDifference& overlapped = by_phase["overlapped"];
    overlapped.subtracted = true;
    overlapped.winner_us = std::max(-rest[0], 0.0);
    overlapped.layout_us = std::max(-rest[1], 0.0);
  }
  for (auto& [name, diff] : by_phase) {
    diff.phase = name;
    e.differences.push_back(diff);
  }
  std::stable_sort(e.differences.begin(), e.differences.end(), [](const PhaseDifference& a, const PhaseDifference& b) {
    return std::fabs(a.difference_us()) > std::fabs(b.difference_us());
  });
  return e;
}

Json ExplainToJson(const ExplainResult& e) {
  Json j = {{"query", e.query.text}, {"rank", e.rank}, {"ranked", e.ranked}};
  if (!e.layout) {
    j["matching"] = {{"enumerated", e.matching},
                     {"invalid", e.matching_invalid},
                     {"over_budget", e.matching_over_budget},
                     {"not_divisible", e.matching_not_divisible}};
    if (!e.example_reason.empty()) j["matching"]["not_divisible_reason"] = e.example_reason;
    Json rules = Json::array();
    for (const auto& r : e.rules_broken) rules.push_back({{"rule", r.message}, {"candidates", r.candidates}, {"example", r.example}});
    Json over = Json::array();
    for (const auto& o : e.over_budget) over.push_back({{"layout", o.layout}, {"peak_bytes", o.peak_bytes}});
    j["matching"]["rules_broken"] = rules;
    j["matching"]["over_budget_layouts"] = over;
    j["matching"]["budget_gib"] = e.budget_gib;
    j["matching"]["reserve_gib"] = e.reserve_gib;
    return j;
  }
  j["layout"] = RankedLayoutToJson(*e.layout);
  j["winner"] = RankedLayoutToJson(*e.winner);
  Json diffs = Json::array();
  for (const auto& d : e.differences) {
    diffs.push_back({{"phase", d.phase}, {"winner_us", d.winner_us}, {"layout_us", d.layout_us}, {"difference_us", d.difference_us()}});
    if (d.subtracted) diffs.back()["subtracted"] = true;
  }
  j["differences"] = diffs;
  j["difference_larger_than_error"] = !e.layout->vs_best.tied;
  return j;
}

// Whether the layout's difference from the winner is larger than the error of such a difference
// (prediction_error.h): one sentence.
static std::string VersusWinnerText(const RankedLayout& layout) {
  const VersusBest& v = layout.vs_best;
  if (v.ratio == 1.0) return "this layout is the winner (or ties it exactly)";
  return fmt::format(
      "difference {:+.1f} %, 80 % interval [{:+.1f} %, {:+.1f} %] (the spread of differences between two measured layouts of one "
      "model on one cluster, docs/fidelity.md): {}",
      100 * (v.ratio - 1), 100 * (v.low80 - 1), 100 * (v.high80 - 1),
      v.tied ? "not larger than its error -- a tie, the model cannot tell the two apart"
             : "larger than its error -- the winner is faster");
}

std::string ExplainToText(const ExplainResult& e) {
  std::ostringstream out;
  if (!e.layout) {
    out << fmt::format(
        "Explain    \"{}\": no ranked layout matches; {} matching candidates: {} invalid by rule, {} over the budget, {} "
        "global batch not divisible\n",
        e.query.text, e.matching, e.matching_invalid, e.matching_over_budget, e.matching_not_divisible);
    if (!e.example_reason.empty()) out << "           e.g. " << e.example_reason << "\n";
    for (const auto& r : e.rules_broken) {
      out << fmt::format("  invalid by rule ({} candidate{}): {}\n    e.g. {}\n", r.candidates, r.candidates == 1 ? "" : "s", r.message,
                         r.example);
    }
    // Every peak against the limit in force (memory.h OverBudget: budget less reserve), lowest first.
    constexpr size_t kShownOverBudget = 20;
    const double limit_gib = e.budget_gib - e.reserve_gib;
    for (size_t i = 0; i < e.over_budget.size() && i < kShownOverBudget; ++i) {
      const auto& o = e.over_budget[i];
      out << fmt::format("  over the budget: peak {:.2f} GiB > {:.2f} GiB ({:.2f} GiB budget less the {:.2f} GiB reserve) by {:.2f} GiB: {}\n",
                         GiBOf(o.peak_bytes), limit_gib, e.budget_gib, e.reserve_gib, GiBOf(o.peak_bytes) - limit_gib, o.layout);
    }
    if (e.over_budget.size() > kShownOverBudget) {
      out << fmt::format("  ... and {} more over the budget, peaks up to {:.2f} GiB (--json lists every one)\n",
                         e.over_budget.size() - kShownOverBudget, GiBOf(e.over_budget.back().peak_bytes));
    }
    return out.str();
  }
  out << fmt::format("Explain    \"{}\": rank {} of {}{}\n", e.query.text, e.rank, e.ranked,
                     e.rank == 1 ? " (the winner)" : " (the best ranked layout matching it)");
  std::vector<RankedLayout> rows = {*e.winner, *e.layout};
  out << "  winner, then this layout:\n" << RankedLayoutsTable(rows, false);
  out << "  each layout's step by phase along its critical path (the slowest pipeline stage's phases: a phase only another stage "
         "runs, such as the last stage's lm_head, shows 0 when that stage is not the slowest):\n";
  out << fmt::format("  {:<16} {:>12} {:>12} {:>12}\n", "phase (step)", "winner (ms)", "this (ms)", "diff (ms)");
  for (const auto& d : e.differences) {
    out << fmt::format("  {:<16} {:>12.2f} {:>12.2f} {:>+12.2f}\n", d.subtracted ? d.phase + " (-)" : d.phase, d.winner_us / 1e3,
                       d.layout_us / 1e3, d.difference_us() / 1e3);
  }
  out << fmt::format("  {:<16} {:>12.2f} {:>12.2f} {:>+12.2f}\n", "step", e.winner->step_time_us / 1e3, e.layout->step_time_us / 1e3,
                     (e.layout->step_time_us - e.winner->step_time_us) / 1e3);
  out << "  " << VersusWinnerText(*e.layout) << "\n";
  return out.str();
}

}  // namespace dockyard
