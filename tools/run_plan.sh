#!/usr/bin/env bash
# Builds and runs dockyard-plan (tools/build_and_run.sh). With no arguments it plans the embedded
# default: DeepSeek-V3's published config on 256 GPUs (32 nodes x 8), FSDP over 256, EP 64.
# Any arguments are passed through, e.g. tools/run_plan.sh --model testdata/hf/mixtral-8x7b.json --world-size 16 --ep 8
# Relative paths in the arguments are resolved from the directory you run it in.
exec "$(dirname "$0")/build_and_run.sh" dockyard-plan "$@"
