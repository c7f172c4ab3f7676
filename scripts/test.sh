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

echo "logs in $LOGS"
echo "$total_pass passed, $total_fail failed, $total_skip skipped"
[ "$total_fail" -eq 0 ]
