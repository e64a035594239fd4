// Report provenance (see provenance.h).
#include "planner/report/provenance.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <sys/stat.h>

#include <fmt/format.h>

#include "planner/base/build_info.h"
#include "planner/base/digest.h"
#include "planner/base/error.h"
#include "planner/report/report.h"

namespace dockyard {

Json Provenance(const std::vector<std::string>& argv, const std::vector<InputFile>& input_files,
                const std::vector<std::pair<std::string, std::string>>& embedded) {
  Json inputs = Json::array();
  for (const auto& [flag, path] : input_files) {
    // "--model m.json", "--routing trace:t.json": as it was typed.
    const std::string named = flag.empty() ? path : flag + (flag.back() == ':' ? "" : " ") + path;
    struct stat st {};
    if (stat(path.c_str(), &st) != 0) {
      const int err = errno;
      throw Error(err == ENOENT || err == ENOTDIR ? fmt::format("{}: the file does not exist", named)
                                                 : fmt::format("{}: cannot open: {}", named, std::strerror(err)));
    }
    if (S_ISDIR(st.st_mode)) throw Error(fmt::format("{}: is a directory, not a file", named));
    std::ifstream in(path, std::ios::binary);
    if (!in) throw Error(fmt::format("{}: cannot open for reading (to record its digest in the report)", named));
    std::ostringstream buffer;
    buffer << in.rdbuf();
    const std::string data = buffer.str();
    inputs.push_back({{"path", path}, {"bytes", data.size()}, {"sha256", Sha256Hex(data)}});
  }
  for (const auto& [name, data] : embedded) {
    inputs.push_back({{"path", name}, {"bytes", data.size()}, {"sha256", Sha256Hex(data)}});
  }
  return Json{{"dockyard_version", kDockyardVersion}, {"git_commit", BuildGitCommit()}, {"argv", argv}, {"inputs", inputs}};
}

std::string VersionText(const std::string& program) {
  return fmt::format("{} {} (git commit {})\n", program, kDockyardVersion, BuildGitCommit());
}

}  // namespace dockyard
