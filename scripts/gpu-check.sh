#!/usr/bin/env bash
# GPU check: runs the already-built CUDA test binaries of a build folder on
# this machine's GPU and prints a summary table last (kernel, dtype, max error
# against the CPU reference, tolerance, PASS/FAIL, time per call at GPT-2 124M
# sizes, and PyTorch eager's time for the same op when torch with CUDA is
# installed).
#
#   scripts/gpu-check.sh [BUILD_DIR] [--no-torch]
#
# BUILD_DIR (default: build) must hold test/cuda/tc_cuda_tests, built on any
# machine with the CUDA toolkit (it needs only the CUDA runtime libraries and
# a driver here: cudart is static, cuBLASLt is libcublasLt.so.13). Nothing is
# compiled here. Files (the report, the logs, gtest's JSON) go to
# $TC_GPU_CHECK_OUT, else BUILD_DIR/gpu-check. Exit status: 0 when every
# test ran and passed; 1 when one failed or was skipped (no usable GPU);
# 2 when the binary is missing.
set -uo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD=""
TORCH=1
for arg in "$@"; do
  case "$arg" in
    --no-torch) TORCH=0 ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) BUILD="$arg" ;;
  esac
done
BUILD="${BUILD:-$ROOT/build}"
case "$BUILD" in /*) ;; *) BUILD="$PWD/$BUILD" ;; esac
OUT="${TC_GPU_CHECK_OUT:-$BUILD/gpu-check}"
mkdir -p "$OUT"
BIN="$BUILD/test/cuda/tc_cuda_tests"
if [ ! -x "$BIN" ]; then
  echo "gpu-check: $BIN not found: build it first (ninja -C <build> tc_cuda_tests)"
  exit 2
fi

echo "== gpu-check $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname)"
if command -v nvidia-smi >/dev/null; then
  nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader
else
  echo "(no nvidia-smi)"
fi

REPORT="$OUT/report.tsv"
: >"$REPORT"
echo "== tc_cuda_tests (log: $OUT/tc_cuda_tests.log)"
start=$(date +%s)
TC_CUDA_REPORT="$REPORT" "$BIN" --gtest_output="json:$OUT/tc_cuda_tests.json" \
  >"$OUT/tc_cuda_tests.log" 2>&1
test_rc=$?
echo "   exit status $test_rc after $(( $(date +%s) - start )) s"
grep -m1 'no CUDA GPU available' "$OUT/tc_cuda_tests.log"
grep -E '^\[  FAILED  \] [A-Za-z0-9_]+\.[A-Za-z0-9_]+$|Failure$' "$OUT/tc_cuda_tests.log" | head -40
grep -E '^(device 0|arena of|matmul .*TFLOP)' "$OUT/tc_cuda_tests.log"

TORCH_TSV="$OUT/torch.tsv"
: >"$TORCH_TSV"
if [ "$TORCH" = 1 ] && python3 -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  echo "== PyTorch eager micro-benchmarks (log: $OUT/torch.log)"
  python3 "$ROOT/bench/kernels_torch.py" >"$TORCH_TSV" 2>"$OUT/torch.log" ||
    echo "   (the torch benchmark stopped early: see $OUT/torch.log)"
else
  echo "== PyTorch eager micro-benchmarks skipped (no torch with CUDA, or --no-torch)"
fi

# Kernels the compiler generates (tc-fuse + CUDA codegen + NVRTC), loaded from
# their cubins and compared with the CPU reference: a bundle made here by
#   tc-cuda-codegen test/codegen/Inputs/cases.mlir --emit=none --target sm_90 --bundle BUILD/gpu-bundle
GEN="$BUILD/test/codegen/run_generated"
BUNDLE="${TC_GPU_BUNDLE:-$BUILD/gpu-bundle}"
gen_line="generated kernels: not run (no $GEN or no bundle $BUNDLE)"
gen_rc=0
if [ -x "$GEN" ] && [ -d "$BUNDLE" ]; then
  echo "== generated kernels against the CPU reference (log: $OUT/run_generated.log)"
  "$GEN" "$BUNDLE" >"$OUT/run_generated.log" 2>&1
  gen_rc=$?
  grep -E '^(PASS|FAIL|SKIP)' "$OUT/run_generated.log"
  gen_line="generated kernels: $(grep -oE '[0-9]+ passed, [0-9]+ failed' "$OUT/run_generated.log" | tail -1) (exit $gen_rc)"
fi

python3 - "$REPORT" "$OUT/tc_cuda_tests.json" "$TORCH_TSV" "$test_rc" <<'PY'
import json, sys
report, gjson, torch_tsv, rc = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
rows = [l.rstrip("\n").split("\t") for l in open(report) if l.strip()]
torch = {}
for l in open(torch_tsv):
    p = l.rstrip("\n").split("\t")
    if len(p) == 3:
        torch[(p[0], p[1])] = p[2]
passed = failed = skipped = 0
failures = []
try:
    g = json.load(open(gjson))
    for suite in g.get("testsuites", []):
        for t in suite.get("testsuite", []):
            name = suite["name"] + "." + t["name"]
            if suite["name"] == "CudaNoGpu":
                continue  # checks the no-GPU path; it skips by design where a GPU exists
            if t.get("result") == "SKIPPED" or t.get("status") == "NOTRUN":
                skipped += 1
            elif t.get("failures"):
                failed += 1
                failures.append(name)
            else:
                passed += 1
except Exception as e:
    print(f"gpu-check: no gtest JSON ({e})")
    failed += 1
head = ["kernel", "dtype", "max err", "tol", "result", "us/call", "torch us", "timed at"]
table = [head] + [[r[0], r[1], r[2], r[3], r[4], r[5], torch.get((r[0], r[1]), "-"), r[6]]
                  for r in rows if len(r) >= 7]
widths = [max(len(row[i]) for row in table) for i in range(len(head))]
print()
print("== summary (max err: max |got - want| / max(|want|, rms(want)) against the CPU reference)")
for i, row in enumerate(table):
    print("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())
    if i == 0:
        print("  ".join("-" * w for w in widths))
bad_rows = sum(1 for r in rows if len(r) >= 5 and r[4] != "PASS")
print()
for f in failures:
    print(f"FAILED: {f}")
if skipped:
    print(f"{skipped} test(s) skipped: on the GPU machine that means no usable GPU (see the log)")
ok = rc == 0 and failed == 0 and skipped == 0 and bad_rows == 0 and rows
print(f"gpu-check: {passed} passed, {failed} failed, {skipped} skipped; "
      f"{len(rows) - bad_rows}/{len(rows)} report rows pass -> {'OK' if ok else 'FAILED'}")
sys.exit(0 if ok else 1)
PY
py_rc=$?
echo "gpu-check: $gen_line"
[ "$py_rc" -eq 0 ] && [ "$gen_rc" -eq 0 ]
