// Training settings (see training.h).
#include "planner/model/training.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include <fmt/format.h>

#include "planner/base/error.h"
#include "planner/base/name_table.h"

namespace dockyard {

namespace {

constexpr NameTable<DpSharding, 3> kDpShardings{{{{DpSharding::kFsdp, "fsdp"}, {DpSharding::kZero1, "zero1"}, {DpSharding::kDdp, "ddp"}}}};
constexpr NameTable<Optimizer, 3> kOptimizers{{{{Optimizer::kAdamW, "adamw"}, {Optimizer::kSgd, "sgd"}, {Optimizer::kMuon, "muon"}}}};
constexpr NameTable<Recompute, 3> kRecomputes{
    {{{Recompute::kNone, "none"}, {Recompute::kSelective, "selective"}, {Recompute::kFull, "full"}}}};

}  // namespace

const char* DpShardingName(DpSharding s) {
  return kDpShardings.Name(s);
}

const char* OptimizerName(Optimizer o) {
  return kOptimizers.Name(o);
}

const char* RecomputeName(Recompute r) {
  return kRecomputes.Name(r);
}

DpSharding ParseDpSharding(const std::string& name, const std::string& field) {
  return kDpShardings.Parse(name, field, /*suggest=*/false);
}

Optimizer ParseOptimizer(const std::string& name, const std::string& field) {
  return kOptimizers.Parse(name, field, /*suggest=*/false);
}

Recompute ParseRecompute(const std::string& name, const std::string& field) {
  return kRecomputes.Parse(name, field, /*suggest=*/false);
}

const std::vector<std::string>& DpShardingNames() {
  static const std::vector<std::string> names = kDpShardings.Names();
  return names;
}

const std::vector<std::string>& OptimizerNames() {
  static const std::vector<std::string> names = kOptimizers.Names();
  return names;
}

const std::vector<std::string>& RecomputeNames() {
  static const std::vector<std::string> names = kRecomputes.Names();
  return names;
}

namespace {

int64_t ParsePositive(const std::string& token, const std::string& field, const std::string& text, int64_t least = 1) {
  size_t used = 0;
  long long v = 0;
  try {
    v = std::stoll(token, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != token.size() || v < least) {
    throw Error(fmt::format("{} \"{}\": \"{}\" is not a layer count >= {}", field, text, token, least));
  }
  return v;
}

}  // namespace

bool IsVirtualStageSplit(const std::vector<int64_t>& split, int64_t pp, int64_t vpp) {
  return vpp > 1 && static_cast<int64_t>(split.size()) == pp * vpp;
}

std::vector<int64_t> ParseLayerSplit(const std::string& text, int64_t pp, int64_t num_layers, const std::string& field, int64_t vpp) {
  // Every stage needs a layer: reject an impossible pp before expanding "N+M" into pp entries.
  if (pp < 1 || pp > num_layers) {
    throw Error(fmt::format("{} \"{}\": pp ({}) must be in [1, num_hidden_layers ({})]", field, text, pp, num_layers));
  }
  // One message for every malformed form: spaces, an empty entry, more than one '+', '+' mixed
  // with commas (QA: three forms gave three messages).
  const size_t pluses = static_cast<size_t>(std::count(text.begin(), text.end(), '+'));
  if (text.find_first_of(" \t") != std::string::npos || text.empty() || text.back() == ',' || text.front() == ',' ||
      text.find(",,") != std::string::npos || pluses > 1 || (pluses == 1 && text.find(',') != std::string::npos) ||
      text.front() == '+' || text.back() == '+') {
    throw Error(fmt::format(
        "{} \"{}\": expected layer counts like '7,6,6,6' (one per stage) or '7+6' (the first stage, then every other): no spaces, "
        "no empty entries, at most one '+' and not with commas",
        field, text));
  }
  std::vector<int64_t> split;
  const size_t plus = text.find('+');
  if (plus != std::string::npos) {
    const int64_t first = ParsePositive(text.substr(0, plus), field, text);
    const int64_t rest = ParsePositive(text.substr(plus + 1), field, text);
    split.push_back(first);
    for (int64_t s = 1; s < pp; ++s) split.push_back(rest);
  } else {
    // pp x vpp entries: virtual stages, of which one may hold no decoder layer (checked per rank
    // below). The count first: a wrong count is said as such, not as an entry out of range.
    const int64_t entries = static_cast<int64_t>(std::count(text.begin(), text.end(), ',')) + 1;
    const bool virtual_stages = vpp > 1 && entries == pp * vpp;
    if (entries != pp && !virtual_stages) {
      throw Error(fmt::format("{} \"{}\" gives {} stages, but pp is {}{}", field, text, entries, pp,
                              vpp > 1 ? fmt::format(" (or pp x vpp = {} virtual stages)", pp * vpp) : ""));
    }
    std::stringstream in(text);
    std::string token;
    while (std::getline(in, token, ',')) split.push_back(ParsePositive(token, field, text, virtual_stages ? 0 : 1));
  }
  if (IsVirtualStageSplit(split, pp, vpp)) {
    for (int64_t p = 0; p < pp; ++p) {
      int64_t rank = 0;
      for (int64_t v = 0; v < vpp; ++v) rank += split[static_cast<size_t>(v * pp + p)];
      if (rank < 1) {
        throw Error(fmt::format("{} \"{}\": pipeline rank {} holds no decoder layer in its {} virtual stages (entries {} + k x {})", field,
                                text, p, vpp, p, pp));
      }
    }
  } else if (static_cast<int64_t>(split.size()) != pp) {
    throw Error(fmt::format("{} \"{}\" gives {} stages, but pp is {}{}", field, text, split.size(), pp,
                            vpp > 1 ? fmt::format(" (or pp x vpp = {} virtual stages)", pp * vpp) : ""));
  }
  int64_t total = 0;
  for (int64_t n : split) {
    if (n > num_layers) {
      throw Error(fmt::format("{} \"{}\": a stage of {} layers exceeds num_hidden_layers ({})", field, text, n, num_layers));
    }
    total += n;  // <= pp * num_layers <= 100000^2: no overflow
  }
  if (total != num_layers) {
    throw Error(fmt::format("{} \"{}\" sums to {} layers, but the model has num_hidden_layers {}", field, text, total, num_layers));
  }
  return split;
}

}  // namespace dockyard
