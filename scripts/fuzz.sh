#!/usr/bin/env bash
# Builds the libFuzzer targets (test/fuzz/fuzz_*.cpp) with clang-22 and
# ASan + UBSan, then runs each:
#   1. over its committed regression inputs (test/fuzz/regressions/<target>/:
#      every finding becomes one) and its seeds (test data of its format);
#   2. for a fixed number of mutations (TC_FUZZ_RUNS, default 2,000,000; the
#      ONNX importer, about 100 times slower an input, TC_FUZZ_ONNX_RUNS,
#      default 60,000: about 2 minutes) from those seeds, with a per-input time and
#      memory limit.
# A crash, a sanitizer report, a time-out or an allocation beyond the limit
# is a failure (libFuzzer writes the input to $TC_FUZZ_DIR/crash-* for a new
# regression file). Last line: "N passed, N failed" (one per target).
#
#   bash scripts/fuzz.sh            # build + run
#
# Measured from a fresh clone on the 2-core development machine (2026-12-01,
# shared with other builds, load about 3): the byte readers' build and runs
# 7 min 43 s, the sanitizer build 6 min 6 s, fuzz_onnx 47 s at 30,000 runs
# (650 inputs/s); with scripts/sanitized_tools.sh (26 s) 15 min 2 s wall,
# 16 min 47 s CPU. 60,000 importer runs alone: 2 min 13 s (450 inputs/s),
# so about 16.5 min in all. CI allows the whole section 20 minutes.
#
# The byte readers' targets (artifact, safetensors, npy, json) need no MLIR:
# they are built here into ${TC_FUZZ_DIR:-build-fuzz} from the runtime's base
# and schema sources plus one file per target. fuzz_onnx runs tc's ONNX import, so it
# comes from the CMake sanitizer build (${TC_ASAN_DIR:-build-asan},
# scripts/build_asan.sh: tc's sources instrumented, MLIR and libonnx not),
# which also gives the sanitized tools of scripts/sanitized_tools.sh.
set -uo pipefail
shopt -s nullglob # an empty regression folder adds no arguments
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
OUT="${TC_FUZZ_DIR:-$ROOT/build-fuzz}"
ASAN="${TC_ASAN_DIR:-$ROOT/build-asan}"
# Absolute: the fuzzers run from inside $OUT (a relative TC_BUILD_DIR, e.g.
# TC_BUILD_DIR=build-cuda scripts/test.sh, lost every log there).
mkdir -p "$OUT" "$ASAN"
OUT="$(cd "$OUT" && pwd)"
ASAN="$(cd "$ASAN" && pwd)"
RUNS="${TC_FUZZ_RUNS:-2000000}"
ONNX_RUNS="${TC_FUZZ_ONNX_RUNS:-60000}"
CXX="${TC_FUZZ_CXX:-clang++-22}"
mkdir -p "$OUT/obj"
if ! command -v "$CXX" >/dev/null; then
  echo "fuzz: $CXX not found (scripts/setup.sh installs clang-22 and libclang-rt-22-dev)"
  echo "0 passed, 1 failed"
  exit 1
fi
# fuzz_onnx inlines LLVM's allocators into instrumented code that MLIR (not
# instrumented) shares: see ASAN_OPTIONS in scripts/sanitized_tools.sh.
export ASAN_OPTIONS="allow_user_poisoning=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
FLAGS=(-std=c++17 -O1 -g -fno-omit-frame-pointer -I"$ROOT"
       -fsanitize=address,undefined -fno-sanitize-recover=undefined)

