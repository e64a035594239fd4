// The git commit the running binary was built from, for `--version` and the reports' generator
// block (planner/report/provenance.h VersionText).
//
// The commit comes from Bazel's workspace status (tools/workspace_status.sh, run through
// --workspace_status_command in .bazelrc: `git rev-parse HEAD`, "-modified" when tracked files
// differ from it, "unknown" without git or .git). Only the front ends link the stamped definition
// (//planner/base:build_info_stamped, a one-line generated file), so a new commit re-links the
// binaries and nothing else; libraries and tests linked without it see "unknown".
#pragma once

namespace dockyard {

// The 40-hex-digit commit, with "-modified" when the tree had uncommitted changes, or "unknown".
// Never null.
const char* BuildGitCommit();

}  // namespace dockyard
