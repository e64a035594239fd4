#!/usr/bin/env bash
# Builds the libFuzzer targets in fuzz/ with clang (-fsanitize=fuzzer,address,undefined; not
# through Bazel) and runs each one for a bounded time.
#
#   tools/run_fuzz.sh [SECONDS] [TARGET...]    # default: 60 s per target, every target
#   targets: hf_config model_spec training plan cli megatron_args torchtitan_config megatron_bridge
#
# Seeds come from testdata/fuzz/<target>/ (read-only); new inputs go to a working corpus under
# $DOCKYARD_FUZZ_DIR (default ${TMPDIR:-/tmp}/dockyard-fuzz), which is kept between runs, as are
# the object files. Prints per target: executions, corpus size and every crash, leak, sanitizer
# report, timeout or out-of-memory (with its reproducer); exits 1 if any target found one.
# Installs clang and its sanitizer runtimes (clang, libclang-rt-14-dev) when run as root.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"

SECONDS_PER_TARGET="${1:-60}"
shift || true
ALL_TARGETS=(hf_config model_spec training plan cli megatron_args torchtitan_config megatron_bridge)
TARGETS=("$@")
[ ${#TARGETS[@]} -eq 0 ] && TARGETS=("${ALL_TARGETS[@]}")
case "$SECONDS_PER_TARGET" in
  ''|*[!0-9]*) echo "usage: tools/run_fuzz.sh [SECONDS] [TARGET...]" >&2; exit 2 ;;
esac

# --- toolchain ------------------------------------------------------------------------------
CXX="${FUZZ_CXX:-}"
if [ -z "$CXX" ]; then
  for c in clang++ clang++-14; do command -v "$c" >/dev/null 2>&1 && CXX="$c" && break; done
fi
have_fuzzer_rt() {
  [ -n "$CXX" ] && echo 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }' |
    "$CXX" -x c++ - -fsanitize=fuzzer,address,undefined -o /dev/null >/dev/null 2>&1
}
if ! have_fuzzer_rt; then
  PACKAGES=(clang libclang-rt-14-dev)
  if [ "$(id -u)" -eq 0 ]; then
    SUDO=""
  elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    SUDO="sudo"
  else
    echo "run_fuzz: clang with libFuzzer is missing. Run:" >&2
    echo "  sudo apt-get update && sudo apt-get install -y ${PACKAGES[*]}" >&2
    exit 1
  fi
  echo "run_fuzz: installing ${PACKAGES[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq >&2 && $SUDO apt-get install -y -qq "${PACKAGES[@]}" >&2 || exit 1
  CXX=clang++
  have_fuzzer_rt || { echo "run_fuzz: $CXX cannot link -fsanitize=fuzzer" >&2; exit 1; }
fi

# --- build ----------------------------------------------------------------------------------
WORK="${DOCKYARD_FUZZ_DIR:-${TMPDIR:-/tmp}/dockyard-fuzz}"
OBJ="$WORK/obj" GEN="$WORK/gen" BIN="$WORK/bin"
mkdir -p "$OBJ" "$GEN/planner/layout" "$GEN/planner/frameworks" "$BIN" "$WORK/corpus" "$WORK/artifacts" "$WORK/logs"
SAN="-fsanitize=address,undefined -fno-sanitize-recover=undefined"
CXXFLAGS=(-std=c++17 -g1 -O1 -fno-omit-frame-pointer -I"$ROOT" -I"$GEN" -Wno-unused-command-line-argument)

# planner/layout/default_model.h, as planner/layout/BUILD's genrule makes it.
(echo '// Generated from testdata/hf/deepseek-v3.json: the embedded default model.'
 echo '#pragma once'
 echo 'namespace dockyard { inline constexpr const char* kDefaultModelJson = R"dockyard('
 cat testdata/hf/deepseek-v3.json
 echo ')dockyard"; }') > "$GEN/planner/layout/default_model.h.new"
