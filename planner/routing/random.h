// Random numbers of the routing sampler: splitmix64, xoshiro256** with one stream per (seed,
// layer, source rank), and Vose's alias tables (routing.h says how the sampler uses them).
#pragma once

#include <cstddef>
#include <cstdint>

namespace dockyard {


// splitmix64 step (Steele, Lea, Flood 2014): advances `state` and returns the next output.
inline uint64_t SplitMix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// xoshiro256** 1.0 (Blackman, Vigna).
class Xoshiro256ss {
 public:
  // State from four splitmix64 outputs of `seed`.
  explicit Xoshiro256ss(uint64_t seed) {
    uint64_t sm = seed;
    for (auto& word : s_) word = SplitMix64(sm);
  }
  Xoshiro256ss(uint64_t s0, uint64_t s1, uint64_t s2, uint64_t s3) : s_{s0, s1, s2, s3} {}

  // The independent stream of (seed, layer, rank).
  static Xoshiro256ss ForStream(uint64_t seed, uint64_t layer, uint64_t rank);

  uint64_t Next() {
    const uint64_t result = Rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = Rotl(s_[3], 45);
    return result;
  }
  // An integer in [0, n) by Lemire's multiply-shift (bias below n / 2^64), n >= 1.
  uint64_t Below(uint64_t n) { return BelowOf(Next(), n); }
  // A double in [0, 1) with 53 random bits.
  double Uniform01() { return Uniform01Of(Next()); }
  // The same from a given output x of Next() (a caller that hands one output to code that must
  // not hold the generator: its address would keep the generator's state out of registers).
  static uint64_t BelowOf(uint64_t x, uint64_t n) { return static_cast<uint64_t>((static_cast<unsigned __int128>(x) * n) >> 64); }
  static double Uniform01Of(uint64_t x) { return static_cast<double>(x >> 11) * 0x1.0p-53; }
  // An integer in [0, 2^bits), 0 <= bits <= 64, exactly uniform: `bits` at a time from the top
  // of a buffered output, which is dropped once fewer are left (one Next() gives nine 7-bit draws
  // for 128 experts). The buffer is part of the generator's state, so a stream drawn in several
  // calls equals the same stream drawn in one (the prefix property routing.h relies on).
  uint64_t Bits(int bits) {
    if (bits == 0) return 0;
    return TakeBits(bits, bits == 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1);
  }
  // Bits(bits) for 1 <= bits <= 64 with its mask given (mask = 2^bits - 1): a loop drawing many
  // computes the mask once.
  uint64_t TakeBits(int bits, uint64_t mask) {
    if (bits_left_ < bits) {
      bits_ = Next();
      bits_left_ = 64;
    }
    // The top `bits` bits, rotated to the bottom: the unused bits stay on top (one rotation with
    // the count masked to 0..63, so that 64 is the identity, instead of two shifts).
    bits_ = (bits_ << (bits & 63)) | (bits_ >> ((64 - bits) & 63));
    bits_left_ -= bits;
    return bits_ & mask;
  }

 private:
  static uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t s_[4];
  uint64_t bits_ = 0;  // Bits(): the buffered output, its unused bits at the top
  int bits_left_ = 0;
};

// log2(n) when n is a power of two (n >= 1), else -1.
inline int Log2IfPow2(uint64_t n) {
  if (n == 0 || (n & (n - 1)) != 0) return -1;
  int b = 0;
  while ((uint64_t{1} << b) < n) ++b;
  return b;
}

namespace routing_detail {
// Vose's alias method with 64-bit integer thresholds over n items of probabilities prob[0..n)
// (>= 0, summing to 1): column c keeps c when the low 64 bits of (x * n) are below
// threshold[c], else takes alias[c], for a uniform 64-bit x (AliasPick). Item i comes out with
// probability prob[i] up to the 2^-64 resolution of a threshold (rounding leftovers keep their
// column). Fills threshold[0..n) and alias[0..n).
void BuildAliasTable(const double* prob, size_t n, uint64_t* threshold, uint32_t* alias);

// One draw from a table of n columns (BuildAliasTable) with the 64-bit uniform x; branch-free
// (the comparison is a coin flip the CPU cannot predict).
inline uint32_t AliasPick(const uint64_t* threshold, const uint32_t* alias, uint64_t n, uint64_t x) {
  const unsigned __int128 m = static_cast<unsigned __int128>(x) * n;
  const uint32_t col = static_cast<uint32_t>(m >> 64);
  const uint32_t keep = static_cast<uint32_t>(static_cast<uint64_t>(m) < threshold[col]) - 1u;  // 0 keep, ~0 alias
  return col ^ ((col ^ alias[col]) & keep);
}
}  // namespace routing_detail

}  // namespace dockyard
