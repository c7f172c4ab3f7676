"""Checks that the last metrics line's loss matches a fixture's PyTorch loss.

usage: check_loss.py METRICS.jsonl REF.json [fp32|fp64] [rtol]
"""
import json
import sys

metrics, ref_path = sys.argv[1], sys.argv[2]
precision = sys.argv[3] if len(sys.argv) > 3 else "fp32"
rtol = float(sys.argv[4]) if len(sys.argv) > 4 else 1e-4
ref = json.load(open(ref_path))
want = ref["loss_" + precision]
lines = [l for l in open(metrics).read().splitlines() if l.strip()]
got = json.loads(lines[-1])
assert got.get("schema") == "tc.metrics/1" and got.get("kind") == "eval", got
rel = abs(got["loss"] - want) / abs(want)
print(f"loss {got['loss']:.8f} want {want:.8f} rel {rel:.2e}")
if not rel <= rtol:
    print(f"MISMATCH: relative difference {rel:.3e} > {rtol}")
    sys.exit(1)
print("LOSS-OK")
