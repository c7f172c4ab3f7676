#!/usr/bin/env bash
# Runs every tc test suite: lit (passes, importer, tools), GoogleTest (runtime)
# and the ONNX node conformance tests. Installs and builds what is missing
# first. The last line is "N passed, N failed" summed over all suites; the exit
# status is non-zero if any test failed.
set -uo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD="${TC_BUILD_DIR:-$ROOT/build}"
LOGS="$BUILD/test-logs"

bash "$ROOT/scripts/setup.sh" || { echo "setup failed"; echo "0 passed, 1 failed"; exit 1; }
if ! bash "$ROOT/scripts/build.sh"; then
  echo "build failed"; echo "0 passed, 1 failed"; exit 1
fi
mkdir -p "$LOGS"
# Every suite compiles into a compile cache of its own, emptied first (never
# the user's ~/.cache/tc; lit sets its own in the build's test folder).
export TC_CACHE_DIR="$BUILD/test-cache"
rm -rf "$TC_CACHE_DIR"

total_pass=0; total_fail=0; total_skip=0
add() { total_pass=$((total_pass + $1)); total_fail=$((total_fail + $2)); total_skip=$((total_skip + ${3:-0})); }

# --- lit --------------------------------------------------------------------
/usr/lib/llvm-22/bin/lit -sv --show-unsupported "$BUILD/test" >"$LOGS/lit.log" 2>&1
lit_rc=$?
lp=$(grep -E '^ +Passed *:' "$LOGS/lit.log" | grep -oE '[0-9]+' | head -1); lp=${lp:-0}
lf=0
for k in Failed Unresolved 'Unexpectedly Passed' 'Timed Out'; do
  n=$(grep -E "^ +$k *:" "$LOGS/lit.log" | grep -oE ':\s*[0-9]+' | grep -oE '[0-9]+' | head -1)
  lf=$((lf + ${n:-0}))
done
lu=$(grep -E '^ +(Unsupported|Expectedly Failed) *:' "$LOGS/lit.log" | grep -oE ':\s*[0-9]+' | grep -oE '[0-9]+' | awk '{s += $1} END {print s + 0}')
if [ $lit_rc -ne 0 ] && [ $lf -eq 0 ]; then lf=1; fi
grep -E '^(FAIL|UNRESOLVED|XPASS|TIMEOUT):' "$LOGS/lit.log"
# With a CUDA toolkit the SASS tests (cuobjdump, nvdisasm: setup.sh installs
# them from PyPI) must run, not be skipped: sm_120a is checked only there.
if [ -d /usr/local/cuda ]; then
  sass=$(awk '/^Unsupported Tests/ { u = 1; next } /^[^ ]/ { u = 0 } u && /TC :: codegen\/cuobjdump/ { n++ } END { print n + 0 }' "$LOGS/lit.log")
  if [ "$sass" -gt 0 ]; then
    echo "lit: FAIL: $sass SASS tests (test/codegen/cuobjdump*) were UNSUPPORTED: cuobjdump/nvdisasm missing (scripts/setup.sh installs nvidia-cuda-cuobjdump and nvidia-cuda-nvdisasm)"
    lf=$((lf + sass)); lu=$((lu - sass))
  fi
fi
echo "lit: $lp passed, $lf failed, $lu skipped"
add "$lp" "$lf" "$lu"

# --- GoogleTest (through ctest) -----------------------------------------------
ctest --test-dir "$BUILD" --output-on-failure -j2 >"$LOGS/ctest.log" 2>&1
ct_rc=$?
line=$(grep -E 'tests passed, [0-9]+ tests? failed out of [0-9]+' "$LOGS/ctest.log" | tail -1)
if [ -n "$line" ]; then
  cfail=$(echo "$line" | sed -E 's/.* ([0-9]+) tests? failed out of ([0-9]+).*/\1/')
  ctot=$(echo "$line" | sed -E 's/.* ([0-9]+) tests? failed out of ([0-9]+).*/\2/')
  cskip=$(grep -cE '\*\*\*Skipped|Not Run' "$LOGS/ctest.log")
  cpass=$((ctot - cfail - cskip))
else
  cpass=0; cfail=$([ $ct_rc -eq 0 ] && echo 0 || echo 1); cskip=0
fi
grep -E '(\*\*\*Failed|\*\*\*Exception|Timeout)' "$LOGS/ctest.log"
echo "googletest: $cpass passed, $cfail failed, $cskip skipped"
add "$cpass" "$cfail" "$cskip"

