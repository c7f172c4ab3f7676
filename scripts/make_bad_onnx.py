#!/usr/bin/env python3
"""Write the small binary ONNX models the importer's error tests read.

    python3 scripts/make_bad_onnx.py [--out test/frontends/onnx/Inputs]

Each file is a few hundred bytes and committed; rerunning gives the same bytes.
  malformed.onnx         bytes that are not a ModelProto
  short_data.onnx        initializer 'W' with dims [4] but 8 bytes of raw_data
  external_escape.onnx   initializer 'W' whose external data location is
                         '../escape.bin' (outside the model's folder)
  external_ok.onnx       initializer 'W' in external_ok.bin next to it (the good case)
  external_ok.bin        its 16 bytes (4 floats)
"""
import argparse
import os
import struct

import onnx
from onnx import TensorProto, helper


def model(graph, opset=17, ir=8):
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = ir
    m.producer_name = "tc make_bad_onnx.py"
    return m


def add_graph(w):
    x = helper.make_tensor_value_info("X", TensorProto.FLOAT, [4])
    y = helper.make_tensor_value_info("Y", TensorProto.FLOAT, [4])
    node = helper.make_node("Add", ["X", "W"], ["Y"], name="add")
    return helper.make_graph([node], "g", [x], [y], initializer=[w])


def external(name, location, offset, length):
    w = TensorProto(name=name, data_type=TensorProto.FLOAT, dims=[4])
    w.data_location = TensorProto.EXTERNAL
    for k, v in (("location", location), ("offset", str(offset)), ("length", str(length))):
        e = w.external_data.add()
        e.key, e.value = k, v
    return w


def main():
    ap = argparse.ArgumentParser()
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--out", default=os.path.join(here, "..", "test", "frontends", "onnx", "Inputs"))
    out = ap.parse_args().out
    os.makedirs(out, exist_ok=True)

    def save(name, m):
        with open(os.path.join(out, name), "wb") as f:
            f.write(m.SerializeToString())

    with open(os.path.join(out, "malformed.onnx"), "wb") as f:
        f.write(b"\x08\x08\x12\xff\xff\xff\xff\x0fnot an onnx model\n")

    short = TensorProto(name="W", data_type=TensorProto.FLOAT, dims=[4],
                        raw_data=struct.pack("<2f", 1.0, 2.0))
    save("short_data.onnx", model(add_graph(short)))

    save("external_escape.onnx", model(add_graph(external("W", "../escape.bin", 0, 16))))

    save("external_ok.onnx", model(add_graph(external("W", "external_ok.bin", 0, 16))))
    with open(os.path.join(out, "external_ok.bin"), "wb") as f:
        f.write(struct.pack("<4f", 1.0, 2.0, 3.0, 4.0))


if __name__ == "__main__":
    main()
