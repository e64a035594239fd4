// Atomic output files (see file_util.h).
#include "planner/file_util.h"

#include <cerrno>
#include <cstdlib>
#include <fcntl.h>
#include <cstdio>
#include <cstring>
#include <string>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include "planner/error.h"

namespace dockyard {

namespace {

// Writes straight into an existing non-regular file (a device such as /dev/null, a FIFO):
// renaming over it would replace the device node with a regular file.
void WriteThrough(const std::string& path, const std::string& content) {
  int fd = open(path.c_str(), O_WRONLY);
  if (fd < 0) throw Error(fmt::format("{}: cannot open for writing: {}", path, std::strerror(errno)));
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
  if (close(fd) != 0) throw Error(fmt::format("{}: write failed: {}", path, std::strerror(errno)));
}

}  // namespace

void WriteFileAtomically(const std::string& requested, const std::string& content) {
  if (requested.empty()) throw Error("output path is empty");
  // A symlink is followed: the file it points to is replaced, the link itself is kept.
  std::string path = requested;
  struct stat lst {};
  if (lstat(requested.c_str(), &lst) == 0 && S_ISLNK(lst.st_mode)) {
    char* resolved = realpath(requested.c_str(), nullptr);
    if (resolved) {
      path = resolved;
      free(resolved);
    }
  }
  struct stat st {};
  if (stat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) throw Error(fmt::format("{}: is a directory, cannot write the output file there", requested));
    if (!S_ISREG(st.st_mode)) return WriteThrough(path, content);
  }
  std::string tmpl = path + ".tmp.XXXXXX";
  int fd = mkstemp(tmpl.data());
  if (fd < 0) throw Error(fmt::format("{}: cannot create output file: {}", path, std::strerror(errno)));
  size_t written = 0;
  while (written < content.size()) {
    ssize_t n = write(fd, content.data() + written, content.size() - written);
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      close(fd);
      unlink(tmpl.c_str());
      throw Error(fmt::format("{}: write failed: {}", path, std::strerror(err)));
    }
    written += static_cast<size_t>(n);
  }
  if (fsync(fd) != 0 || close(fd) != 0) {
    int err = errno;
    unlink(tmpl.c_str());
    throw Error(fmt::format("{}: write failed: {}", path, std::strerror(err)));
  }
  chmod(tmpl.c_str(), 0644);
  if (rename(tmpl.c_str(), path.c_str()) != 0) {
    int err = errno;
    unlink(tmpl.c_str());
    throw Error(fmt::format("{}: cannot move output into place: {}", path, std::strerror(err)));
  }
}

}  // namespace dockyard
