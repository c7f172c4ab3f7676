#!/usr/bin/env python3
"""Checks tc-compile's JSON reports (lit tests; lit would rewrite some words
inside a -c one-liner).

    check_reports.py precision P.json     every op listed, counts consistent
    check_reports.py memory M.json B B1   the H200 fits; writes its largest batch to B, +1 to B1
    check_reports.py edge MB.json MB1.json   the plan at B fits, at B+1 not
"""
import json
import sys

mode = sys.argv[1]
if mode == "precision":
    r = json.load(open(sys.argv[2]))
    assert r["schema"] == "tc.metrics/1" and r["kind"] == "precision_report", r.get("schema")
    assert r["function"] == "train_step", r["function"]
    assert len(r["op_list"]) == r["ops"] == sum(k["count"] for k in r["by_kind"]) == sum(r["counts"].values())
    mm = [o for o in r["op_list"] if o["op"] == "tc.matmul" and o["node"]]
    assert mm and all(o["precision"] == "bf16" for o in mm)
    assert r["bf16_matmul_flops"] == r["matmul_flops"] > 0
    print("PRECISION-JSON-OK", mm[0]["node"])
elif mode == "memory":
    r = json.load(open(sys.argv[2]))
    c = r["cards"][0]
    assert r["schema"] == "tc.metrics/1" and r["kind"] == "memory_report", r.get("schema")
    assert r["unit"] == "bytes" and c["name"] == "NVIDIA H200" and c["fits"] and c["largest_batch"] > 2, c
    assert c["free_bytes"] == c["capacity_bytes"] - r["total"] - c["context_bytes"], c
    open(sys.argv[3], "w").write(str(c["largest_batch"]))
    open(sys.argv[4], "w").write(str(c["largest_batch"] + 1))
    print("MEMORY-JSON-OK")
elif mode == "edge":
    a = json.load(open(sys.argv[2]))["cards"][0]
    b = json.load(open(sys.argv[3]))["cards"][0]
    print("B", a["fits"], "B+1", b["fits"], "same answer", a["largest_batch"] == b["largest_batch"])
else:
    sys.exit(f"check_reports.py: unknown mode {mode}")
