#!/usr/bin/env python3
"""Reads a .safetensors file the way safetensors.torch.load_file does, with
the standard library only, and prints `NAME DTYPE SHAPE` per tensor, then
SAFETENSORS-OK. Checks: header length, JSON, 8-byte aligned data start,
contiguous data_offsets covering the data exactly, byte sizes per dtype."""
import json
import struct
import sys

SIZES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1,
         "U8": 1, "BOOL": 1, "U16": 2, "U32": 4, "U64": 8, "F8_E4M3": 1, "F8_E5M2": 1}

data = open(sys.argv[1], "rb").read()
(n,) = struct.unpack("<Q", data[:8])
header = json.loads(data[8:8 + n])
assert (8 + n) % 8 == 0, "data does not start 8-byte aligned"
body = len(data) - 8 - n
spans = []
for name in sorted(k for k in header if k != "__metadata__"):
    info = header[name]
    count = 1
    for d in info["shape"]:
        count *= d
    b, e = info["data_offsets"]
    assert e - b == count * SIZES[info["dtype"]], name
    assert b % SIZES[info["dtype"]] == 0, name + " misaligned"
    spans.append((b, e))
    print(name, info["dtype"], "x".join(map(str, info["shape"])) or "scalar")
at = 0
for b, e in sorted(spans):
    assert b == at, "hole or overlap"
    at = e
assert at == body, "trailing bytes"
print("SAFETENSORS-OK")
