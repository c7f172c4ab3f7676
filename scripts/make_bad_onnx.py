#!/usr/bin/env python3
"""Write the small binary ONNX models the importer's error tests read.

    python3 scripts/make_bad_onnx.py [--out test/frontends/onnx/Inputs]
                                     [--fuzz-out test/fuzz/regressions/onnx]

Each file is a few hundred bytes and committed; rerunning gives the same bytes.
  malformed.onnx         bytes that are not a ModelProto
  short_data.onnx        initializer 'W' with dims [4] but 8 bytes of raw_data
  external_escape.onnx   initializer 'W' whose external data location is
                         '../escape.bin' (outside the model's folder)
  external_ok.onnx       initializer 'W' in external_ok.bin next to it (the good case)
  external_ok.bin        its 16 bytes (4 floats)
  buffer_kind.onnx       Y = X * W + inv_freq + mask + rope + val_7 + rows, with the metadata torch's
                         dynamo exporter and onnxscript's optimizer write: the graph signature
                         (graph metadata: W, lin.weight, pe.weight PARAMETER, inv_freq BUFFER;
                         value_info InputSpec.kind: W PARAMETER, inv_freq BUFFER) and
                         value_info pkg.onnxscript.optimizer.folded_from: mask from two
                         intermediate values, rope from inv_freq, val_7 from lin.weight alone,
                         rows from pe.weight and an index; IR 10
  no_outputs.onnx        IR 10 (libonnx's checker does not read it): a graph without outputs
  dup_outputs.onnx       IR 10: graph output 'Y' listed twice
  extra_inputs.onnx      IR 10: Relu with two inputs (it takes one)
  external_nul.onnx      IR 10: external data location 'a\0b.bin'
  external_dupkey.onnx   IR 10: external data key 'location' given twice
  onehot_nan.onnx        OneHot with a NaN depth; range_inf.onnx: Range with an infinite limit
  merged_dedup.onnx      Y = Linear(X * a * b) as the dynamo exporter's optimizer leaves a fresh
                         model: b was deduplicated into a (equal values; the second Mul reads
                         'a' while its FX node names p_b), the Linear's Transpose(w) folded into
                         val_7 (folded_from ['w']) and its zero bias dropped with its Add (the
                         FX node names p_lin_bias, no ONNX node reads it); 'c' is in the
                         signature but no FX node names it (a tied weight); IR 10
Into --fuzz-out, the UBSan findings of issue 9 as fuzz_onnx regression inputs (the fuzzer's
own findings there are its bytes, not written here):
  slice_int64_min_step.onnx   Slice steps INT64_MIN and INT64_MAX (-step overflowed)
  empty_constant_concat.onnx  Concat of two int64 constants, one of them empty (memcpy from null)
  input_2e31_cubed.onnx       a graph input of shape [2^31, 2^31, 2^31] (the element count overflows)
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
    ap.add_argument("--fuzz-out",
                    default=os.path.join(here, "..", "test", "fuzz", "regressions", "onnx"))
    args = ap.parse_args()
    out = args.out
    os.makedirs(out, exist_ok=True)
    fuzz_regressions(args.fuzz_out)

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

    save("buffer_kind.onnx", buffer_kind_model())
    save("merged_dedup.onnx", merged_dedup_model())

    x = helper.make_tensor_value_info("X", TensorProto.FLOAT, [4])
    y = helper.make_tensor_value_info("Y", TensorProto.FLOAT, [4])
    relu = helper.make_node("Relu", ["X"], ["Y"], name="relu")
    save("no_outputs.onnx", model(helper.make_graph([relu], "g", [x], []), ir=10))
    idx = helper.make_tensor_value_info("idx", TensorProto.INT64, [3])
    oh = helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 4])
    save("onehot_nan.onnx", model(helper.make_graph(
        [helper.make_node("OneHot", ["idx", "depth", "values"], ["y"], name="y")], "g", [idx], [oh],
        initializer=[helper.make_tensor("depth", TensorProto.FLOAT, [], [float("nan")]),
                     helper.make_tensor("values", TensorProto.FLOAT, [2], [0.0, 1.0])])))
    r = helper.make_tensor_value_info("r", TensorProto.FLOAT, [1])
    save("range_inf.onnx", model(helper.make_graph(
        [helper.make_node("Range", ["s", "l", "d"], ["r"], name="r")], "g", [], [r],
        initializer=[helper.make_tensor(n, TensorProto.FLOAT, [], [v]) for n, v in
                     (("s", 0.0), ("l", float("inf")), ("d", 1.0))])))
    save("dup_outputs.onnx", model(helper.make_graph([relu], "g", [x], [y, y]), ir=10))
    relu2 = helper.make_node("Relu", ["X", "X"], ["Y"], name="relu")
    save("extra_inputs.onnx", model(helper.make_graph([relu2], "g", [x], [y]), ir=10))
    save("external_nul.onnx", model(add_graph(external("W", "a\0b.bin", 0, 16)), ir=10))
    dup = external("W", "external_ok.bin", 0, 16)
    e = dup.external_data.add()
    e.key, e.value = "location", "other.bin"
    save("external_dupkey.onnx", model(add_graph(dup), ir=10))


def fuzz_regressions(out):
    os.makedirs(out, exist_ok=True)

    def save(name, m):
        with open(os.path.join(out, name), "wb") as f:
            f.write(m.SerializeToString())

    i64 = lambda name, vals: helper.make_tensor(name, TensorProto.INT64, [len(vals)], vals)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [5])
    a = helper.make_tensor_value_info("a", TensorProto.FLOAT, [1])
    b = helper.make_tensor_value_info("b", TensorProto.FLOAT, [1])
    save("slice_int64_min_step.onnx", model(helper.make_graph(
        [helper.make_node("Slice", ["x", "s0", "e0", "ax", "neg"], ["a"], name="a"),
         helper.make_node("Slice", ["x", "s1", "e1", "ax", "pos"], ["b"], name="b")],
        "g", [x], [a, b],
        initializer=[i64("s0", [4]), i64("e0", [-2**63 + 1]), i64("ax", [0]), i64("neg", [-2**63]),
                     i64("s1", [1]), i64("e1", [2**63 - 1]), i64("pos", [2**63 - 1])])))

    c = helper.make_tensor_value_info("c", TensorProto.INT64, [2])
    save("empty_constant_concat.onnx", model(helper.make_graph(
        [helper.make_node("Concat", ["e", "f"], ["c"], name="c", axis=0)], "g", [], [c],
        initializer=[i64("e", []), i64("f", [1, 2])])))

    big = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2**31, 2**31, 2**31])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2**31, 2**31, 2**31])
    save("input_2e31_cubed.onnx", model(helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"], name="y")], "g", [big], [y])))


def buffer_kind_model():
    x = helper.make_tensor_value_info("X", TensorProto.FLOAT, [4])
    y = helper.make_tensor_value_info("Y", TensorProto.FLOAT, [4])
    inits = [helper.make_tensor(n, TensorProto.FLOAT, [4], v) for n, v in (
        ("W", [1.0, 2.0, 3.0, 4.0]), ("inv_freq", [1.0, 0.5, 0.25, 0.125]),
        ("mask", [0.0, 0.0, -1e9, -1e9]), ("rope", [1.0, 0.9, 0.8, 0.7]), ("val_7", [4.0, 3.0, 2.0, 1.0]),
        ("rows", [0.5, 0.5, 0.5, 0.25]))]
    nodes = [helper.make_node("Mul", ["X", "W"], ["xw"], name="mul"),
             helper.make_node("Sum", ["xw", "inv_freq", "mask", "rope", "val_7", "rows"], ["Y"], name="sum")]
    g = helper.make_graph(nodes, "g", [x], [y], initializer=inits)
    e = g.metadata_props.add()        # GraphProto.metadata_props: ONNX >= 1.16
    e.key = "pkg.torch.export.ExportedProgram.graph_signature"
    e.value = ("\n# inputs\np_W: PARAMETER target='W'\np_lin_weight: PARAMETER target='lin.weight'\n"
               "p_pe_weight: PARAMETER target='pe.weight'\n"
               "b_inv_freq: BUFFER target='inv_freq' persistent=False\nX: USER_INPUT\n\n# outputs\nY: USER_OUTPUT\n")
    meta = (("W", "pkg.torch.export.graph_signature.InputSpec.kind", "PARAMETER"),
            ("inv_freq", "pkg.torch.export.graph_signature.InputSpec.kind", "BUFFER"),
            ("mask", "pkg.onnxscript.optimizer.folded_from", "['arange', 'val_3']"),
            ("rope", "pkg.onnxscript.optimizer.folded_from", "['inv_freq']"),
            ("val_7", "pkg.onnxscript.optimizer.folded_from", "['lin.weight']"),
            ("rows", "pkg.onnxscript.optimizer.folded_from", "['arange', 'pe.weight', 'val_3']"))
    for name, key, value in meta:
        vi = helper.make_tensor_value_info(name, TensorProto.FLOAT, [4])
        e = vi.metadata_props.add()   # ValueInfoProto.metadata_props: ONNX >= 1.16
        e.key, e.value = key, value
        g.value_info.append(vi)
    return model(g, opset=18, ir=10)


def fx_node(node, name, target, args):
    """The dynamo exporter's per-node metadata: which FX node it comes from."""
    e = node.metadata_props.add()     # NodeProto.metadata_props: ONNX >= 1.16
    e.key = "pkg.torch.onnx.fx_node"
    e.value = (f"%{name} : [num_users=1] = call_function[target={target}](args = "
               f"({', '.join('%' + a for a in args)}), kwargs = {{}})")
    return node


