#!/usr/bin/env bash
# GPU check: everything GPU-side, on the GPU machine, on a folder made by
# scripts/gpu-prepare.sh (the GPU machine has no MLIR: nothing is compiled
# here). Tables last:
#   - tc_cuda_tests: every runtime CUDA kernel and the cuBLASLt wrapper against
#     the CPU reference on random inputs (with PyTorch eager's time per op when
#     torch with CUDA is installed), the C API's CUDA session;
#   - run_generated: the compiler-generated kernels (BUILD_DIR/codegen/cases.tca);
#   - the fixtures (BUILD_DIR/fixtures/*.tca) trained 8 AdamW steps by tc-run
#     on the GPU against the CPU reference's 8 steps (fp32 with tf32 off:
#     1e-4 relative; bf16, fp16, fp8, nvfp4/mxfp4 QAT: 2e-2; fp16: the same
#     skipped steps; fp8delayed (--fp8-scaling delayed): fp8_saturated
#     nonzero on the same steps, the totals within 2 or 10%), and
#     each one's device memory against the
#     compiler's plan and cudaMemGetInfo;
#   - --eval on the GPU vs the CPU, a checkpoint resumed through the device
#     (untuned, tuned through a fresh matmul tuning record: the same bits, and
#     the --experimental bf16 fixture: its levers),
#     the C API's trainer against tc-run's losses (test/runtime/capi_train_check),
#     compute-sanitizer memcheck and racecheck on two fixtures (exit clean),
#     the refusals (wrong architecture, missing GPU), the main job's tiny GPT;
#   - GPT-2 124M: tc beside PyTorch eager and torch.compile (TC_BENCH=0 skips;
#     TC_BENCH_PROFILE=1 adds a per-op GPU time profile of tc, bench/profile.txt).
#
#   scripts/gpu-check.sh [BUILD_DIR | BUILD_DIR.tgz | BUILD_DIR.txz] [--no-torch]
#
# A .tgz (gpu-prepare's archive of BUILD_DIR) or .txz (gpu-bundles.sh's) is
# unpacked beside itself first.
#
# BUILD_DIR (default: build) holds bin/tc-run, test/cuda/tc_cuda_tests and
# test/codegen/run_generated (built with the CUDA toolkit; they need only a
# driver here: cudart is static, cuBLASLt is libcublasLt.so.13). Files (the
# report, the logs, gtest's JSON) go to $TC_GPU_CHECK_OUT, else
# BUILD_DIR/gpu-check. Exit status: 0 when every check ran and passed (the
# benchmark's speed is reported, not judged); 1 when one failed or was
# skipped (no usable GPU); 2 when the test binary is missing.
set -uo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD=""
TORCH=1
for arg in "$@"; do
  case "$arg" in
    --no-torch) TORCH=0 ;;
    -h|--help) sed -n '2,28p' "$0"; exit 0 ;;
    *) BUILD="$arg" ;;
  esac