cmp -s "$GEN/planner/layout/default_model.h.new" "$GEN/planner/layout/default_model.h" 2>/dev/null || mv "$GEN/planner/layout/default_model.h.new" "$GEN/planner/layout/default_model.h"
rm -f "$GEN/planner/layout/default_model.h.new"

# The frameworks' key-list headers, as planner/frameworks/BUILD's embed_text rules make them.
for spec in megatron-lm-args.txt:kMegatronArgTableText:megatron_arg_table.h \
            torchtitan-fields.txt:kTorchtitanFieldsText:torchtitan_fields.h \
            megatron-bridge-fields.txt:kMegatronBridgeFieldsText:megatron_bridge_fields.h; do
  IFS=: read -r src symbol out <<< "$spec"
  bash planner/frameworks/embed_text.sh "$symbol" "planner/frameworks/$src" > "$GEN/planner/frameworks/$out.new"
  cmp -s "$GEN/planner/frameworks/$out.new" "$GEN/planner/frameworks/$out" 2>/dev/null || mv "$GEN/planner/frameworks/$out.new" "$GEN/planner/frameworks/$out"
  rm -f "$GEN/planner/frameworks/$out.new"
done

# Library sources: every planner/*/*.cc but tests and benchmarks, and dockyard-plan's CLI sources
# (every cli/*.cc but the mains and dockyard-run's, which needs the runtime).
SOURCES=()
for f in planner/*/*.cc cli/*.cc; do
  case "$f" in *_test.cc|*/bench_*.cc|cli/dockyard_*.cc|cli/run_cli.cc) continue ;; esac
  SOURCES+=("$f")
done

# Compiles one source with coverage and sanitizers. A source that this clang rejects but g++
# accepts (clang 14 is stricter about C++17, e.g. lambdas capturing structured bindings) is
# compiled with g++ without instrumentation, with a warning, so the other targets still run.
compile_one() {
  local src="$1" obj="$2" log="$WORK/logs/$(basename "$2").log"
  # shellcheck disable=SC2086
  "$CXX" "${CXXFLAGS[@]}" $SAN -fsanitize=fuzzer-no-link -c "$src" -o "$obj" 2> "$log" && return 0
  if g++ -std=c++17 -g1 -O1 -I"$ROOT" -I"$GEN" -c "$src" -o "$obj" 2>> "$log"; then
    echo "run_fuzz: WARNING: $CXX cannot compile $src ($(grep -m1 'error:' "$log" | sed 's/^[^ ]* //')); built it with g++ WITHOUT coverage or sanitizers" >&2
    return 0
  fi
  return 1
}

