// The per-layer sampler of the routing model (routing.h "Sampling"), private to planner/routing:
// the sampler of one weight vector (its forced experts, the drawn ones and how they are drawn),
// its construction with calibrated per-draw weights (layer_sampler.cc), and the draw loops every
// reader of a stream runs (counts, token records, token hit bits), inlined where they are used so
// that the generator stays in registers.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <numeric>
#include <vector>

#include "planner/routing/group_routing.h"
#include "planner/routing/random.h"

namespace dockyard {
namespace routing_detail {

enum class DrawMode { kNone, kUniformReject, kUniformShuffle, kWeighted, kGrouped };

struct LayerSampler {
  int64_t num_experts = 0, top_k = 0;
  std::vector<int32_t> forced;    // experts every token picks
  std::vector<int32_t> free_ids;  // global ids of the drawn experts [n]
  int64_t free_k = 0;             // picks drawn per token (top_k - forced)
  DrawMode mode = DrawMode::kNone;
  // Weighted draws over the free experts: per-draw probabilities and an alias table. Column c
  // keeps c when the low 64 bits of (x * n) are below threshold[c], else takes alias[c].
  std::vector<double> prob;         // [n], sums to 1
  std::vector<uint64_t> threshold;  // [n]
  std::vector<uint32_t> alias;      // [n]
  std::vector<double> share;        // [E] target share of the assignments
  double calibration_error = 0;     // max |inclusion - target| after calibration
  // kGrouped (group_routing.h): the two-stage draw over free_ids = 0..E-1, nothing forced.
  std::shared_ptr<const GroupSampler> grouped;
};

// A sampler for one weight vector over the experts (ids 0..E-1): forced experts (target inclusion
// above 1 - 1e-6), the others drawn uniformly or by calibrated weights (routing.h "Sampling").
LayerSampler BuildSampler(const std::vector<double>& weights, int64_t top_k);
// The sampler with expert ids mapped through `perm` (base expert e becomes perm[e]).
LayerSampler Permuted(const LayerSampler& base, const std::vector<int32_t>& perm);

// Per-token scratch of one source rank: a stamp per free expert marks the current token's picks
// (no clearing between tokens), a permutation for Fisher-Yates draws.
struct Scratch {
  std::vector<uint32_t> stamp;
  std::vector<uint32_t> perm;
  uint32_t current = 0;

