#!/usr/bin/env bash
# Runs the sanitizer build's tools (scripts/build_asan.sh: clang-22, ASan +
# UBSan, a UB report aborts, -O1) over the fuzz corpus and the fixtures:
#   1. tc-compile on every model: the committed ONNX regression inputs
#      (test/fuzz/regressions/onnx/), the binary and textual models of test/,
#      the node tests that seed fuzz_onnx (test/fuzz/seeds/onnx-node-tests.txt):
#      exit 0, or 2 with a "tc-compile: error:" line;
#      each fixture of test/fixtures compiled for training (--input 2x16), for
#      the CPU and for sm_90 (the GPU lowering, memory plan and report): the
#      same (one cannot be trained: its exporter dropped parameters);
#   2. tc-run on every artifact (the committed artifact regressions and seeds,
#      each fixture's artifact) with no feeds: exit 2 with an error line; each
#      fixture's artifact trained 1 step on its own inputs: exit 0;
#   3. feeds and checkpoints: the .npy regressions as a feed (exit 2); a
#      fixture trained with --save, resumed (exit 0); the committed state.json
#      / safetensors regressions put into a copy of that checkpoint and
#      resumed, and the safetensors ones as --init: exit 2.
# A sanitizer report (ASan, LeakSanitizer, UBSan), a crash, another exit
# status or a time-out is a failure. Last line: "N passed, N failed" (one
# per case); the log of each failure is in $OUT/logs.
#
#   bash scripts/sanitized_tools.sh    # builds build-asan if needed, then
#                                      # about 160 runs: 26 s on 2 cores
#
# The clean sanitizer build (scripts/build_asan.sh builds only tc-compile,
# tc-run and fuzz_onnx; a full build would add three tools nobody runs
# here), measured with `time` on the 2-core development machine on
# 2026-12-01: 6 min 15 s wall, 8 min 7 s user CPU.
set -uo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
ASAN="${TC_ASAN_DIR:-$ROOT/build-asan}"
OUT="$ASAN/sanitized-tools"
BIN="$ASAN/bin"
rm -rf "$OUT"
mkdir -p "$OUT/logs" "$OUT/work"
if ! TC_ASAN_DIR="$ASAN" bash "$ROOT/scripts/build_asan.sh" >"$OUT/build.log" 2>&1; then
  echo "sanitized tools: build failed (log: $OUT/build.log)"
  tail -20 "$OUT/build.log"
  echo "0 passed, 1 failed"
  exit 1
fi
# A report exits 86 (never one of the tools' own statuses), leaks included.
# allow_user_poisoning=0: LLVM's BumpPtrAllocator poisons the unused rest of
# a slab when an instrumented TU (tc's) inlines it, and libMLIR (not
# instrumented) later hands out memory from that slab without unpoisoning:
# without the option, reading an MLIR type created there is a false
# use-after-poison (seen in tc-compile --target sm_90).
export ASAN_OPTIONS="exitcode=86:detect_leaks=1:allow_user_poisoning=0"
export LSAN_OPTIONS="exitcode=86"
export UBSAN_OPTIONS="exitcode=86:print_stacktrace=1:halt_on_error=1"
W="$OUT/work"
pass=0; fail=0; n=0

# check NAME WANT CMD...: runs CMD (at most 600 s); passes when its exit
# status is one of WANT ("0", "2" or "0 2"), nothing in its output is a
# sanitizer report and an exit 2 printed an "error:" line.
check() {
  local name=$1 want=$2; shift 2
  n=$((n + 1))
  local log="$OUT/logs/$n.log"
  echo "# $name: $*" >"$log"
  timeout 600 "$@" >>"$log" 2>&1
  local rc=$? ok=1 why=""
  if grep -qE 'ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:|SUMMARY: (Address|Leak|UndefinedBehavior)Sanitizer' "$log"; then
    ok=0; why="sanitizer report"
  elif [[ " $want " != *" $rc "* ]]; then
    ok=0; why="exit $rc, expected $want"
  elif [ $rc = 2 ] && ! grep -q 'error:' "$log"; then
    ok=0; why="exit 2 without an error line"
  fi
  if [ $ok = 1 ]; then
    pass=$((pass + 1))
  else
    fail=$((fail + 1))
    echo "FAIL $name ($why; log: $log)"
    grep -m3 -E 'ERROR:|runtime error|SUMMARY|error:' "$log"
  fi
}

