// Tests for located JSON access: every error names the file, the JSON pointer, value and rule.
#include "planner/base/json_util.h"

#include <cstdio>
#include <fstream>
#include <doctest/doctest.h>

#include "planner/base/error.h"

using dockyard::Error;
using dockyard::Json;
using dockyard::JsonView;

TEST_CASE("ReadJsonFile reports a missing file by name") {
  CHECK_THROWS_WITH_AS(dockyard::ReadJsonFile("/nonexistent/cfg.json"),
                       doctest::Contains("/nonexistent/cfg.json: cannot open: no such file"), Error);
}

TEST_CASE("ReadJsonFile rejects a directory") {
  CHECK_THROWS_WITH_AS(dockyard::ReadJsonFile("/tmp"), doctest::Contains("/tmp: is a directory"), Error);
}

TEST_CASE("ParseJsonText rejects empty text, broken JSON and a non-object top level") {
  CHECK_THROWS_WITH_AS(dockyard::ParseJsonText("  \n", "a.json"), doctest::Contains("a.json: file is empty"), Error);
  // Truncated object: the parser fails at the end of input (byte 14).
  CHECK_THROWS_WITH_AS(dockyard::ParseJsonText("{\"hidden\": 12", "b.json"), doctest::Contains("b.json: not valid JSON at byte 14"), Error);
  CHECK_THROWS_WITH_AS(dockyard::ParseJsonText("[1, 2]", "c.json"), doctest::Contains("c.json: top level must be a JSON object, got array"),
                       Error);
}

TEST_CASE("ParseJsonText refuses a key given twice in one object, naming the key and the object's pointer") {
  // QA: {"network_gbps": 48, "network_gbps": 1} ran at 1 GB/s, the last value silently kept.
  CHECK_THROWS_WITH_AS(dockyard::ParseJsonText(R"({"network_gbps": 48, "network_gbps": 1})", "c.json"),
                       doctest::Contains("c.json: key \"network_gbps\" appears twice in the top-level object (JSON keeps only the last "
                                         "value): give each key once"),
                       Error);
  // Nested: the pointer of the object that holds it, through arrays (element 1 of /runs).
  CHECK_THROWS_WITH_AS(dockyard::ParseJsonText(R"({"runs": [{"id": "a"}, {"id": "b", "batch": {"gbs": 1, "gbs": 2}}]})", "r.json"),
                       doctest::Contains("r.json: key \"gbs\" appears twice in /runs/1/batch"), Error);
  // The same key in sibling objects, or a repeated value, is fine.
  CHECK(dockyard::ParseJsonText(R"({"a": {"k": 1}, "b": {"k": 1}, "c": [1, 1, {"k": [1, {"k": 2}]}]})", "ok.json")["c"][2]["k"][1]["k"] == 2);
}

TEST_CASE("A long key in a message is cut to its start and its length") {
  Json j = Json::object();
  j[std::string(100, 'k')] = 1;
  JsonView v(&j, "c.json", "");
  const std::string expected = "c.json: /" + std::string(60, 'k') + "... (100 characters): unknown key";
  CHECK_THROWS_WITH_AS(v.RejectUnknownKeys({"name"}), doctest::Contains(expected.c_str()), Error);
}

TEST_CASE("JsonView names file, pointer, value and rule for a wrong type") {
  Json j = Json::parse(R"({"outer": {"hidden_size": "4096"}})");
  JsonView root(&j, "cfg.json", "");
  JsonView outer = root.Object("outer");
  CHECK_THROWS_WITH_AS(outer.Int("hidden_size"), doctest::Contains("cfg.json: /outer/hidden_size: must be an integer, got string \"4096\""),
                       Error);
}

TEST_CASE("JsonView rejects fractional, non-finite-range and out-of-range integers") {
  Json j = Json::parse(R"({"a": 2.5, "b": 0, "c": 18446744073709551615, "d": 64.0})");
  JsonView v(&j, "cfg.json", "");
  CHECK_THROWS_WITH_AS(v.Int("a"), doctest::Contains("/a: must be an integer, got 2.5"), Error);
  CHECK_THROWS_WITH_AS(v.Int("b"), doctest::Contains("/b: must be >= 1, got 0"), Error);
  CHECK_THROWS_WITH_AS(v.Int("c"), doctest::Contains("does not fit in a signed 64-bit integer"), Error);
  CHECK(v.Int("d") == 64);  // an integral float is accepted
}

TEST_CASE("JsonView reports a missing key with its context") {
  Json j = Json::parse(R"({"x": null})");
  JsonView v(&j, "cfg.json", "");
  v.set_missing_context("(family mixtral)");
  // A required key set to null is named as null (not as missing); an optional one counts as absent.
  CHECK_THROWS_WITH_AS(v.Int("x"), doctest::Contains("cfg.json: /x: must have a value, got null (family mixtral)"), Error);
  CHECK_THROWS_WITH_AS(v.Int("y"), doctest::Contains("cfg.json: /y: required key is missing (family mixtral)"), Error);
  CHECK(v.IntOr("x", 7) == 7);  // null counts as absent
}

TEST_CASE("JSON pointer tokens are escaped per RFC 6901") {
  CHECK(dockyard::JsonPointerToken("a/b~c") == "a~1b~0c");
}

TEST_CASE("RejectUnknownKeys suggests the closest known key") {
  Json j = Json::parse(R"({"num_expert": 8})");
  JsonView v(&j, "spec.json", "/moe");
  CHECK_THROWS_WITH_AS(v.RejectUnknownKeys({"num_experts", "top_k"}),
                       doctest::Contains("spec.json: /moe/num_expert: unknown key; did you mean 'num_experts'?"), Error);
}

TEST_CASE("DidYouMean stays silent for unrelated words") {
  CHECK_FALSE(dockyard::DidYouMean("completely_different", {"ep", "tp"}).has_value());
  CHECK(dockyard::DidYouMean("etp ", {"ep", "etp"}).value() == "etp");
}

TEST_CASE("Suggestions prefer the candidates that start with the word typed") {
  // "h100" is 2 edits from "b200" (h->b, 1->2) and 4 from "h100-sxm": the prefix wins, all of them.
  const std::vector<std::string> presets = {"h100-sxm", "h200-sxm", "h100-pcie-400g", "h800-sxm", "b200", "gb200-nvl72"};
  CHECK(dockyard::Suggestions("h100", presets) == std::vector<std::string>{"h100-sxm", "h100-pcie-400g"});
  CHECK(dockyard::DidYouMeanText("h100", presets) == "; did you mean 'h100-sxm' or 'h100-pcie-400g'?");
  CHECK(dockyard::DidYouMeanText("h", presets) == "; did you mean 'h100-sxm', 'h200-sxm', 'h100-pcie-400g' or 'h800-sxm'?");
  // No prefix: the nearest by edit distance, as before ("b300" is one edit from "b200").
  CHECK(dockyard::DidYouMeanText("b300", presets) == "; did you mean 'b200'?");
  CHECK(dockyard::DidYouMeanText("tpu-v5", presets).empty());
}
