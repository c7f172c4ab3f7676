#!/usr/bin/env python3
"""Checks --fp4-qat precision reports (lit tests):

    check_fp4.py report P.json N FORMAT [acts]
        the precision report of a train_step: N linear-layer matmuls in the
        forward, each reading a FORMAT fake-quantised weight (and with `acts`
        a fake-quantised activation, one per distinct activation), with the scaling, scale source and
        rounding of the format; no linear layer fell back to bf16.
    check_fp4.py grads P.json
        --fp4-qat-grads: the incoming gradients read through stochastically
        rounded fake quantizations (1x16 / 1x32 blocks), the wgrad
        activations through nearest-even ones, the step entry read.
"""
import json
import sys

mode = sys.argv[1]
if mode not in ("report", "grads"):
    sys.exit(f"check_fp4.py: unknown mode {mode}")
r = json.load(open(sys.argv[2]))
if mode == "grads":
    ops = r["op_list"]
    fq = [o for o in ops if o["op"] == "tc.fake_quantize"]
    sr = [o for o in fq if o["rounding"].startswith("stochastic")]
    assert sr and all("incoming gradient" in o["reason"] for o in sr), sr[:1]
    assert all(o["scaling"] in ("1x16 (e4m3) + tensor (fp32)", "1x32 (e8m0)") for o in sr), sr[:1]
    assert all("incoming gradient" not in o["reason"] for o in fq if o not in sr)
    xt = [o for o in fq if "activation (wgrad)" in o["reason"]]
    assert all(o["rounding"].startswith("nearest even") for o in xt), xt[:1]
    step = [o for o in ops if o["op"] == "tc.parameter" and "step of stochastic" in o["reason"]]
    assert len(step) == 1, step
    print("FP4-GRADS-OK", len(sr), "stochastic,", len(xt), "wgrad activations")
    sys.exit(0)
layers, fmt = int(sys.argv[3]), sys.argv[4]
acts = len(sys.argv) > 5 and sys.argv[5] == "acts"
assert r["schema"] == "tc.metrics/1" and r["kind"] == "precision_report", r.get("schema")
ops = r["op_list"]
mm = [o for o in ops if o["op"] == "tc.matmul" and o["precision"] == fmt]
assert len(mm) == layers, (len(mm), layers)
assert all("fp4 qat" in o["reason"] for o in mm), mm[:1]
fq = [o for o in ops if o["op"] == "tc.fake_quantize"]
assert all(o["precision"] == fmt and o["format"] == fmt for o in fq), fq[:1]
weights = [o for o in fq if "weight" in o["reason"]]
inputs = [o for o in fq if "activation" in o["reason"]]
assert len(weights) == layers, (len(weights), layers)
# Layers that read one activation (q, k, v; gate and up) share its copy (CSE).
assert (0 < len(inputs) <= layers) if acts else not inputs, len(inputs)
want = {"nvfp4": "16x16 (e4m3) + tensor (fp32)", "mxfp4": "1x32 (e8m0)"}[fmt]
assert all(o["scaling"] == want for o in weights), weights[:1]
if fmt == "nvfp4":
    assert all(o["scaling"] == "1x16 (e4m3) + tensor (fp32)" for o in inputs), inputs[:1]
assert all(o["scale_from"].startswith("current amax") for o in fq), fq[:1]
assert all(o["rounding"].startswith("nearest even, saturating (e2m1)") for o in fq), fq[:1]
fell = [o for o in ops if "fallback" in o["reason"]]
assert not fell, fell
kept = [o for o in ops if o["op"] == "tc.matmul" and "fp4-qat plan" in o["reason"]]
print("FP4-REPORT-OK", len(mm), fmt, "layers,", len(fq), "fake quantizations, kept:",
      sorted({o["reason"].split("fp4-qat plan: ")[1].split(" (")[0] for o in kept}))
