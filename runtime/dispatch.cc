// Dispatch index arithmetic (dispatch.h).
#include "runtime/dispatch.h"

#include <algorithm>

#include <fmt/format.h>

#include "planner/base/error.h"

namespace dockyard::runtime {

RouteOrder SortByExpert(const std::vector<int64_t>& expert_of_slot, int64_t num_experts, int64_t top_k) {
  if (top_k < 1 || static_cast<int64_t>(expert_of_slot.size()) % top_k != 0) {
    throw Error(fmt::format("routing: {} slots do not split into tokens of top_k {}", expert_of_slot.size(), top_k));
  }
  RouteOrder out;
  out.tokens_per_expert.assign(static_cast<size_t>(num_experts), 0);
  for (size_t s = 0; s < expert_of_slot.size(); ++s) {
    const int64_t e = expert_of_slot[s];
    if (e < 0 || e >= num_experts) {
      throw Error(fmt::format("routing: slot {} picks expert {}, outside [0, {})", s, e, num_experts));
    }
    ++out.tokens_per_expert[static_cast<size_t>(e)];
  }
  std::vector<int64_t> next(static_cast<size_t>(num_experts), 0);
  for (int64_t e = 1; e < num_experts; ++e) {
    next[static_cast<size_t>(e)] = next[static_cast<size_t>(e - 1)] + out.tokens_per_expert[static_cast<size_t>(e - 1)];
  }
  out.token_of_row.assign(expert_of_slot.size(), 0);
  out.row_of_slot.assign(expert_of_slot.size(), 0);
  for (size_t s = 0; s < expert_of_slot.size(); ++s) {
    const int64_t row = next[static_cast<size_t>(expert_of_slot[s])]++;
    out.row_of_slot[s] = row;
    out.token_of_row[static_cast<size_t>(row)] = static_cast<int64_t>(s) / top_k;
  }
  return out;
}

std::vector<int64_t> SumChunks(const std::vector<int64_t>& counts, int64_t peers, int64_t chunk) {
  if (peers < 0 || chunk < 0 || static_cast<int64_t>(counts.size()) != peers * chunk) {
    throw Error(fmt::format("split sizes: {} counts are not {} peers x {} experts", counts.size(), peers, chunk));
  }
  std::vector<int64_t> out(static_cast<size_t>(peers), 0);
  for (int64_t p = 0; p < peers; ++p) {
    for (int64_t e = 0; e < chunk; ++e) out[static_cast<size_t>(p)] += counts[static_cast<size_t>(p * chunk + e)];
  }
  return out;
}

PermutePlan RankMajorToExpertMajor(const std::vector<int64_t>& counts, int64_t num_ranks, int64_t experts_per_rank) {
  if (num_ranks < 1 || experts_per_rank < 0 || static_cast<int64_t>(counts.size()) != num_ranks * experts_per_rank) {
    throw Error(fmt::format("permute: {} counts are not {} ranks x {} local experts", counts.size(), num_ranks, experts_per_rank));
  }
  PermutePlan plan;
  // Source offsets of each (r, e) block in the rank-major buffer (exclusive prefix sums).
  std::vector<int64_t> src_offset(counts.size(), 0);
  int64_t running = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    if (counts[i] < 0) throw Error(fmt::format("permute: count {} is negative ({})", i, counts[i]));
    src_offset[i] = running;
    running += counts[i];
  }
  plan.total_rows = running;
  plan.tokens_per_local_expert.assign(static_cast<size_t>(experts_per_rank), 0);
  plan.expert_offsets.assign(static_cast<size_t>(experts_per_rank + 1), 0);
  int64_t dst = 0;
  for (int64_t e = 0; e < experts_per_rank; ++e) {
    plan.expert_offsets[static_cast<size_t>(e)] = dst;
    for (int64_t r = 0; r < num_ranks; ++r) {
      const size_t i = static_cast<size_t>(r * experts_per_rank + e);
      if (counts[i] > 0) plan.blocks.push_back({src_offset[i], dst, counts[i]});
      dst += counts[i];
      plan.tokens_per_local_expert[static_cast<size_t>(e)] += counts[i];
    }
  }
  plan.expert_offsets[static_cast<size_t>(experts_per_rank)] = dst;
  return plan;
}

std::vector<RowBlock> InverseBlocks(const std::vector<RowBlock>& blocks) {
  std::vector<RowBlock> out;
  out.reserve(blocks.size());
  for (const RowBlock& b : blocks) out.push_back({b.dst_row, b.src_row, b.rows});
  return out;
}

std::vector<int64_t> ExpandToRowIndices(const std::vector<RowBlock>& blocks) {
  int64_t total = 0;
  for (const RowBlock& b : blocks) total = std::max(total, b.dst_row + b.rows);
  std::vector<int64_t> indices(static_cast<size_t>(total), -1);
  for (const RowBlock& b : blocks) {
    for (int64_t i = 0; i < b.rows; ++i) indices[static_cast<size_t>(b.dst_row + i)] = b.src_row + i;
  }
  return indices;
}

DeredundencyPlan DeredundencyDispatchBlocks(const std::vector<int64_t>& gathered_counts, int64_t oep, int64_t num_experts,
                                            int64_t expert_start, int64_t iep, int64_t experts_per_rank) {
  if (oep < 1 || iep < 1 || experts_per_rank < 0 || static_cast<int64_t>(gathered_counts.size()) != oep * num_experts || expert_start < 0 ||
      expert_start + iep * experts_per_rank > num_experts) {
    throw Error(
        fmt::format("deredundency dispatch: {} gathered counts do not fit oep {} x {} experts with the outer range "
                    "[{}, {} + {} x {})",
                    gathered_counts.size(), oep, num_experts, expert_start, expert_start, iep, experts_per_rank));
  }
  DeredundencyPlan plan;
  plan.source_totals.assign(static_cast<size_t>(oep), 0);
  // expert_offsets[o][e]: where source o's rows for expert e start in the gathered buffer.
  std::vector<int64_t> expert_offsets(gathered_counts.size(), 0);
  int64_t running = 0;
  for (int64_t o = 0; o < oep; ++o) {
    for (int64_t e = 0; e < num_experts; ++e) {
      const size_t i = static_cast<size_t>(o * num_experts + e);
      if (gathered_counts[i] < 0) throw Error(fmt::format("deredundency dispatch: count {} is negative", i));
      expert_offsets[i] = running;
      running += gathered_counts[i];
      plan.source_totals[static_cast<size_t>(o)] += gathered_counts[i];
    }
  }
  plan.counts_by_destination_expert.assign(static_cast<size_t>(iep * experts_per_rank), 0);
  int64_t dst = 0;
  for (int64_t j = 0; j < iep; ++j) {
    for (int64_t l = 0; l < experts_per_rank; ++l) {
      const int64_t e = expert_start + j * experts_per_rank + l;
      for (int64_t o = 0; o < oep; ++o) {
        const size_t i = static_cast<size_t>(o * num_experts + e);
        const int64_t n = gathered_counts[i];
        if (n > 0) plan.blocks.push_back({expert_offsets[i], dst, n});
        dst += n;
        plan.counts_by_destination_expert[static_cast<size_t>(j * experts_per_rank + l)] += n;
      }
    }
  }
  plan.total_rows = dst;
  return plan;
}

}  // namespace dockyard::runtime
