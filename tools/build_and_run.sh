#!/usr/bin/env bash
# Builds one binary of this workspace and runs it: tools/build_and_run.sh dockyard-plan|dockyard-run ARGS...
# The binary is built in the default (fastbuild) configuration and run from that configuration's
# output tree (`bazel info bazel-bin`), not through the bazel-bin symlink, which points at whatever
# configuration the last command used (after `bazel run -c opt ...` it is the opt tree): every
# command in the README and docs works whatever ran before it.
# A first build takes minutes: Bazel's progress lines are shown on stderr meanwhile.
# Relative paths in the arguments are resolved from the directory you run it in.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
name="${1:?usage: tools/build_and_run.sh dockyard-plan|dockyard-run ARGS...}"
shift
case "$name" in
  dockyard-plan|dockyard-run) ;;
  *) echo "tools/build_and_run.sh: unknown binary '$name' (expected dockyard-plan or dockyard-run)" >&2; exit 2 ;;
esac
"$root/tools/ensure_deps.sh"
# Progress (not the INFO lines) on stderr, at most every 10 s when stderr is not a terminal.
(cd "$root" && bazel build --show_progress_rate_limit=10 --ui_event_filters=-info,-stdout "//cli:$name" >&2) || {
  echo "dockyard: build failed; run 'bazel build //cli:$name' in $root to see why" >&2; exit 1; }
bin="$(cd "$root" && bazel info bazel-bin 2>/dev/null)"
exec "$bin/cli/$name" "$@"
