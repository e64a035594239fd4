// Group-limited routing in the routing sampler (the rule, GroupLimit and its check are in
// planner/model/group_limit.h).
//
// In the routing sampler (routing.h) a group-limited model draws each token in two stages from
// the distribution's expert shares w (uniform, zipf, hot or trace, capped as routing.h says):
// topk_group distinct groups by successive sampling in proportion to their summed share, then
// top_k distinct experts inside the kept groups by successive sampling in proportion to w.
// Uniform routing stays uniform (symmetry); for skewed shares the inclusion frequencies are those
// of this two-stage draw, not exactly the capped shares (no calibration is done for it).
//
// topk_group bounds the number of NODES a token reaches only when each group's experts live on
// one node (DeepSeek-V3 training: 8 groups on 8 nodes, EP 64); with another layout a group can
// span nodes, or a node hold parts of several groups.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "planner/model/group_limit.h"
#include "planner/routing/random.h"

namespace dockyard {

namespace routing_detail {

// The two-stage draw of a group-limited layer over all E experts (ids 0..E-1).
struct GroupSampler {
  int64_t num_experts = 0, top_k = 0, group_size = 0;
  GroupLimit limit;
  std::vector<double> weight;        // [E] the expert shares
  std::vector<double> group_weight;  // [n_group] their sums per group
  double total_weight = 0;           // the sum of group_weight
  // Alias tables (routing.h BuildAliasTable): of the groups in proportion to group_weight, and
  // per group g, in entries [g * group_size, (g + 1) * group_size), of its experts in proportion
  // to weight (aliases are indices inside the group). A group of no weight has a table of
  // rounding leftovers, never used: its draws are rejected.
  std::vector<uint64_t> group_threshold, expert_threshold;  // [n_group], [E]
  std::vector<uint32_t> group_alias, expert_alias;          // [n_group], [E]
  bool uniform = false;                                     // every expert has the same positive weight (uniform routing)
  // Uniform samplers with n_group <= 64 and C(n_group, topk_group) <= kMaxKeptSets: every set of
  // topk_group groups as a bit mask (bit g = group g), in increasing order; empty otherwise.
  std::vector<uint64_t> kept_sets;
  // With kept_sets and at most kMaxSlotTable entries: [kept_sets.size() x slots] (slots =
  // topk_group x group_size), the expert of each slot of set i at [i x slots, (i + 1) x slots):
  // slot k x group_size + e is expert e of the set's k-th group (increasing order). Empty otherwise.
  std::vector<int32_t> kept_experts;
  static constexpr uint64_t kMaxKeptSets = 1 << 16;
  static constexpr uint64_t kMaxSlotTable = 1 << 20;

  // Draws `tokens` tokens: sink.BeginToken() then top_k sink.Pick(expert) per token.
  template <class Sink>
  void Draw(Xoshiro256ss& rng, int64_t tokens, Sink& sink) const;

 private:
  // Per-token state of the weighted draw: the kept groups, and per kept group its untaken experts.
  struct DrawState {
    std::vector<uint8_t> group_taken;  // [n_group]
    std::vector<int64_t> kept;         // [topk_group] the kept groups, in draw order
    std::vector<double> kept_mass;     // [topk_group] untaken weight left in kept group i
    std::vector<double> kept_left;     // [topk_group] untaken experts left in kept group i
    std::vector<uint8_t> taken;        // [topk_group x group_size] expert e of kept group i taken
    std::vector<uint8_t> none;         // [topk_group] zeros
  };

  // The steps of Draw are always inlined into it, so that the generator's state stays in
  // registers as it did in one function (bench_routing's "groups 8/4" rows).

