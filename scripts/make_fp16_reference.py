#!/usr/bin/env python3
"""PyTorch's fp16 mixed-precision trajectories of the gpt2 fixture, for tc-compile --fp16.

    python3 scripts/make_fp16_reference.py --out test/tools/Inputs/gpt2.fp16.ref.json

The gpt2 model of scripts/make_fixtures.py with the weights of test/fixtures/gpt2.ts.onnx (read
back from its initializers, so the start does not depend on torch's random generator), trained
on the fixture's fixed batch (gpt2.input_ids.npy, gpt2.labels.npy) as a torch user trains with
fp16: torch.autocast("cpu", dtype=torch.float16) around the forward, torch.amp.GradScaler around
the backward and the step (scale, backward, unscale_, step, update), AdamW with the fixtures'
settings (make_fixtures.ADAMW_CFG). Two runs:

  default   GradScaler's defaults (init_scale 2^16, growth_interval 2000), 8 steps
  overflow  init_scale 2^24, growth_interval 3, 16 steps: the first steps overflow in fp16 and
            are skipped, the scale halves on each and doubles after 3 clean steps

Per step: the loss of the forward before its update, the scale the step used (get_scale()
before update()), whether the step was skipped (the scale went down), and the global L2 norm of
the unscaled gradients (null when not finite). CPU only, a few seconds; deterministic for given
torch and numpy versions (recorded in the file).
"""

import argparse
import copy
import json
import math
import os
import sys

import numpy as np
import torch
from onnx import load, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_fixtures as mf  # noqa: E402

RUNS = {
    "default": {"init_scale": 2.0 ** 16, "growth_interval": 2000, "steps": 8},
    "overflow": {"init_scale": 2.0 ** 24, "growth_interval": 3, "steps": 16},
}


def fixture_model(fixtures):
    """The gpt2 torch model holding the weights of gpt2.ts.onnx (every initializer by its torch
    name; lm_head.weight is the tied transformer.wte.weight)."""
    model = mf.GPT2LMHeadModel()
    proto = load(os.path.join(fixtures, "gpt2.ts.onnx"))
    weights = {i.name: torch.from_numpy(numpy_helper.to_array(i).copy())
               for i in proto.graph.initializer}
    weights["lm_head.weight"] = weights["transformer.wte.weight"]
    model.load_state_dict(weights, strict=True)
    return model


def trajectory(model0, input_ids, labels, init_scale, growth_interval, steps):
    model = copy.deepcopy(model0)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), **mf.ADAMW_CFG)
    scaler = torch.amp.GradScaler("cpu", init_scale=init_scale, growth_interval=growth_interval)
    out = []
    for _ in range(steps):
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.float16):
            loss, _ = model(input_ids, labels)
        scale = scaler.get_scale()
        scaler.scale(loss).backward()
        scaler.unscale_(opt)
        norm = torch.linalg.vector_norm(
            torch.stack([torch.linalg.vector_norm(p.grad.float()) for p in model.parameters()])).item()
        scaler.step(opt)
        scaler.update()
        out.append({"loss": loss.item(), "loss_scale": scale, "skipped": scaler.get_scale() < scale,
                    "grad_norm": norm if math.isfinite(norm) else None})
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--fixtures", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                       "..", "test", "fixtures"))
    args = ap.parse_args()
    torch.manual_seed(0)
    model = fixture_model(args.fixtures)
    input_ids = torch.from_numpy(np.load(os.path.join(args.fixtures, "gpt2.input_ids.npy")))
    labels = torch.from_numpy(np.load(os.path.join(args.fixtures, "gpt2.labels.npy")))
    ref = {
        "description": "torch.autocast('cpu', float16) + torch.amp.GradScaler + AdamW trajectories "
                       "of the gpt2 fixture on its fixed batch (scripts/make_fp16_reference.py)",
        "versions": {"torch": torch.__version__, "numpy": np.__version__},
        "adamw": {k: list(v) if isinstance(v, tuple) else v for k, v in mf.ADAMW_CFG.items()},
        "runs": {name: dict(cfg, trajectory=trajectory(model, input_ids, labels, cfg["init_scale"],
                                                       cfg["growth_interval"], cfg["steps"]))
                 for name, cfg in RUNS.items()},
    }
    with open(args.out, "w") as f:
        json.dump(ref, f, indent=1)
        f.write("\n")
    for name, run in ref["runs"].items():
        skipped = [s["skipped"] for s in run["trajectory"]]
        print(f"{name}: {len(skipped)} steps, {sum(skipped)} skipped, loss "
              f"{run['trajectory'][0]['loss']:.6f} -> {run['trajectory'][-1]['loss']:.6f}")


if __name__ == "__main__":
    main()
