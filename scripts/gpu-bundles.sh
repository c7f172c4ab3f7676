#!/usr/bin/env bash
# Makes, on this machine (no GPU, MLIR here), the two archives one GPU session
# carries (each under the device tool's 64 MiB carry limit):
#
#   scripts/gpu-bundles.sh [LEVERS]
#
#   build-gpu.tgz  scripts/gpu-prepare.sh build-gpu with TC_HF=1 (tiny HF gpt2,
#                  llama, neox, phi; TC_HF_MODELS overrides) and TC_EXPERIMENTAL =
#                  LEVERS (default: every lever tc-compile --experimental takes):
#                  what scripts/gpu-check.sh build-gpu.tgz runs
#   build-hf.tgz   bench/hf.sh prepare build-hf (the HF benchmark exports, default
#                  and `exp` artifacts with LEVERS) plus build-hf/bench/gpt2-124m.tca
#                  and gpt2-124m.exp.tca (the bench's own GPT-2 124M, gpu-prepare's
#                  flags, without and with LEVERS): what `bench/hf.sh run build-hf
#                  build-gpu/bin tc` and a tc-run of the bench artifacts use
#
# On the GPU machine, one call:
#   tar xzf build-hf.tgz && scripts/gpu-check.sh build-gpu.tgz --no-torch &&
#   bench/hf.sh run build-hf build-gpu/bin tc
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
LEVERS="${1:-bias-grad,group-sums,gelu,merge-qkv,wgmma-attention,rotary-in-place}"
CB="${TC_CUDA_BUILD_DIR:-build-cuda}"

TC_HF=1 TC_HF_MODELS="${TC_HF_MODELS:-gpt2 llama neox phi}" TC_EXPERIMENTAL="$LEVERS" \
  bash scripts/gpu-prepare.sh build-gpu

rm -rf build-hf
TC_EXPERIMENTAL="$LEVERS" bash bench/hf.sh prepare build-hf "$CB/bin"
mkdir -p build-hf/bench
[ -f build/bench/gpt2-124m.onnx ] || python3 bench/make_gpt2_onnx.py --out build/bench >/dev/null
bench_args=(build/bench/gpt2-124m.onnx --input input_ids=16x1024 --input labels=16x1024
            --no-weights --init-params normal:0.02 --train --optimizer adamw --lr 6e-4
            --beta1 0.9 --beta2 0.95 --weight-decay 0.1 --clip-grad-norm 1.0 --target sm_90
            --bf16 --no-cache)
"$CB/bin/tc-compile" "${bench_args[@]}" -o build-hf/bench/gpt2-124m.tca >/dev/null
"$CB/bin/tc-compile" "${bench_args[@]}" --experimental="$LEVERS" \
  -o build-hf/bench/gpt2-124m.exp.tca >/dev/null
rm -rf build-hf/cache build-hf/run
tar czf build-hf.tgz build-hf
ls -la build-gpu.tgz build-hf.tgz
