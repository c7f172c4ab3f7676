"""edit_weight.py MODEL.onnx: flips one byte inside the external data of the
model's largest float initializer (a weight, not a constant), in place."""
import os
import sys

import onnx

model = onnx.load(sys.argv[1], load_external_data=False)
best = None
for t in model.graph.initializer:
    if t.data_location != onnx.TensorProto.EXTERNAL or t.data_type != onnx.TensorProto.FLOAT:
        continue
    info = {kv.key: kv.value for kv in t.external_data}
    if best is None or int(info["length"]) > int(best[2]):
        best = (info["location"], int(info.get("offset", 0)), int(info["length"]))
location, offset, length = best
path = os.path.join(os.path.dirname(sys.argv[1]), location)
with open(path, "r+b") as f:
    f.seek(offset + length // 2)
    b = f.read(1)
    f.seek(offset + length // 2)
    f.write(bytes([b[0] ^ 0x40]))
