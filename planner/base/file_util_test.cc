// All-or-nothing output files.
#include "planner/base/file_util.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <doctest/doctest.h>

#include "planner/base/error.h"

namespace {

bool Exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

std::string TmpPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir ? dir : "/tmp") + "/" + name;
}

}  // namespace

TEST_CASE("WriteFilesAtomically: a device that fails leaves no regular file behind") {
  const std::string html = TmpPath("file_util_test.html");
  unlink(html.c_str());
  // /dev/full accepts the open and fails every write (ENOSPC).
  CHECK_THROWS_AS(dockyard::WriteFilesAtomically({{html, "<html></html>"}, {"/dev/full", "{}"}}), dockyard::Error);
  CHECK_FALSE(Exists(html));
  // Both regular: both written.
  const std::string json = TmpPath("file_util_test.json");
  dockyard::WriteFilesAtomically({{html, "<html></html>"}, {json, "{}"}});
  CHECK(Exists(html));
  CHECK(Exists(json));
}

TEST_CASE("CheckOutputPath: refuses where no file can be created, naming the flag; leaves nothing behind") {
  // /proc takes no new files, even for root (whom access(W_OK) lets through).
  CHECK_THROWS_WITH_AS(dockyard::CheckOutputPath("/proc/dockyard-x.json", "--json"),
                       doctest::Contains("--json '/proc/dockyard-x.json': cannot create a file there"), dockyard::Error);
  CHECK_THROWS_WITH_AS(dockyard::CheckOutputPath(TmpPath("no-such-dir/x.json"), "--html"), doctest::Contains("--html '"), dockyard::Error);
  // A writable directory passes, and the probe file is gone.
  const std::string ok = TmpPath("check-output-ok.json");
  dockyard::CheckOutputPath(ok, "--json");
  CHECK_FALSE(Exists(ok));
  // A device is written in place: no probe needed.
  dockyard::CheckOutputPath("/dev/null", "--json");
}

TEST_CASE("SameOutputPath: one file under two names -- spellings, a symlink, a hard link, a symlinked directory") {
  const std::string dir = TmpPath("same_output_test");
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string a = dir + "/a.json";
  { std::ofstream(a) << "{}"; }
  std::filesystem::create_hard_link(a, dir + "/hard.json");
  std::filesystem::create_symlink(a, dir + "/sym.json");
  std::filesystem::create_directory_symlink(dir, dir + "/dirlink");
  CHECK(dockyard::SameOutputPath(a, dir + "/./a.json"));
  CHECK(dockyard::SameOutputPath(a, dir + "/hard.json"));  // a hard link: another name, one inode
  CHECK(dockyard::SameOutputPath(dir + "/sym.json", a));
  CHECK(dockyard::SameOutputPath(dir + "/new.json", dir + "/dirlink/new.json"));  // not written yet
  CHECK_FALSE(dockyard::SameOutputPath(a, dir + "/new.json"));
  CHECK_FALSE(dockyard::SameOutputPath(dir + "/x.json", dir + "/y.json"));
  CHECK(dockyard::SameOutputPath("-", "-"));
  CHECK_FALSE(dockyard::SameOutputPath("-", a));
  std::filesystem::remove_all(dir);
}

TEST_CASE("WriteFileAtomically through a dangling symlink writes its target and keeps the link") {
  const std::string dir = TmpPath("write_dangling_test");
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::filesystem::create_symlink("out.json", dir + "/link.html");  // out.json not written yet
  dockyard::WriteFileAtomically(dir + "/link.html", "{}\n");
  CHECK(std::filesystem::is_symlink(dir + "/link.html"));  // as SameOutputPath names it: the link is out.json
  std::ifstream in(dir + "/out.json");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(text == "{}\n");
  std::filesystem::remove_all(dir);
}

TEST_CASE("SameOutputPath: a dangling symlink (its target not written yet) names its target, also through a chain") {
  const std::string dir = TmpPath("same_output_dangling_test");
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir + "/sub");
  // link.html -> out.json (relative, resolved from the link's directory); out.json does not exist.
  std::filesystem::create_symlink("out.json", dir + "/link.html");
  CHECK(dockyard::SameOutputPath(dir + "/out.json", dir + "/link.html"));
  CHECK(dockyard::SameOutputPath(dir + "/link.html", dir + "/out.json"));
  // sub/chain -> ../link.html -> out.json: two hops, the first relative to sub/.
  std::filesystem::create_symlink("../link.html", dir + "/sub/chain");
  CHECK(dockyard::SameOutputPath(dir + "/sub/chain", dir + "/out.json"));
  CHECK_FALSE(dockyard::SameOutputPath(dir + "/sub/chain", dir + "/other.json"));
  // A loop (a -> b -> a) ends at the depth bound instead of spinning; it is not another file's name.
  std::filesystem::create_symlink("loop_b", dir + "/loop_a");
  std::filesystem::create_symlink("loop_a", dir + "/loop_b");
  CHECK_FALSE(dockyard::SameOutputPath(dir + "/loop_a", dir + "/out.json"));
  std::filesystem::remove_all(dir);
}
