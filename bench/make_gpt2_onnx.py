#!/usr/bin/env python3
"""Export the GPT-2 benchmark model (bench/gpt2_torch.py) to ONNX for tc.

    python3 bench/make_gpt2_onnx.py --out build/bench            # 124M: gpt2-124m.onnx + .onnx.data
    python3 bench/make_gpt2_onnx.py --out build/bench/small --layers 2 --d 128 --heads 4 \
        --vocab 512 --seq 64 --ref-batch 2

The model class is imported from bench/gpt2_torch.py (no CUDA needed), so both sides
train the same network: same modules, same init (torch.manual_seed(0) then GPT(...),
exactly as gpt2_torch.run does before .to("cuda")), lm_head tied to wte.

Graph: inputs input_ids [batch, seq] int64 and labels [batch, seq] int64 (both dims
dynamic; fix them with tc-compile --input input_ids=16x1024 --input labels=16x1024),
one output "loss" = mean cross-entropy (scalar), fp32 weights, eval mode (the model
has no dropout).  TorchScript exporter (default): opset 17, do_constant_folding=False
so the tied wte/lm_head stays one initializer (as scripts/make_fixtures.py does);
dynamo exporter: opset 18, optimize=False (both through scripts/onnx_export.py).  Weights go to one external-data file
NAME.onnx.data beside NAME.onnx.

--ref-batch B also writes NAME.input_ids.npy / NAME.labels.npy (int64 [B, seq], tokens
uniform in [0, min(vocab, 50257)) like the benchmark, seed 1) and NAME.ref.json with
PyTorch's fp32 loss on that batch (for tc-run --feed parity checks).
"""

import argparse
import json
import os
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "scripts"))
from gpt2_torch import GPT  # noqa: E402  (the benchmark's own model class)
from onnx_export import (export_dynamo, export_torchscript, save_program,  # noqa: E402
                         weights_to_one_file)

import onnx  # noqa: E402

OUTPUT_NAMES = ["loss"]


def export_ts(model, args, path):
    # training=True (TrainingMode.TRAINING), not EVAL: in eval mode the exporter's initializer
    # deduplication also merges parameters that are merely equal in value (every LayerNorm
    # weight = ones, bias = zeros at init) into one initializer + Identity nodes, which would
    # then train as ONE shared parameter.  In training mode it merges only the same tensor.  The
    # model has no dropout or batch norm, so the graph is otherwise the same.
    export_torchscript(model, args, path, output_names=OUTPUT_NAMES, training=True)


def export_dyn(model, args, path):
    """Batch symbolic in [1, 1024], seq static (the compiled shape)."""
    prog, dynamic, note = export_dynamo(model, args, max_batch=1024, output_names=OUTPUT_NAMES)
    if not dynamic:
        raise SystemExit(f"{path}: {note}")
    save_program(prog, path)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="build/bench")
    ap.add_argument("--name", default=None, help="file stem (default gpt2-124m for the default config, "
                                                  "else gpt2-L<layers>-d<d>)")
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--d", type=int, default=768)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--vocab", type=int, default=50304)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--exporter", choices=["ts", "dynamo"], default="ts")
    ap.add_argument("--ref-batch", type=int, default=0, help="also write a batch of B and PyTorch's loss on it")
    a = ap.parse_args()

    default_cfg = (a.layers, a.d, a.heads, a.vocab, a.seq) == (12, 768, 12, 50304, 1024)
    name = a.name or ("gpt2-124m" if default_cfg else f"gpt2-L{a.layers}-d{a.d}-h{a.heads}-v{a.vocab}-t{a.seq}")
    os.makedirs(a.out, exist_ok=True)
    path = os.path.join(a.out, name + ".onnx")
    for p in (path, path + ".data"):
        if os.path.exists(p):
            os.remove(p)

    torch.manual_seed(0)  # as gpt2_torch.run
    model = GPT(vocab=a.vocab, ctx=a.seq, d=a.d, layers=a.layers, heads=a.heads).eval()
    nparams = sum(p.numel() for p in model.parameters())
    g = torch.Generator().manual_seed(1)
    hi = min(a.vocab, 50257)
    b = max(a.ref_batch, 2)
    x = torch.randint(0, hi, (b, a.seq), generator=g)
    y = torch.randint(0, hi, (b, a.seq), generator=g)

    t0 = time.time()
    if a.exporter == "ts":
        export_ts(model, (x, y), path)
    else:
        export_dyn(model, (x, y), path)
    t_export = time.time() - t0
    weights_to_one_file(path)

    m = onnx.load(path, load_external_data=False)
    inits = [(i.name, list(i.dims)) for i in m.graph.initializer]
    ops = {}
    for n in m.graph.node:
        ops[n.op_type] = ops.get(n.op_type, 0) + 1
    info = {"file": path, "exporter": a.exporter, "params": nparams,
            "config": dict(layers=a.layers, d=a.d, heads=a.heads, vocab=a.vocab, seq=a.seq),
            "onnx_bytes": os.path.getsize(path), "data_bytes": os.path.getsize(path + ".data"),
            "initializers": len(inits), "nodes": len(m.graph.node), "ops": dict(sorted(ops.items())),
            "export_s": round(t_export, 1)}

    if a.ref_batch:
        import numpy as np
        x, y = x[:a.ref_batch], y[:a.ref_batch]
        np.save(os.path.join(a.out, name + ".input_ids.npy"), x.numpy())
        np.save(os.path.join(a.out, name + ".labels.npy"), y.numpy())
        with torch.no_grad():
            loss32 = model(x, y).item()
            loss64 = GPT(vocab=a.vocab, ctx=a.seq, d=a.d, layers=a.layers, heads=a.heads)
            loss64.load_state_dict(model.state_dict())
            loss64 = loss64.double()(x, y).item()
        ref = dict(info, batch=a.ref_batch, loss_fp32=loss32, loss_fp64=loss64, torch=torch.__version__,
                   onnx=onnx.__version__)
        with open(os.path.join(a.out, name + ".ref.json"), "w") as f:
            json.dump(ref, f, indent=1)
        info["ref_loss_fp32"] = loss32
    print(json.dumps(info))


if __name__ == "__main__":
    main()
