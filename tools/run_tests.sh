#!/usr/bin/env bash
# Runs every test (bazel test //...) and ends with a plain line "N passed, N failed" counted
# from the doctest summaries of all test binaries; a test target that failed to build or died
# without a summary counts as one failed test.
# DOCKYARD_TEST_FLAGS (optional): more `bazel test` flags, e.g. "--config=asan" (CI runs the suite
# once, under AddressSanitizer + UBSan: .ci/run); the test logs are read from that configuration's
# output tree.
set -uo pipefail
cd "$(dirname "$0")/.."
tools/ensure_deps.sh || exit 1
read -r -a extra_flags <<< "${DOCKYARD_TEST_FLAGS:-}"
config_flags=()  # the flags that choose the output tree, for `bazel info`
for f in "${extra_flags[@]}"; do case "$f" in --config=*) config_flags+=("$f") ;; esac; done
marker="$(mktemp)"
trap 'rm -f "$marker"' EXIT
bazel test --nocache_test_results --test_output=errors "${extra_flags[@]}" //... 2>&1 | grep -v -E '^(INFO: From |  exec env|    [A-Z_]+=)' 
status=${PIPESTATUS[0]}

passed=0 failed=0 skipped=0
testlogs="$(bazel info "${config_flags[@]}" bazel-testlogs 2>/dev/null)"
# GPU and browser test targets (tags "gpu", "browser"): their skipped cases are the ones that found
# no GPU or no headless browser (tests/html_screenshot_test.cc). (Elsewhere doctest also counts
# cases a target filters out with --test-case as skipped: not reported.)
gpu_targets=" $(bazel query 'attr(tags, "\b(gpu|browser)\b", tests(//...))' 2>/dev/null | tr '\n' ' ') "
for target in $(bazel query 'tests(//...)' 2>/dev/null); do
  rel="${target#//}"; rel="${rel/://}"
  log="$testlogs/$rel/test.log"
  line=""
  [ -f "$log" ] && [ "$log" -nt "$marker" ] && line="$(grep -E '^\[doctest\] test cases:' "$log" | tail -1)"
  if [ -n "$line" ]; then
    p=$(echo "$line" | sed -E 's/.*\| *([0-9]+) passed.*/\1/')
    f=$(echo "$line" | sed -E 's/.*\| *([0-9]+) failed.*/\1/')
    k=$(echo "$line" | sed -E 's/.*\| *([0-9]+) skipped.*/\1/')
    case "$k" in *[!0-9]*|"") k=0 ;; esac
    case "$gpu_targets" in *" $target "*) ;; *) k=0 ;; esac
    passed=$((passed + p)); failed=$((failed + f)); skipped=$((skipped + k))
  else
    echo "no doctest summary for $target (did not build or crashed): counted as 1 failed" >&2
    failed=$((failed + 1))
  fi
done
if [ "$status" -ne 0 ] && [ "$failed" -eq 0 ]; then
  echo "bazel test exited $status: counted as 1 failed" >&2
  failed=1
fi
# Failures of stages run before this script (.ci/run: ASan run, fuzz run), one per stage.
case "${EXTRA_FAILED:-0}" in
  *[!0-9]*) echo "EXTRA_FAILED='${EXTRA_FAILED}' is not a count: counted as 1 failed" >&2; failed=$((failed + 1)) ;;
  *) failed=$((failed + 10#${EXTRA_FAILED:-0})) ;;
esac
# Skipped cases (GPU tests without a GPU, browser tests without a browser) are counted apart, never as passed.
echo "${skipped} skipped (GPU test cases without a GPU, browser test cases without a browser; counted neither passed nor failed)"
echo "${passed} passed, ${failed} failed"
[ "$failed" -eq 0 ]
