#!/usr/bin/env python3
"""Exports the tiny GPT of this example to ONNX (examples/tiny-gpt/tiny-gpt.onnx).

The model is scripts/make_fixtures.py's GPT-2 module (HF GPT2LMHeadModel layout:
learned positions, pre-LN blocks, fused qkv, GELU(tanh), lm_head tied to wte)
at a trainable size: byte vocabulary (256), d_model 64, 2 layers, 4 heads,
context 64. GPT-2's initialisation (normal(0, 0.02), zero biases, unit
LayerNorm weights), seeded, so the file is reproducible. The export is
torch's dynamo exporter (opset 18, dynamic batch/seq) with optimize=False, one
file: every parameter is an initializer of its own under its torch name (the
checkpoints use them). Its optimizer (optimize=True) would merge the fresh
model's equal-valued biases and norm scales and drop its zero biases, and the
TorchScript exporter would alias them with Identity nodes: tc restores the
merged ones (frontends/onnx/MergedParameters.h), but a dropped bias cannot be
trained.

    python3 examples/tiny-gpt/make_model.py [--out examples/tiny-gpt/tiny-gpt.onnx]
"""
import argparse
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "scripts"))
import make_fixtures as mf  # noqa: E402
import onnx_export  # noqa: E402

# The tiny GPT's size (make_fixtures' classes read these module globals).
mf.D_MODEL = 64
mf.N_LAYER = 2
mf.N_HEAD = 4
mf.HEAD_DIM = mf.D_MODEL // mf.N_HEAD
mf.GPT2_N_POSITIONS = 64
mf.GPT2_MLP = 4 * mf.D_MODEL
SEED = 4242


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(HERE, "tiny-gpt.onnx"))
    args = ap.parse_args()
    torch.manual_seed(SEED)
    model = mf.GPT2LMHeadModel()
    g = torch.Generator().manual_seed(SEED)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() >= 2:
                p.copy_(torch.randn(p.shape, generator=g) * 0.02)
            elif name.endswith("bias"):
                p.zero_()
            else:
                p.fill_(1.0)
    model.eval()
    ids = torch.randint(0, 256, (2, 16), generator=g)
    prog, dynamic, note = onnx_export.export_dynamo(model, (ids, ids.clone()), max_batch=1024,
                                                    max_seq=mf.GPT2_N_POSITIONS)
    assert dynamic, note
    if os.path.exists(args.out):
        os.remove(args.out)
    prog.save(args.out, external_data=False)
    onnx_export.strip_host_paths(args.out)
    n = sum(p.numel() for p in model.parameters())
    print(f"wrote {args.out}: {n} parameters, {os.path.getsize(args.out)} bytes")


if __name__ == "__main__":
    main()
