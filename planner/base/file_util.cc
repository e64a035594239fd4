// Atomic output files (see file_util.h).
#include "planner/base/file_util.h"

#include <cerrno>
#include <cstdlib>
#include <fcntl.h>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <string>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include "planner/base/error.h"

namespace dockyard {

namespace {

// Writes all of `content` to `fd`, retrying on EINTR; on failure closes `fd` and throws naming
// `path`.
void WriteAll(int fd, const std::string& content, const std::string& path) {
  size_t written = 0;
  while (written < content.size()) {
    ssize_t n = write(fd, content.data() + written, content.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int err = errno;
      close(fd);
      throw Error(fmt::format("{}: write failed: {}", path, std::strerror(err)));
    }
    written += static_cast<size_t>(n);
  }
}

// Writes straight into an existing non-regular file (a device such as /dev/null, a FIFO):
// renaming over it would replace the device node with a regular file.
void WriteThrough(const std::string& path, const std::string& content) {
  int fd = open(path.c_str(), O_WRONLY);
  if (fd < 0) throw Error(fmt::format("{}: cannot open for writing: {}", path, std::strerror(errno)));
  WriteAll(fd, content, path);
  if (close(fd) != 0) throw Error(fmt::format("{}: write failed: {}", path, std::strerror(errno)));
}

// The path a chain of symlinks ends at, also when the last target does not exist yet (a dangling
// link is written through: the writer creates its target). Each relative target is read from the
// link's own directory, as the kernel does; at most 40 hops (Linux's MAXSYMLINKS), after which the
// path is returned as it stands (a loop names no other file).
std::filesystem::path FollowSymlinks(std::filesystem::path path) {
  namespace fs = std::filesystem;
  for (int hop = 0; hop < 40; ++hop) {
    std::error_code ec;
    if (!fs::is_symlink(fs::symlink_status(path, ec)) || ec) return path;
    const fs::path target = fs::read_symlink(path, ec);
    if (ec) return path;
    path = target.is_absolute() ? target : path.parent_path() / target;
  }
  return path;
}

// Where a requested output really goes: symlinks followed; `direct` for devices and FIFOs.
struct Target {
  std::string path;
  bool direct = false;
};

Target Resolve(const std::string& requested) {
  if (requested.empty()) throw Error("output path is empty");
  Target t{requested, false};
  struct stat lst {};
  if (lstat(requested.c_str(), &lst) == 0 && S_ISLNK(lst.st_mode)) {
    if (char* resolved = realpath(requested.c_str(), nullptr)) {
      t.path = resolved;
      free(resolved);
    } else {
      t.path = FollowSymlinks(requested).string();  // a dangling link: write the file it names (SameOutputPath)
    }
  }
  struct stat st {};
  if (stat(t.path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) throw Error(fmt::format("{}: is a directory, cannot write the output file there", requested));
    t.direct = !S_ISREG(st.st_mode);
  }
  return t;
}

// The mkstemp template of the temporary file written beside `path` before the rename.
std::string TemporaryTemplate(const std::string& path) {
  return path + ".tmp.XXXXXX";
}

// Writes `content` to a new temporary file next to `path`; returns its name.
std::string WriteTemporary(const std::string& path, const std::string& content) {
  std::string tmpl = TemporaryTemplate(path);
  int fd = mkstemp(tmpl.data());
  if (fd < 0) throw Error(fmt::format("{}: cannot create output file: {}", path, std::strerror(errno)));
  try {
    WriteAll(fd, content, path);
  } catch (const Error&) {
    unlink(tmpl.c_str());
    throw;
  }
  if (fsync(fd) != 0 || close(fd) != 0) {
    int err = errno;
    unlink(tmpl.c_str());
    throw Error(fmt::format("{}: write failed: {}", path, std::strerror(err)));
  }
  chmod(tmpl.c_str(), 0644);
  return tmpl;
}

}  // namespace

void WriteFilesAtomically(const std::vector<std::pair<std::string, std::string>>& files) {
  std::vector<Target> targets;
  for (const auto& [path, content] : files) targets.push_back(Resolve(path));
  std::vector<std::string> temporaries(files.size());
  try {
    for (size_t i = 0; i < files.size(); ++i) {
      if (!targets[i].direct) temporaries[i] = WriteTemporary(targets[i].path, files[i].second);
    }
  } catch (...) {
    for (const auto& t : temporaries)
      if (!t.empty()) unlink(t.c_str());
    throw;
  }
  // Devices and pipes (written through, no temporary) first: when one fails, no regular file has
  // been moved into place yet, so nothing is left behind.
  try {
    for (size_t i = 0; i < files.size(); ++i) {
      if (targets[i].direct) WriteThrough(targets[i].path, files[i].second);
    }
  } catch (...) {
    for (const auto& t : temporaries)
      if (!t.empty()) unlink(t.c_str());
    throw;
  }
  for (size_t i = 0; i < files.size(); ++i) {
    if (targets[i].direct || rename(temporaries[i].c_str(), targets[i].path.c_str()) == 0) continue;
    const int err = errno;
    for (size_t j = i; j < files.size(); ++j)
      if (!temporaries[j].empty()) unlink(temporaries[j].c_str());
    throw Error(fmt::format("{}: cannot move output into place: {}", files[i].first, std::strerror(err)));
  }
}

void RejectOutputOverInputs(const std::string& output, const std::string& flag, const std::vector<std::string>& inputs) {
  if (output.empty() || output == "-") return;
  struct stat out {};
  if (::stat(output.c_str(), &out) != 0 || !S_ISREG(out.st_mode)) return;
  for (const std::string& in : inputs) {
    struct stat st {};
    if (in.empty() || ::stat(in.c_str(), &st) != 0) continue;
    if (st.st_dev == out.st_dev && st.st_ino == out.st_ino) {
      throw Error(fmt::format("{} '{}' is the input '{}': refusing to overwrite it", flag, output, in));
    }
  }
}

std::pair<std::string, std::string> SplitPath(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return {".", path};
  return {slash == 0 ? "/" : path.substr(0, slash), path.substr(slash + 1)};
}

bool SameOutputPath(const std::string& a, const std::string& b) {
  namespace fs = std::filesystem;
  if (a.empty() || b.empty()) return false;
  if (a == "-" || b == "-") return a == b;
  if (a == b) return true;
  std::error_code ec;
  // Both exist: one file (same device and inode) whatever the names -- hard links, symlinks, spellings.
  if (fs::equivalent(a, b, ec) && !ec) return true;
  // Otherwise (one of them not written yet) their absolute paths with every existing part resolved
  // ("./", "..", symlinked directories and a symlink to an existing file), after following a symlink
  // chain whose last target is not written yet.
  std::error_code ea, eb;
  const fs::path ca = fs::weakly_canonical(FollowSymlinks(fs::absolute(a, ea)), ea);
  const fs::path cb = fs::weakly_canonical(FollowSymlinks(fs::absolute(b, eb)), eb);
  return !ea && !eb && ca == cb;
}

void CheckOutputPath(const std::string& path, const std::string& flag) {
  if (path.empty() || path == "-") return;
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    throw Error(fmt::format("{} '{}' is a directory: name a file", flag, path));
  }
  const std::string dir = SplitPath(path).first;
  if (::stat(dir.c_str(), &st) != 0) {
    throw Error(fmt::format("{} '{}': its directory '{}' does not exist", flag, path, dir));
  }
  if (!S_ISDIR(st.st_mode)) throw Error(fmt::format("{} '{}': '{}' is not a directory", flag, path, dir));
  if (::access(dir.c_str(), W_OK) != 0) throw Error(fmt::format("{} '{}': directory '{}' is not writable", flag, path, dir));
  // An existing device or pipe is written in place (OpenTarget); otherwise the writer creates a
  // temporary file beside the path: try that now (root passes access() where a file system such
  // as /proc still refuses new files).
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) return;
  std::string probe = TemporaryTemplate(path);  // the file the writer will create
  const int fd = mkstemp(probe.data());
  if (fd < 0) throw Error(fmt::format("{} '{}': cannot create a file there: {}", flag, path, std::strerror(errno)));
  close(fd);
  unlink(probe.c_str());
}

void WriteFileAtomically(const std::string& requested, const std::string& content) {
  WriteFilesAtomically({{requested, content}});
}

}  // namespace dockyard
