#!/usr/bin/env bash
# The main job: install what is missing, build, then compile the tiny GPT of
# examples/tiny-gpt (exported from PyTorch as ONNX) into a training step with
# AdamW and train it -- on the GPU when there is one (H100/H200 or RTX 50xx and
# a CUDA build), else on the CPU reference executor -- on byte-level English
# text (the license texts every Debian machine has), printing the loss as it
# falls.
# Safe to run twice. TC_STEPS overrides the step count (default 800).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD="${TC_BUILD_DIR:-$ROOT/build}"
STEPS="${TC_STEPS:-800}"
bash "$ROOT/scripts/setup.sh"
bash "$ROOT/scripts/build.sh" tc-compile tc-run
EX="$ROOT/examples/tiny-gpt"
OUT="$BUILD/examples/tiny-gpt"
mkdir -p "$OUT"

echo "== data: byte-level tokens from /usr/share/common-licenses"
python3 "$EX/make_data.py" "$OUT/train.bin"

# The GPU when there is one this build can drive (H100/H200: sm_90, RTX 50xx:
# sm_120), else the CPU reference. TC_DEVICE=cpu forces the CPU.
TARGET=cpu
DEVICE=cpu
if [ "${TC_DEVICE:-auto}" != cpu ] && command -v nvidia-smi >/dev/null 2>&1 &&
   grep -q '^TC_ENABLE_CUDA:BOOL=ON' "$BUILD/CMakeCache.txt" 2>/dev/null; then
  cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' .')
  case "$cc" in
    90) TARGET=sm_90; DEVICE=cuda ;;
    120) TARGET=sm_120; DEVICE=cuda ;;
  esac
fi

echo "== compile: tiny GPT (120k parameters, batch 8 x 64 tokens) -> training step, AdamW, target $TARGET"
"$BUILD/bin/tc-compile" "$EX/tiny-gpt.onnx" --input input_ids=8x64 --input labels=8x64 --target "$TARGET" \
  --train --optimizer adamw --lr 3e-3 --beta1 0.9 --beta2 0.95 --weight-decay 0.1 \
  --no-decay 'bias$' --no-decay 'ln_[0-9f]*\.weight$' --clip-grad-norm 1.0 \
  -o "$OUT/tiny-gpt.tca"

echo "== train: $STEPS steps on $([ "$DEVICE" = cuda ] && echo the GPU || echo the CPU reference) (warmup 30, cosine to lr/10)"
rm -rf "$OUT/ckpt"
"$BUILD/bin/tc-run" "$OUT/tiny-gpt.tca" --device "$DEVICE" --steps "$STEPS" \
  --data "$OUT/train.bin" --dtype uint16 --warmup 30 --lr-schedule cosine \
  --metrics "$OUT/metrics.jsonl" --save "$OUT/ckpt" --save-every 200 --log-every 50

python3 - "$OUT/metrics.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
first = sum(r["loss"] for r in rows[:10]) / min(10, len(rows))
last = sum(r["loss"] for r in rows[-50:]) / min(50, len(rows))
tps = sum(r["tokens_per_s"] for r in rows) / len(rows)
print(f"== loss: first 10 steps {first:.3f} -> last 50 steps {last:.3f} "
      f"(uniform over 256 bytes: 5.545); {tps:.0f} tokens/s")
print(f"   checkpoint (safetensors, loadable by safetensors.torch.load_file): {sys.argv[1].rsplit('/', 1)[0]}/ckpt")
PY
