#!/usr/bin/env bash
# Proves that a change to the GPU half of the compiler changes nothing it
# emits: compiles every committed ONNX fixture (and the bench model, when its
# ONNX export is given) for sm_90 with --train, in fp32, bf16 and tf32
# variants, with two tc-compile binaries, and diffs `--emit=tcx` and
# `--emit=device` byte for byte. `--emit=device` lists every launch, library
# call and matmul with its buffers (space@offset:bytes), grid and block: the
# same text means the same GPU work.
#
#   scripts/check_tcx_identical.sh BASE_TC_COMPILE NEW_TC_COMPILE [OUT_DIR] [BENCH.onnx ...]
#   (the bench model: python3 bench/make_gpt2_onnx.py --out DIR)
#
# OUT_DIR (default /tmp/tcx-identical) gets base/ and new/ with one file per
# case; a case that fails to compile with both binaries is compared by its
# error text. Exit status 0 when every case is identical, 1 otherwise; the
# last line says how many cases were compared and how many differ.
set -uo pipefail
if [ $# -lt 2 ]; then
  sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
fi
BASE="$1" NEW="$2" OUT="${3:-/tmp/tcx-identical}"
shift $(($# < 3 ? $# : 3))
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
FX="$ROOT/test/fixtures"
mkdir -p "$OUT/base" "$OUT/new"

# name | model | extra flags
cases=()
for m in gpt2 llama fresh-gpt2 fresh-llama fresh-padded-llama; do
  for e in ts dynamo dynamo-noopt dynamo-op23; do
    f="$FX/$m.$e.onnx"
    [ -f "$f" ] || continue
    inputs="--input input_ids=2x16 --input labels=2x16"
    case "$m" in *padded*) inputs="$inputs --input attention_mask=2x16" ;; esac
    cases+=("$m.$e.fp32|$f|$inputs")
    cases+=("$m.$e.bf16|$f|$inputs --bf16")
  done
done
cases+=("gpt2.ts.tf32|$FX/gpt2.ts.onnx|--input input_ids=2x16 --input labels=2x16 --tf32")
cases+=("llama.dynamo.tf32|$FX/llama.dynamo.onnx|--input input_ids=2x16 --input labels=2x16 --tf32")
# The bench model (bench/make_gpt2_onnx.py) with the bench's flags
# (scripts/gpu-prepare.sh): its bf16 step at TC_BENCH_SHAPE (default
# 16x1024, as the bench compiles it; a smaller config needs its own
# sequence length), and bf16, fp32 and tf32 at 2 x 64.
bench="--no-weights --init-params normal:0.02 --optimizer adamw --lr 6e-4 --beta1 0.9 --beta2 0.95"
bench="$bench --weight-decay 0.1 --clip-grad-norm 1.0"
for b in "$@"; do
  n="bench.$(basename "$b" .onnx)"
  shape="${TC_BENCH_SHAPE:-16x1024}"
  cases+=("$n.step|$b|--input input_ids=$shape --input labels=$shape $bench --bf16")
  cases+=("$n.bf16|$b|--input input_ids=2x64 --input labels=2x64 $bench --bf16")
  cases+=("$n.fp32|$b|--input input_ids=2x64 --input labels=2x64 $bench")
  cases+=("$n.tf32|$b|--input input_ids=2x64 --input labels=2x64 $bench --tf32")
done

total=0 differ=0
for c in "${cases[@]}"; do
  IFS='|' read -r name model flags <<<"$c"
  for emit in tcx device; do
    total=$((total + 1))
    for side in base new; do
      bin="$BASE"
      [ "$side" = new ] && bin="$NEW"
      # shellcheck disable=SC2086
      "$bin" "$model" --target sm_90 --train $flags --emit=$emit \
        >"$OUT/$side/$name.$emit" 2>"$OUT/$side/$name.$emit.err"
      echo "rc=$?" >>"$OUT/$side/$name.$emit.err"
    done
    if cmp -s "$OUT/base/$name.$emit" "$OUT/new/$name.$emit" &&
       cmp -s "$OUT/base/$name.$emit.err" "$OUT/new/$name.$emit.err"; then
      printf 'same    %-40s %s (%s bytes)\n' "$name" "$emit" "$(wc -c <"$OUT/new/$name.$emit")"
    else
      differ=$((differ + 1))
      printf 'DIFFERS %-40s %s (diff %s %s)\n' "$name" "$emit" "$OUT/base/$name.$emit" "$OUT/new/$name.$emit"
    fi
  done
done
echo "check_tcx_identical: $total outputs compared, $differ differ"
[ "$differ" -eq 0 ]
