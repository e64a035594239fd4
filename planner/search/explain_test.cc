// --explain queries checked against the search they explain (ValidateLayoutQuery): pins, searched
// values and the rules a query's own keys can break. No search runs here.
#include "planner/search/explain.h"

#include <stdexcept>

#include <doctest/doctest.h>

#include "planner/base/error.h"

namespace dockyard {
namespace {

SearchOptions Options() {
  SearchOptions o;
  o.world_size = 64;
  o.max_pp = 8;
  o.micro_batch_sizes = {1, 2, 4};
  o.recomputes = {Recompute::kNone, Recompute::kSelective, Recompute::kFull};
  o.vpps = {1, 2, 4};
  o.dp_shardings = {DpSharding::kZero1, DpSharding::kDdp};
  o.convention = Convention::kMegatron;
  o.ep_overlaps = {false, true};
  return o;
}

void Ok(const std::string& query, const SearchOptions& o) {
  CHECK_NOTHROW(ValidateLayoutQuery(ParseLayoutQuery(query), o));
}

void Refused(const std::string& query, const SearchOptions& o, const std::string& message) {
  CHECK_THROWS_WITH_AS(ValidateLayoutQuery(ParseLayoutQuery(query), o), message.c_str(), Error);
}

TEST_CASE("--explain: a key outside the pins names the pin") {
  SearchOptions o = Options();
  o.pins.tp = 2;
  Ok("tp=2,pp=8,vpp=4,ep=32", o);
  Refused("tp=4", o, "--explain \"tp=4\": tp=4 is outside the search: --tp pins it to 2");
  o.micro_batch_sizes.clear();  // pinned: the training config's micro_batch_size
  o.training.micro_batch_size = 2;
  Refused("mbs=1", o, "--explain \"mbs=1\": mbs=1 is outside the search: --micro-batch-size pins it to 2");
  o.recomputes.clear();
  o.training.recompute = Recompute::kFull;
  Refused("recompute=none", o, "--explain \"recompute=none\": recompute=none is outside the search: --recompute pins it to full");
  o.dispatchers = {Dispatcher::kDeepEp};
  Refused("dispatcher=all_to_all", o,
          "--explain \"dispatcher=all_to_all\": dispatcher=all_to_all is outside the search: --dispatcher pins it to deepep");
  o.ep_overlaps.clear();  // pinned off
  Refused("overlap=on", o,
          "--explain \"overlap=on\": overlap=on is outside the search: EP overlap is off (pinned by "
          "--overlap-moe-expert-parallel-comm)");
}

TEST_CASE("--explain: values the search does not try, and degrees that cannot factor the world") {
  const SearchOptions o = Options();
  Refused("mbs=3", o, "--explain \"mbs=3\": mbs=3 is not searched (searched: 1, 2, 4)");
  Refused("vpp=3,pp=2", o, "--explain \"vpp=3,pp=2\": vpp=3 is not searched (searched: 1, 2, 4)");
  Refused("dispatcher=deepep", o,
          "--explain \"dispatcher=deepep\": dispatcher=deepep is not searched (add --search-dispatchers deepep or pin --dispatcher "
          "deepep)");
  Refused("tp=3", o, "--explain \"tp=3\": tp=3 does not divide the world size 64 (every degree is a factor of it)");
  Refused("pp=16", o, "--explain \"pp=16\": pp=16 is above --max-pp 8");
  // 8 x 4 x 4 = 128 does not divide 64: the third key is the one named.
  Refused("tp=8,cp=4,pp=4", o,
          "--explain \"tp=8,cp=4,pp=4\": the degrees given multiply to 128 (by tp=8), which does not divide the world size 64 (world "
          "= pp x dp_replicate x dp_shard x cp x tp)");
  Ok("tp=8,cp=4,pp=2", o);  // 64
}

TEST_CASE("--explain: rules the query's own keys break (vpp needs pp; Megatron's EP overlap rules)") {
  const SearchOptions o = Options();
  Refused("pp=1,vpp=2", o,
          "--explain \"pp=1,vpp=2\": vpp=2 needs pp > 1 (interleaved 1F1B runs vpp model chunks per pipeline rank), got pp=1");
  Refused("overlap=on,ep=1", o,
          "--explain \"overlap=on,ep=1\": overlap=on breaks Megatron's rule: --overlap-moe-expert-parallel-comm: only supported with "
          "expert model parallelism (ep > 1), got ep 1");
  Refused("overlap=on,pp=2,vpp=1", o,
          "--explain \"overlap=on,pp=2,vpp=1\": overlap=on breaks Megatron's rule: --overlap-moe-expert-parallel-comm: with pp > 1 "
          "(pp 2) a virtual pipeline must be specified (--vpp > 1)");
  Refused("overlap=on,recompute=full", o,
          "--explain \"overlap=on,recompute=full\": overlap=on breaks Megatron's rule: --overlap-moe-expert-parallel-comm: disable "
          "full recomputation (--recompute full)");
  // Keys not given can still take passing values: pp=2 alone may run vpp 2 or 4.
  Ok("overlap=on,pp=2", o);
  Ok("overlap=on", o);
  SearchOptions torchtitan = Options();
  torchtitan.convention = Convention::kTorchtitan;
  torchtitan.ep_overlaps.clear();
  Refused("overlap=on", torchtitan,
          "--explain \"overlap=on\": overlap=on is outside the search: EP overlap is off (searched under --convention megatron only)");
}

}  // namespace
}  // namespace dockyard

