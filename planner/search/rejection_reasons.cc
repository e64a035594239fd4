// Why a search rejected its candidates (see rejection_reasons.h).
#include "planner/search/rejection_reasons.h"

#include <algorithm>

#include <fmt/format.h>

namespace dockyard {

namespace {
constexpr const char* kInvalid = "invalid: ";
constexpr const char* kBatch = "global batch: ";
}  // namespace

std::vector<std::pair<int64_t, std::string>> RejectionReasons(const SearchResult& result) {
  std::vector<std::pair<int64_t, std::string>> out;
  for (const auto& [why, n] : result.invalid_reasons) out.emplace_back(n, kInvalid + why);
  for (const auto& [why, n] : result.not_divisible_reasons) out.emplace_back(n, kBatch + why);
  std::sort(out.begin(), out.end(),
            [](const auto& a, const auto& b) { return a.first != b.first ? a.first > b.first : a.second < b.second; });
  return out;
}

std::string RejectionReasonsText(const SearchResult& result, size_t max_reasons) {
  const std::vector<std::pair<int64_t, std::string>> reasons = RejectionReasons(result);
  if (reasons.empty()) return "";
  int64_t rejected = 0;
  for (const auto& r : reasons) rejected += r.first;
  std::string out =
      fmt::format("Rejected   {} layouts by rule, {} by the global batch; reasons by layouts:\n", result.invalid, result.not_divisible);
  const size_t shown = std::min(reasons.size(), std::max<size_t>(1, max_reasons));
  for (size_t i = 0; i < shown; ++i) out += fmt::format("  {:>9}  {}\n", reasons[i].first, reasons[i].second);
  if (shown < reasons.size()) {
    int64_t rest = 0;
    for (size_t i = shown; i < reasons.size(); ++i) rest += reasons[i].first;
    out += fmt::format("  {:>9}  ... and {} more reasons ({} layouts)\n", "", reasons.size() - shown, rest);
  }
  // The most common reason's own message, as the plan path throws it (simulate: "dockyard-plan: error: ...").
  const std::string& top = reasons.front().second;
  const std::string message =
      top.rfind(kInvalid, 0) == 0 ? top.substr(std::string(kInvalid).size()) : top.substr(std::string(kBatch).size());
  out += fmt::format("dockyard-plan search: error: {} ({} of {} layouts)\n", message, reasons.front().first, rejected);
  return out;
}

}  // namespace dockyard