# --- 1. models ------------------------------------------------------------------
for m in "$ROOT"/test/fuzz/regressions/onnx/* "$ROOT"/test/frontends/onnx/Inputs/*.onnx; do
  [ -f "$m" ] || continue
  check "tc-compile ${m#$ROOT/}" "0 2" "$BIN/tc-compile" "$m" -o "$W/m.tca"
done
while read -r m; do
  check "tc-compile ${m#$ROOT/}" "0 2" "$BIN/tc-compile" "$m" -o "$W/m.tca"
done < <(find "$ROOT/test" -name '*.onnxtxt' | sort)
while read -r t; do
  case "$t" in ''|'#'*) continue ;; esac
  check "tc-compile node test $t" "0 2" "$BIN/tc-compile" \
    "/usr/share/libonnx-testdata/data/node/$t/model.onnx" -o "$W/m.tca"
done <"$ROOT/test/fuzz/seeds/onnx-node-tests.txt"

# feeds BASE: the --feed arguments of fixture BASE (test/fixtures/BASE.*.npy).
feeds() {
  local f
  for f in "$ROOT"/test/fixtures/"$1".{input_ids,labels,attention_mask}.npy; do
    [ -f "$f" ] || continue
    local k=${f%.npy}; k=${k##*.}
    echo "--feed $k=$f"
  done
}
fixtures=()
for m in "$ROOT"/test/fixtures/*.onnx; do
  [ "$(stat -c %s "$m")" -le 1048576 ] || continue
  f=$(basename "$m" .onnx); base=${f%%.*}
  shapes=()
  for a in $(feeds "$base" | sed -E 's/--feed ([a-z_]+)=.*/\1/'); do shapes+=(--input "$a=2x16"); done
  check "tc-compile --train test/fixtures/$f.onnx" "0 2" \
    "$BIN/tc-compile" "$m" "${shapes[@]}" --train -o "$W/$f.tca"
  [ -f "$W/$f.tca" ] && fixtures+=("$f")
  check "tc-compile --train --target sm_90 test/fixtures/$f.onnx" "0 2" \
    "$BIN/tc-compile" "$m" "${shapes[@]}" --train --target sm_90 --report memory --no-batch-search
  # The levers not (yet) the default (tc-compile --experimental), all of them.
  check "tc-compile --train --target sm_90 --bf16 --experimental=... test/fixtures/$f.onnx" "0 2" \
    "$BIN/tc-compile" "$m" "${shapes[@]}" --train --target sm_90 --bf16 \
    --experimental=wgmma-attention,side-stream --report memory --no-batch-search
done

# --- 2. artifacts ---------------------------------------------------------------
for a in "$ROOT"/test/fuzz/regressions/artifact/* "$ROOT"/test/fuzz/seeds/artifact/*.tca; do
  [ -f "$a" ] || continue
  check "tc-run ${a#$ROOT/} --eval" "2" "$BIN/tc-run" "$a" --eval
done
for f in "${fixtures[@]}"; do
  base=${f%%.*}
  check "tc-run $f.tca --eval (no feeds)" "2" "$BIN/tc-run" "$W/$f.tca" --eval
  # shellcheck disable=SC2046
  check "tc-run $f.tca --steps 1" "0" "$BIN/tc-run" "$W/$f.tca" --steps 1 $(feeds "$base")
done

# --- 3. feeds and checkpoints ---------------------------------------------------
ck="gpt2.ts"
if [ -f "$W/$ck.tca" ]; then
  # shellcheck disable=SC2046
  check "tc-run $ck.tca --steps 1 --save" "0" "$BIN/tc-run" "$W/$ck.tca" --steps 1 $(feeds gpt2) --save "$W/ck"
  # shellcheck disable=SC2046
  check "tc-run $ck.tca --resume" "0" "$BIN/tc-run" "$W/$ck.tca" --steps 2 $(feeds gpt2) --resume "$W/ck"
  for bad in "$ROOT"/test/fuzz/regressions/npy/*; do
    check "tc-run --feed input_ids=${bad#$ROOT/}" "2" "$BIN/tc-run" "$W/$ck.tca" --eval \
      --feed "input_ids=$bad" --feed "labels=$ROOT/test/fixtures/gpt2.labels.npy"
  done
  for bad in "$ROOT"/test/fuzz/regressions/json/* "$ROOT"/test/fuzz/regressions/safetensors/*; do
    [ -f "$bad" ] || continue
    rm -rf "$W/bad" && cp -r "$W/ck" "$W/bad"
    case "$bad" in
      *.json) cp "$bad" "$W/bad/state.json" ;;
      *) cp "$bad" "$W/bad/model.safetensors" ;;
    esac
    # shellcheck disable=SC2046
    check "tc-run --resume with ${bad#$ROOT/}" "2" "$BIN/tc-run" "$W/$ck.tca" --steps 3 $(feeds gpt2) --resume "$W/bad"
    case "$bad" in
      *.safetensors)
        # shellcheck disable=SC2046
        check "tc-run --init ${bad#$ROOT/}" "2" "$BIN/tc-run" "$W/$ck.tca" --steps 1 $(feeds gpt2) --init "$bad" ;;
    esac
  done
else
  n=$((n + 1)); fail=$((fail + 1)); echo "FAIL checkpoints: no $ck artifact to train"
fi

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
