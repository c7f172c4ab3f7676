#!/usr/bin/env python3
"""Checks --fp8 results (lit tests):

    check_fp8.py report P.json N [S]  the precision report of a train_step:
                                      N linear layers, each with its fprop,
                                      dgrad and wgrad in FP8 (E4M3 operands,
                                      E5M2 gradients) of scaling S (tensor),
                                      none fell back
    check_fp8.py losses FP8.jsonl BF16.jsonl
                                      tc-run metrics: every FP8 loss finite,
                                      the last below the first, each within
                                      2e-2 relative of the bf16 run's
"""
import json
import math
import sys

mode = sys.argv[1]
if mode == "report":
    r = json.load(open(sys.argv[2]))
    layers = int(sys.argv[3])
    scaling = sys.argv[4] if len(sys.argv) > 4 else "tensor"
    assert r["schema"] == "tc.metrics/1" and r["kind"] == "precision_report", r.get("schema")
    ops = r["op_list"]
    assert len(ops) == r["ops"], (len(ops), r["ops"])
    fp8 = [o for o in ops if o["op"] == "tc.scaled_matmul"]
    roles = {}
    for o in fp8:
        assert o["precision"] == "fp8" and o["scaling"] == scaling, o
        role = o["reason"].split(":")[0].split()[-1]
        roles[role] = roles.get(role, 0) + 1
        fmt = "f8E5M2" if role in ("dgrad", "wgrad") else "f8E4M3FN"
        assert fmt in o["format"], o
    assert roles == {"fprop": layers, "dgrad": layers, "wgrad": layers}, roles
    fell = [o for o in ops if "fallback" in o["reason"] or "does not fold" in o["reason"]]
    assert not fell, fell
    quant = [o for o in ops if o["op"] == "tc.quantize"]
    assert quant and all(o["scale_from"].startswith("current amax") for o in quant), quant[:2]
    # x, W and g of each layer, shared by its three products (the residual
    # stream's x is one value for the layers that read it); block128's
    # wgrad quantizes x and g again in blocks along the rows (DeepSeek-V3's
    # and Transformer Engine's separate transposed quantization); mxfp8's
    # dgrad also quantizes W again (in 32x1 blocks, along dgrad's K).
    per_layer = {"block128": 5, "mxfp8": 6}.get(scaling, 3)
    assert len(quant) <= per_layer * layers, len(quant)
    kept = [o for o in ops if o["op"] == "tc.matmul" and "fp8 plan" in o["reason"]]
    assert r["fp8_matmul_flops"] > 0 and r["matmul_flops"] > r["fp8_matmul_flops"], r
    print("FP8-REPORT-OK", len(fp8), "fp8 products,", len(quant), "quantizations, kept:",
          sorted({o["reason"].split("fp8 plan: ")[1].split(" (")[0] for o in kept}))
elif mode == "losses":
    fp8 = [json.loads(x)["loss"] for x in open(sys.argv[2])]
    bf16 = [json.loads(x)["loss"] for x in open(sys.argv[3])]
    assert len(fp8) == len(bf16) >= 2, (fp8, bf16)
    assert all(math.isfinite(l) for l in fp8), fp8
    assert fp8[-1] < fp8[0], fp8
    rel = [abs(a - b) / abs(b) for a, b in zip(fp8, bf16)]
    assert max(rel) <= 2e-2, list(zip(fp8, bf16, rel))
    assert fp8 != bf16, "the FP8 run computed exactly the bf16 losses"
    print("FP8-LOSSES-OK", len(fp8), "steps, largest relative difference %.2e" % max(rel))
else:
    sys.exit(f"check_fp8.py: unknown mode {mode}")
