#!/usr/bin/env python3
"""Prints, per F32 tensor of a .safetensors file, what its values look like:
`NAME zeros`, `NAME ones`, `NAME uniform A` (|x| <= A, spread like U(-A, A),
A rounded to 1 digit), `NAME normal STD` (std rounded to 1 digit) or
`NAME other`. Standard library only."""
import json
import math
import struct
import sys

data = open(sys.argv[1], "rb").read()
(n,) = struct.unpack("<Q", data[:8])
header = json.loads(data[8:8 + n])
body = data[8 + n:]
for name in sorted(k for k in header if k != "__metadata__"):
    info = header[name]
    if info["dtype"] != "F32":
        continue
    b, e = info["data_offsets"]
    v = struct.unpack("<%df" % ((e - b) // 4), body[b:e])
    short = name.split("transformer.")[-1]
    if all(x == 0 for x in v):
        print(short, "zeros")
    elif all(x == 1 for x in v):
        print(short, "ones")
    else:
        mean = sum(v) / len(v)
        std = math.sqrt(sum((x - mean) ** 2 for x in v) / len(v))
        top = max(abs(x) for x in v)
        # U(-A, A): std = A / sqrt(3), max close to A; a normal's max is ~3-4 std.
        if top <= 1.8 * std:
            print(short, "uniform", "%.1g" % (std * math.sqrt(3)))
        else:
            print(short, "normal", "%.1g" % std)
