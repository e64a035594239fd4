// Report provenance: the input list with each input's SHA-256.
#include "planner/report/provenance.h"

#include <doctest/doctest.h>

#include "planner/base/error.h"

TEST_CASE("Provenance lists the version, the command line and every input's digest") {
  auto j = dockyard::Provenance({"dockyard-plan", "--ep", "8"}, {{"--model", "testdata/specs/tiny-mixtral.json"}}, {{"<embedded>", "abc"}});
  CHECK(j["argv"][1] == "--ep");
  CHECK(j["inputs"].size() == 2);
  CHECK(j["inputs"][0]["path"] == "testdata/specs/tiny-mixtral.json");
  CHECK(j["inputs"][0]["sha256"].get<std::string>().size() == 64);
  CHECK(j["inputs"][1]["sha256"] == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  // Issue 31: a missing input is said not to exist (it read "cannot read to record its digest").
  // The message names the flag that gave the path (issue 31 new-user check: it named the path only).
  CHECK_THROWS_WITH_AS(dockyard::Provenance({}, {{"--routing trace:", "/nonexistent.json"}}),
                       "--routing trace:/nonexistent.json: the file does not exist", dockyard::Error);
  CHECK_THROWS_WITH_AS(dockyard::Provenance({}, {{"--model", "testdata"}}), "--model testdata: is a directory, not a file", dockyard::Error);
  CHECK(j["git_commit"] == "unknown");  // a test binary does not link //planner/base:build_info_stamped
}
