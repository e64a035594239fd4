#!/usr/bin/env bash
# Writes planner/frameworks/megatron_arg_table.h to stdout from megatron-lm-args.txt (the one
# home of this rule: the genrule in planner/frameworks/BUILD and tools/run_fuzz.sh both call it).
#   planner/frameworks/megatron_arg_table.sh planner/frameworks/megatron-lm-args.txt > megatron_arg_table.h
set -euo pipefail
src="$1"
echo '// Generated from planner/frameworks/megatron-lm-args.txt: Megatron-LM arguments and arities.'
echo '#pragma once'
echo 'namespace dockyard {'
printf 'inline constexpr const char* kMegatronArgTableCommit = "%s";\n' \
  "$(sed -n 's/^# Megatron-LM command-line arguments at commit \([0-9a-f]*\).*/\1/p' "$src" | tr -d '\n')"
echo 'inline constexpr const char* kMegatronArgTableText = R"dockyard('
cat "$src"
echo ')dockyard"; }'
