// Report provenance (see provenance.h).
#include "planner/report/provenance.h"

#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "planner/base/digest.h"
#include "planner/base/error.h"
#include "planner/report/report.h"

namespace dockyard {

Json Provenance(const std::vector<std::string>& argv, const std::vector<std::string>& input_paths,
                const std::vector<std::pair<std::string, std::string>>& embedded) {
  Json inputs = Json::array();
  for (const auto& path : input_paths) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw Error(fmt::format("{}: cannot read to record its digest", path));
    std::ostringstream buffer;
    buffer << in.rdbuf();
    const std::string data = buffer.str();
    inputs.push_back({{"path", path}, {"bytes", data.size()}, {"sha256", Sha256Hex(data)}});
  }
  for (const auto& [name, data] : embedded) {
    inputs.push_back({{"path", name}, {"bytes", data.size()}, {"sha256", Sha256Hex(data)}});
  }
  return Json{{"dockyard_version", kDockyardVersion}, {"argv", argv}, {"inputs", inputs}};
}

}  // namespace dockyard
