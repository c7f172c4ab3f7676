#!/usr/bin/env bash
# Builds the libFuzzer targets (test/fuzz/fuzz_*.cpp) with clang-22 and
# ASan + UBSan into ${TC_FUZZ_DIR:-build-fuzz}, then runs each:
#   1. over its committed regression inputs (test/fuzz/regressions/<target>/:
#      every finding becomes one) and its seeds (test data of its format);
#   2. for a fixed number of mutations (TC_FUZZ_RUNS, default 2,000,000) from
#      those seeds, with a per-input time and memory limit.
# A crash, a sanitizer report, a time-out or an allocation beyond the limit
# is a failure (libFuzzer writes the input to build-fuzz/crash-* for a new
# regression file). Last line: "N passed, N failed" (one per target).
#
#   bash scripts/fuzz.sh            # build + run (about 3 minutes on 2 cores)
#
# The targets read bytes only (no MLIR), so this build is separate from the
# main one and small: the runtime's base sources plus one file per target.
set -uo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
OUT="${TC_FUZZ_DIR:-$ROOT/build-fuzz}"
RUNS="${TC_FUZZ_RUNS:-2000000}"
CXX="${TC_FUZZ_CXX:-clang++-22}"
mkdir -p "$OUT/obj"
if ! command -v "$CXX" >/dev/null; then
  echo "fuzz: $CXX not found (scripts/setup.sh installs clang-22 and libclang-rt-22-dev)"
  echo "0 passed, 1 failed"
  exit 1
fi
FLAGS=(-std=c++17 -O1 -g -fno-omit-frame-pointer -I"$ROOT"
       -fsanitize=address,undefined -fno-sanitize-recover=undefined)

# The runtime's base sources, instrumented (rebuilt when a source is newer).
objs=()
for src in "$ROOT"/runtime/src/base/*.cpp; do
  obj="$OUT/obj/$(basename "${src%.cpp}").o"
  if [ ! -f "$obj" ] || [ "$src" -nt "$obj" ] || [ -n "$(find "$ROOT/runtime/src/base" -name '*.h' -newer "$obj")" ]; then
    "$CXX" "${FLAGS[@]}" -fsanitize=fuzzer-no-link -c "$src" -o "$obj" || { echo "fuzz: cannot compile $src"; echo "0 passed, 1 failed"; exit 1; }
  fi
  objs+=("$obj")
done

# seeds TARGET: the test data of the target's format.
seeds() {
  case "$1" in
    artifact) echo "$ROOT/test/fuzz/seeds/artifact" ;;
    safetensors) echo "$ROOT/test/fuzz/seeds/safetensors" ;;
    npy) echo "$ROOT/test/fuzz/seeds/npy" ;;
    json) echo "$ROOT/test/fuzz/seeds/safetensors" ;; # state.json (and the .safetensors headers)
  esac
}

pass=0; fail=0
for t in artifact safetensors npy json; do
  bin="$OUT/fuzz_$t"
  if ! "$CXX" "${FLAGS[@]}" -fsanitize=fuzzer "$ROOT/test/fuzz/fuzz_$t.cpp" "${objs[@]}" -o "$bin"; then
    echo "fuzz_$t: build failed"; fail=$((fail + 1)); continue
  fi
  reg="$ROOT/test/fuzz/regressions/$t"
  corpus="$OUT/corpus/$t"
  mkdir -p "$corpus" "$reg"
  log="$OUT/fuzz_$t.log"
  ok=1
  # 1. the regression inputs, each once
  if [ -n "$(ls -A "$reg")" ]; then
    "$bin" -rss_limit_mb=2048 -timeout=10 "$reg"/* >"$log.regressions" 2>&1 || ok=0
  fi
  # 2. mutations from the seeds (the corpus folder keeps what it learns)
  if [ $ok = 1 ]; then
    (cd "$OUT" && "$bin" -runs="$RUNS" -max_len=65536 -rss_limit_mb=2048 -timeout=10 \
       -malloc_limit_mb=1024 "$corpus" "$(seeds $t)" "$reg" >"$log" 2>&1) || ok=0
  fi
  if [ $ok = 1 ]; then
    echo "fuzz_$t: ok ($(grep -c . "$log.regressions" 2>/dev/null >/dev/null; ls "$reg" | wc -l) regression inputs, $RUNS runs)"
    pass=$((pass + 1))
  else
    echo "fuzz_$t: FAILED (log: $log; the input is in $OUT/crash-* or $OUT/leak-*)"
    grep -m3 -E "ERROR|runtime error|SUMMARY" "$log" "$log.regressions" 2>/dev/null
    fail=$((fail + 1))
  fi
done
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
