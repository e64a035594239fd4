// Pins that conflict with each other or the world size are refused before the search
// (ValidateSearchPins), each naming the flags, values and rule.
#include "planner/search/search_pins.h"
#include "planner/search/search_options.h"

#include <doctest/doctest.h>

#include "planner/base/error.h"
#include "tests/test_models.h"

namespace dockyard {
namespace {

SearchOptions Options() {
  SearchOptions o;
  o.world_size = 8;
  o.max_pp = 16;
  o.micro_batch_sizes = {1, 2, 4};
  o.recomputes = {Recompute::kNone, Recompute::kSelective, Recompute::kFull};
  o.vpps = {1, 2, 4};
  return o;
}

TEST_CASE("Pinned degrees must factor the world size, and pp stays within --max-pp") {
  SearchOptions o = Options();
  o.pins.tp = 2;
  o.pins.pp = 4;
  CHECK_NOTHROW(ValidateSearchPins(o));  // 2 x 4 = 8
  o.pins.pp = 8;                         // 8 x 2 = 16 does not divide 8
  CHECK_THROWS_WITH_AS(ValidateSearchPins(o),
                       "--pp 8 x --tp 2 = 16 does not divide --world-size 8 (world = pp x dp_replicate x dp_shard x cp x tp)", Error);
  o = Options();
  o.pins.ep = 3;
  CHECK_THROWS_WITH_AS(ValidateSearchPins(o), "--ep 3 does not divide --world-size 8 (every degree is a factor of the world size)", Error);
  o = Options();
  o.pins.pp = 16;
  CHECK_THROWS_WITH_AS(ValidateSearchPins(o), doctest::Contains("--pp 16 does not divide --world-size 8"), Error);
  o = Options();
  o.max_pp = 2;
  o.pins.pp = 4;
  CHECK_THROWS_WITH_AS(ValidateSearchPins(o), "--pp 4 is above --max-pp 2", Error);
}

TEST_CASE("vpp and micro-batch sizes below 1, and a pinned vpp > 1 with --pp 1") {
  SearchOptions o = Options();
  o.vpps.clear();
  o.training.run.vpp = 0;
  CHECK_THROWS_WITH_AS(ValidateSearchPins(o), "--vpp: must be in [1, 1024], got 0", Error);
  o.training.run.vpp = 2;
  CHECK_NOTHROW(ValidateSearchPins(o));  // pp searched: pp > 1 layouts can run it
  o.pins.pp = 1;
  CHECK_THROWS_WITH_AS(ValidateSearchPins(o),
                       "--vpp 2 needs pp > 1 (interleaved 1F1B runs vpp model chunks per pipeline rank), but --pp pins 1", Error);
  o.pins.pp = 0;
  o.max_pp = 1;
  CHECK_THROWS_WITH_AS(ValidateSearchPins(o),
                       "--vpp 2 needs pp > 1 (interleaved 1F1B runs vpp model chunks per pipeline rank), but --max-pp is 1", Error);
  o = Options();
  o.micro_batch_sizes = {1, 0};
  CHECK_THROWS_WITH_AS(ValidateSearchPins(o), "--micro-batch-size: must be >= 1, got 0", Error);
}

TEST_CASE("A pinned dispatcher: the opt-in dispatchers asked for are among the pins; not the all-to-all with --ep 1") {
  SearchOptions o = Options();
  o.dispatchers = {Dispatcher::kAllToAll};
  o.include_deepep = true;
  CHECK_THROWS_WITH_AS(ValidateSearchPins(o),
                       "--search-dispatchers deepep and --dispatcher all_to_all: the pin leaves deepep unsearched (give one of them)",
                       Error);
  o.dispatchers = {Dispatcher::kDeepEp};
  CHECK_NOTHROW(ValidateSearchPins(o));
  o.pins.ep = 1;
  CHECK_THROWS_WITH_AS(ValidateSearchPins(o), "--dispatcher deepep needs ep > 1 (with ep 1 no token leaves its rank), but --ep pins 1",
                       Error);
  o.dispatchers = {Dispatcher::kAllToAll};
  o.include_deepep = false;
  CHECK_NOTHROW(ValidateSearchPins(o));
}

TEST_CASE("--delay-wgrad-compute in a search: the candidates with the EP overlap take it; pinned off, the pins conflict") {
  SearchOptions o = Options();
  o.convention = Convention::kMegatron;
  o.training.run.delay_wgrad_compute = true;
  o.ep_overlaps = {false, true};  // searched
  CHECK_NOTHROW(ValidateSearchPins(o));
  LayoutCandidate c;
  c.settings.overlap_moe_ep_comm = true;
  CHECK(CandidateTraining(o.training, c).run.delay_wgrad_compute);
  c.settings.overlap_moe_ep_comm = false;  // runs without the delay, not invalid
  CHECK_FALSE(CandidateTraining(o.training, c).run.delay_wgrad_compute);
  o.ep_overlaps.clear();  // pinned off
  o.training.run.overlap_moe_ep_comm = false;
  CHECK_THROWS_WITH_AS(ValidateSearchPins(o), doctest::Contains("the pins conflict: --delay-wgrad-compute is the EP overlap's"), Error);
}

TEST_CASE("--overlap-param-gather-with-optimizer-step in a search: the candidates with vpp > 1 take it; none can, the pins conflict") {
  SearchOptions o = Options();
  o.convention = Convention::kMegatron;
  o.training.run.overlap_grad_reduce = o.training.run.overlap_param_gather = true;
  o.training.run.overlap_param_gather_with_optimizer_step = true;
  o.every_vpp = true;  // searched
  CHECK_NOTHROW(ValidateSearchPins(o));
  LayoutCandidate c;
  c.settings.vpp = 2;
  CHECK(CandidateTraining(o.training, c).run.overlap_param_gather_with_optimizer_step);
  c.settings.vpp = 1;  // runs without it (Megatron-Bridge's performance scripts' rule), not invalid
  CHECK_FALSE(CandidateTraining(o.training, c).run.overlap_param_gather_with_optimizer_step);
  o.every_vpp = false;  // vpp 1 pinned
  o.vpps.clear();
  CHECK_THROWS_WITH_AS(ValidateSearchPins(o), doctest::Contains("the pins conflict: --overlap-param-gather-with-optimizer-step"), Error);
  o.vpps = {1, 2};  // a list with an interleaved value
  CHECK_NOTHROW(ValidateSearchPins(o));
  o.pins.pp = 1;
  CHECK_THROWS_WITH_AS(ValidateSearchPins(o), doctest::Contains("no candidate of this search runs"), Error);
}

TEST_CASE("EP overlap pinned on against the other pins (Megatron's rules)") {
  SearchOptions o = Options();
  o.convention = Convention::kMegatron;
  o.training.run.overlap_moe_ep_comm = true;  // ep_overlaps empty: pinned
  CHECK_NOTHROW(ValidateSearchPins(o));
  o.pins.ep = 1;
  CHECK_THROWS_WITH_AS(ValidateSearchPins(o),
                       "the pins conflict: --overlap-moe-expert-parallel-comm: only supported with expert model parallelism (ep > 1), "
                       "got ep 1",
                       Error);
  o.pins.ep = 0;
  o.recomputes.clear();
  o.training.recompute = Recompute::kFull;
  CHECK_THROWS_WITH_AS(ValidateSearchPins(o), doctest::Contains("the pins conflict: --overlap-moe-expert-parallel-comm: disable full"),
                       Error);
  o.training.recompute = Recompute::kNone;
  o.dispatchers = {Dispatcher::kAllGather};
  CHECK_THROWS_WITH_AS(ValidateSearchPins(o), doctest::Contains("got --dispatcher allgather"), Error);
  o.dispatchers = {Dispatcher::kDeepEp};
  CHECK_NOTHROW(ValidateSearchPins(o));
  o.vpps.clear();  // vpp pinned to 1 with pp pinned to 2: Megatron needs a virtual pipeline
  o.pins.pp = 2;
  CHECK_THROWS_WITH_AS(ValidateSearchPins(o), doctest::Contains("(pp 2) a virtual pipeline must be specified (--vpp > 1)"), Error);
}

TEST_CASE("A pinned --ep must divide num_experts, refused before the search with both values") {
  SearchOptions o = Options();
  const ModelSpec m = testing::TinyMixtral();  // 8 experts
  o.world_size = 16;
  o.pins.ep = 16;
  CHECK_THROWS_WITH_AS(ValidateSearchPinsForModel(o, m),
                       "--ep 16: ep (16) must divide num_experts (8): each EP rank holds num_experts / ep whole experts", Error);
  o.pins.ep = 8;
  CHECK_NOTHROW(ValidateSearchPinsForModel(o, m));
  o.pins.ep = 0;  // searched
  CHECK_NOTHROW(ValidateSearchPinsForModel(o, m));
}

}  // namespace
}  // namespace dockyard
