#!/usr/bin/env bash
# Builds and runs dockyard-run (tools/build_and_run.sh), passing any arguments through, e.g.
# tools/run_run.sh --model testdata/hf/qwen3-30b-a3b.json --world-size 8 --ep 8 --tokens-per-rank 32
# Relative paths in the arguments are resolved from the directory you run it in.
exec "$(dirname "$0")/build_and_run.sh" dockyard-run "$@"
