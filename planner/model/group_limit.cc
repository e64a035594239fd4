// Group-limited routing's validity rule (see group_limit.h).
#include "planner/model/group_limit.h"

#include <fmt/format.h>

namespace dockyard {

std::string GroupLimitProblem(int64_t num_experts, int64_t top_k, int64_t n_group, int64_t topk_group) {
  if (n_group < 1 || num_experts < 1 || num_experts % n_group != 0) {
    return fmt::format("n_group ({}) must be >= 1 and divide num_experts ({})", n_group, num_experts);
  }
  if (topk_group < 1 || topk_group > n_group) {
    return fmt::format("topk_group ({}) must be in [1, n_group ({})]", topk_group, n_group);
  }
  if (n_group > 1 && topk_group < n_group && topk_group * (num_experts / n_group) < top_k) {
    return fmt::format("the topk_group ({}) kept groups of num_experts / n_group = {} experts hold fewer than top_k ({}) experts",
                       topk_group, num_experts / n_group, top_k);
  }
  return "";
}

}  // namespace dockyard
