#include "planner/base/digest.h"

#include <doctest/doctest.h>

TEST_CASE("Sha256Hex matches the FIPS 180-2 test vectors") {
  // FIPS 180-2 appendix B.1 ("abc") and the empty message.
  CHECK(dockyard::Sha256Hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(dockyard::Sha256Hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}
