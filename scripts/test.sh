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

total_pass=0; total_fail=0; total_skip=0
add() { total_pass=$((total_pass + $1)); total_fail=$((total_fail + $2)); total_skip=$((total_skip + ${3:-0})); }

# --- lit --------------------------------------------------------------------
/usr/lib/llvm-22/bin/lit -sv "$BUILD/test" >"$LOGS/lit.log" 2>&1
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

# --- ONNX node conformance ----------------------------------------------------
"$BUILD/bin/tc-conformance" /usr/share/libonnx-testdata/data/node \
  --report "$LOGS/conformance.txt" --min-pass 466 >"$LOGS/conformance.log" 2>&1
cf_rc=$?
cline=$(grep -E '^[0-9]+ passed, [0-9]+ failed, [0-9]+ skipped' "$LOGS/conformance.log" | tail -1)
if [ -n "$cline" ]; then
  cp_=$(echo "$cline" | awk '{print $1}'); cf_=$(echo "$cline" | awk '{print $3}'); cs_=$(echo "$cline" | awk '{print $5}')
else
  cp_=0; cf_=1; cs_=0
fi
if [ $cf_rc -ne 0 ] && [ "$cf_" -eq 0 ]; then cf_=1; fi
grep -E '^FAIL' "$LOGS/conformance.log" | head -50
tail -3 "$LOGS/conformance.log"
echo "onnx conformance: $cp_ passed, $cf_ failed, $cs_ skipped"
add "$cp_" "$cf_" "$cs_"

# --- ONNX 1.23 node conformance (opsets up to 28) -------------------------------
# The onnx release's own node tests, written from its Python test cases; 0
# wrong results allowed, and the per-op table (passed / refused / wrong) in
# the log. Skipped (and counted as such) where the pinned onnx is missing.
NODE23="$BUILD/onnx-node-tests"
if python3 "$ROOT/scripts/make_node_tests.py" "$NODE23" >"$LOGS/node23-gen.log" 2>&1; then
  "$BUILD/bin/tc-conformance" "$NODE23" --by-op --report "$LOGS/conformance23.txt" \
    --min-pass 1195 >"$LOGS/conformance23.log" 2>&1
  c23_rc=$?
  cline=$(grep -E '^[0-9]+ passed, [0-9]+ failed, [0-9]+ skipped' "$LOGS/conformance23.log" | tail -1)
  if [ -n "$cline" ]; then
    c23p=$(echo "$cline" | awk '{print $1}'); c23f=$(echo "$cline" | awk '{print $3}'); c23s=$(echo "$cline" | awk '{print $5}')
  else
    c23p=0; c23f=1; c23s=0
  fi
  if [ $c23_rc -ne 0 ] && [ "$c23f" -eq 0 ]; then c23f=1; fi
  grep -E '^FAIL|WRONG|only [0-9]+ passed' "$LOGS/conformance23.log" | head -50
else
  echo "onnx 1.23 node tests not generated (see $LOGS/node23-gen.log)"
  c23p=0; c23f=0; c23s=1
fi
echo "onnx 1.23 conformance: $c23p passed, $c23f failed, $c23s skipped"
add "$c23p" "$c23f" "$c23s"

# --- fuzzing: libFuzzer + ASan/UBSan over the byte readers ----------------------
# Separate clang-22 build (build-fuzz); the committed regression inputs, then
# a fixed number of mutations per target (scripts/fuzz.sh).
TC_FUZZ_DIR="$BUILD/fuzz" bash "$ROOT/scripts/fuzz.sh" >"$LOGS/fuzz.log" 2>&1
fline=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$LOGS/fuzz.log" | tail -1)
fp=$(echo "${fline:-0 passed, 1 failed}" | awk '{print $1}'); ff=$(echo "${fline:-0 passed, 1 failed}" | awk '{print $3}')
grep -E 'FAILED|not found|build failed' "$LOGS/fuzz.log" | head -10
echo "fuzz: $fp passed, $ff failed"
add "$fp" "$ff" 0

echo "logs in $LOGS"
echo "$total_pass passed, $total_fail failed, $total_skip skipped"
[ "$total_fail" -eq 0 ]
