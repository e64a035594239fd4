// Provenance of a report: what produced it, so a CI job can tell which inputs a report belongs
// to — the dockyard version, the command line, and the SHA-256 of every input file.
#pragma once

#include <string>
#include <vector>

#include "planner/base/file_util.h"
#include "planner/base/json_util.h"

namespace dockyard {

// {"dockyard_version", "git_commit", "argv": [...], "inputs": [{"path", "bytes", "sha256"}]}
// (git_commit: build_info.h BuildGitCommit, "unknown" in a binary built without git). An input
// that does not exist or cannot be read is an error naming its flag and path and saying which
// ("--routing trace:/nope.json: the file does not exist"). `embedded` lists (name, content) pairs
// of inputs compiled into the binary (the default model).
Json Provenance(const std::vector<std::string>& argv, const std::vector<InputFile>& inputs,
                const std::vector<std::pair<std::string, std::string>>& embedded = {});

// What `--version` prints for `program`: "dockyard-plan 0.1.0 (git commit 2cb30b2...)\n", the
// version (report.h kDockyardVersion) and the commit the binary was built from (build_info.h;
// "unknown" when it was built outside a git checkout).
std::string VersionText(const std::string& program);

}  // namespace dockyard
