#!/usr/bin/env bash
# Bazel's --workspace_status_command (.bazelrc): the git commit this tree was built from, for
# `--version` and the JSON reports' generator block (//planner/base:build_info). Works offline;
# in a tree without .git (an exported tarball) or without git it prints "unknown". A tree with
# uncommitted changes to tracked files gets "-modified" after the commit.
# STABLE_ keys are in bazel-out/stable-status.txt: a change re-runs only the stamped genrule, then
# recompiles one small file and re-links the binaries and tests that contain it.
cd "$(dirname "$0")/.." || exit 0
commit="$(git rev-parse HEAD 2>/dev/null)" || commit=""
if [ -z "$commit" ]; then
  echo "STABLE_DOCKYARD_GIT_COMMIT unknown"
  exit 0
fi
if ! git diff --quiet HEAD -- 2>/dev/null; then commit="${commit}-modified"; fi
echo "STABLE_DOCKYARD_GIT_COMMIT ${commit}"
