// Provenance of a report: what produced it, so a CI job can tell which inputs a report belongs
// to — the dockyard version, the command line, and the SHA-256 of every input file.
#pragma once

#include <string>
#include <vector>

#include "planner/base/json_util.h"

namespace dockyard {

// {"dockyard_version", "argv": [...], "inputs": [{"path", "bytes", "sha256"}]}. An input that
// cannot be read is an error naming it. `embedded` lists (name, content) pairs of inputs compiled
// into the binary (the default model).
Json Provenance(const std::vector<std::string>& argv, const std::vector<std::string>& input_paths,
                const std::vector<std::pair<std::string, std::string>>& embedded = {});

}  // namespace dockyard
