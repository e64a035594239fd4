// Block counts of the deepep dispatcher's token counts (see flex_blocks.h).
#include "planner/routing/flex_blocks.h"

#include <algorithm>
#include <climits>
#include <utility>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <fmt/format.h>

#include "planner/base/error.h"
#include "planner/routing/flex_counts.h"

namespace dockyard {

namespace {

void SortUnique(std::vector<int64_t>* v) {
  std::sort(v->begin(), v->end());
  v->erase(std::unique(v->begin(), v->end()), v->end());
}

// Set bits of x. Without the popcnt instruction (x86-64 builds without -mpopcnt),
// __builtin_popcountll is a library call per word: the SWAR sum inlines instead.
inline int32_t Popcount64(uint64_t x) {
#if defined(__x86_64__) && !defined(__POPCNT__)
  x = x - ((x >> 1) & 0x5555555555555555ull);
  x = (x & 0x3333333333333333ull) + ((x >> 2) & 0x3333333333333333ull);
  x = (x + (x >> 4)) & 0x0f0f0f0f0f0f0f0full;
  return static_cast<int32_t>((x * 0x0101010101010101ull) >> 56);
#else
  return __builtin_popcountll(x);
#endif
}

// One level of a batch (CountSourceBlocks): each of the n words is the OR of `fold` consecutive
// words of src; counts[w] += its set bits.
template <class Popcount>
__attribute__((always_inline)) inline void FoldCountWith(const uint64_t* src, size_t fold, size_t n, uint64_t* words, int32_t* counts,
                                                         Popcount popcount) {
  for (size_t w = 0; w < n; ++w) {
    uint64_t x = 0;
    for (size_t c = 0; c < fold; ++c) x |= src[w * fold + c];
    words[w] = x;
    counts[w] += popcount(x);
  }
}

void FoldCountPortable(const uint64_t* src, size_t fold, size_t n, uint64_t* words, int32_t* counts) {
  FoldCountWith(src, fold, n, words, counts, Popcount64);
}

#if defined(__x86_64__)
// The same with the popcnt instruction, for CPUs that have it (every x86-64 CPU since 2008;
// the build's baseline does not assume it): about three times faster on this step.
__attribute__((target("popcnt"))) void FoldCountPopcnt(const uint64_t* src, size_t fold, size_t n, uint64_t* words, int32_t* counts) {
  FoldCountWith(src, fold, n, words, counts, [](uint64_t x) { return static_cast<int32_t>(__builtin_popcountll(x)); });
}

// Eight words at a time with AVX-512 VPOPCNTDQ (Ice Lake, Zen 4 and later) for the folds the
// search meets (1: the experts' own words; 2: a power-of-two chain of block sizes); the popcnt
// loop for other folds and the last n % 8 words. Same words and counts as the scalar loops.
__attribute__((target("popcnt,avx2,avx512f,avx512vpopcntdq"))) void FoldCountAvx512(const uint64_t* src, size_t fold, size_t n,
                                                                                    uint64_t* words, int32_t* counts) {
  size_t w = 0;
  if (fold == 1 || fold == 2) {
    const __m512i even = _mm512_setr_epi64(0, 2, 4, 6, 8, 10, 12, 14), odd = _mm512_setr_epi64(1, 3, 5, 7, 9, 11, 13, 15);
    for (; w + 8 <= n; w += 8) {
      __m512i x;
      if (fold == 1) {
        x = _mm512_loadu_si512(src + w);
      } else {
        const __m512i lo = _mm512_loadu_si512(src + 2 * w), hi = _mm512_loadu_si512(src + 2 * w + 8);
        x = _mm512_or_si512(_mm512_permutex2var_epi64(lo, even, hi), _mm512_permutex2var_epi64(lo, odd, hi));
      }
      _mm512_storeu_si512(words + w, x);
      const __m256i bits =
          _mm512_maskz_cvtepi64_epi32(0xff, _mm512_popcnt_epi64(x));  // (the maskz form: no undefined vector for GCC to warn about)
      __m256i* c = reinterpret_cast<__m256i*>(counts + w);
      _mm256_storeu_si256(c, _mm256_add_epi32(_mm256_loadu_si256(c), bits));
    }
  }
  FoldCountWith(src + w * fold, fold, n - w, words + w, counts + w,
                [](uint64_t x) { return static_cast<int32_t>(__builtin_popcountll(x)); });
}

#endif

}  // namespace

namespace flex_blocks_detail {
std::vector<FoldCountImpl> FoldCountImpls() {
  std::vector<FoldCountImpl> out = {{"portable", FoldCountPortable}};
#if defined(__x86_64__)
  __builtin_cpu_init();  // GCC: required before __builtin_cpu_supports when a constructor asks (kFoldCount)
  if (__builtin_cpu_supports("popcnt")) out.push_back({"popcnt", FoldCountPopcnt});
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vpopcntdq")) out.push_back({"avx512", FoldCountAvx512});
#endif
  return out;
}
}  // namespace flex_blocks_detail

namespace {

// The fastest implementation this CPU runs, chosen once during static initialization.
const auto kFoldCount = flex_blocks_detail::FoldCountImpls().back().fn;

int IndexOf(const std::vector<int64_t>& sorted, int64_t x) {
  const auto it = std::lower_bound(sorted.begin(), sorted.end(), x);
  return it != sorted.end() && *it == x ? static_cast<int>(it - sorted.begin()) : -1;
}

}  // namespace

int FlexBlockLayout::TokenIndex(int64_t tokens) const {
  return IndexOf(token_counts, tokens);
}

int FlexBlockLayout::BlockIndex(int64_t block_size) const {
  return IndexOf(block_sizes, block_size);
}

FlexBlockLayout MakeFlexBlockLayout(int64_t num_experts, std::vector<int64_t> token_counts, const std::vector<FlexBlockNeed>& needs) {
  if (num_experts < 1) throw Error(fmt::format("flex block counts: num_experts must be >= 1, got {}", num_experts));
  FlexBlockLayout l;
  l.num_experts = num_experts;
  SortUnique(&token_counts);
  for (int64_t t : token_counts) {
    if (t < 0 || t > INT32_MAX) throw Error(fmt::format("flex block counts: a token count must be in [0, 2^31 - 1], got {}", t));
  }
  l.token_counts = std::move(token_counts);
  for (const FlexBlockNeed& need : needs) {
    if (need.block_size < 1 || num_experts % need.block_size != 0) {
      throw Error(fmt::format("flex block counts: block size {} must divide num_experts ({})", need.block_size, num_experts));
    }
    if (need.members < 1) throw Error(fmt::format("flex block counts: a group must have >= 1 member, got {}", need.members));
    l.block_sizes.push_back(need.block_size);
  }
  SortUnique(&l.block_sizes);
  l.sources.assign(l.block_sizes.size(), 0);
  for (const FlexBlockNeed& need : needs) {
    int64_t& sources = l.sources[static_cast<size_t>(l.BlockIndex(need.block_size))];
    sources = std::max(sources, need.members);
  }
  for (int64_t r : l.block_sizes) {
    l.offset.push_back(l.row);
    l.row += num_experts / r;
  }
  return l;
}

std::vector<int32_t> CountSourceBlocks(const RoutingModel& model, const FlexBlockLayout& layout, int64_t layer, int64_t source) {
  if (layout.num_experts != model.num_experts) {
    throw Error(fmt::format("flex block counts: laid out for {} experts, the routing model has {}", layout.num_experts, model.num_experts));
  }
  const size_t row = static_cast<size_t>(layout.row);
  std::vector<int32_t> out(layout.token_counts.size() * row, 0);
  if (layout.token_counts.empty() || layout.block_sizes.empty()) return out;
  const int64_t E = layout.num_experts;
  // The draws of SampleTokenExperts(model, layer, source, largest token count), a batch at a time.
  TokenHitStream stream(model, layer, source);
  // Bit-sliced counting, 64 tokens at a time: hit[e] has bit u set when token (batch start + u)
  // picked expert e (TokenHitStream). A block of R experts is hit by the OR of its experts' words (a token's
  // picks are distinct, and several in one block count once), and the popcount of that word is
  // the batch's tokens with >= 1 expert in the block. Each needed size folds from the largest
  // smaller needed size that divides it (or from the experts' words). A batch also ends at each
  // token count read, where the running counts are copied out.
  struct Level {
    int64_t size, offset;
    int from;  // index of the level it folds from; -1 = the experts' words
  };
  std::vector<Level> levels;
  for (size_t b = 0; b < layout.block_sizes.size(); ++b) {
    if (source >= layout.sources[b]) continue;
    const int64_t R = layout.block_sizes[b];
    int from = -1;
    for (int i = static_cast<int>(levels.size()) - 1; i >= 0 && from < 0; --i) {
      if (R % levels[static_cast<size_t>(i)].size == 0) from = i;
    }
    levels.push_back({R, layout.offset[b], from});
  }
  if (levels.empty()) return out;
  std::vector<uint64_t> hit(static_cast<size_t>(E));
  std::vector<std::vector<uint64_t>> words(levels.size());
  for (size_t i = 0; i < levels.size(); ++i) words[i].resize(static_cast<size_t>(E / levels[i].size));
  std::vector<int32_t> running(row, 0);
  size_t next = 0;  // the next token count to read
  int64_t t = 0;
  while (true) {
    while (next < layout.token_counts.size() && layout.token_counts[next] == t) {
      std::copy(running.begin(), running.end(), out.begin() + static_cast<std::ptrdiff_t>(next * row));
      ++next;
    }
    if (next == layout.token_counts.size()) break;
    const int64_t end = std::min(t + 64, layout.token_counts[next]);
    std::fill(hit.begin(), hit.end(), 0);
    stream.Next(end - t, hit.data());
    for (size_t i = 0; i < levels.size(); ++i) {
      const std::vector<uint64_t>& src = levels[i].from < 0 ? hit : words[static_cast<size_t>(levels[i].from)];
      kFoldCount(src.data(), src.size() / words[i].size(), words[i].size(), words[i].data(), running.data() + levels[i].offset);
    }
    t = end;
  }
  return out;
}

int64_t ConsecutiveMembersPerNode(const FlexCounts& nodes) {
  const int64_t n = static_cast<int64_t>(nodes.node_index.size());
  if (n < 1 || nodes.num_nodes < 1 || n % nodes.num_nodes != 0) return 0;
  const int64_t m = n / nodes.num_nodes;
  for (int64_t i = 0; i < n; ++i) {
    if (nodes.node_index[static_cast<size_t>(i)] != i / m) return 0;
  }
  return m;
}

std::vector<FlexBlockNeed> FlexBlockSizes(int64_t num_experts, const FlexCounts& nodes) {
  const int64_t n = static_cast<int64_t>(nodes.node_index.size());
  const int64_t m = ConsecutiveMembersPerNode(nodes);
  if (m == 0 || num_experts % n != 0) return {};
  return {{num_experts / n, n}, {m * (num_experts / n), n}};
}

bool FlexBlocksServe(const FlexBlockLayout& layout, const FlexCounts& nodes, int64_t tokens) {
  if (layout.TokenIndex(tokens) < 0) return false;
  const std::vector<FlexBlockNeed> needs = FlexBlockSizes(layout.num_experts, nodes);
  for (const FlexBlockNeed& need : needs) {
    const int b = layout.BlockIndex(need.block_size);
    if (b < 0 || layout.sources[static_cast<size_t>(b)] < need.members) return false;
  }
  return !needs.empty();
}

int64_t ExpertCountsAt(const FlexBlockLayout& layout, int64_t tokens, int64_t sources) {
  const int t = layout.TokenIndex(tokens), b = layout.BlockIndex(1);
  if (t < 0 || b < 0 || layout.sources[static_cast<size_t>(b)] < sources) return -1;
  return t * layout.row + layout.offset[static_cast<size_t>(b)];
}

FlexGroupCountsAt GroupCountsAt(const FlexBlockLayout& layout, const FlexCounts& nodes, int64_t tokens) {
  if (!FlexBlocksServe(layout, nodes, tokens)) {
    throw Error(fmt::format("flex block counts: no counts for {} tokens over this group of {} members", tokens, nodes.node_index.size()));
  }
  const std::vector<FlexBlockNeed> needs = FlexBlockSizes(layout.num_experts, nodes);
  const size_t at = static_cast<size_t>(layout.TokenIndex(tokens)) * static_cast<size_t>(layout.row);
  return {at + static_cast<size_t>(layout.offset[static_cast<size_t>(layout.BlockIndex(needs[0].block_size))]),
          at + static_cast<size_t>(layout.offset[static_cast<size_t>(layout.BlockIndex(needs[1].block_size))])};
}

FlexLinks FlexLinksFromBlocks(const FlexBlockLayout& layout, const FlexCounts& nodes, int64_t tokens,
                              const std::function<const std::vector<int32_t>&(int64_t source)>& source_counts) {
  const FlexGroupCountsAt at = GroupCountsAt(layout, nodes, tokens);
  FlexLinks links;
  links.gpus_per_node = nodes.gpus_per_node;
  links.node_of = nodes.node_of;
  std::vector<const int32_t*> counts(nodes.node_index.size());  // each source's counts, looked up once
  for (size_t s = 0; s < counts.size(); ++s) counts[s] = source_counts(static_cast<int64_t>(s)).data();
  links.rows = FlexDispatchRows(
      nodes.node_index, nodes.num_nodes, [&](int64_t s) { return counts[static_cast<size_t>(s)] + at.rank; },
      [&](int64_t s) { return counts[static_cast<size_t>(s)] + at.node; });
  return links;
}

}  // namespace dockyard