  void Reset(size_t n) {
    stamp.assign(n, 0);
    perm.resize(n);
    std::iota(perm.begin(), perm.end(), 0u);
    current = 0;
  }
  void NextToken() {
    if (++current == 0) {  // wrapped after 2^32 tokens
      std::fill(stamp.begin(), stamp.end(), 0u);
      current = 1;
    }
  }
};

// Exact draw among the unpicked free experts in proportion to prob (linear scan; the total is
// summed branch-free, the walk stops at the first unpicked expert past the drawn mass).
inline uint32_t ScanDraw(const LayerSampler& s, Scratch& sc, Xoshiro256ss& rng) {
  const size_t n = s.prob.size();
  const double* prob = s.prob.data();
  const uint32_t* stamp = sc.stamp.data();
  const uint32_t cur = sc.current;
  double total = 0;
  for (size_t j = 0; j < n; ++j) total += stamp[j] != cur ? prob[j] : 0.0;
  double u = rng.Uniform01() * total;
  size_t last = n;
  for (size_t j = 0; j < n; ++j) {
    if (stamp[j] == cur) continue;
    last = j;
    u -= prob[j];
    if (u < 0) return static_cast<uint32_t>(j);
  }
  return static_cast<uint32_t>(last);  // rounding: the last unpicked expert
}

template <class Sink>
void DrawFreeTokens(const LayerSampler& s, Xoshiro256ss& rng, int64_t tokens, Scratch& sc, Sink& sink);

// Draws the free picks of `tokens` tokens. sink.BeginToken() and sink.Pick(free_index) per token.
template <class Sink>
void DrawTokens(const LayerSampler& s, Xoshiro256ss& rng, int64_t tokens, Scratch& sc, Sink& sink) {
  switch (s.mode) {
    case DrawMode::kNone:
      for (int64_t t = 0; t < tokens; ++t) sink.BeginToken();
      return;
    case DrawMode::kGrouped:
      s.grouped->Draw(rng, tokens, sink);
      return;
    default: {
      // The loops run on a local copy of the generator, written back after (the same stream):
      // the sink's stores could otherwise alias its state and keep it in memory.
      Xoshiro256ss local = rng;
      DrawFreeTokens(s, local, tokens, sc, sink);
      rng = local;
    }
  }
}

// DrawTokens' one-stage modes (kUniformReject, kUniformShuffle, kWeighted).
template <class Sink>
void DrawFreeTokens(const LayerSampler& s, Xoshiro256ss& rng, int64_t tokens, Scratch& sc, Sink& sink) {
  const uint64_t n = s.free_ids.size();
  const int64_t k = s.free_k;
  switch (s.mode) {
    case DrawMode::kNone:
    case DrawMode::kGrouped:
      return;  // DrawTokens
    case DrawMode::kUniformReject: {
      uint32_t* stamp = sc.stamp.data();
      // A power-of-two n (128 experts) takes whole bits, several draws per generator output
      // (Xoshiro256ss::Bits); others draw Below().
      const int bits = Log2IfPow2(n);
      for (int64_t t = 0; t < tokens; ++t) {
        sink.BeginToken();
        sc.NextToken();
        const uint32_t cur = sc.current;
        for (int64_t i = 0; i < k; ++i) {
          uint64_t idx;
          do {
            idx = bits > 0 ? rng.Bits(bits) : rng.Below(n);
          } while (stamp[idx] == cur);  // duplicates: probability < 1/2 per draw since 2k <= n
          stamp[idx] = cur;
          sink.Pick(static_cast<uint32_t>(idx));
        }
      }
      return;
    }
    case DrawMode::kUniformShuffle: {
      uint32_t* perm = sc.perm.data();
      for (int64_t t = 0; t < tokens; ++t) {
        sink.BeginToken();
        for (int64_t i = 0; i < k; ++i) {
          const uint64_t j = static_cast<uint64_t>(i) + rng.Below(n - static_cast<uint64_t>(i));
          std::swap(perm[i], perm[j]);
          sink.Pick(perm[i]);
        }
      }
      return;
    }
    case DrawMode::kWeighted: {
      uint32_t* stamp = sc.stamp.data();
      const uint64_t* threshold = s.threshold.data();
      const uint32_t* alias = s.alias.data();
      const double* prob = s.prob.data();
      // Below this remaining draw mass, rejection would need more than n/2 draws on average:
      // scan instead.
      const double scan_below = 2.0 / static_cast<double>(n);
      for (int64_t t = 0; t < tokens; ++t) {
        sink.BeginToken();
        sc.NextToken();
        const uint32_t cur = sc.current;
        double remaining = 1.0;
        for (int64_t i = 0; i < k; ++i) {
          uint32_t idx = 0;
          bool drawn = false;
          if (remaining >= scan_below) {
            for (int attempt = 0; attempt < 64; ++attempt) {
              idx = routing_detail::AliasPick(threshold, alias, n, rng.Next());
              if (stamp[idx] != cur) {
                drawn = true;
                break;
              }
            }
          }
          if (!drawn) idx = ScanDraw(s, sc, rng);
          stamp[idx] = cur;
          remaining -= prob[idx];
          sink.Pick(idx);
        }
      }
      return;
    }
  }
}

struct CountSink {
  int64_t* counts;
  void BeginToken() {}
  void Pick(uint32_t idx) { ++counts[idx]; }
};

struct RecordSink {
  const LayerSampler* s;
  int32_t* out;
  void BeginToken() {
    for (int32_t e : s->forced) *out++ = e;
  }
  void Pick(uint32_t idx) { *out++ = s->free_ids[idx]; }
};

// Sets token u's bit in the words of the experts it picks (TokenHitStream).
struct HitSink {
  const int32_t* free_ids;             // LayerSampler::free_ids
  const int32_t *forced, *forced_end;  // LayerSampler::forced
  uint64_t* hit;
  uint64_t next_bit = 1;  // the bit of the token BeginToken starts
  uint64_t bit = 0;
  void BeginToken() {
    bit = next_bit;
    next_bit <<= 1;
    for (const int32_t* e = forced; e != forced_end; ++e) hit[*e] |= bit;
  }
  void Pick(uint32_t idx) { hit[free_ids[idx]] |= bit; }
};
// The same for the group-limited draw, whose picks are the experts themselves (free_ids = 0..E-1,
// nothing forced): one load and one register less in its inner loop.
struct ExpertHitSink {
  uint64_t* hit;
  uint64_t next_bit = 1;
  uint64_t bit = 0;
  void BeginToken() {
    bit = next_bit;
    next_bit <<= 1;
  }
  void Pick(uint32_t expert) { hit[expert] |= bit; }
};

}  // namespace routing_detail
}  // namespace dockyard
