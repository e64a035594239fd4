#!/usr/bin/env bash
# The GPU checks of the CUDA backend, for the device machine (an H200): runs from the repository root
# on binaries built here by tools/gpu_bundle.sh (carried as out/gpu), in under 8 minutes, and
# writes every log and one JSON summary to ${OUT:-out/gpu-result}:
#   1. moe_kernels_gpu_test     every kernel against its CPU reference, cuBLAS grouped GEMM
#   2. cuda_backend_gpu_test    the MoE layer on the GPU against the CPU reference, replay
#   3. bench_gpu                grouped GEMM TFLOP/s vs dense and peak, permute GB/s, all-to-all
#   4. dockyard-run --backend cuda on Qwen3-30B-A3B (one GPU: ep 1), fp32 and bf16, with and
#      without the shared-expert overlap on DeepSeek-V2-Lite (which has shared experts)
#   5. replay of one rank of DeepSeek-V3 on 256 GPUs (ep 64) and on 2048 GPUs (ep 64), bf16
# Usage (device tool): tools/gpu_check.sh   (carry out/gpu)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-out/gpu-result}"
mkdir -p "$OUT"
B=out/gpu/bin
if [ ! -x "$B/dockyard-run" ]; then echo "gpu_check: $B/dockyard-run missing: run tools/gpu_bundle.sh here and carry out/gpu" >&2; exit 1; fi
# cuBLAS and NCCL: the CUDA toolkit's, else PyTorch's nvidia-* wheels (searched once each).
libs="$PWD/out/gpu/lib"
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do [ -d "$d" ] && libs="$libs:$d"; done
for name in libnccl.so.2 libcublas.so.13 libcublasLt.so.13; do
  found=""
  IFS=: read -ra dirs <<< "$libs"
  for d in "${dirs[@]}"; do [ -e "$d/$name" ] && found="$d" && break; done
  if [ -z "$found" ]; then
    f="$(find /opt /usr/local /usr/lib -name "$name" 2>/dev/null | head -1)"
    if [ -n "$f" ]; then libs="$libs:$(dirname "$f")"; else echo "gpu_check: $name not found" >&2; fi
  fi
done
export LD_LIBRARY_PATH="$libs:${LD_LIBRARY_PATH:-}"
echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH" | tee "$OUT/env.log"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv 2>&1 | tee -a "$OUT/env.log"
ldd "$B/dockyard-run" >> "$OUT/env.log" 2>&1

summary="$OUT/steps.tsv"
: > "$summary"
start=$(date +%s)
DEADLINE="${DEADLINE:-450}"  # seconds: steps that would start later are skipped (8-minute budget)
step() {  # step NAME TIMEOUT_S COMMAND...
  local name="$1" limit="$2"; shift 2
  if [ $(( $(date +%s) - start )) -gt "$DEADLINE" ]; then
    printf '%s\t%s\t%s\n' "$name" "skipped" "0" >> "$summary"
    echo "skipped: past the ${DEADLINE}s deadline" > "$OUT/$name.log"
    echo "== $name: skipped (past the ${DEADLINE}s deadline)"
    return
  fi
  local t0=$(date +%s.%N)
  timeout "$limit" "$@" > "$OUT/$name.log" 2>&1
  local rc=$?
  local t1=$(date +%s.%N)
  printf '%s\t%s\t%s\n' "$name" "$rc" "$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')" >> "$summary"  # awk: the GPU image has no bc
  echo "== $name: rc $rc ($(tail -1 "$OUT/$name.log"))"
}

step kernels_test 90 "$B/moe_kernels_gpu_test"
step backend_test 150 "$B/cuda_backend_gpu_test"
step bench_gpu 120 "$B/bench_gpu" --json "$OUT/bench_gpu.json"
step run_qwen3_fp32 45 "$B/dockyard-run" --backend cuda --model testdata/hf/qwen3-30b-a3b.json --world-size 1 \
  --tokens-per-rank 512 --iters 5 --json "$OUT/run_qwen3_fp32.json"
step run_qwen3_bf16 45 "$B/dockyard-run" --backend cuda --gemm-precision bf16 --model testdata/hf/qwen3-30b-a3b.json \
  --world-size 1 --tokens-per-rank 512 --iters 5 --json "$OUT/run_qwen3_bf16.json"
step run_v2lite_no_overlap 45 "$B/dockyard-run" --backend cuda --model testdata/hf/deepseek-v2-lite.json --world-size 1 \
  --tokens-per-rank 1024 --iters 5 --json "$OUT/run_v2lite_no_overlap.json"
step run_v2lite_overlap 45 "$B/dockyard-run" --backend cuda --model testdata/hf/deepseek-v2-lite.json --world-size 1 \
  --tokens-per-rank 1024 --iters 5 --overlap-shared-experts --json "$OUT/run_v2lite_overlap.json"
step replay_dsv3_256 60 "$B/dockyard-run" --backend cuda --gemm-precision bf16 --model testdata/hf/deepseek-v3.json \
  --world-size 256 --ep 64 --replay-rank 0 --cluster h200-sxm --iters 5 --json "$OUT/replay_dsv3_256.json"
step replay_dsv3_2048 60 "$B/dockyard-run" --backend cuda --gemm-precision bf16 --model testdata/hf/deepseek-v3.json \
  --world-size 2048 --ep 64 --replay-rank 1000 --cluster h200-sxm --routing zipf:1.2 --iters 5 \
  --json "$OUT/replay_dsv3_2048.json"

python3 - "$OUT" <<'PY'
import json, os, re, sys
out = sys.argv[1]
res = {"steps": []}
for line in open(os.path.join(out, "steps.tsv")):
    name, rc, secs = line.rstrip("\n").split("\t")
    log = open(os.path.join(out, name + ".log"), errors="replace").read()
    lines = [l for l in log.splitlines() if l.strip()]
    step = {"name": name, "rc": rc if rc == "skipped" else int(rc), "seconds": float(secs),
            "last_line": lines[-1] if lines else ""}
    errors = [l for l in lines if "error" in l.lower()]
    if errors:
        step["first_error"] = errors[0]
    m = re.findall(r"test cases:\s*(\d+) \|\s*(\d+) passed \|\s*(\d+) failed \|\s*(\d+) skipped", log)
    ok = step["rc"] == 0
    if m:
        tc = dict(zip(["run", "passed", "failed", "skipped"], map(int, m[-1])))
        step["test_cases"] = tc
        # A test step that ran nothing (every case skipped: no GPU seen) is not a pass.
        ok = ok and tc["failed"] == 0 and tc["run"] > 0
    step["ok"] = ok
    jf = os.path.join(out, name + ".json")
    if os.path.exists(jf):
        try:
            step["report"] = json.load(open(jf))
        except Exception as e:
            step["report_error"] = str(e)
    res["steps"].append(step)
res["all_ok"] = all(s["ok"] for s in res["steps"])
json.dump(res, open(os.path.join(out, "gpu_result.json"), "w"), indent=1)
print("gpu_result.json written; all_ok =", res["all_ok"])
sys.exit(0 if res["all_ok"] else 1)
PY
