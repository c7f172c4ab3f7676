#!/usr/bin/env bash
# Makes, on this machine (no GPU, MLIR here), the two archives one GPU session
# carries (xz: with the tree they stay under the 64 MiB a device call takes):
#
#   scripts/gpu-bundles.sh [LEVERS]
#
#   build-gpu.txz  scripts/gpu-prepare.sh build-gpu with TC_HF=1 (tiny HF gpt2,
#                  llama, neox, phi; TC_HF_MODELS overrides), TC_EXPERIMENTAL =
#                  LEVERS (default: wgmma-attention,side-stream) and
#                  TC_BENCH=0 (the bench's GPT-2 is in build-hf), its programs
#                  stripped: what TC_BENCH=0 scripts/gpu-check.sh build-gpu.txz runs
#   build-hf.txz   bench/hf.sh prepare build-hf (the HF benchmark exports, default
#                  and `exp` artifacts with LEVERS) plus build-hf/bench/gpt2-124m.tca
#                  and gpt2-124m.exp.tca (the bench's own GPT-2 124M, gpu-prepare's
#                  flags, without and with LEVERS): what `bench/hf.sh run build-hf
#                  build-gpu/bin tc` and a tc-run of the bench artifacts use
#
# On the GPU machine, one call:
#   tar xJf build-hf.txz && TC_BENCH=0 scripts/gpu-check.sh build-gpu.txz --no-torch;
#   bench/hf.sh run build-hf build-gpu/bin tc
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
LEVERS="${1:-wgmma-attention,side-stream}"
CB="${TC_CUDA_BUILD_DIR:-build-cuda}"

TC_HF=1 TC_HF_MODELS="${TC_HF_MODELS:-gpt2 llama neox phi}" TC_EXPERIMENTAL="$LEVERS" \
  TC_BENCH=0 bash scripts/gpu-prepare.sh build-gpu
# The working tree and both archives travel under one 64 MiB limit: the
# programs without their symbol tables (gpu-check needs none), archived again.
find build-gpu/bin build-gpu/test -type f -perm -u+x -exec strip --strip-unneeded {} +
rm -f build-gpu.tgz
tar cf - build-gpu | xz -T2 -6 >build-gpu.txz

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
tar cf - build-hf | xz -T2 -6 >build-hf.txz
ls -la build-gpu.txz build-hf.txz
total=$(( $(git ls-files -z | xargs -0 du -cb | tail -1 | cut -f1) + $(stat -c %s build-gpu.txz) +
          $(stat -c %s build-hf.txz) ))
echo "the tree and both archives: $(( total / 1048576 )) MiB of the 64 MiB a device call carries"