# --- the Python scripts' own tests (test/scripts: check_tensorboard.py,
# plot_metrics.py, with tc's TensorBoard writer from the GoogleTest binary)
# and tc-service's (test_service.py: the server on a loopback port, concurrent
# clients during a training job) and tc-run's export (test_export.py: onnx's
# checker and reference evaluator, onnxruntime, torch's safetensors) --
TC_BUILD_DIR="$BUILD" python3 -m unittest discover -s "$ROOT/test/scripts" -v >"$LOGS/scripts.log" 2>&1
py_rc=$?
py_ran=$(grep -oE '^Ran [0-9]+ tests?' "$LOGS/scripts.log" | grep -oE '[0-9]+' | tail -1); py_ran=${py_ran:-0}
py_skip=$(grep -oE 'skipped=[0-9]+' "$LOGS/scripts.log" | grep -oE '[0-9]+' | tail -1); py_skip=${py_skip:-0}
py_fail=$(grep -oE '(failures|errors)=[0-9]+' "$LOGS/scripts.log" | grep -oE '[0-9]+' | awk '{s += $1} END {print s + 0}')
if [ $py_rc -ne 0 ] && [ "$py_fail" -eq 0 ]; then py_fail=1; fi
grep -E '^(FAIL|ERROR):' "$LOGS/scripts.log" | head -20
echo "scripts: $((py_ran - py_fail - py_skip)) passed, $py_fail failed, $py_skip skipped"
add "$((py_ran - py_fail - py_skip))" "$py_fail" "$py_skip"

# conformance LABEL DIR REPORT MIN_PASS [FLAGS...]: runs tc-conformance on DIR,
# prints its failures and "LABEL: N passed, N failed, N skipped", adds to the totals.
conformance() {
  local label=$1 dir=$2 name=$3 min=$4; shift 4
  "$BUILD/bin/tc-conformance" "$dir" --report "$LOGS/$name.txt" --min-pass "$min" "$@" \
    >"$LOGS/$name.log" 2>&1
  local rc=$? p=0 f=1 s=0
  local line=$(grep -E '^[0-9]+ passed, [0-9]+ failed, [0-9]+ skipped' "$LOGS/$name.log" | tail -1)
  if [ -n "$line" ]; then
    p=$(echo "$line" | awk '{print $1}'); f=$(echo "$line" | awk '{print $3}'); s=$(echo "$line" | awk '{print $5}')
  fi
  if [ $rc -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
  grep -E '^FAIL|WRONG|only [0-9]+ passed' "$LOGS/$name.log" | head -50
  echo "$label: $p passed, $f failed, $s skipped"
  add "$p" "$f" "$s"
}

# --- ONNX node conformance (Debian's ONNX 1.12 test data) ----------------------
conformance "onnx conformance" /usr/share/libonnx-testdata/data/node conformance 466

# --- ONNX 1.23 node conformance (opsets up to 28) -------------------------------
# The onnx release's own node tests, written from its Python test cases; 0
# wrong results allowed, and the per-op table (passed / refused / wrong) in
# the log. Skipped (and counted as such) where the pinned onnx is missing.
NODE23="$BUILD/onnx-node-tests"
if python3 "$ROOT/scripts/make_node_tests.py" "$NODE23" >"$LOGS/node23-gen.log" 2>&1; then
  conformance "onnx 1.23 conformance" "$NODE23" conformance23 1195 --by-op
else
  echo "onnx 1.23 node tests not generated (see $LOGS/node23-gen.log)"
  echo "onnx 1.23 conformance: 0 passed, 0 failed, 1 skipped"
  add 0 0 1
fi

# script_suite LABEL LOG PATTERN: reads the "N passed, N failed" last line of a
# script's LOG (none: 1 failed), prints the LOG lines matching PATTERN and
# "LABEL: N passed, N failed", adds to the totals.
script_suite() {
  local line=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$2" | tail -1)
  local p=$(echo "${line:-0 passed, 1 failed}" | awk '{print $1}') f=$(echo "${line:-0 passed, 1 failed}" | awk '{print $3}')
  grep -E "$3" "$2" | head -10
  echo "$1: $p passed, $f failed"
  add "$p" "$f" 0
}

# --- fuzzing: libFuzzer + ASan/UBSan over the byte readers and the importer -----
# Separate clang-22 builds (build/fuzz: the byte readers; build/asan: the
# CMake sanitizer build for fuzz_onnx and the tools); the committed
# regression inputs, then a fixed number of mutations per target
# (scripts/fuzz.sh).
TC_FUZZ_DIR="$BUILD/fuzz" TC_ASAN_DIR="$BUILD/asan" bash "$ROOT/scripts/fuzz.sh" >"$LOGS/fuzz.log" 2>&1
script_suite fuzz "$LOGS/fuzz.log" 'FAILED|not found|build failed|^fuzz_[a-z]+: error: '

# --- sanitized tools: tc-compile / tc-run of build/asan over the corpus ---------
# Every fuzz regression input, the models of test/ and the fixtures through
# the ASan + UBSan tools: exit 0 or 2 with an error, never a sanitizer report
# (scripts/sanitized_tools.sh).
TC_ASAN_DIR="$BUILD/asan" bash "$ROOT/scripts/sanitized_tools.sh" >"$LOGS/sanitized-tools.log" 2>&1
script_suite "sanitized tools" "$LOGS/sanitized-tools.log" '^FAIL|build failed'

echo "logs in $LOGS"
echo "$total_pass passed, $total_fail failed, $total_skip skipped"
[ "$total_fail" -eq 0 ]
