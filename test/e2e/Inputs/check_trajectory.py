#!/usr/bin/env python3
"""Compares tc-run's training metrics with a PyTorch reference trajectory.

    check_trajectory.py METRICS.jsonl REF.json [fp32:]sgd|adamw RTOL

REF.json's train_fp64[OPT]["losses"][i] (train_fp32 with "fp32:") is the loss of step i+1 (its forward,
before its update), as is tc-run's "loss" of step i+1. Prints one line per
step and TRAJECTORY-OK when every step is within RTOL (relative); exits 1
otherwise. Standard library only.
"""
import json
import math
import sys


def main():
    metrics, ref_path, opt, rtol = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
    key = "train_fp64"
    if opt.startswith("fp32:"):
        key, opt = "train_fp32", opt[5:]
    want = json.load(open(ref_path))[key][opt]["losses"]
    got = [json.loads(l) for l in open(metrics) if l.strip()]
    if len(got) != len(want):
        print(f"FAIL: {len(got)} steps in {metrics}, the reference has {len(want)}")
        return 1
    ok = True
    for i, (g, w) in enumerate(zip(got, want)):
        if g["step"] != i + 1:
            print(f"FAIL: line {i + 1} is step {g['step']}")
            return 1
        rel = abs(g["loss"] - w) / abs(w)
        good = math.isfinite(g["loss"]) and rel <= rtol
        ok &= good
        print(f"step {i + 1}: tc {g['loss']:.12f} torch {w:.12f} rel {rel:.2e} {'ok' if good else 'FAIL'}")
    print("TRAJECTORY-OK" if ok else "TRAJECTORY-FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
