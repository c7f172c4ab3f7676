#!/usr/bin/env bash
# Prepares, on a machine without a GPU (the GPU machine has no MLIR), the
# folder that scripts/gpu-check.sh runs on the GPU:
#
#   scripts/gpu-prepare.sh [OUT]          (default OUT: build-gpu)
#
#   OUT/bin/tc-run, OUT/test/cuda/tc_cuda_tests, OUT/test/codegen/run_generated
#       built with the CUDA backend in ${TC_CUDA_BUILD_DIR:-build-cuda}
#   OUT/codegen/cases.tca    test/codegen/Inputs/cases.mlir compiled for sm_90 (reference
#                            program, generated kernels, device program: run_generated's input)
#   OUT/fixtures/M.E.P.tca   the committed fixtures (gpt2/llama x ts/dynamo) compiled
#                            for sm_90 with AdamW in P = fp32 (tf32 off), bf16 and fp16
#                            (f16 with dynamic loss scaling), and P = nvfp4 / mxfp4
#                            (--fp4-qat: gpt2.ts nvfp4 with activations, llama.dynamo
#                            nvfp4-grads with activations, --fp4-qat-grads and --fp4-rht,
#                            gpt2.ts mxfp4),
#                            with the CPU reference's 8 steps (M.E.P.cpu.jsonl) beside them
#   OUT/fixtures/F-sdpa.E.P.tca   when TC_HF=1 (default 0) and transformers is importable:
#                            tiny random-weight HuggingFace models (scripts/make_hf_models.py;
#                            F = gpt2 llama mistral qwen2 neox phi bert, or TC_HF_MODELS),
#                            sdpa attention, exporter E = dynamo (ts where dynamo fails),
#                            P = fp32 and bf16, with F-sdpa.{input_ids,labels}.npy, the memory
#                            plan and the CPU reference's 8 steps, as for the fixtures above;
#                            exported into ${TC_HF_DIR:-build/hf-models} (an existing export
#                            there is reused)
#   OUT/fixtures/M.E.exp.P.tca  with TC_EXPERIMENTAL (default: every lever tc-compile
#                            --experimental takes): gpt2/llama x ts/dynamo in fp32 and
#                            bf16 with those levers on, beside their CPU reference
#                            (and F-sdpa.E.exp.bf16 for the HF models with TC_HF=1);
#                            OUT/codegen/cases-exp.tca the generated-kernel cases with them
#   OUT/tiny-gpt/            the main job's tiny GPT (scripts/run.sh) for sm_90 + its data
#   OUT/bench/gpt2-124m.tca  GPT-2 124M (bench/make_gpt2_onnx.py), compiled without
#                            weights (--no-weights --init-params normal), when
#                            TC_BENCH=1 (default) and torch is importable here
#   OUT/bench/precision/     when TC_BENCH_PRECISION=1 (default 0): bench/precision.sh's
#                            artifacts (byte-level GPT-2 124M in bf16/fp8/fp16 and bf16 with
#                            NVFP4 QAT of weights and activations, GPT-2 124M
#                            and ~1B in bf16/fp8 (~1B also fp8 delayed, fp8 --fp8-lm-head),
#                            all --no-weights) and its text corpus
#                            (scripts/make_text_data.py; the ONNX exports are reused from
#                            build/bench while newer than the model's code)
#   OUT.tgz                  all of OUT, gzipped (about a third of its size): what
#                            to carry to the GPU machine when OUT and the tree
#                            exceed the carry limit; scripts/gpu-check.sh OUT.tgz
#                            unpacks it beside itself and checks OUT
#
# Everything is made from the sources; OUT is ignored by git. Safe to run twice.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
OUT="${1:-$ROOT/build-gpu}"
case "$OUT" in /*) ;; *) OUT="$PWD/$OUT" ;; esac
CB="${TC_CUDA_BUILD_DIR:-$ROOT/build-cuda}"
STEPS=8
JOBS="${TC_JOBS:-$(nproc)}"

if [ ! -f "$CB/build.ninja" ]; then
  cmake -G Ninja -S "$ROOT" -B "$CB" -DCMAKE_BUILD_TYPE=Release \
    -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir \
    -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-22/bin/lit \
    -DMLIR_LINK_MLIR_DYLIB=ON -DTC_ENABLE_CUDA=ON >/dev/null
fi
# tc_cudnn: the optional cuDNN plugin, a target where CMake found cuDNN.
ninja -C "$CB" -j"$JOBS" tc-compile tc-run tc-cuda-codegen tc_cuda_tests run_generated \
  capi_train_check $(ninja -C "$CB" -t query tc_cudnn >/dev/null 2>&1 && echo tc_cudnn)

# The fixtures are made afresh: a row a newer tree no longer makes (a renamed
# fixture) must not stay behind and be checked with an old compiler's artifact.
rm -rf "$OUT/fixtures"
mkdir -p "$OUT/bin" "$OUT/test/cuda" "$OUT/test/codegen" "$OUT/test/runtime" "$OUT/fixtures" \
  "$OUT/bench"
cp "$CB/bin/tc-run" "$OUT/bin/"
# The optional cuDNN plugin beside tc-run, where it was built.
[ -f "$CB/bin/libtc_cudnn.so" ] && cp "$CB/bin/libtc_cudnn.so" "$OUT/bin/"
cp "$CB/test/runtime/capi_train_check" "$OUT/test/runtime/"
cp "$CB/test/cuda/tc_cuda_tests" "$OUT/test/cuda/"
cp "$CB/test/codegen/run_generated" "$OUT/test/codegen/"
rm -rf "$OUT/gpu-bundle" # what run_generated read before it read an artifact
mkdir -p "$OUT/codegen"
"$CB/bin/tc-cuda-codegen" "$ROOT/test/codegen/Inputs/cases.mlir" --emit=none --target sm_90 \
  --artifact "$OUT/codegen/cases.tca"

# compile_fixture ONNX NAME PREC [FLAGS...]: NAME.tca (sm_90, AdamW + clip) and its memory report.
compile_fixture() {
  "$CB/bin/tc-compile" "$1" --input input_ids=2x16 --input labels=2x16 \
    --train --optimizer adamw --lr 1e-3 --weight-decay 0.1 --clip-grad-norm 1.0 \
    --target sm_90 "--$3" "${@:4}" --report memory -o "$OUT/fixtures/$2.tca" >"$OUT/fixtures/$2.memory.txt"
}
# cpu_reference NAME INPUTS_PREFIX: the CPU reference's $STEPS steps of NAME.tca
# (fed INPUTS_PREFIX.attention_mask.npy too where there is one).
cpu_reference() {
  rm -f "$OUT/fixtures/$1.cpu.jsonl"
  local mask=()
  [ -f "$2.attention_mask.npy" ] && mask=(--feed "attention_mask=$2.attention_mask.npy")
  "$CB/bin/tc-run" "$OUT/fixtures/$1.tca" --device cpu --steps "$STEPS" \
    --feed "input_ids=$2.input_ids.npy" --feed "labels=$2.labels.npy" "${mask[@]}" \
    --metrics "$OUT/fixtures/$1.cpu.jsonl" --log-every 0 >/dev/null
  echo "prepared $1"
}

FX="$ROOT/test/fixtures"
for m in gpt2 llama; do
  cp "$FX/$m.input_ids.npy" "$FX/$m.labels.npy" "$OUT/fixtures/"
  for e in ts dynamo; do
    for p in fp32 bf16 fp16 fp8; do
      compile_fixture "$FX/$m.$e.onnx" "$m.$e.$p" "$p"
      cpu_reference "$m.$e.$p" "$FX/$m"
    done
    # --fp8-scaling block128 (1x128 / 128x128 blocks; the fixtures' dims
    # below 128 are one partial block each).
    compile_fixture "$FX/$m.$e.onnx" "$m.$e.fp8-block128" fp8 --fp8-scaling block128
    cpu_reference "$m.$e.fp8-block128" "$FX/$m"
    # --fp8-scaling row (cuBLASLt's outer-vector scales, per-column quantized
    # copies for the operands read transposed).
    compile_fixture "$FX/$m.$e.onnx" "$m.$e.fp8-row" fp8 --fp8-scaling row
    cpu_reference "$m.$e.fp8-row" "$FX/$m"
  done
done

# FP8 with delayed scaling (the scales and amax histories in the step, the
# casts in generated kernels): P = fp8delayed, its own rows of the table.
for m in gpt2 llama; do
  compile_fixture "$FX/$m.ts.onnx" "$m.ts.fp8delayed" fp8 --fp8-scaling delayed
  cpu_reference "$m.ts.fp8delayed" "$FX/$m"
done
# FP4 QAT (emulated in BF16 GEMMs on sm_90): NVFP4 weights and activations
# (gpt2; llama with --fp4-qat-grads --fp4-rht too), MXFP4 weights (gpt2); NAME's last
# part is the format.
compile_fixture "$FX/gpt2.ts.onnx" gpt2.ts.nvfp4 fp4-qat nvfp4 --fp4-qat-acts
cpu_reference gpt2.ts.nvfp4 "$FX/gpt2"
compile_fixture "$FX/llama.dynamo.onnx" llama.dynamo.nvfp4-grads fp4-qat nvfp4 --fp4-qat-acts \
  --fp4-qat-grads --fp4-rht
cpu_reference llama.dynamo.nvfp4-grads "$FX/llama"
compile_fixture "$FX/gpt2.ts.onnx" gpt2.ts.mxfp4 fp4-qat mxfp4
cpu_reference gpt2.ts.mxfp4 "$FX/gpt2"

# Fresh models (restored merged parameters) and ONNX's own Attention /
# RMSNormalization / RotaryEmbedding (opset 23; tc.rotary is written out on the GPU).
for me in fresh-gpt2.ts fresh-llama.dynamo-op23; do
  m="${me%%.*}"
  cp "$FX/$m.input_ids.npy" "$FX/$m.labels.npy" "$OUT/fixtures/"
  for p in fp32 bf16; do
    compile_fixture "$FX/$me.onnx" "$me.$p" "$p"
    cpu_reference "$me.$p" "$FX/$m"
  done
done

# tc-pad-vocab on the GPU: the fixtures' 256 classes padded to 288 (tied gpt2, untied
# llama), for gpu-check's --check against the CPU reference (which pads too).
compile_fixture "$FX/gpt2.ts.onnx" gpt2.ts.bf16-pad96 bf16 --pad-vocab 96
cpu_reference gpt2.ts.bf16-pad96 "$FX/gpt2"
compile_fixture "$FX/llama.dynamo.onnx" llama.dynamo.bf16-pad96 bf16 --pad-vocab 96
cpu_reference llama.dynamo.bf16-pad96 "$FX/llama"

# Gradient accumulation (grad_step per micro-batch, averaged through the host, apply_step).
compile_fixture "$FX/gpt2.ts.onnx" gpt2.accum2.fp32 fp32 --grad-accum 2
cpu_reference gpt2.accum2.fp32 "$FX/gpt2"

# Levers not (yet) the default (tc-compile --experimental): the fixtures with
# all of them on, so that one gpu-check run says whether they keep the GPU
# step equal to the CPU reference (M.E.exp.P; the precision stays the last
# part of the name for gpu-check's tolerance).
EXP="${TC_EXPERIMENTAL-wgmma-attention,side-stream}"
if [ -n "$EXP" ]; then
  for m in gpt2 llama; do
    for e in ts dynamo; do
      for p in fp32 bf16; do
        compile_fixture "$FX/$m.$e.onnx" "$m.$e.exp.$p" "$p" --experimental="$EXP"
        cpu_reference "$m.$e.exp.$p" "$FX/$m"
      done
    done
  done
  "$CB/bin/tc-cuda-codegen" "$ROOT/test/codegen/Inputs/cases.mlir" --emit=none --target sm_90 \
    --experimental="$EXP" --artifact "$OUT/codegen/cases-exp.tca"
fi

# Padded batches (a fresh Llama with eager attention fed an attention_mask: one
# row left-padded, one right-padded, HF's finfo.min fill, labels -100 at the
# padding): the padding mask fused into the attention kernels (M.E.keymask.P;
# the left-padded queries see no key and attend to every one), and unfused
# (--no-fused-attention: the mask add stays f32 in bf16, tc-precision).
# The same batch through a GPT-2 with SDPA attention (TorchScript: a -inf fill, so those queries
# attend to nothing, as PyTorch's SDPA computes).
for pe in fresh-padded-llama.ts fresh-padded-llama.dynamo fresh-padded-gpt2-sdpa.ts; do
  PAD="${pe%.*}" e="${pe##*.}"
  cp "$FX/$PAD.input_ids.npy" "$FX/$PAD.labels.npy" "$FX/$PAD.attention_mask.npy" "$OUT/fixtures/"
  for p in fp32 bf16; do
    compile_fixture "$FX/$PAD.$e.onnx" "$PAD.$e.keymask.$p" "$p" --input attention_mask=2x16
    cpu_reference "$PAD.$e.keymask.$p" "$FX/$PAD"
  done
done
PAD=fresh-padded-llama
for p in fp32 bf16; do
  compile_fixture "$FX/$PAD.dynamo.onnx" "$PAD.dynamo.unfused.$p" "$p" --input attention_mask=2x16 \
    --no-fused-attention 2>/dev/null
  cpu_reference "$PAD.dynamo.unfused.$p" "$FX/$PAD"
done

# Tiny HuggingFace models (optional): one export per family, sdpa attention. The
# names keep gpu-check.sh's rule: the inputs are found from the name up to its first '.'.
if [ "${TC_HF:-0}" = 1 ] && python3 -c 'import torch, onnx, transformers' 2>/dev/null; then
  HF="${TC_HF_DIR:-$ROOT/build/hf-models}"
  case "$HF" in /*) ;; *) HF="$PWD/$HF" ;; esac
  HF_MODELS="${TC_HF_MODELS:-gpt2 llama mistral qwen2 neox phi bert}"
  only=()
  for f in $HF_MODELS; do
    [ -f "$HF/$f-sdpa.ref.json" ] && [ -f "$HF/$f.input_ids.npy" ] || only+=(--only "$f-sdpa")
  done
  if [ ${#only[@]} -gt 0 ]; then
    echo "exporting HF models (${only[*]}) into $HF"
    python3 "$ROOT/scripts/make_hf_models.py" --out "$HF" "${only[@]}" >"$OUT/fixtures/hf-export.log" 2>&1 ||
      { echo "HF export failed (see $OUT/fixtures/hf-export.log)"; exit 1; }
  fi
  for f in $HF_MODELS; do
    m="$f-sdpa"
    rm -f "$OUT/fixtures/$m".*
    picked=""
    for e in dynamo ts; do
      [ -f "$HF/$m.$e.onnx" ] || continue
      ok=1
      for p in fp32 bf16; do
        name="$m.$e.$p"
        if ! compile_fixture "$HF/$m.$e.onnx" "$name" "$p" 2>"$OUT/fixtures/$name.compile.log"; then
          echo "HF $name: tc-compile failed: $(grep -m1 error "$OUT/fixtures/$name.compile.log" | cut -c1-200)"
          ok=0
          break
        fi
      done
      if [ $ok = 1 ]; then picked=$e; break; fi
      rm -f "$OUT/fixtures/$m".*
    done
    if [ -z "$picked" ]; then echo "HF $m: skipped (no export compiles)"; continue; fi
    cp "$HF/$f.input_ids.npy" "$OUT/fixtures/$m.input_ids.npy"
    cp "$HF/$f.labels.npy" "$OUT/fixtures/$m.labels.npy"
    for p in fp32 bf16; do
      rm -f "$OUT/fixtures/$m.$picked.$p.compile.log"
      cpu_reference "$m.$picked.$p" "$OUT/fixtures/$m"
    done
    if [ -n "$EXP" ]; then
      compile_fixture "$HF/$m.$picked.onnx" "$m.$picked.exp.bf16" bf16 --experimental="$EXP"
      cpu_reference "$m.$picked.exp.bf16" "$OUT/fixtures/$m"
    fi
  done
elif [ "${TC_HF:-0}" = 1 ]; then
  echo "TC_HF=1 but torch/onnx/transformers are not importable: no HF fixtures"
fi

# An RTX 5090 (sm_120a) artifact: on an H100/H200 tc-run must refuse it by name.
"$CB/bin/tc-compile" "$FX/gpt2.ts.onnx" --input input_ids=2x16 --input labels=2x16 --train \
  --target sm_120 -o "$OUT/wrong-arch.sm_120.tca" 2>/dev/null

# The main job's model (scripts/run.sh) for the GPU: same flags, same data.
mkdir -p "$OUT/tiny-gpt"
python3 "$ROOT/examples/tiny-gpt/make_data.py" "$OUT/tiny-gpt/train.bin" >/dev/null
"$CB/bin/tc-compile" "$ROOT/examples/tiny-gpt/tiny-gpt.onnx" --input input_ids=8x64 \
  --input labels=8x64 --target sm_90 --train --optimizer adamw --lr 3e-3 --beta1 0.9 \
  --beta2 0.95 --weight-decay 0.1 --no-decay 'bias$' --no-decay 'ln_[0-9f]*\.weight$' \
  --clip-grad-norm 1.0 -o "$OUT/tiny-gpt/tiny-gpt.tca" 2>/dev/null
echo "prepared tiny-gpt"

if [ "${TC_BENCH:-1}" = 1 ] && python3 -c 'import torch, onnx' 2>/dev/null; then
  python3 "$ROOT/bench/make_gpt2_onnx.py" --out "$ROOT/build/bench" >/dev/null
  start=$(date +%s.%N)
  "$CB/bin/tc-compile" "$ROOT/build/bench/gpt2-124m.onnx" --input input_ids=16x1024 \
    --input labels=16x1024 --no-weights --init-params normal:0.02 \
    --train --optimizer adamw --lr 6e-4 --beta1 0.9 --beta2 0.95 --weight-decay 0.1 --clip-grad-norm 1.0 \
    --target sm_90 --bf16 --report memory -o "$OUT/bench/gpt2-124m.tca" \
    >"$OUT/bench/gpt2-124m.memory.txt"
  end=$(date +%s.%N)
  awk -v s="$start" -v e="$end" 'BEGIN { printf "%.1f\n", e - s }' >"$OUT/bench/compile_seconds"
  echo "prepared bench/gpt2-124m.tca (compiled in $(cat "$OUT/bench/compile_seconds") s)"
fi
if [ "${TC_BENCH_PRECISION:-0}" = 1 ] && python3 -c 'import torch, onnx' 2>/dev/null; then
  PB="$OUT/bench/precision"
  mkdir -p "$PB"
  export_once() { # NAME ARGS...: build/bench/NAME.onnx unless newer than the model's code
    local f="$ROOT/build/bench/$1.onnx"
    if [ ! -f "$f.data" ] || [ "$ROOT/bench/gpt2_torch.py" -nt "$f" ] || [ "$ROOT/bench/make_gpt2_onnx.py" -nt "$f" ]; then
      python3 "$ROOT/bench/make_gpt2_onnx.py" --out "$ROOT/build/bench" --name "$@" >/dev/null
    fi
  }
  export_once gpt2-bytes --vocab 256
  export_once gpt2-1b --layers 18 --d 2048 --heads 16
  [ -f "$ROOT/build/bench/gpt2-124m.onnx" ] || python3 "$ROOT/bench/make_gpt2_onnx.py" --out "$ROOT/build/bench" >/dev/null
  [ -f "$ROOT/build/text/manifest.json" ] || python3 "$ROOT/scripts/make_text_data.py" corpus --out "$ROOT/build/text"
  rm -rf "$PB/text" && cp -r "$ROOT/build/text" "$PB/text"
  ADAMW=(--train --optimizer adamw --lr 6e-4 --beta1 0.9 --beta2 0.95 --weight-decay 0.1
         --clip-grad-norm 1.0 --no-weights --init-params normal:0.02 --target sm_90 --quiet)
  for m in bf16 fp8 fp16; do
    "$CB/bin/tc-compile" "$ROOT/build/bench/gpt2-bytes.onnx" --input input_ids=16x1024 \
      --input labels=16x1024 "${ADAMW[@]}" --"$m" -o "$PB/bytes-$m.tca"
  done
  # NVFP4 QAT of the linear layers' weights and activations (bf16 step,
  # emulated through bf16 GEMMs on sm_90).
  "$CB/bin/tc-compile" "$ROOT/build/bench/gpt2-bytes.onnx" --input input_ids=16x1024 \
    --input labels=16x1024 "${ADAMW[@]}" --bf16 --fp4-qat nvfp4 --fp4-qat-acts -o "$PB/bytes-nvfp4.tca"
  "$CB/bin/tc-compile" "$ROOT/build/bench/gpt2-124m.onnx" --input input_ids=16x1024 \
    --input labels=16x1024 "${ADAMW[@]}" --bf16 -o "$PB/gpt2-124m-bf16.tca"
  "$CB/bin/tc-compile" "$ROOT/build/bench/gpt2-124m.onnx" --input input_ids=16x1024 \
    --input labels=16x1024 "${ADAMW[@]}" --fp8 -o "$PB/gpt2-124m-fp8.tca"
  for m in bf16 fp8; do
    "$CB/bin/tc-compile" "$ROOT/build/bench/gpt2-1b.onnx" --input input_ids=8x1024 \
      --input labels=8x1024 "${ADAMW[@]}" --"$m" --report memory -o "$PB/gpt2-1b-$m.tca" \
      >"$PB/gpt2-1b-$m.memory.txt"
  done
  "$CB/bin/tc-compile" "$ROOT/build/bench/gpt2-1b.onnx" --input input_ids=8x1024 \
    --input labels=8x1024 "${ADAMW[@]}" --fp8 --fp8-scaling delayed -o "$PB/gpt2-1b-fp8delayed.tca"
  # The classifier in FP8 too (--fp8-lm-head), tensor scaling.
  "$CB/bin/tc-compile" "$ROOT/build/bench/gpt2-1b.onnx" --input input_ids=8x1024 \
    --input labels=8x1024 "${ADAMW[@]}" --fp8 --fp8-lm-head -o "$PB/gpt2-1b-fp8lmhead.tca"
  echo "prepared bench/precision ($(ls "$PB"/*.tca | wc -l) artifacts)"
fi
du -sh "$OUT"
tar -C "$(dirname "$OUT")" -czf "$OUT.tgz" "$(basename "$OUT")"
du -sh "$OUT.tgz"
