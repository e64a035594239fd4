#!/bin/bash
# The calibration loop on the CPU backend (docs/fidelity.md, "The loop on the CPU backend"):
# dockyard-run --backend cpu phase timings of Qwen3-30B-A3B's first MoE layer at 4 ranks (16, 64,
# 256 tokens per rank) -> dockyard-plan calibrate on testdata/fidelity/cpu-2core.json -> the
# fitted calibration predicts other CPU runs' phases (4 ranks x 128 tokens; 2 and 8 ranks).
# Usage: tools/cpu_calibration_loop.sh OUTDIR   (after bazel build -c opt //cli:dockyard-plan //cli:dockyard-run;
#        DOCKYARD_BIN=DIR takes the two binaries from DIR instead of bazel-out/k8-opt/bin/cli)
set -euo pipefail
out=${1:?usage: tools/cpu_calibration_loop.sh OUTDIR}
mkdir -p "$out"
bin=${DOCKYARD_BIN:-bazel-out/k8-opt/bin/cli}
model=testdata/hf/qwen3-30b-a3b.json
cluster=testdata/fidelity/cpu-2core.json
run() {  # name world tokens
  "$bin/dockyard-run" --model "$model" --world-size "$2" --ep "$2" --tokens-per-rank "$3" --json "$out/$1.json" > "$out/$1.log"
}
run fit-w4-t16 4 16; run fit-w4-t64 4 64; run fit-w4-t256 4 256
run test-w4-t128 4 128; run test-w2-t32 2 32; run test-w2-t128 2 128; run test-w8-t16 8 16; run test-w8-t32 8 32; run test-w8-t128 8 128
"$bin/dockyard-plan" calibrate --runs "$out/fit-w4-t16.json" --runs "$out/fit-w4-t64.json" --runs "$out/fit-w4-t256.json" \
    --cluster "$cluster" --name cpu-2core-fitted --out "$out/cpu-cal.json" > "$out/fit.txt"
tests=()
for t in test-w4-t128 test-w2-t32 test-w2-t128 test-w8-t16 test-w8-t32 test-w8-t128; do tests+=(--runs "$out/$t.json"); done
# The "before" column of these two fits: the other runs predicted by the fitted calibration, and by the priors.
# A refit that determines nothing new writes no file and exits 1 (docs/calibration.md); its table is still printed.
predict() {  # text-out, calibrate arguments...
  local text=$1 rc=0
  shift
  "$bin/dockyard-plan" calibrate "$@" > "$text" || rc=$?
  [ "$rc" -eq 0 ] || [ "$rc" -eq 1 ] || exit "$rc"
}
predict "$out/predict.txt" "${tests[@]}" --from "$out/cpu-cal.json" --cluster "$cluster" --out "$out/refit.json"
predict "$out/predict-prior.txt" "${tests[@]}" --cluster "$cluster" --out "$out/refit-prior.json"
echo "fit: $out/fit.txt; predictions with the fitted calibration: $out/predict.txt (column 'before'); with the priors: $out/predict-prior.txt"
