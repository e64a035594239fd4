#!/usr/bin/env bash
# Builds and runs dockyard-plan. With no arguments it plans the embedded default:
# DeepSeek-V3's published config on 256 GPUs (32 nodes x 8), FSDP over 256, EP 64.
# Any arguments are passed through, e.g. tools/run_plan.sh --model testdata/hf/mixtral-8x7b.json --world-size 16 --ep 8
# Relative paths in the arguments are resolved from the directory you run it in.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
"$root/tools/ensure_deps.sh"
(cd "$root" && bazel build --noshow_progress --ui_event_filters=-info,-stdout,-stderr //cli:dockyard-plan >&2) || {
  echo "dockyard: build failed; run 'bazel build //cli:dockyard-plan' in $root to see why" >&2; exit 1; }
exec "$root/bazel-bin/cli/dockyard-plan" "$@"