# The runtime's base and schema sources, instrumented (rebuilt when a source
# is newer).
objs=()
for src in "$ROOT"/runtime/src/base/*.cpp "$ROOT"/runtime/src/schema/*.cpp; do
  obj="$OUT/obj/$(basename "${src%.cpp}").o"
  if [ ! -f "$obj" ] || [ "$src" -nt "$obj" ] || [ -n "$(find "$ROOT/runtime/src/base" "$ROOT/runtime/src/schema" -name '*.h' -newer "$obj")" ]; then
    "$CXX" "${FLAGS[@]}" -fsanitize=fuzzer-no-link -c "$src" -o "$obj" || { echo "fuzz: cannot compile $src"; echo "0 passed, 1 failed"; exit 1; }
  fi
  objs+=("$obj")
done

# The ONNX seeds, gathered (not committed twice): the binary models of
# test/ and the node tests listed in test/fuzz/seeds/onnx-node-tests.txt.
# Those up to ONNX_MAX_LEN bytes seed the mutations; the fixtures above it
# (up to 1 MB) run once, with the regression inputs.
ONNX_MAX_LEN=16384
rm -rf "$OUT/seeds/onnx" "$OUT/seeds/onnx-large"
mkdir -p "$OUT/seeds/onnx" "$OUT/seeds/onnx-large"
for m in "$ROOT"/test/frontends/onnx/Inputs/*.onnx "$ROOT"/test/fixtures/*.onnx; do
  sz=$(stat -c %s "$m")
  if [ "$sz" -le $ONNX_MAX_LEN ]; then cp "$m" "$OUT/seeds/onnx/"
  elif [ "$sz" -le 1048576 ]; then cp "$m" "$OUT/seeds/onnx-large/"; fi
done
while read -r t; do
  case "$t" in ''|'#'*) continue ;; esac
  cp "/usr/share/libonnx-testdata/data/node/$t/model.onnx" "$OUT/seeds/onnx/$t.onnx"
done <"$ROOT/test/fuzz/seeds/onnx-node-tests.txt"

# seeds TARGET: the test data of the target's format.
seeds() {
  case "$1" in
    artifact) echo "$ROOT/test/fuzz/seeds/artifact" ;;
    safetensors) echo "$ROOT/test/fuzz/seeds/safetensors" ;;
    npy) echo "$ROOT/test/fuzz/seeds/npy" ;;
    json) echo "$ROOT/test/fuzz/seeds/safetensors" ;; # state.json (and the .safetensors headers)
    onnx) echo "$OUT/seeds/onnx" ;;
  esac
}

pass=0; fail=0
for t in artifact safetensors npy json onnx; do
  bin="$OUT/fuzz_$t"; runs=$RUNS; max_len=65536; once=()
  if [ $t = onnx ]; then
    bin="$ASAN/bin/fuzz_onnx"; runs=$ONNX_RUNS; max_len=$ONNX_MAX_LEN
    once=("$OUT"/seeds/onnx-large/*)
    if ! TC_ASAN_DIR="$ASAN" bash "$ROOT/scripts/build_asan.sh" >"$OUT/build_asan.log" 2>&1; then
      echo "fuzz_$t: build failed (log: $OUT/build_asan.log)"; fail=$((fail + 1)); continue
    fi
  elif ! "$CXX" "${FLAGS[@]}" -fsanitize=fuzzer "$ROOT/test/fuzz/fuzz_$t.cpp" "${objs[@]}" -o "$bin"; then
    echo "fuzz_$t: build failed"; fail=$((fail + 1)); continue
  fi
  reg="$ROOT/test/fuzz/regressions/$t"
  corpus="$OUT/corpus/$t"
  mkdir -p "$corpus" "$reg"
  log="$OUT/fuzz_$t.log"
  ok=1
  touch "$OUT/.start_$t" # the inputs libFuzzer writes from here on are this run's
  # 1. the regression inputs (and seeds too large to mutate), each once
  if [ -n "$(ls -A "$reg")" ] || [ ${#once[@]} -gt 0 ]; then
    "$bin" -rss_limit_mb=2048 -timeout=10 "$reg"/* "${once[@]}" >"$log.regressions" 2>&1 || ok=0
  fi
  # 2. mutations from the seeds (the corpus folder keeps what it learns)
  if [ $ok = 1 ]; then
    (cd "$OUT" && "$bin" -runs="$runs" -max_len=$max_len -rss_limit_mb=2048 -timeout=10 \
       -malloc_limit_mb=1024 "$corpus" "$(seeds $t)" "$reg" >"$log" 2>&1) || ok=0
  fi
  if [ $ok = 1 ]; then
    echo "fuzz_$t: ok ($(ls "$reg" | wc -l) regression inputs, $runs runs)"
    pass=$((pass + 1))
  else
    echo "fuzz_$t: FAILED (log: $log; libFuzzer writes the input to $OUT/crash-*, leak-*, timeout-* or oom-*)"
    # What went wrong, where the summary of a CI run shows it: the
    # sanitizer's or libFuzzer's error lines, else the log's last lines (a
    # process killed from outside prints none), and the input itself when
    # it is small enough to paste (base64) into a regression file.
    if ! grep -h -m3 -E "ERROR|runtime error|SUMMARY|Slow unit" "$log.regressions" "$log" 2>/dev/null |
        sed "s/^/fuzz_$t: error: /"; then
      tail -n 3 "$log" 2>/dev/null | sed "s/^/fuzz_$t: error: (no error line; the log ends) /"
    fi
    for f in "$OUT"/crash-* "$OUT"/leak-* "$OUT"/timeout-* "$OUT"/oom-* "$OUT"/slow-unit-*; do
      [ "$f" -nt "$OUT/.start_$t" ] || continue
      sz=$(stat -c %s "$f")
      if [ "$sz" -le 6144 ]; then
        echo "fuzz_$t: error: input $(basename "$f") ($sz bytes), base64: $(base64 -w0 "$f")"
      else
        echo "fuzz_$t: error: input $(basename "$f") ($sz bytes, too large to print)"
      fi
    done
    fail=$((fail + 1))
  fi
done
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
