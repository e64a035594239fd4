// Generated data of dockyard-run: tokens and weights as pure functions of their coordinates
// (nccl-tests style: any rank, and the single-process reference, can recompute any element).
//
// Tokens. x[source][t][d] = U(seed, source, t * hidden + d), a counter-based hash (splitmix64's
// finalizer over a per-(seed, source) key) mapped to [-1, 1]. `source` is the rank whose tokens
// they are (runtime/config.h: ranks that hold the same tokens share one source).
//
// Weights. Matrix `matrix` of expert `expert` in layer `layer` is a list of rows; row r gets
// three 32-bit words (alpha, beta, gamma) from the hash of (seed, layer, matrix, expert, r) and
// its element at column c is the quadratic Weyl sequence
//     bits(c) = beta + c * alpha + c * (c - 1) / 2 * gamma   (mod 2^32),
//     w(r, c) = scale * int32(bits(c)) / 2^31                 in [-scale, scale].
// The closed form makes every element directly computable; consecutive columns need only two
// 32-bit additions each (bits(c + 1) = bits(c) + delta, delta += gamma), which is what makes
// generating real-size experts (DeepSeek-V3: 44M weights per expert) cheap enough to do lazily,
// per owned expert and per block of the intermediate dim, instead of storing them.
//
// Which (row, column) is which:
//   router gate          [E, D]   matrix kMatrixRouter, expert 0, row = expert id, col = d
//   score bias           [E]      matrix kMatrixScoreBias, expert 0, row 0, col = expert id
//   routed gate / up     [F, D]   kMatrixGate / kMatrixUp, expert = GLOBAL expert id, row = f, col = d
//   routed down          [D, F]   kMatrixDown, row = f, col = d: down[d, f] = w(f, d) (generated
//                                 transposed, [F, D], so a block of f is contiguous)
//   shared gate / up / down       the same with kMatrixShared*, expert 0, F = shared_expert_intermediate_size
//   shared sigmoid gate  [1, D]   kMatrixSharedSigmoidGate, row 0
// Rows and columns are GLOBAL (logical, unsharded) indices: a TP shard generates its slice of
// f, an EP rank its own experts, so an ownership or slicing mistake changes the numbers.
//
// Scales keep activations O(1): x ~ U(-1, 1) has variance 1/3, so gate/up rows with scale
// sqrt(3 / D) give pre-activations of variance 1/3, down with sqrt(3 / F) keeps the output
// O(0.1), and the router's 3 / sqrt(D) gives logits of variance 1.
#pragma once

#include <cmath>
#include <cstdint>

// The generators are also compiled by nvcc for the CUDA kernels (kernels/), which must produce
// the same bits as the host.
#if defined(__CUDACC__)
#define DOCKYARD_HD __host__ __device__
#else
#define DOCKYARD_HD
#endif

namespace dockyard::runtime {

enum Matrix : int64_t {
  kMatrixRouter = 1,
  kMatrixScoreBias = 2,
  kMatrixGate = 3,
  kMatrixUp = 4,
  kMatrixDown = 5,
  kMatrixSharedGate = 6,
  kMatrixSharedUp = 7,
  kMatrixSharedDown = 8,
  kMatrixSharedSigmoidGate = 9,
};

// splitmix64's output function (Steele, Lea, Flood 2014).
DOCKYARD_HD inline uint64_t Mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

DOCKYARD_HD inline uint64_t HashCombine(uint64_t h, uint64_t v) {
  return Mix64(h ^ (v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2)));
}

// int32 of the bits, times 2^-31: [-1, 1] (INT32_MAX rounds up to 2^31 in fp32).
DOCKYARD_HD inline float BitsToUnit(uint32_t bits) {
  return static_cast<float>(static_cast<int32_t>(bits)) * 0x1p-31f;
}

DOCKYARD_HD inline uint64_t TokenKey(uint64_t seed, int64_t source) {
  return HashCombine(HashCombine(Mix64(seed ^ 0x746f6b656e73ULL), 0x78ULL), static_cast<uint64_t>(source));
}
// Element `index` (= token * hidden + d) of a source's tokens.
DOCKYARD_HD inline float TokenValueAt(uint64_t key, int64_t index) {
  return BitsToUnit(static_cast<uint32_t>(Mix64(key + static_cast<uint64_t>(index) * 0x9e3779b97f4a7c15ULL) >> 32));
}
DOCKYARD_HD inline float TokenValue(uint64_t seed, int64_t source, int64_t token, int64_t d, int64_t hidden) {
  return TokenValueAt(TokenKey(seed, source), token * hidden + d);
}

struct RowStream {
  uint32_t alpha = 0, beta = 0, gamma = 0;
};

DOCKYARD_HD inline RowStream MakeRowStream(uint64_t seed, int64_t layer, int64_t matrix, int64_t expert, int64_t row) {
  uint64_t h = HashCombine(Mix64(seed ^ 0x77656967687473ULL), static_cast<uint64_t>(layer));
  h = HashCombine(h, static_cast<uint64_t>(matrix));
  h = HashCombine(h, static_cast<uint64_t>(expert));
  h = HashCombine(h, static_cast<uint64_t>(row));
  const uint64_t h2 = Mix64(h + 0x9e3779b97f4a7c15ULL);
  return {static_cast<uint32_t>(h), static_cast<uint32_t>(h >> 32), static_cast<uint32_t>(h2) | 1u};
}

// bits(c) in closed form (mod 2^32 throughout: unsigned wrap-around is the definition).
DOCKYARD_HD inline uint32_t RowBits(const RowStream& s, int64_t col) {
  const uint64_t c = static_cast<uint64_t>(col);
  const uint32_t tri = static_cast<uint32_t>(c == 0 ? 0 : (c * (c - 1)) / 2);
  return s.beta + static_cast<uint32_t>(c) * s.alpha + tri * s.gamma;
}
// The increment bits(c + 1) - bits(c) = alpha + c * gamma.
DOCKYARD_HD inline uint32_t RowDelta(const RowStream& s, int64_t col) {
  return s.alpha + static_cast<uint32_t>(static_cast<uint64_t>(col)) * s.gamma;
}

DOCKYARD_HD inline float WeightValue(uint64_t seed, int64_t layer, int64_t matrix, int64_t expert, int64_t row, int64_t col, float scale) {
  return scale * BitsToUnit(RowBits(MakeRowStream(seed, layer, matrix, expert, row), col));
}

inline float GateUpScale(int64_t hidden) {
  return static_cast<float>(std::sqrt(3.0 / static_cast<double>(hidden)));
}
inline float DownScale(int64_t intermediate) {
  return static_cast<float>(std::sqrt(3.0 / static_cast<double>(intermediate)));
}
inline float RouterScale(int64_t hidden) {
  return static_cast<float>(3.0 / std::sqrt(static_cast<double>(hidden)));
}
constexpr float kScoreBiasScale = 0.1f;

}  // namespace dockyard::runtime
