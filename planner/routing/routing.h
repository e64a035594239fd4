// Routing model of the simulator: which experts the tokens of each EP rank are routed to, per
// MoE layer, and the resulting dispatch matrices, received loads and imbalance.
//
// Model. Every EP rank holds T tokens; each token picks top_k DISTINCT experts out of E; EP
// rank r owns the contiguous experts [r * E/ep, (r + 1) * E/ep). A distribution gives every
// expert a weight, read as its target SHARE OF THE TOKEN-EXPERT ASSIGNMENTS (expected
// tokens_per_expert[e] = share[e] * T * ep * top_k):
//   uniform    every expert 1/E;
//   zipf:S     expert e weighs 1/(e+1)^S; with zipf_shuffle (default) the weights are permuted
//              by a seeded shuffle, independently per layer, so hot experts land on any rank;
//   hot:H:F    experts 0..H-1 (the first ranks) share fraction F, the other E-H share 1-F;
//   trace:PATH per-layer tokens-per-expert counts from a file (JSON or CSV, see
//              LoadRoutingTrace), one layer broadcast to all or one per MoE layer.
// A token can pick an expert at most once, so no expert can take more than 1/top_k of the
// assignments: shares above that are capped (the expert is picked by every token) and the excess
// is spread over the other experts in proportion to their weights (water-filling). If fewer than
// top_k experts have a positive weight, all of them are picked by every token and the remaining
// picks go uniformly to the zero-weight experts. LayerRouting::expected_share holds the capped
// shares.
//
// Sampling. Tokens pick their experts one after the other without replacement (the Gumbel
// top-k model of a router: successive draws with per-draw weights, duplicates rejected), using
// an alias table and a per-token duplicate stamp; experts picked by every token are added in
// bulk, never drawn. The per-draw weights are calibrated once per weight vector (numerical
// inclusion probabilities of successive sampling, fixed-point iteration) so that the inclusion
// frequencies equal the target shares; for equal weights no calibration is needed. When the
// remaining draw mass of a token gets small (skewed weights, top_k close to E) the draw falls
// back to an exact linear scan over the unpicked experts, so sampling never loops for long.
//
// Determinism. Random numbers come from xoshiro256** seeded through splitmix64; every (seed,
// layer, source rank) pair has its own stream, so a layer's result does not depend on how many
// layers are sampled, and results are identical across platforms and compilers (integer draws;
// the floating-point weights are built with IEEE double arithmetic and std::pow / std::log).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "planner/model/group_limit.h"
#include "planner/routing/random.h"

