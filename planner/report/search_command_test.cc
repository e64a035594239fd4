// search as one library call: the ranking, its documents and the empty search's reason, on
// TinyMixtral (8 experts, 2 layers) over 8 GPUs of an h100-sxm cluster.
#include "planner/report/search_command.h"

#include <string>

#include <doctest/doctest.h>

#include "planner/base/error.h"
#include "planner/base/json_util.h"
#include "planner/report/header.h"
#include "tests/test_models.h"

namespace {

dockyard::SearchOptions TinySearch() {
  dockyard::SearchOptions s;
  s.world_size = 8;
  s.top = 3;
  s.global_batch_size = 8;  // one sequence per GPU per step
  s.routing_layers = 2;
  return s;
}

}  // namespace

TEST_CASE("A search keeps --top rows, and its JSON, HTML and text open with the same header") {
  const dockyard::ModelSpec model = dockyard::testing::TinyMixtral();
  dockyard::SearchCommandRequest r;
  r.model_source = "tiny.json";
  r.provenance = {{"argv", {"dockyard-plan", "search"}}};
  r.json = true;
  r.html = true;
  const auto out = dockyard::RunSearchCommand(model, TinySearch(), r);
  REQUIRE_FALSE(out.empty);
  CHECK(out.result.top.size() == 3);  // more than 3 layouts of 8 GPUs rank; the table keeps --top
  CHECK(out.result.ranked > 3);
  CHECK(out.header["command"] == "search");
  CHECK(out.header["model"]["source"] == "tiny.json");
  const dockyard::Json j = dockyard::ParseJsonText(out.report_text, "report");
  CHECK(j["header"] == out.header);
  CHECK(j["top"].size() == 3);
  CHECK(out.html_text.find("<html") != std::string::npos);
  CHECK(out.text.rfind(dockyard::ReportHeaderToText(out.header), 0) == 0);
  CHECK_FALSE(out.explained.has_value());
  CHECK_FALSE(out.redundant.has_value());

  dockyard::SearchCommandRequest text_only;
  text_only.model_source = r.model_source;
  text_only.provenance = r.provenance;
  const auto quiet = dockyard::RunSearchCommand(model, TinySearch(), text_only);
  CHECK(quiet.report_text.empty());
  CHECK(quiet.html_text.empty());
  CHECK(quiet.header == out.header);  // the same search, the same header (timings live in the counts line)
  CHECK(quiet.text.rfind(dockyard::ReportHeaderToText(quiet.header), 0) == 0);
}

TEST_CASE("A Megatron search's split notes reach its JSON and HTML, as its text prints them") {
  dockyard::ModelSpec model = dockyard::testing::TinyMixtral();
  model.num_hidden_layers = 3;  // 3 layers: every pp 2 row splits them 2 + 1, which Megatron refuses without a flag
  model.moe_layers = {true, true, true};
  dockyard::SearchOptions s = TinySearch();
  s.convention = dockyard::Convention::kMegatron;
  s.top = 1000;
  s.pins.pp = 2;
  dockyard::SearchCommandRequest r;
  r.model_source = "tiny.json";
  r.provenance = {{"argv", {"dockyard-plan", "search"}}};
  r.json = r.html = true;
  const auto out = dockyard::RunSearchCommand(model, s, r);
  REQUIRE_FALSE(out.empty);
  REQUIRE(out.text.find("Note       rows 1") != std::string::npos);
  const dockyard::Json j = dockyard::ParseJsonText(out.report_text, "report");
  REQUIRE(j.contains("notes"));
  const std::string note = j["notes"][0].get<std::string>();
  CHECK(note.rfind("rows 1", 0) == 0);
  CHECK(note.find("Megatron refuses this split without a split flag: num_hidden_layers (3) is not divisible by pp (2)") != std::string::npos);
  CHECK(out.text.find("Note       " + note + "\n") != std::string::npos);  // the same line, labelled
  CHECK(out.html_text.find("<tr><th>note</th><td>rows 1") != std::string::npos);
}

TEST_CASE("A search no layout fits gives no documents and says why") {
  dockyard::SearchOptions s = TinySearch();
  // A budget of 2^-20 GiB = 1 KiB per GPU and no reserve: no layout fits.
  s.gpu_memory_gib = 1.0 / (1 << 20);
  s.training.memory_reserve_gib = 0.0;
  dockyard::SearchCommandRequest r;
  r.json = true;
  const auto out = dockyard::RunSearchCommand(dockyard::testing::TinyMixtral(), s, r);
  CHECK(out.empty);
  CHECK(out.report_text.empty());
  CHECK(out.empty_text.find("no valid layout fits the budget") != std::string::npos);
}

TEST_CASE("A search whose pins divide no world is refused before it runs") {
  dockyard::SearchOptions s = TinySearch();
  s.pins.tp = 3;  // 3 divides no world of 8 (search_pins.h)
  CHECK_THROWS_WITH_AS(dockyard::RunSearchCommand(dockyard::testing::TinyMixtral(), s, dockyard::SearchCommandRequest{}),
                       doctest::Contains("--tp 3 does not divide --world-size 8"), dockyard::Error);
}

TEST_CASE("The HTML page's rows: the best N and every later row on the Pareto front, in rank order") {
  // (peak GiB, tokens/s) best first: r0 (50, 100), r1 (60, 90), r2 (40, 80), r3 (70, 70), r4 (30, 60).
  // Front (no row faster at the same or lower peak): r0, r2, r4; r1 and r3 lose to r0.
  std::vector<dockyard::RankedLayout> ranked(5);
  const int64_t peaks[] = {50, 60, 40, 70, 30};
  const double tokens[] = {100, 90, 80, 70, 60};
  for (int i = 0; i < 5; ++i) {
    ranked[i].peak_bytes = peaks[i] << 30;
    ranked[i].tokens_per_s_per_gpu = tokens[i];
  }
  const std::vector<dockyard::RankedLayout> rows = dockyard::HtmlSearchRows(ranked, 2);
  REQUIRE(rows.size() == 4);  // r0, r1 (the best 2), then r2, r4 (on the front)
  CHECK(rows[0].tokens_per_s_per_gpu == 100);
  CHECK(rows[1].tokens_per_s_per_gpu == 90);
  CHECK(rows[2].tokens_per_s_per_gpu == 80);
  CHECK(rows[3].tokens_per_s_per_gpu == 60);
  CHECK(dockyard::HtmlSearchRows(ranked, 10).size() == 5);  // fewer ranked than N: all of them
}
