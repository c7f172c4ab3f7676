#!/usr/bin/env python3
"""Checks the delayed-scaling state of tc-run checkpoints (lit tests):

    check_fp8_delayed.py FULL.safetensors STEPS HALF.safetensors HALF_STEPS

FULL after STEPS steps, HALF after HALF_STEPS of the same run, both fewer
than the history's length. For every operand: the history holds one
positive amax per step, newest first, zeros after them; FULL's older
entries are HALF's (the roll); the scale is fmax / max(history) in f32
(448 for E4M3 x / w, 57344 for E5M2 dy), bit for bit. Prints FP8-DELAYED-OK N with the number of operands."""
import json
import struct
import sys


def load(path):
    data = open(path, "rb").read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    out = {}
    for name, info in header.items():
        if name == "__metadata__" or info["dtype"] != "F32":
            continue
        b, e = info["data_offsets"]
        out[name] = list(struct.unpack("<%df" % ((e - b) // 4), data[8 + n + b:8 + n + e]))
    return out


def f32(x):
    """x rounded to f32 (a double quotient rounded once more is the
    correctly rounded f32 quotient: double has more than 2 x 24 + 2 bits)."""
    return struct.unpack("<f", struct.pack("<f", x))[0]


full, steps = load(sys.argv[1]), int(sys.argv[2])
half, half_steps = load(sys.argv[3]), int(sys.argv[4])
ids = [k[len("fp8_scale:"):] for k in full if k.startswith("fp8_scale:")]
assert ids, "no fp8_scale entries"
for i in ids:
    h, s = full["fp8_amax_history:" + i], full["fp8_scale:" + i][0]
    assert all(a > 0 for a in h[:steps]) and all(a == 0 for a in h[steps:]), (i, h)
    hh = half["fp8_amax_history:" + i]
    assert h[steps - half_steps:steps] == hh[:half_steps], (i, h, hh)
    fmax = 57344.0 if i.endswith(".dy") else 448.0
    expect = f32(fmax / max(h))
    assert s == expect, (i, s, expect)
print("FP8-DELAYED-OK", len(ids))
