#!/usr/bin/env bash
# Writes the fuzzers' seed inputs (test/fuzz/seeds/) with the built tools:
# small artifacts (eval and training, CPU) and a checkpoint's safetensors
# files. Run again after a format change (artifact, checkpoint).
#   bash scripts/make_fuzz_seeds.sh [BUILD_DIR]
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BIN="${1:-$ROOT/build}/bin"
S="$ROOT/test/fuzz/seeds"
T="$(mktemp -d)"
trap 'rm -rf "$T"' EXIT
mkdir -p "$S/artifact" "$S/safetensors"
"$BIN/tc-compile" "$ROOT/test/frontends/onnx/initializers.onnxtxt" -o "$S/artifact/initializers.tca" 2>/dev/null
"$BIN/tc-compile" "$S/tiny.onnxtxt" --train -o "$S/artifact/train.tca" 2>/dev/null
python3 -c "import struct,sys; h=b\"{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }\"; h=h+b' '*(117-len(h))+b'\n'; open(sys.argv[1],'wb').write(b'\x93NUMPY\x01\x00'+struct.pack('<H',len(h))+h+struct.pack('<4f',1,2,3,4))" "$T/x.npy"
"$BIN/tc-run" "$S/artifact/train.tca" --steps 1 --feed "x=$T/x.npy" --save "$T/ckpt" >/dev/null
cp "$T/ckpt/model.safetensors" "$S/safetensors/model.safetensors"
cp "$T/ckpt/optimizer.safetensors" "$S/safetensors/optimizer.safetensors"
cp "$T/ckpt/state.json" "$S/safetensors/state.json" # also a JSON seed
ls -la "$S"/*
