#!/usr/bin/env bash
# The precision benchmark of issue 11, on the GPU machine, on a folder made by
#   TC_BENCH_PRECISION=1 scripts/gpu-prepare.sh BUILD_DIR
# (BUILD_DIR/bench/precision: artifacts compiled with --no-weights, the corpus
# of scripts/make_text_data.py). Two phases, each within 8 minutes of device
# time, tables last:
#
#   bench/precision.sh BUILD_DIR accuracy [MODES]
#     GPT-2 124M's architecture (12 layers, d 768, 12 heads, T 1024) with a
#     byte-level vocabulary of 256 (85M parameters), 1000 AdamW steps of
#     16 x 1024 tokens on the Linux kernel documentation (27.1M tokens; a
#     held-out split of 1.4M by file), same seed and data order in every mode;
#     val_loss over 20 fixed batches every 250 steps. MODES (default
#     bf16,fp8,fp16, plus whatever else the folder has, e.g. nvfp4): each
#     mode's val_loss at step 1000 against bf16's (FP8 and FP16 within 1%,
#     NVFP4 QAT within 2%). TC_PRECISION_SEEDS (default 1337) lists the
#     seeds (initialisation and data order): with several, each mode's mean
#     and spread over them, the verdict on the means, and the bf16 spread
#     beside it (one seed cannot tell modes 1% apart: the tiny GPT's final
#     loss moves about 1.7% between identical GPU runs). The loss plot of the
#     runs beside each other:
#     python3 bench/plot_precision.py OUT.png bf16=OUT/acc-bf16.jsonl fp8=... (the
#     eighth run's is bench/precision-loss.png).
#   bench/precision.sh BUILD_DIR speed
#     tokens/s (median of timed steps) of tc-bf16 and tc-fp8 (and, at ~1B,
#     tc-fp8 with --fp8-scaling delayed, and with --fp8-lm-head) beside
#     torch.compile bf16 (bench/gpt2_torch.py), at GPT-2 124M (batch 16) and a
#     ~1B configuration (18 layers, d 2048, 16 heads, vocab 50304: 1.01B
#     parameters, batch 8), random tokens.
#
# Results go to $TC_PRECISION_OUT (default BUILD_DIR/precision-bench): each
# run's metrics JSONL and log, and table.txt (also printed). Exit status 0
# when every run finished (the numbers are reported, judged by the reader and
# bench/RESULTS.md), 1 otherwise.
set -uo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD="${1:?usage: bench/precision.sh BUILD_DIR accuracy|speed [MODES]}"
PHASE="${2:?usage: bench/precision.sh BUILD_DIR accuracy|speed [MODES]}"
case "$BUILD" in /*) ;; *) BUILD="$PWD/$BUILD" ;; esac
P="$BUILD/bench/precision"
TCRUN="$BUILD/bin/tc-run"
OUT="${TC_PRECISION_OUT:-$BUILD/precision-bench}"
mkdir -p "$OUT"
[ -x "$TCRUN" ] || { echo "precision: $TCRUN not found" >&2; exit 2; }
[ -d "$P" ] || { echo "precision: $P not found: run TC_BENCH_PRECISION=1 scripts/gpu-prepare.sh" >&2; exit 2; }
rc=0

run_tc() { # NAME ARTIFACT ARGS...: one tc-run on the GPU, metrics in $OUT/NAME.jsonl
  local name="$1" tca="$2"; shift 2
  rm -f "$OUT/$name.jsonl"
  local t0; t0=$(date +%s)
  if ! "$TCRUN" "$tca" --device cuda --metrics "$OUT/$name.jsonl" "$@" >"$OUT/$name.log" 2>&1; then
    echo "   $name: tc-run failed (see $OUT/$name.log):"; tail -3 "$OUT/$name.log"; rc=1
  fi
  echo "   $name: $(( $(date +%s) - t0 )) s"
}

case "$PHASE" in
accuracy)
  python3 "$ROOT/scripts/make_text_data.py" tokens --corpus "$P/text" --out /tmp/tc-text >/dev/null || exit 1
  MODES="${3:-}"
  if [ -z "$MODES" ]; then
    MODES=bf16
    for m in fp8 fp16 nvfp4 mxfp4; do [ -f "$P/bytes-$m.tca" ] && MODES="$MODES,$m"; done
  fi
  SEEDS="${TC_PRECISION_SEEDS:-1337}"
  echo "== precision accuracy: modes $MODES, seeds $SEEDS (logs: $OUT)"
  for seed in $SEEDS; do
    for m in ${MODES//,/ }; do
      run_tc "acc-$m-s$seed" "$P/bytes-$m.tca" --steps 1000 --data /tmp/tc-text/train.bin \
        --val-data /tmp/tc-text/val.bin --eval-every 250 --eval-iters 20 --seed "$seed" \
        --lr 6e-4 --warmup 100 --lr-schedule cosine --log-every 100
    done
  done
  python3 "$ROOT/bench/precision_accuracy.py" "$OUT" "$MODES" $SEEDS | tee "$OUT/accuracy.txt"
  ;;
speed)
  echo "== precision speed (logs: $OUT)"
  python3 -c "import numpy as np; np.random.seed(0); np.random.randint(0, 50257, size=16*1025*64).astype(np.uint16).tofile('/tmp/tc-bench-tokens.bin')"
  for cfg in 124m 1b; do
    for m in bf16 fp8 fp8delayed fp8lmhead; do
      [ -f "$P/gpt2-$cfg-$m.tca" ] && run_tc "speed-$cfg-$m" "$P/gpt2-$cfg-$m.tca" --steps 25 \
        --data /tmp/tc-bench-tokens.bin --log-every 0
    done
  done
  if python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
    python3 "$ROOT/bench/gpt2_torch.py" --modes compile --steps 20 --batch 16 \
      >"$OUT/torch-124m.jsonl" 2>"$OUT/torch-124m.log" || { echo "   torch 124m failed"; rc=1; }
    python3 "$ROOT/bench/gpt2_torch.py" --modes compile --steps 15 --batch 8 --layers 18 --d 2048 \
      --heads 16 >"$OUT/torch-1b.jsonl" 2>"$OUT/torch-1b.log" || { echo "   torch 1b failed"; rc=1; }
  fi
  python3 - "$OUT" <<'PY' | tee "$OUT/speed.txt"
import json, statistics, sys
out = sys.argv[1]
def tc(name):
    try:
        recs = [json.loads(l) for l in open(f"{out}/{name}.jsonl") if l.strip()]
    except OSError:
        return None
    tps = [r["tokens_per_s"] for r in recs if r.get("kind") == "train" and r.get("tokens_per_s")][5:]
    return statistics.median(tps) if tps else None
def torch(name):
    try:
        return [json.loads(l) for l in open(f"{out}/{name}.jsonl") if l.strip()][0]
    except (OSError, IndexError):
        return None
print()
print("== precision speed: tokens/s, median of timed steps (random tokens)")
for cfg, batch in (("124m", 16), ("1b", 8)):
    bf, f8, tq = tc(f"speed-{cfg}-bf16"), tc(f"speed-{cfg}-fp8"), torch(f"torch-{cfg}")
    fd = tc(f"speed-{cfg}-fp8delayed")
    tcs = tq["tokens_per_s"] if tq else None
    def fmt(v):
        return f"{v:>10,.0f}" if v else "   missing"
    line = f"  GPT-2 {cfg:<4} batch {batch:>2} x 1024: tc-bf16 {fmt(bf)}  tc-fp8 {fmt(f8)}  torch.compile-bf16 {fmt(tcs)}"
    if bf and f8:
        line += f"  fp8/bf16 {f8 / bf:.2f}x"
    if f8 and tcs:
        line += f"  fp8/torch.compile {f8 / tcs:.2f}x"
    if bf and tcs:
        line += f"  bf16/torch.compile {bf / tcs:.2f}x"
    if fd:
        line += f"  tc-fp8-delayed {fmt(fd)}" + (f" ({fd / tcs:.2f}x)" if tcs else "")
    fl = tc(f"speed-{cfg}-fp8lmhead")
    if fl:
        line += f"  tc-fp8 --fp8-lm-head {fmt(fl)}" + (f" ({fl / tcs:.2f}x)" if tcs else "")
    if tq:
        line += f"  (torch params {tq['params']:,}, peak {tq['peak_mem_gib']} GiB)"
    print(line)
PY
  ;;
*) echo "precision: unknown phase '$PHASE' (accuracy or speed)" >&2; exit 2 ;;
esac
exit $rc
