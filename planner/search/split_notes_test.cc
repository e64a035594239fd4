// The Megatron split notes of a search's rows.
#include "planner/search/split_notes.h"

#include <string>

#include <doctest/doctest.h>

#include "tests/test_models.h"

namespace dockyard {
namespace {

RankedLayout Row(int64_t pp, int64_t vpp) {
  RankedLayout r;
  r.layout.dims.world_size = 8;
  r.layout.dims.pp = pp;
  r.vpp = vpp;
  return r;
}

TEST_CASE("A Megatron search notes the rows whose even split Megatron refuses, grouped by pp and vpp") {
  ModelSpec model = testing::TinyMixtral();
  model.num_hidden_layers = 3;  // 3 layers: pp 2 splits them 2 + 1
  model.moe_layers = {true, true, true};
  SearchOptions o;
  o.convention = Convention::kMegatron;
  // Rows 1 and 3: pp 2 (3 % 2 = 1: the first stage takes one more); row 2: pp 1 (no pipeline).
  const std::vector<RankedLayout> rows = {Row(2, 1), Row(1, 1), Row(2, 1)};
  const std::string notes = SearchSplitNotes(model, o, rows, std::nullopt);
  CHECK(notes.rfind("Note       rows 1, 3 (pp 2, vpp 1): Megatron refuses this split without a split flag: num_hidden_layers (3) is not "
                    "divisible by pp (2)",
                    0) == 0);
  CHECK(notes.find("pass --decoder-first-pipeline-num-layers 2\n") != std::string::npos);
  CHECK(notes.find('\n') == notes.size() - 1);  // one line
  // The explained layout gets its own line.
  const std::string with_explain = SearchSplitNotes(model, o, {Row(1, 1)}, Row(2, 1));
  CHECK(with_explain.rfind("Note       explained layout (pp 2, vpp 1): Megatron refuses", 0) == 0);
  // ... or joins the row line of its pp and vpp.
  CHECK(SearchSplitNotes(model, o, rows, Row(2, 1)).rfind("Note       rows 1, 3, explained layout (pp 2, vpp 1): Megatron refuses", 0) ==
        0);
  CHECK(SearchSplitNotes(model, o, rows, Row(2, 1)).find("Note       explained") == std::string::npos);
  // torchtitan: no note (Megatron's rule is not the run's).
  o.convention = Convention::kTorchtitan;
  CHECK(SearchSplitNotes(model, o, rows, Row(2, 1)).empty());
  CHECK(SearchSplitNotes(model, o, rows, std::nullopt, rows).empty());
  // The Pareto front's rows (numbered from 1 in the order of that table) get notes too: its rows 1
  // and 2 here are pp 2 (3 layers over 2 stages) and pp 1 (no note).
  o.convention = Convention::kMegatron;
  const std::vector<RankedLayout> pareto = {Row(2, 1), Row(1, 1)};
  CHECK(SearchSplitNotes(model, o, {Row(1, 1)}, std::nullopt, pareto)
            .rfind("Note       Pareto front row 1 (pp 2, vpp 1): Megatron refuses this split without a split flag", 0) == 0);
  // ... joining the ranked rows' line of the same pp and vpp.
  const std::string joined = SearchSplitNotes(model, o, rows, Row(2, 1), pareto);
  CHECK(joined.rfind("Note       rows 1, 3, Pareto front row 1, explained layout (pp 2, vpp 1): Megatron refuses", 0) == 0);
  CHECK(joined.find('\n') == joined.size() - 1);  // still one line
}

}  // namespace
}  // namespace dockyard