done
BUILD="${BUILD:-$ROOT/build}"
case "$BUILD" in
  *.tgz)
    tar -C "$(dirname "$BUILD")" -xzf "$BUILD" || { echo "gpu-check: cannot unpack $BUILD" >&2; exit 2; }
    BUILD="${BUILD%.tgz}" ;;
  *.txz) # scripts/gpu-bundles.sh's (xz: half gzip's size); Python's tarfile where xz is missing
    { tar -C "$(dirname "$BUILD")" -xJf "$BUILD" 2>/dev/null ||
      python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' \
        "$BUILD" "$(dirname "$BUILD")"; } || { echo "gpu-check: cannot unpack $BUILD" >&2; exit 2; }
    BUILD="${BUILD%.txz}" ;;
esac
case "$BUILD" in /*) ;; *) BUILD="$PWD/$BUILD" ;; esac
OUT="${TC_GPU_CHECK_OUT:-$BUILD/gpu-check}"
mkdir -p "$OUT"
BIN="$BUILD/test/cuda/tc_cuda_tests"
if [ ! -x "$BIN" ]; then
  echo "gpu-check: $BIN not found: build it first (ninja -C <build> tc_cuda_tests)"
  exit 2
fi

# cuDNN for the optional plugin (PyTorch's wheels' libraries where the system
# has none); the tests open the plugin beside tc-run.
. "$ROOT/scripts/cudnn-env.sh"
[ -f "$BUILD/bin/libtc_cudnn.so" ] && export TC_CUDNN_PLUGIN="$BUILD/bin/libtc_cudnn.so"

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
TC_GPU_ARTIFACT="${TC_GPU_ARTIFACT:-$BUILD/fixtures/gpt2.ts.fp32.tca}" TC_CUDA_REPORT="$REPORT" "$BIN" --gtest_output="json:$OUT/tc_cuda_tests.json" \
  >"$OUT/tc_cuda_tests.log" 2>&1
test_rc=$?
echo "   exit status $test_rc after $(( $(date +%s) - start )) s"
grep -m1 'no CUDA GPU available' "$OUT/tc_cuda_tests.log"
grep -E '^\[  FAILED  \] [A-Za-z0-9_]+\.[A-Za-z0-9_]+$|Failure$' "$OUT/tc_cuda_tests.log" | head -40
grep -E '^(device 0|arena of|(matmul|attention) .*TFLOP)' "$OUT/tc_cuda_tests.log"

TORCH_TSV="$OUT/torch.tsv"
: >"$TORCH_TSV"
if [ "$TORCH" = 1 ] && python3 -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  echo "== PyTorch eager micro-benchmarks (log: $OUT/torch.log)"
  python3 "$ROOT/bench/kernels_torch.py" >"$TORCH_TSV" 2>"$OUT/torch.log" ||
    echo "   (the torch benchmark stopped early: see $OUT/torch.log)"
else
  echo "== PyTorch eager micro-benchmarks skipped (no torch with CUDA, or --no-torch)"
fi

# Kernels the compiler generates, run through the runtime's C API on the GPU
# and compared with the CPU reference: the artifact made here by
#   tc-cuda-codegen test/codegen/Inputs/cases.mlir --emit=none --target sm_90 --artifact BUILD/codegen/cases.tca
GEN="$BUILD/test/codegen/run_generated"
CASES="${TC_GPU_CASES:-$BUILD/codegen/cases.tca}"
gen_line="generated kernels: not run (no $GEN or no artifact $CASES)"
gen_rc=0
if [ -x "$GEN" ] && [ -f "$CASES" ]; then
  echo "== generated kernels against the CPU reference (log: $OUT/run_generated.log)"
  "$GEN" "$CASES" >"$OUT/run_generated.log" 2>&1
  gen_rc=$?
  grep -E '^(PASS|FAIL|SKIP)' "$OUT/run_generated.log"
  gen_line="generated kernels: $(grep -oE '[0-9]+ passed, [0-9]+ failed' "$OUT/run_generated.log" | tail -1) (exit $gen_rc)"
  # The same cases with the levers not yet checked on a GPU (gpu-prepare's
  # TC_EXPERIMENTAL), when prepared.
  EXP_CASES="${CASES%.tca}-exp.tca"
  if [ -f "$EXP_CASES" ]; then
    echo "== generated kernels with tc-compile --experimental (log: $OUT/run_generated-exp.log)"
    "$GEN" "$EXP_CASES" >"$OUT/run_generated-exp.log" 2>&1
    exp_rc=$?
    grep -E '^(PASS|FAIL|SKIP)' "$OUT/run_generated-exp.log"
    gen_line="$gen_line; with --experimental: $(grep -oE '[0-9]+ passed, [0-9]+ failed' "$OUT/run_generated-exp.log" | tail -1) (exit $exp_rc)"
    [ "$exp_rc" = 0 ] || gen_rc=$exp_rc
  fi
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
failures, arch_skips = [], []
try:
    g = json.load(open(gjson))
    for suite in g.get("testsuites", []):
        for t in suite.get("testsuite", []):
            name = suite["name"] + "." + t["name"]
            if suite["name"] == "CudaNoGpu":
                continue  # checks the no-GPU path; it skips by design where a GPU exists
            if t.get("result") == "SKIPPED" and t.get("needs_arch"):
                # A test of another architecture's instructions (its
                # RecordProperty("needs_arch", ...)): listed, not a failure.
                arch_skips.append(f"{name} (needs {t['needs_arch']})")
            elif t.get("result") == "SKIPPED" or t.get("status") == "NOTRUN":
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
for a in arch_skips:
    print(f"not for this GPU: {a}")
if skipped:
    print(f"{skipped} test(s) skipped: on the GPU machine that means no usable GPU (see the log)")
ok = rc == 0 and failed == 0 and skipped == 0 and bad_rows == 0 and rows
print(f"gpu-check: {passed} passed, {failed} failed, {skipped} skipped, "
      f"{len(arch_skips)} for another architecture; "
      f"{len(rows) - bad_rows}/{len(rows)} report rows pass -> {'OK' if ok else 'FAILED'}")
sys.exit(0 if ok else 1)
PY
py_rc=$?
echo "gpu-check: $gen_line"

# The committed fixtures, compiled by scripts/gpu-prepare.sh for sm_90 in fp32
# (tf32 off) and bf16, trained 8 AdamW steps here by tc-run on the GPU and
# compared with the CPU reference's 8 steps (made there); the device memory
# tc-run reports against the compiler's --report memory and cudaMemGetInfo.
FIXT="$BUILD/fixtures"
TCRUN="$BUILD/bin/tc-run"
fx_rc=0
if [ -x "$TCRUN" ] && [ -d "$FIXT" ]; then
  echo "== fixtures trained on the GPU (logs: $OUT/fixtures)"
  mkdir -p "$OUT/fixtures"
  for tca in "$FIXT"/*.tca; do
    name=$(basename "$tca" .tca)
    m=${name%%.*}
    rm -f "$OUT/fixtures/$name.gpu.jsonl"
    mask=()
    [ -f "$FIXT/$m.attention_mask.npy" ] && mask=(--feed "attention_mask=$FIXT/$m.attention_mask.npy")
    "$TCRUN" "$tca" --device cuda --steps 8 --feed "input_ids=$FIXT/$m.input_ids.npy" \
      --feed "labels=$FIXT/$m.labels.npy" "${mask[@]}" --metrics "$OUT/fixtures/$name.gpu.jsonl" \
      --log-every 0 >"$OUT/fixtures/$name.gpu.log" 2>&1
    echo "   $name: exit $?"
  done
  python3 - "$FIXT" "$OUT/fixtures" <<'PY'
import json, os, re, sys
fixt, out = sys.argv[1], sys.argv[2]
def steps(path):
    try:
        return [json.loads(l) for l in open(path) if l.strip()]
    except OSError:
        return []
rows, bad = [], 0
for f in sorted(os.listdir(fixt)):
    if not f.endswith(".tca"):
        continue
    name = f[:-4]
    prec = name.rsplit(".", 1)[1]
    tol = 1e-4 if prec == "fp32" else 2e-2
    cpu, gpu = steps(f"{fixt}/{name}.cpu.jsonl"), steps(f"{out}/{name}.gpu.jsonl")
    log = open(f"{out}/{name}.gpu.log").read() if os.path.exists(f"{out}/{name}.gpu.log") else ""
    err_l = err_g = float("nan")
    if len(cpu) == 8 and len(gpu) == 8:
        rel = lambda a, b: abs(a - b) / max(abs(b), 1e-12)
        err_l = max(rel(g["loss"], c["loss"]) for g, c in zip(gpu, cpu))
        err_g = max(rel(g["grad_norm"], c["grad_norm"]) for g, c in zip(gpu, cpu))
    # fp16: the GPU skips the steps the CPU skips (loss scaling decides in the step);
    # fp8delayed: it counts about as many saturated elements. The quantization is
    # bit-exact for the same input, but the inputs differ by the bf16 GEMMs' summation
    # order, so an element at the saturation boundary may fall either side (seen on the
    # H200: 15 vs 14, 21 vs 18, 18 vs 21 per step; 105 vs 103, 120 vs 120 over 8 steps):
    # every step saturates on both or on neither, and the 8 steps' totals are within 2
    # or 10%.
    sat_g, sat_c = [g.get("fp8_saturated") for g in gpu], [c.get("fp8_saturated") for c in cpu]
    sat_ok = len(sat_g) == len(sat_c) and all(
        (a is None) == (b is None) and (a is None or (a > 0) == (b > 0)) for a, b in zip(sat_g, sat_c))
    if sat_ok and sat_c and sat_c[0] is not None:
        sat_ok = abs(sum(sat_g) - sum(sat_c)) <= max(2, 0.1 * sum(sat_c))
    ok = err_l <= tol and err_g <= tol and \
        [g.get("skipped") for g in gpu] == [c.get("skipped") for c in cpu] and sat_ok
    # Memory: the compiler's total, what the runtime allocated, what the driver saw.
    planned = runtime = seen = -1
    mt = open(f"{fixt}/{name}.memory.txt").read() if os.path.exists(f"{fixt}/{name}.memory.txt") else ""
    mm = re.search(r"^\s*total\s+([\d,]+)", mt, re.M)
    if mm:
        planned = int(mm.group(1).replace(",", ""))
    dm = re.search(r"\((\d+) bytes\); cudaMemGetInfo saw (-?\d+) bytes", log)
    if dm:
        runtime, seen = int(dm.group(1)), int(dm.group(2))
    # Allocations are padded to 16 bytes per entry; the driver maps 2 MiB pages
    # for each of the (at most 5) allocations.
    mem_ok = planned > 0 and 0 <= runtime - planned <= max(4096, planned // 1000) \
        and runtime <= seen <= runtime + 5 * (2 << 20) + (4 << 20)
    if ".accum" in name:  # the plan reports train_step; accumulation runs grad_step + apply_step
        mem_ok = runtime > 0 and runtime <= seen <= runtime + 8 * (2 << 20) + (4 << 20)
    ok = ok and mem_ok
    bad += not ok
    if not gpu:
        last = [l for l in log.splitlines() if l.strip()][-1:] or ["(no log)"]
        print(f"   {name}: {last[0][:200]}")
    rows.append([name, f"{err_l:.2e}", f"{err_g:.2e}", f"{tol:g}", f"{planned}", f"{runtime}",
                 f"{seen}", "PASS" if ok else "FAIL"])
head = ["fixture", "loss err", "gnorm err", "tol", "planned B", "runtime B", "driver B", "result"]
t = [head] + rows
w = [max(len(r[i]) for r in t) for i in range(len(head))]
print()
print("== fixtures: 8 AdamW steps on the GPU vs the CPU reference (max relative error over the")
print("   steps of the loss and the gradient norm); device memory: compiler plan vs runtime vs cudaMemGetInfo")
for i, r in enumerate(t):
    print("  ".join(c.ljust(x) for c, x in zip(r, w)))
    if i == 0:
        print("  ".join("-" * x for x in w))
print(f"gpu-check fixtures: {len(rows) - bad}/{len(rows)} pass")
sys.exit(1 if bad or not rows else 0)
PY
  fx_rc=$?
fi

# tc-run --eval on the GPU (eval_step of the device program) against the CPU
# reference's eval of the same artifact.
eval_line="eval: not run"
if [ -x "$TCRUN" ] && [ -f "$FIXT/llama.ts.fp32.tca" ]; then
  rm -f "$OUT/eval.cpu.jsonl" "$OUT/eval.gpu.jsonl"
  for d in cpu cuda; do
    "$TCRUN" "$FIXT/llama.ts.fp32.tca" --device $d --eval --feed "input_ids=$FIXT/llama.input_ids.npy" \
      --feed "labels=$FIXT/llama.labels.npy" --metrics "$OUT/eval.$d.jsonl" >/dev/null 2>>"$OUT/eval.log"
  done
  eval_line="eval: $(python3 -c "
import json, sys
try:
    c, g = (json.loads(open('$OUT/eval.%s.jsonl' % d).readline())['loss'] for d in ('cpu', 'cuda'))
except Exception as e:
    print('FAIL (%s)' % e); sys.exit(0)
err = abs(g - c) / abs(c)
print('%s: llama.ts.fp32 loss gpu %.9g cpu %.9g (rel err %.2e, tol 1e-4)' % ('PASS' if err <= 1e-4 else 'FAIL', g, c, err))
")"
  echo "   $eval_line"
fi

# tc-run --check: one step of a fixture on the GPU and on the CPU reference,
# every value both programs hold compared. fp32, bf16, fp16, fp8 (tensor
# and block128 scaling), nvfp4 and bf16 with the vocabulary padded
# (--pad-vocab 96) must be within the default tolerances
# (exit 0); with a tolerance of 1e-12 the bf16 run must exit 1 naming the
# first device op beyond it (the check can fail).
check_line="check: not run"
if [ -x "$TCRUN" ] && [ -f "$FIXT/gpt2.ts.bf16.tca" ]; then
  ok=PASS
  parts=""
  for fx in gpt2.ts.fp32 gpt2.ts.bf16 gpt2.ts.fp16 gpt2.ts.fp8 gpt2.ts.fp8-block128 llama.dynamo.fp8 \
    llama.dynamo.bf16 gpt2.ts.nvfp4 gpt2.ts.bf16-pad96 llama.dynamo.bf16-pad96 gpt2.ts.exp.bf16; do
    [ -f "$FIXT/$fx.tca" ] || continue
    m=${fx%%.*}
    "$TCRUN" "$FIXT/$fx.tca" --device cuda --check --feed "input_ids=$FIXT/$m.input_ids.npy" \
      --feed "labels=$FIXT/$m.labels.npy" >"$OUT/check.$fx.txt" 2>&1
    rc=$?
    n=$(grep -c '^  #' "$OUT/check.$fx.txt")
    worst=$(awk '/^  #/ { if ($3 + 0 > w) w = $3 + 0 } END { printf "%.1e", w }' "$OUT/check.$fx.txt")
    if [ $rc -ne 0 ] || [ "$n" -lt 10 ]; then ok=FAIL; fi
    parts="$parts $fx rc=$rc $n values worst $worst;"
  done
  "$TCRUN" "$FIXT/gpt2.ts.bf16.tca" --device cuda --check --check-tolerance 1e-12 \
    --feed "input_ids=$FIXT/gpt2.input_ids.npy" --feed "labels=$FIXT/gpt2.labels.npy" \
    >"$OUT/check.tight.txt" 2>&1
  rc=$?
  if [ $rc -ne 1 ] || ! grep -q "the first is the output of device op" "$OUT/check.tight.txt"; then ok=FAIL; fi
  check_line="check: $ok:$parts tolerance 1e-12 rc=$rc: $(tail -1 "$OUT/check.tight.txt" | cut -c1-160)"
  echo "   $check_line"
fi

# Refusals on the GPU machine: kernels for another architecture, a GPU that
# does not exist. Each must fail with a message naming the problem.
errors_line="errors: not run"
if [ -x "$TCRUN" ] && [ -f "$BUILD/wrong-arch.sm_120.tca" ]; then
  feeds=(--feed "input_ids=$FIXT/gpt2.input_ids.npy" --feed "labels=$FIXT/gpt2.labels.npy")
  a=$("$TCRUN" "$BUILD/wrong-arch.sm_120.tca" --device cuda --steps 1 "${feeds[@]}" 2>&1); ra=$?
  b=$("$TCRUN" "$FIXT/gpt2.ts.fp32.tca" --device cuda:7 --steps 1 "${feeds[@]}" 2>&1); rb=$?
  ok=FAIL
  if [ $ra -ne 0 ] && grep -q "recompile with tc-compile --target sm_" <<<"$a" &&
     [ $rb -ne 0 ] && grep -q "does not exist" <<<"$b"; then ok=PASS; fi
  errors_line="errors: $ok: $(tail -1 <<<"$a" | cut -c1-150) | $(tail -1 <<<"$b" | cut -c1-120)"
  echo "   $errors_line"
fi

# Checkpoints through the device: 4 steps, save, resume to 8 in a new process;
# steps 5..8 must equal an uninterrupted 8-step run exactly (cuBLASLt's
# heuristic choice, TC_MATMUL_TUNE=0, so both processes use the same kernels).
# The run loop enqueues step N + 1 before it reads step N (pipelined): 8 steps
# with --save-every 3 (the loop pauses at steps 3 and 6) and 8 steps waited
# for one by one (TC_CUDA_PIPELINE=0) must give the same losses and the same
# final checkpoint, byte for byte.
resume_line="resume: not run"
RFX="$FIXT/gpt2.ts.fp32.tca"
if [ -x "$TCRUN" ] && [ -f "$RFX" ]; then
  feeds=(--feed "input_ids=$FIXT/gpt2.input_ids.npy" --feed "labels=$FIXT/gpt2.labels.npy")
  rm -rf "$OUT/resume" && mkdir -p "$OUT/resume"
  TC_MATMUL_TUNE=0 "$TCRUN" "$RFX" --device cuda --steps 8 "${feeds[@]}" \
    --metrics "$OUT/resume/full.jsonl" --log-every 0 >"$OUT/resume/log" 2>&1 &&
  TC_MATMUL_TUNE=0 "$TCRUN" "$RFX" --device cuda --steps 4 "${feeds[@]}" --save "$OUT/resume/ck" \
    --log-every 0 >>"$OUT/resume/log" 2>&1 &&
  TC_MATMUL_TUNE=0 "$TCRUN" "$RFX" --device cuda --steps 8 "${feeds[@]}" --resume "$OUT/resume/ck" \
    --metrics "$OUT/resume/resumed.jsonl" --log-every 0 >>"$OUT/resume/log" 2>&1
  TC_MATMUL_TUNE=0 "$TCRUN" "$RFX" --device cuda --steps 8 "${feeds[@]}" --save "$OUT/resume/piped" \
    --save-every 3 --metrics "$OUT/resume/piped.jsonl" --log-every 0 >>"$OUT/resume/log" 2>&1
  TC_MATMUL_TUNE=0 TC_CUDA_PIPELINE=0 "$TCRUN" "$RFX" --device cuda --steps 8 "${feeds[@]}" \
    --save "$OUT/resume/serial" --save-every 3 --metrics "$OUT/resume/serial.jsonl" --log-every 0 \
    >>"$OUT/resume/log" 2>&1
  resume_line="resume: $(python3 - "$OUT/resume" <<'PY'
import json, sys
d = sys.argv[1]
try:
    full = {r["step"]: r["loss"] for r in map(json.loads, open(f"{d}/full.jsonl"))}
    res = {r["step"]: r["loss"] for r in map(json.loads, open(f"{d}/resumed.jsonl"))}
    piped = {r["step"]: r["loss"] for r in map(json.loads, open(f"{d}/piped.jsonl"))}
    serial = {r["step"]: r["loss"] for r in map(json.loads, open(f"{d}/serial.jsonl"))}
    states = [open(f"{d}/{k}/{f}", "rb").read() for k in ("piped", "serial")
              for f in ("model.safetensors", "optimizer.safetensors")]
except OSError as e:
    print(f"FAIL ({e})"); sys.exit(0)
same = sorted(res) == [5, 6, 7, 8] and all(res[s] == full[s] for s in res)
steps = list(range(1, 9))
piped_ok = sorted(piped) == steps and piped == full and serial == full and states[:2] == states[2:]
print(("PASS" if same and piped_ok else "FAIL") + ": steps " + ", ".join(f"{s}: {res[s]:.9g} vs {full.get(s, float('nan')):.9g}" for s in sorted(res))
      + f"; pipelined / serial (--save-every 3) {'equal' if piped_ok else 'DIFFER'} to the bit")
PY
)"
  rm -rf "$OUT/resume/ck" "$OUT/resume/piped" "$OUT/resume/serial"
  echo "   $resume_line"
fi

# The same with matmul tuning on, as tc-run runs by default: the first process
# times cuBLASLt's candidates and keeps its choices in a fresh tuning record
# (TC_CACHE_DIR), a second uninterrupted run and a resume in a new process
# take them: both equal to the first to the bit (Llama's bf16 fixture: GQA's
# narrow projections and the SwiGLU give several shapes where candidates tie).
tuned_line="tuned resume: not run"
TFX="$FIXT/fresh-llama.dynamo-op23.bf16.tca"
if [ -x "$TCRUN" ] && [ -f "$TFX" ]; then
  T="$OUT/tuned"
  rm -rf "$T" && mkdir -p "$T"
  tuned_run() {
    TC_CACHE_DIR="$T/cache" "$TCRUN" "$TFX" --device cuda --feed "input_ids=$FIXT/fresh-llama.input_ids.npy" \
      --feed "labels=$FIXT/fresh-llama.labels.npy" --log-every 0 "$@" >>"$T/log" 2>&1
  }
  tuned_run --steps 8 --metrics "$T/first.jsonl" && tuned_run --steps 8 --metrics "$T/second.jsonl" &&
    tuned_run --steps 4 --save "$T/ck" && tuned_run --steps 8 --resume "$T/ck" --metrics "$T/resumed.jsonl"
  tuned_line="tuned resume: $(python3 - "$T" <<'PY'
import glob, json, sys
d = sys.argv[1]
try:
    first = {r["step"]: r["loss"] for r in map(json.loads, open(f"{d}/first.jsonl"))}
    second = {r["step"]: r["loss"] for r in map(json.loads, open(f"{d}/second.jsonl"))}
    res = {r["step"]: r["loss"] for r in map(json.loads, open(f"{d}/resumed.jsonl"))}
except OSError as e:
    print(f"FAIL ({e})"); sys.exit(0)
records = glob.glob(f"{d}/cache/matmul/*.tsv")
choices = sum(1 for f in records for l in open(f) if l.startswith(("algo ", "path ")))
ok = (len(first) == 8 and second == first and sorted(res) == [5, 6, 7, 8] and
      all(res[s] == first[s] for s in res) and choices > 0)
print(("PASS" if ok else "FAIL") + f": {choices} choices recorded; second run "
      f"{'equal' if second == first else 'DIFFERS'}, resumed steps 5-8 "
      f"{'equal' if all(res.get(s) == first.get(s) for s in range(5, 9)) else 'DIFFER'} to the bit "
      f"(last loss {first.get(8, float('nan')):.9g})")
PY
)"
  echo "   $tuned_line"
fi

# The same through the levers of tc-compile --experimental (the bf16 fixture
# gpu-prepare compiled with TC_EXPERIMENTAL). (The resumes above run the
# default weight shadows: the resumed process's 16-bit weight copies come from
# the loaded weights (the executor's setEntry), so steps 5..8 equal the
# uninterrupted run only if they do.)
exp_resume_line="exp resume: not run"
XFX="$FIXT/gpt2.ts.exp.bf16.tca"
if [ -x "$TCRUN" ] && [ -f "$XFX" ]; then
  X="$OUT/exp-resume"
  rm -rf "$X" && mkdir -p "$X"
  feeds=(--feed "input_ids=$FIXT/gpt2.input_ids.npy" --feed "labels=$FIXT/gpt2.labels.npy")
  TC_MATMUL_TUNE=0 "$TCRUN" "$XFX" --device cuda --steps 8 "${feeds[@]}" --metrics "$X/full.jsonl" \
    --log-every 0 >"$X/log" 2>&1 &&
  TC_MATMUL_TUNE=0 "$TCRUN" "$XFX" --device cuda --steps 4 "${feeds[@]}" --save "$X/ck" \
    --log-every 0 >>"$X/log" 2>&1 &&
  TC_MATMUL_TUNE=0 "$TCRUN" "$XFX" --device cuda --steps 8 "${feeds[@]}" --resume "$X/ck" \
    --metrics "$X/resumed.jsonl" --log-every 0 >>"$X/log" 2>&1
  exp_resume_line="exp resume ($(basename "$XFX")): $(python3 - "$X" <<'PY'
import json, sys
d = sys.argv[1]
try:
    full = {r["step"]: r["loss"] for r in map(json.loads, open(f"{d}/full.jsonl"))}
    res = {r["step"]: r["loss"] for r in map(json.loads, open(f"{d}/resumed.jsonl"))}
except OSError as e:
    print(f"FAIL ({e})"); sys.exit(0)
same = len(full) == 8 and sorted(res) == [5, 6, 7, 8] and all(res[s] == full[s] for s in res)
print(("PASS" if same else "FAIL") + ": steps " +
      ", ".join(f"{s}: {res[s]:.9g} vs {full.get(s, float('nan')):.9g}" for s in sorted(res)))
PY
)"
  rm -rf "$X/ck"
  echo "   $exp_resume_line"
fi

# The C API's trainer on the GPU (test/runtime/capi_train_check: tc/runtime.h
# only): 8 steps on the resume check's feeds must equal tc-run's uninterrupted
# run (resume/full.jsonl) to the bit, and its own save at step 4 resumed by a
# new trainer must equal its 8 steps.
capi_line="capi: not run"
CAPI="$BUILD/test/runtime/capi_train_check"
if [ -x "$CAPI" ] && [ -f "$RFX" ] && [ -f "$OUT/resume/full.jsonl" ]; then
  mkdir -p "$OUT/capi"
  feeds=(--feed "input_ids=$FIXT/gpt2.input_ids.npy" --feed "labels=$FIXT/gpt2.labels.npy")
  own=$("$CAPI" "$RFX" "$OUT/capi" cuda 8 4 "${feeds[@]}" 2>&1 | tail -1)
  capi_line="capi: $(python3 - "$OUT" "$own" <<'PY'
import json, sys
d, own = sys.argv[1], sys.argv[2]
try:
    ref = [r["loss"] for r in map(json.loads, open(f"{d}/resume/full.jsonl"))]
    got = [r["loss"] for r in map(json.loads, open(f"{d}/capi/capi-full.jsonl"))]
except OSError as e:
    print(f"FAIL ({e}; {own})"); sys.exit(0)
same = len(ref) == 8 and got == ref and own.startswith("PASS")
print(("PASS" if same else "FAIL") + f": C API vs tc-run {'equal' if got == ref else 'differ'} over "
      f"{len(got)} steps (last {got[-1] if got else float('nan'):.9g} vs "
      f"{ref[-1] if ref else float('nan'):.9g}); save/resume: {own[:120]}")
PY
)"
  echo "   $capi_line"
fi

# compute-sanitizer: memcheck and racecheck on a fixture's training steps
# (fp32 and bf16) and an eval; a reported error or a failing CUDA API call
# fails the check (--error-exitcode). memcheck with the cuDNN plugin open
# (its pointers and strides are tc's); racecheck of tc's own kernels, cuDNN
# closed (TC_CUDNN=0): racecheck of cuDNN's GEMM kernels takes minutes.
sanitizer_line="sanitizer: not run (no compute-sanitizer)"
CS="$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null || true)"
if [ -n "$CS" ] && [ -x "$TCRUN" ] && [ -f "$BUILD/fixtures/llama.ts.fp32.tca" ]; then
  echo "== compute-sanitizer (logs: $OUT/sanitizer)"
  mkdir -p "$OUT/sanitizer"
  sres=""
  for tool in memcheck racecheck; do
    for fx in llama.ts.fp32 gpt2.ts.bf16; do
      m="${fx%%.*}"
      cudnn=1
      [ "$tool" = racecheck ] && cudnn=0
      TC_CUDNN=$cudnn "$CS" --tool "$tool" --error-exitcode 3 "$TCRUN" "$BUILD/fixtures/$fx.tca" --device cuda --steps 2 \
        --feed "input_ids=$BUILD/fixtures/$m.input_ids.npy" --feed "labels=$BUILD/fixtures/$m.labels.npy" \
        --log-every 0 >"$OUT/sanitizer/$tool.$fx.log" 2>&1
      rc=$?
      errs=$(grep -oE 'ERROR SUMMARY: [0-9]+' "$OUT/sanitizer/$tool.$fx.log" | tail -1 | grep -oE '[0-9]+$')
      sres="$sres $tool/$fx=$([ $rc -eq 0 ] && echo ok || echo "FAIL(rc $rc, ${errs:-?} errors)")"
    done
  done
  sanitizer_line="sanitizer:$sres"
  echo "   $sanitizer_line"
fi

# The main job (scripts/run.sh) on the GPU: the tiny GPT, 800 AdamW steps on
# the Debian license texts (the CPU reference goes 5.53 -> about 2.45).
tiny_line="tiny-gpt: not run"
if [ -x "$TCRUN" ] && [ -f "$BUILD/tiny-gpt/tiny-gpt.tca" ]; then
  echo "== main job on the GPU: tiny GPT, 800 steps (log: $OUT/tiny-gpt.log)"
  rm -f "$OUT/tiny-gpt.jsonl"
  "$TCRUN" "$BUILD/tiny-gpt/tiny-gpt.tca" --device cuda --steps 800 --data "$BUILD/tiny-gpt/train.bin" \
    --dtype uint16 --warmup 30 --lr-schedule cosine --metrics "$OUT/tiny-gpt.jsonl" \
    --log-every 200 >"$OUT/tiny-gpt.log" 2>&1
  tiny_line="tiny-gpt: $(tail -1 "$OUT/tiny-gpt.log")"
  echo "   $tiny_line"
fi

# The run loop on the GPU (runtime/src/session/run.h): validation through the
# device (grad_step's loss), --eval --data --init of the saved checkpoint
# (eval_step of the device program) against the val_loss it wrote, MFU/HFU
# known for the card, TensorBoard, SIGINT saving; and the card's memory as
# cudaMemGetInfo reports it (the target table's capacity, compiler/Target.cpp).
loop_line="run loop: not run"
if [ -x "$TCRUN" ] && [ -f "$BUILD/tiny-gpt/tiny-gpt.tca" ]; then
  echo "== run loop on the GPU (logs: $OUT/loop)"
  rm -rf "$OUT/loop" && mkdir -p "$OUT/loop"
  TB="$BUILD/tiny-gpt/tiny-gpt.tca"
  "$TCRUN" "$TB" --device cuda --steps 40 --data "$BUILD/tiny-gpt/train.bin" --val-data "$BUILD/tiny-gpt/train.bin" \
    --eval-every 20 --eval-iters 4 --save "$OUT/loop/ck" --metrics "$OUT/loop/m.jsonl" \
    --tensorboard "$OUT/loop/tb" --log-every 20 >"$OUT/loop/train.log" 2>&1
  "$TCRUN" "$TB" --device cuda --eval --data "$BUILD/tiny-gpt/train.bin" --eval-iters 4 --init "$OUT/loop/ck" \
    --metrics "$OUT/loop/e.jsonl" >"$OUT/loop/eval.log" 2>&1
  # --foreground: one SIGINT to tc-run alone, as Ctrl-C sends it. Without it
  # timeout signals the child and then its whole process group, so tc-run gets
  # two; with CUDA's threads they can be handled at once, and the second one
  # is the "exit at once" signal (seen on the H200, 2026-12-01).
  timeout --foreground --preserve-status -s INT 20 "$TCRUN" "$TB" --device cuda --steps 100000000 \
    --data "$BUILD/tiny-gpt/train.bin" --save "$OUT/loop/sig" --log-every 0 >"$OUT/loop/sig.log" 2>&1
  sig_rc=$?
  loop_line="run loop: $(python3 - "$OUT/loop" "$sig_rc" <<'PY'
import json, re, sys
d, sig_rc = sys.argv[1], int(sys.argv[2])
try:
    L = [json.loads(l) for l in open(f"{d}/m.jsonl")]
    e = json.loads(open(f"{d}/e.jsonl").read().splitlines()[-1])
    log = open(f"{d}/train.log").read()
    st = json.load(open(f"{d}/sig/state.json"))
except (OSError, ValueError) as x:
    print(f"FAIL ({x})"); sys.exit(0)
val = [r for r in L if r["kind"] == "val"]
train = [r for r in L if r["kind"] == "train"]
mfu = [r["mfu"] for r in train[5:] if r["mfu"] is not None]
rel = abs(val[-1]["val_loss"] - e["val_loss"]) / abs(e["val_loss"]) if val else 1
card = re.search(r"the card: (\d+) bytes in all \(cudaMemGetInfo\), (\d+) in use before", log)
ok = len(val) == 2 and rel < 1e-4 and mfu and 0 < min(mfu) and max(mfu) < 1 and sig_rc == 130 \
    and st["step"] > 0 and card
print(("PASS" if ok else "FAIL") + f": val_loss {val[-1]['val_loss'] if val else 'none'} vs --eval --init {e['val_loss']} (rel {rel:.1e});"
      f" MFU {min(mfu) if mfu else 'none'}..{max(mfu) if mfu else ''}; SIGINT exit {sig_rc}, saved step {st['step']};"
      f" card {card.group(1) if card else '?'} B total, {card.group(2) if card else '?'} B in use before tc")
PY
)"
  if python3 "$ROOT/scripts/check_tensorboard.py" "$OUT/loop/tb" "$OUT/loop/m.jsonl" >>"$OUT/loop/train.log" 2>&1; then :; else
    loop_line="$loop_line; tensorboard FAIL"; fi
  echo "   $loop_line"
fi

# GPT-2 124M: tc (artifact compiled by gpu-prepare.sh) beside PyTorch eager and
# torch.compile, same model, batch 16 x 1024, bf16, AdamW.
bench_rc=0
if [ -x "$TCRUN" ] && [ -f "$BUILD/bench/gpt2-124m.tca" ] && [ "${TC_BENCH:-1}" = 1 ]; then
  echo "== bench: GPT-2 124M (logs: $OUT/bench)"
  mkdir -p "$OUT/bench"
  python3 -c "import numpy as np; np.random.seed(0); np.random.randint(0, 50257, size=16*1025*64).astype(np.uint16).tofile('/tmp/tc-bench-tokens.bin')"
  rm -f "$OUT/bench/tc.jsonl"
  "$TCRUN" "$BUILD/bench/gpt2-124m.tca" --device cuda --steps "${TC_BENCH_STEPS:-30}" \
    --data /tmp/tc-bench-tokens.bin --metrics "$OUT/bench/tc.jsonl" --log-every 10 \
    >"$OUT/bench/tc.log" 2>&1
  bench_rc=$?
  tail -4 "$OUT/bench/tc.log"
  if [ "${TC_BENCH_PROFILE:-0}" = 1 ]; then
    # Per-op GPU time of a few steps (TC_CUDA_PROFILE: the first run is not timed).
    TC_CUDA_PROFILE=1 "$TCRUN" "$BUILD/bench/gpt2-124m.tca" --device cuda --steps 3 \
      --data /tmp/tc-bench-tokens.bin >"$OUT/bench/profile.txt" 2>&1 ||
      echo "   (the profile run failed: see $OUT/bench/profile.txt)"
  fi
  if [ "$TORCH" = 1 ]; then
    python3 "$ROOT/bench/gpt2_torch.py" --steps 20 >"$OUT/bench/torch.jsonl" 2>"$OUT/bench/torch.log" ||
      echo "   (the PyTorch side stopped early: see $OUT/bench/torch.log)"
  fi
  python3 - "$OUT/bench" "$BUILD/bench" <<'PY'
import json, re, statistics, sys
out, bdir = sys.argv[1], sys.argv[2]
try:
    tc = [json.loads(l) for l in open(f"{out}/tc.jsonl") if l.strip()]
except OSError:
    tc = []
rows = []
if tc and "tokens_per_s" in tc[0]:
    timed = [r["tokens_per_s"] for r in tc[5:]] or [r["tokens_per_s"] for r in tc]
    log = open(f"{out}/tc.log").read()
    dm = re.search(r"\((\d+) bytes\); cudaMemGetInfo saw (-?\d+) bytes", log)
    mem = int(dm.group(2)) / 2**30 if dm else float("nan")
    comp = open(f"{bdir}/compile_seconds").read().strip()
    mfu = [r["mfu"] for r in tc[5:] if r.get("mfu") is not None]
    hfu = [r["hfu"] for r in tc[5:] if r.get("hfu") is not None]
    util = f", MFU {statistics.median(mfu):.1%} HFU {statistics.median(hfu):.1%}" if mfu and hfu else ""
    rows.append(["tc", statistics.median(timed), mem, f"compile {comp} s (on the CPU machine)",
                 f"loss {tc[0]['loss']:.3f} -> {tc[-1]['loss']:.3f}{util}"])
try:
    for l in open(f"{out}/torch.jsonl"):
        if l.strip():
            r = json.loads(l)
            rows.append([r.get("framework", "torch").replace("pytorch-", "torch "), r.get("tokens_per_s", float("nan")),
                         r.get("peak_mem_gib", r.get("peak_memory_gib", float("nan"))),
                         f"warm-up {r.get('compile_s', r.get('warmup_s', '?'))} s", ""])
except OSError:
    pass
base = {r[0]: r[1] for r in rows}
print()
print("== bench: GPT-2 124M, batch 16 x 1024, bf16, AdamW (tokens/s: median of timed steps)")
for r in rows:
    ratio = " ".join(f"{r[1] / v:.2f}x {k}" for k, v in base.items() if k != r[0] and k.startswith("torch") and v)
    print(f"  {r[0]:<14} {r[1]:>10.0f} tok/s  peak {r[2]:6.2f} GiB  {r[3]}  {r[4]}  {ratio if r[0] == 'tc' else ''}")
PY
fi
echo
echo "gpu-check: $gen_line"
echo "gpu-check: $tiny_line"
echo "gpu-check: $loop_line"
echo "gpu-check: $resume_line"
echo "gpu-check: $tuned_line"
echo "gpu-check: $exp_resume_line"
echo "gpu-check: $capi_line"
echo "gpu-check: $eval_line"
echo "gpu-check: $check_line"
echo "gpu-check: $errors_line"
echo "gpu-check: $sanitizer_line"
extra_rc=0
for line in "$resume_line" "$tuned_line" "$exp_resume_line" "$capi_line" "$eval_line" "$check_line" "$errors_line" "$sanitizer_line" "$loop_line"; do
  case "$line" in *FAIL*) extra_rc=1 ;; esac
done
[ "$py_rc" -eq 0 ] && [ "$gen_rc" -eq 0 ] && [ "$fx_rc" -eq 0 ] && [ "$bench_rc" -eq 0 ] &&
  [ "$extra_rc" -eq 0 ]
