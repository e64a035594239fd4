// Replays a fuzz target's seed corpus (and any extra directories) through its
// LLVMFuzzerTestOneInput, built with the ordinary toolchain: every input the fuzzers were
// seeded with, and every reproducer added to a corpus after a fix, stays checked by
// `bazel test //...` (and by `--config=asan`). DOCKYARD_FUZZ_CORPUS is a ':'-separated list
// of directories, set by fuzz/BUILD.
#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <doctest/doctest.h>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

std::vector<std::string> Files(const std::string& dir) {
  std::vector<std::string> out;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      const std::string path = dir + "/" + e->d_name;
      struct stat st {};
      if (stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode)) out.push_back(path);
    }
    closedir(d);
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

TEST_CASE("the fuzz target accepts or cleanly rejects every input of its corpus") {
  std::stringstream dirs(DOCKYARD_FUZZ_CORPUS);
  size_t replayed = 0;
  for (std::string dir; std::getline(dirs, dir, ':');) {
    const std::vector<std::string> files = Files(dir);
    CHECK_MESSAGE(!files.empty(), "no inputs in " << dir);
    for (const std::string& path : files) {
      std::ifstream in(path, std::ios::binary);
      const std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      INFO("input " << path);
      CHECK(LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(data.data()), data.size()) == 0);
      ++replayed;
    }
  }
  MESSAGE("replayed " << replayed << " inputs from " << DOCKYARD_FUZZ_CORPUS);
}