# An object is rebuilt when its source or any header of the project is newer.
newest_header="$(ls -t planner/*/*.h cli/*.h fuzz/*.h "$GEN/planner/layout/default_model.h" "$GEN/planner/frameworks/megatron_arg_table.h" "$GEN/planner/frameworks/torchtitan_fields.h" "$GEN/planner/frameworks/megatron_bridge_fields.h" 2>/dev/null | head -1)"
build_failed=0
pids=()
objects=()
jobs_max="$(nproc 2>/dev/null || echo 2)"
for src in "${SOURCES[@]}"; do
  obj="$OBJ/$(echo "$src" | tr '/' '_').o"
  objects+=("$obj")
  if [ -f "$obj" ] && [ "$obj" -nt "$src" ] && [ "$obj" -nt "$newest_header" ]; then continue; fi
  compile_one "$src" "$obj" &
  pids+=($!)
  if [ ${#pids[@]} -ge "$jobs_max" ]; then
    wait "${pids[0]}" || build_failed=1
    pids=("${pids[@]:1}")
  fi
done
for p in "${pids[@]}"; do wait "$p" || build_failed=1; done
if [ "$build_failed" -ne 0 ]; then
  echo "run_fuzz: compiling the planner sources failed:" >&2
  for l in "$WORK"/logs/*.o.log; do [ -s "$l" ] && grep -m5 -E 'error' "$l" >&2; done
  rm -f "${objects[@]}"
  exit 1
fi
for t in "${TARGETS[@]}"; do
  [ -f "fuzz/${t}_fuzzer.cc" ] || { echo "run_fuzz: no target '$t' (have: ${ALL_TARGETS[*]})" >&2; exit 2; }
  # shellcheck disable=SC2086
  if ! "$CXX" "${CXXFLAGS[@]}" $SAN -fsanitize=fuzzer "fuzz/${t}_fuzzer.cc" "${objects[@]}" -lfmt -lcrypto -lyaml-cpp -o "$BIN/${t}_fuzzer" \
      2> "$WORK/logs/${t}_link.log"; then
    echo "run_fuzz: building ${t}_fuzzer failed:" >&2
    grep -m10 -E 'error' "$WORK/logs/${t}_link.log" >&2
    exit 1
  fi
done

# --- run ------------------------------------------------------------------------------------
max_len() {
  case "$1" in
    hf_config|model_spec) echo 16384 ;;
    plan) echo 8192 ;;
    training) echo 2048 ;;
    cli) echo 1024 ;;
    megatron_args|torchtitan_config|megatron_bridge) echo 4096 ;;
    *) echo 4096 ;;
  esac
}
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:detect_stack_use_after_return=1:allocator_may_return_null=0}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
failed=0
summary=()
for t in "${TARGETS[@]}"; do
  corpus="$WORK/corpus/$t"
  seeds="testdata/fuzz/$t"
  artifacts="$WORK/artifacts/$t"
  mkdir -p "$corpus" "$artifacts"
  log="$WORK/logs/${t}_run.log"
  before="$(ls "$artifacts" | wc -l)"
  dict=()
  [ -f fuzz/dockyard.dict ] && dict=(-dict=fuzz/dockyard.dict)
  more=()
  case "$t" in megatron_args|torchtitan_config) more=(testdata/frameworks) ;; esac  # as fuzz/BUILD's _EXTRA_CORPUS
  "$BIN/${t}_fuzzer" -max_total_time="$SECONDS_PER_TARGET" -timeout=10 -rss_limit_mb=2048 -max_len="$(max_len "$t")" \
    -print_final_stats=1 -artifact_prefix="$artifacts/" "${dict[@]}" "$corpus" "$seeds" "${more[@]}" > "$log" 2>&1
  rc=$?
  execs="$(grep -E '^stat::number_of_executed_units:' "$log" | tail -1 | awk '{print $2}')"
  units="$(ls "$corpus" | wc -l)"
  after="$(ls "$artifacts" | wc -l)"
  line="$t: ${execs:-?} executions in ${SECONDS_PER_TARGET} s, corpus ${units} units (+ $(ls "$seeds" 2>/dev/null | wc -l) seeds)"
  if [ "$rc" -ne 0 ] || [ "$after" -gt "$before" ] || grep -qE '^(==[0-9]+==ERROR|SUMMARY: (Address|Leak|Undefined)|.*runtime error:)' "$log"; then
    failed=1
    line="$line: FAILED (exit $rc)"
    echo "$line"
    newest="$(ls -t "$artifacts" | head -1)"
    [ -n "$newest" ] && echo "  reproducer: $artifacts/$newest   (rerun: $BIN/${t}_fuzzer $artifacts/$newest)"
    grep -m1 -E 'ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error:|ALARM|out-of-memory|fuzz invariant broken|deadly signal' "$log" | sed 's/^/  /'
    grep -E '^ +#[0-9]+ ' "$log" | grep -v -E 'fuzzer::|__sanitizer|libc\.so|pthread_kill|raise|abort|dockyard_fuzz::Fail' |
      head -12 | sed 's/^/  /'
    echo "  full log: $log"
  else
    line="$line: ok"
    echo "$line"
  fi
  summary+=("$line")
done
echo "run_fuzz: ${#TARGETS[@]} targets, $([ $failed -eq 0 ] && echo 'no faults' || echo 'FAULTS FOUND')"
exit "$failed"