  // Draw of a uniform sampler: topk_group distinct groups, then top_k distinct experts among
  // their topk_group x group_size, each uniform (rejection of repeats).
  template <class Sink>
  __attribute__((always_inline)) inline void DrawUniform(Xoshiro256ss& rng, int64_t tokens, Sink& sink) const;
  // Keeps one token's topk_group groups in proportion to their summed share (`total`: the sum of
  // all groups), into state->kept, kept_mass and kept_left.
  __attribute__((always_inline)) inline void KeepGroups(Xoshiro256ss& rng, double total, DrawState* state) const;
  // One more expert (0..E-1) of the token among the untaken experts of its kept groups, in
  // proportion to its share (`kept_total`: the kept groups' full weight), marked taken in `state`.
  __attribute__((always_inline)) inline int64_t PickKeptExpert(Xoshiro256ss& rng, double kept_total, DrawState* state) const;
  // Rejection sampling gives up after this many draws that hit a taken group or expert (nearly
  // all the remaining weight is taken); the exact successive sampling (Pick) decides then.
  static constexpr int kMaxTries = 32;
  // Successive sampling of one item among `n` with weights w[] (skipping taken[] ones), from
  // one generator output x: returns its index; uniform over the untaken ones when their total
  // weight is 0. (An output, not the generator: a generator passed by reference to a function
  // that is not inlined lives in memory through the whole draw loop.)
  static int64_t Pick(const double* w, const uint8_t* taken, int64_t n, uint64_t x);
};

GroupSampler BuildGroupSampler(const std::vector<double>& share, int64_t top_k, const GroupLimit& limit);

template <class Sink>
void GroupSampler::Draw(Xoshiro256ss& rng_ref, int64_t tokens, Sink& sink) const {
  // Each loop runs on a local copy of the generator, so that its state stays in registers, and
  // writes it back at the end (the stream is the same as drawing from rng_ref directly). Nothing
  // in the loops throws; a destructor that wrote the state back instead kept it in memory
  // through them (three times slower).
  if (uniform) {
    DrawUniform(rng_ref, tokens, sink);
    return;
  }
  // Fast path: rejection sampling from the full distribution (a draw that hits a taken group or
  // expert is repeated), which is a draw in proportion to weight over the untaken ones -- the same
  // law as the successive sampling, in O(log) per try; after kMaxTries misses the exact
  // successive sampling decides.
  const int64_t G = limit.n_group, kg = limit.topk_group, S = group_size;
  DrawState state{std::vector<uint8_t>(static_cast<size_t>(G)),      std::vector<int64_t>(static_cast<size_t>(kg)),
                  std::vector<double>(static_cast<size_t>(kg)),      std::vector<double>(static_cast<size_t>(kg)),
                  std::vector<uint8_t>(static_cast<size_t>(kg * S)), std::vector<uint8_t>(static_cast<size_t>(kg), 0)};
  const double total = total_weight;
  Xoshiro256ss rng = rng_ref;
  for (int64_t t = 0; t < tokens; ++t) {
    sink.BeginToken();
    KeepGroups(rng, total, &state);
    std::fill(state.taken.begin(), state.taken.end(), uint8_t{0});
    double kept_total = 0;
    for (int64_t i = 0; i < kg; ++i) kept_total += group_weight[static_cast<size_t>(state.kept[static_cast<size_t>(i)])];
    for (int64_t j = 0; j < top_k; ++j) sink.Pick(static_cast<uint32_t>(PickKeptExpert(rng, kept_total, &state)));
  }
  rng_ref = rng;
}

template <class Sink>
void GroupSampler::DrawUniform(Xoshiro256ss& rng_ref, int64_t tokens, Sink& sink_ref) const {
  // kg <= G and top_k <= kg x S.
  const int64_t G = limit.n_group, kg = limit.topk_group, S = group_size, slots = kg * S;
  // Without the slot table: the first expert of kept group i [kg]. Which groups [G] and kept-group
  // slots [slots] the current token has taken: stamped with t + 1 (one load per draw instead of a
  // search of the token's earlier picks). On the stack when small (a call draws at most 64
  // tokens of a stream: no allocation per call), else on the heap.
  constexpr int64_t kInline = 256;
  int64_t inline_drawn[kInline], inline_groups[kInline], inline_slots[kInline];
  std::vector<int64_t> heap_drawn, heap_groups, heap_slots;
  auto zeroed = [](int64_t n, int64_t* inline_array, std::vector<int64_t>& heap) {
    if (n > kInline) {
      heap.assign(static_cast<size_t>(n), 0);
      return heap.data();
    }
    std::fill(inline_array, inline_array + n, int64_t{0});
    return inline_array;
  };
  int64_t* const drawn_base = zeroed(kg, inline_drawn, heap_drawn);
  int64_t* const group_stamp = zeroed(G, inline_groups, heap_groups);
  int64_t* const slot_stamp = zeroed(slots, inline_slots, heap_slots);
  // Slots of a power-of-two count (DeepSeek-V3: 4 x 32; then S is one too) take whole bits,
  // several draws per generator output (Xoshiro256ss::Bits), and map to experts by shifts; others
  // draw Below() and divide.
  const int slot_bits = Log2IfPow2(static_cast<uint64_t>(slots));
  const int shift = Log2IfPow2(static_cast<uint64_t>(S));  // read only with slot_bits > 0
  // fixed_bits / fixed_k: the slot bits and top_k as compile-time constants where nonzero (the
  // loop then rotates and masks by immediates and unrolls the picks, which frees the registers
  // the generator needs), read at run time where zero.
  auto draw = [&](auto power_of_two, auto slot_table, auto fixed_bits, auto fixed_k) {
    constexpr bool kBits = decltype(power_of_two)::value, kTable = decltype(slot_table)::value;
    constexpr int kFixedBits = decltype(fixed_bits)::value;
    constexpr int64_t kFixedK = decltype(fixed_k)::value;
    // Everything the loop reads, as locals of this function: the stores of the loop (stamps,
    // the sink's) could otherwise alias them and force reloads. The generator and the sink are
    // copies written back after the loop (Draw).
    Xoshiro256ss rng = rng_ref;
    Sink sink = sink_ref;
    const int64_t n_group = G, n_kept = kg, n_slots = slots, group_mask = S - 1, size = S, K = kFixedK > 0 ? kFixedK : top_k;
    const int bits = kFixedBits > 0 ? kFixedBits : slot_bits, group_shift = shift;
    const uint64_t bits_mask = kBits ? (uint64_t{1} << bits) - 1 : 0;  // slot_bits <= 31 (slots <= E < 2^31)
    const uint64_t sets = kept_sets.size();
    const uint64_t* const masks = kept_sets.data();
    const int32_t* const table = kept_experts.data();
    int64_t* const drawn = drawn_base;
    int64_t* const groups_taken = group_stamp;
    int64_t* const taken = slot_stamp;
    for (int64_t t = 0; t < tokens; ++t) {
      sink.BeginToken();
      const int64_t stamp = t + 1;
      // The kept groups: with the table of the C(G, kg) sets, one of them, uniform (the law of kg
      // successive uniform draws without repeats), in increasing group order; else kg draws.
      const int32_t* row = nullptr;
      if (kTable) {
        row = table + rng.Below(sets) * static_cast<uint64_t>(n_slots);
      } else if (sets > 0) {
        uint64_t mask = masks[rng.Below(sets)];
        for (int64_t i = 0; i < n_kept; ++i, mask &= mask - 1) drawn[i] = static_cast<int64_t>(__builtin_ctzll(mask)) * size;
      } else {
        for (int64_t i = 0; i < n_kept; ++i) {
          int64_t g;
          do {
            g = static_cast<int64_t>(rng.Below(static_cast<uint64_t>(n_group)));
          } while (groups_taken[g] == stamp);
          groups_taken[g] = stamp;
          drawn[i] = g * size;
        }
      }
#pragma GCC unroll 8
      for (int64_t j = 0; j < K; ++j) {
        int64_t x;
        do {
          x = static_cast<int64_t>(kBits ? rng.TakeBits(bits, bits_mask) : rng.Below(static_cast<uint64_t>(n_slots)));
        } while (taken[x] == stamp);
        taken[x] = stamp;
        if (kTable) {
          sink.Pick(static_cast<uint32_t>(row[x]));
        } else {
          const int64_t k = kBits ? x >> group_shift : x / size, e = kBits ? x & group_mask : x % size;
          sink.Pick(static_cast<uint32_t>(drawn[k] + e));
        }
      }
    }
    rng_ref = rng;
    sink_ref = sink;
  };
  const bool table = !kept_experts.empty();
  using Runtime = std::integral_constant<int, 0>;
  using RuntimeK = std::integral_constant<int64_t, 0>;
  if (table && slot_bits == 7 && top_k == 8) {
    // DeepSeek-V3's shape (4 kept groups x 32 experts = 128 slots, top_k 8): the same draws.
    draw(std::true_type{}, std::true_type{}, std::integral_constant<int, 7>{}, std::integral_constant<int64_t, 8>{});
  } else if (slot_bits > 0) {
    table ? draw(std::true_type{}, std::true_type{}, Runtime{}, RuntimeK{})
          : draw(std::true_type{}, std::false_type{}, Runtime{}, RuntimeK{});
  } else {
    table ? draw(std::false_type{}, std::true_type{}, Runtime{}, RuntimeK{})
          : draw(std::false_type{}, std::false_type{}, Runtime{}, RuntimeK{});
  }
}

inline void GroupSampler::KeepGroups(Xoshiro256ss& rng, double total, DrawState* state) const {
  const int64_t G = limit.n_group, kg = limit.topk_group, S = group_size;
  std::fill(state->group_taken.begin(), state->group_taken.end(), uint8_t{0});
  for (int64_t i = 0; i < kg; ++i) {
    int64_t g = -1;
    for (int tries = 0; total > 0 && tries < kMaxTries && g < 0; ++tries) {
      const int64_t c = AliasPick(group_threshold.data(), group_alias.data(), static_cast<uint64_t>(G), rng.Next());
      if (!state->group_taken[static_cast<size_t>(c)] && group_weight[static_cast<size_t>(c)] > 0) g = c;
    }
    if (g < 0) g = Pick(group_weight.data(), state->group_taken.data(), G, rng.Next());
    state->group_taken[static_cast<size_t>(g)] = 1;
    state->kept[static_cast<size_t>(i)] = g;
    state->kept_mass[static_cast<size_t>(i)] = group_weight[static_cast<size_t>(g)];
    state->kept_left[static_cast<size_t>(i)] = static_cast<double>(S);
  }
}

inline int64_t GroupSampler::PickKeptExpert(Xoshiro256ss& rng, double kept_total, DrawState* state) const {
  const int64_t kg = limit.topk_group, S = group_size;
  const std::vector<int64_t>& kept = state->kept;
  int64_t i = -1, x = -1;
  for (int tries = 0; kept_total > 0 && tries < kMaxTries && x < 0; ++tries) {
    // A kept group in proportion to its full weight, then an expert in proportion to its weight.
    // (The walk subtracts each passed group's weight from u, with conditional moves: which
    // group a draw lands in is a coin flip the CPU cannot predict.)
    double u = rng.Uniform01() * kept_total;
    int64_t k = 0;
    bool going = true;
    for (int64_t i = 0; i + 1 < kg; ++i) {
      const double w = group_weight[static_cast<size_t>(kept[static_cast<size_t>(i)])];
      going = going && u >= w;
      u = going ? u - w : u;
      k += going;
    }
    const int64_t g = kept[static_cast<size_t>(k)];
    const int64_t e = AliasPick(expert_threshold.data() + g * S, expert_alias.data() + g * S, static_cast<uint64_t>(S), rng.Next());
    if (!state->taken[static_cast<size_t>(k * S + e)] && weight[static_cast<size_t>(g * S + e)] > 0) {
      i = k;
      x = e;
    }
  }
  if (x < 0) {
    // Exact successive sampling: a kept group in proportion to its untaken weight (to its
    // untaken experts once no weight is left), then an expert inside it in proportion to its
    // weight.
    bool any_mass = false;
    for (int64_t k = 0; k < kg; ++k)
      any_mass = any_mass || (state->kept_mass[static_cast<size_t>(k)] > 0 && state->kept_left[static_cast<size_t>(k)] > 0);
    if (any_mass) {
      for (int64_t k = 0; k < kg; ++k) {
        if (state->kept_left[static_cast<size_t>(k)] == 0) state->kept_mass[static_cast<size_t>(k)] = 0;  // rounding residue
      }
    }
    const std::vector<double>& by = any_mass ? state->kept_mass : state->kept_left;
    i = Pick(by.data(), state->none.data(), kg, rng.Next());
    x = Pick(weight.data() + kept[static_cast<size_t>(i)] * S, state->taken.data() + i * S, S, rng.Next());
  }
  const int64_t g = kept[static_cast<size_t>(i)];
  state->taken[static_cast<size_t>(i * S + x)] = 1;
  state->kept_mass[static_cast<size_t>(i)] =
      std::max(0.0, state->kept_mass[static_cast<size_t>(i)] - weight[static_cast<size_t>(g * S + x)]);
  state->kept_left[static_cast<size_t>(i)] -= 1;
  return g * S + x;
}

}  // namespace routing_detail

}  // namespace dockyard