def merged_dedup_model():
    x = helper.make_tensor_value_info("X", TensorProto.FLOAT, [2, 4])
    y = helper.make_tensor_value_info("Y", TensorProto.FLOAT, [2, 3])
    w = [[0.1 * (i + 1) + 0.01 * j for j in range(4)] for i in range(3)]   # w: [3, 4]
    wt = [w[i][j] for j in range(4) for i in range(3)]                    # val_7 = w^T: [4, 3]
    inits = [helper.make_tensor("a", TensorProto.FLOAT, [4], [1.0] * 4),
             helper.make_tensor("val_7", TensorProto.FLOAT, [4, 3], wt)]
    mul = "torch.ops.aten.mul.Tensor"
    nodes = [fx_node(helper.make_node("Mul", ["X", "a"], ["m1"], name="node_mul"), "mul", mul, ["x", "p_a"]),
             fx_node(helper.make_node("Mul", ["m1", "a"], ["m2"], name="node_mul_1"), "mul_1", mul,
                     ["mul", "p_b"]),
             fx_node(helper.make_node("MatMul", ["m2", "val_7"], ["Y"], name="node_linear"), "linear",
                     "torch.ops.aten.linear.default", ["mul_1", "p_w", "p_lin_bias"])]
    g = helper.make_graph(nodes, "g", [x], [y], initializer=inits)
    e = g.metadata_props.add()
    e.key = "pkg.torch.export.ExportedProgram.graph_signature"
    e.value = ("\n# inputs\np_a: PARAMETER target='a'\np_b: PARAMETER target='b'\n"
               "p_c: PARAMETER target='c'\np_w: PARAMETER target='w'\n"
               "p_lin_bias: PARAMETER target='lin.bias'\nx: USER_INPUT\n\n# outputs\nlinear: USER_OUTPUT\n")
    vi = helper.make_tensor_value_info("val_7", TensorProto.FLOAT, [4, 3])
    e = vi.metadata_props.add()
    e.key, e.value = "pkg.onnxscript.optimizer.folded_from", "['w']"
    g.value_info.append(vi)
    return model(g, opset=18, ir=10)


if __name__ == "__main__":
    main()