namespace dockyard {

TEST_CASE("--explain: spaces around items, keys and values are ignored") {
  const LayoutQuery q = ParseLayoutQuery(" tp = 2 , ep=8,\tdispatcher = deepep , recompute= full ");
  CHECK(q.tp == 2);
  CHECK(q.ep == 8);
  CHECK(q.dispatcher == Dispatcher::kDeepEp);
  CHECK(q.recompute == std::string("full"));
  CHECK_FALSE(q.pp.has_value());
  // A blank item is still an empty item; a space inside a value is still refused.
  CHECK_THROWS_WITH_AS(ParseLayoutQuery("tp=2, ,ep=8"), doctest::Contains("an empty item"), Error);
  // An item with no key, and a number past the range, say so.
  CHECK_THROWS_WITH_AS(ParseLayoutQuery("=2"), doctest::Contains("\"=2\": an empty key"), Error);
  CHECK_THROWS_WITH_AS(ParseLayoutQuery("tp=99999999999999999999"), doctest::Contains("tp=99999999999999999999: out of range"), Error);
  CHECK_THROWS_AS(ParseLayoutQuery("tp=2 4"), Error);
}

TEST_CASE("--explain: keys in any case, a value that names its key, the flag's boolean spellings, ';' between items") {
  // Keys are matched case-insensitively: TP=2 is tp=2.
  CHECK(*ParseLayoutQuery("TP=2,Ep=8").tp == 2);
  CHECK(*ParseLayoutQuery("TP=2,Ep=8").ep == 8);
  // An unknown key whose value belongs to one key suggests that key: zero1 is a dp_sharding.
  CHECK_THROWS_WITH_AS(ParseLayoutQuery("dp=zero1"), doctest::Contains("did you mean 'dp_sharding'?"), Error);
  CHECK_THROWS_WITH_AS(ParseLayoutQuery("rc=selective"), doctest::Contains("did you mean 'recompute'?"), Error);
  // overlap: on/off, or what the front end's parser takes (the CLI passes CLI11's flag parser:
  // cli_test checks overlap=yes there); the parser's exception is the query's error.
  CHECK(*ParseLayoutQuery("overlap=on").overlap_moe_ep_comm);
  CHECK_FALSE(*ParseLayoutQuery("overlap=off").overlap_moe_ep_comm);
  CHECK_THROWS_WITH_AS(ParseLayoutQuery("overlap=maybe"), doctest::Contains("overlap=maybe: expected on or off"), Error);
  const QueryBoolParser yes_no = [](const std::string& v) {
    if (v != "yes" && v != "no") throw std::invalid_argument(v);
    return v == "yes";
  };
  CHECK(*ParseLayoutQuery("overlap=yes", yes_no).overlap_moe_ep_comm);
  CHECK_THROWS_WITH_AS(ParseLayoutQuery("overlap=on", yes_no), doctest::Contains("overlap=on: expected on or off (or true/false"), Error);
  // A ';' (or another separator) inside a value: the items are comma-separated.
  CHECK_THROWS_WITH_AS(ParseLayoutQuery("tp=2;pp=2"), doctest::Contains("items are separated by commas"), Error);
}

}  // namespace dockyard
