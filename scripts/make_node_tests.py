#!/usr/bin/env python3
"""Writes the ONNX release's node tests as test folders for tc-conformance.

    python3 scripts/make_node_tests.py OUT_DIR

The onnx package (pinned by scripts/setup.sh: onnx 1.23.2, opsets up to 28) carries its node
tests as code (onnx.backend.test.case.node), not as files; this writes each case the way
libonnx-testdata stores Debian's ONNX 1.12 set: OUT_DIR/<test name>/model.onnx and
test_data_set_N/{input_J.pb, output_J.pb} (TensorProto; sequences and optionals as
SequenceProto / OptionalProto, which the runner skips). Idempotent: an OUT_DIR/.stamp naming the
onnx version makes a second run a no-op. Prints how many tests it wrote.
"""
import os
import shutil
import sys
import warnings


def main():
    out = sys.argv[1]
    import numpy as np
    import onnx
    from onnx import numpy_helper
    from onnx.backend.test.case import node

    stamp = os.path.join(out, ".stamp")
    if os.path.exists(stamp) and open(stamp).read() == onnx.__version__:
        print(f"{out}: onnx {onnx.__version__} node tests already written")
        return 0
    if os.path.exists(out):
        shutil.rmtree(out)
    os.makedirs(out)
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        cases = node.collect_testcases("")

    def proto(value, vi):
        t = vi.type
        if t.HasField("sequence_type"):
            return numpy_helper.from_list(value, vi.name)
        if t.HasField("optional_type"):
            return numpy_helper.from_optional(value, vi.name)
        if isinstance(value, onnx.TensorProto):
            return value
        return numpy_helper.from_array(np.asarray(value), vi.name)

    n = 0
    for case in cases:
        d = os.path.join(out, case.name)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "model.onnx"), "wb") as f:
            f.write(case.model.SerializeToString())
        g = case.model.graph
        for i, (inputs, outputs) in enumerate(case.data_sets):
            ds = os.path.join(d, f"test_data_set_{i}")
            os.makedirs(ds, exist_ok=True)
            for kind, values, infos in (("input", inputs, g.input), ("output", outputs, g.output)):
                for j, v in enumerate(values):
                    with open(os.path.join(ds, f"{kind}_{j}.pb"), "wb") as f:
                        f.write(proto(v, infos[j]).SerializeToString())
        n += 1
    with open(stamp, "w") as f:
        f.write(onnx.__version__)
    print(f"{out}: wrote {n} onnx {onnx.__version__} node tests")
    return 0


if __name__ == "__main__":
    sys.exit(main())
