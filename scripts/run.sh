#!/usr/bin/env bash
# The main job: install what is missing, build, compile the example model and
# run it. Today that is evaluation on the CPU reference executor of the GPT-2
# style fixture exported from PyTorch; training (issue 3) and the GPU (issue 4)
# take over this script as they land.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD="${TC_BUILD_DIR:-$ROOT/build}"
bash "$ROOT/scripts/setup.sh"
bash "$ROOT/scripts/build.sh" tc-compile tc-run
OUT="$BUILD/examples"
mkdir -p "$OUT"
FIX="$ROOT/test/fixtures"
for model in gpt2 llama; do
  echo "== $model: compile (TorchScript export, dynamic batch/seq fixed to 2x16)"
  "$BUILD/bin/tc-compile" "$FIX/$model.ts.onnx" --input input_ids=2x16 --input labels=2x16 \
    -o "$OUT/$model.tca"
  echo "== $model: evaluate on the CPU reference"
  rm -f "$OUT/$model.metrics.jsonl"
  "$BUILD/bin/tc-run" "$OUT/$model.tca" --device cpu --eval \
    --feed input_ids="$FIX/$model.input_ids.npy" --feed labels="$FIX/$model.labels.npy" \
    --metrics "$OUT/$model.metrics.jsonl"
  python3 - "$FIX/$model.ref.json" "$OUT/$model.metrics.jsonl" <<'PY'
import json, sys
ref = json.load(open(sys.argv[1]))
got = json.loads(open(sys.argv[2]).read().splitlines()[-1])
want = ref["loss_fp32"] if "loss_fp32" in ref else ref["loss"]["fp32"]
print(f"   tc loss {got['loss']:.7f}   PyTorch loss {want:.7f}   rel diff {abs(got['loss']-want)/abs(want):.2e}")
PY
done