namespace dockyard {

// ---------------------------------------------------------------------------------------------
// Specification.

enum class RoutingKind { kUniform, kZipf, kHot, kTrace };

struct RoutingSpec {
  RoutingKind kind = RoutingKind::kUniform;
  double zipf_s = 1.0;
  bool zipf_shuffle = true;
  int64_t hot_experts = 0;
  double hot_fraction = 0.0;
  std::string trace_path;
  uint64_t seed = 0;
};

// "uniform", "zipf:S" (also "zipf:S:noshuffle"), "hot:H:F" (experts 0..H-1 get fraction F of
// the assignments), "trace:PATH" (everything after the first ':' is the path). The seed is not
// part of the text. Throws dockyard::Error naming the text and the rule.
RoutingSpec ParseRoutingSpec(const std::string& text);

// The text form ParseRoutingSpec reads ("zipf:1.2", "hot:4:0.5", ...); the seed is not included.
std::string RoutingSpecText(const RoutingSpec& spec);

// ---------------------------------------------------------------------------------------------
// Traces.

// Tokens per expert per layer. File formats:
//   JSON  {"num_experts": E, "layers": [[c0, ..., c(E-1)], ...], "description": "..."}
//         ("description" optional, other keys rejected);
//   CSV   header "layer,expert,tokens", then one line per (layer, expert) pair, any order;
//         layers 0..L-1 and experts 0..E-1 must each appear, every pair exactly once; blank
//         lines are skipped.
// A file ending in .csv is read as CSV, .json as JSON, anything else by its first character.
// Counts are integers >= 0 and every layer needs a positive total; an expert with 0 tokens is
// never routed to (unless fewer than top_k experts have tokens, see above). Errors name the
// file, the JSON pointer or CSV line, the value and the rule.
struct RoutingTrace {
  std::string path;
  int64_t num_experts = 0;
  std::vector<std::vector<int64_t>> layers;  // [L][E]
};
RoutingTrace LoadRoutingTrace(const std::string& path);

// ---------------------------------------------------------------------------------------------
// Results.

struct FlexCounts;  // flex_counts.h

struct LayerRouting {
  std::vector<int64_t> tokens_per_expert;      // [E] token-expert assignments per expert
  std::vector<int64_t> dispatch;               // [ep*ep] row-major: assignments src EP rank -> dst EP rank
  std::vector<int64_t> received;               // [ep] assignments received per rank (column sums)
  std::vector<int64_t> rows_per_local_expert;  // [ep * E/ep]: rank d's local expert j at d*(E/ep)+j
  int64_t max_received = 0;
  double mean_received = 0;  // exactly T * top_k
  int64_t p99_received = 0;  // nearest rank: sorted[ceil(0.99 ep) - 1]
  double imbalance = 1.0;    // max / mean received (1 when T = 0)
  // Deredundency dispatcher (ep = oep x iep, inner index fastest: EP rank r = o*iep + i): rank
  // (o,i) gathers the routed rows of the oep sources (o', i) and sends to (o, j) the assignments
  // of those rows whose expert is owned by (o, j). [ep*iep] row-major: iep_dispatch[r * iep + j]
  // = sum over o' of dispatch[(o'*iep + i) -> (o*iep + j)]. Empty with oep = 1, where it would
  // equal dispatch (no copy of an ep x ep matrix per layer): read it through IepDispatchOf.
  std::vector<int64_t> iep_dispatch;
  std::vector<double> expected_share;  // [E] target share of the assignments (sums to 1)
  // deepep dispatcher: token-level counts per EP member and node (flex_counts.h SampleFlexCounts);
  // null unless the plan's dispatcher is deepep.
  std::shared_ptr<const FlexCounts> flex;
};

// The deredundency matrix of `layer` ([ep*iep]): iep_dispatch, or dispatch itself with oep = 1
// (iep_dispatch empty).
inline const std::vector<int64_t>& IepDispatchOf(const LayerRouting& layer) {
  return layer.iep_dispatch.empty() ? layer.dispatch : layer.iep_dispatch;
}

// Sets max_received, mean_received (= tokens_per_rank * top_k), p99_received and imbalance of
// `out` from out.received (size ep >= 1).
void FillReceivedStats(LayerRouting& out, int64_t tokens_per_rank, int64_t top_k);

struct RoutingResult {
  int64_t num_experts = 0, top_k = 0, ep = 0, tokens_per_rank = 0, oep = 1;
  // Physical expert slots per layer when experts are replicated (replica_routing.h): the
  // dispatch matrices and rows_per_local_expert ([ep * num_slots/ep]) are then per physical
  // slot. 0: no replicas, the slots are the num_experts logical experts.
  int64_t num_slots = 0;
  std::vector<LayerRouting> layers;
  double max_imbalance = 1.0;  // over layers (1 with no layers)
  int64_t assignments = 0;     // T * ep * top_k * num_layers
};

// ---------------------------------------------------------------------------------------------
// Sampling.

namespace routing_detail {
struct LayerSampler;  // defined in routing.cc
}  // namespace routing_detail

// The per-layer samplers of a spec for one model (E, top_k, MoE layers): weights, capping,
// calibration and alias tables, built once. Sampling it for many (ep, T, oep) layouts repeats
// none of that work (a trace is read, and each distinct weight vector calibrated, only here).
struct RoutingModel {
  RoutingSpec spec;
  int64_t num_experts = 0, top_k = 0, num_layers = 0;
  std::vector<std::shared_ptr<const routing_detail::LayerSampler>> layers;  // [num_layers]
};

// Validates the spec against the model (1 <= top_k <= E, num_layers >= 0, zipf S finite >= 0,
// 0 <= H <= E, 0 <= F <= 1, trace shape) and builds the samplers. Throws dockyard::Error.
RoutingModel PrepareRouting(const RoutingSpec& spec, int64_t num_experts, int64_t top_k, int64_t num_layers);

// PrepareRouting for a group-limited model (model/group_limit.h): every layer draws its tokens in
// the two stages of group_routing.h from the layer's capped shares. With an inactive limit it equals PrepareRouting.
// Throws dockyard::Error naming n_group / topk_group and the rule (GroupLimitProblem).
RoutingModel PrepareRouting(const RoutingSpec& spec, int64_t num_experts, int64_t top_k, int64_t num_layers, const GroupLimit& limit);

// Samples every layer for ep ranks of tokens_per_rank tokens (ep | E, oep | ep, T >= 0, products
// checked for overflow). Throws dockyard::Error.
RoutingResult SampleRouting(const RoutingModel& model, int64_t ep, int64_t tokens_per_rank, int64_t oep = 1);

// Samples many (ep, tokens_per_rank, oep) layouts of one routing model, as a layout search does.
// A source rank's tokens and their experts depend only on its own random stream (seed, layer,
// rank) and on tokens_per_rank -- not on ep (which only decides where its experts live) nor on oep
// --, so each rank's per-expert counts are drawn once per tokens_per_rank and shared by every
// ep and oep: Sample(ep, T, oep) equals SampleRouting(model, ep, T, oep) field for field (same
// checks and errors), drawing only the ranks not drawn before for T. Keeps [ranks][E] counts per
// (T, layer) drawn so far (8 bytes each).
class RoutingSampler {
 public:
  explicit RoutingSampler(RoutingModel model);
  // Token counts likely to be asked for (a layout search knows them from its candidates). A rank
  // drawn for one count is then drawn once up to the largest expected count that still lacks it,
  // the smaller counts read on the way: a rank's tokens are drawn one after the other from its
  // stream, so the first T tokens of a longer draw are exactly a draw of T tokens. Changes no
  // result, only how often a stream is restarted; counts never asked for cost memory only.
  void ExpectTokenCounts(const std::vector<int64_t>& tokens_per_rank);
  RoutingResult Sample(int64_t ep, int64_t tokens_per_rank, int64_t oep = 1);
  const RoutingModel& model() const { return model_; }

