// One name table for a closed vocabulary (an enum class): the enumerators and their spellings in
// JSON, flags and reports, in one array, with the lookups both directions and the one parse error.
//
//   constexpr NameTable<Optimizer, 2> kOptimizers{{{{Optimizer::kAdamW, "adamw"}, {Optimizer::kSgd, "sgd"}}}};
//   kOptimizers.Name(Optimizer::kSgd)              -> "sgd"
//   kOptimizers.Parse("adam", "--optimizer", true) -> throws dockyard::Error
//       "--optimizer: must be \"adamw\" or \"sgd\", got \"adam\"; did you mean 'adamw'?"
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "planner/base/error.h"
#include "planner/base/json_util.h"

namespace dockyard {

template <typename E, size_t N>
struct NameTable {
  std::array<std::pair<E, const char*>, N> entries;

  // The spelling of `e`; an enumerator missing from the table is a programming error (Error).
  const char* Name(E e) const {
    for (const auto& [value, name] : entries) {
      if (value == e) return name;
    }
    throw Error(fmt::format("no name for enumerator {}", static_cast<int>(e)));
  }
  // The enumerator spelled `name`; nullopt for any other text.
  std::optional<E> Find(std::string_view name) const {
    for (const auto& [value, spelling] : entries) {
      if (name == spelling) return value;
    }
    return std::nullopt;
  }
  // Every spelling, in table order (CLI11 IsMember checks, help texts, search spaces).
  std::vector<std::string> Names() const {
    std::vector<std::string> out;
    for (const auto& entry : entries) out.emplace_back(entry.second);
    return out;
  }
  // "\"a\", \"b\" or \"c\"": the allowed spellings as the parse error lists them.
  std::string Choices() const {
    std::string out;
    for (size_t i = 0; i < N; ++i) {
      out += fmt::format("{}\"{}\"", i == 0 ? "" : i + 1 == N ? " or " : ", ", entries[i].second);
    }
    return out;
  }
  // The enumerator spelled `name`, else throws dockyard::Error
  // "{field}: must be {Choices()}, got \"{name}\"", followed by "; did you mean '{x}'?" when
  // `suggest` and a spelling is close (DidYouMean). `field` names where the text came from
  // ("--dispatcher", "model.json: /training/dispatcher").
  E Parse(const std::string& name, const std::string& field, bool suggest) const {
    if (auto e = Find(name)) return *e;
    std::string message = fmt::format("{}: must be {}, got \"{}\"", field, Choices(), name);
    if (suggest) {
      if (auto s = DidYouMean(name, Names())) message += fmt::format("; did you mean '{}'?", *s);
    }
    throw Error(message);
  }
};

}  // namespace dockyard
