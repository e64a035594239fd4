#!/usr/bin/env bash
# Writes a C++ header to stdout that holds a text file as `inline constexpr const char* SYMBOL`
# (the one home of this rule: planner/frameworks/BUILD's genrules and tools/run_fuzz.sh call it).
#   planner/frameworks/embed_text.sh kTorchtitanFieldsText planner/frameworks/torchtitan-fields.txt > torchtitan_fields.h
set -euo pipefail
symbol="$1" src="$2"
echo "// Generated from $src by planner/frameworks/embed_text.sh."
echo '#pragma once'
echo 'namespace dockyard {'
echo "inline constexpr const char* $symbol = R\"dockyard("
cat "$src"
echo ')dockyard"; }'