 private:
  RoutingModel model_;
  std::vector<int64_t> expected_;                                // sorted, unique
  std::map<int64_t, std::vector<std::vector<int64_t>>> counts_;  // T -> [layer] -> [rank * E + e]
};

// SampleRouting's checks and result from per-expert counts the caller already holds:
// rank_counts(layer, rank) points at E counts (the tokens of that source rank picking each expert,
// its first tokens_per_rank draws of stream (seed, layer, rank); int32, the type of the block
// counts they are read from), read before the next call. Equal to SampleRouting(model, ep,
// tokens_per_rank, oep) when the counts are those draws' (the search's block counts at block size
// 1, flex_blocks.h). Throws dockyard::Error where SampleRouting does.
RoutingResult AssembleRoutingFromCounts(const RoutingModel& model, int64_t ep, int64_t tokens_per_rank, int64_t oep,
                                        const std::function<const int32_t*(int64_t layer, int64_t rank)>& rank_counts);

// PrepareRouting + SampleRouting. num_layers MoE layers; oep must divide ep (1 = no deredundency
// matrices beyond the trivial one).
RoutingResult SampleRouting(const RoutingSpec& spec, int64_t num_experts, int64_t top_k, int64_t ep, int64_t tokens_per_rank,
                            int64_t num_layers, int64_t oep = 1);

// The experts each token of one source rank picks in one layer, [tokens * top_k] (token t's
// experts at [t*top_k, (t+1)*top_k), distinct, experts picked by every token first). Same stream
// as SampleRouting, so counting these for rank r reproduces that rank's row of its matrices.
std::vector<int32_t> SampleTokenExperts(const RoutingModel& model, int64_t layer, int64_t ep_rank, int64_t tokens);

// The same draws as bit-sliced words, a batch of at most 64 tokens at a time (what the deepep
// block counts read, flex_blocks.h): Next(tokens, hit) draws the stream's next `tokens` tokens
// and sets bit u of hit[e] (hit: [E] words) for every expert e token u of the batch picks, forced
// ones included; bits of other tokens are left as they are. The batches in sequence are the
// stream SampleTokenExperts draws. Holds the model by reference. Throws dockyard::Error where
// SampleTokenExperts does (construction) or for tokens outside [0, 64] (Next).
class TokenHitStream {
 public:
  TokenHitStream(const RoutingModel& model, int64_t layer, int64_t ep_rank);
  ~TokenHitStream();
  TokenHitStream(const TokenHitStream&) = delete;
  TokenHitStream& operator=(const TokenHitStream&) = delete;
  void Next(int64_t tokens, uint64_t* hit);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// The target share of the assignments of every expert in `layer` of `model` ([E], capped, sums
// to 1; LayerRouting::expected_share). Throws dockyard::Error for a layer outside the model.
const std::vector<double>& ExpectedShare(const RoutingModel& model, int64_t layer);

// Expected received assignments per rank under uniform routing: T * top_k (the exact mean of
// `received` under any distribution; for uniform routing also every rank's expectation).
inline double ExpectedReceivedUniform(int64_t tokens_per_rank, int64_t top_k) {
  return static_cast<double>(tokens_per_rank) * static_cast<double>(top_k);
}

}  // namespace dockyard
