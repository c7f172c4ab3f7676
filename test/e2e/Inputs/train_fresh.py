#!/usr/bin/env python3
"""Trains the fresh-model fixtures with tc and compares with PyTorch (train-fresh.test).

    train_fresh.py FIXTURES WORKDIR

For each of fresh-{gpt2,llama}.{ts,dynamo,dynamo-noopt}.onnx and fresh-llama.dynamo-op23.onnx
(ONNX's own Attention / RMSNormalization / RotaryEmbedding ops) (and --keep-merged for the exports
that merge parameters): tc-compile --train (AdamW as in ref.json) + tc-run --steps 3
--ref-precision f64, then prints one line "<model> <export>[ --keep-merged]: N parameters
TRAJECTORY-OK|TRAJECTORY-FAIL" (N: trainable tensors, from tc-compile), or "refused: <error>" when
tc-compile exits 2. Finally checks that the checkpoint of the Llama dynamo export (merged norm
scales, folded transposed weights) holds exactly the torch parameter names. Standard library
only; tc-compile and tc-run are found on PATH.
"""
import json
import os
import re
import struct
import subprocess
import sys

STEPS = 3
RTOL = 1e-4


def run(cmd):
    return subprocess.run(cmd, capture_output=True, text=True)


def safetensors_names(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
    return {k for k in header if k != "__metadata__"}


def train(fix, work, model, export, extra):
    ref = json.load(open(os.path.join(fix, f"fresh-{model}.ref.json")))
    a = ref["train_fp64"]["adamw"]["config"]
    base = os.path.join(work, f"{model}-{export}{'-keep' if extra else ''}")
    c = run(["tc-compile", os.path.join(fix, f"fresh-{model}.{export}.onnx"),
             "--input", "input_ids=2x16", "--input", "labels=2x16", "--train", "--optimizer", "adamw",
             "--lr", str(a["lr"]), "--beta1", str(a["betas"][0]), "--beta2", str(a["betas"][1]),
             "--eps", str(a["eps"]), "--weight-decay", str(a["weight_decay"]), *extra, "-o", base + ".tca"])
    label = f"{model} {export}{' ' + ' '.join(extra) if extra else ''}"
    if c.returncode != 0:
        err = [l for l in c.stderr.splitlines() if "error:" in l]
        print(f"{label}: refused (exit {c.returncode}): {err[-1].split('error: ', 1)[1] if err else c.stderr}")
        return None
    m = re.search(r"trainable: (\d+) tensors", c.stderr)
    metrics = base + ".jsonl"
    r = run(["tc-run", base + ".tca", "--steps", str(STEPS), "--ref-precision", "f64",
             "--feed", f"input_ids={os.path.join(fix, f'fresh-{model}.input_ids.npy')}",
             "--feed", f"labels={os.path.join(fix, f'fresh-{model}.labels.npy')}",
             "--metrics", metrics, "--save", base + ".ckpt"])
    if r.returncode != 0:
        print(f"{label}: tc-run failed: {r.stderr.strip()}")
        return None
    got = [json.loads(l)["loss"] for l in open(metrics) if l.strip()]
    want = ref["train_fp64"]["adamw"]["losses"]
    ok = len(got) == len(want) and all(abs(g - w) <= RTOL * abs(w) for g, w in zip(got, want))
    rel = max((abs(g - w) / abs(w) for g, w in zip(got, want)), default=float("nan"))
    print(f"{label}: {m.group(1) if m else '?'} parameters {'TRAJECTORY-OK' if ok else 'TRAJECTORY-FAIL'}"
          f" (max rel {rel:.1e})")
    return base + ".ckpt"


def main():
    fix, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    ckpt = None
    for model in ("gpt2", "llama"):
        exports = ["ts", "dynamo", "dynamo-noopt"] + (["dynamo-op23"] if model == "llama" else [])
        for export in exports:
            out = train(fix, work, model, export, [])
            if model == "llama" and export == "dynamo":
                ckpt = out
            if export != "dynamo-noopt" and out is not None:
                train(fix, work, model, export, ["--keep-merged"])
    ref = json.load(open(os.path.join(fix, "fresh-llama.ref.json")))
    want = set(ref["params"])
    got = safetensors_names(os.path.join(ckpt, "model.safetensors")) if ckpt else set()
    missing = sorted(want - got)
    if missing:
        print(f"checkpoint names: llama dynamo: missing {missing}")
    else:
        print(f"checkpoint names: llama dynamo: all {len(want)} torch parameters")


if __name__ == "__main__":
    main()
