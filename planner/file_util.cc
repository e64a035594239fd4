// Atomic output files (see file_util.h).
#include "planner/file_util.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include "planner/error.h"

namespace dockyard {

void WriteFileAtomically(const std::string& path, const std::string& content) {
  struct stat st {};
  if (stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    throw Error(fmt::format("{}: is a directory, cannot write the output file there", path));
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
